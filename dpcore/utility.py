"""Former home of the utility evaluation; a re-export module kept for existing imports.

Everything here is defined in :mod:`dpcore.evaluation` (metrics and intervals in
:mod:`dpcore.evaluation.metrics`, the protocol -- :func:`evaluate_release`,
:func:`evaluate_non_private`, :func:`utility_sweep` -- in :mod:`dpcore.evaluation.protocol`, the
release's labels and real rows in its space in :mod:`dpcore.evaluation.targets`); import from
there in new code.
"""

from __future__ import annotations

from dpcore.evaluation import (
    ACCURACY_METRICS,
    CLASSIFICATION_METRICS,
    CLUSTERING_METRICS,
    HIGHER_IS_BETTER,
    NOT_DP_NOTICE,
    REGRESSION_METRICS,
    EvalSettings,
    best_per_value,
    chance_comparison,
    choose_k,
    classification_metrics,
    clustering_metrics,
    evaluate_non_private,
    evaluate_release,
    evaluation_problem,
    exploration_csv,
    exploration_filename,
    isotropic_null,
    mean_interval,
    metric_interval,
    null_verdict,
    random_guess_rmse,
    real_reference,
    regression_metrics,
    release_class_labels,
    release_training_labels,
    row_level_epsilon,
    soft_label_block,
    soft_label_draw,
    utility_sweep,
)

__all__ = [
    "ACCURACY_METRICS",
    "CLASSIFICATION_METRICS",
    "CLUSTERING_METRICS",
    "HIGHER_IS_BETTER",
    "NOT_DP_NOTICE",
    "REGRESSION_METRICS",
    "EvalSettings",
    "best_per_value",
    "chance_comparison",
    "choose_k",
    "classification_metrics",
    "clustering_metrics",
    "evaluate_non_private",
    "evaluate_release",
    "evaluation_problem",
    "exploration_csv",
    "exploration_filename",
    "isotropic_null",
    "mean_interval",
    "metric_interval",
    "null_verdict",
    "random_guess_rmse",
    "real_reference",
    "regression_metrics",
    "release_class_labels",
    "release_training_labels",
    "row_level_epsilon",
    "soft_label_block",
    "soft_label_draw",
    "utility_sweep",
]
