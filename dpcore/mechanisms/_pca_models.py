"""PCA-Gauss's noisy Gaussian models from its statistics (SPEC section 3): Alg. 2 (one Gaussian of
``[x^, y]`` with a DP mean, :func:`alg2_model`) and Alg. 3 (one Gaussian per class, separate or tied
covariances, public or DP class sizes, :func:`alg3_model`), their noise records, and the
post-processing of the noisy estimates (:func:`regression_covariance`, :func:`shrink_class_means`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpcore import noise as dpnoise
from dpcore.calibration import (
    EpsilonSplit,
    laplace_scale,
    psd_repair,
    shrink_noisy_covariance,
)
from dpcore.mechanisms._box import BoxMap
from dpcore.mechanisms._gaussian_model import (
    GaussianModel,
    ZCDPBudget,
    add_matrix_noise,
    mixture_weights,
    second_moment_l2_sensitivity,
)
from dpcore.mechanisms._labels import (
    divide_by_count,
    histogram_weights,
)
from dpcore.mechanisms._pca_statistics import (
    SOURCE,
    _norm,
    _PCAStats,
    class_l2_sensitivities,
    class_sum_sensitivities,
    pca_mean_sensitivity,
    pca_second_moment_sensitivity,
    tied_second_moment_sensitivities,
)
from dpcore.noise import BitSource
from dpcore.preprocessing import PreparedInput
from dpcore.release import NoiseRecord


def alg2_model(data: PreparedInput, stats: _PCAStats, p: int, split: EpsilonSplit,
          cal: str, bits: BitSource, diag: dict[str, Any], gauss: ZCDPBudget | None = None, *,
          W: np.ndarray | None = None, bmap: BoxMap | None = None,
          ) -> tuple[GaussianModel, list[NoiseRecord], np.ndarray | None]:
    """Alg. 2 with a DP mean: ``N(mu_DP, M_DP - mu_DP mu_DP^T)`` of ``z = [x^, y]``, and the
    mean's part outside the span of ``W`` in the mapped units (``offset``, for decoding), or
    ``None``.

    The paper's Alg. 2 samples ``N(0, M_DP)``: it centres the model on the box's centre, so
    at any epsilon the file's columns come out around the midpoints of their public bounds
    (a wage table released mean age 53.0 for 42.4 and mean wage 200 for 111.7 at epsilon =
    10^4). Here, as in the paper's own Alg. 3 and in MODIPS, the mean is released too, with the
    ``"mean"`` part of ``epsilon_split`` (the paper's 0.1 / 0.9 by default), and the covariance
    is its post-processing ``M_DP - mu_DP mu_DP^T``, PSD-repaired.

    Where the statistics pass has the mapped rows' sums (a DP basis), the mean is that of the
    rows ``[z/B, y]`` in all ``d + 1`` coordinates (``||z/B||_2 <= 1``, ``|y| <= 1``): L2
    sensitivity ``2 sqrt(2)/n``, L1 ``(l1_diameter/B + 2)/n`` (the public row-norm bound's L1
    diameter, :func:`dpcore.preprocessing.row_norm_bound`). Its projection ``W^T m`` is the
    model's mean (post-processing, the same noise per coordinate as a ``p``-dimensional mean
    with Gaussian noise), and the rest ``B (m - W W^T m)`` is where the file's rows are centred
    in the ``d - p`` directions the model leaves out (the box centre before). With a public
    basis only ``[x^, y]`` is summed: L2 ``2 sqrt(2)/n``, L1 ``(2 sqrt(p) + 2)/n`` ("tight"; the
    paper's box gives ``2 (p + 1)``), and the left-out directions stay at the box centre.
    """
    assert data.label_bounds is not None and stats.joint is not None and stats.joint_sum is not None
    n = stats.n_rows
    s1 = pca_second_moment_sensitivity(p, n, calibration=cal, supervised=True)
    full = stats.feature_sum is not None and W is not None and bmap is not None
    if full:
        assert W is not None and bmap is not None and stats.feature_sum is not None
        B = _norm(bmap)
        d = W.shape[0]
        values = np.append(stats.feature_sum / B, stats.joint_sum[-1]) / n
        s1_mu = (min(2.0 * d, bmap.bound.l1_diameter) / B + 2.0) / n
        mean_statistic = f"mean of [z/B, y] ({d + 1} coordinates)"
        l1_text = "S1 = (l1_diameter/B + 2)/n (the public row-norm bound; |y| <= 1)"
    else:
        values = stats.joint_sum / n
        s1_mu = (2.0 * (p + 1) if cal == "paper" else 2.0 * math.sqrt(p) + 2.0) / n
        mean_statistic = "mean of [x^, y] (p+1)"
        l1_text = ("S1 = 2 (p + 1) a/n (box)" if cal == "paper" else
                   "S1 = (2 sqrt(p) + 2) a/n (||x^||_2 <= a, |y| <= a)")
    mean_source = (f"{SOURCE}, Alg. 2 with a DP mean (ours: the paper centres on the box centre; "
                   "the mean as in its Alg. 3 and MODIPS)")
    if gauss is not None:
        # [x^, y]: ||x^|| <= 1, |y| <= 1, so ||z||^2 <= 2 and ||z||_4^4 <= 2
        mean, rec_mu = gauss.add(
            values, "mean", 2.0 * math.sqrt(2.0) / n, values.size, laplace_s1=s1_mu,
            statistic=mean_statistic, formula="S2 = 2 sqrt(2)/n (rows of L2 norm <= sqrt(2))",
            source=mean_source)
        noisy, rec = gauss.add(
            stats.joint / n, "covariance", second_moment_l2_sensitivity(2.0, 2.0) / n,
            (p + 1) * (p + 2) // 2, laplace_s1=s1, matrix=True,
            statistic="second moment of [x^, y] ((p+1) x (p+1))",
            formula="S2 = sqrt(6)/n (||x^|| <= 1, |y| <= a = 1; second_moment_l2_sensitivity), "
                    "upper triangle mirrored; covariance = M - mu mu^T (post-processing)",
            source=f"{SOURCE}, Alg. 2 (Gaussian variant)")
        recs = [rec_mu, rec]
    else:
        mu_draw = dpnoise.laplace(values, s1_mu, scale=laplace_scale(s1_mu, split["mean"]),
                                  n_changed=values.size, bits=bits)
        mean = mu_draw.values
        noisy, draw = add_matrix_noise(stats.joint / n, s1, laplace_scale(s1, split["covariance"]), bits,
                                       full_matrix=cal == "paper")
        recs = [NoiseRecord(
            statistic=mean_statistic, sensitivity=s1_mu, scale=mu_draw.scale,
            **dpnoise.record_fields(mu_draw), distribution="laplace", norm="L1", epsilon=split["mean"],
            formula=f"{l1_text}; b = S1/eps_mu; a = 1", source=mean_source), NoiseRecord(
            statistic="second moment of [x^, y] ((p+1) x (p+1))", sensitivity=s1, scale=draw.scale,
            **dpnoise.record_fields(draw),
            distribution="laplace", norm="L1", epsilon=split["covariance"],
            formula=("S1 = (p^2 a^2 + 4 p a^2 + a^2)/n, every entry" if cal == "paper" else
                     "S1 = min(p(p+1)/2 + 2p + 1, p + 2 + 2 sqrt(p)) a^2/n, upper triangle "
                     "mirrored")
            + "; b = S1/eps_Sigma; a = 1; covariance = M - mu mu^T (post-processing)",
            source=f"{SOURCE}, Alg. 2 / Theorem 5")]
    offset = None
    mu = mean
    if full:
        assert W is not None and bmap is not None
        m_x = mean[:-1]
        mu = np.append(W.T @ m_x, mean[-1])
        offset = _norm(bmap) * (m_x - W @ (W.T @ m_x))
    sd = recs[-1].scale * (1.0 if gauss is not None else math.sqrt(2.0))  # per-entry noise sd of M
    repaired = regression_covariance(noisy - np.outer(mu, mu), sd)
    diag.update({"mean_dp": mu, "second_moment_dp": noisy, "covariance_dp_repaired": repaired})
    return GaussianModel.single(mu, repaired), recs, offset

def alg3_model(data: PreparedInput, stats: _PCAStats, p: int, split: EpsilonSplit,
          cal: str, bits: BitSource, diag: dict[str, Any],
          noisy_counts: np.ndarray | None = None, gauss: ZCDPBudget | None = None,
          n_samples: int | None = None, shrink: bool = False, tied: bool = False,
          ) -> tuple[GaussianModel, list[NoiseRecord]]:
    """Alg. 3. ``noisy_counts`` (labels protected): per-class noisy sums over the DP counts,
    sensitivities of :func:`class_sum_sensitivities`; else the paper's public class sizes.
    ``gauss``: Gaussian noise in the zCDP budget (:func:`class_l2_sensitivities`). ``shrink``:
    class covariances by :func:`~dpcore.calibration.shrink_noisy_covariance` instead of
    :func:`~dpcore.calibration.psd_repair` (``covariance_repair="shrink"``). ``tied``
    (``covariance_type="tied"``): one pooled within-class covariance from the second moment of
    all rows (:func:`tied_second_moment_sensitivities`) instead of one second moment per class."""
    assert data.classes is not None and stats.sizes is not None
    sizes = stats.sizes
    protected = noisy_counts is not None
    class_weights = histogram_weights(noisy_counts) if protected else sizes
    # classes and weights chosen from the DP histogram (or the public sizes) only
    modelled, weights = mixture_weights(class_weights, n_samples)
    # tied: every class with a positive weight enters the pooled covariance
    estimated, shares = mixture_weights(class_weights) if tied else (modelled, weights)
    if protected:
        s1_mu, s1_m = class_sum_sensitivities(p, calibration=cal)
        diag["class_counts_dp"] = noisy_counts
    means, covariances, recs = {}, [], []
    mean_sd: dict[int, float] = {}
    diag.update({"class_sizes": sizes, "mu_dp": {}, "second_moment_dp": {}})
    zero = (np.zeros(p), np.zeros((p, p)))
    for c in estimated:
        n_c = int(sizes[c])
        total, second = stats.per_class.get(int(c), zero) if stats.per_class else zero
        if protected:
            tag = f" of class {data.classes[c]!s}"
            stat_mu, stat_m, count = total, second, float(noisy_counts[c])
        else:
            tag = f" of class {data.classes[c]!s} (n_c = {n_c})"
            s1_mu = pca_mean_sensitivity(p, n_c, calibration=cal)
            s1_m = pca_second_moment_sensitivity(p, n_c, calibration=cal)
            stat_mu, stat_m, count = total / n_c, second / n_c, None
        # grid rounding: with protected labels a replaced record may change two classes' sums
        changed = 1 if count is None else 2
        if gauss is not None:
            s2_mu, s2_m = class_l2_sensitivities(1 if protected else n_c)
            per = "" if protected else "/n_c"
            how = ("per-class sums, all classes jointly (a record may change class); divided by the "
                   "DP count" if protected else "class sizes public")
            mu, rec_mu = gauss.add(
                stat_mu, "mean", s2_mu, changed * p, laplace_s1=s1_mu,
                statistic=("sum" if protected else "mean") + " of PCA features" + tag,
                formula=f"S2 = 2{per} (||x^||_2 <= 1; class_l2_sensitivities); {how}",
                source=f"{SOURCE}, Alg. 3 (Gaussian variant)")
            class_recs = [rec_mu]
            if not tied:
                noisy, rec_m = gauss.add(
                    stat_m, "covariance", s2_m, changed * p * (p + 1) // 2, laplace_s1=s1_m,
                    matrix=True, statistic="second moment of PCA features" + tag,
                    formula=f"S2 = sqrt(2){per} (upper triangle; class_l2_sensitivities); {how}; "
                            "covariance = M - mu mu^T (post-processing)",
                    source=f"{SOURCE}, Alg. 3 (Gaussian variant)")
                class_recs.append(rec_m)
        else:
            mu, noisy, class_recs = _laplace_class_moments(
                stat_mu, None if tied else stat_m, s1_mu, s1_m, split, bits, changed=changed, p=p,
                cal=cal, protected=protected, tag=tag)
        if count is not None:
            mu = divide_by_count(mu, count)
        # per-coordinate noise sd of this class mean (public: the record's scale, the DP count)
        mean_sd[int(c)] = (class_recs[0].scale * (1.0 if gauss is not None else math.sqrt(2.0))
                           / (1.0 if count is None else max(1.0, count)))
        means[int(c)] = mu
        key = data.classes[c].item() if hasattr(data.classes[c], "item") else data.classes[c]
        diag["mu_dp"][key] = mu
        recs += class_recs
        if tied:
            continue
        if count is not None:
            noisy = divide_by_count(noisy, count)
        # per-entry noise sd of the class second moment (Gaussian: sigma; Laplace: sqrt(2) b), per row
        sd = class_recs[-1].scale * (1.0 if gauss is not None else math.sqrt(2.0))
        sd /= 1.0 if count is None else max(1.0, count)
        covariances.append(shrink_noisy_covariance(noisy - np.outer(mu, mu), sd) if shrink
                           else psd_repair(noisy - np.outer(mu, mu)))
        diag["second_moment_dp"][key] = noisy
    means, factors = shrink_class_means(means, mean_sd,
                                        dict(zip(estimated.tolist(), shares, strict=True)))
    diag["class_mean_shrinkage"] = factors
    if tied:
        pooled, rec = _tied_second_moment(stats, p, split, cal, bits, gauss)
        recs.append(rec)
        mus = np.array([means[int(c)] for c in estimated])
        within = pooled - np.einsum("c,ci,cj->ij", shares, mus, mus)
        sd = rec.scale * (1.0 if gauss is not None else math.sqrt(2.0))
        cov = shrink_noisy_covariance(within, sd) if shrink else psd_repair(within)
        covariances = [cov] * modelled.size
        diag["pooled_second_moment_dp"] = pooled
    return GaussianModel(weights, np.array([means[int(c)] for c in modelled]), np.array(covariances),
                         data.classes[modelled]), recs


def regression_covariance(cov: np.ndarray, noise_sd: float) -> np.ndarray:
    """Alg. 2's covariance of ``[x^, y]`` from its noisy estimate (post-processing with the public
    per-entry noise sd ``s`` of the second moment; ``p + 1`` coordinates, the label last).

    A file drawn from ``N(mu, C)`` teaches a regression the coefficients ``C_xx^{-1} C_xy``. With
    noise, PSD repair by clipping leaves directions of ``C_xx`` with eigenvalue about 0 next to
    noisy cross terms ``C_xy``, and a linear model trained on the file then has coefficients in the
    thousands (diabetes at epsilon = 1: RMSE 593 where predicting the mean gives 71). So:

    1. the cross terms are shrunk towards 0 by the positive-part James-Stein factor
       ``max(0, 1 - p s^2/||C_xy||^2)`` (James & Stein 1961): cross terms within their noise go,
       strong ones stay;
    2. the feature block's eigenvalues are floored at the noise bulk's edge ``2 s sqrt(p)``
       (Benaych-Georges & Nadakuditi 2011): a direction whose variance the noise hides gets the
       variance the noise allows, never 0 (a ridge of that size on the file's regression);
    3. the whole matrix is made PSD (:func:`dpcore.calibration.psd_repair`).
    """
    c = (np.asarray(cov, dtype=float) + np.asarray(cov, dtype=float).T) / 2
    p = c.shape[0] - 1
    out = c.copy()
    cross = c[:p, p]
    energy = float(cross @ cross)
    factor = max(0.0, 1.0 - p * noise_sd**2 / energy) if energy > 0 else 0.0
    out[:p, p] = out[p, :p] = factor * cross
    if p > 0 and noise_sd > 0:
        out[:p, :p] = psd_repair(c[:p, :p], floor=2.0 * noise_sd * math.sqrt(p))
    return psd_repair(out)


def shrink_class_means(means: dict[int, np.ndarray], noise_sd: dict[int, float],
                       weights: dict[int, float]) -> tuple[dict[int, np.ndarray], dict[int, float]]:
    """DP class means shrunk towards their weighted average by their public noise (post-processing).

    Each noisy mean is ``mu_c + e_c`` with ``e_c ~ N(0, s_c^2 I_p)`` (Laplace noise: ``s_c`` its
    standard deviation), ``s_c`` public (the noise scale over the DP count). Its difference from the
    weighted average ``m`` is shrunk by the positive-part James-Stein factor
    ``max(0, 1 - p s_c^2/||mu_c - m||^2)`` (James & Stein 1961; towards the common mean, Efron & Morris
    1973; ``p`` rather than ``p - 2``: a little more shrinkage, and defined for ``p <= 2``). Where the
    classes' differences are within their noise, the model's classes coincide and a classifier
    trained on the file predicts the majority class instead of a direction drawn by the noise (on
    breast-cancer at epsilon = 0.1 files scored 0.44 against a majority rate of 0.63); where they
    stand far above it, the factor is about 1. Returns the means and each class's factor.
    """
    keys = list(means)
    if len(keys) < 2:
        return means, {k: 1.0 for k in keys}
    w = np.array([max(0.0, float(weights.get(k, 0.0))) for k in keys])
    w = w / w.sum() if w.sum() > 0 else np.full(len(keys), 1.0 / len(keys))
    centre = np.sum([wi * means[k] for wi, k in zip(w, keys, strict=True)], axis=0)
    out, factors = {}, {}
    for k in keys:
        diff = means[k] - centre
        energy = float(diff @ diff)
        factor = max(0.0, 1.0 - diff.size * noise_sd[k] ** 2 / energy) if energy > 0 else 0.0
        out[k], factors[k] = centre + factor * diff, factor
    return out, factors


def _tied_second_moment(stats: _PCAStats, p: int, split: EpsilonSplit, cal: str, bits: BitSource,
                        gauss: ZCDPBudget | None) -> tuple[np.ndarray, NoiseRecord]:
    """``covariance_type="tied"``: the DP second moment ``(1/n) sum_i x^_i x^_i^T`` of all ``n`` rows
    (the ``"covariance"`` budget part; sensitivities :func:`tied_second_moment_sensitivities`)."""
    assert stats.per_class is not None
    n = stats.n_rows
    pooled = np.sum([second for _, second in stats.per_class.values()], axis=0) / n
    s1, s2 = tied_second_moment_sensitivities(p, n, calibration=cal)
    statistic = "second moment of PCA features of all rows (tied covariance)"
    why = "whatever the labels: replace-one changes one term u u^T - v v^T, labels included"
    if gauss is not None:
        return gauss.add(pooled, "covariance", s2, p * (p + 1) // 2, laplace_s1=s1, matrix=True,
                         statistic=statistic,
                         formula=f"S2 = sqrt(2)/n (upper triangle; tied_second_moment_sensitivities), {why}; "
                                 "covariance = M - sum_c w_c mu_c mu_c^T (post-processing)",
                         source=f"{SOURCE}, Alg. 3 with a tied covariance (Gaussian variant; ours)")
    noisy, draw = add_matrix_noise(pooled, s1, laplace_scale(s1, split["covariance"]), bits,
                                   full_matrix=cal == "paper")
    return noisy, NoiseRecord(
        statistic=statistic, sensitivity=s1, scale=draw.scale, distribution="laplace", norm="L1",
        epsilon=split["covariance"], **dpnoise.record_fields(draw),
        formula=("S1 = p^2 a^2/n, every entry" if cal == "paper" else
                 "S1 = min(p(p+1)/2, p+1) a^2/n, upper triangle mirrored") + f", {why}; b = S1/eps_Sigma; "
                "covariance = M - sum_c w_c mu_c mu_c^T (post-processing)",
        source=f"{SOURCE}, Alg. 3 with a tied covariance (Theorem 6's bound over all n rows; ours)")


def _laplace_class_moments(
    stat_mu: np.ndarray, stat_m: np.ndarray | None, s1_mu: float, s1_m: float, split: EpsilonSplit,
    bits: BitSource, *, changed: int, p: int, cal: str, protected: bool, tag: str,
) -> tuple[np.ndarray, np.ndarray | None, list[NoiseRecord]]:
    """Alg. 3, Laplace: one class's noisy mean (or sum) and second moment (none when ``stat_m`` is
    ``None``: a tied covariance), and their records."""
    mu_draw = dpnoise.laplace(stat_mu, s1_mu, scale=laplace_scale(s1_mu, split["mean"]),
                              n_changed=changed * p, bits=bits)
    mu, b_mu = mu_draw.values, mu_draw.scale
    per = "" if protected else "/n_c"
    mean_rec = NoiseRecord(
        statistic=("sum" if protected else "mean") + " of PCA features" + tag,
        sensitivity=s1_mu, scale=b_mu, distribution="laplace", norm="L1",
        epsilon=split["mean"], **dpnoise.record_fields(mu_draw),
        formula=(f"S1 = 2 p a{per}" if cal == "paper" else f"S1 = 2 sqrt(p) a{per} "
                 "(||x^||_2 <= a)") + "; b = S1/eps_mu; a = 1"
        + ("; per-class sums, all classes jointly; mean = sum / DP count" if protected else ""),
        source=f"{SOURCE}, Alg. 3 / Theorem 6",
    )
    if stat_m is None:
        return mu, None, [mean_rec]
    noisy, m_draw = add_matrix_noise(stat_m, s1_m, laplace_scale(s1_m, split["covariance"]), bits,
                                     full_matrix=cal == "paper", n_statistics_changed=changed)
    b_m = m_draw.scale
    return mu, noisy, [
        mean_rec,
        NoiseRecord(
            statistic="second moment of PCA features" + tag, sensitivity=s1_m, scale=b_m,
            **dpnoise.record_fields(m_draw),
            distribution="laplace", norm="L1", epsilon=split["covariance"],
            formula=((("S1 = 2 p^2 a^2, every entry" if cal == "paper" else
                       "S1 = (p+1) a^2, upper triangle mirrored")
                      + " (per-class sums, the replaced record may change class); divided "
                      "by the DP count") if protected else
                     ("S1 = p^2 a^2/n_c, every entry" if cal == "paper" else
                      "S1 = min(p(p+1)/2, p+1) a^2/n_c, upper triangle mirrored"))
            + "; b = S1/eps_Sigma; covariance = M - mu mu^T (post-processing)",
            source=f"{SOURCE}, Alg. 3 / Theorem 6",
        ),
    ]
