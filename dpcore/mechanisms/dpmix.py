"""DPMix: noisy averages of ``ell`` randomly chosen rows (Lee, Kim, Lee, Suh, Ramchandran, ISIT 2019).

Each of the ``T`` released rows ("mixtures") is the mean of ``ell`` *distinct* rows chosen uniformly
at random (without replacement) plus white Gaussian noise (paper eq. 1, SPEC section 6)::

    (X'_t, Y'_t) = (X C_t + Q_t, Y C_t + R_t),   Q_t ~ N(0, sigma_X^2 I),  R_t ~ N(0, sigma_Y^2 I)

Units. Features are scaled to ``[0, 1]`` with the PUBLIC bounds, ``z = (x - lo)/(hi - lo)``, after
clipping (the paper's normalisation ``X in [0, 1]^{d_X}``); a constant column (``hi == lo``) becomes
0. The release is in these scaled units; :func:`to_original_units` maps it back
(``x = lo + z (hi - lo)``, post-processing). Labels: one-hot over the public class list
(classification, ``d_Y`` = number of classes), the label scaled to ``[0, 1]`` with the public label
bounds (regression, ``d_Y = 1``), or none (unsupervised, ``d_Y = 0``).

Privacy. Neighbouring relation: replace-one (``n`` public). Replacing one row moves one mixture that
contains it by ``(x - x')/ell`` and ``(y - y')/ell``, whose L2 norms are at most ``sqrt(d_X)/ell``
and ``sqrt(d_Y)/ell`` (entries in ``[0, 1]``): a Gaussian mechanism with
``D2 = d_X/sigma_X^2 + d_Y/sigma_Y^2`` and RDP ``alpha D2/(2 ell^2)`` (SPEC 6.1), amplified by
subsampling ``ell`` of ``n`` rows without replacement (Wang, Balle, Kasiviswanathan 2019), composed
over the ``T`` mixtures and converted to ``(epsilon, delta)``-DP (paper Theorem 1). All of this is in
:mod:`dpcore.accounting` (``dpmix_epsilon``, ``dpmix_calibrate_sigma``); ``bound="paper"`` is
Theorem 1 verbatim, ``bound="tight"`` (default) the tighter per-term bound and RDP conversion of
SPEC 6.1. The guarantee reported is the accountant's epsilon at the sigmas actually used.

Implementation. Vectorised and memory-bounded: mixtures are drawn in chunks of rows; each chunk's
index matrix (rows of ``ell`` distinct indices) is sampled by a vectorised Floyd algorithm (cost
``O(ell^2)`` per mixture, for small ``ell``) or by the ``ell`` smallest of ``n`` uniform keys
(``O(n)`` per mixture, for large ``ell``), and averaged by a dense gather-and-sum of the chosen
rows (cost ``O(chunk * ell * (d_X + d_Y))``) on worker threads while the calling thread draws the
chunk's noise. Integer-valued inputs with integer public bounds of width <= 255 (pixels, one-hot
labels) are gathered as ``uint8`` counts, summed exactly and scaled once: the same means from a
quarter of the bytes (the gather is bound by memory latency). Indices and noise come from two
independent child generators whose draws do not depend on the chunk size, so any chunking gives
the same release.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np

from dpcore import accounting
from dpcore import noise as dpnoise
from dpcore.calibration import delta_or_default
from dpcore.mechanisms import _mixing_kernels
from dpcore.mechanisms.base import Mechanism
from dpcore.noise import BitSource, GridNoise
from dpcore.preprocessing import PreparedInput, map_row_blocks, n_threads, row_blocks, scale_to_unit
from dpcore.release import Guarantee, NoiseRecord, Release
from dpcore.schema import EPSILON, Param
from dpcore.table import engine_of

__all__ = [
    "DPMix",
    "draw_mixtures",
    "mixture_means",
    "mixture_noise_plans",
    "sample_mixture_indices",
    "scale_to_unit",
    "to_original_units",
]

#: Working-set budget of one chunk, in array elements (~32 MB of float64).
CHUNK_ELEMENTS = 1 << 22
#: Bytes gathered at once by :func:`mixture_means` (a ``(m, ell, w)`` block of 0.5 MB, well inside
#: a core's L2 cache; on MNIST, 1-thread float32 mixing took 2.4 s with this size and 2.8-3.0 s
#: with blocks of 2-8 MB). Sized in bytes, so uint8 counts gather 4x more rows per NumPy call.
GATHER_BYTES = 1 << 19
#: Floyd's sampler costs ~ell^2/2 comparisons per mixture, uniform keys ~n draws plus a partition
#: (weighted by this factor); the cheaper one is used.
_KEYS_COST_FACTOR = 10

SOURCE_PAPER = ("Lee et al., DPMix, ISIT 2019, Thm 1 (eq. 3); Wang, Balle, Kasiviswanathan 2019 "
                "(subsampled RDP); Mironov 2017, Prop. 3 (RDP -> DP)")
SOURCE_TIGHT = ("Lee et al., DPMix, ISIT 2019, Thm 1 with Wang, Balle, Kasiviswanathan 2019, "
                "Thms 9 and 27 (per-term min); Canonne, Kamath, Steinke 2020, Prop. 12 (RDP -> DP)")


# ---------------------------------------------------------------------------------------- sampling
def _sampler_method(n: int, ell: int) -> str:
    """``"floyd"`` when ``ell^2/2`` comparisons are cheaper than ``n`` keys, else ``"keys"``."""
    return "floyd" if ell * ell <= 2 * _KEYS_COST_FACTOR * n else "keys"


def sample_mixture_indices(
    n: int, ell: int, size: int, rng: np.random.Generator, *, method: str | None = None
) -> np.ndarray:
    """Rows of ``ell`` distinct indices drawn uniformly from ``range(n)``, one row per mixture.

    Parameters
    ----------
    n : int
        Number of private rows.
    ell : int
        Mixture degree, ``1 <= ell <= n``.
    size : int
        Number of mixtures (rows of the result).
    rng : numpy.random.Generator
    method : {"floyd", "keys"}, optional
        ``"floyd"``: Floyd's algorithm vectorised over mixtures (a Python loop over the ``ell``
        positions, never over mixtures): at step ``j = n - ell + k`` draw ``t`` uniform on
        ``{0..j}`` and keep ``t``, or ``j`` if ``t`` was already chosen; cost ``O(size ell^2)``.
        ``"keys"``: the ``ell`` smallest of ``n`` i.i.d. uniform keys (``argpartition``); cost
        ``O(size n)``. Default: the cheaper for ``(n, ell)``. Both yield every ``ell``-subset with
        probability ``1/C(n, ell)`` and consume ``rng`` row by row (``size * ell`` or ``size * n``
        doubles in row-major order), so drawing ``a`` then ``b`` rows equals drawing ``a + b``.

    Returns
    -------
    ndarray of shape (size, ell), int64
        Each row holds ``ell`` distinct indices (in no particular order).

    Raises
    ------
    ValueError
        ``ell`` outside ``[1, n]`` or an unknown method.
    """
    if not (1 <= ell <= n):
        raise ValueError(f"ell must satisfy 1 <= ell <= n (n = {n} rows), got ell={ell}")
    method = method or _sampler_method(n, ell)
    if method == "keys":
        keys = rng.random((size, n))
        if ell == n:
            return np.argsort(keys, axis=1)
        return np.argpartition(keys, ell - 1, axis=1)[:, :ell].astype(np.int64, copy=False)
    if method != "floyd":
        raise ValueError(f"method must be 'floyd' or 'keys', got {method!r}")
    u = rng.random((size, ell))
    j = n - ell + np.arange(ell)
    # floor(u (j + 1)) is uniform on {0..j} up to float rounding (relative bias < 2^-52 n).
    out = np.minimum((u * (j + 1)).astype(np.int64), j)
    # A row whose draws t are all distinct keeps them (Floyd never replaces one); only the rows
    # with a repeat (about size ell^2 / 2n of them) go through the replacement step by step.
    ordered = np.sort(out, axis=1)
    repeats = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
    if repeats.size:
        t = out[repeats]
        for k in range(1, ell):
            seen = (t[:, :k] == t[:, k:k + 1]).any(axis=1)
            t[seen, k] = j[k]
        out[repeats] = t
    return out


def mixture_means(Z: np.ndarray, idx: np.ndarray, out: np.ndarray | None = None,
                  unit: np.ndarray | None = None) -> np.ndarray:
    """Mean of the rows ``Z[idx[t]]`` for every mixture ``t``: the paper's ``X C_t`` as rows.

    ``out[t] = (sum_i Z[idx[t, i]]) / ell``, summed in the order of ``idx[t]``, so the result of a
    mixture does not depend on how mixtures are grouped. With numba installed, a compiled kernel
    adds each row straight into one accumulator (:mod:`dpcore.mechanisms._mixing_kernels`: the rows
    are read once, 1.6-2x faster); otherwise a dense gather-and-sum over sub-blocks of mixtures (the
    gathered ``(m, ell, w)`` block stays in cache). Both give the same bits. Cost ``O(m ell w)``;
    memory: the result plus one block of about :data:`GATHER_BYTES` bytes.

    Parameters
    ----------
    Z : ndarray of shape (n, w)
        Float rows, or ``uint8`` counts with ``unit`` (see below).
    idx : ndarray of shape (m, ell), integer indices into the rows of ``Z``
    out : ndarray of shape (m, w), optional
        Written in place. Default: ``Z``'s dtype (float ``Z``) or float64 (counts).
    unit : ndarray of shape (w,), optional
        ``Z`` holds integer counts and row ``r`` stands for ``Z[r] * unit``: the counts are summed
        exactly in 16-bit (``ell <= 257``) or 32-bit integers, then scaled once by ``unit / ell``.
        A gathered row is then 1 byte per entry instead of 4 or 8, and the gather, which is bound
        by memory latency, runs 2.4x faster (MNIST pixels 0..255, one-hot labels).

    Returns
    -------
    ndarray of shape (m, w)
    """
    m, ell = idx.shape
    if out is None:
        out = np.empty((m, Z.shape[1]), dtype=Z.dtype if unit is None else np.float64)
    step = max(1, GATHER_BYTES // max(1, ell * Z.shape[1] * Z.itemsize))
    if unit is not None:
        acc = np.uint16 if ell * 255 <= np.iinfo(np.uint16).max else np.uint32
        factor = (np.asarray(unit, dtype=float) / ell).astype(out.dtype)
    fused = _mixing_kernels.kernels()
    if fused is not None and m and Z.flags.c_contiguous and (unit is not None or out.dtype == Z.dtype):
        # the same sums, each row added straight into one accumulator (the same bits)
        index = np.ascontiguousarray(idx, dtype=np.int64)
        if unit is None:  # summed in the rows' type, scaled by 1/ell in the output's
            factor, acc = np.full(Z.shape[1], 1.0 / ell, dtype=out.dtype), Z.dtype
        return fused.means(Z, index, out, factor, np.empty(Z.shape[1], dtype=acc))
    if unit is not None:
        counts = np.empty((min(step, m), Z.shape[1]), dtype=acc)
    for start in range(0, m, step):
        stop = min(m, start + step)
        # fancy indexing gathers whole rows (contiguous copies); the reduction over axis 1 adds
        # them one after another with SIMD over the w columns
        if unit is None:
            np.sum(Z[idx[start:stop]], axis=1, out=out[start:stop])
        else:
            c = counts[: stop - start]
            np.sum(Z[idx[start:stop]], axis=1, dtype=acc, out=c)
            np.multiply(c, factor, out=out[start:stop])
    if unit is None:
        out *= out.dtype.type(1.0 / ell)
    return out


def _chunk_rows(n: int, ell: int, width: int, method: str, chunk_rows: int | None) -> int:
    if chunk_rows is not None:
        return max(1, int(chunk_rows))
    per_row = max(width, 3 * ell, n if method == "keys" else 0, 1)
    return max(1, CHUNK_ELEMENTS // per_row)


def draw_mixtures(
    Z: np.ndarray,
    ell: int,
    n_mixtures: int,
    sigma: np.ndarray,
    rng: np.random.Generator,
    *,
    image_shape: tuple[int, int] | None = None,
    n_image_columns: int = 0,
    denoise: float = 0.0,
    chunk_rows: int | None = None,
    n_jobs: int | None = None,
    unit: np.ndarray | None = None,
    dtype: Any = None,
    return_indices: bool = False,
    plans: list[tuple[slice, GridNoise]] | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The DPMix core: ``n_mixtures`` means of ``ell`` distinct rows of ``Z`` plus Gaussian noise.

    Parameters
    ----------
    Z : ndarray of shape (n, w)
        Scaled features and encoded labels side by side (float64 or float32; the output has the
        same dtype), or their ``uint8`` counts with ``unit`` (:func:`mixture_means`).
    ell : int
        Mixture degree, ``1 <= ell <= n``.
    n_mixtures : int
        ``T >= 1``.
    sigma : ndarray of shape (w,)
        Noise standard deviation per column (``sigma_X`` for features, ``sigma_Y`` for labels).
    rng : numpy.random.Generator
        Two child generators are spawned from it: one for the indices, one for the noise bits of
        the default ``plans`` (seeded previews and tests).
    image_shape : (h, w), optional
        With ``denoise > 0``: the first ``n_image_columns`` columns are images of this shape.
    denoise : float
        Standard deviation (pixels) of the Gaussian filter applied to each noisy image
        (``scipy.ndimage.gaussian_filter`` with ``sigma=(0, s, s)``); 0 = off. Post-processing.
    chunk_rows : int, optional
        Mixtures per chunk (default: bounded by :data:`CHUNK_ELEMENTS`). Any value gives the same
        result.
    n_jobs : int, optional
        Threads that compute the mixtures (NumPy releases the GIL while gathering and summing);
        ``None``: the number of CPUs, at most 4; ``-1``: all CPUs. Indices and noise are drawn by
        the calling thread in a fixed order, so the result does not depend on ``n_jobs``.
    unit : ndarray of shape (w,), optional
        ``Z`` holds ``uint8`` counts standing for ``Z * unit`` (exact integer sums, then scaled).
    dtype : dtype, optional
        Output dtype; default ``Z``'s (float ``Z``) or float64 (counts).
    return_indices : bool
        Also return the ``(T, ell)`` index matrix. For tests only: the indices are secret and
        never part of a release.
    plans : list of (column slice, GridNoise), optional
        The grid Gaussian mechanisms of :mod:`dpcore.noise` per column group (each mixture's columns
        are rounded to the group's public grid and discrete Gaussian integers added). Default:
        :func:`mixture_noise_plans` of ``sigma`` with bits from the noise child of ``rng``.

    Returns
    -------
    ndarray of shape (n_mixtures, w) [, ndarray of shape (n_mixtures, ell)]
    """
    n, width = Z.shape
    method = _sampler_method(n, ell)
    idx_rng, noise_rng = rng.spawn(2)
    if plans is None:
        plans = mixture_noise_plans(np.asarray(sigma, dtype=float), ell, dpnoise.SeededBits(noise_rng))
    streams = [(sl, plan, _NoiseRows(plan, sl.stop - sl.start, n_mixtures)) for sl, plan in plans]
    drawn_idx: list[np.ndarray] = []

    def indices(m: int) -> np.ndarray:
        """The next ``m`` index sets (one stream, in order: the same sets whatever the chunking)."""
        idx = sample_mixture_indices(n, ell, m, idx_rng, method=method)
        if return_indices:
            drawn_idx.append(idx)
        return idx

    def noise(m: int) -> list[np.ndarray]:
        """The next ``m`` rows of integer noise of each column group (grid units), in their order."""
        return [rows_.take(m) for _, _, rows_ in streams]

    def finish(block: np.ndarray, drawn: list[np.ndarray]) -> np.ndarray:
        for (sl, plan, _), integers in zip(streams, drawn, strict=True):
            # rounded to the public grid in float64 whatever the dtype, integers added exactly
            plan.apply(block[:, sl], integers, out=block[:, sl])
        return _denoise(block, image_shape, n_image_columns, denoise)

    # the means of the rows at the index sets, on the engine of the rows (in memory: threads on
    # chunks of mixtures; on partitions: the index pairs grouped by the partition holding each row)
    out = engine_of(Z).mixtures(Z, n_mixtures, indices=indices, noise=noise, finish=finish,
                                means=mixture_means, unit=unit, dtype=dtype,
                                chunk_rows=_chunk_rows(n, ell, width, method, chunk_rows),
                                workers=n_threads(n_jobs))
    if return_indices:
        return out, (np.concatenate(drawn_idx) if drawn_idx else np.empty((0, ell), dtype=np.int64))
    return out


