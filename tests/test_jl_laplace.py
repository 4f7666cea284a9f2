"""JL-Laplace: calibration to the drawn projection, the paper's constants and their failure
probability, the noise actually added, labels, validation, utility."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from dpcore.exceptions import NotPrivateError
from dpcore.mechanisms import JLLaplace, get_mechanism
from dpcore.mechanisms._labels import randomized_response
from dpcore.mechanisms._projection import gaussian_projection
from dpcore.mechanisms.jl_laplace import (
    element_sensitivity,
    published_element_constant,
    published_row_constant,
    row_sensitivity,
)


def drawn_projection(seed: int, d: int, k: int) -> np.ndarray:
    """The P a seeded release uses: the mechanism draws it first from its generator."""
    return gaussian_projection(d, k, np.random.default_rng(seed))


def unit_data(n: int = 200, d: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 1, size=(n, d))


def test_registered_under_its_cli_name():
    assert get_mechanism("jl-laplace") is JLLaplace
    assert JLLaplace.space == "projected" and "distances" in JLLaplace.capabilities


@pytest.mark.parametrize(("upper", "element_bound", "factor"), [(1.0, None, 1.0), (3.0, 2.0, 2.0),
                                                               (3.0, 5.0, 3.0)])
def test_exact_element_calibration_equals_row_l1_norms(upper, element_bound, factor):
    X = unit_data() * upper
    rel = JLLaplace(relation="element", epsilon=0.5, n_components=4, element_bound=element_bound,
                    rescale=False,
                    bounds=(0, upper), random_state=7).release(X)
    P = drawn_projection(7, 8, 4)
    # c = min(Delta, column width) * max_i ||P_i||_1; default Delta = widest column range
    c = factor * np.max(np.abs(P).sum(axis=1))
    rec = rel.noise[0]
    assert rec.sensitivity == pytest.approx(c, rel=1e-12)
    assert rec.scale == pytest.approx(c / 0.5, rel=1e-12)
    assert rel.details["noise_variance"] == pytest.approx(2 * (c / 0.5) ** 2)
    assert rel.guarantee.kind == "pure" and rel.guarantee.beta is None
    assert rel.guarantee.epsilon == 0.5 and rel.guarantee.neighbouring == "element"


def test_rescale_maps_columns_to_unit_range():
    X = unit_data() * np.arange(1, 9) + 5
    bounds = np.column_stack([np.full(8, 5.0), 5.0 + np.arange(1, 9)])
    rel = JLLaplace(relation="element", epsilon=np.inf, n_components=3, bounds=bounds,
                    random_state=1).release(X)
    P = drawn_projection(1, 8, 3)
    np.testing.assert_allclose(rel.data, ((X - bounds[:, 0]) / np.arange(1, 9)) @ P)
    assert rel.noise[0].sensitivity == pytest.approx(np.max(np.abs(P).sum(axis=1)))


def brute_force_row_sensitivity(P: np.ndarray, alpha: float) -> float:
    return math.sqrt(alpha) * max(np.linalg.norm(P @ np.array(s)) for s in
                                  itertools.product((-1.0, 1.0), repeat=P.shape[1]))


def test_exact_row_sensitivity_is_the_supremum():
    rng = np.random.default_rng(3)
    P = gaussian_projection(12, 6, rng)
    c, method, spectral = row_sensitivity(P, 2.0)
    assert method.startswith("exact")
    assert c == pytest.approx(brute_force_row_sensitivity(P, 2.0), rel=1e-12)
    assert c <= spectral == pytest.approx(math.sqrt(6 * 2.0) * np.linalg.svd(P, compute_uv=False)[0])
    # attained by v = sqrt(alpha) P s* / ||P s*|| and never exceeded inside the ball
    best = max(itertools.product((-1.0, 1.0), repeat=6), key=lambda s: np.linalg.norm(P @ np.array(s)))
    v = P @ np.array(best)
    v *= math.sqrt(2.0) / np.linalg.norm(v)
    assert np.abs(v @ P).sum() == pytest.approx(c)
    V = rng.normal(size=(20_000, 12))
    V *= math.sqrt(2.0) / np.linalg.norm(V, axis=1, keepdims=True) * rng.uniform(0, 1, (20_000, 1))
    assert np.abs(V @ P).sum(axis=1).max() <= c * (1 + 1e-12)
    # above the enumeration limit the spectral bound is used
    c_big, method_big, _ = row_sensitivity(P, 2.0, max_enumerated_k=3)
    assert method_big.startswith("bound") and c_big == pytest.approx(spectral)


def test_exact_row_release_uses_the_drawn_matrix():
    X = unit_data(d=10)
    rel = JLLaplace(epsilon=2.0, n_components=5, relation="row", row_bound=1.5, rescale=False,
                    bounds=(0, 1), random_state=9).release(X)
    P = drawn_projection(9, 10, 5)
    assert rel.noise[0].sensitivity == pytest.approx(brute_force_row_sensitivity(P, 1.5), rel=1e-12)
    assert rel.noise[0].scale == pytest.approx(rel.noise[0].sensitivity / 2.0)
    assert rel.guarantee.neighbouring == "row-l2" and rel.guarantee.kind == "pure"


def test_laplace_noise_spread_matches_the_scale():
    # X = 0 so Z is the noise itself; pooled over 20 seeded releases (each with its own b),
    # Z / b must be Laplace(1): KS test, and E|Z|/b = 1 within 3% (standard error 0.7%).
    X = np.zeros((200, 6))
    pooled = []
    for seed in range(20):
        rel = JLLaplace(relation="element", epsilon=1.5, n_components=5, rescale=False, bounds=(0, 1),
                        random_state=seed).release(X)
        b = rel.noise[0].scale
        assert b == pytest.approx(np.max(np.abs(drawn_projection(seed, 6, 5)).sum(axis=1)) / 1.5)
        pooled.append(rel.data.ravel() / b)
    z = np.concatenate(pooled)
    assert stats.kstest(z, stats.laplace().cdf).pvalue > 1e-3
    assert np.mean(np.abs(z)) == pytest.approx(1.0, rel=0.03)
    assert np.var(z) == pytest.approx(2.0, rel=0.06)


def test_published_element_reports_the_failure_probability():
    X = unit_data(d=50)
    rel = JLLaplace(relation="element", epsilon=4.0, n_components=10, calibration="published", rescale=False,
                    bounds=(0, 1), random_state=2).release(X)
    beta = 50 * math.exp(-10 / 2)
    assert rel.noise[0].sensitivity == pytest.approx(2 * math.sqrt(10))
    assert rel.noise[0].scale == pytest.approx(2 * math.sqrt(10) / 4.0)
    assert rel.guarantee.kind == "probabilistic" and rel.guarantee.beta == pytest.approx(beta)
    assert rel.guarantee.epsilon == 4.0
    # the published constant wastes noise: the drawn P needs about 0.8 sqrt(k)
    exact = np.max(np.abs(drawn_projection(2, 50, 10)).sum(axis=1))
    assert rel.details["sensitivity_exact"] == pytest.approx(exact)
    drawn_eps = rel.details["epsilon_features_for_drawn_projection"]
    assert drawn_eps == pytest.approx(4.0 * exact / (2 * np.sqrt(10)))
    assert "published_beta" in rel.card()["details"]


def test_published_element_with_vacuous_beta_falls_back_to_the_drawn_projection():
    # Table 1's first setting: d = 3, k = 2 gives beta = 3 e^-1 > 1 (the theorem says nothing)
    rel = JLLaplace(relation="element", epsilon=4.0, n_components=2, calibration="published", rescale=False,
                    bounds=(0, 1), random_state=0).release(unit_data(d=3))
    assert published_element_constant(2, 3)[1] > 1
    assert rel.guarantee.kind == "pure" and rel.guarantee.beta is None
    assert rel.guarantee.epsilon == 4.0  # the drawn P is inside the good event
    assert any("guarantees nothing" in w for w in rel.card()["warnings"])


def test_published_row_constant_fails_for_most_draws_when_d_exceeds_k():
    # Thm 5 bounds ||v P||_1 for ONE fixed v; DP needs every v at once. With d = 200, k = 4 the
    # drawn P almost always needs more than c = k t, whatever beta says.
    d, k, alpha, beta = 200, 4, 1.0, 0.05
    c_pub = published_row_constant(k, alpha, beta)
    assert c_pub == pytest.approx(k * math.sqrt(2 * alpha * math.log(2 * k / beta) / k))
    rng = np.random.default_rng(0)
    fails = np.mean([row_sensitivity(gaussian_projection(d, k, rng), alpha)[0] > c_pub
                     for _ in range(100)])
    assert fails > 10 * beta
    rel = JLLaplace(epsilon=1.0, n_components=k, relation="row", calibration="published",
                    row_bound=alpha, beta=beta, rescale=False, bounds=(0, 1),
                    random_state=4).release(unit_data(d=d))
    c_exact = brute_force_row_sensitivity(drawn_projection(4, d, k), alpha)
    assert rel.noise[0].scale == pytest.approx(c_pub)
    assert rel.guarantee.epsilon == pytest.approx(c_exact / c_pub) and rel.guarantee.epsilon > 1.0
    assert rel.guarantee.kind == "pure"
    assert any("failure event" in w for w in rel.card()["warnings"])


def test_published_row_in_the_good_event_is_probabilistic():
    rel = JLLaplace(epsilon=1.0, n_components=6, relation="row", calibration="published",
                    row_bound=1.0, beta=0.01, rescale=False, bounds=(0, 1),
                    random_state=0).release(unit_data(d=7))
    assert rel.details["sensitivity_exact"] < rel.details["sensitivity_published"]
    assert rel.guarantee.kind == "probabilistic" and rel.guarantee.beta == 0.01
    assert rel.guarantee.epsilon == 1.0


def test_epsilon_infinity_is_not_private():
    X = unit_data()
    rel = JLLaplace(epsilon=np.inf, n_components=3, rescale=False, bounds=(0, 1),
                    random_state=5).release(X)
    np.testing.assert_allclose(rel.data, X @ drawn_projection(5, 8, 3))
    assert rel.details["noise_variance"] == 0.0
    assert not rel.is_private and rel.guarantee.epsilon == np.inf
    with pytest.raises(NotPrivateError):
        rel.check_downloadable()


def test_the_projection_is_secret():
    rel = JLLaplace(epsilon=1.0, n_components=3, bounds=(0, 1), random_state=0).release(unit_data())
    assert rel.transform_arrays == {}
    with pytest.raises(ValueError, match="no public transform"):
        rel.transform(unit_data(5))
    card = rel.card()
    assert not card["transform_file"]
    assert "secret" in card["details"]["transform"]


@pytest.mark.parametrize("n_classes", [2, 3])
def test_labels_randomized_response_flip_rate(n_classes):
    n, eps = 6000, 1.0
    y = np.arange(n) % n_classes
    rel = JLLaplace(relation="element", epsilon=eps, n_components=3, bounds=(0, 1),
                    classes=np.arange(n_classes),
                    random_state=0).release(unit_data(n=n), y)
    flip = (n_classes - 1) / (math.exp(eps) + n_classes - 1)
    observed = np.mean(rel.labels != y)
    assert abs(observed - flip) < 4 * math.sqrt(flip * (1 - flip) / n)
    wrong = rel.labels[rel.labels != y]
    assert set(np.unique(wrong)) <= set(range(n_classes))
    assert rel.guarantee.epsilon == eps  # element relation: features and label never both change
    assert [r.distribution for r in rel.noise] == ["laplace", "randomized-response"]


def test_row_relation_splits_the_budget_with_labels():
    n = 6000
    y = np.arange(n) % 2
    rel = JLLaplace(epsilon=2.0, n_components=3, relation="row", epsilon_split=(0.75, 0.25),
                    bounds=(0, 1), classes=[0, 1], random_state=0).release(unit_data(n=n), y)
    feat, lab = rel.noise
    assert feat.epsilon + lab.epsilon <= 2.0 and feat.epsilon == pytest.approx(1.5)
    assert feat.scale == pytest.approx(feat.sensitivity / 1.5)
    flip = 1 / (math.exp(0.5) + 1)
    assert abs(np.mean(rel.labels != y) - flip) < 4 * math.sqrt(flip * (1 - flip) / n)
    assert rel.guarantee.epsilon == pytest.approx(2.0)


def test_regression_label_gets_laplace_noise_of_its_range():
    n = 20_000
    y = np.random.default_rng(1).uniform(0, 10, n)
    rel = JLLaplace(relation="element", epsilon=2.0, n_components=3, bounds=(0, 1), label_bounds=(0, 10),
                    task="regression", random_state=1).release(unit_data(n=n), y)
    assert rel.noise[1].scale == pytest.approx(10 / 2.0)
    assert np.mean(np.abs(rel.labels - y)) == pytest.approx(5.0, rel=0.03)  # E|Lap(b)| = b


def test_randomized_response_is_identity_without_privacy():
    y = np.arange(10) % 3
    np.testing.assert_array_equal(randomized_response(y, 3, np.inf, np.random.default_rng(0)), y)


def test_element_sensitivity_helper_matches_norms():
    P = gaussian_projection(9, 4, np.random.default_rng(0))
    widths = np.linspace(0.5, 2.0, 9)
    assert element_sensitivity(P, widths, 1.0, ord=2) == pytest.approx(
        np.max(np.minimum(widths, 1.0) * np.linalg.norm(P, axis=1)))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"n_components": 8}, "n_components"),
    ({"n_components": 0}, "n_components"),
    ({"epsilon": 0}, "epsilon"),
    ({"epsilon": -1.0}, "epsilon"),
    ({"beta": 0.0}, "beta"),
    ({"beta": 1.0}, "beta"),
    ({"relation": "column"}, "relation"),
    ({"calibration": "sound"}, "calibration"),
    ({"element_bound": 0.0}, "element_bound"),
    ({"row_bound": -1.0}, "row_bound"),
    ({"epsilon_split": (0.5, 0.6)}, "epsilon_split"),
])
def test_bad_parameters_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        JLLaplace(bounds=(0, 1), **kwargs).release(unit_data())


def test_bad_shapes_and_row_counts():
    with pytest.raises(ValueError, match="n_features"):
        JLLaplace(bounds=(0, 1)).release(unit_data(d=1))
    with pytest.raises(ValueError, match="n_samples"):
        JLLaplace(bounds=(0, 1)).release(unit_data(), n_samples=5)
    with pytest.raises(TypeError, match="unexpected"):
        JLLaplace(k=3)


def _kmeans_accuracy(Z: np.ndarray, y: np.ndarray) -> float:
    lab = KMeans(2, n_init=4, random_state=0).fit_predict(Z)
    acc = np.mean(lab == y)
    return max(acc, 1 - acc)


@pytest.mark.slow
def test_kmeans_utility_close_to_the_noiseless_projection():
    # JL paper Table 1 setting d = 3, k = 2, epsilon = 4, Delta = 1: the exact calibration loses
    # little against k-means on the same projection without noise, and on average adds less noise
    # than the published constant.
    centres = np.zeros((2, 3))
    centres[1, 0] = 4.0
    X, y = make_blobs(n_samples=600, centers=centres, cluster_std=1.0, random_state=0)
    gaps, ratios = [], []
    for seed in range(6):
        common = dict(n_components=2, element_bound=1.0, rescale=False, bounds=(-10, 10),
                      random_state=seed)
        clean = JLLaplace(relation="element", epsilon=np.inf, **common).release(X)
        noisy = JLLaplace(relation="element", epsilon=4.0, **common).release(X)
        gaps.append(_kmeans_accuracy(clean.data, y) - _kmeans_accuracy(noisy.data, y))
        ratios.append(noisy.details["noise_scale_exact"] / noisy.details["noise_scale_published"])
    assert np.mean(gaps) < 0.08
    # on average; single draws can need MORE than the published constant here (beta = 3/e > 1)
    assert np.mean(ratios) < 1.0
