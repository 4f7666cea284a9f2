"""modips: samples of a DP Gaussian (one per class) in the original ``d``-dimensional space; pure
epsilon-DP.

Liu's model-based synthesis (arXiv:1606.08052, 2016), the Gaussian version RON-Gauss (section
5.2.4) and PCA-Gauss (section II) compare against. Neighbouring relation: replace-one (``n``
public). Classification follows RON-Gauss Alg. 5 / PCA-Gauss Alg. 3: one Gaussian per class; with
``label_privacy="protected"`` (default) the class sizes come from a DP class histogram and the
per-class statistics are noisy sums, so a replaced row may change class; ``"within-class"``
keeps the papers' algorithm (class sizes public, stated on the card). Regression labels are
modelled jointly with the features.

Common pre-processing. Features are clipped to their public bounds and mapped affinely onto
``[-1, 1]`` (:func:`~dpcore.mechanisms._box.scale_to_box`; the papers' experiments scale the
data to ``[-1, 1]``, PCA-Gauss VIII-B). A public affine map costs no budget and does not change the
signal-to-noise ratio of an identity query (PCA-Gauss Theorem 2). Feature ``l`` then ranges over an
interval of width ``w_l = 2`` (``0`` for a constant column).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpcore import noise as dpnoise
from dpcore.calibration import (
    LAPLACE_SOURCE,
    EpsilonSplit,
    laplace_scale,
    psd_repair,
)
from dpcore.mechanisms._box import (
    BOX,
    lap_pca_sensitivity,
    scale_to_box,
)
from dpcore.mechanisms._gaussian_model import (
    gaussian_samples,
    label_to_unit,
    unit_to_label,
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
from dpcore.mechanisms.base import Mechanism
from dpcore.noise import BitSource
from dpcore.preprocessing import PreparedInput
from dpcore.release import Guarantee, NoiseRecord, Release
from dpcore.schema import EPSILON, Param

__all__ = ['MODIPS', 'gaussian_model_sensitivities']


LIU_CITATION = ("F. Liu, Model-based differentially private data synthesis, arXiv:1606.08052, 2016 "
                "(Gaussian version, as implemented by RON-Gauss section 5.2.4 and PCA-Gauss section "
                "II)")


def gaussian_model_sensitivities(k: int, n_rows: int) -> tuple[float, float]:
    """L1 sensitivities of the mean and of the upper triangle of the second moment of ``n_rows``
    vectors in ``[-1, 1]^k`` (replace-one): ``(2k/n, k(k+1)/(2n))``.

    Mean: ``||x - x'||_1 <= sum_l w_l = 2k``. Second moment, upper triangle with the diagonal (SPEC
    section 1), proof: with ``u = (x + x')/2``, ``v = (x - x')/2``, ``x x^T - x' x'^T = 2(u v^T + v u^T)``
    and ``|u_l| + |v_l| = max(|x_l|, |x'_l|) <= 1``. With ``A = ||u||_1``, ``B = ||v||_1``, the full
    matrix has L1 norm ``<= 4AB`` and the diagonal ``4 sum_l |u_l v_l|``, so the upper triangle has
    ``(full + diag)/2 <= 2AB + 2 sum_l |u_l||v_l| <= 2 (k/2)^2 + 2 k/4 = k(k+1)/2``; ``x = 1``,
    ``x' = 0`` attains it (tight). Equals PCA-Gauss's LapPCA "tight" value
    (:func:`~dpcore.mechanisms._box.lap_pca_sensitivity`), which is reused.
    """
    return 2.0 * k / n_rows, lap_pca_sensitivity(k, n_rows, calibration="tight")


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
        data.diagnostics.update(diag)
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