def _denoise(block: np.ndarray, image_shape: tuple[int, int] | None, n_image_columns: int | None,
             denoise: float) -> np.ndarray:
    """The paper's Gaussian denoising filter (post-processing), in place on the first
    ``n_image_columns`` columns of the noisy mixtures ``block`` (images of ``image_shape``)."""
    if denoise > 0 and image_shape is not None and n_image_columns:
        from scipy.ndimage import gaussian_filter  # here: scipy costs seconds at the app's first import

        imgs = block[:, :n_image_columns].reshape((-1, *image_shape))
        block[:, :n_image_columns] = gaussian_filter(
            imgs, sigma=(0, denoise, denoise)).reshape(len(block), -1)
    return block


class _NoiseRows:
    """Integer noise rows of one column group: the ``(n_rows, width)`` matrix of one
    :class:`~dpcore.noise.NoiseStream` (its blocks drawn on every core), taken row chunk by row
    chunk, so that the values do not depend on how the caller chunks the mixtures."""

    def __init__(self, plan: GridNoise, width: int, n_rows: int) -> None:
        self.width = width
        self.stream = plan.stream(n_rows * width)

    def take(self, m: int) -> np.ndarray:
        return self.stream.take(m * self.width).reshape(m, self.width)


def mixture_noise_plans(sigma: np.ndarray, ell: int, bits: BitSource, *, boundaries: tuple[int, ...] = (),
                        inflate: bool = False) -> list[tuple[slice, GridNoise]]:
    """Grid Gaussian mechanisms for the column groups of equal ``sigma``, also split at ``boundaries``
    (the features / labels border). ``inflate``: draw ``sigma (1 + g ell)``, so that the rounded
    query at that sigma is exactly as private as the raw one at ``sigma`` (for calibrated sigmas).

    Each coordinate of a mixture mean of rows in ``[0, 1]`` moves by at most ``1/ell`` when a row
    changes, so a group of ``w`` columns has L2 sensitivity ``sqrt(w)/ell``; the grid is
    :func:`dpcore.noise.gaussian_grid`'s for it (rounding inflates the sensitivity by the factor
    ``1 + g ell <= 1 + 2^-42``, which :meth:`DPMix._release` charges to the accountant).
    """
    plans = []
    start = 0
    cuts = {int(c) for c in np.flatnonzero(np.diff(sigma) != 0) + 1} | {b for b in boundaries if 0 < b}
    for stop in sorted(cuts | {len(sigma)}):
        s, w = float(sigma[start]), int(stop - start)
        if s > 0:
            s2 = math.sqrt(w) / ell
            g, _ = dpnoise.gaussian_grid(s2, w, s)
            s_used = s * (1 + g * ell) if inflate else s
            plans.append((slice(start, int(stop)),
                          dpnoise.gaussian_plan(s_used, grid=g, l2_sensitivity=s2, n_changed=w, bits=bits)))
        start = int(stop)
    return plans


