"""One evaluation home (issue 15, item 8): the utility sweep and train_on_release share one extraction
of a release's labels and one map of real rows; dpcore.training and dpcore.utility only re-export."""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpcore.evaluation as evaluation
from dpcore.data import load_dataset
from dpcore.evaluation import (
    EvalSettings,
    TrainingSet,
    evaluate_release,
    fit_on_real,
    has_public_transform,
    sweep_models,
    to_release_space,
    train_on_release,
    training_set,
    utility_sweep,
)
from dpcore.evaluation import protocol as protocol_module
from dpcore.mechanisms import DPMix, JLLaplace, LocalGaussian

ROOT = Path(__file__).resolve().parents[1]

#: The public names the two former modules had before the move (their callers rely on them).
FORMER_NAMES = {
    "training": {"MLPOnRelease", "SoftLabelLinear", "TrainedOnRelease", "evaluate", "fit_on_real",
                 "make_model", "release_training_arrays", "train_on_release"},
    "utility": {"CLUSTERING_METRICS", "CLASSIFICATION_METRICS", "REGRESSION_METRICS", "EvalSettings",
                "choose_k", "classification_metrics", "clustering_metrics", "evaluate_non_private",
                "evaluate_release", "mean_interval", "metric_interval", "chance_comparison",
                "best_per_value", "evaluation_problem", "exploration_csv", "exploration_filename",
                "NOT_DP_NOTICE", "random_guess_rmse", "isotropic_null", "null_verdict",
                "release_class_labels", "release_training_labels", "row_level_epsilon",
                "soft_label_block", "soft_label_draw", "real_reference", "regression_metrics",
                "utility_sweep", "ACCURACY_METRICS", "HIGHER_IS_BETTER"},
}


def _minority_table(n: int = 4000, seed: int = 1):
    """Binary labels with a 25% minority class that the first feature separates."""
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=n) < 0.25).astype(int)
    X = rng.uniform(size=(n, 3))
    X[:, 0] = np.clip(0.3 + 0.4 * y + rng.normal(0, 0.08, n), 0, 1)
    return X, y


