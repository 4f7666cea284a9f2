"""Utility evaluation shared by every mechanism: train on the release, test on real rows.

SPEC section 7 (the papers' protocol): a model is trained on the released data and evaluated on
real held-out rows (mapped into the release's space with :meth:`Release.transform` when the release
lives in a projected space), repeated over trials with the mean and a 95% interval, next to the
non-private baseline trained on the real training rows of the same split.

Metrics (all computed with scikit-learn):

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
  (logistic regression), both after standardisation fitted on the training data; at most
  ``max_train`` training rows (default 5,000, a random sub-sample) to keep sweeps interactive.
  ``chance`` is the majority-class accuracy on the test rows. Releases with soft labels (DPMix's
  noisy mixed one-hot columns ``label=c``) are trained on a class drawn from each row's soft label
  (:func:`soft_label_draw`), never on their argmax, which is the mixture's majority class.
* regression -- ``krr_rmse``: kernel ridge regression (RBF, ``alpha = 1``) on standardised
  features with a standardised target, at most ``max_train_krr`` rows (default 2,000; the fit is
  O(m^3)). ``random_guess_rmse`` is the expected RMSE of predictions drawn uniformly from the
  public label range (RON-Gauss section 5.2.3), ``sqrt(mean((c - y)^2) + w^2/12)`` with ``c`` the
  centre and ``w`` the width of the range.

The evaluation itself is not private: it uses the real held-out rows, as the papers do. It is an
exploration tool for the data custodian, not something to publish: :data:`NOT_DP_NOTICE` says so on
every table, figure and file built from it (:func:`exploration_csv`, :func:`exploration_filename`).

Intervals (:func:`metric_interval`) never leave the metric's range: a bootstrap percentile interval
of the mean over trials, widened for accuracies to the Wilson score interval of the pooled test
predictions. :func:`chance_comparison` says whether a result can be told apart from the majority
class (or the random guess).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.cluster import KMeans
from sklearn.compose import TransformedTargetRegressor
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import adjusted_rand_score, silhouette_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

__all__ = [
    "CLUSTERING_METRICS",
    "CLASSIFICATION_METRICS",
    "REGRESSION_METRICS",
    "EvalSettings",
    "choose_k",
    "classification_metrics",
    "clustering_metrics",
    "evaluate_non_private",
    "evaluate_release",
    "mean_interval",
    "metric_interval",
    "chance_comparison",
    "best_per_value",
    "evaluation_problem",
    "exploration_csv",
    "exploration_filename",
    "NOT_DP_NOTICE",
    "random_guess_rmse",
    "isotropic_null",
    "null_verdict",
    "release_class_labels",
    "release_training_labels",
    "row_level_epsilon",
    "soft_label_block",
    "soft_label_draw",
    "real_reference",
    "regression_metrics",
    "utility_sweep",
]

CLUSTERING_METRICS = ("silhouette_release", "silhouette_real", "ari_real", "ari_null", "k")
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


# ---------------------------------------------------------------------------------------- helpers
def _subsample(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    return np.arange(n) if n <= size else np.sort(rng.choice(n, size=size, replace=False))


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**31 - 1))


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


def evaluation_problem(mechanism: Any, task: str) -> str | None:
    """Why releases of ``mechanism`` (a class or instance) cannot be evaluated on ``task``, or None.

    A model trained on a release is tested on real held-out rows mapped into the release's space;
    a mechanism that keeps its projection secret (``public_transform = False``: JL-Laplace, whose
    matrix P must stay secret, Dhaliwal et al. section 3.1) has no such map, so supervised tasks
    cannot be evaluated (its distances can, on the Distances page).
    """
    if task not in ("unsupervised", "classification", "regression"):
        return f"unknown task {task!r}"
    if task not in getattr(mechanism, "tasks", (task,)):
        return f"{mechanism.name} does not support the task {task}"
    if task != "unsupervised" and not getattr(mechanism, "public_transform", True):
        return (f"{mechanism.name} keeps its projection matrix secret, so real test rows cannot be "
                f"mapped into its space and a {task} model trained on it cannot be tested; its "
                "distances can (Distances page)")
    return None


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


def _bounds_scale(X: np.ndarray, bounds: np.ndarray | None) -> np.ndarray:
    """:func:`~dpcore.preprocessing.scale_to_unit` by ``bounds``, or ``X`` itself without bounds."""
    from dpcore.preprocessing import scale_to_unit

    return X if bounds is None else scale_to_unit(X, np.asarray(bounds, dtype=float))


def _safe_silhouette(X: np.ndarray, labels: np.ndarray, random_state: int) -> float:
    k = np.unique(labels).size
    if not (2 <= k <= X.shape[0] - 1):
        return math.nan
    return float(silhouette_score(X, labels, random_state=random_state))


def choose_k(
    X: np.ndarray, settings: EvalSettings = EvalSettings(), rng: np.random.Generator | None = None
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
    S = X[_subsample(X.shape[0], settings.silhouette_sample, rng)]
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


# ---------------------------------------------------------------------------------------- metrics
def clustering_metrics(
    train_X: np.ndarray,
    test_space_X: np.ndarray | None,
    test_real_X: np.ndarray,
    *,
    bounds: np.ndarray | None = None,
    settings: EvalSettings = EvalSettings(),
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
    real = _bounds_scale(np.asarray(test_real_X, dtype=float)[idx], bounds)
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
    idx = _subsample(len(test_real_X), settings.silhouette_sample, rng)
    real = _bounds_scale(np.asarray(test_real_X, dtype=float)[idx], bounds)
    _, _, km = choose_k(real, settings, rng)
    return idx, km.labels_


def _fit_predict_classifiers(
    train_X: np.ndarray, train_y: np.ndarray, test_X: np.ndarray, test_y: np.ndarray,
    settings: EvalSettings,
) -> dict[str, float]:
    rng = np.random.default_rng(settings.random_state)
    idx = _subsample(len(train_X), settings.max_train, rng)
    Xtr, ytr = np.asarray(train_X, dtype=float)[idx], np.asarray(train_y)[idx]
    if np.unique(ytr).size < 2:  # a release with a single class: the constant predictor
        acc = float(np.mean(np.asarray(test_y) == ytr[0]))
        return {"svm_accuracy": acc, "logreg_accuracy": acc}
    models = {
        "svm_accuracy": make_pipeline(StandardScaler(), SVC(kernel="rbf", C=1.0, gamma="scale")),
        "logreg_accuracy": make_pipeline(
            StandardScaler(), LogisticRegression(max_iter=500, random_state=_seed(rng))
        ),
    }
    out = {}
    for name, model in models.items():
        model.fit(Xtr, ytr)
        out[name] = float(np.mean(model.predict(test_X) == np.asarray(test_y)))
    return out


def classification_metrics(
    train_X: np.ndarray, train_y: np.ndarray, test_X: np.ndarray, test_y: np.ndarray,
    *, settings: EvalSettings = EvalSettings(),
) -> dict[str, float]:
    """SVM and logistic-regression accuracy on the real test rows, plus ``chance`` (majority class)."""
    out = _fit_predict_classifiers(train_X, train_y, test_X, test_y, settings)
    _, counts = np.unique(np.asarray(test_y), return_counts=True)
    out["chance"] = float(counts.max() / counts.sum())
    return out


def random_guess_rmse(test_y: np.ndarray, label_bounds: tuple[float, float]) -> float:
    """Expected RMSE of i.i.d. Uniform(lo, hi) guesses: ``sqrt(mean((c - y)^2) + (hi - lo)^2/12)``."""
    lo, hi = (float(v) for v in label_bounds)
    y = np.asarray(test_y, dtype=float)
    return float(math.sqrt(np.mean(((lo + hi) / 2 - y) ** 2) + (hi - lo) ** 2 / 12))


def regression_metrics(
    train_X: np.ndarray, train_y: np.ndarray, test_X: np.ndarray, test_y: np.ndarray,
    *, label_bounds: tuple[float, float] | None = None, settings: EvalSettings = EvalSettings(),
) -> dict[str, float]:
    """Kernel ridge RMSE on the real test rows, plus ``chance`` (random-guess RMSE) if the public
    label range is known."""
    rng = np.random.default_rng(settings.random_state)
    idx = _subsample(len(train_X), settings.max_train_krr, rng)
    model = TransformedTargetRegressor(
        regressor=make_pipeline(StandardScaler(), KernelRidge(alpha=1.0, kernel="rbf")),
        transformer=StandardScaler(),
    )
    model.fit(np.asarray(train_X, dtype=float)[idx], np.asarray(train_y, dtype=float)[idx])
    resid = model.predict(np.asarray(test_X, dtype=float)) - np.asarray(test_y, dtype=float)
    out = {"krr_rmse": float(np.sqrt(np.mean(resid**2)))}
    out["chance"] = random_guess_rmse(test_y, label_bounds) if label_bounds is not None else math.nan
    return out


# ---------------------------------------------------------------------------------------- entry points
def _release_labels(release: Any) -> np.ndarray | None:
    labels = release.labels
    if labels is None:
        return None
    labels = np.asarray(labels)
    names = list(getattr(release, "label_columns", []) or [])
    if labels.ndim == 2 and names and len(names) == labels.shape[1] and "=" not in names[-1]:
        # soft label columns ``label=c`` followed by the decoded class (DPMix): use the class
        return labels[:, -1]
    if labels.ndim == 2:  # noisy one-hot labels (e.g. mixtures): decode by argmax
        classes = release.details.get("classes")
        idx = np.argmax(labels, axis=1)
        return np.asarray(classes)[idx] if classes is not None else idx
    return labels


def soft_label_block(release: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """``(soft (m, K), classes (K,))`` of a release carrying soft label columns (DPMix
    classification: ``details["classes"]`` and one ``label=c`` column per class, first), else None."""
    classes = release.details.get("classes") if isinstance(release.details, dict) else None
    if release.labels is None or classes is None:
        return None
    labels = np.asarray(release.labels)
    K = len(classes)
    if labels.ndim != 2 or labels.shape[1] < K:
        return None
    return labels[:, :K].astype(float), np.asarray(classes)


def soft_label_draw(soft: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One class index per row, drawn with probabilities ``max(t, 0) / sum max(t, 0)`` (uniform when
    every entry is <= 0).

    Why (issue 13): a DPMix soft label ``t`` is the mean of ``ell`` one-hot labels plus zero-mean
    noise; its argmax is the majority class among the ``ell`` rows, so a 25% minority class is
    the argmax of under 10% of the mixtures once ``ell >= 6`` and an argmax-trained classifier
    predicts the majority class. A draw keeps the mixing proportions (for noise-free ``t``,
    ``E[onehot(draw)] = t``), and the expected cross-entropy at the drawn class equals the
    soft-target cross-entropy ``-sum_c p_c log q_c`` with the clipped, normalised targets: a
    one-sample Monte Carlo of the soft-label loss that any classifier (SVM, logistic regression)
    accepts, at the cost of hard labels. Post-processing: no privacy cost.
    """
    w = np.clip(np.asarray(soft, dtype=float), 0.0, None)
    total = w.sum(axis=1, keepdims=True)
    p = np.where(total > 0, w / np.where(total > 0, total, 1.0), 1.0 / w.shape[1])
    u = rng.random(len(p))
    return np.minimum((np.cumsum(p, axis=1) < u[:, None]).sum(axis=1), w.shape[1] - 1)


