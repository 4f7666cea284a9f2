"""PCA-Gauss: sensitivities (SPEC section 3), noise scales, empirical spread, guarantees, errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpcore.calibration import analytic_gaussian_sigma
from dpcore.mechanisms import PCAGauss
from dpcore.mechanisms.pca_gauss import (
    eigenvalue_sensitivity,
    lap_pca_sensitivity,
    pca_mean_sensitivity,
    pca_second_moment_sensitivity,
    scale_to_box,
)
from dpcore.utility import evaluate_non_private, evaluate_release

INF = float("inf")


def _data(n=400, d=12, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, size=(n, d)) * np.linspace(0.2, 1.0, d)


def _blobs(n=3000, d=12, k=3, seed=0, spread=0.15):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-0.7, 0.7, size=(k, d))
    y = np.arange(n) % k
    return np.clip(centers[y] + spread * rng.standard_normal((n, d)), -1, 1), y


# ------------------------------------------------------------------------------------ formulas
@pytest.mark.parametrize("p,n,a", [(1, 100, 1.0), (2, 50, 1.0), (5, 1000, 1.0), (8, 300, 2.0)])
def test_sensitivity_formulas(p, n, a):
    assert eigenvalue_sensitivity(p, n, a, "paper") == pytest.approx(p * a * a / n)
    assert eigenvalue_sensitivity(p, n, a, "tight") == pytest.approx(min(p, 2) * a * a / n)
    assert pca_second_moment_sensitivity(p, n, a, "paper") == pytest.approx(p * p * a * a / n)
    assert pca_second_moment_sensitivity(p, n, a, "tight") == pytest.approx(
        min(p * (p + 1) / 2, p + 1) * a * a / n)
    assert pca_second_moment_sensitivity(p, n, a, "paper", supervised=True) == pytest.approx(
        (p * p * a * a + 4 * p * a * a + a * a) / n)
    assert pca_second_moment_sensitivity(p, n, a, "tight", supervised=True) == pytest.approx(
        min(p * (p + 1) / 2 + 2 * p + 1, p + 2 + 2 * math.sqrt(p)) * a * a / n)
    assert pca_mean_sensitivity(p, n, a, "paper") == pytest.approx(2 * p * a / n)
    assert pca_mean_sensitivity(p, n, a, "tight") == pytest.approx(2 * math.sqrt(p) * a / n)
    assert lap_pca_sensitivity(10, n, a, "paper") == pytest.approx(100 * a * a / n)
    assert lap_pca_sensitivity(10, n, a, "tight") == pytest.approx(55 * a * a / n)


def test_second_moment_bounds_are_attained_and_never_exceeded():
    """Prop. 3: over the box [-1, 1]^p the full-matrix change sup is p^2 (tight) and the upper
    triangle's is p(p+1)/2; the maximum over {-1, 0, 1}^p pairs equals both."""
    for p in (2, 3, 4):
        V = np.array(list(itertools.product([-1.0, 0.0, 1.0], repeat=p)))
        outer = np.einsum("ni,nj->nij", V, V)
        iu = np.triu_indices(p)
        full = max(np.abs(outer - o).sum(axis=(1, 2)).max() for o in outer)
        upper = max(np.abs(outer[:, iu[0], iu[1]] - o[iu]).sum(axis=1).max() for o in outer)
        assert full == pca_second_moment_sensitivity(p, 1, calibration="paper")
        assert upper == p * (p + 1) / 2  # the box bound used by "tight" when it is the smaller


