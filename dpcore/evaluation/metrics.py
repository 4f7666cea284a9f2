"""Metrics of the utility evaluation, their intervals over trials, and the chance and null levels.

Metrics (all computed with scikit-learn; the models are in :mod:`dpcore.evaluation.models`, the
protocol that trains them on a release in :mod:`dpcore.evaluation.protocol`):

* clustering -- K-means with the number of clusters ``k`` chosen by silhouette analysis over
  ``k_range`` (RON-Gauss section 5.2.1, PCA-Gauss section VIII-B1):

  - ``silhouette_release``: silhouette coefficient of the release under its own K-means (the
    papers' metric; it needs no ground truth but says nothing about the real data);
  - ``silhouette_real``: the real held-out rows are assigned by the K-means fitted on the release;
    silhouette of that partition measured on the real rows in their original feature space
    (scaled to [0, 1] by the public bounds when given);
  - ``ari_real``: adjusted Rand index between that partition and K-means fitted directly on the
    real held-out rows (original space, ``k`` by silhouette analysis);
  - ``ari_null``: the same ARI for the null release, isotropic Gaussian noise of the release's
    scale (its mean, and its average per-coordinate variance in every direction), clustered
    with the same ``k``: what a release with no structure at all would score. Any partition of
    the mapped real rows (K-means on a structureless blob cuts it along arbitrary directions)
    agrees with the real clustering somewhat, so a release is only useful for clustering when
    ``ari_real`` is clearly above ``ari_null`` (issue 13). The null's cut direction is random, so
    one draw's ARI is very noisy (on ``diabetes``, 0.03 to 1.0 from one trial to the next, because
    two far-apart real clusters are split by any cut through the centre that is not nearly
    parallel to them): ``ari_null`` is the mean over ``null_draws`` independent null releases
    (default 8), the null's expected score rather than one sample of it;
  - ``k``: the number of clusters chosen on the release.

  Silhouettes and the K-means fits use a random sub-sample of at most ``silhouette_sample`` rows
  (default 2,000), because the silhouette costs O(m^2).
* classification -- ``svm_accuracy`` (RBF SVC, the papers' classifier) and ``logreg_accuracy``
  (logistic regression), at most ``max_train`` training rows (default 5,000, a random
  sub-sample) to keep sweeps interactive. ``chance`` is the majority-class accuracy on the test
  rows (:func:`majority_rate`).
* regression -- ``krr_rmse``: kernel ridge regression at most ``max_train_krr`` rows (default
  2,000; the fit is O(m^3)). ``chance`` is the expected RMSE of predictions drawn uniformly from
  the public label range (:func:`random_guess_rmse`, RON-Gauss section 5.2.3).

The evaluation itself is not private: it uses the real held-out rows, as the papers do. It is an
exploration tool for the data custodian, not something to publish: :data:`NOT_DP_NOTICE` says so on
every table, figure and file built from it (:func:`exploration_csv`, :func:`exploration_filename`).

Intervals (:func:`metric_interval`) never leave the metric's range: a bootstrap percentile interval
of the mean over trials, widened for accuracies to the Wilson score interval of the pooled test
predictions. :func:`chance_comparison` says whether a result can be told apart from the majority
class (or the random guess); :func:`null_verdict` whether a clustering beats the isotropic null.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score, silhouette_score
from threadpoolctl import threadpool_limits

from dpcore.evaluation.targets import scale_by_public_bounds, subsample

__all__ = [
    "ACCURACY_METRICS",
    "CLASSIFICATION_METRICS",
    "CLUSTERING_METRICS",
    "DEFAULT_SETTINGS",
    "HIGHER_IS_BETTER",
    "NOT_DP_NOTICE",
    "REGRESSION_METRICS",
    "EvalSettings",
    "best_per_value",
    "chance_comparison",
    "choose_k",
    "clustering_metrics",
    "exploration_csv",
    "exploration_filename",
    "isotropic_null",
    "majority_rate",
    "mean_interval",
    "metric_interval",
    "null_verdict",
    "random_guess_rmse",
    "real_reference",
]

CLUSTERING_METRICS = ("silhouette_release", "silhouette_real", "ari_real", "ari_null", "k")
#: The utility sweep's metrics, one per model of :func:`~dpcore.evaluation.models.sweep_models`.
CLASSIFICATION_METRICS = ("svm_accuracy", "logreg_accuracy")
REGRESSION_METRICS = ("krr_rmse",)
#: The label of every output computed on the private data (tables, figures, downloaded files).
NOT_DP_NOTICE = "NOT differentially private (computed on the private data)"
#: Metrics that are proportions of correct test predictions (binomial counts).
ACCURACY_METRICS = CLASSIFICATION_METRICS
HIGHER_IS_BETTER = {"silhouette_release": True, "silhouette_real": True, "ari_real": True, "ari_null": True,
                    "svm_accuracy": True, "logreg_accuracy": True, "krr_rmse": False, "k": True}


@dataclass(frozen=True)
class EvalSettings:
    """Evaluation settings (all data-independent).

    Attributes
    ----------
    silhouette_sample : int
        Rows sub-sampled for K-means and silhouettes (default 2,000).
    k_range : (int, int)
        Inclusive range of cluster numbers tried by the silhouette analysis (default 2..8).
    max_train : int
        Training rows for the classifiers (default 5,000; random sub-sample above that).
    max_train_krr : int
        Training rows for kernel ridge regression (default 2,000).
    random_state : int or None
        Seeds the sub-samples, K-means and the logistic regression solver.
    null_draws : int
        Independent null releases whose ARIs are averaged into ``ari_null`` (default 8).
    """

    silhouette_sample: int = 2000
    k_range: tuple[int, int] = (2, 8)
    max_train: int = 5000
    max_train_krr: int = 2000
    random_state: int | None = 0
    null_draws: int = 8

    def __post_init__(self) -> None:
        lo, hi = self.k_range
        if not (2 <= lo <= hi):
            raise ValueError(f"k_range must satisfy 2 <= low <= high, got {self.k_range}")
        for name in ("silhouette_sample", "max_train", "max_train_krr"):
            if getattr(self, name) < 10:
                raise ValueError(f"{name} must be at least 10, got {getattr(self, name)}")
        if self.null_draws < 1:
            raise ValueError(f"null_draws must be at least 1, got {self.null_draws}")


#: The default settings (one shared, frozen instance).
DEFAULT_SETTINGS = EvalSettings()


# ---------------------------------------------------------------------------------------- intervals
def mean_interval(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval of the finite values (``nan`` when undefined).

    With a single finite value the interval is ``(nan, nan)``: one trial says nothing about spread.
    """
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(v.mean())
    if v.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + confidence / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return mean, mean - half, mean + half


