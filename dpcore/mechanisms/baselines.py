"""The papers' comparison baselines, as registered mechanisms with proven guarantees.

RON-Gauss (section 5.2.4) and PCA-Gauss (section VIII-B4) compare against Li et al.'s Bernoulli
random projection on the identity query, Jiang et al.'s PCA on the identity query and Liu's MODIPS;
DPMix (section IV) compares against local perturbation (:class:`~dpcore.mechanisms.LocalGaussian`)
and a random projection with Gaussian noise. This module holds the four that were missing:

* ``identity-laplace`` (:class:`IdentityLaplace`): rows times a public Bernoulli matrix ``B``, plus
  Laplace noise; pure epsilon-DP.
* ``pca-identity`` (:class:`PCAIdentity`): rows times a PCA basis ``W`` from a public split of rows,
  plus Laplace noise; pure epsilon-DP.
* ``modips`` (:class:`MODIPS`): samples of a DP Gaussian (one per class) in the original
  ``d``-dimensional space; pure epsilon-DP.
* ``rp-gaussian`` (:class:`RPGaussian`): rows times a public Gaussian matrix ``R``, plus Gaussian
  noise; (epsilon, delta)-DP.

Neighbouring relation for all four: replace-one (``n`` public; one row replaced by any row of the
public box; for MODIPS classification the class sizes are public too, as in RON-Gauss Alg. 5).

Common pre-processing. Features are clipped to their public bounds and mapped affinely onto
``[-1, 1]`` (:func:`~dpcore.mechanisms.pca_gauss.scale_to_box`; the papers' experiments scale the
data to ``[-1, 1]``, PCA-Gauss VIII-B). A public affine map costs no budget and does not change the
signal-to-noise ratio of an identity query (PCA-Gauss Theorem 2). Feature ``l`` then ranges over an
interval of width ``w_l = 2`` (``0`` for a constant column).

Sensitivity of a projected identity query (identity-laplace, pca-identity; ours, derived here).
The release is ``z_i = (x_i - c) M`` for every row, ``M`` a public ``d x k`` matrix drawn or derived
independently of the private rows, ``c`` a public centre. Replacing row ``i`` by ``x'_i`` changes
only ``z_i``, by ``v M`` with ``v = x_i - x'_i``; inside the box every ``v`` with ``|v_l| <= w_l``
is reachable. Writing ``||u||_1 = max_{t in {-1,1}^k} <u, t>``,

    S1 = sup_v ||v M||_1 = max_t sup_v <v, M t> = max_{t in {-1,1}^k} sum_l w_l |(M t)_l|,

attained at the box vertex ``v = w * sign(M t*)``, so it is exact (tight). It is computed by
enumerating the ``2^(k-1)`` sign vectors with ``t_1 = +1`` (``t`` and ``-t`` give the same value)
while that costs at most ``ENUMERATION_BUDGET`` multiply-adds; otherwise the smaller of two proven
upper bounds is used: ``sum_l w_l ||M_l||_1`` (triangle inequality, the naive per-entry bound;
``sqrt(k) sum_l w_l`` for entries ``+-1/sqrt(k)``) and
``sqrt(k) sigma_max(M) ||w||_2`` (``||u||_1 <= sqrt(k) ||u||_2``). See :func:`box_l1_sensitivity`.
Adding i.i.d. ``Lap(S1/eps)`` to every released entry is pure eps-DP (Laplace mechanism, Dwork,
McSherry, Nissim & Smith 2006; SPEC section 1).

Labels. identity-laplace and pca-identity release the labels as their own column with
``epsilon_split``'s label part (k-ary randomized response over the public class list, or the
Laplace mechanism on the clipped regression label, :func:`~dpcore.mechanisms.jl_laplace.release_labels`);
a replaced row changes its features and its label, so the parts add up (basic composition).
rp-gaussian appends the encoded label to the projected row under ONE Gaussian mechanism (the
label's share enters the L2 sensitivity). MODIPS follows RON-Gauss Alg. 5 / PCA-Gauss Alg. 3: one
Gaussian per class with public class sizes; the class label itself is not protected (stated on the
card), and regression labels are modelled jointly with the features.
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Any

import numpy as np

from dpcore import noise as dpnoise
from dpcore.calibration import (
    EpsilonSplit,
    analytic_gaussian_sigma,
    check_delta,
    laplace_scale,
    psd_repair,
)
from dpcore.mechanisms._labels import (
    HISTOGRAM_FRACTION,
    LABEL_PRIVACY,
    WITHIN_CLASS,
    divide_by_count,
    dp_class_histogram,
    label_privacy_assumption,
    proportional_counts,
    synthetic_counts,
)
from dpcore.mechanisms._public import public_rows
from dpcore.mechanisms.base import Mechanism
from dpcore.mechanisms.dppro import gaussian_epsilon
from dpcore.mechanisms.jl_laplace import (
    check_one_row_per_input,
    combine_with_labels,
    gaussian_projection,
    projected_columns,
    release_labels,
    resolve_n_components,
)
from dpcore.mechanisms.pca_gauss import _top_eigvecs, lap_pca_sensitivity, scale_to_box
from dpcore.mechanisms.ron_gauss import (
    check_n_components,
    gaussian_samples,
    label_to_unit,
    unit_to_label,
)
from dpcore.noise import BitSource
from dpcore.preprocessing import PreparedInput
from dpcore.release import Guarantee, NoiseRecord, Release
from dpcore.schema import DELTA, EPSILON, Param

__all__ = [
    "IdentityLaplace",
    "MODIPS",
    "PCAIdentity",
    "RPGaussian",
    "bernoulli_projection",
    "box_l1_sensitivity",
    "box_l2_sensitivity",
    "box_widths",
    "gaussian_model_sensitivities",
    "kenthapadi_sigma",
]

#: largest number of multiply-adds spent enumerating sign vectors in :func:`box_l1_sensitivity`
ENUMERATION_BUDGET = 1 << 28

LI_CITATION = ("Y. D. Li, Z. Zhang, M. Winslett & Y. Yang, Compressive mechanism: utilizing sparse "
               "representation in differential privacy, WPES 2011 (as used by RON-Gauss section "
               "5.2.4 and PCA-Gauss section VIII-B4)")
JIANG_CITATION = ("X. Jiang, Z. Ji, S. Wang, N. Mohammed, S. Cheng & L. Ohno-Machado, "
                  "Differential-private data publishing through component analysis, Transactions on "
                  "Data Privacy 6(1), 2013 (PubPCA variant of PCA-Gauss section VIII-B4)")
LIU_CITATION = ("F. Liu, Model-based differentially private data synthesis, arXiv:1606.08052, 2016 "
                "(Gaussian version, as implemented by RON-Gauss section 5.2.4 and PCA-Gauss section "
                "II)")
DPMIX_RP_CITATION = ("Lee, Kim, Lee, Suh & Ramchandran, DPMix, ISIT 2019, section IV (random "
                     "projection baseline, after Kenthapadi et al. 2013 and DPPro Lemma 3)")
LAPLACE_SOURCE = "Laplace mechanism (Dwork, McSherry, Nissim & Smith 2006)"
BOX = "features clipped to their public bounds and mapped onto [-1, 1] (width w_l = 2, 0 if constant)"


# ------------------------------------------------------------------------------------ primitives
def box_widths(bounds: np.ndarray) -> np.ndarray:
    """Widths ``w_l`` of the ``[-1, 1]``-scaled features: 2, or 0 for a constant column."""
    return np.where(bounds[:, 1] > bounds[:, 0], 2.0, 0.0)


def bernoulli_projection(d: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``(d, k)`` matrix of i.i.d. ``+-1/sqrt(k)`` entries (symmetric Bernoulli, the compressive
    sensing measurement matrix of Li et al. 2011). Data-independent: no budget;
    ``E ||x B||^2 = ||x||^2``."""
    return (2.0 * rng.integers(0, 2, size=(d, k)) - 1.0) / math.sqrt(k)


