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
    rel = LocalGaussian(epsilon=1.0, delta=1e-6, bounds=b, column_noise="equal").release(
        _uniform_in(b, 20, 0))
    (rec,) = rel.noise
    diameter = float(np.linalg.norm(b[:, 1] - b[:, 0]))  # distance between opposite corners
    assert rec.sensitivity == pytest.approx(diameter, rel=1e-12)
    assert rec.distribution == "gaussian"


def test_sensitivity_adds_one_hot_label_of_height_max_width():
    b = _box(5)
    X = _uniform_in(b, 30, 1)
    y = np.arange(30) % 4
    rel = LocalGaussian(epsilon=1.0, bounds=b, task="classification", classes=np.arange(4),
                        column_noise="equal", label_release="appended").release(X, y)
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
                        column_noise="equal", label_release="appended").release(X, y)
    widths2 = float(np.sum((b[:, 1] - b[:, 0]) ** 2))
    assert rel.noise[0].sensitivity == pytest.approx(math.sqrt(widths2 + 50**2), rel=1e-12)


def test_default_labels_by_randomized_response_with_half_the_budget():
    b = _box(5)
    n = 6000
    X = _uniform_in(b, n, 1)
    y = np.arange(n) % 4
    rel = LocalGaussian(epsilon=2.0, delta=1e-6, bounds=b, task="classification",
                        classes=np.arange(4), column_noise="equal").release(X, y)
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
    rel = LocalGaussian(epsilon=1.0, delta=1e-5, bounds=b, random_state=11,
                        column_noise="equal").release(X)
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
                        random_state=3, column_noise="equal", label_release="appended").release(X, y)
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


# ------------------------------------------------------------------------- per-column noise shares
def _corners_and_pairs(bounds: np.ndarray, rng: np.random.Generator, m: int = 4000):
    """Pairs of rows of the public box: random pairs, and random pairs of opposite corners."""
    lo, hi = bounds[:, 0], bounds[:, 1]
    a = lo + (hi - lo) * rng.uniform(size=(m, lo.size))
    b = lo + (hi - lo) * rng.uniform(size=(m, lo.size))
    signs = rng.integers(0, 2, size=(m, lo.size)).astype(bool)
    c1, c2 = np.where(signs, lo, hi), np.where(signs, hi, lo)
    return np.vstack([a, c1]), np.vstack([b, c2])


@pytest.mark.parametrize("task", ["unsupervised", "classification", "regression"])
@pytest.mark.parametrize("mode", ["relative", "equal", "custom"])
def test_per_column_noise_privacy_by_worst_case_search(task, mode):
    """Worst case over neighbouring rows of ||Delta / sigma_vec||_2 (the Gaussian mechanism's loss
    with per-coordinate scales depends on nothing else) equals the card's S2 / sigma, and the
    analytic Gaussian at that ratio gives the card's delta at its epsilon."""
    plm = pytest.importorskip("dp_accounting.pld.privacy_loss_mechanism")
    rng = np.random.default_rng(5)
    b = np.array([[18, 90], [0, 2e5], [0, 1], [0, 1], [-3, 3]], dtype=float)
    X = _uniform_in(b, 40, 10)
    kwargs: dict = {"bounds": b, "epsilon": 0.7, "delta": 1e-6}
    y = None
    if task == "classification":
        y, kwargs["classes"] = np.arange(40) % 3, np.arange(3)
    elif task == "regression":
        y, kwargs["label_bounds"] = rng.uniform(0, 500, 40), (0, 500)
    if task != "unsupervised":
        kwargs["task"] = task
        kwargs["label_release"] = "appended"  # the label shares the row's per-column noise
    if mode == "custom":
        kwargs["noise_shares"] = {"x0": 3.0, "x1": 1.0, "x4": 0.25}
    else:
        kwargs["column_noise"] = mode
    rel = LocalGaussian(**kwargs).release(X, y)
    (rec,) = rel.noise
    sig = np.array(list(rel.details["noise_per_column"].values()))
    u, v = _corners_and_pairs(b, rng)
    ratio2 = np.sum(((u - v) / sig) ** 2, axis=1)
    if task == "classification":  # two one-hot entries of height c change (a different class)
        ratio2 = ratio2 + 2 * (np.max(b[:, 1] - b[:, 0]) / rel.details["label_noise"]) ** 2
    elif task == "regression":
        ratio2 = ratio2 + (500 / rel.details["label_noise"]) ** 2
    worst = math.sqrt(float(ratio2.max()))
    assert worst <= rec.sensitivity / rec.scale * (1 + 1e-12)
    assert worst == pytest.approx(rec.sensitivity / rec.scale, rel=1e-12)  # a corner pair attains it
    got = plm.GaussianPrivacyLoss(1.0, sensitivity=worst).get_delta_for_epsilon(0.7)
    assert got == pytest.approx(1e-6, rel=1e-6)
    assert (rel.guarantee.epsilon, rel.guarantee.delta) == (0.7, 1e-6)