def metric_interval(values: Iterable[float], *, n_test: int | None = None, confidence: float = 0.95,
                    n_resamples: int = 2000, random_state: int = 0) -> tuple[float, float, float]:
    """Mean over trials and a confidence interval that cannot leave the metric's range.

    - Bootstrap percentile interval of the mean of the finite trial values
      (``scipy.stats.bootstrap``, Efron & Tibshirani 1993, ch. 13). Every bootstrap mean lies in
      ``[min, max]`` of the values, so the interval stays inside any range the metric has
      (accuracy in [0, 1], silhouette in [-1, 1], RMSE >= 0), unlike the Student-t interval
      (:func:`mean_interval`), which with 2 trials gave accuracies from -3 to 4.
    - For accuracies (``n_test`` given: the number of real test rows of each trial) the interval
      is widened to contain the Wilson score interval (Wilson 1927; ``scipy.stats.binomtest``) of
      the pooled accuracy, ``round(sum(values) * n_test)`` correct out of ``trials * n_test``: it
      counts the finite test set, lies in [0, 1], and gives one trial an interval too.

    Parameters
    ----------
    values : iterable of float
        One value per trial (non-finite values are ignored).
    n_test : int, optional
        Test rows per trial, for accuracies only.
    confidence : float
        Confidence level of both intervals.
    n_resamples, random_state : int
        Bootstrap resamples and seed (the interval is reproducible).

    Returns
    -------
    (mean, lo, hi)
        ``nan`` where undefined: no finite value, or one value of a metric without ``n_test``.
    """
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size == 0:
        return math.nan, math.nan, math.nan
    vmin, vmax = float(v.min()), float(v.max())
    mean = float(np.clip(v.mean(), vmin, vmax))  # the mean of equal values is that value
    lo = hi = math.nan
    if v.size >= 2:
        if vmin == vmax:
            lo = hi = mean
        else:
            ci = stats.bootstrap((v,), np.mean, method="percentile", confidence_level=confidence,
                                 n_resamples=n_resamples, rng=random_state).confidence_interval
            lo, hi = float(np.clip(ci.low, vmin, vmax)), float(np.clip(ci.high, vmin, vmax))
    if n_test:
        trials = v.size * int(n_test)
        correct = int(np.clip(round(float(v.sum()) * int(n_test)), 0, trials))
        wilson = stats.binomtest(correct, trials).proportion_ci(confidence, method="wilson")
        lo = float(wilson.low) if math.isnan(lo) else min(lo, float(wilson.low))
        hi = float(wilson.high) if math.isnan(hi) else max(hi, float(wilson.high))
    return mean, lo, hi


