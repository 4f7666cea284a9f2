"""The teaching tour's computations (dpcore.teaching)."""

import numpy as np
import pytest

from dpcore import teaching
from dpcore.data import load_dataset


def test_posterior_bound_is_the_odds_ratio_bound():
    prior = np.linspace(0.01, 0.99, 50)
    for eps in (0.1, 1.0, 3.0):
        post = teaching.posterior_bound(prior, eps)
        odds_ratio = (post / (1 - post)) / (prior / (1 - prior))
        assert np.allclose(odds_ratio, np.exp(eps))
        assert np.all(post >= prior) and np.all(np.diff(post) > 0)
    assert np.allclose(teaching.posterior_bound(prior, 0.0), prior)
    assert np.allclose(teaching.posterior_bound(prior, 1.0, delta=0.05),
                       np.minimum(1, teaching.posterior_bound(prior, 1.0) + 0.05))


def test_qq_points_of_a_normal_sample_lie_on_the_diagonal_and_of_a_skewed_one_do_not():
    rng = np.random.default_rng(0)
    t, s = teaching.qq_points(rng.normal(3, 2, 20_000))
    assert np.max(np.abs(t - s)[5:-5]) < 0.1
    t, s = teaching.qq_points(rng.exponential(1.0, 20_000))
    assert np.max(np.abs(t - s)) > 0.5


def test_snr_signal_saturates_while_noise_grows_quadratically():
    ds = load_dataset("digits")
    ps = np.array([2, 4, 8, 16, 32])
    res = teaching.ron_snr_vs_p(ds.X, ds.bounds, ps, 1.0, np.random.default_rng(0))
    assert np.all(res["signal"] <= 1 + 1e-9)  # unit rows: ||X^T X / n||_F <= 1
    expected_noise = np.sqrt(2) * (ps + 1) / (ds.n_samples * 0.7) * ps
    assert np.allclose(res["noise"], expected_noise)
    assert res["snr"][-1] < res["snr"][0]


def test_dpmix_sigma_falls_with_ell():
    pytest.importorskip("dpcore.accounting")
    res = teaching.dpmix_sigma_vs_ell(np.array([1, 16, 256]), epsilon=10.0, n=60_000, d_x=784, d_y=10)
    assert np.all(np.diff(res["sigma"]) < 0)
    assert np.allclose(res["sensitivity"], np.sqrt(794) / np.array([1, 16, 256]))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["digits", "mnist-10k"])
def test_dfm_projection_is_closer_to_normal_than_the_most_spread_feature(name):
    ds = load_dataset(name)
    res = teaching.dfm_projection(ds.X, ds.bounds, np.random.default_rng(0), max_rows=3000)
    Z = teaching.unit_rows(ds.X[:3000], ds.bounds)
    assert res["feature_index"] == int(np.argmax(Z.std(axis=0)))
    assert np.allclose(np.linalg.norm(Z, axis=1)[Z.any(axis=1)], 1.0)
    k_proj, k_raw = res["kurtosis"]
    assert abs(k_proj) < abs(k_raw)
    # the Q-Q points of the projection lie nearer the diagonal than the raw feature's
    (tp, sp), (tf, sf) = res["projection"], res["feature"]
    assert np.mean(np.abs(tp - sp)) < np.mean(np.abs(tf - sf))
    again = teaching.dfm_projection(ds.X, ds.bounds, np.random.default_rng(0), max_rows=3000)
    assert np.array_equal(again["projection"][1], sp)
    chosen = teaching.dfm_projection(ds.X, ds.bounds, np.random.default_rng(0), feature=5, max_rows=3000)
    assert chosen["feature_index"] == 5
