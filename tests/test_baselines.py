"""The papers' comparison baselines (identity-laplace, pca-identity, modips, rp-gaussian): sensitivities
against brute force, noise scales against their formulas, the noise actually added against its
distribution, epsilon = inf, validation, utility at large epsilon, the CLI."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from dpcore.calibration import analytic_gaussian_sigma, gaussian_delta
from dpcore.cli import main
from dpcore.exceptions import NotPrivateError
from dpcore.mechanisms import MODIPS, IdentityLaplace, PCAIdentity, RPGaussian, get_mechanism
from dpcore.mechanisms.baselines import (
    bernoulli_projection,
    box_l1_sensitivity,
    box_l2_sensitivity,
    gaussian_model_sensitivities,
    kenthapadi_sigma,
)

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
    eps = 2.0
    rel = PCAIdentity(epsilon=eps, n_components=3, public_fraction=0.2, bounds=(0, 4),
                      random_state=4).release(X)
    pub, priv = rel.diagnostics["public_rows"], rel.diagnostics["private_rows"]
    assert len(pub) == 200 and len(priv) == 800 and not set(pub) & set(priv)
    assert rel.data.shape == (800, 3) and rel.details["n_public_rows"] == 200
    Xs = X[pub] / 2 - 1  # [0, 4] -> [-1, 1]
    C = np.cov(Xs, rowvar=False)
    vals, vecs = np.linalg.eigh(C)
    top = vecs[:, np.argsort(vals)[::-1][:3]]
    W = rel.transform_arrays["W"]
    np.testing.assert_allclose(W @ W.T, top @ top.T, atol=1e-10)  # same subspace
    np.testing.assert_allclose(rel.transform_arrays["center"], Xs.mean(axis=0), atol=1e-12)
    rec = rel.noise[0]
    assert rec.sensitivity == pytest.approx(brute_l1(W, np.full(8, 2.0)), rel=1e-12)
    assert rec.sensitivity <= 2 * math.sqrt(3 * 8) + 1e-12  # sqrt(p) sigma_max(W) ||w||
    z = (rel.data - rel.transform(X[priv])).ravel() / rec.scale
    assert stats.kstest(z, stats.laplace().cdf).pvalue > 1e-3
    assert np.var(z) == pytest.approx(2.0, rel=0.1)  # 2,400 draws: s.e. ~3.5%


def test_modips_noise_on_mean_and_second_moment_matches_the_formulas():
    X = box_data(n=300, d=6, seed=2)
    eps, split = 1.5, (0.3, 0.7)
    b_mu = 2 * 6 / 300 / (0.3 * eps)
    b_m = 6 * 7 / 2 / 300 / (0.7 * eps)
    mu_noise, m_noise = [], []
    iu = np.triu_indices(6)
    for seed in range(40):
        rel = MODIPS(epsilon=eps, epsilon_split=split, bounds=(0, 4), random_state=seed).release(X)
        assert [r.scale for r in rel.noise] == [pytest.approx(b_mu), pytest.approx(b_m)]
        dg = rel.diagnostics
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
    rel = MODIPS(epsilon=1.0, bounds=(0, 4), random_state=0).release(X, y)
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
    kw = {"label_bounds": (-5, 5)} if task == "regression" else {}
    rel = RPGaussian(epsilon=eps, delta=delta, n_components=5, bounds=(0, 4), random_state=1,
                     task=task, **kw).release(X, y)
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
    rel = cls(epsilon=math.inf, bounds=(0, 4), random_state=0).release(X, y)
    rows = rel.diagnostics.get("private_rows", np.arange(200))
    np.testing.assert_allclose(rel.data, rel.transform(X[rows]), atol=1e-12)
    np.testing.assert_array_equal(rel.labels, y[rows])
    assert not rel.is_private and math.isinf(rel.guarantee.epsilon)
    assert all(r.scale == 0 for r in rel.noise)
    with pytest.raises(NotPrivateError):
        rel.save(tmp_path / "out.csv")


def test_modips_infinite_epsilon_fits_the_exact_gaussian():
    X = box_data(n=500, d=5, seed=7)
    rel = MODIPS(epsilon=math.inf, bounds=(0, 4), random_state=0).release(X, n_samples=40_000)
    dg = rel.diagnostics
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
    (PCAIdentity, {"public_fraction": 0.6}, "public_fraction"),
    (PCAIdentity, {"public_fraction": 0.001}, "public_fraction"),
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
    with pytest.raises(ValueError, match="n_samples"):
        cls(bounds=(0, 4), random_state=0).release(box_data(n=100, d=6), n_samples=50)


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
    rel = cls(epsilon=eps, n_components=5, bounds=bounds, random_state=0).release(Xtr, ytr)
    rows = rel.diagnostics.get("private_rows", np.arange(len(ytr)))
    ref = _accuracy(rel.transform(Xtr[rows]), ytr[rows], rel.transform(Xte), yte)
    acc = _accuracy(rel.data, rel.labels, rel.transform(Xte), yte)
    assert ref > 0.85 and acc >= ref - 0.03


def test_modips_gmm_matches_real_data_at_large_epsilon(cancer):
    Xtr, Xte, ytr, yte, bounds = cancer
    real = _accuracy(Xtr, ytr, Xte, yte)
    accs = [_accuracy(r.data, r.labels, Xte, yte) for r in (
        MODIPS(epsilon=1e6, bounds=bounds, random_state=s).release(Xtr, ytr) for s in range(3))]
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


# ------------------------------------------------------------------------------ CLI
@pytest.mark.parametrize("name", NAMES)
def test_cli_release_writes_a_card_naming_the_mechanism(name, tmp_path):
    out = tmp_path / "out.csv"
    assert main(["release", name, "digits", "-o", str(out), "--epsilon", "1"]) == 0
    card = json.loads((tmp_path / "out.card.json").read_text())
    assert card["mechanism"] == name
    assert card["guarantee"]["epsilon"] <= 1.0 + 1e-12
    assert card["guarantee"]["neighbouring"] == "replace-one"
    assert card["noise"] and all(r["scale"] > 0 for r in card["noise"])
    assert (tmp_path / "out.transform.npz").exists() == (name != "modips")
