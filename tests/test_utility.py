"""Utility evaluation (dpcore.utility) and its figures (app.figures.utility)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from scipy import stats
from sklearn.datasets import make_blobs

from app.figures.utility import image_grid_figure, utility_curve_figure
from dpcore.data import load_dataset
from dpcore.mechanisms import RONGauss
from dpcore.release import Guarantee, Release
from dpcore.utility import (
    EvalSettings,
    choose_k,
    evaluate_non_private,
    evaluate_release,
    mean_interval,
    random_guess_rmse,
    utility_sweep,
)

INF = float("inf")


def _blobs(n=800, k=4, d=5, seed=0):
    X, y = make_blobs(n_samples=n, centers=k, n_features=d, cluster_std=0.4, center_box=(-8, 8),
                      random_state=seed)
    return X, y


def _features_release(X, y=None, task="unsupervised"):
    """A release living in the feature space (identity transform), for checking the metrics."""
    return Release(data=X, columns=[f"x{j}" for j in range(X.shape[1])], mechanism="test",
                   parameters={"task": task}, guarantee=Guarantee(1.0, 0.0, "replace-one", "pure"),
                   noise=[], calibration="", bounds_source="user", n_rows=len(X), labels=y)


def test_mean_interval_matches_student_t():
    v = [0.5, 0.7, 0.9, 0.65, 0.8]
    mean, lo, hi = mean_interval(v)
    half = stats.t.ppf(0.975, 4) * np.std(v, ddof=1) / math.sqrt(5)
    assert mean == pytest.approx(np.mean(v)) and hi - mean == pytest.approx(half)
    assert mean - lo == pytest.approx(half)
    m1, lo1, hi1 = mean_interval([0.3, math.nan])
    assert m1 == 0.3 and math.isnan(lo1) and math.isnan(hi1)
    assert all(math.isnan(x) for x in mean_interval([]))


def test_random_guess_rmse_matches_simulation():
    rng = np.random.default_rng(0)
    y = rng.uniform(20, 80, size=400)
    guesses = rng.uniform(0, 100, size=(2000, 400))
    simulated = np.sqrt(np.mean((guesses - y) ** 2))
    assert random_guess_rmse(y, (0, 100)) == pytest.approx(simulated, rel=0.01)


@pytest.mark.slow
def test_clustering_metrics_on_separated_blobs():
    X, _ = _blobs()
    k, sil, km = choose_k(X)
    assert k == 4 and sil > 0.7
    base = evaluate_non_private(X[:600], X[600:], "unsupervised")
    assert base["k"] == 4
    assert base["ari_real"] > 0.98 and base["silhouette_real"] > 0.7
    # a release equal to the real training rows (feature space) gives the same numbers
    out = evaluate_release(_features_release(X[:600]), X[600:])
    assert out["ari_real"] > 0.98 and out["silhouette_release"] == pytest.approx(sil, abs=0.05)
    # a structureless release loses the real clusters: ARI near 0
    noise = np.random.default_rng(1).normal(size=(600, 5)) * 8
    out = evaluate_release(_features_release(noise), X[600:])
    assert out["ari_real"] < 0.6 < base["ari_real"]


def test_classification_and_regression_metrics():
    X, y = _blobs(n=1000, k=3)
    base = evaluate_non_private((X[:700], y[:700]), (X[700:], y[700:]), "classification")
    assert base["svm_accuracy"] > 0.99 and base["logreg_accuracy"] > 0.99
    assert base["chance"] == pytest.approx(np.max(np.bincount(y[700:])) / 300)
    shuffled = _features_release(X[:700], np.random.default_rng(0).permutation(y[:700]),
                                 "classification")
    out = evaluate_release(shuffled, X[700:], y[700:])
    assert out["svm_accuracy"] < 0.6  # labels carry no information: about chance (1/3)
    rng = np.random.default_rng(0)
    Xr = rng.uniform(-1, 1, size=(800, 3))
    yr = 10 * Xr[:, 0] + 5 * np.sin(3 * Xr[:, 1]) + rng.normal(0, 0.5, 800)
    reg = evaluate_non_private((Xr[:600], yr[:600]), (Xr[600:], yr[600:]), "regression",
                               label_bounds=(-20, 20))
    assert reg["krr_rmse"] < 1.5 < 5 < reg["chance"]
    single = _features_release(X[:50], np.zeros(50, int), "classification")
    out = evaluate_release(single, X[700:], y[700:])
    assert out["svm_accuracy"] == pytest.approx(np.mean(y[700:] == 0))


def test_evaluate_release_errors():
    X, y = _blobs(n=100, k=2)
    with pytest.raises(ValueError, match="labels"):
        evaluate_release(_features_release(X), X, y, "classification")
    with pytest.raises(ValueError, match="k_range"):
        EvalSettings(k_range=(1, 5))


@pytest.mark.slow
def test_utility_sweep_frame_progress_and_trend():
    ds = load_dataset("digits")
    calls = []
    df = utility_sweep(lambda e: RONGauss(epsilon=e, n_components=20), ds, [0.05, INF], trials=2,
                       progress=lambda done, total, msg: calls.append((done, total)))
    assert list(df.columns[:8]) == ["param", "x", "metric", "mean", "lo", "hi", "baseline", "chance"]
    assert set(df["metric"]) == {"svm_accuracy", "logreg_accuracy"}
    assert calls[-1] == (5, 5) and len(calls) == 5
    svm = df[df.metric == "svm_accuracy"].set_index("x")
    assert svm["baseline"].nunique() == 1 and svm["baseline"].iloc[0] > 0.95
    # NOT PRIVATE (epsilon = inf) is far better than epsilon = 0.05 (noise-dominated, ~chance)
    assert svm.loc[INF, "mean"] > 0.8 > 0.3 > svm.loc[0.05, "mean"]
    assert (svm["lo"] <= svm["mean"]).all() and (svm["mean"] <= svm["hi"]).all()
    with pytest.raises(ValueError, match="trials"):
        utility_sweep(lambda e: RONGauss(epsilon=e), ds, [1.0], trials=0)


def test_utility_curve_figure():
    df = pd.DataFrame({
        "param": "epsilon", "x": [0.1, 1.0, 10.0, 0.1, 1.0, 10.0],
        "metric": ["svm_accuracy"] * 3 + ["logreg_accuracy"] * 3,
        "mean": [0.2, 0.6, 0.9, 0.3, 0.5, 0.8], "lo": [0.1, 0.5, 0.85, 0.2, 0.4, 0.7],
        "hi": [0.3, 0.7, 0.95, 0.4, 0.6, 0.9], "baseline": 0.97, "chance": 0.1,
    })
    fig = utility_curve_figure(df, "svm_accuracy")
    assert isinstance(fig, go.Figure) and fig.layout.xaxis.type == "log"
    band, line, base, chance = fig.data
    assert band.fill == "toself" and list(line.y) == [0.2, 0.6, 0.9]
    assert base.line.dash == "dash" and list(base.y) == [0.97, 0.97]
    assert chance.line.dash == "dot"
    both = utility_curve_figure(df.assign(param="n_components"), log_x=None)
    assert both.layout.xaxis.type != "log" and len(both.data) == 8
    with pytest.raises(ValueError):
        utility_curve_figure(df.iloc[0:0])


def test_image_grid_figure():
    imgs = np.arange(5 * 64, dtype=float).reshape(5, 64)
    fig = image_grid_figure(imgs, (8, 8), titles=list("abcde"), n_cols=3)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (2 * 8 + 1, 3 * 8 + 2)
    assert np.nanmin(z) == 0 and np.nanmax(z) == 1
    assert [a.text for a in fig.layout.annotations] == list("abcde")
    with pytest.raises(ValueError, match="64"):
        image_grid_figure(np.zeros((2, 63)), (8, 8))


def test_isotropic_null_matches_location_and_scale_and_blobs_beat_it():
    from dpcore.utility import clustering_metrics, isotropic_null

    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 3)) * [3.0, 1.0, 0.5] + 2.0
    Z = isotropic_null(X, 20_000, np.random.default_rng(1))
    np.testing.assert_allclose(Z.mean(axis=0), X.mean(axis=0), atol=0.05)
    np.testing.assert_allclose(Z.var(axis=0), np.mean(X.var(axis=0)), rtol=0.05)  # same in every direction
    # four well-separated blobs on a line, released as they are: the null (one round blob of the same
    # scale, cut into k cells around its centre) cannot recover them, the release does
    centres = np.array([[0, 0], [6, 0], [12, 0], [18, 0]], dtype=float)
    lab = rng.integers(0, 4, 2000)
    blobs = centres[lab] + rng.normal(scale=0.5, size=(2000, 2))
    out = clustering_metrics(blobs[:1000], blobs[1000:], blobs[1000:])
    assert out["ari_real"] > 0.95 and out["ari_null"] < out["ari_real"] - 0.3