def _mixture_bound(*, ell: int, n: int, T: int, tail: float = 1e-30) -> tuple[int, float]:
    """``(c*, P(c > c*))`` for the number ``c`` of mixtures that contain a given row.

    A row lies in each mixture independently with probability ``ell/n`` (uniform ``ell``-subsets),
    so ``c`` is Binomial(T, ell/n); ``c*`` is chosen so that ``P(c > c*) <= tail`` (added to delta,
    like the samplers' tails). On ``c <= c*`` at most ``c* w`` coordinates of a column group of
    width ``w`` differ between neighbours.
    """
    from scipy.stats import binom  # here: scipy.stats costs seconds at import (the app's first page)

    q = min(1.0, ell / n)
    c_star = min(int(binom.isf(tail, T, q)) + 1, T) if q < 1 else T
    return c_star, float(binom.sf(c_star, T, q)) if c_star < T else 0.0


def _mixture_slack(plans: list[tuple[slice, GridNoise]], c_star: int) -> list[GridNoise]:
    """The plans counting ``c*`` mixtures' coordinates (what :func:`~dpcore.noise.combine_slack` uses)."""
    return [dataclasses.replace(plan, n_changed=c_star * (sl.stop - sl.start)) for sl, plan in plans]




def _mixing_input(data: PreparedInput, labels01: np.ndarray, dtype: np.dtype
                  ) -> tuple[np.ndarray, np.ndarray | None]:
    """The rows to mix, ``[scale_to_unit(X), labels01]``, as ``(Z, unit)``.

    When every scaled value is ``k / width`` for an integer count ``0 <= k <= width <= 255``
    (integer-valued features with integer public bounds, e.g. pixels 0..255, and 0/1 labels),
    ``Z`` holds the counts as ``uint8`` and ``unit`` the per-column ``1/width`` (see
    :func:`mixture_means`): the same means, computed exactly, from a quarter of the bytes.
    Otherwise ``Z`` is the scaled rows in ``dtype`` and ``unit`` is None; values equal
    :func:`scale_to_unit`'s (``data.X`` is already clipped by ``prepare_input``). Filled block by
    block on threads, no full-size temporary.
    """
    n, d_x = data.X.shape
    engine = data.engine
    if not engine.in_memory:  # the compact layouts below need the whole table: a plain row map
        return engine.column_stack([engine.map_rows(partial(scale_to_unit, bounds=data.bounds), data.X, d_x),
                                    labels01]), None
    lo, hi = data.bounds[:, 0], data.bounds[:, 1]
    width = hi - lo
    constant = ~(width > 0)
    width_q = np.r_[width, np.ones(labels01.shape[1])]
    quantised = bool(np.all(lo == np.rint(lo)) and np.all(width_q == np.rint(width_q))
                     and np.all(width_q <= 255))
    if quantised:
        Zq = np.empty((n, width_q.size), dtype=np.uint8)

        def fill_counts(sl: slice) -> bool:
            blk = np.concatenate([data.X[sl] - lo, labels01[sl]], axis=1)
            Zq[sl] = blk  # counts 0..255 after clipping; exact iff blk holds integers
            return bool(np.array_equal(Zq[sl], blk))

        first = next(row_blocks(n, d_x))
        if fill_counts(first) and all(map_row_blocks(fill_counts, n, d_x)):
            unit = np.divide(1.0, width_q, out=np.zeros_like(width_q), where=width_q > 0)
            return Zq, unit
    Z = np.empty((n, d_x + labels01.shape[1]), dtype=dtype)

    def fill(sl: slice) -> None:
        blk = data.X[sl] - lo
        np.divide(blk, width, out=blk, where=~constant)
        blk[:, constant] = 0.0
        Z[sl, :d_x] = blk
        Z[sl, d_x:] = labels01[sl]

    map_row_blocks(fill, n, d_x)  # blocks are disjoint: threads write separate rows
    return Z, None


