"""RON-Gauss's statistics and their sensitivities (Chanyaswad, Liu & Mittal, PoPETs 2019): the two
streaming passes over the rows (unit-normalised rows, their sum and norms; the projected, centred,
re-normalised rows and their moments), as kernels of the table protocol
(:class:`dpcore.table.TableEngine`) for all rows and per class, the public map of real rows into a
release (:func:`_ron_transform`), and the sensitivities the noise is calibrated to. The estimator,
its budget split and its noise records are in :mod:`dpcore.mechanisms.ron_gauss`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from dpcore.calibration import (
    EpsilonSplit,
    psd_repair,
)
from dpcore.mechanisms._gaussian_model import (
    add_matrix_noise,
    label_to_unit,
    second_moment_l2_sensitivity,
)
from dpcore.mechanisms._labels import (
    rows_by_class,
)
from dpcore.noise import BitSource, NoiseDraw
from dpcore.preprocessing import row_blocks
from dpcore.table import TableEngine

#: bytes of one block of rows when streaming over ``X``: small enough for the block and its
#: temporaries to stay in cache, large enough for an efficient matrix product per block
#: A row (or centred row) whose L2 norm is at most this public constant has no usable direction and
#: is mapped to the zero vector. It is a constant on purpose: a threshold that depended on the data
#: (e.g. relative to the largest row norm) would let one replaced row flip other rows between
#: "zero" and "unit vector" and move the mean far more than its sensitivity (issue 12, row 5).
ZERO_NORM = 1e-12

#: below this value of the expanded ``r^2 = 1 - 2 mu.x^ + ||mu||^2`` the centred norm is
#: recomputed from the row (the expansion's absolute error ~1e-15 would cost relative accuracy)
_R2_DIRECT = 1e-3


# ------------------------------------------------------------------------------------ primitives


def normalize_rows(X: np.ndarray) -> tuple[np.ndarray, int]:
    """Rows scaled to unit L2 norm; rows of norm 0 become the zero vector.

    "Zero" means a norm of at most :data:`ZERO_NORM` (a public constant, never a function of the
    data). Either way every output row has norm <= 1, which is all the sensitivities need.

    Returns
    -------
    (ndarray of shape (n, d), int)
        The normalised rows and the number of zero-norm rows (exploration diagnostic).
    """
    norms = np.linalg.norm(X, axis=1)
    zero = norms <= ZERO_NORM
    safe = np.where(zero, 1.0, norms)
    out = X / safe[:, None]
    out[zero] = 0.0
    return out, int(np.count_nonzero(zero))


@dataclass(frozen=True)
class _RowLoader:
    """Streams blocks of rows of ``X`` for the two passes, with the public feature scaling.

    The rows the algorithm sees are ``x_s = (x - lo)/width`` (:func:`scale_features`), optionally
    after clipping to ``clip`` (``(d, 2)`` public bounds; used by the transform of real rows).
    ``rows`` selects the rows (``None``: all, in order; else an index array, e.g. one class).

    The affine scaling is folded into the products where that is exact to rounding: a block ``T``
    of raw rows stands for ``x_s = T * iw - c`` (``iw = 1/width``, ``c = lo/width``), so
    ``x_s @ M = T @ (iw M) - c @ M`` and ``||x_s||^2 = ||T iw||^2 - 2 (T iw).c + ||c||^2``. The
    expansion cancels when ``|lo|`` is large against the width, so folding is used only when
    ``max |c| <= 4`` and without clipping (``fold`` is ``None`` otherwise: blocks are then scaled
    explicitly, two in-cache operations per entry); rows whose expanded norm lost more than three
    digits are recomputed from the scaled row. Blocks share one buffer: consume a block before
    asking for the next one.
    """

    X: np.ndarray
    rows: np.ndarray | None = None
    lo: np.ndarray | None = None
    width: np.ndarray | None = None
    clip: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return self.X.shape[0] if self.rows is None else self.rows.size

    @property
    def _scaled(self) -> bool:
        return self.lo is not None and not (np.all(self.lo == 0) and np.all(self.width == 1))

    @property
    def fold(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(iw, c)`` when blocks hold raw rows and ``x_s = T * iw - c``; ``None`` when blocks
        already hold the scaled rows ``x_s``."""
        if not self._scaled or self.clip is not None:
            return None
        iw = 1.0 / self.width
        c = self.lo * iw
        return (iw, c) if np.max(np.abs(c)) <= 4.0 else None

    def blocks(self):
        """Yield ``(positions, block)``: a slice of ``range(n_rows)`` and the rows (raw rows if
        :attr:`fold` is set, else the scaled rows; a view of ``X`` when nothing is to be done)."""
        d = self.X.shape[1]
        explicit = self._scaled and self.fold is None
        buf = None
        for sl in row_blocks(self.n_rows, d, itemsize=self.X.itemsize):
            if buf is None:
                buf = np.empty((sl.stop - sl.start, d), dtype=self.X.dtype)
            out = buf[: sl.stop - sl.start]
            if self.rows is None:
                src = self.X[sl]
            else:
                src = np.take(self.X, self.rows[sl], axis=0, out=out)
            if self.clip is not None:
                src = np.clip(src, self.clip[:, 0], self.clip[:, 1], out=out)
            if explicit:
                np.subtract(src, self.lo, out=out)
                src = np.divide(out, self.width, out=out)
            yield sl, src

    def take(self, positions: np.ndarray) -> np.ndarray:
        """The scaled rows ``x_s`` at ``positions`` (indices into ``range(n_rows)``); a copy."""
        idx = positions if self.rows is None else self.rows[positions]
        block = self.X[idx]
        if self.clip is not None:
            block = np.clip(block, self.clip[:, 0], self.clip[:, 1])
        return scale_features(block, self.lo, self.width) if self._scaled else block