def chance_comparison(metric: str, lo: float, hi: float, chance: float) -> str:
    """How an interval ``[lo, hi]`` of ``metric`` sits against the chance level.

    Chance is the majority-class accuracy (classification) or the random-guess RMSE
    (regression). Returns ``"above majority"``, ``"not distinguishable from majority"`` or
    ``"below majority"`` for accuracies; ``"better than random guess"``, ``"not distinguishable
    from random guess"`` or ``"worse than random guess"`` for RMSE; ``""`` when there is no
    chance level or no interval.
    """
    if not all(np.isfinite([lo, hi, chance])):
        return ""
    higher = HIGHER_IS_BETTER.get(metric, True)
    ref = "majority" if metric in ACCURACY_METRICS else "random guess"
    if lo <= chance <= hi:
        return f"not distinguishable from {ref}"
    better = lo > chance if higher else hi < chance
    if metric in ACCURACY_METRICS:
        return "above majority" if better else "below majority"
    return f"better than {ref}" if better else f"worse than {ref}"


def best_per_value(frame: pd.DataFrame, series: str = "mechanism") -> pd.DataFrame:
    """The best ``series`` (e.g. mechanism) per swept value ``x`` of one metric's sweep rows.

    Only results whose interval is clear of the chance level and on its good side count
    (``vs_chance`` of :func:`chance_comparison`): a result not distinguishable from the majority
    class never "wins". Where none qualifies, the row says so and ``mean`` is ``nan``.

    Returns a frame with columns ``x, <series>, mean, vs_chance``.
    """
    if frame.empty:
        return pd.DataFrame(columns=["x", series, "mean", "vs_chance"])
    higher = bool(frame["higher_is_better"].iloc[0])
    verdicts = frame["vs_chance"].fillna("") if "vs_chance" in frame else pd.Series("", frame.index)
    rows = []
    for x, group in frame.groupby("x", sort=True):
        verdict = verdicts[group.index]
        ok = group[~verdict.str.startswith(("not distinguishable", "below", "worse"))]
        ok = ok[np.isfinite(ok["mean"].to_numpy(dtype=float))]
        if ok.empty:
            rows.append({"x": x, series: "none: no result is clear of the chance level",
                         "mean": math.nan, "vs_chance": "; ".join(sorted(set(verdict) - {""}))})
            continue
        best = ok["mean"].astype(float).idxmax() if higher else ok["mean"].astype(float).idxmin()
        rows.append({"x": x, series: frame.at[best, series], "mean": float(frame.at[best, "mean"]),
                     "vs_chance": verdicts[best]})
    return pd.DataFrame(rows)


