"""Gaussian generative models shared by RON-Gauss, PCA-Gauss and MODIPS.

Sampling synthetic rows from a (DP) mean and covariance, the symmetric noise added to a second
moment, the number of components ``p`` and the affine map of a regression label onto ``[-a, a]``
and back. Public post-processing and shape checks only: the noise scales are set by each
mechanism from its own sensitivities.

``noise="gaussian"`` variants share :class:`ZCDPBudget` (zCDP composition of the Gaussian
statistics of one release, Bun & Steinke 2016, converted once to (epsilon, delta) with Canonne,
Kamath & Steinke 2020) and :func:`second_moment_l2_sensitivity`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from dpcore import accounting, dask_engine
from dpcore import noise as dpnoise
from dpcore.calibration import EpsilonSplit
from dpcore.noise import BitSource, NoiseDraw
from dpcore.preprocessing import row_blocks
from dpcore.release import NoiseRecord
from dpcore.schema import Param

__all__ = [
    "GAUSSIAN_DELTA",
    "NOISE",
    "NOISE_CHOICES",
    "ZCDPBudget",
    "add_matrix_noise",
    "second_moment_l2_sensitivity",
    "zcdp_sigma",
    "check_n_components",
    "default_n_components",
    "gaussian_samples",
    "label_to_unit",
    "unit_to_label",
]


def default_n_components(n_features: int) -> int:
    """Default projection dimension ``p``: Meckes's DFM range ``p < 2 ln d / ln ln d``.

    RON-Gauss section 3.4 (after Meckes 2012): the projections are near Gaussian for
    ``p < 2 log(d)/log(log(d))`` (d = 100 -> p <= 13 in the paper's words; the formula gives 8).
    Returns the floor of that bound, clamped to ``[1, d - 1]``. Data-independent, so it costs no
    budget. Also used as PCA-Gauss's default.
    """
    d = int(n_features)
    if d <= 2:
        return 1
    loglog = math.log(math.log(d))
    bound = 2 * math.log(d) / loglog if loglog > 0 else float(d - 1)
    return int(max(1, min(d - 1, math.floor(bound))))


def check_n_components(value: int | None, n_features: int) -> int:
    """Validate ``n_components`` (p) against ``n_features`` (d): need ``1 <= p < d``.

    Raises
    ------
    ValueError
        Naming ``n_components`` when ``p >= d`` (dimension reduction is the point of both RON-Gauss
        and PCA-Gauss) or when the data have a single feature.
    """
    if n_features < 2:
        raise ValueError("n_components: the data need at least 2 features to be projected")
    p = default_n_components(n_features) if value is None else int(value)
    if not (1 <= p < n_features):
        raise ValueError(
            f"n_components must satisfy 1 <= n_components < n_features = {n_features}, got {p}"
        )
    return p


def gaussian_samples(
    mean: np.ndarray, cov: np.ndarray, size: int, rng: np.random.Generator
) -> np.ndarray:
    """``size`` draws of ``N(mean, cov)`` for a symmetric PSD ``cov`` (call :func:`psd_repair`
    first). Uses the eigendecomposition, so a singular ``cov`` is fine. Shape ``(size, k)``.

    Drawn block by block into the output (the same standard normals, in the same order, as one
    ``(size, k)`` draw), so the only large allocation is the result."""
    vals, vecs = np.linalg.eigh(cov)
    k = cov.shape[0]
    factor_t = (vecs * np.sqrt(np.clip(vals, 0.0, None))).T
    mean = np.asarray(mean, dtype=float)
    if dask_engine.output_rows() is not None:  # a release from a table larger than memory
        return dask_engine.gaussian_rows(factor_t, mean, size, rng)
    out = np.empty((size, k))
    for sl in row_blocks(size, k):
        np.matmul(rng.standard_normal((sl.stop - sl.start, k)), factor_t, out=out[sl])
    out += mean
    return out


def add_matrix_noise(
    M: np.ndarray, sensitivity: float, scale: float, bits: BitSource, *, full_matrix: bool = False,
    n_statistics_changed: int = 1,
) -> tuple[np.ndarray, NoiseDraw]:
    """``M`` (k x k) through the exact grid Laplace mechanism (:mod:`dpcore.noise`): on the upper
    triangle (diagonal included) and mirrored (default, SPEC section 1; ``n_changed = k(k+1)/2``), or
    on every entry (``full_matrix=True``; ``n_changed = k^2``); ``scale``: the calibrated ``S1/epsilon``
    (:func:`dpcore.noise.laplace_plan`); ``n_statistics_changed``: how many such matrices the
    sensitivity covers jointly can change (2 for per-class sums when a record may change class).
    A new array and the draw; ``scale = 0`` adds nothing."""
    k = M.shape[0]
    if full_matrix:
        draw = dpnoise.laplace(M, sensitivity, scale=scale, n_changed=n_statistics_changed * M.size,
                               bits=bits)
        return draw.values, draw
    return dpnoise.symmetric_laplace(M, sensitivity, scale=scale, bits=bits,
                                     n_changed=n_statistics_changed * k * (k + 1) // 2)


def label_to_unit(y: np.ndarray, label_bounds: tuple[float, float], a: float) -> np.ndarray:
    """Affine map of labels from their public ``[lo, hi]`` onto ``[-a, a]``."""
    lo, hi = label_bounds
    half = (hi - lo) / 2 if hi > lo else 1.0
    return a * (y - (lo + hi) / 2) / half


def unit_to_label(y: np.ndarray, label_bounds: tuple[float, float], a: float) -> np.ndarray:
    """Inverse of :func:`label_to_unit` (post-processing back to the label's units)."""
    lo, hi = label_bounds
    half = (hi - lo) / 2 if hi > lo else 1.0
    return (lo + hi) / 2 + (y if dask_engine.is_lazy(y) else np.asarray(y)) * half / a


NOISE_CHOICES = ("laplace", "gaussian")
ZCDP_SOURCE = "Bun & Steinke 2016 (zCDP of the Gaussian mechanism)"


#: the ``noise`` parameter of the mechanisms with a Gaussian variant
NOISE = Param("noise", "choice", "laplace", "Noise on the statistics: 'laplace' (the paper's pure "
                 "epsilon-DP, L1 sensitivities) or 'gaussian' ((epsilon, delta)-DP, L2 sensitivities "
                 "that grow far slower with p and d, composed in zCDP).", choices=NOISE_CHOICES,
                 privacy=True)

#: ``delta`` of the ``noise="gaussian"`` variants (empty: :func:`dpcore.calibration.default_delta`)
GAUSSIAN_DELTA = Param("delta", "float", None, "noise='gaussian' only: failure probability of (epsilon, "
                       "delta)-DP, in (0, 1); empty = min(1e-5, n^-1.5).", low=0.0, high=1.0, low_open=True,
                       high_open=True, log=True, privacy=True, optional=True)


def zcdp_sigma(l2_sensitivity: float, rho: float) -> float:
    """``sigma = S2/sqrt(2 rho)``: the Gaussian mechanism is ``S2^2/(2 sigma^2)``-zCDP (Bun &
    Steinke 2016, Prop. 1.6); ``rho = inf`` gives 0 (NOT PRIVATE)."""
    return 0.0 if math.isinf(rho) else l2_sensitivity / math.sqrt(2.0 * rho)


def second_moment_l2_sensitivity(norm2: float, norm4_power4: float | None = None) -> float:
    """L2 sensitivity of the upper triangle (diagonal once) of ``sum_i z_i z_i^T`` under replace-one,
    for rows with ``||z||_2^2 <= norm2`` and ``||z||_4^4 <= norm4_power4`` (default ``norm2^2``).

    The change is ``A = u u^T - v v^T``; its upper-triangle vector has squared norm
    ``T(A) = (||A||_F^2 + sum_i A_ii^2)/2`` with ``||A||_F^2 = ||u||^4 + ||v||^4 - 2 (u.v)^2 <=
    2 norm2^2`` and ``sum_i A_ii^2 = sum_i (u_i^2 - v_i^2)^2 <= ||u||_4^4 + ||v||_4^4 <= 2 norm4``
    (the cross terms are >= 0), so ``S2 = sqrt(norm2^2 + norm4)``. Rows of norm <= 1: ``sqrt(2)``
    (attained by two orthogonal unit rows). The same bound covers per-class sums when a record changes
    class (two sums change, by ``u u^T`` and ``-v v^T``: ``T <= (||u||^4 + ||u||_4^4 + ||v||^4 +
    ||v||_4^4)/2``). Divide by ``n`` for the mean.
    """
    n4 = norm2 * norm2 if norm4_power4 is None else min(float(norm4_power4), norm2 * norm2)
    return math.sqrt(norm2 * norm2 + n4)


@dataclass
class ZCDPBudget:
    """The Gaussian statistics of one ``noise="gaussian"`` release, composed in zCDP.

    ``rho`` splits the total ``rho`` (the largest whose (epsilon, delta) conversion,
    :func:`dpcore.accounting.zcdp_epsilon`, fits the budget after the discrete Gaussian sampler's
    slack is reserved, :func:`dpcore.noise.reserve_slack`) with the same fractions as ``split`` splits
    epsilon (the Laplace variant's shares, kept for the comparison in :attr:`savings`).
    """

    rho: EpsilonSplit
    split: EpsilonSplit
    bits: BitSource
    epsilon: float
    delta: float
    epsilon_ideal: float
    delta_ideal: float
    draws: list[dpnoise.GridNoise] = field(default_factory=list)
    #: per budget part: Laplace noise variance at the same epsilon share over the Gaussian one
    savings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def plan(cls, epsilon: float, delta: float, fractions: dict[str, float], n_coordinates: int,
             bits: BitSource) -> ZCDPBudget:
        """Reserve the sampler's slack for ``n_coordinates`` Gaussian coordinates that can change
        between neighbours (summed over every draw), then split ``rho`` by ``fractions``."""
        eps_i, delta_i = dpnoise.reserve_slack(epsilon, delta, n_coordinates)
        return cls(rho=EpsilonSplit.from_fractions(accounting.zcdp_rho(eps_i, delta_i), fractions),
                   split=EpsilonSplit.from_fractions(epsilon, fractions), bits=bits, epsilon=epsilon,
                   delta=delta, epsilon_ideal=eps_i, delta_ideal=delta_i)

    def add(self, values: np.ndarray, part: str, s2: float, n_changed: int, *, laplace_s1: float,
            statistic: str, formula: str, source: str, matrix: bool = False
            ) -> tuple[np.ndarray, NoiseRecord]:
        """``values`` (a vector, or a symmetric matrix with ``matrix=True``: noise on the upper
        triangle, mirrored) through the grid Gaussian mechanism of :mod:`dpcore.noise` with the zCDP
        share ``rho[part]``: ``sigma = S2'/sqrt(2 rho)`` at the rounding-inflated sensitivity ``S2'``,
        so the statistic costs exactly ``rho[part]``. Records the plan (sampler slack) and the noise
        variance saved against ``Lap(laplace_s1/eps_part)``."""
        rho = self.rho[part]
        plan = dpnoise.calibrated_gaussian_plan(s2, partial(zcdp_sigma, rho=rho), n_changed=n_changed,
                                                bits=self.bits)
        if matrix:
            noisy, _ = dpnoise.symmetric(values, plan)
        else:
            noisy = plan.add(np.asarray(values, dtype=float)).values
        self.draws.append(plan)
        eps_part = self.split[part]
        if plan.scale > 0 and math.isfinite(eps_part):
            self.savings[part] = 2.0 * (laplace_s1 / eps_part) ** 2 / plan.scale**2
        rec = NoiseRecord(
            statistic=statistic, sensitivity=s2, scale=plan.scale, distribution="gaussian", norm="L2",
            rho=rho, formula=f"{formula}; sigma = S2'/sqrt(2 rho_{part}) (zCDP share of the total rho)",
            source=f"{source}; {ZCDP_SOURCE}", **dpnoise.record_fields(plan),
        )
        return noisy, rec

    def guarantee(self, delta_given: bool) -> tuple[float, float, dict[str, Any]]:
        """``(epsilon, delta, details)`` of the release: the zCDP total converted once, with the
        sampler's slack (reserved beforehand, so the nominal budget is met)."""
        eps_ideal = accounting.zcdp_epsilon(math.fsum(self.rho.parts), self.delta_ideal)
        eps_g, delta_g, slack = dpnoise.reserved_guarantee(self.draws, self.epsilon, self.delta,
                                                            eps_ideal, self.delta_ideal)
        details = {
            "delta": self.delta,
            "delta_rule": "given" if delta_given else "min(1e-5, n^-1.5)",
            "rho_total": self.rho.total,
            "rho_parts": self.rho.as_dict(),
            "composition": "zCDP: rho_i = S2'^2/(2 sigma_i^2) summed (Bun & Steinke 2016), converted "
                           "once to (epsilon, delta) (Canonne, Kamath & Steinke 2020, Prop. 12; "
                           "dpcore.accounting.zcdp_epsilon)",
            "noise_slack": slack,
            "laplace_over_gaussian_variance": {
                "note": "per coordinate, Laplace (pure epsilon, same epsilon share, sound L1 "
                        "sensitivity) noise variance / Gaussian noise variance; > 1: Gaussian "
                        "adds less noise", **self.savings},
        }
        return eps_g, delta_g, details