def to_original_units(release: Release, values: np.ndarray | None = None) -> np.ndarray:
    """Map DPMix features (scaled units) back to the original units: ``x = lo + z (hi - lo)``.

    Post-processing with the public bounds stored in ``release.transform_arrays``. Noise can carry
    values outside ``[lo, hi]``; they are not clipped.
    """
    lo, hi = release.transform_arrays["lo"], release.transform_arrays["hi"]
    z = np.asarray(release.data if values is None else values, dtype=float)
    return lo + z * (hi - lo)


def _encode_labels(data: PreparedInput) -> tuple[np.ndarray, list[str]]:
    """One-hot labels (classification), the label scaled to [0, 1] (regression) or nothing."""
    n = data.n_samples
    name = data.label_name or "label"
    if data.task == "unsupervised" or data.y is None:
        return np.zeros((n, 0)), []
    width = 1 if data.task == "regression" else data.classes.size  # type: ignore[union-attr]
    encode = partial(_encoded_block, task=data.task, width=width, label_bounds=data.label_bounds)
    encoded = data.engine.map_rows(encode, data.y, width)
    names = [name] if data.task == "regression" else [f"{name}={c}" for c in data.classes.tolist()]  # type: ignore[union-attr]
    return encoded, names


def _encoded_block(y: np.ndarray, task: str, width: int, label_bounds: Any) -> np.ndarray:
    """One-hot rows of class indices ``y`` (classification) or ``y`` scaled from its public bounds
    to [0, 1] (regression), shape ``(len(y), width)``."""
    if task == "classification":
        onehot = np.zeros((len(y), width))
        onehot[np.arange(len(y)), y] = 1.0
        return onehot
    return scale_to_unit(np.asarray(y, dtype=float)[:, None], np.array([label_bounds]))