def test_pca_features_lie_in_the_unit_ball_and_respect_the_tight_bounds():
    """x^ = W^T x / sqrt(d) with x in [-1, 1]^d: ||x^||_2 <= 1, so the tight (ball) bounds hold:
    upper-triangle change <= p + 1, mean change (L1) <= 2 sqrt(p), augmented <= p + 2 + 2 sqrt(p)."""
    rng = np.random.default_rng(0)
    d, p = 30, 6
    W, _ = np.linalg.qr(rng.standard_normal((d, p)))
    for x in (rng.choice([-1.0, 1.0], size=(4000, d)), rng.uniform(-1, 1, size=(4000, d))):
        xh = x @ W / math.sqrt(d)
        assert np.linalg.norm(xh, axis=1).max() <= 1 + 1e-12
        # worst case of the bound: vectors aligned with W's span (box vertices allow it only
        # approximately, so also use the extreme rows found)
        u, v = xh[:2000], xh[2000:]
        iu = np.triu_indices(p)
        ut = np.abs(np.einsum("ni,nj->nij", u, u) - np.einsum("ni,nj->nij", v, v))[:, iu[0], iu[1]]
        assert ut.sum(axis=1).max() <= pca_second_moment_sensitivity(p, 1) + 1e-12
        assert np.abs(u - v).sum(axis=1).max() <= pca_mean_sensitivity(p, 1) + 1e-12
        y = rng.uniform(-1, 1, size=(4000, 1))
        zu, zv = np.hstack([u, y[:2000]]), np.hstack([v, y[2000:]])
        iu = np.triu_indices(p + 1)
        aug = np.abs(np.einsum("ni,nj->nij", zu, zu) - np.einsum("ni,nj->nij", zv, zv))
        assert aug[:, iu[0], iu[1]].sum(axis=1).max() <= pca_second_moment_sensitivity(
            p, 1, supervised=True) + 1e-12


def test_eigenvalue_sensitivity_bounds_hold_on_neighbours():
    """Weyl (each eigenvalue <= a^2/n) and Lidskii-Mirsky (sum <= 2 a^2/n) on random neighbours."""
    rng = np.random.default_rng(0)
    n, d = 40, 6
    worst_sum, worst_each = 0.0, 0.0
    for _ in range(300):
        X = rng.choice([-1.0, 1.0], size=(n, d)) * rng.uniform(0.5, 1, size=(n, d))
        X2 = X.copy()
        X2[rng.integers(n)] = rng.choice([-1.0, 1.0], size=d)
        lam = np.sort(np.linalg.eigvalsh(X.T @ X / (n * d)))[::-1]
        lam2 = np.sort(np.linalg.eigvalsh(X2.T @ X2 / (n * d)))[::-1]
        worst_sum = max(worst_sum, np.abs(lam - lam2).sum())
        worst_each = max(worst_each, np.abs(lam - lam2).max())
    assert worst_each <= 1 / n + 1e-12
    assert worst_sum <= eigenvalue_sensitivity(d, n, calibration="tight") + 1e-12


def test_scale_to_box():
    bounds = np.array([[0, 10], [-5, 5], [3, 3]], dtype=float)
    out = scale_to_box(np.array([[0, 5, 3], [10, -5, 3], [20, 0, 3]], dtype=float), bounds)
    assert np.allclose(out, [[-1, 1, 0], [1, -1, 0], [1, 0, 0]])


# ------------------------------------------------------------------------------------ Alg. 1
@pytest.mark.parametrize("p,cal", [(1, "tight"), (4, "tight"), (4, "paper"), (6, "paper")])
def test_alg1_noise_scale_and_no_transform(p, cal):
    n, eps = 400, 0.7
    rel = PCAGauss(epsilon=eps, n_components=p, calibration=cal, random_state=0, bounds=(-1, 1)
                   ).release(_data(n))
    (rec,) = rel.noise
    k = p if cal == "paper" else min(p, 2)
    assert rec.sensitivity == pytest.approx(k / n) and rec.scale == pytest.approx(k / (n * eps))
    assert rel.details["scale_paper"] >= rel.details["scale_tight"]
    assert rel.guarantee.epsilon == eps and rel.guarantee.kind == "pure"
    assert rel.data.shape == (n, p) and not rel.transform_arrays
    with pytest.raises(ValueError, match="no public transform"):
        rel.transform(_data(5))
    # clustering can still be scored on the release itself; real-data metrics are undefined
    out = evaluate_release(rel, _data(60, seed=9))
    assert np.isfinite(out["silhouette_release"]) and math.isnan(out["ari_real"])


def test_alg1_eigenvalue_noise_spread_is_laplace():
    n, d, p, eps = 300, 12, 6, 0.5
    X = _data(n, d, seed=2)
    lam = np.sort(np.linalg.eigvalsh(X.T @ X / (n * d)))[::-1][:p]
    mech = PCAGauss(epsilon=eps, n_components=p, calibration="paper", bounds=(-1, 1))
    noise = np.concatenate([
        mech.set_params(random_state=s).release(X).diagnostics["eigenvalues_dp"] - lam
        for s in range(600)
    ])
    b = p / (n * eps)
    assert abs(noise.mean()) < 0.1 * b
    assert np.mean(np.abs(noise)) == pytest.approx(b, rel=0.06)
    assert noise.std() / np.mean(np.abs(noise)) == pytest.approx(math.sqrt(2), rel=0.06)