def release_training_labels(release: Any, rng: np.random.Generator) -> np.ndarray | None:
    """The labels a classifier is trained on: :func:`soft_label_draw` for soft labels, the released
    label column otherwise."""
    block = soft_label_block(release)
    if block is None:
        return _release_labels(release)
    soft, classes = block
    return classes[soft_label_draw(soft, rng)]


def release_class_labels(release: Any) -> np.ndarray | None:
    """One label per released row: soft or one-hot label columns decoded to their class."""
    return _release_labels(release)


def _map_to_release_space(release: Any, X: np.ndarray) -> np.ndarray | None:
    try:
        return release.transform(X)
    except ValueError:
        return None


def evaluate_release(
    release: Any,
    test_X: np.ndarray,
    test_y: np.ndarray | None = None,
    task: str | None = None,
    *,
    bounds: np.ndarray | None = None,
    label_bounds: tuple[float, float] | None = None,
    settings: EvalSettings = EvalSettings(),
    reference: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, float]:
    """Utility of one release on real held-out rows (train on the release, test on real data).

    Parameters
    ----------
    release : dpcore.release.Release
    test_X : array (t, d)
        Real held-out rows in the original feature space; mapped with ``release.transform``.
    test_y : array (t,), optional
        Real held-out labels (classification / regression).
    task : {"unsupervised", "classification", "regression"}, optional
        Default: the release's task (``release.parameters["task"]``). ``"unsupervised"`` means
        clustering.
    bounds : array (d, 2), optional
        Public feature bounds (scale real rows for the real-space clustering metrics).
    label_bounds : (lo, hi), optional
        Public label range for the random-guess RMSE.
    settings : EvalSettings
    reference : (indices, labels), optional
        Clustering only: the real rows' sub-sample and K-means partition, as returned by
        :func:`real_reference` (computed here when omitted; pass it to reuse it across releases).

    Returns
    -------
    dict
        Metric name -> value (see the module docstring); ``chance`` for supervised tasks.

    Raises
    ------
    ValueError
        A supervised task on a release without labels, or whose space has no public transform.
    """
    task = task or release.parameters.get("task", "unsupervised")
    test_X = np.asarray(test_X, dtype=float)
    mapped = _map_to_release_space(release, test_X)
    if task == "unsupervised":
        return clustering_metrics(release.data, mapped, test_X, bounds=bounds, settings=settings,
                                  reference=reference)
    labels = (release_training_labels(release, np.random.default_rng(settings.random_state))
              if task == "classification" else _release_labels(release))
    if labels is None or test_y is None:
        raise ValueError(f"task {task!r} needs labels in the release and test_y")
    if mapped is None:
        raise ValueError(f"the {release.mechanism} release has no public transform: real test rows "
                         "cannot be mapped into its space, so a model trained on it cannot be tested")
    if task == "classification":
        return classification_metrics(release.data, labels, mapped, test_y, settings=settings)
    if task == "regression":
        return regression_metrics(release.data, labels, mapped, test_y, label_bounds=label_bounds,
                                  settings=settings)
    raise ValueError(f"task must be unsupervised, classification or regression, got {task!r}")