# ---------------------------------------------------------------------------------------- mechanism
class DPMix(Mechanism):
    """DPMix: Gaussian-noised means of ``ell`` random distinct rows (replace-one, (epsilon, delta)-DP).

    Parameters
    ----------
    epsilon : float, default 10.0
        Target budget used to calibrate the noise when ``sigma_x`` is None (> 0; ``inf`` = zero
        noise, NOT PRIVATE). Ignored when ``sigma_x`` is given: epsilon is then computed.
    delta : float or None, default None
        In (0, 1). ``None`` means ``min(1e-5, n^(-3/2))``
        (:func:`~dpcore.calibration.default_delta`; ``n`` is public under replace-one). The paper
        uses ``1/n``, which is weak: a mechanism releasing one random row exactly meets it.
    ell : int, default 16
        Mixture degree: rows averaged per mixture, ``1 <= ell <= n`` (``ell = 1`` is Gaussian local
        perturbation of random rows). Larger ``ell`` needs less noise for the same epsilon but
        blurs the rows together.
    n_mixtures : int or None, default None
        Number ``T`` of released mixtures (``None``: ``n``, or ``n_samples`` of :meth:`release`).
        Epsilon grows with ``T`` (composition).
    sigma_x, sigma_y : float or None
        Explicit noise standard deviations (scaled units) of features and labels. ``sigma_x=None``
        calibrates both from ``epsilon``; ``sigma_y=None`` means ``sigma_ratio * sigma_x``. 0 means
        no noise (NOT PRIVATE).
    sigma_ratio : float, default 1.0
        ``sigma_y / sigma_x`` when ``sigma_y`` is not given.
    bound : {"tight", "paper"}, default "tight"
        RDP bound and conversion of the accountant (SPEC 6.1): ``"paper"`` reproduces Theorem 1
        exactly, ``"tight"`` is never larger. Both are valid guarantees.
    denoise : float, default 0
        Gaussian filter (pixels) applied to each released image after the noise (the paper's
        "DPMix + denoising"); post-processing, no privacy cost. Needs image data; 0 = off.
    dtype : {"float64", "float32"}, default "float64"
        Precision of the computation and the release (float32 halves memory for images).
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`.

    Notes
    -----
    Released table: ``T`` rows. Feature columns (the input's names) in ``[0, 1]``-scaled units plus
    noise; for classification the soft labels ``label=c`` (noisy mixed one-hot: what one trains
    on, :func:`dpcore.evaluation.train_on_release`) and ``label_argmax`` = their argmax class
    (post-processing; the majority class among the mixed rows, almost always the overall majority
    class for moderate ``ell``, so not a training label); for regression ``label`` in scaled units. The public
    bounds are released as the transform (``lo``, ``hi``).

    Raises
    ------
    ValueError
        ``ell > n``, ``n_mixtures != n_samples``, ``denoise > 0`` without an image shape, or an
        invalid parameter (named).
    """

    name = "dpmix"
    title = "DPMix (random mixtures + Gaussian noise)"
    summary = ("Releases noisy averages of ell randomly chosen distinct rows; mixing amplifies "
               "privacy, so less noise is needed as ell grows. Train models on the mixtures.")
    citation = ("K. Lee, H. Kim, K. Lee, C. Suh, K. Ramchandran, Synthesizing Differentially "
                "Private Datasets using Random Mixing, ISIT 2019")
    params = (
        Param("epsilon", "float", 10.0, EPSILON.help + " Ignored when sigma_x is given.",
              low=0.0, low_open=True, log=True, privacy=True, allow_inf=True),
        Param("delta", "float", None, "Failure probability of (epsilon, delta)-DP, in (0, 1); "
              "empty = min(1e-5, n^-1.5), well below 1/n (the paper used 1/n).", low=0.0, high=1.0,
              low_open=True, high_open=True, log=True, privacy=True, optional=True),
        Param("ell", "int", 16, "Mixture degree: number of distinct random rows averaged in each "
              "released row (1 <= ell <= n).", low=1, log=True, privacy=True),
        Param("n_mixtures", "int", None, "Number T of released mixtures (empty = n).", low=1,
              log=True, privacy=True, optional=True),
        Param("sigma_x", "float", None, "Feature noise std (scaled units); empty = calibrate "
              "from epsilon.", low=0.0, log=True, privacy=True, optional=True),
        Param("sigma_y", "float", None, "Label noise std (scaled units); empty = sigma_ratio * "
              "sigma_x.", low=0.0, log=True, privacy=True, optional=True),
        Param("sigma_ratio", "float", 1.0, "sigma_y / sigma_x when sigma_y is not given.",
              low=0.0, low_open=True, log=True, privacy=True),
        Param("bound", "choice", "tight", "RDP accountant: 'tight' (default) or 'paper' "
              "(Theorem 1 exactly).", choices=("tight", "paper"), privacy=True),
        Param("denoise", "float", 0.0, "Gaussian filter width (pixels) applied to released "
              "images (post-processing); 0 = off.", low=0.0, high=10.0),
        Param("dtype", "choice", "float64", "Precision of the release (float32 halves memory).",
              choices=("float64", "float32")),
    )
    neighbouring = "replace-one"
    guarantee_kind = "approx"
    space = "mixtures"
    capabilities = frozenset({"rdp", "images"})
    peak_row_copies = 6  # scaled rows Z, mixture blocks, noise blocks (measured)

    @classmethod
    def transform_from_arrays(cls, arrays: Mapping[str, np.ndarray], parameters: Mapping[str, Any]
                              ) -> Callable[[np.ndarray], np.ndarray]:
        """Clip to the public bounds and scale to ``[0, 1]`` (:func:`scale_to_unit`) from the saved
        ``lo`` and ``hi``."""
        bounds = np.column_stack([np.array(arrays["lo"], dtype=float), np.array(arrays["hi"], dtype=float)])
        return partial(scale_to_unit, bounds=bounds)

    def _release(
        self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator,
        n_samples: int | None, *, bits: BitSource,
    ) -> Release:
        n, d_x = data.X.shape
        ell = params["ell"]
        if ell > n:
            raise ValueError(f"ell must be <= n (the number of rows, {n}), got ell={ell}")
        T = _resolve_n_mixtures(params["n_mixtures"], n_samples, n)
        delta = delta_or_default(params["delta"], n)
        denoise = params["denoise"]
        image_hw = _image_hw(data.image_shape)
        if denoise > 0 and (image_hw is None or math.prod(image_hw) != d_x):
            raise ValueError("denoise > 0 needs grayscale image data (a dataset with a 2-D "
                             "image_shape whose pixels are the features); set denoise=0")
        labels01, label_cols = _encode_labels(data)
        d_y = labels01.shape[1]
        c_star, p_out = _mixture_bound(ell=ell, n=n, T=T)
        calibrated = params["sigma_x"] is None and math.isfinite(params["epsilon"])
        delta_ideal = delta
        if calibrated:  # the discrete Gaussian's slack is reserved from (epsilon, delta)
            eps_ideal, delta_ideal = dpnoise.reserve_slack(params["epsilon"], delta, c_star * (d_x + d_y))
            delta_ideal -= p_out * (1 + math.exp(min(params["epsilon"], 700.0)))
            acct = _account({**params, "epsilon": eps_ideal}, ell=ell, n=n, T=T, d_x=d_x, d_y=d_y,
                            delta=delta_ideal)
        else:
            acct = _account(params, ell=ell, n=n, T=T, d_x=d_x, d_y=d_y, delta=delta)

        dtype = np.dtype(params["dtype"])
        Z, unit = _mixing_input(data, labels01, dtype)
        sigma = np.concatenate([np.full(d_x, acct["sigma_x"]), np.full(d_y, acct["sigma_y"])])
        plans = mixture_noise_plans(sigma, ell, bits, boundaries=(d_x,), inflate=calibrated)
        mixed = draw_mixtures(Z, ell, T, sigma, rng, image_shape=image_hw, n_image_columns=d_x,
                              denoise=denoise, unit=unit, dtype=dtype, plans=plans)
        slack_plans: list[GridNoise] = []
        if math.isfinite(acct["epsilon"]):
            if not calibrated:
                # grid rounding: each coordinate moves by <= 1/ell + g: sigma_eff = sigma / (1 + g ell)
                eff = {sl.start: plan.scale / (1 + plan.grid * ell) for sl, plan in plans}
                res = accounting.dpmix_epsilon(
                    sigma_x=eff[0], sigma_y=eff[d_x] if d_y else None, ell=ell, n=n, n_mixtures=T,
                    d_x=d_x, d_y=d_y, delta=delta, bound=params["bound"])
                acct = {**acct, "epsilon_unrounded": acct["epsilon"], "epsilon": float(res.epsilon)}
            slack_plans = _mixture_slack(plans, c_star)
        else:
            p_out = 0.0
        values = mixed[:, :d_x]
        labels, label_columns = _release_labels(data, mixed[:, d_x:], label_cols)

        bound = params["bound"]
        eps_total, delta_total, slack = dpnoise.slack_details(slack_plans, acct["epsilon"], delta_ideal)
        if p_out:
            grow = 1 + math.exp(min(eps_total, 700.0))
            delta_total += p_out * grow
            slack.update(extra_delta=slack["extra_delta"] + p_out * grow, mixtures_bound_tail=p_out)
        if calibrated:  # within the nominal (epsilon, delta) by construction of the reserve
            slack["calibrated_at"] = {"epsilon": eps_ideal, "delta": delta_ideal}
            eps_total, delta_total = max(eps_total, params["epsilon"]), max(delta_total, delta)
        guarantee = Guarantee(epsilon=eps_total, delta=delta_total, neighbouring="replace-one",
                              kind="approx")
        details = _details(data, params, acct, ell=ell, n=n, T=T, d_y=d_y, delta=delta)
        details["noise_slack"] = slack
        records = _noise_records(data, acct, ell=ell, n=n, T=T, d_y=d_y, delta=delta, bound=bound)
        for rec, (_, plan) in zip(records, plans, strict=False):
            records[records.index(rec)] = dataclasses.replace(rec, **dpnoise.record_fields(plan))
        bounds = data.bounds.copy()
        public = {"lo": bounds[:, 0], "hi": bounds[:, 1]}  # public: released as the transform
        if data.label_bounds is not None:
            public["label_lo"] = np.array([data.label_bounds[0]])
            public["label_hi"] = np.array([data.label_bounds[1]])
        return self._new_release(
            data, params, values=values, columns=list(data.feature_names), guarantee=guarantee,
            noise=records,
            calibration=bound, n_samples=n_samples, labels=labels, label_columns=label_columns,
            details=details,
            transform_arrays=public,
        )


