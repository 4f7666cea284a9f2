"""The public box: features clipped to their public bounds and mapped affinely onto ``[-a, a]``.

Shared by PCA-Gauss and the comparison baselines (identity-laplace, pca-identity, MODIPS,
rp-gaussian). Everything here is a public map or a sensitivity over the box; nothing draws noise.

* :func:`scale_to_box` and its streaming forms (:func:`box_moments`, :func:`box_project`): clip to
  the public bounds (``(d, 2)``) and map each feature onto ``[-a, a]`` (PCA-Gauss section VIII-B:
  the papers' experiments scale the data to ``[-1, 1]``). A public affine map costs no budget.
* :class:`BoxMap`: the sparsity-preserving form of the same map for tables with one-hot groups
  (numerics onto ``[-1, 1]``, one-hot columns onto ``[0, 1]``, each group's L1 norm capped at 1),
  whose rows have the public norm bound :func:`dpcore.preprocessing.row_norm_bound`
  (``sqrt(14)`` for an Adult row instead of ``sqrt(105)``). Without groups it is the plain box map.
* :func:`lap_pca_sensitivity`: L1 sensitivity of the second moment of rows in ``[-a, a]^d``
  (PCA-Gauss section VII, LapPCA; Prop. 3).
* :func:`box_l1_sensitivity`, :func:`box_l2_sensitivity`: sensitivity of a public linear map
  ``x -> x M`` when one row moves anywhere inside the box (derived in :func:`box_l1_sensitivity`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from dpcore.preprocessing import RowNormBound, row_blocks, row_norm_bound

__all__ = [
    "A_BOUND",
    "BOX",
    "BoxMap",
    "ENUMERATION_BUDGET",
    "box_gram",
    "box_l1_sensitivity",
    "box_l2_sensitivity",
    "box_moments",
    "box_project",
    "box_projection",
    "box_widths",
    "lap_pca_sensitivity",
    "row_second_moment_l1",
    "scale_to_box",
    "sign_vectors",
    "top_eigvecs",
]


A_BOUND = 1.0  # a: every feature (and regression label) is mapped onto [-a, a]


@dataclass(frozen=True)
class BoxMap:
    """The public map of a row: clip to ``bounds``, then ``z = (x - centre) * factor`` per column,
    then each one-hot group's sub-vector ``g`` scaled by ``1/max(1, ||g||_1)``.

    Numeric columns: ``centre = (lo + hi)/2``, ``factor = 2/(hi - lo)`` (onto ``[-1, 1]``).
    Columns of a one-hot group: ``centre = lo``, ``factor = 1/(hi - lo)`` (onto ``[0, 1]``: a zero
    stays a zero, so a group adds at most 1 to ``||z||^2``; the box map onto ``[-1, 1]`` would make
    a group's squared norm equal to its size). Constant columns map to 0. ``bound`` holds the
    public norm bounds of the output rows (proofs in :func:`dpcore.preprocessing.row_norm_bound`);
    ``groups=()`` gives :func:`scale_to_box` exactly.
    """

    bounds: np.ndarray
    centre: np.ndarray
    factor: np.ndarray
    groups: tuple[np.ndarray, ...]
    bound: RowNormBound

    @classmethod
    def from_bounds(cls, bounds: np.ndarray, groups: tuple[np.ndarray, ...] = ()) -> BoxMap:
        b = np.asarray(bounds, dtype=float)
        lo, hi = b[:, 0], b[:, 1]
        width = hi - lo
        safe = np.where(width > 0, width, 1.0)
        centre, factor = (lo + hi) / 2, np.where(width > 0, 2 * A_BOUND / safe, 0.0)
        for g in groups:
            centre[g], factor[g] = lo[g], np.where(width[g] > 0, 1.0 / safe[g], 0.0)
        return cls(bounds=b, centre=centre, factor=factor, groups=tuple(groups),
                   bound=row_norm_bound(b, tuple(groups)))

    @classmethod
    def of(cls, data_or_bounds) -> BoxMap:
        """The map of a :class:`~dpcore.preprocessing.PreparedInput` (with its one-hot groups), of a
        bounds array (no groups), or the map itself."""
        if isinstance(data_or_bounds, BoxMap):
            return data_or_bounds
        if hasattr(data_or_bounds, "onehot_groups"):
            return cls.from_bounds(data_or_bounds.bounds, data_or_bounds.onehot_groups)
        return cls.from_bounds(data_or_bounds)

    def apply(self, block: np.ndarray, *, clip: bool = True, out: np.ndarray | None = None) -> np.ndarray:
        """The mapped rows of ``block`` (written into ``out`` if given, which may be ``block``)."""
        src = np.asarray(block, dtype=float)
        if clip:
            src = np.clip(src, self.bounds[:, 0], self.bounds[:, 1], out=out)
            out = src
        res = np.subtract(src, self.centre, out=out)
        np.multiply(res, self.factor, out=res)
        for g in self.groups:
            total = res[:, g].sum(axis=1)
            over = total > 1.0
            if over.any():
                res[np.ix_(np.flatnonzero(over), g)] /= total[over, None]
        return res


def scale_to_box(X: np.ndarray, bounds: np.ndarray | BoxMap, a: float = A_BOUND) -> np.ndarray:
    """Clip to the public ``bounds`` (d, 2) and map each feature affinely onto ``[-a, a]``
    (a feature with zero width maps to 0). A :class:`BoxMap` applies its own map (``a = 1``)."""
    if isinstance(bounds, BoxMap):
        return bounds.apply(X)
    lo, hi = bounds[:, 0], bounds[:, 1]
    width = hi - lo
    X = np.clip(np.asarray(X, dtype=float), lo, hi)
    return np.where(width > 0, a * (2 * (X - lo) / np.where(width > 0, width, 1.0) - 1), 0.0)


def _box_blocks(X: np.ndarray, bounds: np.ndarray | BoxMap, rows: np.ndarray | None = None, *,
                clip: bool = True):
    """Yield ``(positions, block)``: the mapped rows of ``X[rows]`` (all rows if ``None``) — a
    :class:`BoxMap`, or for a bounds array :func:`scale_to_box` with ``a = 1`` (the same arithmetic,
    ``(x - centre) * factor``) — one block of rows at a time, written into one reusable buffer
    (consume each block before the next). ``clip=False`` skips the clipping when ``X`` is already
    clipped to the bounds."""
    bmap = BoxMap.of(bounds)
    n, d = X.shape[0] if rows is None else rows.size, X.shape[1]
    buf = None
    for sl in row_blocks(n, d):
        if buf is None:
            buf = np.empty((sl.stop - sl.start, d))
        out = buf[: sl.stop - sl.start]
        src = X[sl] if rows is None else np.take(X, rows[sl], axis=0, out=out)
        yield sl, bmap.apply(src, clip=clip, out=out)


def box_gram(X: np.ndarray, bounds: np.ndarray | BoxMap, rows: np.ndarray | None = None, *,
             clip: bool = True) -> np.ndarray:
    """``Xs^T Xs`` for ``Xs = scale_to_box(X[rows], bounds)``, accumulated over blocks of rows
    (no scaled copy of ``X``). ``(d, d)``, symmetric."""
    return box_moments(X, bounds, rows, clip=clip)[0]


def box_moments(X: np.ndarray, bounds: np.ndarray | BoxMap, rows: np.ndarray | None = None,
                v: np.ndarray | None = None, *, clip: bool = True, sums: bool = False
                ) -> tuple[np.ndarray, ...]:
    """``(Xs^T Xs, Xs^T v)`` for ``Xs = scale_to_box(X[rows], bounds)`` in one streaming pass;
    ``v`` (one value per selected row) defaults to ones, giving the column sums. ``sums``: also the
    column sums ``Xs^T 1`` as a third item (with ``v`` given), in the same pass."""
    d = X.shape[1]
    G, s, t = np.zeros((d, d)), np.zeros(d), np.zeros(d)
    for sl, T in _box_blocks(X, bounds, rows, clip=clip):
        G += T.T @ T
        s += T.sum(axis=0) if v is None else v[sl] @ T
        if sums:
            t += T.sum(axis=0)
    return (G, s, t) if sums else (G, s)


def box_project(X: np.ndarray, bounds: np.ndarray | BoxMap, W: np.ndarray, rows: np.ndarray | None = None,
                *, clip: bool = True) -> np.ndarray:
    """``scale_to_box(X[rows], bounds) @ W``, block by block (no scaled copy of ``X``)."""
    n = X.shape[0] if rows is None else rows.size
    out = np.empty((n, W.shape[1]))
    for sl, T in _box_blocks(X, bounds, rows, clip=clip):
        np.matmul(T, W, out=out[sl])
    return out


def top_eigvecs(S: np.ndarray, p: int) -> np.ndarray:
    """Top-``p`` eigenvectors (columns) of the symmetric part of ``S``, by decreasing eigenvalue."""
    vals, vecs = np.linalg.eigh((S + S.T) / 2)
    return vecs[:, np.argsort(vals)[::-1][:p]]


def lap_pca_sensitivity(d: int, n_rows: int, a: float = A_BOUND, calibration: str = "tight",
                        bound: RowNormBound | None = None) -> float:
    """L1 sensitivity of ``(1/n) X^T X``, entries in ``[-a, a]`` (LapPCA, paper section VII).

    ``"paper"``: ``d^2 a^2/n`` (Prop. 3, tight for the full matrix). ``"tight"``: upper triangle
    ``d(d+1) a^2/(2n)`` (off-diagonal changes ``<= 2a^2`` counted once, diagonal ``<= a^2``), or,
    given the rows' public ``bound`` (``a = 1``, :class:`BoxMap`), the smaller
    :func:`row_second_moment_l1`.
    """
    s1 = d * d if calibration == "paper" else d * (d + 1) / 2
    if calibration != "paper" and bound is not None and a == A_BOUND:
        s1 = min(s1, row_second_moment_l1(bound))
    return s1 * a**2 / n_rows


def row_second_moment_l1(bound: RowNormBound) -> float:
    """Upper-triangle (diagonal once) L1 sensitivity of ``sum_i z_i z_i^T`` for rows of a
    :class:`BoxMap` (replace-one, ``A = z z^T - z' z'^T``, L1 norm ``(||A||_1 + sum_l |A_ll|)/2``).

    The smaller of two proven bounds. (i) ``||A||_1 <= ||z||_1^2 + ||z'||_1^2 <= 2 l1^2`` and
    ``sum_l |A_ll| <= ||z||^2 + ||z'||^2 <= 2 l2^2``: ``l1^2 + l2^2``. (ii) With ``u = (z + z')/2``,
    ``v = (z - z')/2``, ``A = 2 (u v^T + v u^T)`` and ``|u_l| + |v_l| = M_l = max(|z_l|, |z'_l|) <= 1``;
    for ``P = sum_l M_l <= max_pair_l1``: ``||A||_1 <= 4 ||u||_1 ||v||_1 <= P^2`` and
    ``|A_ll| = 4 |u_l v_l| <= M_l^2 <= M_l``, so ``(P^2 + P)/2``. Without one-hot groups (ii) is the
    box's ``k(k+1)/2`` (attained by ``z = 1``, ``z' = 0``); an Adult row: ``min(196 + 14, (484 + 22)/2)
    = 210`` instead of ``105 * 106/2 = 5565``. Bounds from :func:`dpcore.preprocessing.row_norm_bound`.
    """
    P = bound.max_pair_l1
    return min(bound.l1**2 + bound.l2**2, (P * P + P) / 2)


BOX = "features clipped to their public bounds and mapped onto [-1, 1] (width w_l = 2, 0 if constant)"


#: largest number of multiply-adds spent enumerating sign vectors in :func:`box_l1_sensitivity`
ENUMERATION_BUDGET = 1 << 28


def box_widths(bounds: np.ndarray) -> np.ndarray:
    """Widths ``w_l`` of the ``[-1, 1]``-scaled features: 2, or 0 for a constant column."""
    return np.where(bounds[:, 1] > bounds[:, 0], 2.0, 0.0)


def sign_vectors(k: int, chunk: int) -> Iterator[np.ndarray]:
    """The ``2^(k-1)`` sign vectors ``t in {-1,1}^k`` with ``t_1 = 1`` (``t`` and ``-t`` give the
    same norms), as ``(m, k)`` blocks of at most ``chunk`` rows."""
    total = 1 << (k - 1)
    bits = np.arange(k - 1)
    for start in range(0, total, chunk):
        idx = np.arange(start, min(total, start + chunk))
        T = np.ones((idx.size, k))
        T[:, 1:] = 1.0 - 2.0 * ((idx[:, None] >> bits) & 1)
        yield T


def _max_sign_l1(Mw: np.ndarray, chunk: int = 1 << 13) -> float:
    """``max_{t in {-1,1}^k} ||Mw t||_1`` over the ``2^(k-1)`` sign vectors with ``t_1 = 1``
    (vectorised over chunks of sign vectors)."""
    d, k = Mw.shape
    if k == 1:
        return float(np.abs(Mw).sum())
    return max(float(np.abs(Mw @ T.T).sum(axis=0).max()) for T in sign_vectors(k, chunk))


def box_l1_sensitivity(M: np.ndarray, widths: np.ndarray, budget: int = ENUMERATION_BUDGET
                       ) -> tuple[float, str]:
    """L1 sensitivity of ``x -> x M`` when ``x`` ranges over a box with side widths ``widths``.

    ``sup_{|v_l| <= w_l} ||v M||_1 = max_{t in {-1,1}^k} sum_l w_l |(M t)_l|`` (module docstring):
    exact by enumeration when ``2^(k-1) d k <= budget``; otherwise
    ``min(sum_l w_l ||M_l||_1, sqrt(k) sigma_max(M) ||w||_2)``, both proven upper bounds.

    Returns
    -------
    (float, str)
        The sensitivity and how it was obtained.
    """
    M = np.asarray(M, dtype=float)
    w = np.asarray(widths, dtype=float)
    d, k = M.shape
    Mw = M * w[:, None]
    if (1 << (k - 1)) * d * k <= budget:
        return _max_sign_l1(Mw), f"exact: max over 2^{k - 1} sign vectors t of sum_l w_l |(M t)_l|"
    triangle = float(np.abs(Mw).sum())
    spectral = math.sqrt(k) * float(np.linalg.norm(M, 2)) * float(np.linalg.norm(w))
    if triangle <= spectral:
        return triangle, "bound: sum_l w_l ||M_l||_1 (triangle inequality)"
    return spectral, "bound: sqrt(k) sigma_max(M) ||w||_2"


def box_l2_sensitivity(R: np.ndarray, widths: np.ndarray) -> tuple[float, float]:
    """L2 sensitivity of ``x -> x R`` over a box with side widths ``widths``.

    Returns ``(sound, spectral)``: ``spectral = sigma_max(R) ||w||_2`` (``||v R|| <= sigma_max ||v||``,
    the DPMix paper's ``sigma(R)`` in units where a row changes by at most 1) and
    ``sound = min(spectral, sum_l w_l ||R_l||_2)`` (also the triangle inequality; smaller for small
    ``k``). Both are proven upper bounds of ``sup_{|v_l| <= w_l} ||v R||_2``.
    """
    R = np.asarray(R, dtype=float)
    w = np.asarray(widths, dtype=float)
    spectral = float(np.linalg.norm(R, 2)) * float(np.linalg.norm(w))
    triangle = float(np.sum(w * np.linalg.norm(R, axis=1)))
    return min(spectral, triangle), spectral


def box_projection(X: np.ndarray, *, bounds: np.ndarray, center: np.ndarray, M: np.ndarray
                    ) -> np.ndarray:
    """Public transform of the projection baselines: ``(scale_to_box(clip(X)) - center) @ M``."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != bounds.shape[0]:
        raise ValueError(f"X must have shape (m, {bounds.shape[0]}), got {X.shape}")
    return (scale_to_box(X, bounds) - center) @ M