def _xy(part: Any) -> tuple[np.ndarray, np.ndarray | None]:
    if hasattr(part, "X"):
        return np.asarray(part.X, dtype=float), part.y
    X, y = part if isinstance(part, tuple) else (part, None)
    return np.asarray(X, dtype=float), y


def evaluate_non_private(
    train: Any, test: Any, task: str | None = None, *, bounds: np.ndarray | None = None,
    label_bounds: tuple[float, float] | None = None, settings: EvalSettings = EvalSettings(),
) -> dict[str, float]:
    """The non-private baseline: the same metrics with the real training rows as the "release".

    ``train``/``test`` are :class:`~dpcore.data.Dataset` objects or ``(X, y)`` tuples (or bare
    ``X`` for clustering). Features stay in their original space.
    """
    Xtr, ytr = _xy(train)
    Xte, yte = _xy(test)
    task = task or getattr(train, "task", None) or ("unsupervised" if ytr is None else None)
    if bounds is None:
        bounds = getattr(train, "bounds", None)
    if label_bounds is None:
        label_bounds = getattr(train, "label_bounds", None)
    if task == "unsupervised":
        return clustering_metrics(_bounds_scale(Xtr, bounds), _bounds_scale(Xte, bounds), Xte,
                                  bounds=bounds, settings=settings)
    if ytr is None or yte is None:
        raise ValueError(f"task {task!r} needs labels for train and test")
    if task == "classification":
        return classification_metrics(Xtr, ytr, Xte, yte, settings=settings)
    if task == "regression":
        return regression_metrics(Xtr, ytr, Xte, yte, label_bounds=label_bounds, settings=settings)
    raise ValueError(f"task must be unsupervised, classification or regression, got {task!r}")


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