def _resolve_n_mixtures(n_mixtures: int | None, n_samples: int | None, n: int) -> int:
    if n_mixtures is not None and n_samples is not None and n_mixtures != n_samples:
        raise ValueError(f"n_mixtures={n_mixtures} and n_samples={n_samples} disagree; give one "
                         "(they are the same thing for DPMix)")
    return n_mixtures or n_samples or n


def _image_hw(shape: tuple[int, ...] | None) -> tuple[int, int] | None:
    if shape is None:
        return None
    dims = [s for s in shape if s != 1]
    return (dims[0], dims[1]) if len(dims) == 2 else None


def _account(params: dict[str, Any], *, ell: int, n: int, T: int, d_x: int, d_y: int,
             delta: float) -> dict[str, Any]:
    """The sigmas used and the epsilon the accountant guarantees for them.

    ``sigma_x`` given: epsilon = ``dpmix_epsilon`` at ``(sigma_x, sigma_y)``. Otherwise
    ``sigma_x = dpmix_calibrate_sigma(epsilon, ...)``, ``sigma_y = sigma_ratio * sigma_x``, and the
    reported epsilon is again ``dpmix_epsilon`` at those sigmas (<= the target). A zero sigma on a
    released block (or ``epsilon = inf``) gives epsilon = inf: NOT PRIVATE.
    """
    return dataclasses.asdict(accounting.dpmix_noise(
        epsilon=params["epsilon"], sigma_x=params["sigma_x"], sigma_y=params["sigma_y"],
        sigma_ratio=params["sigma_ratio"], ell=ell, n=n, n_mixtures=T, d_x=d_x, d_y=d_y,
        delta=delta, bound=params["bound"]))


