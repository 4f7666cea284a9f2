"""The papers' protocol (SPEC section 7): train on a release, test on real held-out rows.

One entry trains on a release, :func:`train_on_release`: it takes the release's
:func:`~dpcore.evaluation.targets.training_set` (features, soft or hard labels or regression
targets) and returns a :class:`TrainedOnRelease` that maps real rows with
:func:`~dpcore.evaluation.targets.to_release_space` before predicting. The utility sweep of the
Utility and Compare pages (:func:`utility_sweep` -> :func:`evaluate_release`) and the DPMix
reproduction (``benchmarks/reproduce_dpmix.py``) both train through it; :func:`fit_on_real` is its
non-private twin on real rows (:func:`evaluate_non_private`, the baselines).

Soft labels (DPMix classification) train soft-target models on the soft labels themselves (the
default model ``softmax``: cross-entropy with soft targets) and hard-label models (the sweep's SVM
and logistic regression) on a class drawn from each soft label
(:func:`~dpcore.evaluation.targets.soft_label_draw`), never on the argmax (issue 13).

Training on a release is post-processing (no privacy cost); testing on real rows is not private
(:data:`~dpcore.evaluation.metrics.NOT_DP_NOTICE`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from sklearn.dummy import DummyClassifier

from dpcore.evaluation.metrics import (
    ACCURACY_METRICS,
    DEFAULT_SETTINGS,
    HIGHER_IS_BETTER,
    EvalSettings,
    chance_comparison,
    clustering_metrics,
    majority_rate,
    metric_interval,
    random_guess_rmse,
    real_reference,
)
from dpcore.evaluation.models import make_model, sweep_models, takes_soft_targets
from dpcore.evaluation.targets import (
    TrainingSet,
    check_public_transform,
    has_public_transform,
    real_training_set,
    scale_by_public_bounds,
    subsample,
    to_release_space,
    training_set,
)
from dpcore.validation import check_random_state

__all__ = [
    "TrainedOnRelease",
    "classification_metrics",
    "evaluate",
    "evaluate_non_private",
    "evaluate_release",
    "evaluation_problem",
    "fit_on_real",
    "regression_metrics",
    "row_level_epsilon",
    "train_on_release",
    "utility_sweep",
]


# ---------------------------------------------------------------------------------------- training
@dataclass
class TrainedOnRelease:
    """A fitted model plus how to map real rows and decode its outputs.

    Attributes
    ----------
    model : SoftLabelLinear, MLPOnRelease or a scikit-learn estimator
    task : {"classification", "regression"}
    classes : ndarray or None
        Class values (classification), in output-column order of a soft-target model.
    transform : callable
        Real rows ``(m, d)`` -> the model's input units (the release's public transform).
    label_scale : (lo, hi) or None
        Regression: outputs are in ``[0, 1]`` units, mapped back by ``lo + z (hi - lo)``.
    info : dict
        What was trained on (model, rows, label kind, mechanism, noise correction...).
    """

    model: Any
    task: str
    classes: np.ndarray | None
    transform: Any
    label_scale: tuple[float, float] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Class values (classification) or predictions in the label's original units."""
        Z = self.transform(np.asarray(X, dtype=float))
        if takes_soft_targets(self.model):
            scores = self.model.predict_scores(Z)
            if self.task == "classification":
                assert self.classes is not None
                return self.classes[np.argmax(scores, axis=1)]
            z = scores[:, 0]
        else:
            pred = np.asarray(self.model.predict(Z))
            if self.task == "classification":
                return pred
            z = pred.astype(float).reshape(len(Z), -1)[:, 0]
        if self.label_scale is None:
            return z
        lo, hi = self.label_scale
        return lo + z * (hi - lo)

    def score(self, X: np.ndarray, y: np.ndarray) -> float:
        """Accuracy (classification) or RMSE in the label's units (regression)."""
        pred = self.predict(X)
        y = np.asarray(y)
        if self.task == "classification":
            return float(np.mean(pred == y))
        return float(np.sqrt(np.mean((pred - y.astype(float)) ** 2)))


def _train(model: Any, data: TrainingSet, transform: Callable[[np.ndarray], np.ndarray], *,
           max_rows: int | None, random_state: Any, info: dict[str, Any],
           **params: Any) -> TrainedOnRelease:
    """Fit ``model`` (a :func:`make_model` name or an estimator) on ``data``; see
    :func:`train_on_release`."""
    if isinstance(model, str):
        estimator, name = make_model(model, random_state=random_state, **params), model
    elif params:
        raise ValueError(f"model options {sorted(params)} apply to named models only; set them on the "
                         "estimator itself")
    else:
        estimator, name = model, type(model).__name__
    rng = check_random_state(random_state)
    if max_rows is not None and data.n_rows > max_rows:
        data = data.rows(subsample(data.n_rows, int(max_rows), rng))
    if takes_soft_targets(estimator):
        estimator.fit(data.X, data.soft_targets())
    else:
        y = data.hard_labels(rng) if data.task == "classification" else data.y
        if data.task == "classification" and np.unique(y).size < 2:
            estimator = DummyClassifier(strategy="most_frequent")  # one class: the constant predictor
        estimator.fit(data.X, y)
    return TrainedOnRelease(model=estimator, task=data.task, classes=data.classes, transform=transform,
                            label_scale=data.label_scale,
                            info={"model": name, "n_train": data.n_rows, "label_kind": data.label_kind,
                                  **info})


