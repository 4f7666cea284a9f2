"""Models trained on releases (dpcore.training): non-private sanity, noise handling, errors."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from dpcore.mechanisms import DPMix
from dpcore.training import (
    SoftLabelLinear,
    evaluate,
    fit_on_real,
    make_model,
    release_training_arrays,
    train_on_release,
)


@pytest.fixture(scope="module")
def digits_split():
    X, y = load_digits(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def _mix(Xtr, ytr, **kw):
    kw.setdefault("random_state", 0)
    return DPMix(bounds=(0, 16), classes=np.arange(10), **kw).release(Xtr, ytr)


@pytest.mark.slow
@pytest.mark.parametrize(("model", "opts"), [("softmax", {"epochs": 30}), ("linear", {"epochs": 30}),
                                             ("mlp", {"epochs": 60, "hidden": (64,)})])
def test_nonprivate_release_reaches_the_nonprivate_accuracy(digits_split, model, opts):
    """sigma = 0, ell = 1 (random rows, 3n of them): within 4 points of the same model on real rows."""
    Xtr, Xte, ytr, yte = digits_split
    rel = _mix(Xtr, ytr, ell=1, sigma_x=0.0, n_mixtures=3 * len(Xtr))
    assert not rel.is_private
    acc_rel = train_on_release(rel, model, random_state=0, **opts).score(Xte, yte)
    acc_real = fit_on_real(Xtr, ytr, bounds=(0, 16), model=model, random_state=0, **opts).score(Xte, yte)
    assert acc_real > 0.85
    assert acc_rel > acc_real - 0.04


def test_private_release_is_useful_but_below_the_baseline(digits_split):
    """epsilon = 50, ell = 8 (sigma ~ 0.2): well above chance (0.1), below the non-private fit."""
    Xtr, Xte, ytr, yte = digits_split
    accs = []
    for seed in range(3):
        rel = _mix(Xtr, ytr, ell=8, epsilon=50.0, n_mixtures=3 * len(Xtr), random_state=seed)
        assert rel.is_private and rel.guarantee.epsilon <= 50.0
        accs.append(train_on_release(rel, "linear", random_state=seed, epochs=30).score(Xte, yte))
    base = fit_on_real(Xtr, ytr, bounds=(0, 16), model="linear", random_state=0, epochs=30)
    assert 0.4 < np.mean(accs) < base.score(Xte, yte)


def test_noise_correction_removes_errors_in_variables_attenuation():
    """Squared loss on noisy features shrinks the slope by var/(var + sigma^2); sigma_x^2 removes it."""
    rng = np.random.default_rng(0)
    n, d, sigma = 3000, 4, 0.3
    X = rng.random((n, d))
    w = np.array([1.0, -0.5, 0.8, 0.3])
    y = 0.2 + 0.25 * (X @ w) / 1.1  # in [0, 1] by construction
    rel = DPMix(ell=1, sigma_x=sigma, sigma_y=0.05, n_mixtures=30_000, bounds=(0, 1),
                label_bounds=(0, 1), task="regression", random_state=1).release(X, y)
    slope = 0.25 * w / 1.1
    fits = {c: train_on_release(rel, "linear", noise_correction=c, random_state=2, epochs=20)
            for c in (False, True)}
    raw = fits[False].model.coef_[:, 0]
    fixed = fits[True].model.coef_[:, 0]
    attenuation = (1 / 12) / (1 / 12 + sigma**2)  # 0.48
    ratio_raw = raw @ slope / (slope @ slope)
    ratio_fixed = fixed @ slope / (slope @ slope)
    assert abs(ratio_raw - attenuation) < 0.08
    assert abs(ratio_fixed - 1.0) < 0.15
    Xte = rng.random((500, d))
    yte = 0.2 + 0.25 * (Xte @ w) / 1.1
    assert fits[True].score(Xte, yte) < fits[False].score(Xte, yte)  # RMSE in label units


def test_regression_predictions_in_original_label_units():
    rng = np.random.default_rng(3)
    X = rng.random((400, 3))
    y = 100 + 50 * X[:, 0]  # in [100, 150]; public label bounds [0, 200]
    rel = DPMix(ell=1, sigma_x=0.0, n_mixtures=1200, bounds=(0, 1), label_bounds=(0, 200),
                task="regression", random_state=0).release(X, y)
    trained = train_on_release(rel, "linear", random_state=0, epochs=40)
    pred = trained.predict(X)
    assert np.sqrt(np.mean((pred - y) ** 2)) < 3.0  # label range 50, scaled range 200
    out = evaluate(trained, X, y)
    assert out["metric"] == "rmse" and out["value"] == pytest.approx(np.sqrt(np.mean((pred - y) ** 2)))


def test_training_arrays_drop_the_argmax_column(digits_split):
    Xtr, _, ytr, _ = digits_split
    rel = _mix(Xtr, ytr, ell=4, sigma_x=0.1)
    X, Y, classes, task = release_training_arrays(rel)
    assert X.shape == (len(Xtr), 64) and Y.shape == (len(Xtr), 10) and task == "classification"
    np.testing.assert_array_equal(classes, np.arange(10))
    np.testing.assert_array_equal(Y, rel.labels[:, :10])
    unsup = DPMix(ell=2, sigma_x=0.1, bounds=(0, 16), random_state=0).release(Xtr)
    with pytest.raises(ValueError, match="no labels"):
        release_training_arrays(unsup)


def test_bad_model_options_raise():
    with pytest.raises(ValueError, match="model"):
        make_model("svm")
    with pytest.raises(ValueError, match="learning_rate"):
        SoftLabelLinear(learning_rate=0.0).fit(np.ones((4, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="loss"):
        SoftLabelLinear("hinge").fit(np.ones((4, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="rows"):
        SoftLabelLinear().fit(np.ones((4, 2)), np.ones((3, 2)))
