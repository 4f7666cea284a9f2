"""PCA-Gauss Alg. 3 with ``covariance_type="tied"``: the pooled second moment's sensitivities (worst-case
searches through ``release()``, label changes included), its noise scales (Laplace and Gaussian,
statistically), the budget split rule and the model it builds."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpcore.calibration import tied_mean_share
from dpcore.mechanisms import PCAGauss
from dpcore.mechanisms._box import scale_to_box
from dpcore.mechanisms.pca_gauss import tied_second_moment_sensitivities

INF = float("inf")
POOLED = "second moment of PCA features of all rows (tied covariance)"


def _public_rows(d=4, n=40, seed=5):
    return np.random.default_rng(seed).uniform(-1, 1, size=(n, d))


def _blobs(n=600, d=6, k=3, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-0.6, 0.6, size=(k, d))
    y = np.arange(n) % k
    return np.clip(centres[y] + 0.2 * rng.standard_normal((n, d)), -1, 1), y


def _true_pooled(X, W, d):
    """``(1/n) sum x^ x^^T`` of the PCA features ``x^ = W^T z/sqrt(d)`` (box [-1, 1], no groups)."""
    Xh = scale_to_box(X, np.tile([-1.0, 1.0], (d, 1))) @ W / math.sqrt(d)
    return Xh.T @ Xh / len(X)


@pytest.mark.parametrize("cal", ["tight", "paper"])
@pytest.mark.parametrize("label_privacy", ["protected", "within-class"])
def test_tied_second_moment_sensitivities_hold_with_a_class_change(cal, label_privacy):
    """Worst-case search through release() (public W, epsilon = inf: the pooled second moment is
    read back exactly): neighbours replace one row's features and/or its label. The L1 change of its
    upper triangle ("tight") or of every entry ("paper") times n never exceeds S1 * n, and the L2
    change of the upper triangle never exceeds S2 * n = sqrt(2); vertex rows come close."""
    p, d, n, classes = 2, 4, 9, [0, 1, 2]
    mech = PCAGauss(noise="laplace",
                    epsilon=INF, n_components=p, pca_source="public", public_data=_public_rows(),
                    calibration=cal, bounds=(-1, 1), classes=classes, covariance_type="tied",
                    label_privacy=label_privacy, random_state=0)
    s1, s2 = tied_second_moment_sensitivities(p, n, calibration=cal)
    assert s1 == pytest.approx((p + 1) / n if cal == "tight" else p * p / n)
    assert s2 == pytest.approx(math.sqrt(2) / n)
    mask = np.triu(np.ones((p, p), bool)) if cal == "tight" else np.ones((p, p), bool)
    iu = np.triu_indices(p)

    def pooled(X, y):
        rel, diag = mech.explore(X, y)
        rec = next(r for r in rel.noise if r.statistic == POOLED)
        assert rec.sensitivity == pytest.approx(s1)
        assert not any(r.statistic.startswith("second moment of PCA features of class") for r in rel.noise)
        return diag["pooled_second_moment_dp"] * n, rel.transform_arrays["W"]

    rng = np.random.default_rng(31)
    corners = np.array(list(itertools.product([-1.0, 1.0], repeat=d)))
    worst1 = worst2 = 0.0
    for trial in range(45):
        X, y = rng.uniform(-1, 1, size=(n, d)), np.arange(n) % 3
        i = int(rng.integers(n))
        X2, y2 = X.copy(), y.copy()
        if trial < 5:  # adversarial: the two vertices whose features are longest and most orthogonal
            _, W = pooled(X, y)
            F = corners @ W / math.sqrt(d)
            a = int(np.argmax(np.linalg.norm(F, axis=1)))
            b = int(np.argmax(np.linalg.norm(F, axis=1) ** 2 - np.abs(F @ F[a])))
            X[i], X2[i] = corners[a], corners[b]
        elif trial % 3 != 1:
            X2[i] = corners[rng.integers(len(corners))] if trial % 2 else rng.uniform(-1, 1, size=d)
        if trial % 3 != 0 and label_privacy == "protected":
            y2[i] = (y[i] + 1 + int(rng.integers(2))) % 3
        (a_m, _), (b_m, _) = pooled(X, y), pooled(X2, y2)
        worst1 = max(worst1, np.abs(a_m - b_m)[mask].sum())
        worst2 = max(worst2, np.linalg.norm((a_m - b_m)[iu]))
    assert worst1 <= s1 * n * (1 + 1e-9) and worst2 <= s2 * n * (1 + 1e-9)
    assert worst2 >= 0.5 * s2 * n and worst1 >= 0.3 * s1 * n


@pytest.mark.slow
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_tied_pooled_second_moment_noise_scale(noise):
    """The pooled second moment's noise: Laplace b = S1/eps_cov with S1 = (p+1)/n (mean |noise| = b,
    sd/mean|.| = sqrt(2)); Gaussian sigma = S2'/sqrt(2 rho_cov) with S2 = sqrt(2)/n (sd = sigma, kurtosis
    3). Public W so the true statistic is known; 150 releases."""
    X, y = _blobs(n=500, d=6, k=3, seed=2)
    n, d, p, eps = len(y), 6, 3, 1.0
    W = np.linalg.qr(np.random.default_rng(0).standard_normal((d, p)))[0]
    extra = {"delta": 1e-6} if noise == "gaussian" else {}
    mech = PCAGauss(epsilon=eps, n_components=p, pca_source="public", public_data=_public_rows(d=d, n=60),
                    bounds=(-1, 1), classes=[0, 1, 2], covariance_type="tied", noise=noise,
                    epsilon_split=(0.4, 0.6), **extra)
    iu = np.triu_indices(p)
    draws, rec = [], None
    for s in range(150):
        rel, diag = mech.set_params(random_state=s).explore(X, y)
        rec = next(r for r in rel.noise if r.statistic == POOLED)
        W = rel.transform_arrays["W"]
        draws.append((diag["pooled_second_moment_dp"] - _true_pooled(X, W, d))[iu])
    noise_v = np.concatenate(draws)
    parts = rel.details["epsilon_parts"]
    assert parts["covariance"] == pytest.approx(0.9 * 0.6 * eps)
    assert parts["mean"] == pytest.approx(0.9 * 0.4 * eps)
    assert rel.guarantee.epsilon == pytest.approx(eps, rel=1e-9)
    if noise == "laplace":
        b = (p + 1) / (n * parts["covariance"])
        assert rec.sensitivity == pytest.approx((p + 1) / n) and rec.scale == pytest.approx(b, rel=1e-6)
        assert np.mean(np.abs(noise_v)) == pytest.approx(b, rel=0.07)
        assert noise_v.std() / np.mean(np.abs(noise_v)) == pytest.approx(math.sqrt(2), rel=0.07)
    else:
        assert rec.sensitivity == pytest.approx(math.sqrt(2) / n)
        assert rec.scale == pytest.approx(rec.sensitivity_used / math.sqrt(2 * rec.rho), rel=1e-12)
        assert rec.rho == pytest.approx(rel.details["rho_parts"]["covariance"])
        assert rec.sensitivity_used <= 1.01 * rec.sensitivity
        assert noise_v.std() == pytest.approx(rec.scale, rel=0.07)
        assert np.mean((noise_v / noise_v.std()) ** 4) == pytest.approx(3.0, abs=0.4)


def test_tied_model_shares_one_covariance_and_full_is_unchanged():
    """Tied: every class has the same covariance (the pooled one minus the weighted mean outer
    products), one covariance record, the class-mean records as in the full model. Default
    covariance_type = "full" keeps the paper's split (0.1, 0.9) and one second moment per class."""
    X, y = _blobs(n=900, d=6, k=3, seed=4)
    kw = dict(epsilon=INF, n_components=3, pca_source="public", public_data=_public_rows(d=6, n=60),
              bounds=(-1, 1), classes=[0, 1, 2], random_state=0)
    tied = PCAGauss(covariance_type="tied", **kw).fit(X, y)
    covs = tied.model_.covariances
    assert np.allclose(covs[0], covs[1]) and np.allclose(covs[0], covs[2])
    Xh = tied.transform_(X)  # the public map of real rows into PCA features
    within = sum(np.cov(Xh[y == c].T, bias=True) * np.mean(y == c) for c in range(3))
    assert np.allclose(covs[0], within, atol=1e-10)
    assert sum(r.statistic == POOLED for r in tied.noise_) == 1
    full = PCAGauss(**kw).release(X, y)
    assert full.parameters["epsilon_split"] == (0.1, 0.9)
    assert sum(r.statistic.startswith("second moment of PCA features of class") for r in full.noise) == 3
    assert full.details["covariance_type"] == "full"


