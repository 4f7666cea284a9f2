"""PCA-Gauss: sensitivities (SPEC section 3), noise scales, empirical spread, guarantees, errors."""

from __future__ import annotations

import hashlib
import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from histogram_check import check_histogram_noise

from dpcore.calibration import analytic_gaussian_sigma
from dpcore.data import load_dataset
from dpcore.decode import PublicSchema, with_output_space
from dpcore.mechanisms import PCAGauss
from dpcore.mechanisms._box import scale_to_box
from dpcore.mechanisms.pca_gauss import (
    class_sum_sensitivities,
    eigenvalue_sensitivity,
    lap_pca_sensitivity,
    pca_mean_sensitivity,
    pca_second_moment_sensitivity,
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
    rel = PCAGauss(noise="laplace",
                   epsilon=eps, n_components=p, calibration=cal, random_state=0, bounds=(-1, 1)
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


@pytest.mark.slow
def test_alg1_eigenvalue_noise_spread_is_laplace():
    n, d, p, eps = 300, 12, 6, 0.5
    X = _data(n, d, seed=2)
    lam = np.sort(np.linalg.eigvalsh(X.T @ X / (n * d)))[::-1][:p]
    mech = PCAGauss(noise="laplace", epsilon=eps, n_components=p, calibration="paper", bounds=(-1, 1))
    noise = np.concatenate([
        mech.set_params(random_state=s).explore(X).diagnostics["eigenvalues_dp"] - lam
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
    """The paper's Alg. 3 (label_privacy="within-class"): noise scaled by n_c, n_c rows per class."""
    X, y = _blobs(n=902, seed=1)
    n, d, p, eps = len(y), X.shape[1], 4, 2.0
    paper = {"bounds": (-1, 1), "classes": [0, 1, 2], "label_privacy": "within-class"}
    rel = PCAGauss(noise="laplace", epsilon=eps, n_components=p, pca_source="lap", pca_fraction=0.4,
                   random_state=0, **paper).release(X, y)
    assert rel.guarantee.neighbouring == "replace-one-within-class"
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
    rel = PCAGauss(noise="laplace", epsilon=eps, n_components=p, calibration="paper", pca_source="lap",
                   random_state=0, **paper).release(X, y, n_samples=50)
    assert rel.noise[0].scale == pytest.approx(d * d / (n * 0.5 * eps))
    assert rel.noise[1].scale == pytest.approx(2 * p / (sizes[0] * 0.5 * 0.1 * eps))
    assert rel.noise[2].scale == pytest.approx(p * p / (sizes[0] * 0.5 * 0.9 * eps))
    assert len(rel.labels) == 50 and np.all(np.abs(np.bincount(rel.labels) - 50 * sizes / n) < 1)


@pytest.mark.slow
def test_gmm_class_mean_noise_spread_is_laplace():
    X, y = _blobs(n=600, d=10, k=2, seed=3)
    p, eps = 5, 1.0
    # the paper's Alg. 3: noise scaled by n_c
    mech = PCAGauss(noise="laplace", epsilon=eps, n_components=p, pca_source="lap", bounds=(-1, 1),
                    classes=[0, 1], label_privacy="within-class", pca_fraction=0.5)
    Xs = scale_to_box(X, np.tile([-1.0, 1.0], (10, 1)))
    noise = []
    for s in range(250):
        rel, rel_diag = mech.set_params(random_state=s).explore(X, y)
        Xh = Xs @ rel.transform_arrays["W"] / math.sqrt(10)
        noise += [rel_diag["mu_dp"][c] - Xh[y == c].mean(axis=0) for c in (0, 1)]
        assert np.allclose(rel.transform(X), Xh)
    noise = np.concatenate(noise)
    b = 2 * math.sqrt(p) / (300 * 0.5 * 0.1 * eps)
    assert np.mean(np.abs(noise)) == pytest.approx(b, rel=0.06)
    assert noise.std() / np.mean(np.abs(noise)) == pytest.approx(math.sqrt(2), rel=0.06)


@pytest.mark.slow
def test_identity_basis_class_mean_noise_is_laplace_at_the_cards_scale():
    """pca_source='identity' (W = I, p = d): no budget for a basis, so the class means get 0.1 of the
    whole epsilon (the paper's split) at L1 sensitivity 2 sqrt(d)/n_c; the noise drawn matches that
    scale and the Laplace shape (mean |e| = b, sd/mean|e| = sqrt(2)), and the card says the same."""
    X, y = _blobs(n=600, d=10, k=2, seed=3)
    d, eps = 10, 1.0
    mech = PCAGauss(noise="laplace", epsilon=eps, pca_source="identity", bounds=(-1, 1), classes=[0, 1],
                    label_privacy="within-class", marginals="off")
    Xs = scale_to_box(X, np.tile([-1.0, 1.0], (d, 1)))
    noise = []
    for s in range(250):
        rel, rel_diag = mech.set_params(random_state=s).explore(X, y)
        assert np.array_equal(rel.transform_arrays["W"], np.eye(d)) and rel.details["n_components"] == d
        Xh = Xs / math.sqrt(d)
        noise += [rel_diag["mu_dp"][c] - Xh[y == c].mean(axis=0) for c in (0, 1)]
    b = 2 * math.sqrt(d) / (300 * 0.1 * eps)
    card = [r for r in rel.noise if r.statistic.startswith("mean of PCA features of class")]
    assert len(card) == 2 and all(r.scale == pytest.approx(b) for r in card)
    assert "pca" not in rel.details["epsilon_parts"]  # nothing spent on a basis
    noise = np.concatenate(noise)
    assert np.mean(np.abs(noise)) == pytest.approx(b, rel=0.06)
    assert noise.std() / np.mean(np.abs(noise)) == pytest.approx(math.sqrt(2), rel=0.06)


def test_analyze_gauss_and_public_sources():
    X, y = _blobs(n=1200, seed=5)
    X, y, public = X[:1000], y[:1000], X[1000:]  # public: a separate sample, not private rows
    rel = PCAGauss(epsilon=1.0, delta=1e-6, n_components=3, pca_source="analyze-gauss", pca_fraction=0.5,
                   noise="laplace", random_state=0, bounds=(-1, 1), classes=[0, 1, 2]).release(X, y)
    ag = rel.noise[0]
    assert ag.distribution == "gaussian" and ag.sensitivity == pytest.approx(math.sqrt(2))
    assert ag.scale == pytest.approx(analytic_gaussian_sigma(math.sqrt(2), 0.5, 1e-6))
    assert rel.guarantee.kind == "approx" and rel.guarantee.delta == 1e-6
    assert rel.guarantee.epsilon == pytest.approx(1.0)
    rel = PCAGauss(noise="laplace", epsilon=1.0, n_components=3, pca_source="public", public_data=public,
                   random_state=0, bounds=(-1, 1), classes=[0, 1, 2],
                   label_privacy="within-class").release(X, y)
    assert rel.guarantee.kind == "pure" and rel.guarantee.delta == 0
    assert rel.details["epsilon_parts"] == pytest.approx({"mean": 0.1, "covariance": 0.9})
    # every private row is modelled (none is taken as "public"); W is the public rows' top-p basis
    assert len(rel.data) == 1000 and rel.details["n_public_rows"] == 200
    assert rel.details["public_data_sha256"] == hashlib.sha256(public.tobytes()).hexdigest()
    vals, vecs = np.linalg.eigh(public.T @ public)
    top = vecs[:, np.argsort(vals)[::-1][:3]]
    W = rel.transform_arrays["W"]
    np.testing.assert_allclose(W @ W.T, top @ top.T, atol=1e-8)
    assert np.array_equal(np.bincount(rel.labels, minlength=3), np.bincount(y, minlength=3))
    assert all(r.distribution == "laplace" for r in rel.noise)
    assert any("PUBLIC" in a for a in rel.details["assumptions"])


def test_regression_alg2_scale_and_labels():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(500, 8))
    y = 50 + 10 * X[:, 0]
    public = rng.uniform(-1, 1, size=(50, 8))  # a separate sample from the same distribution
    kw = {"pca_source": "public", "public_data": public, "bounds": (-1, 1), "label_bounds": (30, 70),
          "marginals": "off"}
    rel = PCAGauss(noise="laplace", epsilon=2.0, n_components=3, random_state=0, **kw).release(X, y)
    mean, rec = rel.noise
    n = 500  # all private rows (the public rows are a separate input)
    # the mean of [x^, y] with 0.5 of epsilon (L1 (2 sqrt(p) + 2)/n), the second moment with 0.5
    assert mean.statistic.startswith("mean of [x^, y]") and mean.epsilon == pytest.approx(1.0)
    assert mean.scale == pytest.approx((2 * math.sqrt(3) + 2) / (n * 1.0))
    assert rec.scale == pytest.approx((3 + 2 + 2 * math.sqrt(3)) / (n * 1.0))
    assert rel.labels.shape == (500,) and rel.data.shape == (500, 3)
    rel = PCAGauss(noise="laplace",
                   epsilon=INF, n_components=3, random_state=0, **kw).release(X, y, n_samples=50_000)
    # second moment of the label on the [-1, 1] scale is preserved at epsilon = inf
    y_unit = (rel.labels - 50) / 20
    assert np.mean(y_unit**2) == pytest.approx(np.mean(((y - 50) / 20) ** 2), rel=0.03)


def test_gmm_utility_approaches_non_private():
    """PubPCA + the paper's GMM (Alg. 3) on three blobs: near the non-private accuracy at
    epsilon = 3, equal to it at epsilon = inf (at epsilon = 1 the second-moment noise, ~0.007,
    exceeds the within-class variance, ~0.002, and some releases merge two classes)."""
    X, y = _blobs(n=4300, d=12, k=3, seed=7)
    tr, te, public = np.arange(3000), np.arange(3000, 4000), X[4000:]  # public: a separate sample
    base = evaluate_non_private((X[tr], y[tr]), (X[te], y[te]), "classification")
    assert base["svm_accuracy"] > 0.99

    def acc(eps):
        return np.mean([
            evaluate_release(PCAGauss(epsilon=eps, n_components=3, pca_source="public",
                                      public_data=public, random_state=s, bounds=(-1, 1),
                                      classes=[0, 1, 2], label_privacy="within-class",
                                      ).release(X[tr], y[tr]),
                             X[te], y[te])["svm_accuracy"]
            for s in range(4)
        ])

    assert acc(INF) > 0.99
    assert acc(3.0) > 0.85


# ------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("kwargs,match", [
    ({"n_components": 12, "pca_source": "lap"}, "n_components"),  # p = d needs the identity basis
    ({"n_components": 5, "pca_source": "identity"}, "n_components"),  # the identity keeps every feature
    ({"n_components": 30}, "n_components"),
    ({"epsilon": 0.0}, "epsilon"),
    ({"pca_fraction": 1.0}, "pca_fraction"),
    ({"pca_source": "public"}, "public_data"),  # public rows are a separate, required input
    ({"pca_source": "svd"}, "pca_source"),
    ({"calibration": "sound"}, "calibration"),
    ({"delta": 0.0, "pca_source": "analyze-gauss"}, "delta"),
    ({"pca_source": "public", "public_data": np.zeros((5, 3))}, "public_data"),
    ({"pca_source": "public", "public_data": np.full((5, 12), np.nan)}, "public_data"),
])
def test_bad_parameters_raise(kwargs, match):
    X, y = _blobs(n=60, seed=0)
    with pytest.raises(ValueError, match=match):
        PCAGauss(random_state=0, bounds=(-1, 1), classes=[0, 1, 2], **kwargs).release(X, y)


# ------------------------------------------------------------------------------------ labels protected
# label_privacy="protected" (default) for Alg. 3: a DP class histogram (Laplace, L1 sensitivity 2)
# and noisy per-class SUMS with class_sum_sensitivities (the replaced record may change class).
def test_protected_class_histogram_noise_is_laplace_with_scale_2_over_eps_histogram():
    """2,000 draws (50 classes x 40 seeded releases; n_samples=1 so one class is modelled, every
    class is counted): KS-consistent with Lap(2/eps_histogram); a 1.5x wrong scale is rejected."""
    rng = np.random.default_rng(20)
    X, y = rng.uniform(-1, 1, size=(200, 4)), np.arange(200) % 50
    eps, h, f = 2.0, 0.25, 0.5
    mech = PCAGauss(noise="laplace", epsilon=eps, histogram_fraction=h, pca_fraction=f, n_components=2,
                    pca_source="lap", bounds=(-1, 1), classes=list(range(50)))
    check_histogram_noise(mech, X, y, h * (1 - f) * eps)


def _designed_public_rows(n=40, seed=21):
    """Public rows in [-1, 1]^4 whose top-2 principal directions are (1,0,1,0)/sqrt(2) and
    (0,1,0,1)/sqrt(2): their span holds cube vertices x with ||W^T x/2||_1 = sqrt(2) and
    ||W^T x/2||_2 = 1, the rows that attain the tight per-class sum sensitivities."""
    rng = np.random.default_rng(seed)
    w1, w2 = np.array([1.0, 0, 1, 0]) / math.sqrt(2), np.array([0, 1.0, 0, 1]) / math.sqrt(2)
    s = rng.choice([-1.0, 1.0], size=(n, 2))
    return 0.9 * s[:, :1] * w1 + 0.5 * s[:, 1:] * w2 + 0.01 * rng.uniform(-1, 1, size=(n, 4))


@pytest.mark.parametrize("cal", ["tight", "paper"])
def test_protected_class_sum_sensitivities_hold_with_a_class_change(cal):
    """Worst-case search through release() (public W, epsilon = inf: the per-class sums are read
    back exactly as mu_DP x count and M x count): neighbours replace one row's features and/or
    its label. The L1 change of the stacked sums (mean; second moment upper triangle for
    "tight", every entry for "paper") never exceeds class_sum_sensitivities; the tight bounds
    are attained by a vertex in W's span that changes class."""
    p, d, classes = 2, 4, [0, 1, 2]
    mech = PCAGauss(noise="laplace", epsilon=INF, n_components=p, pca_source="public",
                    public_data=_designed_public_rows(), calibration=cal, bounds=(-1, 1),
                    classes=classes, random_state=0)
    s_mu, s_m = class_sum_sensitivities(p, calibration=cal)
    mask = np.triu(np.ones((p, p), bool)) if cal == "tight" else np.ones((p, p), bool)

    def sums(X, y):
        rel, rel_diag = mech.explore(X, y)
        assert {r.sensitivity for r in rel.noise if r.statistic.startswith("sum of PCA")} == {s_mu}
        assert {r.sensitivity for r in rel.noise if r.statistic.startswith("second moment")} == {s_m}
        dg, counts = rel_diag, rel_diag["class_counts_dp"]
        return (np.concatenate([dg["mu_dp"][c] * counts[c] for c in classes]),
                np.concatenate([(dg["second_moment_dp"][c] * counts[c])[mask] for c in classes]),
                rel.transform_arrays["W"])

    rng = np.random.default_rng(22)
    corners = np.array(list(itertools.product([-1.0, 1.0], repeat=d)))
    worst_mu, worst_m = 0.0, 0.0
    for trial in range(40):
        X, y = rng.uniform(-1, 1, size=(9, d)), np.arange(9) % 3
        i = int(rng.integers(9))
        X2, y2 = X.copy(), y.copy()
        if trial % 3 != 1:
            X2[i] = corners[rng.integers(len(corners))] if trial % 2 else rng.uniform(-1, 1, size=d)
        if trial % 3 != 0:
            y2[i] = (y[i] + 1 + int(rng.integers(2))) % 3
        if trial < 3:  # adversarial: the vertex in W's span with the largest ||W^T x/2||_1
            _, _, W = sums(X, y)
            best = corners[np.argmax(np.abs(corners @ W / 2).sum(axis=1))]
            X[i], X2[i], y2[i] = best, best, (y[i] + 1) % 3
        (a_mu, a_m, _), (b_mu, b_m, _) = sums(X, y), sums(X2, y2)
        worst_mu = max(worst_mu, np.abs(a_mu - b_mu).sum())
        worst_m = max(worst_m, np.abs(a_m - b_m).sum())
    assert worst_mu <= s_mu * (1 + 1e-9) and worst_m <= s_m * (1 + 1e-9)
    if cal == "tight":  # "paper" bounds the box, not the ball: not attainable for p >= 2
        assert s_mu == pytest.approx(2 * math.sqrt(p)) and s_m == pytest.approx(p + 1)
        assert worst_mu >= 0.8 * s_mu and worst_m >= 0.8 * s_m


def test_protected_one_label_change_does_not_fix_the_released_class_sizes():
    """{100, 100} vs {99, 101}: within-class releases the true sizes (distinguishable with
    certainty); protected, both outcomes occur under both neighbours."""
    rng = np.random.default_rng(23)
    X, y = rng.uniform(-1, 1, size=(200, 4)), np.arange(200) % 2
    y2 = y.copy()
    y2[0] = 1
    kw = {"epsilon": 4.0, "n_components": 2, "pca_source": "lap", "bounds": (-1, 1), "classes": [0, 1]}
    paper = PCAGauss(label_privacy="within-class", random_state=0, **kw)
    assert list(np.bincount(paper.release(X, y).labels)) == [100, 100]
    assert list(np.bincount(paper.release(X, y2).labels)) == [99, 101]
    mech = PCAGauss(histogram_fraction=0.5, **kw)  # eps_histogram = 0.5 * (1 - 0.5) * 4 = 1
    for labels in (y, y2):
        outcomes = [tuple(np.bincount(mech.set_params(random_state=s).release(X, labels).labels,
                                      minlength=2)) for s in range(60)]
        assert outcomes.count((100, 100)) >= 3 and outcomes.count((99, 101)) >= 3


def test_protected_card_states_replace_one_and_the_histogram_part():
    X, y = _blobs(n=300, d=6, k=3, seed=24)
    eps, h, f, p = 2.0, 0.2, 0.4, 2
    kw = {"epsilon": eps, "n_components": p, "pca_source": "lap", "pca_fraction": f,
          "bounds": (-1, 1), "classes": [0, 1, 2], "random_state": 0}
    card = json.loads(PCAGauss(noise="laplace", histogram_fraction=h, **kw).release(X, y).card_json())
    assert card["guarantee"]["neighbouring"] == "replace-one" and card["guarantee"]["holds"] is True
    assert card["guarantee"]["epsilon"] == pytest.approx(eps)
    parts = card["details"]["epsilon_parts"]
    assert parts["pca"] == pytest.approx(f * eps) and parts["histogram"] == pytest.approx(h * (1 - f) * eps)
    assert math.fsum(parts.values()) == pytest.approx(eps)
    hist = [r for r in card["noise"] if r["statistic"].startswith("class histogram")]
    assert len(hist) == 1 and hist[0]["scale"] == pytest.approx(2 / parts["histogram"])
    s_mu, s_m = class_sum_sensitivities(p)
    sums = [r for r in card["noise"] if r["statistic"].startswith("sum of PCA features of class")]
    assert len(sums) == 3 and all(r["scale"] == pytest.approx(s_mu / parts["mean"]) for r in sums)
    moms = [r for r in card["noise"] if r["statistic"].startswith("second moment of PCA features")]
    assert len(moms) == 3 and all(r["scale"] == pytest.approx(s_m / parts["covariance"]) for r in moms)
    paper = json.loads(PCAGauss(noise="laplace",
                                label_privacy="within-class", **kw).release(X, y).card_json())
    assert paper["guarantee"]["neighbouring"] == "replace-one-within-class"
    assert "histogram" not in paper["details"]["epsilon_parts"]
    assert not any(r["statistic"].startswith("class histogram") for r in paper["noise"])


def test_protected_utility_on_separated_classes_at_large_epsilon():
    X, y = _blobs(n=3000, d=12, k=2, seed=25)
    keep = (y == 0) | (np.arange(len(y)) % 5 == 0)  # about 83% / 17%
    X, y = X[keep], y[keep]
    te = np.random.default_rng(0).permutation(len(y)) < len(y) // 4
    tr = ~te
    base = evaluate_non_private((X[tr], y[tr]), (X[te], y[te]), "classification")["svm_accuracy"]
    majority = max(np.mean(y[te]), 1 - np.mean(y[te]))
    accs = [evaluate_release(PCAGauss(epsilon=50.0, n_components=3, pca_source="lap",
                                      bounds=(-1, 1), classes=[0, 1], random_state=s
                                      ).release(X[tr], y[tr]), X[te], y[te])["svm_accuracy"]
            for s in range(2)]
    assert base > 0.98 and majority > 0.8
    assert np.mean(accs) >= base - 0.03 and min(accs) > majority + 0.1


# ------------------------------------------------------------------------------------ public data
def test_public_pca_needs_public_data_and_w_depends_on_it_only():
    X, y = _blobs(n=500, seed=26)
    rng = np.random.default_rng(27)
    kw = {"epsilon": 1.0, "n_components": 3, "pca_source": "public", "bounds": (-1, 1),
          "classes": [0, 1, 2], "random_state": 0}
    with pytest.raises(ValueError, match="public_data"):
        PCAGauss(**kw).release(X, y)
    pub_a, pub_b = _blobs(n=100, seed=28)[0], rng.uniform(-1, 1, size=(100, 12))
    rel_a = PCAGauss(public_data=pub_a, **kw).release(X, y)
    rel_b = PCAGauss(public_data=pub_b, **kw).release(X, y)
    Wa, Wb = rel_a.transform_arrays["W"], rel_b.transform_arrays["W"]
    assert np.linalg.norm(Wa @ Wa.T - Wb @ Wb.T) > 0.1  # different public rows, different basis
    # a different private table with the same public rows: the same W (no private row shapes it)
    X2, y2 = _blobs(n=500, seed=29)
    assert np.array_equal(PCAGauss(public_data=pub_a, **kw).release(X2, y2).transform_arrays["W"], Wa)
    card = json.loads(rel_a.card_json())
    assert card["details"]["public_data_sha256"] == hashlib.sha256(pub_a.tobytes()).hexdigest()
    assert card["details"]["n_public_rows"] == 100 and card["n_released"] == 500


def test_alg2_mean_sensitivity_by_search_and_attained():
    # z = [x^, y], ||x^||_2 <= 1, |y| <= 1: the L1 bound 2 sqrt(p) + 2 and the L2 bound 2 sqrt(2)
    rng = np.random.default_rng(11)
    p = 5
    worst1 = worst2 = 0.0
    for _ in range(20_000):
        u, v = rng.normal(size=(2, p))
        u *= rng.random() ** (1 / p) / np.linalg.norm(u)
        v *= rng.random() ** (1 / p) / np.linalg.norm(v)
        y, y2 = rng.uniform(-1, 1, 2)
        dz = np.append(u - v, y - y2)
        worst1, worst2 = max(worst1, np.abs(dz).sum()), max(worst2, np.linalg.norm(dz))
    assert worst1 <= 2 * math.sqrt(p) + 2 and worst2 <= 2 * math.sqrt(2)
    corner = np.full(p, 1 / math.sqrt(p))  # attains both: x^ = -x^' on the diagonal, y = -y' = 1
    dz = np.append(2 * corner, 2.0)
    assert np.abs(dz).sum() == pytest.approx(2 * math.sqrt(p) + 2)
    assert np.linalg.norm(dz) == pytest.approx(2 * math.sqrt(2))


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_regression_file_is_centred_on_the_data_not_the_box(noise):
    # ages around 30 and wages around 60 in public bounds whose midpoints are 53 and 200: the paper's
    # Alg. 2 (N(0, M)) put the file's means at the midpoints at any epsilon
    rng = np.random.default_rng(12)
    n = 4000
    age = np.clip(rng.normal(30, 5, n), 16, 90)
    year = rng.integers(2003, 2010, n).astype(float)
    wage = np.clip(20 + 1.3 * age + rng.normal(0, 10, n), 0, 400)
    frame = pd.DataFrame({"year": year, "age": age, "wage": wage})
    ds = load_dataset(frame, label="wage", task="regression", bounds={"year": [2003, 2009], "age": [16, 90]},
                      label_bounds=(0, 400))
    kw = {"delta": 1e-6} if noise == "gaussian" else {}
    for source in ("identity", "lap"):  # the automatic choice on two features, and a DP basis
        rel = PCAGauss(epsilon=1e4, marginals="off", random_state=0, pca_source=source, **kw).release(ds)
        out = with_output_space(rel, PublicSchema.from_dataset(ds), None).to_frame()
        for col in ("age", "wage"):
            assert out[col].mean() == pytest.approx(frame[col].mean(), rel=0.10), (source, col)
    assert any(r.statistic.startswith("mean of [z/B, y]") for r in rel.noise)
    assert "offset" in rel.transform_arrays


def test_narrow_regression_table_keeps_every_feature_and_its_slopes():
    """Two features: the public rule takes the identity basis (p = d, no budget for a basis), and at
    a large epsilon a linear model trained on the downloaded file finds the data's slopes. With
    p = 1 (the only projection of two features) the file had one mixed direction: the slope on age
    went to year and the file's RMSE stayed at the training mean's at every epsilon."""
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(3)
    n = 4000
    age = rng.uniform(18, 80, n)
    year = rng.integers(2003, 2010, n).astype(float)
    wage = np.clip(20 + 1.3 * age + 4.0 * (year - 2003) + rng.normal(0, 10, n), 0, 400)
    frame = pd.DataFrame({"year": year, "age": age, "wage": wage})
    ds = load_dataset(frame, label="wage", task="regression", bounds={"year": [2003, 2009], "age": [16, 90]},
                      label_bounds=(0, 400))
    rel = PCAGauss(epsilon=1e4, delta=1e-6, random_state=0).release(ds)
    assert rel.details["pca_source"] == "identity" and rel.details["n_components"] == 2
    assert rel.details["recommended"]["basis"] == "identity"
    assert not any(r.statistic.startswith(("LapPCA", "DP PCA")) for r in rel.noise)  # no budget on W
    view = with_output_space(rel, PublicSchema.from_dataset(ds), None)
    assert "no projection" in view.output_note and "rank-p" not in view.output_note  # what the file is
    out = view.to_frame()
    real = LinearRegression().fit(frame[["year", "age"]], frame["wage"]).coef_
    file = LinearRegression().fit(out[["year", "age"]], out["wage"]).coef_
    np.testing.assert_allclose(file, real, rtol=0.15)
