"""modips: samples of a DP Gaussian (one per class) in the original ``d``-dimensional space; pure
epsilon-DP (or (epsilon, delta) with ``noise="gaussian"``).

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
interval of width ``w_l = 2`` (``0`` for a constant column). Columns of a public one-hot group are
mapped onto ``[0, 1]`` instead, with the group's L1 norm capped at 1
(:class:`~dpcore.mechanisms._box.BoxMap`), so every sensitivity uses the schema's row-norm bound
(:func:`dpcore.preprocessing.row_norm_bound`; on Adult the second moment's L1 sensitivity is
``14^2 + 14 = 210`` instead of ``105 * 106/2 = 5565``).

``noise="gaussian"`` ((epsilon, delta)-DP, issue 13): Gaussian noise from the L2 sensitivities of
:func:`gaussian_model_l2_sensitivities`, composed in zCDP
(:class:`~dpcore.mechanisms._gaussian_model.ZCDPBudget`; ``delta`` default ``min(1e-5, n^-1.5)``).
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Any

import numpy as np

from dpcore import noise as dpnoise
from dpcore.calibration import (
    LAPLACE_SOURCE,
    EpsilonSplit,
    check_delta,
    delta_or_default,
    laplace_scale,
    psd_repair,
)
from dpcore.marginals import MARGINAL_FRACTION_PARAM, MARGINALS_PARAM
from dpcore.mechanisms._box import (
    BOX,
    BoxMap,
    lap_pca_sensitivity,
)
from dpcore.mechanisms._gaussian_model import (
    GAUSSIAN_DELTA,
    NOISE,
    FittedGaussian,
    GaussianGenerator,
    GaussianModel,
    OutputMap,
    ZCDPBudget,
    label_to_unit,
    mixture_weights,
    second_moment_l2_sensitivity,
)
from dpcore.mechanisms._labels import (
    HISTOGRAM_FRACTION,
    LABEL_PRIVACY,
    WITHIN_CLASS,
    divide_by_count,
    dp_class_histogram,
    histogram_weights,
    label_privacy_assumption,
    rows_by_class,
)
from dpcore.mechanisms._marginals import marginal_plan, marginal_share, measure_marginals
from dpcore.noise import BitSource
from dpcore.preprocessing import PreparedInput, RowNormBound
from dpcore.release import Guarantee, NoiseRecord
from dpcore.schema import EPSILON, Param

__all__ = ['MODIPS', 'gaussian_model_l2_sensitivities', 'gaussian_model_sensitivities']


LIU_CITATION = ("F. Liu, Model-based differentially private data synthesis, arXiv:1606.08052, 2016 "
                "(Gaussian version, as implemented by RON-Gauss section 5.2.4 and PCA-Gauss section "
                "II)")


def gaussian_model_sensitivities(k: int, n_rows: int, bound: RowNormBound | None = None
                                 ) -> tuple[float, float]:
    """L1 sensitivities of the mean and of the upper triangle of the second moment of ``n_rows``
    vectors in ``[-1, 1]^k`` (replace-one): ``(2k/n, k(k+1)/(2n))``.

    Mean: ``||x - x'||_1 <= sum_l w_l = 2k``. Second moment, upper triangle with the diagonal (SPEC
    section 1), proof: with ``u = (x + x')/2``, ``v = (x - x')/2``, ``x x^T - x' x'^T = 2(u v^T + v u^T)``
    and ``|u_l| + |v_l| = max(|x_l|, |x'_l|) <= 1``. With ``A = ||u||_1``, ``B = ||v||_1``, the full
    matrix has L1 norm ``<= 4AB`` and the diagonal ``4 sum_l |u_l v_l|``, so the upper triangle has
    ``(full + diag)/2 <= 2AB + 2 sum_l |u_l||v_l| <= 2 (k/2)^2 + 2 k/4 = k(k+1)/2``; ``x = 1``,
    ``x' = 0`` attains it (tight). Equals PCA-Gauss's LapPCA "tight" value
    (:func:`~dpcore.mechanisms._box.lap_pca_sensitivity`), which is reused.

    ``bound`` (the rows' public :class:`~dpcore.preprocessing.RowNormBound`, one-hot groups
    mapped onto ``[0, 1]``): mean ``l1_diameter/n`` (``||x - x'||_1``, proof in
    :func:`~dpcore.preprocessing.row_norm_bound`) and second moment
    ``min(k(k+1)/2, row_second_moment_l1(bound))/n``
    (:func:`~dpcore.mechanisms._box.row_second_moment_l1`); without groups these are the values above.
    """
    if bound is None:
        return 2.0 * k / n_rows, lap_pca_sensitivity(k, n_rows, calibration="tight")
    return (min(2.0 * k, bound.l1_diameter) / n_rows,
            lap_pca_sensitivity(k, n_rows, calibration="tight", bound=bound))


def gaussian_model_l2_sensitivities(bound: RowNormBound, n_rows: int = 1, per_class_sums: bool = False
                                    ) -> tuple[float, float]:
    """L2 sensitivities (``noise="gaussian"``) of the mean and of the upper triangle (diagonal once)
    of the second moment of ``n_rows`` rows with the public ``bound``, replace-one.

    Mean: ``||z - z'||_2 <= l2_diameter`` (:func:`~dpcore.preprocessing.row_norm_bound`); per-class
    sums when the record may change class (``per_class_sums``): also ``sqrt(||z||^2 + ||z'||^2) <=
    sqrt(2) l2``, so the larger of the two. Second moment:
    :func:`~dpcore.mechanisms._gaussian_model.second_moment_l2_sensitivity` with ``||z||^2 <= l2^2`` and
    ``||z||_4^4 <= l4_power4`` (covers the class change too). Both divided by ``n_rows``.
    Without one-hot groups, ``k`` columns: ``2 sqrt(k)/n`` and ``sqrt(k^2 + k)/n``.
    """
    mean = bound.l2_diameter
    if per_class_sums:
        mean = max(mean, math.sqrt(2.0) * bound.l2)
    return mean / n_rows, second_moment_l2_sensitivity(bound.l2**2, bound.l4_power4) / n_rows


def _with_label(bound: RowNormBound) -> RowNormBound:
    """``bound`` for rows with a regression label in ``[-1, 1]`` appended (one more numeric)."""
    return dataclasses.replace(
        bound, l2=math.sqrt(bound.l2**2 + 1), l1=bound.l1 + 1,
        l2_diameter=math.sqrt(bound.l2_diameter**2 + 4), l1_diameter=bound.l1_diameter + 2,
        l4_power4=bound.l4_power4 + 1, max_pair_l1=bound.max_pair_l1 + 1, n_numeric=bound.n_numeric + 1)


class MODIPS(GaussianGenerator):
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
    noise : {"auto", "laplace", "gaussian"}, default "auto"
        ``"auto"``: Gaussian noise when ``delta`` is given, Laplace (pure epsilon) otherwise
        (:func:`dpcore.calibration.resolve_noise`; the card's ``details["noise_choice"]``).
    delta : float, optional
        Gaussian noise only; empty with ``noise="gaussian"``: ``min(1e-5, n^-1.5)``.
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`.

    Notes
    -----
    Released table: ``n_samples`` rows (default ``n``) in the input's feature columns and units
    (not clipped to the bounds), plus labels for supervised tasks. No transform is needed: the
    release lives in the feature space (``Release.transform`` is the identity).

    Guarantee: pure ``eps_mu + eps_Sigma``-DP, replace-one (class sizes public for
    classification; neighbours then replace a record by another of the same class and the class
    label is not protected). The noise on the ``k(k+1)/2`` second-moment entries grows like
    ``k^2/n``: that is the point the RON-Gauss and PCA-Gauss papers make with this baseline.

    ``fit(X, y)`` / ``sample(n_samples)`` (:class:`~dpcore.mechanisms._gaussian_model.GaussianGenerator`):
    ``model_`` holds ``N(mu_DP, Sigma_DP)`` (one per class) on the box-scaled features (and label);
    ``output_map_`` undoes the box map.

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
        NOISE,
        GAUSSIAN_DELTA,
        MARGINALS_PARAM,
        MARGINAL_FRACTION_PARAM,
    )
    neighbouring = "replace-one"
    guarantee_kind = "pure"
    space = "features"
    baseline = True
    peak_square_matrices = 3  # second moment, its noise, the repaired covariance (per class)
    peak_row_copies = 8  # scaled rows, per-class copies, synthetic rows and their draws

    def _fit(self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator, *,
             bits: BitSource, n_samples: int | None = None) -> FittedGaussian:
        """The DP Gaussian (one per class for classification) of the box-scaled rows ``[z, y]``, and
        the public map back to the original units (``fit``); every noise draw from ``bits``."""
        n, d = data.X.shape
        fractions = dict(zip(("mean", "covariance"), params["epsilon_split"], strict=True))
        protected = data.task == "classification" and params["label_privacy"] == "protected"
        if protected:
            h = params["histogram_fraction"]
            fractions = {"histogram": h, **{k: (1 - h) * v for k, v in fractions.items()}}
        lo, hi = data.bounds[:, 0], data.bounds[:, 1]
        active = hi > lo
        bmap = BoxMap.of(data)  # numerics onto [-1, 1], one-hot groups onto [0, 1] (row-norm bound)
        bound = bmap.bound
        regression = data.task == "regression"
        label_map = None
        if regression:
            assert data.y is not None and data.label_bounds is not None
            label_map = (data.label_bounds, 1.0)
            bound = _with_label(bound)
        if int(active.sum()) + regression == 0:
            raise ValueError("bounds: every feature has lo == hi, so there is nothing to model")
        n_classes = None
        if data.task == "classification":
            assert data.y is not None and data.classes is not None
            n_classes = data.classes.size
        # one pass: the rows, sums and second moments of z = [box-mapped features, y] per class
        kernel = partial(_group_moments, bmap=bmap, active=active, label_map=label_map, n_classes=n_classes)
        labels = data.y if data.task != "unsupervised" else None
        sizes, totals, grams = data.engine.sums(kernel, data.X, labels)
        sizes = np.rint(sizes).astype(np.int64)
        gauss = None
        gaussian = params["noise"] == "gaussian"
        if gaussian:
            params = {**params, "delta": delta_or_default(params["delta"], n)}
        marg = marginal_share(params, data)
        n_tables = marginal_plan(data, 0.0).n_tables if marg else 0
        if marg:  # the marginals' share first, the model's parts scaled into the rest
            fractions = {"marginals": marg, **{k: (1 - marg) * v for k, v in fractions.items()}}
        if gaussian:
            delta = check_delta(params["delta"])
            k = totals.shape[1]
            n_groups = data.classes.size if data.task == "classification" and data.classes is not None else 1
            coords = (2 if protected else 1) * n_groups * (k + k * (k + 1) // 2) + (2 if protected else 0)
            gauss = ZCDPBudget.plan(params["epsilon"], delta, fractions, coords + 2 * n_tables, bits)
            split = gauss.split
        else:
            split = EpsilonSplit.from_fractions(params["epsilon"], fractions)
        marginals = None
        if marg:
            marginals, marg_rec = measure_marginals(data, marg, split, gauss, bits)
        diag: dict[str, Any] = {"mean_dp": {}, "second_moment_dp": {}, "mean": {}, "second_moment": {}}
        noise: list[NoiseRecord] = []
        noisy_counts = None
        if data.task == "classification":
            assert data.classes is not None
            if protected:
                noisy_counts, hist_rec = dp_class_histogram(
                    None, data.classes.size, split["histogram"], bits, "MODIPS per class (label privacy)",
                    gauss=gauss, counts=sizes)
                noise.append(hist_rec)
                diag["class_counts_dp"] = noisy_counts
                # classes and weights chosen from the DP histogram only
                modelled, weights = mixture_weights(histogram_weights(noisy_counts), n_samples)
                groups = [(c, f" of class {data.classes[c]!s}") for c in modelled]
            else:
                modelled, weights = mixture_weights(sizes)
                groups = [(c, f" of class {data.classes[c]!s} (n_c = {sizes[c]})") for c in modelled]
            classes = data.classes[modelled]
        else:
            groups, weights, classes = [(0, "")], np.ones(1), None
        means, covariances = [], []
        for c, tag in groups:
            count = None if noisy_counts is None else float(noisy_counts[c])
            mu, cov, recs = _dp_gaussian(int(sizes[c]), totals[c], grams[c], split, bits, tag, diag, key=c,
                                         count=count, bound=bound, gauss=gauss)
            means.append(mu)
            covariances.append(cov)
            noise += recs
        if marginals is not None:
            noise.append(marg_rec)
        model = GaussianModel(weights, np.array(means), np.array(covariances), classes)
        # synthetic rows go back to the original units: x = centre + z/factor on the active features
        output_map = OutputMap(d, label_bounds=data.label_bounds if regression else None, label_scale=1.0,
                               box_lo=lo, box_centre=bmap.centre, box_factor=bmap.factor, active=active)
        label_columns = [data.label_name or "label"] if data.task != "unsupervised" else []
        k = totals.shape[1]
        assumptions = ["n is public (bounded DP, replace-one neighbours)",
                       f"{BOX}; synthetic rows are mapped back to the original units"]
        if data.task == "classification":
            assumptions.append(label_privacy_assumption(params["label_privacy"]))
        if regression:
            assumptions.append(f"labels lie in the public label_bounds {data.label_bounds}, mapped to "
                               "[-1, 1] and modelled jointly with the features")
        gaussian_details: dict[str, Any] = {}
        guarantee = Guarantee(epsilon=math.fsum(split.parts), delta=0.0, kind="pure",
                              neighbouring=WITHIN_CLASS if data.task == "classification"
                              and not protected else "replace-one")
        if gauss is not None:
            eps_g, delta_g, gaussian_details = gauss.guarantee(self.delta is not None)
            guarantee = dataclasses.replace(guarantee, epsilon=eps_g, delta=delta_g, kind="approx")
        details = {
            "noise": params["noise"],
            **gaussian_details,
            "row_norm_bound": bmap.bound.card(),
            "model": "one Gaussian per class (GMM)" if data.task == "classification" else "Gaussian",
            "model_dimension": k,
            "n_constant_features": int(d - active.sum()),
            "epsilon_parts": split.as_dict(),
            "assumptions": assumptions,
            **({"marginals": marginals.card()} if marginals is not None else {}),
        }
        template = self._new_release(
            data, params, values=np.empty((0, d)), columns=list(data.feature_names),
            guarantee=guarantee, noise=noise, calibration="sound", label_columns=label_columns,
            details=details, marginals=marginals,
        )
        data.diagnostics.update(diag)
        return FittedGaussian(model, output_map, template)


def _group_moments(X: Any, y: Any = None, *, bmap: BoxMap, active: np.ndarray,
                   label_map: tuple[tuple[float, float], float] | None, n_classes: int | None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sufficient statistics of MODIPS: for the rows ``z = [box-mapped active features, label
    mapped to [-1, 1] (regression)]``, per class (``n_classes``, ``y`` the class indices) or for all
    rows (one group): ``(rows (G,), sum of z (G, k), z^T z (G, k, k))``: a kernel of the rows ``X``
    and their labels ``y`` (the release sums it over the table's blocks: ``data.engine.sums``)."""
    Z = bmap.apply(X, clip=False)[:, active]
    if label_map is not None:
        Z = np.column_stack([Z, label_to_unit(y, *label_map)])
    if n_classes is None:
        return np.array([Z.shape[0]]), Z.sum(axis=0)[None], (Z.T @ Z)[None]
    k = Z.shape[1]
    sizes, totals, grams = np.zeros(n_classes, dtype=np.int64), np.zeros((n_classes, k)), \
        np.zeros((n_classes, k, k))
    for c, rows in enumerate(rows_by_class(y, n_classes)):
        Zc = Z[rows]
        sizes[c], totals[c], grams[c] = Zc.shape[0], Zc.sum(axis=0), Zc.T @ Zc
    return sizes, totals, grams


def _dp_gaussian(
    n: int, total: np.ndarray, gram: np.ndarray, split: EpsilonSplit, bits: BitSource, tag: str,
    diag: dict[str, Any], key: Any, count: float | None = None, bound: RowNormBound | None = None,
    gauss: ZCDPBudget | None = None,
) -> tuple[np.ndarray, np.ndarray, list[NoiseRecord]]:
    """DP mean, DP second moment (upper triangle, mirrored) and PSD-repaired covariance of ``n``
    rows ``Z`` (entries in ``[-1, 1]``) from their sum ``total`` and ``gram = Z^T Z``
    (:func:`_group_moments`), with their noise records; exact and noisy statistics go to
    ``diag`` (exploration only).

    ``count`` (a DP class count, labels protected): noisy per-class *sums* over the count. Stacked
    over the classes, the sums have L1 sensitivities ``2k`` (one vector of L1 norm ``<= k`` leaves
    a class and one joins another, or one difference ``<= 2k``) and ``k(k+1)`` (upper triangle: one
    term ``(||z||_1^2 + ||z||^2)/2 <= k(k+1)/2``, two of them when the record changes class; the
    within-class difference is ``<= k(k+1)/2``). With the rows' public ``bound`` (one-hot groups):
    ``2 l1`` and ``l1^2 + l2^2`` (the same arguments with ``||z||_1 <= l1``, ``||z||_2 <= l2``; without
    groups ``l1 = l2^2 = k``). ``gauss``: Gaussian noise in the zCDP budget
    (:func:`gaussian_model_l2_sensitivities`)."""
    k = total.size
    if count is None:
        s1_mu, s1_m = gaussian_model_sensitivities(k, n, bound)
        mean, second = total / n, gram / n
    else:
        s1_mu, s1_m = 2.0 * k, k * (k + 1.0)
        if bound is not None:
            s1_mu, s1_m = min(s1_mu, 2.0 * bound.l1), min(s1_m, bound.l1**2 + bound.l2**2)
        mean, second = total, gram
    # grid rounding: with protected labels a replaced record may change two classes' statistics
    changed = 1 if count is None else 2
    if gauss is not None:
        assert bound is not None
        s2_mu, s2_m = gaussian_model_l2_sensitivities(bound, 1 if count is not None else n, count is not None)
        how = ("per-class sums, all classes jointly (the replaced record may change class); divided by "
               "the DP count" if count is not None else "n public")
        mu, rec_mu = gauss.add(mean, "mean", s2_mu, changed * k, laplace_s1=s1_mu, statistic="mean" + tag,
                               formula=f"S2 from the row-norm bound (gaussian_model_l2_sensitivities); {how}",
                               source=LIU_CITATION)
        M, rec_m = gauss.add(second, "covariance", s2_m, changed * k * (k + 1) // 2, laplace_s1=s1_m,
                             matrix=True, statistic="second moment (1/n) Z^T Z" + tag,
                             formula=f"S2 = sqrt(l2^4 + l4^4) (second_moment_l2_sensitivity); {how}; "
                                     "covariance = psd_repair(M - mu mu^T)", source=LIU_CITATION)
        if count is not None:
            mu, M = divide_by_count(mu, count), divide_by_count(M, count)
            mean, second = divide_by_count(mean, max(n, 1)), divide_by_count(second, max(n, 1))
        diag["mean"][key], diag["second_moment"][key] = mean, second
        diag["mean_dp"][key], diag["second_moment_dp"][key] = mu, M
        return mu, psd_repair(M - np.outer(mu, mu)), [rec_mu, rec_m]
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
            formula=("S1 = min(2k, l1_diameter)/n (k coordinates of width 2, or the row-norm bound); "
                     "b = S1/eps_mu"
                     if count is None else "S1 = min(2k, 2 l1) (per-class sums, all classes jointly; the "
                     "replaced record may change class); b = S1/eps_mu; mean = sum / DP count"),
            source=f"{LIU_CITATION}; {LAPLACE_SOURCE}",
        ),
        NoiseRecord(
            statistic="second moment (1/n) Z^T Z" + tag, sensitivity=s1_m, scale=b_m,
            distribution="laplace", norm="L1", epsilon=split["covariance"], delta=0.0,
            **dpnoise.record_fields(m_draw),
            formula=("S1 = min(k(k+1)/2, row_second_moment_l1)/n (upper triangle with diagonal; proof "
                     "in gaussian_model_sensitivities)" if count is None else "S1 = min(k(k+1), l1^2 + "
                     "l2^2) (per-class "
                     "sums, upper triangle, the replaced record may change class; divided by the "
                     "DP count)") + "; b = S1/eps_Sigma, mirrored; covariance = "
                    "psd_repair(M - mu mu^T) (post-processing)",
            source=f"{LIU_CITATION}; {LAPLACE_SOURCE}; upper triangle mirrored, PSD repair (post-processing)",
        ),
    ]
    return mu, psd_repair(M - np.outer(mu, mu)), recs

