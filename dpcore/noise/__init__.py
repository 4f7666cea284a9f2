"""Floating-point-safe noise from a cryptographically secure source (SPEC section 10).

Continuous samplers published at full precision leak: the low bits of ``x + Lap(b)`` drawn with
``numpy.random.Generator.laplace`` exclude neighbours with certainty (Mironov, "On significance of the
least significant bits for differential privacy", CCS 2012; Jin et al. 2022 for the Gaussian). Every
noisy value a release publishes therefore comes from this module:

* the statistic is rounded to a public power-of-two grid ``g`` (``rint(v / g)`` is exact for a power
  of two) and the noise is ``g`` times an integer drawn by an exact discrete sampler, the sum done in
  ``int64`` (:func:`laplace`, :func:`gaussian`). The float that is published, ``g * integer``, is a
  deterministic function of the integer release, i.e. post-processing;
* the integers come from exact samplers: the discrete Laplace of Canonne, Kamath & Steinke, "The
  Discrete Gaussian for Differential Privacy", NeurIPS 2020 (Algorithms 1-2, with an exact
  inverse-CDF table for the geometric part), and the discrete Gaussian by rejection from an exact
  alias-table proposal (their Algorithm 3 is kept as ``method="cks"``), vectorised with masked
  rejection rounds (:func:`discrete_laplace`, :func:`discrete_gaussian`);
* the random bits come from :class:`SecureBits` (a ChaCha20 keystream keyed by 256 bits of OS entropy,
  or ``os.urandom`` itself) unless a seed asks for an exploration preview (:class:`SeededBits`), on a
  stream separate from the one that draws published random matrices (:func:`noise_source`).

Rounding moves each coordinate by at most ``g / 2``, so between neighbours a rounded coordinate moves
by at most ``g`` more than the raw one: the L1 sensitivity used is ``S1 + n_changed * g`` and the L2
one ``S2 + sqrt(n_changed) * g`` (SPEC section 10), where ``n_changed`` counts the coordinates that
can differ between neighbours.
"""

from __future__ import annotations

# The package, by what each file does: bits.py (the random bits and exact uniforms), laplace.py and
# gaussian.py (the exact discrete samplers), streams.py (noise drawn in parallel blocks), grid.py
# (the mechanisms on a public grid, their calibration and slack). Every name below keeps its old
# import path, dpcore.noise.NAME.
from dpcore.noise.bits import (
    GAUSSIAN_GRID_BITS,
    GAUSSIAN_TAIL_K,
    MAX_GAUSSIAN_GRID_BITS,
    MAX_LAPLACE_T,
    MIN_GAUSSIAN_GRID_BITS,
    NOISE_SPAWN_KEY,
    ROUNDING_BITS,
    BitSource,
    DerivedBits,
    SecureBits,
    SeededBits,
    noise_source,
    stream_secret,
    uniform_below,
    uniform_open01,
)
from dpcore.noise.gaussian import (
    EXACT_TAIL_GAMMA,
    FLOAT_K,
    TABLE_BULK_K,
    _bernoulli_exp_exact,
    _gaussian_table,
    _table_trials,
    discrete_gaussian,
)
from dpcore.noise.grid import (
    _GRID_PIECE,
    GridNoise,
    NoiseDraw,
    _on_grid,
    calibrated_gaussian_plan,
    combine_slack,
    fixed_sigma_guarantee,
    gaussian,
    gaussian_grid,
    gaussian_mechanism,
    gaussian_plan,
    gaussian_slack,
    laplace,
    laplace_grid,
    laplace_plan,
    record_fields,
    reserve_slack,
    reserved_guarantee,
    slack_details,
    symmetric,
    symmetric_laplace,
    tail_k,
)
from dpcore.noise.laplace import (
    _decimal_prob,
    _fill,
    _floor_scaled,
    _geometric_parts,
    _LazyBernoullis,
    discrete_laplace,
)
from dpcore.noise.streams import NOISE_BLOCK, NoiseStream, noise_blocks

__all__ = [
    "BitSource",
    "DerivedBits",
    "GAUSSIAN_TAIL_K",
    "NOISE_BLOCK",
    "NoiseDraw",
    "NoiseStream",
    "SecureBits",
    "SeededBits",
    "combine_slack",
    "discrete_gaussian",
    "discrete_laplace",
    "gaussian",
    "gaussian_grid",
    "gaussian_mechanism",
    "gaussian_plan",
    "calibrated_gaussian_plan",
    "GridNoise",
    "laplace_plan",
    "gaussian_slack",
    "tail_k",
    "laplace",
    "laplace_grid",
    "noise_blocks",
    "noise_source",
    "record_fields",
    "reserve_slack",
    "reserved_guarantee",
    "fixed_sigma_guarantee",
    "slack_details",
    "stream_secret",
    "symmetric",
    "symmetric_laplace",
    "uniform_below",
    "uniform_open01",
]
# private names the tests reach (their home is the module named above)
_PRIVATE = (_GRID_PIECE, _LazyBernoullis, _bernoulli_exp_exact, _decimal_prob, _fill, _floor_scaled,
            _gaussian_table, _geometric_parts, _on_grid, _table_trials)
_CONSTANTS = (EXACT_TAIL_GAMMA, FLOAT_K, GAUSSIAN_GRID_BITS, MAX_GAUSSIAN_GRID_BITS, MAX_LAPLACE_T,
              MIN_GAUSSIAN_GRID_BITS, NOISE_SPAWN_KEY, ROUNDING_BITS, TABLE_BULK_K)
