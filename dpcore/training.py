"""Former home of the models trained on a release; a re-export module kept for existing imports.

Everything here is defined in :mod:`dpcore.evaluation` (models in
:mod:`dpcore.evaluation.models`, :func:`train_on_release` and :func:`fit_on_real` in
:mod:`dpcore.evaluation.protocol`, :func:`release_training_arrays` in
:mod:`dpcore.evaluation.targets`); import from there in new code.
"""

from __future__ import annotations

from dpcore.evaluation import (
    MODELS,
    MLPOnRelease,
    SoftLabelLinear,
    TrainedOnRelease,
    evaluate,
    fit_on_real,
    make_model,
    release_training_arrays,
    train_on_release,
)

__all__ = [
    "MODELS",
    "MLPOnRelease",
    "SoftLabelLinear",
    "TrainedOnRelease",
    "evaluate",
    "fit_on_real",
    "make_model",
    "release_training_arrays",
    "train_on_release",
]