def _max_sign_l1(Mw: np.ndarray, chunk: int = 1 << 13) -> float:
    """``max_{t in {-1,1}^k} ||Mw t||_1`` over the ``2^(k-1)`` sign vectors with ``t_1 = 1``
    (vectorised over chunks of sign vectors)."""
    d, k = Mw.shape
    if k == 1:
        return float(np.abs(Mw).sum())
    total = 1 << (k - 1)
    bits = np.arange(k - 1)
    best = 0.0
    for start in range(0, total, chunk):
        idx = np.arange(start, min(total, start + chunk))
        T = np.ones((idx.size, k))
        T[:, 1:] = 1.0 - 2.0 * ((idx[:, None] >> bits) & 1)
        best = max(best, float(np.abs(Mw @ T.T).sum(axis=0).max()))
    return best


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


def kenthapadi_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """``sigma = S2 sqrt(2 (ln(1/(2 delta)) + epsilon)) / epsilon`` (Kenthapadi et al. 2013; DPPro
    Lemma 3 / Thm 2; the calibration DPMix section IV cites). Needs ``delta < 1/2``.

    Sound but conservative: its exact delta (Balle & Wang 2018, Thm 8) is at most 0.074 times the
    target on eps in [0.01, 50], delta in [1e-8, 0.4]. ``epsilon = inf`` gives 0.

    Raises
    ------
    ValueError
        ``delta >= 1/2`` (the formula's condition).
    """
    dlt = check_delta(delta)
    if dlt >= 0.5:
        raise ValueError(f"delta must be < 0.5 for the paper's calibration "
                         f"sqrt(2(ln(1/(2 delta)) + eps))/eps, got {delta!r}")
    if math.isinf(epsilon):
        return 0.0
    return float(sensitivity) * math.sqrt(2.0 * (math.log(1.0 / (2.0 * dlt)) + epsilon)) / epsilon


def gaussian_model_sensitivities(k: int, n_rows: int) -> tuple[float, float]:
    """L1 sensitivities of the mean and of the upper triangle of the second moment of ``n_rows``
    vectors in ``[-1, 1]^k`` (replace-one): ``(2k/n, k(k+1)/(2n))``.

    Mean: ``||x - x'||_1 <= sum_l w_l = 2k``. Second moment, upper triangle with the diagonal (SPEC
    section 1), proof: with ``u = (x + x')/2``, ``v = (x - x')/2``, ``x x^T - x' x'^T = 2(u v^T + v u^T)``
    and ``|u_l| + |v_l| = max(|x_l|, |x'_l|) <= 1``. With ``A = ||u||_1``, ``B = ||v||_1``, the full
    matrix has L1 norm ``<= 4AB`` and the diagonal ``4 sum_l |u_l v_l|``, so the upper triangle has
    ``(full + diag)/2 <= 2AB + 2 sum_l |u_l||v_l| <= 2 (k/2)^2 + 2 k/4 = k(k+1)/2``; ``x = 1``,
    ``x' = 0`` attains it (tight). Equals PCA-Gauss's LapPCA "tight" value
    (:func:`~dpcore.mechanisms.pca_gauss.lap_pca_sensitivity`), which is reused.
    """
    return 2.0 * k / n_rows, lap_pca_sensitivity(k, n_rows, calibration="tight")


