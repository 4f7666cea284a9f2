"""The papers' comparison baselines (identity-laplace, pca-identity, modips, rp-gaussian): sensitivities
against brute force, noise scales against their formulas, the noise actually added against its
distribution, epsilon = inf, validation, utility at large epsilon, the CLI."""

from __future__ import annotations

import hashlib
import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from histogram_check import check_histogram_noise
from scipy import stats
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from dpcore.calibration import analytic_gaussian_sigma, gaussian_delta, kenthapadi_sigma
from dpcore.cli import main
from dpcore.data import load_dataset
from dpcore.exceptions import NotPrivateError
from dpcore.mechanisms import MODIPS, IdentityLaplace, PCAIdentity, RPGaussian, get_mechanism
from dpcore.mechanisms._box import box_l1_sensitivity, box_l2_sensitivity
from dpcore.mechanisms.identity_laplace import bernoulli_projection
from dpcore.mechanisms.modips import gaussian_model_sensitivities

ALL = (IdentityLaplace, PCAIdentity, MODIPS, RPGaussian)
NAMES = ("identity-laplace", "pca-identity", "modips", "rp-gaussian")


def box_data(n: int = 400, d: int = 8, seed: int = 0) -> np.ndarray:
    """Rows in the public box [0, 4]^d with some correlation."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(size=(n, 1))
    return 4 * np.clip(0.6 * base + 0.4 * rng.uniform(size=(n, d)), 0, 1)


def vertices(d: int) -> np.ndarray:
    """All 2^d sign vectors."""
    return np.array(list(itertools.product((-1.0, 1.0), repeat=d)))


def brute_l1(M: np.ndarray, widths: np.ndarray) -> float:
    """sup over the box of ||v M||_1: convex, so attained at a vertex v = w * s."""
    return float(np.max(np.abs((vertices(M.shape[0]) * widths) @ M).sum(axis=1)))


# ------------------------------------------------------------------------------ registry
@pytest.mark.parametrize(("cls", "name"), list(zip(ALL, NAMES, strict=True)))
def test_registered_as_baselines_under_their_cli_names(cls, name):
    assert get_mechanism(name) is cls
    assert cls.baseline is True
    assert cls.neighbouring == "replace-one"
    assert set(cls.tasks) == {"unsupervised", "classification", "regression"}
    assert cls.citation and cls.describe()["baseline"] is True


# ------------------------------------------------------------------------------ sensitivities
@pytest.mark.parametrize(("d", "k", "seed"), [(8, 1, 0), (8, 3, 1), (9, 5, 2), (10, 4, 3)])
def test_box_l1_sensitivity_is_the_brute_force_supremum(d, k, seed):
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((d, k))
    w = rng.uniform(0, 2, size=d)
    w[0] = 0.0  # a constant column contributes nothing
    exact, method = box_l1_sensitivity(M, w)
    assert method.startswith("exact")
    assert exact == pytest.approx(brute_l1(M, w), rel=1e-12)
    bound, method = box_l1_sensitivity(M, w, budget=0)
    assert method.startswith("bound") and bound >= exact * (1 - 1e-12)
    trial = rng.uniform(-1, 1, size=(5000, d)) * w  # interior points never exceed it
    assert np.abs(trial @ M).sum(axis=1).max() <= exact * (1 + 1e-12)


def test_bernoulli_projection_and_its_triangle_bound():
    rng = np.random.default_rng(0)
    B = bernoulli_projection(12, 4, rng)
    assert set(np.unique(B * 2)) == {-1.0, 1.0}  # +-1/sqrt(4)
    w = np.full(12, 2.0)
    bound, _ = box_l1_sensitivity(B, w, budget=0)
    triangle = math.sqrt(4) * w.sum()  # sum_l w_l ||B_l||_1 = sqrt(k) sum_l w_l for +-1/sqrt(k)
    spectral = math.sqrt(4) * np.linalg.norm(B, 2) * np.linalg.norm(w)
    assert bound == pytest.approx(min(triangle, spectral))
    exact, _ = box_l1_sensitivity(B, w)
    assert exact < bound  # the exact sensitivity saves noise


def test_box_l2_sensitivity_bounds_the_brute_force_supremum():
    rng = np.random.default_rng(1)
    for k in (1, 3, 6):
        R = rng.standard_normal((9, k)) / math.sqrt(k)
        w = np.full(9, 2.0)
        sound, spectral = box_l2_sensitivity(R, w)
        brute = float(np.max(np.linalg.norm((vertices(9) * w) @ R, axis=1)))
        assert brute <= sound * (1 + 1e-12) and sound <= spectral * (1 + 1e-12)
        assert spectral == pytest.approx(np.linalg.norm(R, 2) * 6.0)  # sigma_max ||w||, ||w|| = 6
    R = rng.standard_normal((9, 1))  # k = 1: the triangle bound is exact
    assert box_l2_sensitivity(R, np.full(9, 2.0))[0] == pytest.approx(2 * np.abs(R).sum())


def test_gaussian_model_sensitivities_hold_and_are_attained():
    k, n = 5, 10
    s_mu, s_m = gaussian_model_sensitivities(k, n)
    assert (s_mu, s_m) == (pytest.approx(2 * k / n), pytest.approx(k * (k + 1) / 2 / n))
    iu = np.triu_indices(k)

    def upper_change(x, xp):
        return np.abs((np.outer(x, x) - np.outer(xp, xp))[iu]).sum() / n

    rng = np.random.default_rng(2)
    pts = np.vstack([vertices(k), rng.uniform(-1, 1, size=(300, k)),
                     rng.choice([-1.0, 0.0, 1.0], size=(300, k))])
    worst = max(upper_change(a, b) for a, b in zip(pts[rng.integers(0, len(pts), 4000)],
                                                    pts[rng.integers(0, len(pts), 4000)], strict=True))
    assert worst <= s_m * (1 + 1e-12)
    assert upper_change(np.ones(k), np.zeros(k)) == pytest.approx(s_m)  # tight
    assert np.abs(np.ones(k) - (-np.ones(k))).sum() / n == pytest.approx(s_mu)


def test_kenthapadi_sigma_is_sound_but_the_literal_text_is_not():
    worst_ratio, literal_ratio = 0.0, 0.0
    for eps in (0.1, 0.5, 1.0, 5.0, 20.0):
        for delta in (1e-3, 1e-5, 1e-8):
            s = kenthapadi_sigma(1.0, eps, delta)
            assert s == pytest.approx(math.sqrt(2 * (math.log(1 / (2 * delta)) + eps)) / eps)
            worst_ratio = max(worst_ratio, float(gaussian_delta(s, 1.0, eps)) / delta)
            literal = math.sqrt(math.log(1 / (2 * delta)) + eps) / eps  # DPMix text, no factor 2
            literal_ratio = max(literal_ratio, float(gaussian_delta(literal, 1.0, eps)) / delta)
    assert worst_ratio < 0.1  # sound, with room to spare
    assert literal_ratio > 10  # the extracted formula read literally violates delta
    with pytest.raises(ValueError, match="delta"):
        kenthapadi_sigma(1.0, 1.0, 0.5)


# ------------------------------------------------------------------------------ noise scales
def test_identity_laplace_scale_and_noise_match_the_formula():
    X = box_data(n=1500, d=8)
    eps = 0.7
    pooled = []
    for seed in range(3):
        rel = IdentityLaplace(epsilon=eps, n_components=4, bounds=(0, 4), random_state=seed).release(X)
        B = rel.transform_arrays["B"]
        s1 = brute_l1(B, np.full(8, 2.0))
        rec = rel.noise[0]
        assert rec.sensitivity == pytest.approx(s1, rel=1e-12)
        assert rec.scale == pytest.approx(s1 / eps, rel=1e-12)
        assert rec.distribution == "laplace" and "Li" in rec.source
        pooled.append((rel.data - rel.transform(X)).ravel() / rec.scale)
    z = np.concatenate(pooled)  # 18,000 draws, standardised: Lap(1)
    assert stats.kstest(z, stats.laplace().cdf).pvalue > 1e-3
    assert np.var(z) == pytest.approx(2.0, rel=0.06)  # Var Lap(1) = 2; s.e. of the ratio ~1.6%
    g = rel.guarantee
    assert (g.epsilon, g.delta, g.kind, g.neighbouring) == (eps, 0.0, "pure", "replace-one")


def test_pca_identity_uses_the_public_rows_only_and_its_noise_matches():
    X = box_data(n=1000, d=8, seed=1)
    public = box_data(n=200, d=8, seed=101)  # a separate sample from the same distribution
    eps = 2.0
    rel = PCAIdentity(epsilon=eps, n_components=3, public_data=public, bounds=(0, 4),
                      random_state=4).release(X)
    # every private row is released; none of them is treated as public
    assert rel.data.shape == (1000, 3) and rel.details["n_public_rows"] == 200
    Xs = public / 2 - 1  # [0, 4] -> [-1, 1]
    C = np.cov(Xs, rowvar=False)
    vals, vecs = np.linalg.eigh(C)
    top = vecs[:, np.argsort(vals)[::-1][:3]]
    W = rel.transform_arrays["W"]
    np.testing.assert_allclose(W @ W.T, top @ top.T, atol=1e-10)  # same subspace
    np.testing.assert_allclose(rel.transform_arrays["center"], Xs.mean(axis=0), atol=1e-12)
    rec = rel.noise[0]
    assert rec.sensitivity == pytest.approx(brute_l1(W, np.full(8, 2.0)), rel=1e-12)
    assert rec.sensitivity <= 2 * math.sqrt(3 * 8) + 1e-12  # sqrt(p) sigma_max(W) ||w||
    z = (rel.data - rel.transform(X)).ravel() / rec.scale
    assert stats.kstest(z, stats.laplace().cdf).pvalue > 1e-3
    assert np.var(z) == pytest.approx(2.0, rel=0.1)  # 3,000 draws: s.e. ~3%


def test_modips_noise_on_mean_and_second_moment_matches_the_formulas():
    X = box_data(n=300, d=6, seed=2)
    eps, split = 1.5, (0.3, 0.7)
    b_mu = 2 * 6 / 300 / (0.3 * eps)
    b_m = 6 * 7 / 2 / 300 / (0.7 * eps)
    mu_noise, m_noise = [], []
    iu = np.triu_indices(6)
    for seed in range(40):
        rel, rel_diag = MODIPS(noise="laplace",
                               epsilon=eps, epsilon_split=split, bounds=(0, 4), random_state=seed).explore(X)
        assert [r.scale for r in rel.noise] == [pytest.approx(b_mu), pytest.approx(b_m)]
        dg = rel_diag
        mu_noise.append(dg["mean_dp"][0] - dg["mean"][0])
        diff = dg["second_moment_dp"][0] - dg["second_moment"][0]
        np.testing.assert_allclose(diff, diff.T)  # mirrored upper triangle
        m_noise.append(diff[iu])
    zm, zs = np.concatenate(mu_noise) / b_mu, np.concatenate(m_noise) / b_m
    assert stats.kstest(zm, stats.laplace().cdf).pvalue > 1e-3  # 240 draws
    assert stats.kstest(zs, stats.laplace().cdf).pvalue > 1e-3  # 840 draws
    assert np.var(zs) == pytest.approx(2.0, rel=0.2)
    g = rel.guarantee
    assert g.epsilon <= eps and g.epsilon == pytest.approx(eps) and g.kind == "pure"


def test_modips_classification_is_one_gaussian_per_class_with_class_size_sensitivities():
    X = box_data(n=300, d=4, seed=3)
    y = np.repeat([0, 1, 2], [50, 100, 150])
    rel = MODIPS(noise="laplace", epsilon=1.0, bounds=(0, 4), classes=[0, 1, 2], label_privacy="within-class",
                 random_state=0).release(X, y)  # the papers' per-class model: class sizes public
    assert rel.guarantee.neighbouring == "replace-one-within-class"
    assert np.array_equal(np.bincount(rel.labels), [50, 100, 150])  # n_c rows per class
    mu_scales = [r.scale for r in rel.noise if r.statistic.startswith("mean")]
    assert mu_scales == [pytest.approx(2 * 4 / n_c / 0.3) for n_c in (50, 100, 150)]
    assert any("class sizes n_c are public" in a for a in rel.details["assumptions"])
    assert rel.columns == [f"x{j}" for j in range(4)]


@pytest.mark.parametrize("task", ["unsupervised", "classification", "regression"])
def test_rp_gaussian_sigma_is_the_analytic_gaussian_of_the_full_sensitivity(task):
    X = box_data(n=1200, d=8, seed=4)
    rng = np.random.default_rng(0)
    y = {"unsupervised": None, "classification": rng.integers(0, 3, 1200),
         "regression": rng.uniform(-5, 5, 1200)}[task]
    eps, delta = 1.0, 1e-6
    kw = {"regression": {"label_bounds": (-5, 5)}, "classification": {"classes": [0, 1, 2]},
          "unsupervised": {}}[task]
    rel = RPGaussian(epsilon=eps, delta=delta, n_components=5, bounds=(0, 4), random_state=1,
                     task=task, label_release="appended", **kw).release(X, y)
    R = rel.transform_arrays["R"]
    w = np.full(8, 2.0)
    s_r = min(np.linalg.norm(R, 2) * np.linalg.norm(w), np.sum(w * np.linalg.norm(R, axis=1)))
    s_label = {"unsupervised": 0.0, "classification": 2 * math.sqrt(2), "regression": 2.0}[task]
    s2 = math.hypot(s_r, s_label)
    rec = rel.noise[0]
    assert rec.sensitivity == pytest.approx(s2, rel=1e-12)
    # calibrated at (eps, delta) minus the discrete Gaussian sampler's reserve (~1e-11; dpcore.noise)
    assert rec.scale == pytest.approx(analytic_gaussian_sigma(s2, eps, delta), rel=1e-9)
    z = (rel.data - rel.transform(X)).ravel() / rec.scale
    assert stats.kstest(z, stats.norm().cdf).pvalue > 1e-3
    assert np.var(z) == pytest.approx(1.0, rel=0.06)  # 6,000 draws: s.e. ~1.8%
    g = rel.guarantee
    assert (g.epsilon, g.delta, g.kind) == (pytest.approx(eps), delta, "approx")


def test_rp_gaussian_default_releases_labels_by_randomized_response_with_half_the_budget():
    X = box_data(n=6000, d=8, seed=4)
    y = np.arange(6000) % 3
    eps, delta = 2.0, 1e-6
    rel = RPGaussian(epsilon=eps, delta=delta, n_components=5, bounds=(0, 4), classes=[0, 1, 2],
                     random_state=1).release(X, y)
    R = rel.transform_arrays["R"]
    w = np.full(8, 2.0)
    s_r = min(np.linalg.norm(R, 2) * np.linalg.norm(w), np.sum(w * np.linalg.norm(R, axis=1)))
    feat, lab = rel.noise
    assert feat.sensitivity == pytest.approx(s_r, rel=1e-12)  # no label in the Gaussian block
    assert feat.scale == pytest.approx(analytic_gaussian_sigma(s_r, eps / 2, delta), rel=1e-9)
    assert lab.distribution == "randomized-response" and lab.epsilon == pytest.approx(eps / 2)
    flip = 2 / (math.exp(eps / 2) + 2)
    assert np.mean(rel.labels != y) == pytest.approx(flip, abs=4 * math.sqrt(flip * (1 - flip) / 6000))
    g = rel.guarantee
    assert (g.epsilon, g.delta, g.neighbouring) == (pytest.approx(eps), delta, "replace-one")


def test_rp_gaussian_paper_calibration_and_the_epsilon_it_achieves():
    X = box_data(n=200, d=8, seed=5)
    eps, delta = 1.0, 1e-5
    rel = RPGaussian(epsilon=eps, delta=delta, n_components=3, calibration="paper", bounds=(0, 4),
                     random_state=2).release(X)
    R = rel.transform_arrays["R"]
    s_paper = np.linalg.norm(R, 2) * np.linalg.norm(np.full(8, 2.0))  # sigma(R) times the row range
    rec = rel.noise[0]
    assert rec.sensitivity == pytest.approx(s_paper)
    assert rec.scale == pytest.approx(
        s_paper * math.sqrt(2 * (math.log(1 / (2 * delta)) + eps)) / eps)
    achieved = rel.details["epsilon_achieved"]
    assert 0 < achieved < eps  # conservative: the drawn R is protected better than nominal
    assert float(gaussian_delta(rec.scale, rel.details["sensitivity_projection"], achieved)) <= delta
    assert rel.guarantee.epsilon == eps


# ------------------------------------------------------------------------------ epsilon = inf
@pytest.mark.parametrize("cls", [IdentityLaplace, PCAIdentity, RPGaussian])
def test_infinite_epsilon_releases_the_noiseless_projection(cls, tmp_path):
    X = box_data(n=200, d=6, seed=6)
    y = (X[:, 0] > 2).astype(int)
    extra = {"public_data": box_data(n=60, d=6, seed=60)} if cls is PCAIdentity else {}
    rel = cls(epsilon=math.inf, bounds=(0, 4), classes=[0, 1], random_state=0, **extra).release(X, y)
    np.testing.assert_allclose(rel.data, rel.transform(X), atol=1e-12)  # every private row, in order
    np.testing.assert_array_equal(rel.labels, y)
    assert not rel.is_private and math.isinf(rel.guarantee.epsilon)
    assert all(r.scale == 0 for r in rel.noise)
    with pytest.raises(NotPrivateError):
        rel.save(tmp_path / "out.csv")


def test_modips_infinite_epsilon_fits_the_exact_gaussian():
    X = box_data(n=500, d=5, seed=7)
    rel, rel_diag = MODIPS(epsilon=math.inf, bounds=(0, 4), random_state=0).explore(X, n_samples=40_000)
    dg = rel_diag
    np.testing.assert_array_equal(dg["mean_dp"][0], dg["mean"][0])
    np.testing.assert_array_equal(dg["second_moment_dp"][0], dg["second_moment"][0])
    assert not rel.is_private and math.isinf(rel.guarantee.epsilon)
    # samples are in the original units and reproduce the data's mean and covariance
    np.testing.assert_allclose(rel.data.mean(axis=0), X.mean(axis=0), atol=0.03)
    np.testing.assert_allclose(np.cov(rel.data, rowvar=False), np.cov(X, rowvar=False, bias=True),
                               atol=0.03)


# ------------------------------------------------------------------------------ validation
@pytest.mark.parametrize(("cls", "kwargs", "match"), [
    (IdentityLaplace, {"n_components": 6}, "n_components"),
    (IdentityLaplace, {"epsilon": 0.0}, "epsilon"),
    (IdentityLaplace, {"epsilon_split": (0.5, 0.6)}, "epsilon_split"),
    (PCAIdentity, {"n_components": 7}, "n_components"),
    (PCAIdentity, {}, "public_data"),  # public rows are a separate, required input
    (PCAIdentity, {"public_data": np.zeros((5, 3))}, "public_data"),
    (PCAIdentity, {"public_data": np.full((5, 6), np.inf)}, "public_data"),
    (MODIPS, {"epsilon": -1.0}, "epsilon"),
    (MODIPS, {"epsilon_split": (1.0,)}, "epsilon_split"),
    (RPGaussian, {"delta": 1.0}, "delta"),
    (RPGaussian, {"delta": 0.6, "calibration": "paper"}, "delta"),
    (RPGaussian, {"calibration": "classic"}, "calibration"),
    (RPGaussian, {"n_components": 0}, "n_components"),
])
def test_bad_parameters_raise_value_errors_naming_them(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(bounds=(0, 4), random_state=0, **kwargs).release(box_data(n=100, d=6))


@pytest.mark.parametrize("cls", [IdentityLaplace, PCAIdentity, RPGaussian])
def test_projection_baselines_release_one_row_per_input_row(cls):
    extra = {"public_data": box_data(n=60, d=6, seed=60)} if cls is PCAIdentity else {}
    with pytest.raises(ValueError, match="n_samples"):
        cls(bounds=(0, 4), random_state=0, **extra).release(box_data(n=100, d=6), n_samples=50)


def test_transform_rejects_rows_of_the_wrong_width():
    rel = IdentityLaplace(bounds=(0, 4), random_state=0).release(box_data(n=50, d=6))
    with pytest.raises(ValueError, match="shape"):
        rel.transform(np.zeros((3, 5)))


# ------------------------------------------------------------------------------ utility
@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    bounds = np.column_stack([X.min(axis=0), X.max(axis=0)])  # public for this test
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y) + [bounds]


def _accuracy(Xtr, ytr, Xte, yte) -> float:
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(Xtr, ytr).score(Xte, yte)


@pytest.mark.parametrize(("cls", "eps"), [(IdentityLaplace, 2000.0), (PCAIdentity, 2000.0),
                                          (RPGaussian, 1e6)])
def test_projection_baselines_match_the_non_private_projection_at_large_epsilon(cls, eps, cancer):
    # Non-private baseline: the same classifier on the noiseless projected rows (same public W/B/R).
    # At these epsilons (Laplace: labels get 200; the Gaussian sigma only falls like 1/sqrt(eps))
    # the noise is small, so accuracy agrees within 3 points.
    Xtr, Xte, ytr, yte, bounds = cancer
    extra = {}
    if cls is PCAIdentity:  # its basis needs a separate public table: a tenth of the training rows
        n_pub = len(ytr) // 10
        extra["public_data"], Xtr, ytr = Xtr[:n_pub], Xtr[n_pub:], ytr[n_pub:]
    rel = cls(epsilon=eps, n_components=5, bounds=bounds, classes=[0, 1], random_state=0,
              **extra).release(Xtr, ytr)
    assert rel.data.shape[0] == len(ytr)
    ref = _accuracy(rel.transform(Xtr), ytr, rel.transform(Xte), yte)
    acc = _accuracy(rel.data, rel.labels, rel.transform(Xte), yte)
    assert ref > 0.85 and acc >= ref - 0.03


def test_modips_gmm_matches_real_data_at_large_epsilon(cancer):
    Xtr, Xte, ytr, yte, bounds = cancer
    real = _accuracy(Xtr, ytr, Xte, yte)
    accs = [_accuracy(r.data, r.labels, Xte, yte) for r in (
        MODIPS(epsilon=1e6, bounds=bounds, classes=[0, 1], random_state=s).release(Xtr, ytr)
        for s in range(3))]
    assert np.mean(accs) >= real - 0.05


def test_rp_gaussian_regression_matches_the_noiseless_projection_at_large_epsilon():
    X, y = load_diabetes(return_X_y=True)
    bounds = np.column_stack([X.min(axis=0), X.max(axis=0)])
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    rel = RPGaussian(epsilon=1e6, n_components=6, bounds=bounds, label_bounds=(25, 346),
                     random_state=0).release(Xtr, ytr)

    def rmse(A, t):
        return float(np.sqrt(np.mean((Ridge(1e-3).fit(A, t).predict(rel.transform(Xte)) - yte) ** 2)))

    ref = rmse(rel.transform(Xtr), ytr)
    assert rmse(rel.data, rel.labels) <= 1.05 * ref
    assert ref < np.std(yte)  # the projected features carry signal


# ------------------------------------------------------------------------------ MODIPS, labels protected
# label_privacy="protected" (default): a DP class histogram (Laplace, L1 sensitivity 2) and noisy
# per-class SUMS with L1 sensitivities 2k and k(k+1) (the replaced record may change class).
def test_modips_protected_class_histogram_noise_is_laplace_with_scale_2_over_eps_histogram():
    """2,000 draws (50 classes x 40 seeded releases; n_samples=1, so one class is modelled and
    every class counted): KS-consistent with Lap(2/eps_histogram); 1.5x wrong scales rejected."""
    X, y = box_data(n=200, d=3, seed=30), np.arange(200) % 50
    eps, h = 1.0, 0.25
    mech = MODIPS(noise="laplace", epsilon=eps, histogram_fraction=h, bounds=(0, 4), classes=list(range(50)))
    check_histogram_noise(mech, X, y, h * eps)


def test_modips_protected_class_sum_sensitivities_hold_with_a_class_change():
    """Worst-case search through release() (epsilon = inf: the per-class sums are read back as
    mean_DP x count and M x count): neighbours replace one row's features and/or label. The L1
    change of the stacked sums (mean; second moment upper triangle) never exceeds the stated 2k
    and k(k+1); a box corner leaving one class and joining another attains both."""
    k, classes = 4, [0, 1, 2]
    mech = MODIPS(noise="laplace", epsilon=math.inf, bounds=(0, 4), classes=classes, random_state=0)
    iu = np.triu_indices(k)

    def sums(X, y):
        rel, rel_diag = mech.explore(X, y)
        s_mu = {r.sensitivity for r in rel.noise if r.statistic.startswith("mean of class")}
        s_m = {r.sensitivity for r in rel.noise if r.statistic.startswith("second moment")}
        dg, counts = rel_diag, rel_diag["class_counts_dp"]
        return (np.concatenate([dg["mean_dp"][c] * counts[c] for c in classes]),
                np.concatenate([(dg["second_moment_dp"][c] * counts[c])[iu] for c in classes]),
                s_mu | s_m)

    rng = np.random.default_rng(31)
    worst_mu, worst_m, stated = 0.0, 0.0, set()
    for trial in range(40):
        X, y = rng.uniform(0, 4, size=(9, k)), np.arange(9) % 3
        i = int(rng.integers(9))
        X2, y2 = X.copy(), y.copy()
        if trial % 3 != 1:
            X2[i] = rng.choice([0.0, 4.0], size=k) if trial % 2 else rng.uniform(0, 4, size=k)
        if trial % 3 != 0:
            y2[i] = (y[i] + 1 + int(rng.integers(2))) % 3
        if trial < 3:  # adversarial: the corner (1, ..., 1) of the [-1, 1] box changes class
            X[i] = X2[i] = 4.0
            y2[i] = (y[i] + 1) % 3
        (a_mu, a_m, sa), (b_mu, b_m, sb) = sums(X, y), sums(X2, y2)
        stated |= sa | sb
        worst_mu = max(worst_mu, np.abs(a_mu - b_mu).sum())
        worst_m = max(worst_m, np.abs(a_m - b_m).sum())
    assert stated == {2.0 * k, k * (k + 1.0)}
    assert worst_mu <= 2 * k * (1 + 1e-9) and worst_m <= k * (k + 1) * (1 + 1e-9)
    assert worst_mu >= 0.8 * 2 * k and worst_m >= 0.8 * k * (k + 1)


@pytest.mark.slow
def test_modips_protected_one_label_change_does_not_fix_the_released_class_sizes():
    """{100, 100} vs {99, 101}: within-class releases the true sizes (distinguishable with
    certainty); protected, both outcomes occur under both neighbours."""
    X, y = box_data(n=200, d=3, seed=32), np.arange(200) % 2
    y2 = y.copy()
    y2[0] = 1
    kw = {"epsilon": 2.0, "bounds": (0, 4), "classes": [0, 1]}
    paper = MODIPS(label_privacy="within-class", random_state=0, **kw)
    assert list(np.bincount(paper.release(X, y).labels)) == [100, 100]
    assert list(np.bincount(paper.release(X, y2).labels)) == [99, 101]
    mech = MODIPS(histogram_fraction=0.5, **kw)  # eps_histogram = 1
    for labels in (y, y2):
        outcomes = [tuple(np.bincount(mech.set_params(random_state=s).release(X, labels).labels,
                                      minlength=2)) for s in range(60)]
        assert outcomes.count((100, 100)) >= 3 and outcomes.count((99, 101)) >= 3


def test_modips_protected_card_states_replace_one_and_the_histogram_part():
    X, y = box_data(n=300, d=4, seed=33), np.arange(300) % 3
    eps, h, k = 2.0, 0.2, 4
    kw = {"epsilon": eps, "bounds": (0, 4), "classes": [0, 1, 2], "random_state": 0}
    card = json.loads(MODIPS(noise="laplace", histogram_fraction=h, **kw).release(X, y).card_json())
    assert card["guarantee"]["neighbouring"] == "replace-one" and card["guarantee"]["holds"] is True
    assert card["guarantee"]["epsilon"] == pytest.approx(eps)
    parts = card["details"]["epsilon_parts"]
    assert parts == pytest.approx({"histogram": h * eps, "mean": (1 - h) * 0.3 * eps,
                                   "covariance": (1 - h) * 0.7 * eps})
    hist = [r for r in card["noise"] if r["statistic"].startswith("class histogram")]
    assert len(hist) == 1 and hist[0]["scale"] == pytest.approx(2 / parts["histogram"])
    means = [r for r in card["noise"] if r["statistic"].startswith("mean of class")]
    assert len(means) == 3 and all(r["scale"] == pytest.approx(2 * k / parts["mean"]) for r in means)
    assert any("labels are protected" in a for a in card["details"]["assumptions"])
    paper = json.loads(MODIPS(noise="laplace", label_privacy="within-class", **kw).release(X, y).card_json())
    assert paper["guarantee"]["neighbouring"] == "replace-one-within-class"
    assert "histogram" not in paper["details"]["epsilon_parts"]
    assert not any(r["statistic"].startswith("class histogram") for r in paper["noise"])


def test_modips_protected_utility_on_separated_classes_at_large_epsilon():
    rng = np.random.default_rng(34)
    y = (rng.uniform(size=2400) < 0.2).astype(int)  # about 80% / 20%
    centers = np.array([[1.0, 1.0, 3.0, 1.5, 2.0], [3.0, 2.5, 1.0, 2.5, 2.0]])
    X = np.clip(centers[y] + 0.3 * rng.standard_normal((2400, 5)), 0, 4)
    Xtr, Xte, ytr, yte = X[:1800], X[1800:], y[:1800], y[1800:]
    base = _accuracy(Xtr, ytr, Xte, yte)
    majority = max(np.mean(yte), 1 - np.mean(yte))
    accs = [_accuracy(r.data, r.labels, Xte, yte) for r in (
        MODIPS(epsilon=50.0, bounds=(0, 4), classes=[0, 1], random_state=s).release(Xtr, ytr)
        for s in range(2))]
    assert base > 0.98 and majority > 0.75
    assert np.mean(accs) >= base - 0.03 and min(accs) > majority + 0.1


# ------------------------------------------------------------------------------ pca-identity public data
def test_pca_identity_needs_public_data_and_its_basis_depends_on_it_only():
    X = box_data(n=300, d=6, seed=35)
    with pytest.raises(ValueError, match="public_data"):
        PCAIdentity(epsilon=1.0, n_components=2, bounds=(0, 4), random_state=0).release(X)
    pub_a = box_data(n=80, d=6, seed=36)
    pub_b = np.random.default_rng(37).uniform(0, 4, size=(80, 6))
    kw = {"epsilon": 1.0, "n_components": 2, "bounds": (0, 4), "random_state": 0}
    rel_a = PCAIdentity(public_data=pub_a, **kw).release(X)
    rel_b = PCAIdentity(public_data=pub_b, **kw).release(X)
    Wa, Wb = rel_a.transform_arrays["W"], rel_b.transform_arrays["W"]
    assert np.linalg.norm(Wa @ Wa.T - Wb @ Wb.T) > 0.1  # different public rows, different basis
    # another private table with the same public rows: the same W and centre (no private row shapes them)
    other = PCAIdentity(public_data=pub_a, **kw).release(box_data(n=300, d=6, seed=38))
    assert np.array_equal(other.transform_arrays["W"], Wa)
    assert np.array_equal(other.transform_arrays["center"], rel_a.transform_arrays["center"])
    card = json.loads(rel_a.card_json())
    assert card["details"]["public_data_sha256"] == hashlib.sha256(pub_a.tobytes()).hexdigest()
    assert card["details"]["n_public_rows"] == 80 and card["n_released"] == 300


# ------------------------------------------------------------------------------ CLI
@pytest.mark.parametrize("name", NAMES)
def test_cli_release_writes_a_card_naming_the_mechanism(name, tmp_path):
    out = tmp_path / "out.csv"
    extra = []
    if name == "pca-identity":  # public rows: a separate file with digits' columns, pixels in [0, 16]
        ds = load_dataset("digits")
        public = np.random.default_rng(0).integers(0, 17, size=(60, ds.n_features)).astype(float)
        pd.DataFrame(public, columns=ds.feature_names).to_csv(tmp_path / "public.csv", index=False)
        extra = ["--public-data", str(tmp_path / "public.csv")]
    assert main(["release", name, "digits", "-o", str(out), "--epsilon", "1", *extra]) == 0
    card = json.loads((tmp_path / "out.card.json").read_text())
    if name == "pca-identity":
        assert card["details"]["public_data_sha256"] == hashlib.sha256(public.tobytes()).hexdigest()
        assert card["details"]["n_public_rows"] == 60 and card["n_released"] == len(ds.X)
    assert card["mechanism"] == name
    assert card["guarantee"]["epsilon"] <= 1.0 + 1e-12
    assert card["guarantee"]["neighbouring"] == "replace-one"
    assert card["noise"] and all(r["scale"] > 0 for r in card["noise"])
    assert (tmp_path / "out.transform.npz").exists() == (name != "modips")