def test_alg1_epsilon_inf_converges_to_pca_spectrum():
    n, d, p = 500, 10, 3
    X = _data(n, d, seed=4)
    lam = np.sort(np.linalg.eigvalsh(X.T @ X / (n * d)))[::-1][:p]
    rel = PCAGauss(epsilon=INF, n_components=p, random_state=0, bounds=(-1, 1)).release(
        X, n_samples=200_000)
    assert rel.guarantee.epsilon == INF and not rel.is_private
    cov = rel.data.T @ rel.data / len(rel.data)
    assert np.allclose(np.diag(cov), lam, rtol=0.02)
    assert np.max(np.abs(cov - np.diag(np.diag(cov)))) < 0.02 * lam[0]


# ------------------------------------------------------------------------------------ Alg. 3
def test_gmm_noise_scales_budget_parts_and_class_sizes():
    X, y = _blobs(n=902, seed=1)
    n, d, p, eps = len(y), X.shape[1], 4, 2.0
    rel = PCAGauss(epsilon=eps, n_components=p, pca_source="lap", pca_fraction=0.4,
                   random_state=0, bounds=(-1, 1)).release(X, y)
    e_pca, e_mu, e_cov = 0.4 * eps, 0.6 * 0.1 * eps, 0.6 * 0.9 * eps
    parts = rel.details["epsilon_parts"]
    assert parts["pca"] == pytest.approx(e_pca) and parts["mean"] == pytest.approx(e_mu)
    assert parts["covariance"] == pytest.approx(e_cov)
    assert rel.guarantee.epsilon == pytest.approx(eps) and rel.guarantee.epsilon <= eps
    lap = rel.noise[0]
    assert lap.scale == pytest.approx(d * (d + 1) / (2 * n * e_pca))
    sizes = np.bincount(y)
    for c, n_c in enumerate(sizes):
        tag = f" of PCA features of class {c} "
        mean_rec = next(r for r in rel.noise if r.statistic.startswith("mean" + tag))
        mom_rec = next(r for r in rel.noise if r.statistic.startswith("second moment" + tag))
        assert mean_rec.scale == pytest.approx(2 * math.sqrt(p) / (n_c * e_mu))
        assert mom_rec.scale == pytest.approx((p + 1) / (n_c * e_cov))
    assert np.array_equal(np.bincount(rel.labels), sizes)
    rel = PCAGauss(epsilon=eps, n_components=p, calibration="paper", pca_source="lap",
                   random_state=0, bounds=(-1, 1)).release(X, y, n_samples=50)
    assert rel.noise[0].scale == pytest.approx(d * d / (n * 0.5 * eps))
    assert rel.noise[1].scale == pytest.approx(2 * p / (sizes[0] * 0.5 * 0.1 * eps))
    assert rel.noise[2].scale == pytest.approx(p * p / (sizes[0] * 0.5 * 0.9 * eps))
    assert len(rel.labels) == 50 and np.all(np.abs(np.bincount(rel.labels) - 50 * sizes / n) < 1)


def test_gmm_class_mean_noise_spread_is_laplace():
    X, y = _blobs(n=600, d=10, k=2, seed=3)
    p, eps = 5, 1.0
    mech = PCAGauss(epsilon=eps, n_components=p, pca_source="lap", bounds=(-1, 1))
    Xs = scale_to_box(X, np.tile([-1.0, 1.0], (10, 1)))
    noise = []
    for s in range(250):
        rel = mech.set_params(random_state=s).release(X, y)
        Xh = Xs @ rel.transform_arrays["W"] / math.sqrt(10)
        noise += [rel.diagnostics["mu_dp"][c] - Xh[y == c].mean(axis=0) for c in (0, 1)]
        assert np.allclose(rel.transform(X), Xh)
    noise = np.concatenate(noise)
    b = 2 * math.sqrt(p) / (300 * 0.5 * 0.1 * eps)
    assert np.mean(np.abs(noise)) == pytest.approx(b, rel=0.06)
    assert noise.std() / np.mean(np.abs(noise)) == pytest.approx(math.sqrt(2), rel=0.06)