def _box_projection(X: np.ndarray, *, bounds: np.ndarray, center: np.ndarray, M: np.ndarray
                    ) -> np.ndarray:
    """Public transform of the projection baselines: ``(scale_to_box(clip(X)) - center) @ M``."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != bounds.shape[0]:
        raise ValueError(f"X must have shape (m, {bounds.shape[0]}), got {X.shape}")
    return (scale_to_box(X, bounds) - center) @ M


def _label_note(data: PreparedInput) -> str | None:
    if data.task == "unsupervised":
        return None
    how = ("k-ary randomized response over the public class list" if data.task == "classification"
           else "Laplace noise scaled to the public label range")
    return (f"released as their own column by {how}, with the 'labels' part of epsilon_split; a "
            "replaced row changes its features and its label, so the two parts add up")


# ------------------------------------------------------------------------------------ identity
class _IdentityLaplaceBase(Mechanism):
    """Shared release of projected rows with Laplace noise (the identity query) and private labels.

    Not registered (no ``name``); :class:`IdentityLaplace` and :class:`PCAIdentity` differ only in
    where the projection comes from.
    """

    neighbouring = "replace-one"
    guarantee_kind = "pure"
    space = "projected"
    baseline = True

    def _identity_release(
        self, data: PreparedInput, params: dict[str, Any], bits: BitSource, *,
        M: np.ndarray, center: np.ndarray, rows: np.ndarray | None, matrix_name: str,
        statistic: str, source: str, details: dict[str, Any],
    ) -> Release:
        """Release ``(scale(x_i) - center) M + Lap(S1/eps_features)`` for the private ``rows``
        (all rows when ``None``), then the labels of those rows."""
        priv = data if rows is None else dataclasses.replace(
            data, X=data.X[rows], y=None if data.y is None else data.y[rows])
        n, k = priv.n_samples, M.shape[1]
        eps = params["epsilon"]
        has_labels = data.task != "unsupervised"
        if has_labels:
            split = EpsilonSplit.from_fractions(
                eps, dict(zip(("features", "labels"), params["epsilon_split"], strict=True)))
            eps_f, eps_l = split["features"], split["labels"]
        else:
            eps_f, eps_l = eps, None
        widths = box_widths(data.bounds)
        s1, method = box_l1_sensitivity(M, widths)
        # one replaced row moves the k outputs of its row: n_changed = k
        draw = dpnoise.laplace(_box_projection(priv.X, bounds=data.bounds, center=center, M=M), s1,
                               scale=laplace_scale(s1, eps_f), n_changed=k, bits=bits)
        Z, b = draw.values, draw.scale
        labels = release_labels(priv, math.inf if eps_l is None else eps_l, bits)
        noise = [NoiseRecord(
            statistic=f"{statistic} ({n} x {k})", sensitivity=s1, scale=b, distribution="laplace",
            norm="L1", epsilon=eps_f, delta=0.0, **dpnoise.record_fields(draw),
            formula=f"S1 = sup over the public box of ||(x - x') {matrix_name}||_1 = max_t sum_l w_l "
                    f"|({matrix_name} t)_l| ({method}); b = S1 / eps_features",
            source=f"{source}; {LAPLACE_SOURCE}; sensitivity derived in dpcore.mechanisms.baselines",
        )]
        if labels.noise is not None:
            noise.append(labels.noise)
        total = combine_with_labels("row", eps_f, eps_l)
        details = {
            **details,
            "n_components": k,
            "scaling": BOX,
            "sensitivity_method": method,
            "noise_variance": 2.0 * b * b,
            "epsilon_features": eps_f,
            "epsilon_labels": eps_l,
            "labels": _label_note(data),
        }
        details.setdefault("assumptions", []).insert(
            0, "n is public (bounded DP, replace-one neighbours)")
        arrays = {matrix_name: M, "center": center, "bounds": data.bounds}
        return self._new_release(
            data, params, values=Z, columns=projected_columns(k),
            guarantee=Guarantee(epsilon=total, delta=0.0, neighbouring="replace-one", kind="pure"),
            noise=noise, calibration="exact" if method.startswith("exact") else "bound",
            labels=labels.labels, label_columns=labels.columns, details=details,
            transform_arrays=arrays,
            transform_fn=partial(_box_projection, bounds=data.bounds.copy(), center=center, M=M),
        )


_N_COMPONENTS_JL = Param(
    "n_components", "int", None, "Projected dimension k (1 <= k < number of features; default "
    "min(10, d - 1)). The Laplace noise grows with k.", low=1, optional=True)
_LABEL_SPLIT = Param(
    "epsilon_split", "fraction_split", (0.9, 0.1), "Supervised tasks: budget fractions for the "
    "projected features and the labels (they add up under replace-one).", privacy=True,
    split_names=("features", "labels"))


class IdentityLaplace(_IdentityLaplaceBase):
    """Bernoulli random projection + Laplace noise on every projected entry (pure eps-DP).

    The baseline "Li et al. [78]: dimensionality reduction via Bernoulli random projection on the
    identity query" of RON-Gauss (section 5.2.4, Tables 3-5) and PCA-Gauss (section VIII-B4). Each
    row, scaled to ``[-1, 1]^d``, is multiplied by a public ``d x k`` matrix ``B`` of i.i.d.
    ``+-1/sqrt(k)`` entries (:func:`bernoulli_projection`) and released with i.i.d. ``Lap(S1/eps)``
    on every entry, ``S1 = max_{t in {-1,1}^k} sum_l w_l |(B t)_l|`` — the exact L1 sensitivity of
    one replaced row (module docstring; measured 1.9x (k = 2) to 4.4x (k = 14) smaller than the
    triangle bound ``sqrt(k) sum_l w_l`` for d = 30 to 784).

    Parameters
    ----------
    epsilon : float, default 1.0
        Total budget (> 0; ``inf`` = NOT PRIVATE: zero noise, explore only).
    n_components : int, optional
        ``k``, ``1 <= k < n_features``; default ``min(10, d - 1)``.
    epsilon_split : (float, float), default (0.9, 0.1)
        Supervised tasks: fractions for the features and the labels (basic composition).
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`.

    Released table: ``n`` rows ``z1..zk`` plus a privately released label column (supervised
    tasks). ``transform_arrays``: ``B``, ``center`` (zeros) and ``bounds``; ``Release.transform``
    maps real rows with ``x -> scale_to_box(clip(x)) @ B`` (train on the release, test on real rows).
    ``B`` is data-independent and public, so releasing it costs nothing.

    Deviation from Li et al.: the compressive mechanism reconstructs a sparse signal from the noisy
    measurements by L1 minimisation; the comparisons in RON-Gauss/PCA-Gauss use the projected
    identity query itself, which is what is released here (no reconstruction).

    Raises
    ------
    ValueError
        ``n_components >= n_features`` or ``< 1``, ``epsilon <= 0``, a bad ``epsilon_split``,
        ``n_samples`` different from the number of rows.
    """

    name = "identity-laplace"
    title = "Bernoulli projection + Laplace (Li et al. baseline)"
    summary = ("Baseline: project every row with a random +-1/sqrt(k) matrix and add Laplace noise "
               "calibrated to the exact L1 sensitivity of one replaced row.")
    citation = LI_CITATION
    params = (EPSILON, _N_COMPONENTS_JL, _LABEL_SPLIT)

    def _release(
        self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator,
        n_samples: int | None, *, bits: BitSource,
    ) -> Release:
        check_one_row_per_input(n_samples, data.n_samples, "identity-laplace")
        d = data.n_features
        k = resolve_n_components(params["n_components"], d)
        B = bernoulli_projection(d, k, rng)
        return self._identity_release(
            data, params, bits, M=B, center=np.zeros(d), rows=None, matrix_name="B",
            statistic="projected rows Z = scale(X) B", source=LI_CITATION,
            details={"projection": "Bernoulli +-1/sqrt(k), public, data-independent",
                     "assumptions": ["B is drawn independently of the data and released"]},
        )


class PCAIdentity(_IdentityLaplaceBase):
    """PCA from a public split of rows + Laplace noise on every projected entry (pure eps-DP).

    The baseline "Jiang et al. [52]: PCA on the identity query" in its PubPCA form (PCA-Gauss
    section VIII-B4: PCA derived from a small public data set, "for the best performance"; RON-Gauss
    section 5.2.4). ``public_data`` is a separate table of PUBLIC rows (never a part of the private
    input: :mod:`dpcore.mechanisms._public`): their mean ``c`` and top-``p`` principal directions
    ``W`` (``d x p``, orthonormal, of their covariance in the ``[-1, 1]``-scaled units) are computed
    without noise. Every private row is released as ``(x - c) W + Lap(S1/eps)``
    with ``S1 = max_{t in {-1,1}^p} sum_l w_l |(W t)_l|`` (exact, module docstring; at most
    ``sqrt(p) ||w||_2 = 2 sqrt(p d)`` because ``sigma_max(W) = 1``).

    Parameters
    ----------
    epsilon : float, default 1.0
        Total budget for the private rows (> 0; ``inf`` = NOT PRIVATE, explore only).
    n_components : int, optional
        ``p``, ``1 <= p < n_features``; default ``floor(2 ln d / ln ln d)``
        (:func:`~dpcore.mechanisms.ron_gauss.default_n_components`, as PCA-Gauss).
    epsilon_split : (float, float), default (0.9, 0.1)
        Supervised tasks: fractions for the features and the labels.
    public_data : array-like of shape (n_public, n_features) or Dataset
        Public rows with the private data's columns (clipped to the same public bounds), recorded
        on the card by their SHA-256. Required.
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`.

    Released table: the ``n`` private rows, ``z1..zp``, plus their privately released
    labels. ``transform_arrays``: ``W``, ``center`` (``c``), ``bounds``;
    ``transform(x) = (scale_to_box(clip(x)) - c) @ W``.

    Guarantee: pure eps-DP for the private rows (replace-one). The public rows get NO protection:
    the custodian asserts they are public (the card says so). Deviation from Jiang et al.: their
    DPPCA derives ``W`` privately; the papers'
    comparison (and this baseline) uses the public-data variant.

    Raises
    ------
    ValueError
        ``n_components >= n_features``, missing or malformed ``public_data``, bad parameters.
    """

    name = "pca-identity"
    title = "Public PCA + Laplace (Jiang et al. baseline)"
    summary = ("Baseline: PCA basis from a separate public table, then every private row's PCA "
               "coordinates released with Laplace noise (the identity query).")
    citation = JIANG_CITATION
    params = (
        EPSILON,
        Param("n_components", "int", None, "Number of principal components p (< number of "
              "features); empty = 2 ln d / ln ln d.", low=1, optional=True),
        _LABEL_SPLIT,
    )
    peak_square_matrices = 3  # covariance of the public split, eigenvectors, workspace
    extra_args = ("public_data",)

    def _release(
        self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator,
        n_samples: int | None, *, bits: BitSource,
    ) -> Release:
        n, d = data.X.shape
        p = check_n_components(params["n_components"], d)
        pub = public_rows(getattr(self, "public_data", None), data.bounds, mechanism="pca-identity")
        check_one_row_per_input(n_samples, n, "pca-identity")
        Xpub = scale_to_box(pub.X, data.bounds)
        center = Xpub.mean(axis=0)
        W = _top_eigvecs((Xpub - center).T @ (Xpub - center), p)
        return self._identity_release(
            data, params, bits, M=W, center=center, rows=None, matrix_name="W",
            statistic="PCA coordinates Z = (scale(X) - c) W of the private rows",
            source=JIANG_CITATION,
            details={
                "projection": "top-p principal directions of the public rows (PubPCA)",
                **pub.card(),
                "assumptions": [
                    "the public_data rows (identified by public_data_sha256) are PUBLIC: W and c "
                    "are computed from them without noise and they get no protection",
                ],
            },
        )


# ------------------------------------------------------------------------------------ MODIPS
class MODIPS(Mechanism):
    """MODIPS (Liu 2016), Gaussian version: DP mean and second moment in the original space, sample.

    The baseline "Liu [80]: parametric generative model without dimensionality reduction" of
    RON-Gauss (Tables 3-5: Gaussian for clustering/regression, GMM for classification) and
    PCA-Gauss ("we implement MODIPS ... by assuming that the data are Gaussian-distributed").

    Each group of rows (all rows; one group per class for classification) scaled to ``[-1, 1]^k``
    (``k`` = non-constant features, plus the regression label mapped to ``[-1, 1]``, modelled
    jointly) gives

    * ``mu_DP = mean + Lap(2k/(n eps_mu))`` per coordinate,
    * ``M_DP = (1/n) Z^T Z + Lap(k(k+1)/(2 n eps_Sigma))`` on the upper triangle, mirrored,

    (sensitivities proven in :func:`gaussian_model_sensitivities`), the covariance
    ``psd_repair(M_DP - mu_DP mu_DP^T)`` (post-processing, SPEC section 1), and synthetic rows
    ``N(mu_DP, Sigma_DP)`` mapped back to the original units (labels too). Classification: one
    Gaussian per class, ``n_samples * n_c / n`` rows each (exactly ``n_c`` by default), class sizes
    ``n_c`` public (RON-Gauss Alg. 5 assumption), parallel composition over the disjoint classes.

    Parameters
    ----------
    epsilon : float, default 1.0
        Total budget ``eps_mu + eps_Sigma`` (> 0; ``inf`` = NOT PRIVATE: the exact Gaussian fit).
    epsilon_split : (float, float), default (0.3, 0.7)
        Fractions for the mean and the second moment (RON-Gauss's split, so the comparison is
        like for like).
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`.

    Released table: ``n_samples`` rows (default ``n``) in the input's feature columns and units
    (not clipped to the bounds), plus labels for supervised tasks. No transform is needed: the
    release lives in the feature space (``Release.transform`` is the identity).

    Guarantee: pure ``eps_mu + eps_Sigma``-DP, replace-one (class sizes public for
    classification; neighbours then replace a record by another of the same class and the class
    label is not protected). The noise on the ``k(k+1)/2`` second-moment entries grows like
    ``k^2/n``: that is the point the RON-Gauss and PCA-Gauss papers make with this baseline.

    Deviation from Liu: MODIPS draws the model parameters from the posterior given the sanitised
    sufficient statistics before synthesising; here (as in the papers' comparisons) the noisy
    statistics are plugged in directly.

    Raises
    ------
    ValueError
        Bad ``epsilon`` / ``epsilon_split`` (named), regression without public ``label_bounds``.
    """

    name = "modips"
    title = "MODIPS (Gaussian model, no dimensionality reduction; Liu baseline)"
    summary = ("Baseline: DP mean and DP second moment of the clipped data in the original space "
               "(one Gaussian per class for classification), then synthetic samples.")
    citation = LIU_CITATION
    params = (
        EPSILON,
        Param("epsilon_split", "fraction_split", (0.3, 0.7), "Fractions of epsilon for the DP "
              "mean and the DP second moment.", privacy=True, split_names=("mean", "covariance")),
        LABEL_PRIVACY,
        HISTOGRAM_FRACTION,
    )
    neighbouring = "replace-one"
    guarantee_kind = "pure"
    space = "features"
    baseline = True
    peak_square_matrices = 3  # second moment, its noise, the repaired covariance (per class)
    peak_row_copies = 8  # scaled rows, per-class copies, synthetic rows and their draws

    def _release(
        self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator,
        n_samples: int | None, *, bits: BitSource,
    ) -> Release:
        n, d = data.X.shape
        fractions = dict(zip(("mean", "covariance"), params["epsilon_split"], strict=True))
        protected = data.task == "classification" and params["label_privacy"] == "protected"
        if protected:
            h = params["histogram_fraction"]
            fractions = {"histogram": h, **{k: (1 - h) * v for k, v in fractions.items()}}
        split = EpsilonSplit.from_fractions(params["epsilon"], fractions)
        lo, hi = data.bounds[:, 0], data.bounds[:, 1]
        active = hi > lo
        Z = scale_to_box(data.X, data.bounds)[:, active]
        regression = data.task == "regression"
        if regression:
            assert data.y is not None and data.label_bounds is not None
            Z = np.column_stack([Z, label_to_unit(data.y, data.label_bounds, 1.0)])
        if Z.shape[1] == 0:
            raise ValueError("bounds: every feature has lo == hi, so there is nothing to model")
        m = n if n_samples is None else n_samples
        diag: dict[str, Any] = {"mean_dp": {}, "second_moment_dp": {}, "mean": {}, "second_moment": {}}
        noise: list[NoiseRecord] = []
        noisy_counts = None
        if data.task == "classification":
            assert data.y is not None and data.classes is not None
            sizes = np.bincount(data.y, minlength=data.classes.size)
            if protected:
                noisy_counts, hist_rec = dp_class_histogram(
                    data.y, data.classes.size, split["histogram"], bits, "MODIPS per class (label privacy)")
                noise.append(hist_rec)
                diag["class_counts_dp"] = noisy_counts
                counts = synthetic_counts(m, noisy_counts)
                groups = [(c, data.y == c, f" of class {data.classes[c]!s}")
                          for c in np.flatnonzero(counts)]  # chosen from the DP histogram only
            else:
                groups = [(c, data.y == c, f" of class {data.classes[c]!s} (n_c = {sizes[c]})")
                          for c in np.flatnonzero(sizes)]
                counts = proportional_counts(m, sizes)
        else:
            groups, counts = [(0, slice(None), "")], np.array([m])
        chunks, labels = [], []
        for c, rows, tag in groups:
            count = None if noisy_counts is None else float(noisy_counts[c])
            mu, cov, recs = _dp_gaussian(Z[rows], split, bits, tag, diag, key=c, count=count)
            chunks.append(gaussian_samples(mu, cov, int(counts[c]), rng))
            labels.append(np.full(int(counts[c]), c))
            noise += recs
        S = np.vstack(chunks)
        values = np.tile(lo, (S.shape[0], 1))
        values[:, active] = lo[active] + (S[:, : int(active.sum())] + 1.0) / 2.0 * (hi - lo)[active]
        out_labels, label_columns = None, []
        if data.task == "classification":
            assert data.classes is not None
            out_labels, label_columns = data.classes[np.concatenate(labels)], [data.label_name or "label"]
        elif regression:
            assert data.label_bounds is not None
            out_labels = unit_to_label(S[:, -1], data.label_bounds, 1.0)
            label_columns = [data.label_name or "label"]
        k = Z.shape[1]
        assumptions = ["n is public (bounded DP, replace-one neighbours)",
                       f"{BOX}; synthetic rows are mapped back to the original units"]
        if data.task == "classification":
            assumptions.append(label_privacy_assumption(params["label_privacy"]))
        if regression:
            assumptions.append(f"labels lie in the public label_bounds {data.label_bounds}, mapped to "
                               "[-1, 1] and modelled jointly with the features")
        details = {
            "model": "one Gaussian per class (GMM)" if data.task == "classification" else "Gaussian",
            "model_dimension": k,
            "n_constant_features": int(d - active.sum()),
            "epsilon_parts": split.as_dict(),
            "assumptions": assumptions,
        }
        rel = self._new_release(
            data, params, values=values, columns=list(data.feature_names),
            guarantee=Guarantee(epsilon=math.fsum(split.parts), delta=0.0, kind="pure",
                                neighbouring=WITHIN_CLASS if data.task == "classification"
                                and not protected else "replace-one"),
            noise=noise, calibration="sound", n_samples=n_samples, labels=out_labels,
            label_columns=label_columns, details=details,
        )
        rel.diagnostics.update(diag)
        return rel


def _dp_gaussian(
    Z: np.ndarray, split: EpsilonSplit, bits: BitSource, tag: str, diag: dict[str, Any],
    key: Any, count: float | None = None,
) -> tuple[np.ndarray, np.ndarray, list[NoiseRecord]]:
    """DP mean, DP second moment (upper triangle, mirrored) and PSD-repaired covariance of the rows
    ``Z`` (entries in ``[-1, 1]``), with their noise records; exact and noisy statistics go to
    ``diag`` (exploration only).

    ``count`` (a DP class count, labels protected): noisy per-class *sums* over the count. Stacked
    over the classes, the sums have L1 sensitivities ``2k`` (one vector of L1 norm ``<= k`` leaves
    a class and one joins another, or one difference ``<= 2k``) and ``k(k+1)`` (upper triangle: one
    term ``(||z||_1^2 + ||z||^2)/2 <= k(k+1)/2``, two of them when the record changes class; the
    within-class difference is ``<= k(k+1)/2``)."""
    n, k = Z.shape
    if count is None:
        s1_mu, s1_m = gaussian_model_sensitivities(k, n)
        mean, second = Z.mean(axis=0), Z.T @ Z / n
    else:
        s1_mu, s1_m = 2.0 * k, k * (k + 1.0)
        mean, second = Z.sum(axis=0), Z.T @ Z
    # grid rounding: with protected labels a replaced record may change two classes' statistics
    changed = 1 if count is None else 2
    mu_draw = dpnoise.laplace(mean, s1_mu, scale=laplace_scale(s1_mu, split["mean"]),
                              n_changed=changed * k, bits=bits)
    M, m_draw = dpnoise.symmetric_laplace(second, s1_m, scale=laplace_scale(s1_m, split["covariance"]),
                                          n_changed=changed * k * (k + 1) // 2, bits=bits)
    mu, b_mu, b_m = mu_draw.values, mu_draw.scale, m_draw.scale
    if count is not None:
        mu, M = divide_by_count(mu, count), divide_by_count(M, count)
        mean, second = divide_by_count(mean, max(n, 1)), divide_by_count(second, max(n, 1))
    diag["mean"][key], diag["second_moment"][key] = mean, second
    diag["mean_dp"][key], diag["second_moment_dp"][key] = mu, M
    recs = [
        NoiseRecord(
            statistic="mean" + tag, sensitivity=s1_mu, scale=b_mu, distribution="laplace", norm="L1",
            epsilon=split["mean"], delta=0.0, **dpnoise.record_fields(mu_draw),
            formula=("S1 = 2k/n (k coordinates of width 2, one row replaced); b = S1/eps_mu"
                     if count is None else "S1 = 2k (per-class sums, all classes jointly; the "
                     "replaced record may change class); b = S1/eps_mu; mean = sum / DP count"),
            source=f"{LIU_CITATION}; {LAPLACE_SOURCE}",
        ),
        NoiseRecord(
            statistic="second moment (1/n) Z^T Z" + tag, sensitivity=s1_m, scale=b_m,
            distribution="laplace", norm="L1", epsilon=split["covariance"], delta=0.0,
            **dpnoise.record_fields(m_draw),
            formula=("S1 = k(k+1)/(2n) (upper triangle with diagonal, entries in [-1, 1]; proof in "
                     "gaussian_model_sensitivities)" if count is None else "S1 = k(k+1) (per-class "
                     "sums, upper triangle, the replaced record may change class; divided by the "
                     "DP count)") + "; b = S1/eps_Sigma, mirrored; covariance = "
                    "psd_repair(M - mu mu^T) (post-processing)",
            source=f"{LIU_CITATION}; {LAPLACE_SOURCE}; upper triangle mirrored, PSD repair (post-processing)",
        ),
    ]
    return mu, psd_repair(M - np.outer(mu, mu)), recs


# ------------------------------------------------------------------------------------ RP-Gaussian
class RPGaussian(Mechanism):
    """Gaussian random projection + Gaussian noise, replace-one ((eps, delta)-DP): DPMix's baseline.

    DPMix section IV: "This algorithm first draws a random projection matrix ``R`` ... transforms
    each data point by multiplying it with ``R``. It then adds Gaussian noise whose standard
    deviation is ``sigma(R) (sqrt(log(1/(2 delta)) + eps)/eps)``, where ``sigma(R)`` is the spectral
    norm of matrix ``R``. It can be shown that this setting yields (eps, delta)-DP [10], [11]."

    Implementation. Rows scaled to ``[-1, 1]^d`` (module docstring) are multiplied by a public
    ``d x k`` matrix ``R`` of i.i.d. ``N(0, 1/k)`` entries (the matrices of [10] Kenthapadi et al. and
    [11] DPPro; DPMix does not name a distribution) and released with i.i.d. ``N(0, sigma^2)`` noise.
    Labels (supervised tasks) are appended to each projected row, encoded as a one-hot vector of
    height 2 (the features' width; classification, decoded by argmax) or the label mapped to
    ``[-1, 1]`` (regression, mapped back), and perturbed by the SAME Gaussian mechanism.

    Sensitivity (replace-one, ours). One replaced row changes its projected row by ``v R``,
    ``|v_l| <= w_l``, and its encoded label by at most ``2 sqrt(2)`` (one-hot) or 2 (regression):
    ``S2 = sqrt(S_R^2 + S_label^2)`` with ``S_R`` from :func:`box_l2_sensitivity`. DPMix's
    ``sigma(R)`` is ``S_R``'s spectral form in units where a row moves by at most 1 (its data have
    ``||x|| <= 1`` with non-negative entries, so a replaced row actually moves by up to ``sqrt(2)``;
    the scale-free form ``sigma_max(R) ||w||_2`` used here is sound for any public box).

    Calibration.

    * ``"analytic"`` (default): ``sigma`` = analytic Gaussian mechanism (Balle & Wang 2018) for
      ``S2`` with ``S_R = min(sigma_max(R) ||w||_2, sum_l w_l ||R_l||_2)``: exactly (eps, delta).
    * ``"paper"``: ``sigma = S2 sqrt(2 (ln(1/(2 delta)) + eps)) / eps`` with the spectral
      ``S_R = sigma_max(R) ||w||_2`` (:func:`kenthapadi_sigma`, the form of DPPro Lemma 3 / Thm 2
      that DPMix cites). The extracted DPMix text lacks the factor 2 under the root; read literally,
      ``sigma = S2 sqrt(ln(1/(2 delta)) + eps)/eps`` is NOT sound (its exact delta exceeds the target
      by up to 229x at delta = 1e-8), so the cited sound form is used. It is conservative; the
      epsilon it actually achieves for the drawn ``R`` is in ``details["epsilon_achieved"]``.

    Parameters
    ----------
    epsilon : float, default 1.0
        (> 0; ``inf`` = NOT PRIVATE, zero noise.)
    delta : float, default 1e-5
        In (0, 1); ``< 0.5`` for ``calibration="paper"``.
    n_components : int, optional
        ``k``, ``1 <= k < n_features``; default ``min(10, d - 1)`` (DPMix Table II uses 50-400 on
        784-pixel images).
    calibration : {"analytic", "paper"}, default "analytic"
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`.

    Released table: ``n`` rows ``z1..zk`` plus the decoded label column. ``transform_arrays``:
    ``R``, ``center`` (zeros), ``bounds``; ``transform(x) = scale_to_box(clip(x)) @ R``.

    Raises
    ------
    ValueError
        ``n_components >= n_features``, ``delta`` outside (0, 1) (or ``>= 0.5`` for "paper"),
        ``epsilon <= 0``, ``n_samples`` different from the number of rows.
    """

    name = "rp-gaussian"
    title = "Random projection + Gaussian (DPMix baseline)"
    summary = ("Baseline: project every row with a public Gaussian random matrix and add Gaussian "
               "noise calibrated to the projection's spectral norm (replace-one).")
    citation = DPMIX_RP_CITATION
    params = (
        EPSILON,
        DELTA,
        _N_COMPONENTS_JL,
        Param("calibration", "choice", "analytic", "analytic Gaussian mechanism (exact) or the "
              "paper's sigma(R) sqrt(2(ln(1/(2 delta)) + eps))/eps (sound, conservative).",
              choices=("analytic", "paper"), privacy=True),
    )
    neighbouring = "replace-one"
    guarantee_kind = "approx"
    space = "projected"
    baseline = True

    def _release(
        self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator,
        n_samples: int | None, *, bits: BitSource,
    ) -> Release:
        check_one_row_per_input(n_samples, data.n_samples, "rp-gaussian")
        n, d = data.X.shape
        k = resolve_n_components(params["n_components"], d)
        eps, delta, calibration = params["epsilon"], params["delta"], params["calibration"]
        if calibration == "paper":
            kenthapadi_sigma(1.0, 1.0, delta)  # validates delta < 0.5 before any randomness
        R = gaussian_projection(d, k, rng)
        widths = box_widths(data.bounds)
        s_r, s_r_spectral = box_l2_sensitivity(R, widths)
        encoded, s_label, decode = _encode_labels(data)
        s2 = math.hypot(s_r, s_label)
        if calibration == "paper":
            s2_used = math.hypot(s_r_spectral, s_label)
            sigma = kenthapadi_sigma(s2_used, eps, delta)
            formula = ("S2 = sqrt((sigma_max(R) ||w||_2)^2 + S_label^2); sigma = S2 sqrt(2(ln(1/(2 delta))"
                       " + eps))/eps")
            source = f"{DPMIX_RP_CITATION}; DPPro Lemma 3 / Thm 2"
        else:
            s2_used = s2
            sigma = analytic_gaussian_sigma(s2, eps, delta)
            formula = ("S2 = sqrt(min(sigma_max(R) ||w||_2, sum_l w_l ||R_l||_2)^2 + S_label^2); "
                       "sigma = analytic Gaussian(S2, eps, delta)")
            source = f"{DPMIX_RP_CITATION}; Balle & Wang, ICML 2018, Thm 8 / Alg. 1"
        block = np.column_stack([_box_projection(data.X, bounds=data.bounds, center=np.zeros(d), M=R),
                                 encoded])
        # one replaced row moves its projected row and encoded label: n_changed = its width
        n_changed = block.shape[1]
        s2_rounded = s2
        if sigma > 0 and calibration == "paper":  # the published sigma, on a grid: count the rounding
            g, s2_rounded = dpnoise.gaussian_grid(s2, n_changed, sigma)
            plan = dpnoise.gaussian_plan(sigma, grid=g, l2_sensitivity=s2, n_changed=n_changed, bits=bits)
        elif sigma > 0:  # recalibrated at the rounding-inflated sensitivity, the sampler's slack reserved
            eps_i, delta_i = dpnoise.reserve_slack(eps, delta, n_changed)
            plan = dpnoise.calibrated_gaussian_plan(s2, lambda s: analytic_gaussian_sigma(s, eps_i, delta_i),
                                                    n_changed=n_changed, bits=bits)
            sigma, s2_rounded = plan.scale, plan.sensitivity_used
        # exact epsilon of this sigma for the drawn R (and the grid rounding)
        reserved = sigma > 0 and calibration != "paper"
        achieved = gaussian_epsilon(sigma, s2_rounded, delta_i if reserved else delta)
        draws = [plan.add(block)] if sigma > 0 else []
        if draws:
            block = draws[0].values
        labels, label_columns = decode(block[:, k:])
        noise = [NoiseRecord(
            statistic=f"projected rows scale(X) R ({n} x {k})"
            + (" with the encoded label appended" if data.task != "unsupervised" else ""),
            sensitivity=s2_used, scale=sigma, distribution="gaussian", norm="L2", epsilon=eps,
            delta=delta, formula=formula, source=source, **(dpnoise.record_fields(draws[0]) if draws else {}),
        )]
        details = {
            "n_components": k,
            "scaling": BOX,
            "sensitivity_projection": s_r,
            "sensitivity_projection_spectral": s_r_spectral,
            "sensitivity_label": s_label,
            "sigma_max_R": float(np.linalg.norm(R, 2)),
            "epsilon_achieved": achieved,
            "noise_variance": sigma * sigma,
            "labels": None if data.task == "unsupervised" else (
                "appended to the projected row (one-hot of height 2 / label mapped to [-1, 1]) under "
                "the same Gaussian mechanism, then decoded (argmax / mapped back): post-processing"),
            "assumptions": ["n is public (bounded DP, replace-one neighbours)",
                            "R is drawn independently of the data and released"],
        }
        if reserved:
            eps_total, delta_total, details["noise_slack"] = dpnoise.reserved_guarantee(
                draws, eps, delta, achieved, delta_i)
        elif draws:  # the paper's sigma: its epsilon at the rounded sensitivity, plus the slack
            eps_total, delta_total, details["noise_slack"] = dpnoise.fixed_sigma_guarantee(
                draws, lambda dl: gaussian_epsilon(sigma, s2_rounded, dl), max(eps, achieved),
                delta, n_changed)
        else:
            eps_total, delta_total, details["noise_slack"] = dpnoise.slack_details(
                [], max(eps, achieved), delta)
        guarantee = Guarantee(epsilon=eps_total, delta=delta_total, neighbouring="replace-one",
                              kind="approx")
        return self._new_release(
            data, params, values=block[:, :k], columns=projected_columns(k), guarantee=guarantee,
            noise=noise, calibration=calibration, labels=labels, label_columns=label_columns,
            details=details, transform_arrays={"R": R, "center": np.zeros(d), "bounds": data.bounds},
            transform_fn=partial(_box_projection, bounds=data.bounds.copy(), center=np.zeros(d), M=R),
        )


def _encode_labels(data: PreparedInput) -> tuple[np.ndarray, float, Any]:
    """Encoded labels, their L2 sensitivity and the decoder (post-processing) for rp-gaussian.

    Classification: one-hot of height 2 (a replaced row moves two entries by 2: ``2 sqrt(2)``),
    decoded by argmax. Regression: the label mapped from its public bounds to ``[-1, 1]``
    (sensitivity 2), mapped back. Unsupervised: nothing.
    """
    n = data.n_samples
    name = [data.label_name or "label"]
    if data.task == "classification":
        assert data.classes is not None and data.y is not None
        classes = data.classes
        onehot = np.zeros((n, classes.size))
        onehot[np.arange(n), data.y] = 2.0
        return onehot, 2.0 * math.sqrt(2.0), lambda b: (classes[np.argmax(b, axis=1)], name)
    if data.task == "regression":
        assert data.y is not None and data.label_bounds is not None
        lb = data.label_bounds
        width = 2.0 if lb[1] > lb[0] else 0.0
        return (label_to_unit(data.y, lb, 1.0)[:, None], width,
                lambda b: (unit_to_label(b[:, 0], lb, 1.0), name))
    return np.zeros((n, 0)), 0.0, lambda b: (None, [])
