"""Distance recovery (dpcore.distances) and its figures: unbiasedness and the variance formulas
checked by simulation, DPPro eq. 12, k_opt, and the experiment on real releases."""

from __future__ import annotations

import itertools

import numpy as np
import plotly.graph_objects as go
import pytest
from sklearn.datasets import load_digits

from app.figures.distances import (
    l2_error_vs_k_figure,
    normal_mixture_density,
    recovery_histogram_figure,
    variance_vs_k_figure,
)
from dpcore.distances import (
    distance_experiment,
    distance_variance,
    expected_l2_error,
    jl_claim7_variance,
    l2_error,
    optimal_k,
    projection_input,
    recovered_sq_distances,
    sample_pairs,
    simulate_recovered_distances,
    sq_distances,
)
from dpcore.mechanisms import DPPro, JLLaplace, LocalGaussian

N_RUNS = 40_000
# Relative tolerance on a simulated variance: with N_RUNS draws the standard error of a sample
# variance is sqrt((kurtosis - 1) / N) ~ 1.5% here; 6% is about 4 standard errors.
VAR_RTOL = 0.06


def _diffs(rho: list[float], d: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(len(rho), d))
    return a / np.linalg.norm(a, axis=1, keepdims=True) * np.asarray(rho)[:, None]


@pytest.mark.parametrize(("noise", "scale"), [("laplace", 1.0), ("gaussian", 1.3)])
def test_recovered_distance_is_unbiased_with_the_stated_variance(noise, scale):
    k, diffs = 5, _diffs([1.0, 4.0, 6.0], d=7)
    rho2 = np.sum(diffs**2, axis=1)
    s2 = 2 * scale**2 if noise == "laplace" else scale**2
    D = simulate_recovered_distances(diffs, k, scale, noise, N_RUNS, random_state=11)
    var = distance_variance(rho2, k, s2, noise)
    # unbiased: within 4 standard errors of the mean
    assert np.all(np.abs(D.mean(axis=0) - rho2) < 4 * np.sqrt(var / N_RUNS))
    np.testing.assert_allclose(D.var(axis=0), var, rtol=VAR_RTOL)


def test_jl_claim7_variance_is_rejected_by_simulation():
    k, b = 5, 1.0
    diffs = _diffs([4.0], d=7)
    rho2 = np.sum(diffs**2, axis=1)
    D = simulate_recovered_distances(diffs, k, b, "laplace", N_RUNS, random_state=5)
    claim7 = jl_claim7_variance(rho2, k, 2 * b * b)
    ours = distance_variance(rho2, k, 2 * b * b, "laplace")
    assert abs(D.var() / ours[0] - 1) < VAR_RTOL
    assert abs(D.var() / claim7[0] - 1) > 3 * VAR_RTOL  # Claim 7 is off by ~30% here


def test_laplace_and_gaussian_variances_differ_only_in_the_noise_term():
    rho2, k, s2 = 3.0, 7, 0.8
    gap = distance_variance(rho2, k, s2, "laplace") - distance_variance(rho2, k, s2, "gaussian")
    assert gap == pytest.approx(6 * k * s2**2)


def test_expected_l2_error_matches_simulation():
    k, sigma = 6, 0.7
    diffs = _diffs([1.0, 2.0, 2.5, 3.0], d=10)
    rho2 = np.sum(diffs**2, axis=1)
    D = simulate_recovered_distances(diffs, k, sigma, "gaussian", 4000, random_state=2)
    measured = np.mean([l2_error(rho2, row) for row in D])
    assert measured == pytest.approx(float(expected_l2_error(rho2, k, sigma**2)), rel=0.05)


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_optimal_k_minimises_the_variance(noise):
    s2 = 0.5
    grid = np.linspace(0.5, 200, 40_000)
    for rho2 in (np.array([10.0]), np.array([2.0, 9.0, 30.0])):
        avg_var = distance_variance(rho2[:, None], grid[None, :], s2, noise).mean(axis=0)
        assert optimal_k(rho2, s2, noise) == pytest.approx(grid[np.argmin(avg_var)], abs=0.01)
    # DPPro Lemma 5 for one Gaussian distance
    assert optimal_k(10.0, s2, "gaussian") == pytest.approx(10.0 / (2 * s2))
    assert optimal_k(10.0, 0.0) == np.inf


def test_recovered_sq_distances_subtracts_the_noise_bias():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(30, 4))
    pairs = sample_pairs(30, 50, rng)
    direct = np.array([np.sum((Z[i] - Z[j]) ** 2) for i, j in pairs.tolist()])
    np.testing.assert_allclose(recovered_sq_distances(Z, pairs, 0.0), direct)
    np.testing.assert_allclose(recovered_sq_distances(Z, pairs, 0.25), direct - 2 * 4 * 0.25)
    np.testing.assert_allclose(recovered_sq_distances(Z, pairs, 0.25, k=2), direct - 2 * 2 * 0.25)
    with pytest.raises(ValueError, match="noise_variance"):
        recovered_sq_distances(Z, pairs, -1.0)
    with pytest.raises(ValueError, match="pairs"):
        recovered_sq_distances(Z, np.array([[0, 30]]), 0.0)