def row_level_epsilon(release: Any) -> float:
    """The release's row-level epsilon (replace-one, label included; ``Release.row_guarantee``),
    ``inf`` when it has none (the papers' per-class modes with public class sizes) or is not
    private. The one unit in which sweeps of different mechanisms are compared."""
    g = release.row_guarantee()
    return math.inf if g is None else float(g.epsilon)


def utility_sweep(
    mechanism_factory: Callable[[Any], Any],
    dataset: Any,
    values: Sequence[Any],
    *,
    param: str = "epsilon",
    trials: int = 5,
    test_size: float = 0.25,
    task: str | None = None,
    n_samples: int | None = None,
    random_state: int | None = 0,
    settings: EvalSettings | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    baseline: dict[str, float] | None = None,
) -> pd.DataFrame:
    """Utility of a mechanism over a grid of one parameter (epsilon, n_components...).

    Parameters
    ----------
    mechanism_factory : callable
        ``value -> Mechanism``, e.g. ``lambda eps: RONGauss(epsilon=eps, n_components=5)``. Its
        ``random_state`` is overwritten per trial (seeded from ``random_state``: the releases are
        exploration previews, never publishable).
    dataset : Dataset or (Dataset, Dataset)
        Split with ``dataset.split(test_size, random_state)`` (stratified for classification), or
        an explicit ``(train, test)`` pair. Mechanisms see only the training part.
    values : sequence
        Grid of the swept parameter (the ``x`` column).
    param : str
        Name of the swept parameter (recorded in the ``param`` column; ``"epsilon"`` suggests a log
        axis to the plotting helpers).
    trials : int
        Releases per value (mean and 95% interval over them, :func:`metric_interval`).
    task : str, optional
        Default: the dataset's task.
    n_samples : int, optional
        Rows per release (default: as many as the training part).
    random_state : int or None
        Seeds the split, the releases and the evaluation; ``None`` = OS entropy.
    settings : EvalSettings, optional
    progress : callable, optional
        Called as ``progress(done, total, message)`` after the baseline and after every release
        (e.g. to drive ``st.progress``).
    baseline : dict, optional
        A precomputed :func:`evaluate_non_private` result for the same split and settings (saves
        recomputing it when several mechanisms are swept on one dataset).

    Returns
    -------
    pandas.DataFrame
        Tidy, one row per (value, metric): ``param, x, metric, mean, lo, hi, baseline, chance,
        vs_chance, n_trials, higher_is_better, epsilon_row``. ``epsilon_row`` is the largest row-level
        epsilon (:func:`row_level_epsilon`) of the value's releases: the epsilon to compare
        mechanisms at when ``x`` is under another relation. ``baseline`` is the non-private value on the
        same split; ``vs_chance`` is :func:`chance_comparison` of the interval. Every number is
        computed on the private data (:data:`NOT_DP_NOTICE`).

    Raises
    ------
    ValueError
        ``trials < 1``, an empty grid, or whatever the mechanism raises for a bad value.
    """
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    values = list(values)
    if not values:
        raise ValueError("values must contain at least one parameter value")
    if isinstance(dataset, tuple):
        train, test = dataset
    else:
        train, test = dataset.split(test_size=test_size, random_state=random_state)
    task = task or train.task
    settings = settings or EvalSettings(random_state=random_state)
    total = 1 + len(values) * trials
    seeds = np.random.SeedSequence(random_state).generate_state(len(values) * trials) \
        if random_state is not None else [None] * (len(values) * trials)
    common = {"bounds": train.bounds, "label_bounds": train.label_bounds, "settings": settings}
    if baseline is None:
        baseline = evaluate_non_private(train, test, task, **common)
    reference = real_reference(test.X, train.bounds, settings) if task == "unsupervised" else None
    done = 1
    if progress:
        progress(done, total, "non-private baseline")
    rows = []
    for i, value in enumerate(values):
        per_trial: dict[str, list[float]] = {}
        row_eps: list[float] = []
        for t in range(trials):
            mech = mechanism_factory(value)
            seed = seeds[i * trials + t]
            mech.set_params(random_state=None if seed is None else int(seed))
            rel = mech.release(train, n_samples=n_samples)
            row_eps.append(row_level_epsilon(rel))
            result = evaluate_release(rel, test.X, test.y, task, reference=reference, **common)
            for name, v in result.items():
                per_trial.setdefault(name, []).append(v)
            done += 1
            if progress:
                progress(done, total, f"{param} = {value}: trial {t + 1}/{trials}")
        chance = per_trial.pop("chance", [math.nan])[0]
        for name, vals in per_trial.items():
            mean, lo, hi = metric_interval(
                vals, n_test=test.n_samples if name in ACCURACY_METRICS else None)
            rows.append({
                "param": param, "x": value, "metric": name, "mean": mean, "lo": lo, "hi": hi,
                "baseline": baseline.get(name, math.nan), "chance": chance,
                "vs_chance": chance_comparison(name, lo, hi, chance),
                "n_trials": int(np.sum(np.isfinite(vals))),
                "higher_is_better": HIGHER_IS_BETTER.get(name, True),
                "epsilon_row": max(row_eps),
            })
    return pd.DataFrame(rows)