def _noise_records(data: PreparedInput, acct: dict[str, Any], *, ell: int, n: int, T: int, d_y: int,
                   delta: float, bound: str) -> list[NoiseRecord]:
    """One record per noisy block (features, labels), with the L2 sensitivity of one mixture."""
    d_x = data.n_features
    formula = (f"per mixture: subsampled (q = ell/n = {ell}/{n}, without replacement) Gaussian, "
               "RDP_G(alpha) = alpha D2 / (2 ell^2), D2 = d_X/sigma_X^2 + d_Y/sigma_Y^2; "
               f"T = {T} mixtures composed; epsilon = min_alpha over integer orders "
               f"({bound} bound)")
    common = dict(distribution="gaussian", norm="L2", epsilon=acct["epsilon"], delta=delta,
                  source=SOURCE_TIGHT if bound == "tight" else SOURCE_PAPER)
    records = [NoiseRecord(
        statistic=f"each mixture's features (mean of ell = {ell} rows, d_X = {d_x}, scaled to [0, 1])",
        sensitivity=math.sqrt(d_x) / ell, scale=acct["sigma_x"], formula="S2 = sqrt(d_X)/ell; " + formula,
        **common,
    )]
    if d_y:
        kind = "one-hot" if data.task == "classification" else "scaled"
        records.append(NoiseRecord(
            statistic=f"each mixture's labels ({kind}, d_Y = {d_y})", sensitivity=math.sqrt(d_y) / ell,
            scale=acct["sigma_y"], formula="S2 = sqrt(d_Y)/ell (jointly accounted with the features)",
            **common,
        ))
    return records