def _dataset(X, y):
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])]).assign(y=y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every fact is public: no PrivacyLeakWarning
        return load_dataset(frame, label="y", task="classification", bounds=(0, 1), classes=[0, 1])


@pytest.fixture
def spy(monkeypatch):
    """Records every extraction the protocol makes (label kind) and every hard label set a
    hard-label model is fitted on."""
    seen = {"kinds": [], "hard": []}
    extract, hard_labels = protocol_module.training_set, TrainingSet.hard_labels

    def recording_extract(release, task=None):
        data = extract(release, task)
        seen["kinds"].append(data.label_kind)
        return data

    def recording_hard_labels(self, rng):
        labels = hard_labels(self, rng)
        seen["hard"].append(np.asarray(labels))
        return labels

    monkeypatch.setattr(protocol_module, "training_set", recording_extract)
    monkeypatch.setattr(TrainingSet, "hard_labels", recording_hard_labels)
    return seen


@pytest.mark.slow
def test_sweep_and_train_on_release_train_a_dpmix_release_on_its_soft_labels(spy):
    # noise-free mixtures of ell = 16 rows: the argmax of a soft label is the mixture's majority
    # class, the minority for under 8% of them; a draw keeps the 25% rate
    X, y = _minority_table()
    train, test = _dataset(X[:3000], y[:3000]), _dataset(X[3000:], y[3000:])
    frame = utility_sweep(lambda ell: DPMix(ell=ell, sigma_x=0.0, sigma_y=0.0), (train, test), [16],
                          param="ell", trials=1, settings=EvalSettings(max_train=3000))
    assert set(frame["metric"]) == {"svm_accuracy", "logreg_accuracy"}
    # both sweep models went through the one extraction, which saw soft labels
    assert spy["kinds"] == ["soft", "soft"]
    for labels in spy["hard"]:  # what the SVM and the logistic regression were fitted on
        assert labels.mean() == pytest.approx(0.25, abs=0.03)
    rel = DPMix(ell=16, sigma_x=0.0, sigma_y=0.0, random_state=0).release(train)
    assert np.mean(rel.labels[:, -1].astype(int)) < 0.08  # the argmax column: the majority class
    spy["kinds"].clear()
    trained = train_on_release(rel, random_state=0, epochs=5)  # the default: softmax on soft targets
    assert spy["kinds"] == ["soft"] and trained.info["label_kind"] == "soft"
    assert trained.model.coef_.shape == (3, 2)
    np.testing.assert_array_equal(training_set(rel).y, rel.labels[:, :2].astype(float))


@pytest.mark.slow
def test_sweep_and_train_on_release_train_a_local_gaussian_release_on_its_labels(spy):
    X, y = _minority_table(n=2000, seed=2)
    train, test = _dataset(X[:1500], y[:1500]), _dataset(X[1500:], y[1500:])
    utility_sweep(lambda eps: LocalGaussian(epsilon=eps), (train, test), [2.0], trials=1)
    assert spy["kinds"] == ["hard", "hard"]
    for labels in spy["hard"]:  # the released label column itself, not a draw
        assert labels.shape == (1500,) and set(np.unique(labels)) <= {0, 1}
    rel = LocalGaussian(epsilon=2.0, random_state=0).release(train)
    spy["kinds"].clear()
    trained = train_on_release(rel, random_state=0, epochs=5)
    assert spy["kinds"] == ["hard"] and trained.info["label_kind"] == "hard"
    data = training_set(rel)
    np.testing.assert_array_equal(data.y, rel.labels)
    np.testing.assert_array_equal(data.soft_targets().argmax(axis=1), rel.labels)  # one-hot over 0, 1
    # the sweep's SVM is the same train_on_release entry: its score is the one evaluate_release reports
    svm = sweep_models("classification", 0)["svm_accuracy"]
    direct = train_on_release(rel, svm, max_rows=5000, random_state=0).score(test.X, test.y)
    assert evaluate_release(rel, test.X, test.y, settings=EvalSettings(random_state=0))["svm_accuracy"] \
        == direct


def test_dpmix_regression_sweep_predicts_in_label_units():
    # DPMix releases regression targets in [0, 1] units of the public label range; the sweep's
    # kernel ridge maps its predictions back (before the move it compared [0, 1] predictions with
    # labels in their own units)
    rng = np.random.default_rng(3)
    X = rng.random((1200, 3))
    y = 100 + 50 * X[:, 0]  # in [100, 150]; public label range [0, 200]
    rel = DPMix(ell=1, sigma_x=0.0, sigma_y=0.0, n_mixtures=900, bounds=(0, 1), label_bounds=(0, 200),
                task="regression", random_state=0).release(X[:900], y[:900])
    assert training_set(rel).label_scale == (0.0, 200.0)
    out = evaluate_release(rel, X[900:], y[900:], label_bounds=(0, 200))
    assert out["krr_rmse"] < 3.0 < 50 < out["chance"]


def test_real_rows_reach_the_release_space_only_through_a_public_transform():
    X, y = _minority_table(n=300)
    secret = JLLaplace(epsilon=1.0, n_components=2, bounds=(0, 1), random_state=0).release(X)
    assert not has_public_transform(secret)
    with pytest.raises(ValueError, match="jl-laplace release has no public transform"):
        to_release_space(secret, X)
    mix = DPMix(ell=2, sigma_x=0.0, sigma_y=0.0, bounds=(0, 2), classes=[0, 1], random_state=0).release(
        2 * X, y)
    np.testing.assert_allclose(to_release_space(mix, 2 * X), X)  # [0, 2] scaled to [0, 1]
    base = fit_on_real(X, y, model=sweep_models("classification")["logreg_accuracy"])
    np.testing.assert_array_equal(base.transform(X), X)  # no bounds: features as they are
    with pytest.raises(ValueError, match="options"):
        train_on_release(mix, sweep_models("classification")["svm_accuracy"], epochs=3)


@pytest.mark.parametrize("name", sorted(FORMER_NAMES))
def test_former_modules_only_re_export_the_evaluation(name):
    path = ROOT / "dpcore" / f"{name}.py"
    tree = ast.parse(path.read_text())
    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.ImportFrom):
            assert node.module in ("__future__", "dpcore.evaluation"), ast.dump(node)
            continue
        assert isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["__all__"], \
            f"{path.name}:{node.lineno} defines something of its own"
    module = importlib.import_module(f"dpcore.{name}")
    assert FORMER_NAMES[name] <= set(module.__all__)
    for attr in module.__all__:
        assert getattr(module, attr) is getattr(evaluation, attr), attr
