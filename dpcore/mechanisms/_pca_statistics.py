"""PCA-Gauss's statistics and sensitivities (Chanyaswad, Liu & Mittal; SPEC section 3): the
sensitivities of the eigenvalues, the PCA-space moments, the class sums and the tied second moment,
and the exact sums of the private rows (box-scaled moments in the feature space, or their projection
on a public basis) as kernels of the table protocol (:class:`dpcore.table.TableEngine`), packed into
fixed shapes to be added up over a table's blocks. The noisy models built from them are in
:mod:`dpcore.mechanisms._pca_models`; the estimator in :mod:`dpcore.mechanisms.pca_gauss`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from dpcore.mechanisms._box import (
    A_BOUND,
    BoxMap,
    box_moments,
    box_project,
)
from dpcore.mechanisms._gaussian_model import (
    label_to_unit,
    second_moment_l2_sensitivity,
)
from dpcore.preprocessing import PreparedInput

SOURCE = "Chanyaswad, Liu & Mittal, PCA-Gauss (formulas restored from the authors' code)"
AG_SOURCE = "Dwork, Talwar, Thakurta & Zhang, Analyze Gauss, STOC 2014; Balle & Wang, ICML 2018"


def _norm(bmap: BoxMap) -> float:
    """``B``, the public bound on ``||z||_2`` (1 when every column is constant)."""
    return bmap.bound.l2 or 1.0


# ------------------------------------------------------------------------------------ sensitivities
def eigenvalue_sensitivity(p: int, n_rows: int, a: float = A_BOUND, calibration: str = "tight") -> float:
    """L1 sensitivity of the top-``p`` eigenvalues of ``(1/(n d)) X^T X``, entries in ``[-a, a]``.

    ``"paper"``: ``p a^2/n`` (Theorem 4: Weyl, each eigenvalue moves by at most the spectral norm
    ``max ||x||^2/(n d) <= a^2/n``). ``"tight"``: ``min(p, 2) a^2/n`` (Lidskii-Mirsky: the sum of all
    eigenvalue changes is at most the trace norm ``(||x||^2 + ||x'||^2)/(n d) <= 2 a^2/n``).
    """
    k = p if calibration == "paper" else min(p, 2)
    return k * a**2 / n_rows


def pca_second_moment_sensitivity(
    p: int, n_rows: int, a: float = A_BOUND, calibration: str = "tight", supervised: bool = False
) -> float:
    """L1 sensitivity of ``(1/n) Z^T Z`` for PCA features ``x^`` (and the label ``y``, ``|y| <= a``).

    ``"paper"`` (noise on every entry): ``p^2 a^2/n`` (Prop. 3 in dimension p, box
    ``[-a, a]^p``; Theorem 6), or ``(p^2 a^2 + 4 p a^2 + a^2)/n`` with the label (Theorem 5).

    ``"tight"`` (noise on the upper triangle, ``(||A||_1 + sum |A_ii|)/2``): the smaller of two
    proven bounds. Box: ``p(p+1) a^2/(2n)``, or ``(p(p+1)/2 + 2p + 1) a^2/n`` with the label.
    Ball (ours): ``W`` has orthonormal columns, so ``||x^||_2 = ||W^T x||_2/sqrt(d) <= ||x||_2/sqrt(d)
    <= a``; then ``||x^ x^T||_1 = ||x^||_1^2 <= p a^2`` and the diagonal sum is ``<= a^2``, giving
    ``(p + 1) a^2/n`` (the RON-Gauss argument of SPEC section 2), or ``(p + 2 + 2 sqrt(p)) a^2/n``
    with the label (cross terms ``sum_j |x^_j y - x^'_j y'| <= 2 sqrt(p) a^2``, ``y^2``: ``a^2``).
    """
    if calibration == "paper":
        s1 = p * p + (4 * p + 1 if supervised else 0)
    else:
        box = p * (p + 1) / 2 + (2 * p + 1 if supervised else 0)
        ball = p + 1 + ((1 + 2 * math.sqrt(p)) if supervised else 0)
        s1 = min(box, ball)
    return s1 * a**2 / n_rows


def pca_mean_sensitivity(p: int, n_rows: int, a: float = A_BOUND, calibration: str = "tight") -> float:
    """L1 sensitivity of the class mean of PCA features.

    ``"paper"``: ``2 p a/n_c`` (Theorem 6, box ``[-a, a]^p``). ``"tight"``: ``2 sqrt(p) a/n_c``
    (ours: ``||x^ - x^'||_1 <= sqrt(p) ||x^ - x^'||_2 <= 2 sqrt(p) a`` since ``||x^||_2 <= a``).
    """
    return 2 * (p if calibration == "paper" else math.sqrt(p)) * a / n_rows


def eigenvalue_l2_sensitivity(n_rows: int) -> float:
    """L2 sensitivity ``sqrt(2)/n`` of the top-``p`` eigenvalues of ``(1/n) sum_i y_i y_i^T`` for rows
    of norm <= 1 (``noise="gaussian"``, Alg. 1), whatever ``p``.

    Hoffman-Wielandt: for symmetric ``A, A'`` with eigenvalues sorted the same way,
    ``sum_i (lambda_i - lambda'_i)^2 <= ||A - A'||_F^2``; replace-one changes ``A`` by
    ``(u u^T - v v^T)/n`` with ``||u u^T - v v^T||_F^2 = ||u||^4 + ||v||^4 - 2 (u.v)^2 <= 2``; the top
    ``p`` are a sub-vector.
    """
    return math.sqrt(2.0) / n_rows


def class_l2_sensitivities(n_rows: int = 1) -> tuple[float, float]:
    """L2 sensitivities ``(2/n, sqrt(2)/n)`` of the class mean and of the upper triangle of the class
    second moment of PCA features (``noise="gaussian"``, Alg. 3); ``n_rows = 1`` for the per-class
    sums stacked over all classes (labels protected).

    ``||x^||_2 <= 1`` (module docstring). Mean: ``||x^ - x^'|| <= 2`` within a class; a record that
    changes class moves two sums by ``x^`` and ``x^'``: ``sqrt(1 + 1) <= 2``. Second moment:
    :func:`~dpcore.mechanisms._gaussian_model.second_moment_l2_sensitivity` with norm 1: ``sqrt(2)``,
    which covers the class change as well.
    """
    return 2.0 / n_rows, second_moment_l2_sensitivity(1.0) / n_rows


def tied_second_moment_sensitivities(p: int, n_rows: int = 1, calibration: str = "tight"
                                     ) -> tuple[float, float]:
    """``(S1, S2)``: L1 and L2 sensitivities of the pooled second moment ``(1/n) sum_i x^_i x^_i^T`` of
    ALL ``n`` rows (``covariance_type="tied"``), upper triangle (``"tight"``) or every entry
    (``"paper"``, L1 only).

    Replace-one with the label included: the statistic ignores the labels, so a replaced record
    (whatever its old and new class) changes one term, ``(u u^T - v v^T)/n`` with ``||u||_2,
    ||v||_2 <= 1`` (PCA features, module docstring). L1: :func:`pca_second_moment_sensitivity` of the
    within-class case with ``n_c = n`` (``min(p(p+1)/2, p + 1) a^2/n``, or ``p^2 a^2/n``); L2:
    :func:`~dpcore.mechanisms._gaussian_model.second_moment_l2_sensitivity` of norm 1 over ``n``,
    ``sqrt(2)/n`` (attained by two orthogonal unit rows). The class means it is combined with
    (``Sigma = M - sum_c w_c mu_c mu_c^T``, post-processing) keep their own sensitivities
    (:func:`class_sum_sensitivities`, :func:`class_l2_sensitivities`). Ours: the pooled (tied)
    covariance of linear discriminant analysis (scikit-learn's ``covariance_type="tied"``) built
    from the paper's statistics; its noise is relative to ``n`` instead of each ``n_c``.
    """
    return (pca_second_moment_sensitivity(p, n_rows, calibration=calibration),
            second_moment_l2_sensitivity(1.0) / n_rows)


def _gaussian_coordinates(d: int, p: int, dp_pca: bool, gmm: bool, protected: bool, n_classes: int,
                          tied: bool = False) -> int:
    """Gaussian coordinates that can change between neighbours over a ``noise="gaussian"`` release
    (for the sampler's slack, :func:`dpcore.noise.reserve_slack`); every public class counted.
    ``tied``: one pooled second moment instead of one per class."""
    total = d * (d + 1) // 2 if dp_pca else 0
    if not gmm:  # Alg. 2: the mean (of [z/B, y], d + 1, with a DP basis) and the second moment
        return total + (d + 1 if dp_pca else p + 1) + (p + 1) * (p + 2) // 2
    per_class = p + (0 if tied else p * (p + 1) // 2)
    pooled = p * (p + 1) // 2 if tied else 0
    return total + pooled + (min(2, n_classes) + 2 * n_classes * per_class if protected
                             else n_classes * per_class)


def class_sum_sensitivities(p: int, a: float = A_BOUND, calibration: str = "tight") -> tuple[float, float]:
    """L1 sensitivities of the per-class *sums* ``(sum x^, sum x^ x^^T)``, all classes stacked,
    under replace-one with the label included (labels protected; the replaced record may change
    class, so one class loses a term and another gains one).

    Mean sums: one term has ``||x^||_1 <= sqrt(p) a`` ("tight", ``||x^||_2 <= a``) or ``p a``
    (box, "paper"); two terms or one difference give ``2 sqrt(p) a`` / ``2 p a``. Second-moment
    sums: "tight" (upper triangle) one term ``(||x^||_1^2 + ||x^||^2)/2 <= (p + 1) a^2/2``, so
    ``(p + 1) a^2`` covers both cases (the within-class difference bound is ``min(p(p+1)/2, p+1)
    a^2 <= (p + 1) a^2``); "paper" (every entry) one term ``||x^||_1^2 <= p^2 a^2``, two terms
    ``2 p^2 a^2`` (the within-class bound is ``p^2 a^2``). Ours, from the same argument as
    :func:`pca_mean_sensitivity` and :func:`pca_second_moment_sensitivity` with ``n = 1``.
    """
    if calibration == "paper":
        return 2.0 * p * a, 2.0 * p**2 * a**2
    return 2.0 * math.sqrt(p) * a, (p + 1.0) * a**2


@dataclass(frozen=True)
class _Moments:
    """Box-scaled sums of the private rows in the feature space (one streaming pass per group).

    ``gram`` is ``Xs^T Xs`` over all rows (for the DP PCA). Alg. 2: ``cross = Xs^T y``,
    ``yy = y^T y``, ``total = Xs^T 1`` and ``ysum = y^T 1`` for the label mapped to ``[-a, a]``.
    Alg. 3: ``per_class[c] = (Xs_c^T 1, Xs_c^T Xs_c)``; ``gram`` is their sum.
    """

    gram: np.ndarray
    n_rows: int
    cross: np.ndarray | None = None
    yy: float = 0.0
    total: np.ndarray | None = None
    ysum: float = 0.0
    sizes: np.ndarray | None = None
    per_class: dict[int, tuple[np.ndarray, np.ndarray]] | None = None

    @classmethod
    def collect(cls, X: Any, bounds: np.ndarray | BoxMap, rows: np.ndarray | None,
                y: Any, data: PreparedInput, gmm: bool) -> _Moments:
        """One pass over the rows ``X`` (``rows`` of them; one selection and pass per class for Alg. 3
        within a block): the sums of :func:`_moments_block` over the table's blocks
        (:meth:`dpcore.table.TableEngine.sums` of ``data.engine``)."""
        kernel = partial(_moments_block, bounds=bounds, rows=rows, data=replace(data, X=None, y=None),
                         gmm=gmm)
        n = X.shape[0] if rows is None else rows.size
        return _unpacked(cls, data.engine.sums(kernel, X, y), n, gmm)


@dataclass(frozen=True)
class _PCAStats:
    """What Alg. 2 / 3 need, in the PCA space ``x^ = W^T xs/sqrt(d)``: the unnormalised
    second moment of ``[x^, y]`` (Alg. 2, ``joint``), or per class ``(sum x^, sum x^ x^^T)``
    (Alg. 3); ``sizes`` are the class sizes ``n_c``."""

    n_rows: int
    joint: np.ndarray | None = None
    joint_sum: np.ndarray | None = None
    feature_sum: np.ndarray | None = None
    sizes: np.ndarray | None = None
    per_class: dict[int, tuple[np.ndarray, np.ndarray]] | None = None

    @classmethod
    def from_moments(cls, mom: _Moments, Wd: np.ndarray) -> _PCAStats:
        """From feature-space sums: ``sum x^ x^^T = Wd^T (Z^T Z) Wd``, ``Wd = W/B``."""
        if mom.per_class is None:
            assert mom.cross is not None and mom.total is not None
            xy = Wd.T @ mom.cross
            joint = np.block([[Wd.T @ mom.gram @ Wd, xy[:, None]], [xy[None, :], mom.yy]])
            return cls(n_rows=mom.n_rows, joint=joint, joint_sum=np.append(Wd.T @ mom.total, mom.ysum),
                       feature_sum=mom.total)
        per_class = {c: (Wd.T @ total, Wd.T @ second @ Wd)
                     for c, (total, second) in mom.per_class.items()}
        return cls(n_rows=mom.n_rows, sizes=mom.sizes, per_class=per_class)

    @classmethod
    def collect(cls, X: np.ndarray, bounds: BoxMap, Wd: np.ndarray, rows: np.ndarray | None,
                y: np.ndarray | None, data: PreparedInput, gmm: bool) -> _PCAStats:
        """From the private rows with a public basis: :meth:`from_rows` of their projection
        ``box_project(X, bounds, Wd)``, per block, summed (``data.engine``)."""
        kernel = partial(_projected_stats_block, bounds=bounds, Wd=Wd, rows=rows,
                         data=replace(data, X=None, y=None), gmm=gmm)
        return _unpacked(cls, data.engine.sums(kernel, X, y), X.shape[0] if rows is None else rows.size, gmm)

    @classmethod
    def from_rows(cls, Xh: np.ndarray, y: np.ndarray | None, data: PreparedInput,
                  gmm: bool) -> _PCAStats:
        """From the projected rows ``Xh`` (public-split path)."""
        assert y is not None
        if not gmm:
            assert data.label_bounds is not None
            Z = np.column_stack([Xh, label_to_unit(y, data.label_bounds, A_BOUND)])
            return cls(n_rows=Xh.shape[0], joint=Z.T @ Z, joint_sum=Z.sum(axis=0))
        assert data.classes is not None
        sizes = np.bincount(y, minlength=data.classes.size)
        per_class = {}
        for c in np.flatnonzero(sizes):
            Xc = Xh[y == c]
            per_class[int(c)] = (Xc.sum(axis=0), Xc.T @ Xc)
        return cls(n_rows=Xh.shape[0], sizes=sizes, per_class=per_class)


# ------------------------------------------------------------------------------------ per-block kernels
def _packed_stats(stats: _Moments | _PCAStats, n_classes: int, k: int) -> tuple[Any, ...]:
    """The sums of :class:`_Moments` / :class:`_PCAStats` as fixed-shape arrays (every class of
    the public list, zeros for an absent one; ``k`` columns), to be added up over partitions."""
    if stats.per_class is None:
        if isinstance(stats, _Moments):
            return stats.gram, stats.cross, stats.yy, stats.total, stats.ysum
        return stats.joint, stats.joint_sum
    assert stats.sizes is not None
    totals, seconds = np.zeros((n_classes, k)), np.zeros((n_classes, k, k))
    for c, (total, second) in stats.per_class.items():
        totals[c], seconds[c] = total, second
    return stats.sizes, totals, seconds


def _unpacked(cls: type, sums: tuple[np.ndarray, ...], n_rows: int, gmm: bool) -> Any:
    """:func:`_packed_stats` summed over partitions, back to ``cls`` (classes with rows only, as
    the in-memory path keeps them)."""
    if not gmm:
        if cls is _Moments:
            gram, cross, yy, total, ysum = sums
            return _Moments(gram=gram, n_rows=n_rows, cross=cross, yy=float(yy), total=total,
                            ysum=float(ysum))
        return _PCAStats(n_rows=n_rows, joint=sums[0], joint_sum=sums[1])
    sizes, totals, seconds = sums
    sizes = np.rint(sizes).astype(np.int64)
    per_class = {int(c): (totals[c], seconds[c]) for c in np.flatnonzero(sizes)}
    if cls is _Moments:
        gram = np.sum([second for _, second in per_class.values()], axis=0)
        return _Moments(gram=gram, n_rows=n_rows, sizes=sizes, per_class=per_class)
    return _PCAStats(n_rows=n_rows, sizes=sizes, per_class=per_class)


def _moments_block(block: np.ndarray, labels: np.ndarray, *, bounds: np.ndarray | BoxMap,
                   rows: np.ndarray | None, data: PreparedInput, gmm: bool) -> tuple[Any, ...]:
    """The sums of :class:`_Moments` over ``block[rows]`` (``labels``: of those rows) as fixed-shape
    arrays (:func:`_packed_stats`'s layout): Alg. 2's ``(gram, cross, yy, total, ysum)``, or Alg. 3's
    ``(sizes, per-class sums, per-class second moments)`` over every class of the public list, each
    class's second moment written in place."""
    if not gmm:
        assert labels is not None and data.label_bounds is not None
        yu = label_to_unit(labels, data.label_bounds, A_BOUND)
        G, cross, total = box_moments(block, bounds, rows, yu, clip=False, sums=True)
        return G, cross, float(yu @ yu), total, float(yu.sum())
    assert labels is not None and data.classes is not None
    sizes = np.bincount(labels, minlength=data.classes.size)
    base = np.arange(block.shape[0]) if rows is None else rows
    d = block.shape[1]
    totals, seconds = np.zeros((sizes.size, d)), np.zeros((sizes.size, d, d))
    for c in np.flatnonzero(sizes):
        seconds[c], totals[c] = box_moments(block, bounds, base[labels == c], clip=False)
    return sizes, totals, seconds


def _projected_stats_block(block: np.ndarray, labels: np.ndarray, *, bounds: BoxMap, Wd: np.ndarray,
                           rows: np.ndarray | None, data: PreparedInput, gmm: bool) -> tuple[Any, ...]:
    n_classes = 0 if data.classes is None else data.classes.size
    stats = _PCAStats.from_rows(box_project(block, bounds, Wd, rows, clip=False), labels, data, gmm)
    return _packed_stats(stats, n_classes, Wd.shape[1])