def test_analyze_gauss_and_public_sources():
    X, y = _blobs(n=1000, seed=5)
    rel = PCAGauss(epsilon=1.0, delta=1e-6, n_components=3, pca_source="analyze-gauss",
                   random_state=0, bounds=(-1, 1)).release(X, y)
    ag = rel.noise[0]
    assert ag.distribution == "gaussian" and ag.sensitivity == pytest.approx(math.sqrt(2))
    assert ag.scale == pytest.approx(analytic_gaussian_sigma(math.sqrt(2), 0.5, 1e-6))
    assert rel.guarantee.kind == "approx" and rel.guarantee.delta == 1e-6
    assert rel.guarantee.epsilon == pytest.approx(1.0)
    rel = PCAGauss(epsilon=1.0, n_components=3, pca_source="public", public_fraction=0.2,
                   random_state=0, bounds=(-1, 1)).release(X, y)
    assert rel.guarantee.kind == "pure" and rel.guarantee.delta == 0
    assert rel.details["epsilon_parts"] == pytest.approx({"mean": 0.1, "covariance": 0.9})
    assert len(rel.data) == 800 and rel.diagnostics["n_public_rows"] == 200
    priv_sizes = np.bincount(y[rel.diagnostics["private_rows"]], minlength=3)
    assert np.array_equal(np.bincount(rel.labels, minlength=3), priv_sizes)
    assert all(r.distribution == "laplace" for r in rel.noise)
    assert any("PUBLIC" in a for a in rel.details["assumptions"])


def test_regression_alg2_scale_and_labels():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(500, 8))
    y = 50 + 10 * X[:, 0]
    rel = PCAGauss(epsilon=2.0, n_components=3, pca_source="public", random_state=0,
                   bounds=(-1, 1), label_bounds=(30, 70)).release(X, y)
    (rec,) = rel.noise
    n_priv = 450
    assert rec.scale == pytest.approx((3 + 2 + 2 * math.sqrt(3)) / (n_priv * 2.0))
    assert rel.labels.shape == (450,)
    rel = PCAGauss(epsilon=INF, n_components=3, pca_source="public", random_state=0,
                   bounds=(-1, 1), label_bounds=(30, 70)).release(X, y, n_samples=50_000)
    # second moment of the label on the [-1, 1] scale is preserved at epsilon = inf
    y_unit = (rel.labels - 50) / 20
    assert np.mean(y_unit**2) == pytest.approx(np.mean(((y - 50) / 20) ** 2), rel=0.03)


def test_gmm_utility_approaches_non_private():
    """PubPCA + GMM on three blobs: near the non-private accuracy at epsilon = 3, equal to it at
    epsilon = inf (at epsilon = 1 the second-moment noise, ~0.007, exceeds the within-class
    variance, ~0.002, and some releases merge two classes)."""
    X, y = _blobs(n=4000, d=12, k=3, seed=7)
    tr, te = np.arange(3000), np.arange(3000, 4000)
    base = evaluate_non_private((X[tr], y[tr]), (X[te], y[te]), "classification")
    assert base["svm_accuracy"] > 0.99

    def acc(eps):
        return np.mean([
            evaluate_release(PCAGauss(epsilon=eps, n_components=3, pca_source="public",
                                      random_state=s, bounds=(-1, 1)).release(X[tr], y[tr]),
                             X[te], y[te])["svm_accuracy"]
            for s in range(4)
        ])

    assert acc(INF) > 0.99
    assert acc(3.0) > 0.85


# ------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("kwargs,match", [
    ({"n_components": 12}, "n_components"),
    ({"n_components": 30}, "n_components"),
    ({"epsilon": 0.0}, "epsilon"),
    ({"pca_fraction": 1.0}, "pca_fraction"),
    ({"public_fraction": 0.7}, "public_fraction"),
    ({"pca_source": "svd"}, "pca_source"),
    ({"calibration": "sound"}, "calibration"),
    ({"delta": 0.0, "pca_source": "analyze-gauss"}, "delta"),
    ({"public_fraction": 0.001, "pca_source": "public"}, "public_fraction"),
])
def test_bad_parameters_raise(kwargs, match):
    X, y = _blobs(n=60, seed=0)
    with pytest.raises(ValueError, match=match):
        PCAGauss(random_state=0, bounds=(-1, 1), **kwargs).release(X, y)