def _unit_rows_pass(loader: _RowLoader) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Pass 1: row norms and the sum of the unit-normalised rows (:func:`normalize_rows` semantics).

    Returns ``(inv_norms, unit_sum, n_zero, direct)``: ``1/||x_s||`` per row (0 for a zero-norm
    row, i.e. a norm <= :data:`ZERO_NORM`), ``sum_i x_s,i/||x_s,i||``, the number of
    zero rows, and the positions of the rows the folded scaling would cancel on (computed from
    their scaled rows here, and again in pass 2).
    """
    n, d = loader.n_rows, loader.X.shape[1]
    fold = loader.fold
    iw, c = fold if fold is not None else (None, None)
    iw2 = None if iw is None else iw * iw
    uniform = iw2 is not None and bool(np.all(iw2 == iw2[0]))
    cc = 0.0 if c is None else float(c @ c)
    norms = np.empty(n)
    raw_sum, inv_sum, direct_sum = np.zeros(d), 0.0, np.zeros(d)
    direct: list[np.ndarray] = []
    for sl, T in loader.blocks():
        lost = None
        if iw2 is None:
            sq = np.einsum("ij,ij->i", T, T)
        elif uniform:
            sq = np.einsum("ij,ij->i", T, T) * iw2[0]  # ||T iw||^2
        else:
            sq = np.einsum("ij,ij,j->i", T, T, iw2)
        if cc > 0:
            size = sq + cc
            sq += cc - 2.0 * (T @ (iw * c))
            lost = np.flatnonzero(sq < 1e-3 * size)  # cancellation: recompute from the rows
            if lost.size:
                S = T[lost] * iw - c
                sq[lost] = np.einsum("ij,ij->i", S, S)
        nb = norms[sl]
        np.sqrt(np.maximum(sq, 0.0), out=nb)
        inv = np.divide(1.0, nb, out=np.zeros_like(nb), where=nb > ZERO_NORM)
        if lost is not None and lost.size:
            direct_sum += inv[lost] @ S
            direct.append(lost + sl.start)
            inv[lost] = 0.0
        raw_sum += inv @ T
        inv_sum += float(inv.sum())
    total = raw_sum if fold is None else raw_sum * iw - inv_sum * c + direct_sum
    zero = norms <= ZERO_NORM
    inv_norms = np.divide(1.0, norms, out=np.zeros(n), where=~zero)
    direct_rows = np.concatenate(direct) if direct else np.zeros(0, dtype=np.intp)
    return inv_norms, total, int(np.count_nonzero(zero)), direct_rows


def _projection_pass(
    loader: _RowLoader, inv_norms: np.ndarray, W: np.ndarray, mu: np.ndarray | None,
    direct: np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    """Pass 2: ``W^T`` of the normalised, centred (``- mu``), re-normalised rows, shape ``(n, p)``.

    The rows of :func:`_projected_blocks`, written into one array. ``mu=None``: no centring, the
    rows are ``W^T x_s/||x_s||``. Returns ``(Z, n_zero_after_centering)``, ``Z`` a
    Fortran-ordered ``(n, p)`` array: a centred row of norm <= :data:`ZERO_NORM` maps to
    0, and every row has norm <= 1. ``direct``: sorted positions of the rows to compute from their
    scaled values instead of the folded product (from pass 1).
    """
    Zt = np.empty((W.shape[1], loader.n_rows))
    n_zero = sum(zero for _, _, zero in _projected_blocks(loader, inv_norms, W, mu, direct, out=Zt))
    return Zt.T, n_zero


def _projected_blocks(
    loader: _RowLoader, inv_norms: np.ndarray, W: np.ndarray, mu: np.ndarray | None,
    direct: np.ndarray | None = None, out: np.ndarray | None = None,
) -> Iterator[tuple[slice, np.ndarray, int]]:
    """Pass 2, block by block: yields ``(positions, Ut, n_zero)``, ``Ut`` the projected rows of
    ``loader``'s block at ``positions`` transposed, ``(p, rows)``, and ``n_zero`` the rows zeroed
    after centring in it (:func:`_projection_pass` states what the rows are).

    One product ``[W, mu]^T x_s`` per block (module docstring), the rest on the block while it
    is in cache, in the transposed layout (long inner loops). ``Ut`` is ``out[:, positions]``
    (``out``: ``(p, n_rows)``), or a buffer reused for the next block: consume it before asking
    for the next one (the statistics of pass 2 are summed block by block, :func:`_projected_moments`,
    without a ``(n, p)`` array)."""
    p = W.shape[1]
    M = W if mu is None else np.column_stack([W, mu])
    fold = loader.fold
    Mf, offset = (M, None) if fold is None else (fold[0][:, None] * M, (fold[1] @ M)[:, None])
    direct = np.zeros(0, dtype=np.intp) if direct is None or fold is None else direct
    w_mu, mu2 = (None, 0.0) if mu is None else (W.T @ mu, float(mu @ mu))
    buffer = None
    for sl, T in loader.blocks():
        Bt = Mf.T @ T.T  # (p + 1, rows)
        if offset is not None:
            Bt -= offset
            lo, hi = np.searchsorted(direct, (sl.start, sl.stop))
            if hi > lo:
                Bt[:, direct[lo:hi] - sl.start] = M.T @ loader.take(direct[lo:hi]).T
        inv = inv_norms[sl]
        if out is not None:
            Ut = out[:, sl]
        else:
            if buffer is None:
                buffer = np.empty((p, sl.stop - sl.start))
            Ut = buffer[:, : sl.stop - sl.start]
        if mu is None:
            np.multiply(Bt, inv, out=Ut)
            yield sl, _cap_unit_norm(Ut), 0
            continue
        # z = (W^T x_s inv - W^T mu)/r with r^2 = ||x^||^2 - 2 mu.x^ + ||mu||^2, x^ = x_s inv
        r2 = (inv > 0) - 2.0 * Bt[p] * inv + mu2
        rb = np.sqrt(np.maximum(r2, 0.0))
        g = np.divide(1.0, rb, out=np.zeros_like(rb), where=rb > 0)
        with np.errstate(over="ignore", invalid="ignore"):
            np.multiply(Bt[:p], inv * g, out=Ut)
            Ut -= np.multiply.outer(w_mu, g)
        near = np.flatnonzero(r2 < _R2_DIRECT)
        if near.size:  # x^ close to mu: recompute from the rows, no cancellation
            rows = near + sl.start
            V = loader.take(rows) * inv_norms[rows, None] - mu
            rb[near] = np.sqrt(np.einsum("ij,ij->i", V, V))
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                Ut[:, near] = W.T @ V.T / rb[near]
        _cap_unit_norm(Ut)
        zero = np.flatnonzero(rb <= ZERO_NORM)
        Ut[:, zero] = 0.0
        yield sl, Ut, int(zero.size)


def _cap_unit_norm(Zt: np.ndarray) -> np.ndarray:
    """Scale the columns of ``Zt`` (projected rows, transposed) whose norm exceeds 1 back to
    norm 1, in place. Lemma 3's ``||x~|| <= 1`` holds mathematically; this removes rounding excess
    (and the overflow of a row about to be zeroed), so the sensitivity bounds hold exactly."""
    sq = np.einsum("ij,ij->j", Zt, Zt)
    over = np.flatnonzero(~(sq <= 1.0))
    if over.size:
        with np.errstate(invalid="ignore", over="ignore"):
            Zt[:, over] /= np.sqrt(sq[over])
    return Zt


def mean_sensitivity(n_features: int, n_rows: int) -> float:
    """L1 sensitivity ``2 sqrt(d)/n`` of the mean of ``n`` vectors of L2 norm <= 1 (RON-Gauss
    Lemma 2; replace-one: ``||x - x'||_1 <= sqrt(d) ||x - x'||_2 <= 2 sqrt(d)``)."""
    return 2.0 * math.sqrt(n_features) / n_rows


def ron_covariance_sensitivity(
    p: int, n_rows: int, calibration: str = "sound", label_bound: float | None = None,
    *, full_matrix: bool = False,
) -> float:
    """L1 sensitivity of ``(1/n) sum_i z_i z_i^T`` for RON-projected rows (SPEC section 2 table).

    Parameters
    ----------
    p : int
        Projection dimension; every projected row has ``||x~||_2 <= 1`` (Lemma 3), hence
        ``||x~||_1 <= sqrt(p)``.
    n_rows : int
        ``n`` (or the class size ``n_c`` in Alg. 5).
    calibration : {"sound", "published"}
        ``"sound"``: entrywise L1 norm of the change ``A = z z^T - z' z'^T``. Upper triangle
        (diagonal included), ``(||A||_1 + sum_i |A_ii|)/2`` (SPEC section 1): for Sigma,
        ``||x x^T||_1 = ||x||_1^2 <= p`` and the diagonal sum is ``<= ||x||^2 + ||x'||^2 <= 2``,
        so ``(p + 1)/n``; for the augmented ``z = [x~, y]``, ``|y| <= a``, the x-block gives
        ``p + 1``, the cross terms (counted once) ``2a sqrt(p)``, the ``y^2`` entry ``a^2``:
        ``(p + 1 + 2a sqrt(p) + a^2)/n``. Full matrix (``full_matrix=True``): ``2p/n`` and
        ``(2p + 4a sqrt(p) + a^2)/n``.
        ``"published"``: Lemma 4 ``2 sqrt(p)/n`` / Lemma 5 ``(2 sqrt(p) + 4a sqrt(p) + a^2)/n``
        (stated for the full matrix; they bound an induced norm, not the entrywise L1 norm).
    label_bound : float, optional
        ``a`` for the augmented matrix of Alg. 4; ``None`` for Sigma.
    full_matrix : bool
        Sound sensitivity of the full matrix (noise on every entry) instead of the upper triangle.
    """
    rp = math.sqrt(p)
    a = label_bound
    if calibration == "sound" and not full_matrix:
        s1 = p + 1.0 if a is None else p + 1.0 + 2 * a * rp + a**2
    elif calibration == "sound":
        s1 = 2.0 * p if a is None else 2.0 * p + 4 * a * rp + a**2
    elif calibration == "published":
        s1 = 2 * rp if a is None else 2 * rp + 4 * a * rp + a**2
    else:
        raise ValueError(f"calibration must be 'sound' or 'published', got {calibration!r}")
    return s1 / n_rows


def ron_covariance_l2_sensitivity(n_rows: int, label_bound: float | None = None) -> float:
    """L2 sensitivity of the upper triangle (diagonal once) of ``(1/n) sum_i z_i z_i^T``.

    Used by ``noise="gaussian"``. Replace-one changes the sum by ``A = u u^T - v v^T``, whose
    upper-triangle vector (each off-diagonal entry once) has squared norm
    ``T(A) = (||A||_F^2 + sum_i A_ii^2)/2``, with ``||A||_F^2 = ||u||^4 + ||v||^4 - 2 (u.v)^2
    <= ||u||^4 + ||v||^4`` and ``sum_i A_ii^2 = sum_i (u_i^2 - v_i^2)^2 <= ||u||_4^4 + ||v||_4^4``
    (the cross terms ``u_i^2 v_i^2`` are >= 0).

    * Sigma (Alg. 3, 5), projected rows ``||x~|| <= 1`` (Lemma 3): ``||u||_4^4 <= ||u||^4 <= 1``,
      so ``T(A) <= 2`` and ``S2 = sqrt(2)/n`` whatever p (attained by two orthogonal unit rows);
    * augmented ``z = [x~, y]`` (Alg. 4), ``|y| <= a``: ``||z||^2 <= 1 + a^2`` and
      ``||z||_4^4 = ||x~||_4^4 + y^4 <= 1 + a^4``, so ``T(A) <= (1 + a^2)^2 + 1 + a^4`` and
      ``S2 = sqrt((1 + a^2)^2 + 1 + a^4)/n`` (at most ``sqrt(2) (1 + a^2)/n``; ``sqrt(6)/n`` at
      ``a = 1``).

    Per-class sums with protected labels (``n_rows = 1``): a record that changes class changes two
    classes' sums by ``u u^T`` and ``-v v^T``; the squared norms of their upper triangles add up to
    the same ``T(A)`` bound with ``u.v`` taken as 0, so the same value covers both cases.
    """
    a2 = 0.0 if label_bound is None else float(label_bound) ** 2
    return second_moment_l2_sensitivity(1.0 + a2, 1.0 + a2 * a2) / n_rows


def augmented_mean_sensitivity(p: int, n_rows: int, label_bound: float) -> tuple[float, float]:
    """``(S1, S2)`` of the mean of the augmented rows ``z = [x~, y]`` (Alg. 4 with its mean).

    Replace-one with ``||x~|| <= 1`` and ``|y| <= a``: ``||x~ - x~'||_1 <= sqrt(p) ||x~ - x~'||_2
    <= 2 sqrt(p)`` and ``|y - y'| <= 2a``, so ``S1 = (2 sqrt(p) + 2a)/n``;
    ``S2 = sqrt(4 + 4a^2)/n = 2 sqrt(1 + a^2)/n``.
    """
    a = float(label_bound)
    return (2.0 * math.sqrt(p) + 2.0 * a) / n_rows, 2.0 * math.sqrt(1.0 + a * a) / n_rows


def gaussian_coordinates(task: str | None, protected: bool, d: int, p: int, n_classes: int, *,
                         model_mean: bool = False) -> int:
    """Number of Gaussian noise coordinates that can differ between neighbours, summed over every
    Gaussian draw of a ``noise="gaussian"`` release (what :func:`dpcore.noise.combine_slack` sums;
    the sampler's slack is reserved for it before calibration). Classification counts every class
    of the public list (an upper bound on the modelled ones); ``model_mean`` adds the ``p``
    coordinates of the unsupervised model's DP mean."""
    tri = p * (p + 1) // 2
    if task == "classification":
        return min(2, n_classes) + n_classes * (2 * d + 2 * tri) if protected \
            else n_classes * (d + tri)
    if task == "regression":
        return d + (p + 1) + (p + 1) * (p + 2) // 2
    return d + tri + (p if model_mean else 0)


def guaranteed_epsilon(
    split: EpsilonSplit, p: int, calibration: str, label_bound: float | None = None
) -> float:
    """Epsilon actually guaranteed: ``eps_mu + eps_Sigma * ratio``.

    Sequential composition of the DP mean and the DP second moment (Theorems 3-5; parallel over
    classes in Alg. 5, where every class uses the same parts). ``calibration="sound"``: ratio 1.
    ``"published"`` reproduces the paper's mechanism (i.i.d. ``Lap(S1_published/eps_Sigma)`` on
    every entry of the matrix), which protects only
    ``eps_Sigma * S1_sound,full / S1_published`` (``n`` cancels): ``sqrt(p)`` times the nominal
    part for Sigma, ``(2p + 4a sqrt(p) + a^2)/(2 sqrt(p) + 4a sqrt(p) + a^2)`` for Alg. 4.
    """
    ratio = 1.0
    if calibration == "published":
        ratio = (ron_covariance_sensitivity(p, 1, "sound", label_bound, full_matrix=True)
                 / ron_covariance_sensitivity(p, 1, "published", label_bound))
    return math.fsum(v * (ratio if k == "covariance" else 1.0) for k, v in split.as_dict().items())


def noisy_second_moment(
    Z: np.ndarray, sensitivity: float, scale: float, bits: BitSource, *, full_matrix: bool = False
) -> tuple[np.ndarray, np.ndarray, NoiseDraw]:
    """``Z^T Z / m`` through the Laplace mechanism (L1 ``sensitivity``, calibrated ``scale =
    S1/epsilon``) on a grid.

    Default: i.i.d. noise on the upper triangle (diagonal included), mirrored (SPEC section 1).
    ``full_matrix=True``: i.i.d. noise on every entry, as the papers' Laplace mechanism on a
    matrix-valued query (the result is not symmetric). Returns ``(noisy, repaired, draw)``: the noisy
    matrix, its PSD repair (symmetrised, eigenvalues clipped at 0), which is what gets sampled, and
    the noise draw (grid, actual scale).
    """
    noisy, draw = add_matrix_noise(Z.T @ Z / Z.shape[0], sensitivity, scale, bits,
                                   full_matrix=full_matrix)
    return noisy, psd_repair(noisy), draw


def scale_features(X: np.ndarray, lo: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Map features from the public box ``[lo, lo + width]`` to ``[0, 1]`` (constant if width 0)."""
    return (X - lo) / width


def _ron_transform(
    X: np.ndarray, *, W: np.ndarray, mean: np.ndarray | None, bounds: np.ndarray,
    lo: np.ndarray | None, width: np.ndarray | None, reconstruct: bool,
) -> np.ndarray:
    """Map real rows into a RON-Gauss release's space: clip to the public bounds, [scale],
    normalise, [centre with mu_DP, normalise], project, [reconstruct ``x~ W^T (+ mu_DP)``].
    Streams over blocks of rows (module docstring): no full-size temporary copy of ``X``."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != W.shape[0]:
        raise ValueError(f"X must have shape (m, {W.shape[0]}), got {X.shape}")
    loader = _RowLoader(X, lo=lo if width is not None else None, width=width, clip=bounds)
    inv_norms, _, _, direct = _unit_rows_pass(loader)
    Z, _ = _projection_pass(loader, inv_norms, W, mean, direct)
    if not reconstruct:
        return Z
    out = Z @ W.T
    return out + mean if mean is not None else out


def _projected_moments(
    loader: _RowLoader, inv_norms: np.ndarray | None, W: np.ndarray, mu: np.ndarray | None,
    direct: np.ndarray | None = None, labels: np.ndarray | None = None,
    label_map: tuple[tuple[float, float], float] | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """The sufficient statistics of Alg. 3/4 from pass 2: ``(Z^T Z, sum of the rows of Z, number of
    rows zeroed after centring)`` for the projected rows ``Z`` (:func:`_projection_pass`), with
    the label column ``label_to_unit(labels, *label_map)`` appended (Alg. 4's ``[x~, y]``) when
    ``labels`` is given. ``(k, k)``, ``(k,)``, int with ``k = p`` or ``p + 1``."""
    assert inv_norms is not None
    p = W.shape[1]
    y = None
    if labels is not None:
        assert label_map is not None
        y = label_to_unit(labels, *label_map)
    k = p + (y is not None)
    gram, total, n_zero = np.zeros((k, k)), np.zeros(k), 0
    for sl, Ut, zero in _projected_blocks(loader, inv_norms, W, mu, direct):
        gram[:p, :p] += Ut @ Ut.T
        total[:p] += Ut.sum(axis=1)
        n_zero += zero
        if y is not None:
            yb = y[sl]
            gram[:p, p] += Ut @ yb
            gram[p, p] += yb @ yb
            total[p] += yb.sum()
    if y is not None:
        gram[p, :p] = gram[:p, p]
    return gram, total, n_zero


def _unit_rows_kernel(X: np.ndarray, *, scaling: dict[str, Any]
                      ) -> tuple[tuple[np.ndarray, int], tuple[np.ndarray, np.ndarray]]:
    """Pass 1 (:func:`_unit_rows_pass`) of the rows ``X`` as a kernel of the table protocol
    (``engine.sums(..., keep=True)``): the sums ``(unit_sum, n_zero)`` and the per-row state
    ``(1/||x||, direct positions)`` that pass 2 reuses when the engine keeps it."""
    inv_norms, total, n_zero, direct = _unit_rows_pass(_RowLoader(X, **scaling))
    return (total, n_zero), (inv_norms, direct)


def _projected_moments_kernel(X: np.ndarray, labels: np.ndarray | None = None, *, scaling: dict[str, Any],
                              state: tuple[np.ndarray, np.ndarray] | None, W: np.ndarray,
                              mu: np.ndarray | None, label_map: tuple[tuple[float, float], float] | None
                              ) -> tuple[np.ndarray, np.ndarray, int]:
    """Pass 2 (:func:`_projected_moments`) of the rows ``X`` as a kernel: with pass 1's ``state``
    (the engine kept it: the whole table), or pass 1 recomputed on this block (``1/||x||`` is
    row-wise)."""
    loader = _RowLoader(X, **scaling)
    inv_norms, direct = state if state is not None else _unit_rows_kernel(X, scaling=scaling)[1]
    return _projected_moments(loader, inv_norms, W, mu, direct, labels, label_map)


@dataclass(frozen=True)
class _ClassPass1:
    """Alg. 5's pass 1 for every class of the public list (index ``c``): ``counts[c]`` rows,
    ``unit_sums[c]`` the sum of their unit-normalised rows (``(n_classes, d)``), ``n_zero[c]`` the
    zero-norm rows; ``state[c]`` = ``(rows, 1/||x||, direct positions)`` for pass 2 when the engine
    kept them (``None``: each block recomputes them)."""

    counts: np.ndarray
    unit_sums: np.ndarray
    n_zero: np.ndarray
    state: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...] | None = None


def _class_unit_rows(engine: TableEngine, X: Any, y: Any, n_classes: int, scaling: dict[str, Any]
                     ) -> _ClassPass1:
    """Pass 1 of Alg. 5 for all classes in one read: :func:`_class_unit_rows_kernel` summed over the
    table's blocks (its per-class state kept when the engine holds the table in one block)."""
    (counts, sums, n_zero), state = engine.sums(
        partial(_class_unit_rows_kernel, n_classes=n_classes, scaling=scaling), X, y, keep=True)
    return _ClassPass1(counts.astype(np.int64), sums, n_zero.astype(np.int64), state)


def _class_unit_rows_kernel(X: np.ndarray, y: np.ndarray, *, n_classes: int, scaling: dict[str, Any]
                            ) -> tuple[tuple[np.ndarray, ...], tuple[tuple[np.ndarray, ...], ...]]:
    """:func:`_unit_rows_pass` on each class's rows of ``X`` (one selection and pass per class):
    the sums ``(counts, unit sums, zero rows)`` per class and the state ``(rows, 1/||x||, direct
    positions)`` per class."""
    counts, sums, n_zero, state = np.zeros(n_classes, dtype=np.int64), np.zeros((n_classes, X.shape[1])), \
        np.zeros(n_classes, dtype=np.int64), []
    for c, rows in enumerate(rows_by_class(y, n_classes)):
        inv_norms, sums[c], n_zero[c], direct = _unit_rows_pass(_RowLoader(X, rows=rows, **scaling))
        counts[c] = rows.size
        state.append((rows, inv_norms, direct))
    return (counts, sums, n_zero), tuple(state)


def _class_moments(engine: TableEngine, X: Any, y: Any, first: _ClassPass1, W: np.ndarray,
                   mus: dict[int, np.ndarray], scaling: dict[str, Any]) -> tuple[dict[int, np.ndarray], int]:
    """Pass 2 of Alg. 5: ``Z_c^T Z_c`` of each modelled class ``c`` (its rows centred with its DP
    mean ``mus[c]`` and projected, :func:`_projected_moments`), and the number of rows zeroed after
    centring: :func:`_class_moments_kernel` summed over the table's blocks in one read."""
    classes = sorted(mus)
    grams, n_zero = engine.sums(partial(_class_moments_kernel, n_classes=first.counts.size, W=W, mus=mus,
                                        scaling=scaling, state=first.state), X, y)
    return dict(zip(classes, grams, strict=True)), int(n_zero)


def _class_moments_kernel(X: np.ndarray, y: np.ndarray, *, n_classes: int, W: np.ndarray,
                          mus: dict[int, np.ndarray], scaling: dict[str, Any],
                          state: tuple[tuple[np.ndarray, ...], ...] | None) -> tuple[np.ndarray, int]:
    """The stacked ``(classes, p, p)`` moments of pass 2 and the rows zeroed after centring, from
    pass 1's per-class ``state`` (kept by the engine) or pass 1 recomputed on this block."""
    if state is None:
        state = _class_unit_rows_kernel(X, y, n_classes=n_classes, scaling=scaling)[1]
    grams, n_zero = [], 0
    for c in sorted(mus):
        rows, inv_norms, direct = state[c]
        loader = _RowLoader(X, rows=rows, **scaling)
        gram, _, zeroed = _projected_moments(loader, inv_norms, W, mus[c], direct)
        grams.append(gram)
        n_zero += zeroed
    p = W.shape[1]
    return (np.stack(grams) if grams else np.zeros((0, p, p))), n_zero
