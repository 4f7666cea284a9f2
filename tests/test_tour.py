"""The guided tour (app/tour.py): every sentence that states a result says what the step's figure
plots, for every value of every step's control (tests/tour_checks.py reads the numbers back out of
the sentences and compares them with the figure's traces); a false sentence is caught; the
teaching computations (dpcore.teaching) are what they say."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from app import tour
from app.figures.tour import step_figure
from dpcore import teaching
from dpcore.data import load_dataset
from dpcore.ledger import Ledger, LedgerEntry
from tests.tour_checks import check_step

CHEAP = [s for s in tour.STEPS if s.key not in ("tradeoff", "attack", "choose")]
SLOW = [s for s in tour.STEPS if s not in CHEAP]


def _shown(key: str, value) -> tuple[str, list[dict]]:
    data = tour.step_data(key, value)
    fig = step_figure(key, data)
    return " ".join(tour.step_claims(key, data)), fig.to_plotly_json()["data"]


def test_the_tour_has_seven_steps_each_one_control_with_its_default_among_its_values():
    assert [s.key for s in tour.STEPS] == ["odds", "noise", "tradeoff", "bounds", "budget", "attack",
                                           "choose"]
    for s in tour.STEPS:
        assert s.default in s.options and len(set(s.options)) == len(s.options)
        assert s.idea and s.how and s.control


@pytest.mark.parametrize("step", CHEAP, ids=lambda s: s.key)
def test_every_sentence_of_a_quick_step_says_what_its_figure_plots(step):
    for value in step.options:
        text, traces = _shown(step.key, value)
        check_step(step.key, text, traces)


@pytest.mark.slow
@pytest.mark.parametrize("step", SLOW, ids=lambda s: s.key)
def test_every_sentence_of_a_computed_step_says_what_its_figure_plots(step):
    for value in step.options:
        text, traces = _shown(step.key, value)
        check_step(step.key, text, traces)


def _tradeoff_falling() -> dict:
    """The trade-off step's data with its accuracies reversed (a falling curve)."""
    data = copy.deepcopy(tour.step_data("tradeoff", 1.0))
    a = data["all"]
    for k in ("accuracy", "lo", "hi"):
        a[k] = a[k][::-1].copy()
    return data


@pytest.mark.slow
def test_a_sentence_that_disagrees_with_the_plot_fails_the_check():
    """The check is not a formality: "rises" on a falling curve, a number off by one point, another
    epsilon's curve, a budget sentence about other bars all fail."""
    text, traces = _shown("tradeoff", 1.0)
    falling = _tradeoff_falling()
    with pytest.raises(AssertionError):  # the old sentence against the falling curve
        check_step("tradeoff", text, step_figure("tradeoff", falling).to_plotly_json()["data"])
    # the sentences rebuilt from the falling curve say so, and pass
    check_step("tradeoff", " ".join(tour.step_claims("tradeoff", falling)),
               step_figure("tradeoff", falling).to_plotly_json()["data"])
    assert "falls" in " ".join(tour.step_claims("tradeoff", falling))
    with pytest.raises(AssertionError):
        check_step("tradeoff", text.replace("rises", "falls"), traces)
    shown = round(100 * tour.step_data("tradeoff", 1.0)["all"]["accuracy"][3])
    with pytest.raises(AssertionError):
        check_step("tradeoff", text.replace(f"right {shown}%", f"right {shown + 1}%"), traces)


def test_a_wrong_number_in_a_quick_step_fails_the_check():
    text, traces = _shown("odds", 1.0)
    with pytest.raises(AssertionError):
        check_step("odds", text.replace("73%", "74%"), traces)
    _, other = _shown("odds", 2.0)
    with pytest.raises(AssertionError):  # the sentences of ε = 1 against the curve of ε = 2
        check_step("odds", text, other)
    text, traces = _shown("budget", 6)
    with pytest.raises(AssertionError):
        check_step("budget", text.replace("first 4", "first 5"), traces)
    text, traces = _shown("bounds", 110)
    with pytest.raises(AssertionError):
        check_step("bounds", text.replace("0.206", "0.2"), traces)


def test_noisy_average_uses_the_replace_one_sensitivity_of_a_mean_and_the_exact_sampler():
    ds = load_dataset("digits")
    out = teaching.noisy_average(ds.X, ds.bounds, 1.0, random_state=3)
    s1 = 64 * 16 / ds.n_samples
    assert out["sensitivity"] == pytest.approx(s1)
    assert s1 <= out["scale"] <= s1 * (1 + 1e-6)  # the public grid rounds the scale up a hair
    # worst case: replacing one row by the opposite corner of the box moves the means by exactly S1
    X = np.zeros((ds.n_samples, 64))
    moved = X.copy()
    moved[0] = 16.0
    assert np.abs(moved.mean(0) - X.mean(0)).sum() == pytest.approx(s1)
    # the noise: Laplace of that scale (mean |noise| = b) over many seeds, and noise values on a grid
    draws = np.concatenate([teaching.noisy_average(ds.X, ds.bounds, 1.0, random_state=r)["noisy"]
                            - out["mean"] for r in range(60)])
    assert np.mean(np.abs(draws)) == pytest.approx(out["scale"], rel=0.08)
    assert teaching.average_noise_scale(ds.bounds, ds.n_samples, [0.5, 1.0])[0] == pytest.approx(
        2 * teaching.average_noise_scale(ds.bounds, ds.n_samples, [1.0])[0], rel=1e-6)


def test_bounds_leak_scales_with_the_bounds_and_public_bounds_hide_the_new_value():
    x = np.array([20.0, 30.0, 40.0, 50.0])
    out = teaching.bounds_leak(x, (0.0, 100.0), 90.0, 1.0)
    assert (out["data"]["without"]["lo"], out["data"]["without"]["hi"]) == (20.0, 50.0)
    assert (out["data"]["with"]["lo"], out["data"]["with"]["hi"]) == (30.0, 90.0)  # row 0 replaced
    assert out["data"]["without"]["scale"] == pytest.approx(30 / 4) and out["data"]["with"]["scale"] == \
        pytest.approx(60 / 4)
    assert out["public"]["without"]["scale"] == out["public"]["with"]["scale"] == pytest.approx(100 / 4)
    assert out["public"]["with"]["centre"] - out["public"]["without"]["centre"] == pytest.approx(70 / 4)


def test_composition_is_the_ledgers_sum_and_refusal():
    out = teaching.composition(7, 0.3, 1.0)
    ledger = Ledger(budget=1.0)
    for i in range(7):
        e = LedgerEntry("x", 0.3, 0.0)
        assert bool(out["refused"][i]) == (ledger.refusal(e) is not None)
        if not out["refused"][i]:
            ledger.add(e)
    assert out["total"][-1] == pytest.approx(0.9) and out["refused"].sum() == 4


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