def test_relative_shares_keep_relative_noise_equal_and_are_measured():
    """Each column's noise has the standard deviation the card states (chi-square test per column),
    and in the default mode sigma_j / (hi_j - lo_j) is the same for every column."""
    b = np.array([[18, 90], [0, 2e5], [0, 1], [-3, 3]], dtype=float)
    n = 4000
    mid = np.tile(b.mean(axis=1), (n, 1))
    rel = LocalGaussian(epsilon=2.0, delta=1e-5, bounds=b, random_state=21).release(mid)
    sig = np.array(list(rel.details["noise_per_column"].values()))
    widths = b[:, 1] - b[:, 0]
    np.testing.assert_allclose(sig / widths, sig[0] / widths[0], rtol=1e-12)
    assert rel.details["column_noise"] == "relative"
    assert not any("dominates" in w for w in rel.details.get("warnings", []))
    resid = rel.data - mid
    stat = np.sum(resid**2, axis=0) / sig**2  # ~ chi2(n) per column
    lo_q, hi_q = stats.chi2.ppf(LEVEL / 8, n), stats.chi2.isf(LEVEL / 8, n)
    assert np.all((lo_q < stat) & (stat < hi_q)), stat / n
    # the narrow column is no longer drowned by the wide one: far below the equal-noise scale
    equal = LocalGaussian(epsilon=2.0, delta=1e-5, bounds=b, column_noise="equal").release(mid[:5])
    assert sig[0] < equal.noise[0].scale / 100


def test_equal_noise_warns_when_one_range_dominates():
    b = np.array([[18, 90], [0, 2e5], [0, 1]], dtype=float)
    X = _uniform_in(b, 20, 12)
    rel = LocalGaussian(epsilon=1.0, bounds=b, column_noise="equal").release(X)
    warning = rel.details["warnings"][0]
    assert "'x1'" in warning and "dominates" in warning and "relative" in warning
    assert any("dominates" in w for w in rel.card()["warnings"])
    same = np.array([[0, 16]] * 3, dtype=float)  # images: equal ranges, both modes identical
    X = _uniform_in(same, 20, 13)
    r1 = LocalGaussian(epsilon=1.0, bounds=same, random_state=1).release(X)
    r2 = LocalGaussian(epsilon=1.0, bounds=same, random_state=1, column_noise="equal").release(X)
    np.testing.assert_array_equal(r1.data, r2.data)
    assert not any("dominates" in w for w in r1.details.get("warnings", []))


@pytest.mark.parametrize("shares", [{"nope": 1.0}, {"x0": 0.0}, {"x0": float("nan")}, [1.0, 2.0]])
def test_bad_noise_shares_are_refused(shares):
    b = _box(3)
    with pytest.raises(ValueError, match="noise_shares"):
        LocalGaussian(epsilon=1.0, bounds=b, noise_shares=shares).release(_uniform_in(b, 10, 1))


def test_noise_larger_than_every_range_is_said():
    """The 'noise larger than the data' warning appears exactly when sigma_j >= w_j for every column
    (public facts: it moves with epsilon, not with the rows)."""
    b = np.array([[0, 1], [0, 4]], dtype=float)
    X = _uniform_in(b, 30, 14)
    for eps in (0.5, 2.0, 50.0, 400.0):
        rel = LocalGaussian(epsilon=eps, delta=1e-5, bounds=b).release(X)
        sigma_j = np.array([rec.scale for rec in rel.noise if "column j" in rec.statistic])
        shares = np.array(list(rel.details["noise_shares"].values()))
        least = float(np.min(sigma_j[0] * shares / (b[:, 1] - b[:, 0])))
        said = [w for w in rel.details.get("warnings", []) if "larger than the data" in w]
        assert bool(said) == (least >= 1.0), (eps, least)
        other = LocalGaussian(epsilon=eps, delta=1e-5, bounds=b).release(np.zeros_like(X))
        assert other.details.get("warnings", []) == rel.details.get("warnings", [])
    assert not LocalGaussian(epsilon=400.0, delta=1e-5, bounds=b).release(X).details.get("warnings")
