"""DPPro: exact calibration to the released R, Lemma 4 with its conditions, the noise actually added,
the public transform, labels, validation, SVM utility."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.svm import LinearSVC

from dpcore.calibration import analytic_gaussian_sigma, gaussian_delta
from dpcore.exceptions import NotPrivateError
from dpcore.mechanisms import DPPro, get_mechanism
from dpcore.mechanisms.dppro import dppro_published_sigma, gaussian_epsilon, lemma4_violations


def unit_data(n: int = 200, d: int = 8, seed: int = 0, binary: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.uniform(size=(n, d)) < 0.3).astype(float) if binary else rng.uniform(size=(n, d))


def test_registered_under_its_cli_name():
    assert get_mechanism("dppro") is DPPro
    assert DPPro.space == "projected" and "distances" in DPPro.capabilities


@pytest.mark.parametrize(("eps", "delta"), [(0.2, 1e-5), (1.0, 1e-6), (8.0, 1e-3)])
def test_exact_sigma_is_the_analytic_gaussian_of_the_released_matrix(eps, delta):
    rel = DPPro(relation="element", epsilon=eps, delta=delta, n_components=5, bounds=(0, 1),
                random_state=3).release(unit_data())
    R = rel.transform_arrays["R"]
    theta2 = np.max(np.linalg.norm(R, axis=1))
    sigma = analytic_gaussian_sigma(theta2, eps, delta)
    rec = rel.noise[0]
    assert rec.sensitivity == pytest.approx(theta2, rel=1e-12)
    # calibrated at (eps, delta) minus the discrete Gaussian sampler's reserve (~1e-11; dpcore.noise)
    assert rec.scale == pytest.approx(sigma, rel=1e-9) and rec.scale >= sigma
    assert rel.details["noise_variance"] == pytest.approx(sigma**2)
    # exactly (eps, delta): the privacy curve at sigma meets delta
    assert float(gaussian_delta(sigma, theta2, eps)) == pytest.approx(delta, rel=1e-6)
    g = rel.guarantee
    assert (g.epsilon, g.delta, g.kind, g.neighbouring) == (eps, delta, "approx", "element")


def test_element_bound_scales_the_sensitivity_up_to_the_column_width():
    X = unit_data() * 3
    for bound, factor in ((2.0, 2.0), (7.0, 3.0)):
        rel = DPPro(relation="element", epsilon=1.0, n_components=4, element_bound=bound, rescale=False,
                    bounds=(0, 3),
                    random_state=0).release(X)
        theta2 = np.max(np.linalg.norm(rel.transform_arrays["R"], axis=1))
        assert rel.noise[0].sensitivity == pytest.approx(factor * theta2)


def test_gaussian_noise_spread_matches_sigma():
    # X = 0 so Y is the noise itself; pooled over seeds, Y / sigma ~ N(0, 1) (KS test), and the
    # sample variance is 1 within 4% (standard error ~1.0% for 20,000 draws).
    X = np.zeros((200, 6))
    pooled = []
    for seed in range(20):
        rel = DPPro(epsilon=1.0, n_components=5, rescale=False, bounds=(0, 1),
                    random_state=seed).release(X)
        pooled.append(rel.data.ravel() / rel.noise[0].scale)
    z = np.concatenate(pooled)
    assert stats.kstest(z, stats.norm().cdf).pvalue > 1e-3
    assert np.var(z) == pytest.approx(1.0, rel=0.04)


def test_transform_maps_real_rows_into_the_release_space():
    X = unit_data() * 4 - 1
    bounds = (-1, 3)
    rel = DPPro(epsilon=2.0, n_components=3, bounds=bounds, random_state=1).release(X)
    R = rel.transform_arrays["R"]
    np.testing.assert_allclose(rel.transform(X), ((X + 1) / 4) @ R)
    outside = np.full((1, 8), 10.0)
    np.testing.assert_allclose(rel.transform(outside), np.ones((1, 8)) @ R)  # clipped to hi
    resid = rel.data - rel.transform(X)
    assert np.std(resid) == pytest.approx(rel.noise[0].scale, rel=0.1)


def test_published_sigma_with_violated_conditions_is_reported():
    # d = 8: k > 2(ln 8 + ln(2e5)) = 28.6 is impossible with k < d
    rel = DPPro(epsilon=1.0, n_components=5, calibration="published", bounds=(0, 1),
                random_state=0).release(unit_data())
    sigma = 4 * math.sqrt(math.log(1e5)) / 1.0
    assert rel.noise[0].scale == pytest.approx(sigma)
    assert any("k > 2(ln d + ln(2/delta))" in w for w in rel.card()["warnings"])
    assert rel.details["lemma4_conditions_hold"] is False
    # whatever the conditions, the reported guarantee holds for the drawn R
    s2 = rel.noise[0].sensitivity
    assert float(gaussian_delta(sigma, s2, rel.guarantee.epsilon)) <= 1e-5
    assert rel.guarantee.epsilon >= 1.0


def test_published_sigma_when_lemma4_holds():
    d, k = 200, 60  # k > 2(ln 200 + ln 2e5) = 35.0
    X = unit_data(n=100, d=d, binary=True)
    rel = DPPro(relation="element", epsilon=1.0, n_components=k, calibration="published", bounds=(0, 1),
                random_state=0).release(X)
    assert not [w for w in rel.card()["warnings"] if "Lemma 4" in w]
    assert rel.details["lemma4_conditions_hold"] is True
    assert rel.guarantee.epsilon == 1.0
    # the paper's sigma overshoots: the drawn R is in fact (eps', delta)-DP with eps' < eps
    assert rel.details["epsilon_for_drawn_projection"] < 0.6
    assert rel.details["sigma_exact"] < rel.details["sigma_published"] / 2


def test_published_sigma_ignores_delta_so_the_true_epsilon_is_reported():
    X = unit_data() * 3
    rel = DPPro(epsilon=1.0, n_components=5, calibration="published", element_bound=3.0,
                rescale=False, bounds=(0, 3), random_state=0).release(X)
    s2 = rel.noise[0].sensitivity
    achieved = gaussian_epsilon(dppro_published_sigma(1.0, 1e-5), s2, 1e-5)
    assert achieved > 1.0
    assert rel.guarantee.epsilon == pytest.approx(achieved)
    assert any("element_bound" in w for w in rel.card()["warnings"])


def test_lemma4_conditions():
    assert lemma4_violations(1.0, 1e-5, 200, 60, 1.0, 1.5) == []
    msgs = lemma4_violations(20.0, 1e-5, 200, 10, 2.0, 2.5)
    assert len(msgs) == 4


@pytest.mark.parametrize("sens", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-7])
def test_gaussian_epsilon_inverts_the_privacy_curve(sens, delta):
    for sigma in (0.3, 1.0, 5.0):
        eps = gaussian_epsilon(sigma, sens, delta)
        assert float(gaussian_delta(sigma, sens, eps)) <= delta
        if eps > 0:
            assert float(gaussian_delta(sigma, sens, eps)) == pytest.approx(delta, rel=1e-6)
            assert analytic_gaussian_sigma(sens, eps, delta) == pytest.approx(sigma, rel=1e-6)
    assert gaussian_epsilon(0.0, 1.0, delta) == np.inf


def test_labels_are_released_with_the_whole_epsilon():
    n = 6000
    y = np.arange(n) % 2
    rel = DPPro(relation="element", epsilon=1.0, delta=1e-6, n_components=3, bounds=(0, 1), classes=[0, 1],
                random_state=0).release(unit_data(n=n), y)
    flip = 1 / (math.e + 1)
    assert abs(np.mean(rel.labels != y) - flip) < 4 * math.sqrt(flip * (1 - flip) / n)
    assert (rel.guarantee.epsilon, rel.guarantee.delta) == (1.0, 1e-6)
    assert [r.epsilon for r in rel.noise] == [1.0, 1.0]


def test_epsilon_infinity_is_not_private():
    X = unit_data()
    rel = DPPro(epsilon=np.inf, n_components=3, bounds=(0, 1), random_state=0).release(X)
    np.testing.assert_allclose(rel.data, rel.transform(X))
    assert not rel.is_private
    with pytest.raises(NotPrivateError):
        rel.save("/tmp/never-written.csv")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"n_components": 8}, "n_components"),
    ({"n_components": 0}, "n_components"),
    ({"epsilon": 0.0}, "epsilon"),
    ({"delta": 0.0}, "delta"),
    ({"delta": 1.0}, "delta"),
    ({"element_bound": -2.0}, "element_bound"),
    ({"calibration": "classic"}, "calibration"),
])
def test_bad_parameters_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DPPro(bounds=(0, 1), **kwargs).release(unit_data())


def test_svm_trained_on_the_release_beats_the_majority_class():
    # DPPro Fig. 5 protocol: train a linear SVM on (Y, private labels), test on real held-out
    # rows mapped with the public transform. Non-private projection vs epsilon = 10.
    X, y = load_breast_cancer(return_X_y=True)
    bounds = np.column_stack([X.min(0), X.max(0)])  # treated as public for this test
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    majority = max(np.mean(yte), 1 - np.mean(yte))
    acc = {}
    for eps in (np.inf, 10.0):
        scores = []
        for seed in range(6):
            rel = DPPro(relation="element", epsilon=eps, n_components=10, bounds=bounds, classes=[0, 1],
                        random_state=seed).release(Xtr, ytr)
            clf = LinearSVC().fit(rel.data, rel.labels)
            scores.append(clf.score(rel.transform(Xte), yte))
        acc[eps] = np.mean(scores)
    assert acc[np.inf] > 0.9
    assert majority + 0.1 < acc[10.0] < acc[np.inf] + 0.02


@pytest.mark.parametrize("rescale", [False, True])
def test_projection_noise_drawn_on_a_thread_equals_one_sequential_draw(rescale):
    """``ProjectionInput.project`` takes each block's noise on a helper thread (from a stream whose
    blocks are drawn on every core) while it computes the next product; the integers must be those
    of one draw of the whole ``(n, k)`` matrix, and the same on one thread."""
    from dpcore import noise
    from dpcore.mechanisms._projection import ProjectionInput
    from dpcore.preprocessing import prepare_input, row_blocks

    rng = np.random.default_rng(0)
    n, d, k = 20_000, 100, 7
    assert len(list(row_blocks(n, d))) >= 3  # several blocks, so the prefetch path runs
    X = rng.uniform(-2, 3, size=(n, d))
    inp = ProjectionInput.from_prepared(prepare_input(X, bounds=(-2, 3)), rescale=rescale)
    P = rng.normal(size=(d, k))
    clean = inp.project(P)
    np.testing.assert_allclose(clean, inp.X @ P, rtol=1e-10, atol=1e-9)
    plans = [
        lambda seed: noise.gaussian_plan(0.7, grid=2.0**-30, l2_sensitivity=1.0, n_changed=k,
                                         bits=noise.noise_source(seed)),
        lambda seed: noise.laplace_plan(1.0, 3.0, n_changed=k, bits=noise.noise_source(seed)),
    ]
    for make in plans:
        noisy = inp.project(P, make(5))
        ref = make(5)  # one draw of the whole matrix, on this thread
        expected = ref.apply(clean, ref.draw((n, k), workers=1))
        np.testing.assert_array_equal(noisy, expected)
        assert np.array_equal(noisy / ref.grid, np.rint(noisy / ref.grid))
