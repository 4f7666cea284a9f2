"""Gaussian generative models shared by RON-Gauss, PCA-Gauss and MODIPS.

Sampling synthetic rows from a (DP) mean and covariance, the symmetric noise added to a second
moment, the number of components ``p`` and the affine map of a regression label onto ``[-a, a]``
and back. Public post-processing and shape checks only: the noise scales are set by each
mechanism from its own sensitivities.
"""

from __future__ import annotations

import math

import numpy as np

from dpcore import noise as dpnoise
from dpcore.noise import BitSource, NoiseDraw
from dpcore.preprocessing import row_blocks

__all__ = [
    "add_matrix_noise",
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
    return (lo + hi) / 2 + np.asarray(y) * half / a