def _details(data: PreparedInput, params: dict[str, Any], acct: dict[str, Any], *, ell: int, n: int,
             T: int, d_y: int, delta: float) -> dict[str, Any]:
    """Card facts: units, the sigmas and where they came from, alpha*, the class list."""
    details: dict[str, Any] = {
        "feature_units": "features scaled to [0, 1] by the public bounds, z = (x - lo)/(hi - lo) "
        "after clipping; original units x = lo + z (hi - lo) (post-processing, "
        "dpcore.mechanisms.dpmix.to_original_units)",
        "ell": ell, "n_mixtures": T, "n": n, "d_x": data.n_features, "d_y": d_y, "delta": delta,
        "delta_rule": "given" if params["delta"] is not None else "min(1e-5, n^-1.5)",
        "sigma_x": acct["sigma_x"], "sigma_y": acct["sigma_y"], "sigma_source": acct["sigma_source"],
        "bound": params["bound"], "alpha_star": acct["alpha"], "denoise": params["denoise"],
    }
    if acct["sigma_source"] == "given" and math.isfinite(params["epsilon"]):
        details["note"] = ("noise given explicitly (sigma_x): the epsilon parameter was ignored; "
                           "the guarantee is the accountant's epsilon at these sigmas")
    if data.task == "classification":
        assert data.classes is not None
        details["classes"] = data.classes.tolist()
        details["label_units"] = (
            "soft labels: mixed one-hot plus noise (may be negative or above 1), the columns to train "
            f"on; '{data.label_name or 'label'}_argmax' is their argmax, the most frequent class among "
            f"the ell = {ell} mixed rows (almost always the majority class for moderate ell: do not "
            "train on it)")
    elif data.task == "regression":
        details["label_units"] = (f"label scaled to [0, 1] by the public label bounds "
                                  f"{data.label_bounds}: y = lo + z (hi - lo)")
    return details


def _release_labels(data: PreparedInput, mixed_labels: np.ndarray,
                    names: list[str]) -> tuple[np.ndarray | None, list[str]]:
    """Soft label columns plus, for classification, their argmax class as ``<label>_argmax``.

    The soft labels (mixed one-hot plus noise) are what one trains on (:mod:`dpcore.evaluation`:
    ``training_set`` gives them with label kind ``soft``). The argmax column is named for what it
    is: the most frequent class among the ``ell`` mixed rows (plus noise), i.e. almost always the
    majority class once ``ell`` is moderate (issue 13), kept only as a display convenience.
    """
    if data.task == "unsupervised":
        return None, []
    if data.task == "regression":
        return mixed_labels[:, 0].astype(float), names
    assert data.classes is not None
    names = [*names, f"{data.label_name or 'label'}_argmax"]
    kind = float if data.classes.dtype.kind in "biuf" else object
    return engine_of(mixed_labels).map_rows(partial(_soft_and_hard, classes=data.classes), mixed_labels,
                                            mixed_labels.shape[1] + 1, dtype=kind), names


def _soft_and_hard(mixed_labels: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """The soft label columns and the argmax class (float, or object for text classes)."""
    hard = classes[np.argmax(mixed_labels, axis=1)]
    soft = mixed_labels.astype(float)
    if hard.dtype.kind in "biuf":
        labels = np.column_stack([soft, hard.astype(float)])
    else:
        labels = np.empty((len(soft), soft.shape[1] + 1), dtype=object)
        labels[:, :-1] = soft
        labels[:, -1] = hard
    return labels