def train_on_release(release: Any, model: Any = "softmax", *, task: str | None = None,
                     max_rows: int | None = None, noise_correction: bool = False,
                     random_state: Any = None, **params: Any) -> TrainedOnRelease:
    """Fit ``model`` on a release's rows and labels (post-processing: no privacy cost).

    Soft labels by default (issue 13): the default ``softmax`` model minimises the cross-entropy
    with the soft targets ``t`` (DPMix's noisy mixed one-hot columns; the ``<label>_argmax`` column
    is ignored). Its logit gradient ``softmax(x W + b) - t`` is linear in ``t``, so zero-mean label
    noise leaves it unbiased and the mixing proportions are kept, whereas the argmax of a mixture's
    labels is its majority class (for ``ell >= 6`` and a 25% minority, the minority is the argmax of
    under 10% of the mixtures), which teaches a classifier to predict the majority class. A
    hard-label estimator gets one class drawn from each soft label instead
    (:meth:`~dpcore.evaluation.targets.TrainingSet.hard_labels`).

    Parameters
    ----------
    release : Release
        A labelled release (DPMix: features in [0, 1] units, soft labels).
    model : {"softmax", "linear", "mlp", "mlp-classifier"} or estimator
        A soft-target model by name (:func:`~dpcore.evaluation.models.make_model`), or any
        scikit-learn estimator (fitted in place on hard labels; e.g. the sweep's
        :func:`~dpcore.evaluation.models.sweep_models`). A one-class training set fits the constant
        predictor instead of a hard-label classifier.
    task : {"classification", "regression"}, optional
        Default: the release's task.
    max_rows : int, optional
        Train on a random sub-sample of at most this many rows (drawn from ``random_state``).
    noise_correction : bool, default False
        For ``linear``: subtract the public feature noise variance ``sigma_x^2`` (from
        ``release.details``) from the squared-loss gradient (unbiased errors-in-variables fit).
        Off by default: without it the fit equals ridge regression with penalty ``sigma_x^2``,
        biased but a better *predictor* at high noise (MNIST, T = 60,000, 5 epochs: accuracy
        0.61 uncorrected vs 0.35 corrected at ell = 16, sigma = 0.67; 0.76 vs 0.78 at ell = 64,
        sigma = 0.22). Turn it on to estimate the coefficients themselves (regression).
    random_state : None, int or Generator
        The model's randomness, the sub-sample and the soft-label draw.
    **params
        Options of a named model (``epochs``, ``batch_size``, ``learning_rate``, ``hidden``...).

    Returns
    -------
    TrainedOnRelease
        ``predict``/``score`` take REAL rows in original units (mapped by
        :func:`~dpcore.evaluation.targets.to_release_space`).

    Raises
    ------
    ValueError
        A release without labels, an unknown model name, options given with an estimator.
    """
    data = training_set(release, task)
    sigma_x = float(release.details.get("sigma_x", 0.0) or 0.0)
    if model == "linear" and noise_correction and sigma_x > 0:
        params.setdefault("noise_correction", sigma_x**2)
    return _train(model, data, partial(to_release_space, release), max_rows=max_rows,
                  random_state=random_state, **params,
                  info={"mechanism": release.mechanism,
                        "noise_correction": params.get("noise_correction", 0.0)})


def fit_on_real(X: np.ndarray, y: np.ndarray, *, bounds: Any = None, task: str = "classification",
                classes: np.ndarray | None = None, label_bounds: tuple[float, float] | None = None,
                model: Any = "softmax", max_rows: int | None = None, random_state: Any = None,
                **params: Any) -> TrainedOnRelease:
    """The non-private baseline: the same model on real rows, scaled to [0, 1] by ``bounds``.

    Classification targets are one-hot over ``classes`` (default: the values in ``y``);
    regression targets are scaled by ``label_bounds`` (default: no scaling). Without ``bounds`` the
    features stay in their original units. Other arguments as :func:`train_on_release`.
    """
    data = real_training_set(X, y, bounds=bounds, task=task, classes=classes, label_bounds=label_bounds)
    return _train(model, data, partial(scale_by_public_bounds, bounds=bounds), max_rows=max_rows,
                  random_state=random_state, **params, info={"mechanism": "none (real data)"})


def evaluate(trained: TrainedOnRelease, X_test: np.ndarray, y_test: np.ndarray) -> dict[str, Any]:
    """Score on real held-out rows: ``{"metric": "accuracy"|"rmse", "value": ..., "n_test": ...}``
    plus ``trained.info``."""
    metric = "accuracy" if trained.task == "classification" else "rmse"
    return {"metric": metric, "value": trained.score(X_test, y_test), "n_test": int(len(X_test)),
            **trained.info}


