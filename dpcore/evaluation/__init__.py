"""Utility evaluation: models trained on a release and tested on real held-out rows (SPEC section 7).

One home, one vocabulary:

- :mod:`~dpcore.evaluation.targets` — what a model learns from: :func:`training_set` (a release's
  features and labels, with the label kind ``soft``/``hard``/``continuous``), :func:`to_release_space`
  (real rows mapped by the release's public transform), :func:`soft_label_draw`.
- :mod:`~dpcore.evaluation.models` — the models: the DPMix experiments' soft-target models
  (:class:`SoftLabelLinear`, :class:`MLPOnRelease`, :func:`make_model`) and the sweep's
  scikit-learn models (:func:`sweep_models`: RBF SVM, logistic regression, kernel ridge).
- :mod:`~dpcore.evaluation.protocol` — train on a release, test on real rows:
  :func:`train_on_release` (the one entry, used by the utility sweep and the DPMix reproduction),
  :func:`fit_on_real` (non-private twin), :func:`evaluate_release`, :func:`evaluate_non_private`,
  :func:`utility_sweep`.
- :mod:`~dpcore.evaluation.metrics` — metrics, intervals over trials (:func:`metric_interval`), chance
  levels and the clustering null (:func:`chance_comparison`, :func:`null_verdict`), and the
  not-private labelling of every output (:data:`NOT_DP_NOTICE`).

:mod:`dpcore.training` and :mod:`dpcore.utility` re-export their former names from here.
"""

from __future__ import annotations

from dpcore.evaluation.metrics import (
    ACCURACY_METRICS,
    CLASSIFICATION_METRICS,
    CLUSTERING_METRICS,
    DEFAULT_SETTINGS,
    HIGHER_IS_BETTER,
    NOT_DP_NOTICE,
    REGRESSION_METRICS,
    EvalSettings,
    best_per_value,
    chance_comparison,
    choose_k,
    clustering_metrics,
    exploration_csv,
    exploration_filename,
    isotropic_null,
    majority_rate,
    mean_interval,
    metric_interval,
    null_verdict,
    random_guess_rmse,
    real_reference,
)
from dpcore.evaluation.models import (
    MODELS,
    MLPOnRelease,
    SoftLabelLinear,
    make_model,
    sweep_models,
    takes_soft_targets,
)
from dpcore.evaluation.protocol import (
    TrainedOnRelease,
    classification_metrics,
    evaluate,
    evaluate_non_private,
    evaluate_release,
    evaluation_problem,
    fit_on_real,
    regression_metrics,
    row_level_epsilon,
    train_on_release,
    utility_sweep,
)
from dpcore.evaluation.targets import (
    LABEL_KINDS,
    TrainingSet,
    check_public_transform,
    has_public_transform,
    one_hot,
    real_training_set,
    release_class_labels,
    release_training_arrays,
    release_training_labels,
    scale_by_public_bounds,
    soft_label_block,
    soft_label_draw,
    subsample,
    to_release_space,
    training_set,
)

__all__ = [
    "ACCURACY_METRICS",
    "CLASSIFICATION_METRICS",
    "CLUSTERING_METRICS",
    "DEFAULT_SETTINGS",
    "EvalSettings",
    "HIGHER_IS_BETTER",
    "LABEL_KINDS",
    "MLPOnRelease",
    "MODELS",
    "NOT_DP_NOTICE",
    "REGRESSION_METRICS",
    "SoftLabelLinear",
    "TrainedOnRelease",
    "TrainingSet",
    "best_per_value",
    "chance_comparison",
    "check_public_transform",
    "choose_k",
    "classification_metrics",
    "clustering_metrics",
    "evaluate",
    "evaluate_non_private",
    "evaluate_release",
    "evaluation_problem",
    "exploration_csv",
    "exploration_filename",
    "fit_on_real",
    "has_public_transform",
    "isotropic_null",
    "majority_rate",
    "make_model",
    "mean_interval",
    "metric_interval",
    "null_verdict",
    "one_hot",
    "random_guess_rmse",
    "real_reference",
    "real_training_set",
    "regression_metrics",
    "release_class_labels",
    "release_training_arrays",
    "release_training_labels",
    "row_level_epsilon",
    "scale_by_public_bounds",
    "soft_label_block",
    "soft_label_draw",
    "subsample",
    "sweep_models",
    "takes_soft_targets",
    "to_release_space",
    "train_on_release",
    "training_set",
    "utility_sweep",
]