def test_sample_pairs_are_distinct_and_cover_all_ordered_pairs():
    pairs = sample_pairs(5, 20_000, random_state=1)
    assert pairs.shape == (20_000, 2)
    assert np.all(pairs[:, 0] != pairs[:, 1])
    counts = {p: 0 for p in itertools.permutations(range(5), 2)}
    for i, j in pairs.tolist():
        counts[(i, j)] += 1
    expected = 20_000 / 20
    # every ordered pair equally likely: each count within 5 binomial standard errors
    assert all(abs(c - expected) < 5 * np.sqrt(expected) for c in counts.values())
    with pytest.raises(ValueError, match="n >= 2"):
        sample_pairs(1, 3)
    with pytest.raises(ValueError, match="n_pairs"):
        sample_pairs(4, 0)


def test_l2_error_definition():
    u = np.array([1.0, 4.0, 9.0])
    assert l2_error(u, u) == 0.0
    assert l2_error(u, np.zeros(3)) == pytest.approx(1.0)
    assert l2_error(u, 2 * u) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="shape"):
        l2_error(u, u[:2])
    with pytest.raises(ValueError, match="undefined"):
        l2_error(np.zeros(3), u)
    with pytest.raises(ValueError, match="noise"):
        distance_variance(1.0, 2, 1.0, "cauchy")


@pytest.fixture(scope="module")
def digits():
    return load_digits(return_X_y=True)[0]


@pytest.mark.parametrize("mechanism", [DPPro, JLLaplace])
def test_distance_experiment_on_a_release_matches_the_theory(mechanism, digits):
    # one release (one projection): standardised differences have mean ~0 and variance ~1; the
    # shared projection makes pairs dependent, hence the loose tolerances (observed |mean| < 0.1,
    # variance within 0.94..1.06 over seeds).
    rel = mechanism(epsilon=2.0, n_components=20, bounds=(0, 16), random_state=4).release(digits)
    exp = distance_experiment(rel, digits, n_pairs=3000, random_state=0)
    z = exp.difference / np.sqrt(exp.variance)
    assert abs(z.mean()) < 0.25
    assert 0.85 < z.var() < 1.15
    assert exp.l2_error == pytest.approx(exp.expected_l2_error, rel=0.2)
    np.testing.assert_allclose(exp.true_sq, sq_distances(projection_input(rel, digits), exp.pairs))
    assert exp.noise == rel.details["noise_distribution"]


def test_distance_experiment_rejects_other_releases(digits):
    rel = LocalGaussian(epsilon=1.0, bounds=(0, 16), random_state=0).release(digits[:50])
    with pytest.raises(ValueError, match="noise variance"):
        distance_experiment(rel, digits[:50])
    dp = DPPro(n_components=5, bounds=(0, 16), random_state=0).release(digits[:50])
    with pytest.raises(ValueError, match="rows"):
        distance_experiment(dp, digits[:40])


# ---------------------------------------------------------------------------------- figures
def test_histogram_theory_curve_is_a_density():
    var = np.array([1.0, 4.0, 9.0])
    grid = np.linspace(-40, 40, 8001)
    assert np.trapezoid(normal_mixture_density(grid, var), grid) == pytest.approx(1.0, abs=1e-4)
    diffs = np.random.default_rng(0).normal(0, 2, size=500)
    fig = recovery_histogram_figure(diffs, np.full(500, 4.0))
    assert isinstance(fig, go.Figure)
    kinds = [t.type for t in fig.data]
    assert kinds == ["histogram", "scatter"]
    curve = fig.data[1]
    assert np.trapezoid(curve.y, curve.x) == pytest.approx(1.0, abs=0.01)
    xs = sorted(shape.x0 for shape in fig.layout.shapes)
    assert xs == sorted([0.0, float(diffs.mean())])


def test_k_figures_mark_k_opt_and_use_the_formula():
    ks = np.arange(1, 41)
    fig = variance_vs_k_figure(ks, rho2=8.0, noise_variance=0.5, noise="gaussian",
                               k_opt=optimal_k(8.0, 0.5), show_claim7=True)
    np.testing.assert_allclose(fig.data[0].y, distance_variance(8.0, ks, 0.5, "gaussian"))
    assert fig.layout.shapes[0].x0 == pytest.approx(8.0)
    assert len(fig.data) == 5
    errs = np.abs(np.random.default_rng(0).normal(1, 0.1, size=(3, ks.size)))
    fig2 = l2_error_vs_k_figure(ks, errs, predicted=np.ones(ks.size), k_opt=7.0)
    assert [t.name for t in fig2.data] == ["range over trials", "measured",
                                           "expected (ΣVar D / Σρ⁴)"]
    np.testing.assert_allclose(fig2.data[1].y, errs.mean(axis=0))
    assert fig2.layout.shapes[0].x0 == 7.0