def exploration_csv(frame: pd.DataFrame, what: str) -> bytes:
    """CSV bytes of an exploration table that say, inside the file, that it is not private.

    The first line is a comment ``# <what>: NOT differentially private (computed on the private
    data) ...`` (``pandas.read_csv(..., comment="#")`` skips it) and every row carries the column
    ``privacy`` with :data:`NOT_DP_NOTICE`, so the notice survives tools that drop comments.
    Written with the spreadsheet-safe writer of releases.
    """
    from dpcore.release import spreadsheet_safe_csv

    head = (f"# {what}: {NOT_DP_NOTICE}. Utility measured on real held-out rows; do not "
            "publish.\n").encode()
    return head + spreadsheet_safe_csv(frame.assign(privacy=NOT_DP_NOTICE))


def exploration_filename(stem: str) -> str:
    """File name of an exploration download: ``<stem>-NOT-DP.csv``."""
    return f"{stem}-NOT-DP.csv"


# ---------------------------------------------------------------------------------------- clustering
def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**31 - 1))


def _safe_silhouette(X: np.ndarray, labels: np.ndarray, random_state: int) -> float:
    k = np.unique(labels).size
    if not (2 <= k <= X.shape[0] - 1):
        return math.nan
    return float(silhouette_score(X, labels, random_state=random_state))


def choose_k(
    X: np.ndarray, settings: EvalSettings = DEFAULT_SETTINGS, rng: np.random.Generator | None = None
) -> tuple[int, float, KMeans]:
    """Silhouette analysis: K-means for every ``k`` in ``settings.k_range`` on a sub-sample of at
    most ``settings.silhouette_sample`` rows; returns ``(k, silhouette, fitted KMeans)`` of the best.

    Raises
    ------
    ValueError
        Fewer than 3 rows (no silhouette is defined).
    """
    X = np.asarray(X, dtype=float)
    if X.shape[0] < 3:
        raise ValueError(f"clustering needs at least 3 rows, got {X.shape[0]}")
    rng = rng or np.random.default_rng(settings.random_state)
    S = X[subsample(X.shape[0], settings.silhouette_sample, rng)]
    best: tuple[int, float, KMeans] | None = None
    seed = _seed(rng)
    # K-means on a few thousand rows is fastest single-threaded; OpenMP threads on a busy machine
    # made it 10-100x slower in our measurements.
    with threadpool_limits(limits=1):
        for k in range(settings.k_range[0], min(settings.k_range[1], S.shape[0] - 1) + 1):
            km = KMeans(n_clusters=k, n_init=3, random_state=seed).fit(S)
            score = _safe_silhouette(S, km.labels_, seed)
            if best is None or (np.isfinite(score) and (not np.isfinite(best[1]) or score > best[1])):
                best = (k, score, km)
    assert best is not None
    return best


def clustering_metrics(
    train_X: np.ndarray,
    test_space_X: np.ndarray | None,
    test_real_X: np.ndarray,
    *,
    bounds: np.ndarray | None = None,
    settings: EvalSettings = DEFAULT_SETTINGS,
    reference: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, float]:
    """Clustering utility of a training table (a release, or real rows for the baseline).

    Parameters
    ----------
    train_X : ndarray (m, k)
        Rows to cluster (the release).
    test_space_X : ndarray (t, k) or None
        Real held-out rows mapped into ``train_X``'s space; ``None`` when the release has no public
        transform (then only ``silhouette_release`` and ``k`` are defined, the rest are ``nan``).
    test_real_X : ndarray (t, d)
        The same held-out rows in their original feature space.
    bounds : ndarray (d, 2), optional
        Public bounds used to scale ``test_real_X`` to [0, 1] before real-space silhouettes/K-means.
    reference : (indices, labels), optional
        Precomputed sub-sample and K-means labels of the real rows (see :func:`evaluate_release`).
    """
    rng = np.random.default_rng(settings.random_state)
    k, sil, km = choose_k(train_X, settings, rng)
    out = {"k": float(k), "silhouette_release": sil, "silhouette_real": math.nan,
           "ari_real": math.nan, "ari_null": math.nan}
    if test_space_X is None:
        return out
    idx, ref_labels = reference or real_reference(test_real_X, bounds, settings)
    mapped = np.asarray(test_space_X, dtype=float)[idx]
    size = min(len(train_X), settings.silhouette_sample)
    with threadpool_limits(limits=1):
        assigned = km.predict(mapped)
        null_ari = []
        for _ in range(settings.null_draws):  # the null's expected ARI (its cut direction is random)
            null = isotropic_null(train_X, size, rng)
            null_km = KMeans(n_clusters=k, n_init=3, random_state=_seed(rng)).fit(null)
            null_ari.append(adjusted_rand_score(ref_labels, null_km.predict(mapped)))
    real = scale_by_public_bounds(np.asarray(test_real_X, dtype=float)[idx], bounds)
    out["silhouette_real"] = _safe_silhouette(real, assigned, _seed(rng))
    out["ari_real"] = float(adjusted_rand_score(ref_labels, assigned))
    out["ari_null"] = float(np.mean(null_ari))
    return out


