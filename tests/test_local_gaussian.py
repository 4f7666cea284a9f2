"""Tests of the LocalGaussian mechanism: sensitivity, noise calibration, noise statistics, utility.

Statistical checks use fixed seeds (deterministic) and tolerances from the exact sampling
distribution (chi-square), at a two-sided level of 1e-6.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from dpcore.calibration import analytic_gaussian_sigma
from dpcore.data import load_dataset
from dpcore.mechanisms import LocalGaussian

LEVEL = 1e-6


def _box(d: int) -> np.ndarray:
    lo = -np.arange(d, dtype=float) / 4
    return np.column_stack([lo, lo + 0.5 + np.arange(d) % 3])  # widths 0.5, 1.5, 2.5, ...


def _uniform_in(bounds: np.ndarray, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lo, hi = bounds[:, 0], bounds[:, 1]
    return lo + (hi - lo) * rng.uniform(-0.2, 1.2, size=(n, bounds.shape[0]))  # some outside


# ------------------------------------------------------------------------- sensitivity & sigma
def test_sensitivity_is_l2_diameter_of_the_box():
    b = _box(7)
    rel = LocalGaussian(epsilon=1.0, delta=1e-6, bounds=b).release(_uniform_in(b, 20, 0))
    (rec,) = rel.noise
    diameter = float(np.linalg.norm(b[:, 1] - b[:, 0]))  # distance between opposite corners
    assert rec.sensitivity == pytest.approx(diameter, rel=1e-12)
    assert rec.distribution == "gaussian"


def test_sensitivity_adds_one_hot_label_of_height_max_width():
    b = _box(5)
    X = _uniform_in(b, 30, 1)
    y = np.arange(30) % 4
    rel = LocalGaussian(epsilon=1.0, bounds=b, task="classification", classes=np.arange(4),
                        label_release="appended").release(X, y)
    widths2 = float(np.sum((b[:, 1] - b[:, 0]) ** 2))
    c = float(np.max(b[:, 1] - b[:, 0]))  # the one-hot label has the widest feature's height
    assert rel.noise[0].sensitivity == pytest.approx(math.sqrt(widths2 + 2 * c**2), rel=1e-12)
    assert set(np.unique(rel.labels)) <= {0, 1, 2, 3}
    assert rel.label_columns == ["label"]


def test_sensitivity_adds_label_range_for_regression():
    b = _box(4)
    X = _uniform_in(b, 30, 2)
    y = np.linspace(0, 50, 30)
    rel = LocalGaussian(epsilon=1.0, bounds=b, label_bounds=(-10, 40), task="regression",
                        label_release="appended").release(X, y)
    widths2 = float(np.sum((b[:, 1] - b[:, 0]) ** 2))
    assert rel.noise[0].sensitivity == pytest.approx(math.sqrt(widths2 + 50**2), rel=1e-12)


def test_default_labels_by_randomized_response_with_half_the_budget():
    b = _box(5)
    n = 6000
    X = _uniform_in(b, n, 1)
    y = np.arange(n) % 4
    rel = LocalGaussian(epsilon=2.0, delta=1e-6, bounds=b, task="classification",
                        classes=np.arange(4)).release(X, y)
    feat, lab = rel.noise
    assert feat.sensitivity == pytest.approx(float(np.linalg.norm(b[:, 1] - b[:, 0])), rel=1e-12)
    assert feat.epsilon == pytest.approx(1.0) and lab.epsilon == pytest.approx(1.0)
    assert lab.distribution == "randomized-response"
    flip = 3 / (math.exp(1.0) + 3)
    assert np.mean(rel.labels != y) == pytest.approx(flip, abs=4 * math.sqrt(flip * (1 - flip) / n))
    g = rel.guarantee
    assert (g.epsilon, g.delta) == (pytest.approx(2.0), 1e-6)


@pytest.mark.parametrize(("eps", "delta"), [(0.3, 1e-5), (1.0, 1e-8), (8.0, 1e-3)])
def test_reported_sigma_is_exactly_eps_delta_private(eps, delta):
    plm = pytest.importorskip("dp_accounting.pld.privacy_loss_mechanism")
    b = _box(6)
    rel = LocalGaussian(epsilon=eps, delta=delta, bounds=b).release(_uniform_in(b, 10, 3))
    rec = rel.noise[0]
    got = plm.GaussianPrivacyLoss(rec.scale, sensitivity=rec.sensitivity).get_delta_for_epsilon(eps)
    assert got == pytest.approx(delta, rel=1e-8)
    g = rel.guarantee
    assert (g.epsilon, g.delta, g.kind) == (eps, delta, "approx")
    assert g.neighbouring == "replace-one" and g.holds is True


def test_classic_calibration():
    b = _box(3)
    X = _uniform_in(b, 10, 4)
    eps, delta = 0.5, 1e-5
    rel = LocalGaussian(epsilon=eps, delta=delta, bounds=b, calibration="classic").release(X)
    s2 = rel.noise[0].sensitivity
    assert rel.noise[0].scale == pytest.approx(s2 * math.sqrt(2 * math.log(1.25 / delta)) / eps)
    assert rel.noise[0].scale >= analytic_gaussian_sigma(s2, eps, delta)
    assert rel.calibration == "classic"


@pytest.mark.parametrize("eps", [1.0, 2.0, 50.0])
def test_classic_calibration_refuses_epsilon_at_least_one(eps):
    b = _box(3)
    with pytest.raises(ValueError, match="epsilon < 1"):
        LocalGaussian(epsilon=eps, bounds=b, calibration="classic").release(_uniform_in(b, 10, 5))


def test_sigma_decreases_in_epsilon():
    b = _box(4)
    X = _uniform_in(b, 10, 6)
    sigmas = [LocalGaussian(epsilon=e, bounds=b).release(X).noise[0].scale
              for e in (0.05, 0.2, 1.0, 4.0, 20.0, 1e3)]
    assert all(a > c for a, c in zip(sigmas, sigmas[1:], strict=False))


# ------------------------------------------------------------------------- noise statistics
def test_noise_std_matches_reported_sigma_and_is_unbiased():
    b = _box(20)
    n = 400
    X = _uniform_in(b, n, 7)
    clipped = np.clip(X, b[:, 0], b[:, 1])
    rel = LocalGaussian(epsilon=1.0, delta=1e-5, bounds=b, random_state=11).release(X)
    sigma = rel.noise[0].scale
    resid = rel.data - clipped
    # (1) variance: sum r^2 / sigma^2 ~ chi2(N), N = n d = 8000; accept the central 1 - 1e-6 region
    N = resid.size
    stat = float(np.sum(resid**2)) / sigma**2
    assert stats.chi2.ppf(LEVEL / 2, N) < stat < stats.chi2.isf(LEVEL / 2, N)
    # i.e. the empirical std is within about +-5% of sigma at this N
    # (2) column means of the noise: n * sum_j mean_j^2 / sigma^2 ~ chi2(d)
    col = resid.mean(axis=0)
    assert n * float(np.sum(col**2)) / sigma**2 < stats.chi2.isf(LEVEL, b.shape[0])
    # (3) release column means estimate the clipped data's means (unbiased, s.e. sigma/sqrt(n))
    z = (rel.data.mean(axis=0) - clipped.mean(axis=0)) / (sigma / math.sqrt(n))
    assert np.all(np.abs(z) < stats.norm.isf(LEVEL / 2 / b.shape[0]))


def test_regression_label_noise_has_the_same_sigma():
    b = _box(3)
    n = 3000
    rng = np.random.default_rng(8)
    X = _uniform_in(b, n, 8)
    y = rng.uniform(0, 10, n)
    rel = LocalGaussian(epsilon=2.0, bounds=b, label_bounds=(0, 10), task="regression",
                        label_release="appended", random_state=3).release(X, y)
    sigma = rel.noise[0].scale
    stat = float(np.sum((rel.labels - y) ** 2)) / sigma**2
    assert stats.chi2.ppf(LEVEL / 2, n) < stat < stats.chi2.isf(LEVEL / 2, n)


def test_n_samples_must_equal_n():
    b = _box(3)
    X = _uniform_in(b, 25, 9)
    assert LocalGaussian(epsilon=1.0, bounds=b).release(X, n_samples=25).data.shape == (25, 3)
    for bad in (24, 26, 1):
        with pytest.raises(ValueError, match="n_samples"):
            LocalGaussian(epsilon=1.0, bounds=b).release(X, n_samples=bad)


# ------------------------------------------------------------------------- utility on digits
@pytest.fixture(scope="module")
def digits_split():
    ds = load_dataset("digits")
    train, test = ds.split(test_size=0.3, random_state=0)
    return train, test, _accuracy(train.X, train.y, test)


def _accuracy(X_train, y_train, test) -> float:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = LogisticRegression(max_iter=200).fit(X_train / 16, y_train)
    return float(clf.score(test.X / 16, test.y))


def test_utility_large_epsilon_near_baseline_small_epsilon_near_chance(digits_split):
    train, test, baseline = digits_split
    assert baseline > 0.9
    hi = LocalGaussian(epsilon=1e5, delta=1e-5, random_state=0).release(train)
    assert hi.bounds_source == "metadata"
    acc_hi = _accuracy(hi.data, hi.labels, test)
    assert acc_hi >= baseline - 0.05
    lo = LocalGaussian(epsilon=0.1, delta=1e-5, random_state=0).release(train)
    if np.unique(lo.labels).size < 2:
        acc_lo = float(np.mean(test.y == lo.labels[0]))
    else:
        acc_lo = _accuracy(lo.data, lo.labels, test)
    assert acc_lo < 0.25  # chance is 0.1 (10 balanced classes)


def test_utility_at_epsilon_1e4_within_a_few_points_of_baseline(digits_split):
    train, test, baseline = digits_split
    rel = LocalGaussian(epsilon=1e4, delta=1e-5, random_state=0).release(train)
    assert _accuracy(rel.data, rel.labels, test) >= baseline - 0.05