@pytest.mark.parametrize("gaussian", [True, False])
def test_tied_mean_share_minimises_the_stated_error(gaussian):
    """The share solves the stated minimisation (grid search over s of A/s^k + B/(1-s)^k, k = 1
    Gaussian, 2 Laplace) and is clamped to [0.1, 0.9]; more classes -> more for the means."""
    for p, k in [(10, 2), (85, 10), (160, 10), (30, 4)]:
        share = tied_mean_share(p, k, gaussian=gaussian)["mean_share"]
        s = np.linspace(0.001, 0.999, 99_801)
        if gaussian:
            err = 4 * p * k * k / s + 2 * p * p / (1 - s)
        else:
            err = 8 * p * p * k * k / s**2 + 2 * p * p * (p + 1) ** 2 / (1 - s) ** 2
        best = float(np.clip(s[np.argmin(err)], 0.1, 0.9))
        assert share == pytest.approx(best, abs=2e-3)
    assert tied_mean_share(85, 10)["mean_share"] > tied_mean_share(85, 2)["mean_share"]
    assert tied_mean_share(1, 50)["mean_share"] == 0.9


def test_tied_empty_split_follows_the_rule_and_is_on_the_card():
    """epsilon_split empty with covariance_type="tied": the split is tied_mean_share at the card's p
    (public facts only: the same for two different private tables of the same shape)."""
    X, y = _blobs(n=3000, d=12, k=4, seed=6)
    X2, y2 = _blobs(n=3000, d=12, k=4, seed=7)
    mech = PCAGauss(epsilon=1.0, delta=1e-6, pca_source="analyze-gauss", bounds=(-1, 1), classes=[0, 1, 2, 3],
                    covariance_type="tied", random_state=0)
    a, b = mech.release(X, y), mech.release(X2, y2)
    assert a.parameters["epsilon_split"] == b.parameters["epsilon_split"]
    assert a.details["n_components"] == b.details["n_components"]
    rule = a.details["epsilon_split_rule"]
    assert a.parameters["epsilon_split"][0] == pytest.approx(rule["mean_share"])
    assert rule["mean_share"] == tied_mean_share(rule["inputs"]["n_components"], 4)["mean_share"]
    assert a.guarantee.epsilon == pytest.approx(1.0, rel=1e-9) and a.guarantee.delta == pytest.approx(1e-6)