def isotropic_null(X: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` rows of ``N(mean(X), s^2 I)``, ``s^2 = trace(cov(X)) / n_columns``: isotropic noise of
    the same location and scale as ``X`` (the null release of :func:`clustering_metrics`)."""
    X = np.asarray(X, dtype=float)
    s = math.sqrt(float(np.mean(np.var(X, axis=0))))
    return X.mean(axis=0) + s * rng.standard_normal((int(size), X.shape[1]))


def real_reference(
    test_real_X: np.ndarray, bounds: np.ndarray | None, settings: EvalSettings
) -> tuple[np.ndarray, np.ndarray]:
    """Sub-sample indices of the real held-out rows and their K-means partition (k chosen by
    silhouette analysis, rows scaled to [0, 1] by the public bounds when given)."""
    rng = np.random.default_rng(None if settings.random_state is None else settings.random_state + 1)
    idx = subsample(len(test_real_X), settings.silhouette_sample, rng)
    real = scale_by_public_bounds(np.asarray(test_real_X, dtype=float)[idx], bounds)
    _, _, km = choose_k(real, settings, rng)
    return idx, km.labels_


def null_verdict(frame: pd.DataFrame) -> str:
    """One sentence per swept value: does the release's ARI beat the isotropic-noise null?

    ``frame`` is a :func:`utility_sweep` frame of a clustering sweep (metrics ``ari_real`` and
    ``ari_null``). A value "beats the null" when the lower end of ``ari_real``'s 95% interval is
    above the upper end of ``ari_null``'s.
    """
    a = frame[frame["metric"] == "ari_real"].set_index("x")
    b = frame[frame["metric"] == "ari_null"].set_index("x")
    parts = []
    for x in a.index.intersection(b.index):
        beats = a.loc[x, "lo"] > b.loc[x, "hi"]
        parts.append(f"{a.loc[x, 'param']} = {x:g}: ARI {a.loc[x, 'mean']:.3f} vs null "
                     f"{b.loc[x, 'mean']:.3f} "
                     + ("(beats the null)" if beats else "(not distinguishable from the null)"))
    return ("Agreement with the real clustering against isotropic noise of the same scale: "
            + "; ".join(parts) + ".") if parts else "No clustering agreement was computed."


# ---------------------------------------------------------------------------------------- chance levels
def random_guess_rmse(test_y: np.ndarray, label_bounds: tuple[float, float]) -> float:
    """Expected RMSE of i.i.d. Uniform(lo, hi) guesses: ``sqrt(mean((c - y)^2) + (hi - lo)^2/12)``."""
    lo, hi = (float(v) for v in label_bounds)
    y = np.asarray(test_y, dtype=float)
    return float(math.sqrt(np.mean(((lo + hi) / 2 - y) ** 2) + (hi - lo) ** 2 / 12))


def majority_rate(test_y: Any) -> float:
    """Accuracy of always predicting the most frequent class of ``test_y`` (the classification
    chance level)."""
    _, counts = np.unique(np.asarray(test_y), return_counts=True)
    return float(counts.max() / counts.sum())