# ---------------------------------------------------------------------------------------- the sweep's metrics
def _supervised_metrics(fit: Callable[[Any, int], TrainedOnRelease], task: str, test_X: np.ndarray,
                        test_y: np.ndarray, *, label_bounds: tuple[float, float] | None,
                        settings: EvalSettings) -> dict[str, float]:
    """Every :func:`sweep_models` model fitted by ``fit(model, max_rows)`` and scored on the real
    test rows, plus ``chance``."""
    max_rows = settings.max_train if task == "classification" else settings.max_train_krr
    out = {name: fit(model, max_rows).score(test_X, test_y)
           for name, model in sweep_models(task, settings.random_state).items()}
    if task == "classification":
        out["chance"] = majority_rate(test_y)
    else:
        out["chance"] = random_guess_rmse(test_y, label_bounds) if label_bounds is not None else math.nan
    return out


def classification_metrics(
    train_X: np.ndarray, train_y: np.ndarray, test_X: np.ndarray, test_y: np.ndarray,
    *, settings: EvalSettings = DEFAULT_SETTINGS,
) -> dict[str, float]:
    """SVM and logistic-regression accuracy of models fitted on ``(train_X, train_y)`` (at most
    ``settings.max_train`` rows) on the real test rows, plus ``chance`` (majority class)."""
    return _supervised_metrics(
        lambda model, rows: fit_on_real(train_X, train_y, model=model, max_rows=rows,
                                        random_state=settings.random_state),
        "classification", test_X, test_y, label_bounds=None, settings=settings)


def regression_metrics(
    train_X: np.ndarray, train_y: np.ndarray, test_X: np.ndarray, test_y: np.ndarray,
    *, label_bounds: tuple[float, float] | None = None, settings: EvalSettings = DEFAULT_SETTINGS,
) -> dict[str, float]:
    """Kernel ridge RMSE on the real test rows (at most ``settings.max_train_krr`` training rows),
    plus ``chance`` (random-guess RMSE) if the public label range is known."""
    return _supervised_metrics(
        lambda model, rows: fit_on_real(train_X, train_y, task="regression", model=model,
                                        max_rows=rows, random_state=settings.random_state),
        "regression", test_X, test_y, label_bounds=label_bounds, settings=settings)


# ---------------------------------------------------------------------------------------- entry points
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


def evaluate_release(
    release: Any,
    test_X: np.ndarray,
    test_y: np.ndarray | None = None,
    task: str | None = None,
    *,
    bounds: np.ndarray | None = None,
    label_bounds: tuple[float, float] | None = None,
    settings: EvalSettings = DEFAULT_SETTINGS,
    reference: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, float]:
    """Utility of one release on real held-out rows (train on the release, test on real data).

    Parameters
    ----------
    release : dpcore.release.Release
    test_X : array (t, d)
        Real held-out rows in the original feature space; mapped with :func:`to_release_space`.
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
        Metric name -> value (:mod:`dpcore.evaluation.metrics`); ``chance`` for supervised tasks.
        Supervised models are trained by :func:`train_on_release` (soft labels: a class drawn
        from each soft label).

    Raises
    ------
    ValueError
        A supervised task on a release without labels, or whose space has no public transform.
    """
    task = task or release.parameters.get("task", "unsupervised")
    test_X = np.asarray(test_X, dtype=float)
    if task == "unsupervised":
        mapped = to_release_space(release, test_X) if has_public_transform(release) else None
        return clustering_metrics(release.data, mapped, test_X, bounds=bounds, settings=settings,
                                  reference=reference)
    if release.labels is None or test_y is None:
        raise ValueError(f"task {task!r} needs labels in the release and test_y")
    if task not in ("classification", "regression"):
        raise ValueError(f"task must be unsupervised, classification or regression, got {task!r}")
    check_public_transform(release)
    return _supervised_metrics(
        lambda model, rows: train_on_release(release, model, task=task, max_rows=rows,
                                             random_state=settings.random_state),
        task, test_X, test_y, label_bounds=label_bounds, settings=settings)


def _xy(part: Any) -> tuple[np.ndarray, np.ndarray | None]:
    if hasattr(part, "X"):
        return np.asarray(part.X, dtype=float), part.y
    X, y = part if isinstance(part, tuple) else (part, None)
    return np.asarray(X, dtype=float), y


def evaluate_non_private(
    train: Any, test: Any, task: str | None = None, *, bounds: np.ndarray | None = None,
    label_bounds: tuple[float, float] | None = None, settings: EvalSettings = DEFAULT_SETTINGS,
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
        return clustering_metrics(scale_by_public_bounds(Xtr, bounds), scale_by_public_bounds(Xte, bounds),
                                  Xte, bounds=bounds, settings=settings)
    if ytr is None or yte is None:
        raise ValueError(f"task {task!r} needs labels for train and test")
    if task == "classification":
        return classification_metrics(Xtr, ytr, Xte, yte, settings=settings)
    if task == "regression":
        return regression_metrics(Xtr, ytr, Xte, yte, label_bounds=label_bounds, settings=settings)
    raise ValueError(f"task must be unsupervised, classification or regression, got {task!r}")


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
