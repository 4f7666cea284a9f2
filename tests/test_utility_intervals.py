"""Compare/Utility numbers one can trust (issue 16): intervals inside the metric's range, results
at the chance level marked, no winner at the majority rate, mechanisms that cannot be evaluated
left out of the default, and every exploration file labelled NOT differentially private."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpcore.data import load_dataset
from dpcore.mechanisms import MECHANISMS
from dpcore.utility import (
    NOT_DP_NOTICE,
    best_per_value,
    chance_comparison,
    evaluation_problem,
    exploration_csv,
    exploration_filename,
    mean_interval,
    metric_interval,
    utility_sweep,
)


@pytest.mark.parametrize("values", [[0.0, 1.0], [0.98, 1.0, 1.0], [0.02, 0.0, 0.0], [0.1, 0.9, 0.5]])
def test_accuracy_intervals_stay_in_zero_one_where_student_t_leaves_it(values):
    mean, lo, hi = metric_interval(values, n_test=50)
    assert 0.0 <= lo <= mean <= hi <= 1.0
    _, t_lo, t_hi = mean_interval(values)
    assert t_lo < 0 or t_hi > 1  # the interval the pages used before


def test_non_accuracy_interval_is_inside_the_range_of_the_trials():
    values = [0.31, -0.2, 0.05, 0.4]
    mean, lo, hi = metric_interval(values)
    assert min(values) <= lo < mean < hi <= max(values)
    assert math.isnan(metric_interval([0.3])[1])  # one trial of a non-accuracy: no spread
    assert metric_interval([0.2, 0.2, 0.2])[1:] == (0.2, 0.2)


def test_one_trial_accuracy_gets_the_wilson_interval():
    mean, lo, hi = metric_interval([0.7], n_test=200)
    ci = stats.binomtest(140, 200).proportion_ci(0.95, method="wilson")
    assert mean == 0.7 and (lo, hi) == pytest.approx((ci.low, ci.high))


@pytest.mark.slow
def test_accuracy_interval_covers_the_true_accuracy():
    """Three trials of a classifier whose accuracy is binomial(n_test, p): coverage >= 90%."""
    rng = np.random.default_rng(1)
    p, n_test, reps = 0.83, 120, 400
    hits = 0
    for _ in range(reps):
        acc = rng.binomial(n_test, p, size=3) / n_test
        _, lo, hi = metric_interval(acc, n_test=n_test, n_resamples=500)
        hits += lo <= p <= hi
    assert hits / reps >= 0.9


@pytest.mark.parametrize(("metric", "lo", "hi", "chance", "expected"), [
    ("svm_accuracy", 0.08, 0.14, 0.11, "not distinguishable from majority"),
    ("svm_accuracy", 0.5, 0.6, 0.11, "above majority"),
    ("logreg_accuracy", 0.01, 0.05, 0.11, "below majority"),
    ("krr_rmse", 5.0, 7.0, 10.0, "better than random guess"),
    ("krr_rmse", 9.0, 11.0, 10.0, "not distinguishable from random guess"),
    ("krr_rmse", 11.0, 12.0, 10.0, "worse than random guess"),
    ("silhouette_release", 0.1, 0.2, math.nan, ""),
])
def test_chance_comparison(metric, lo, hi, chance, expected):
    assert chance_comparison(metric, lo, hi, chance) == expected


def test_best_per_value_never_names_a_winner_at_the_majority_rate():
    frame = pd.DataFrame({
        "x": [1.0, 1.0, 5.0, 5.0],
        "mechanism": ["a", "b", "a", "b"],
        "mean": [0.12, 0.10, 0.40, 0.80],
        "vs_chance": ["not distinguishable from majority", "not distinguishable from majority",
                      "above majority", "not distinguishable from majority"],
        "higher_is_better": True,
    })
    best = best_per_value(frame).set_index("x")
    assert best.loc[1.0, "mechanism"].startswith("none") and math.isnan(best.loc[1.0, "mean"])
    assert best.loc[5.0, "mechanism"] == "a"  # b's higher mean is at the majority rate


@pytest.fixture(scope="module")
def small_digits():
    return load_dataset("digits")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_evaluation_problem_says_exactly_which_sweeps_fail(name, small_digits):
    """A mechanism left out of the default Compare selection fails a sweep; the others run."""
    cls = MECHANISMS[name]
    problem = evaluation_problem(cls, "classification")

    extra = {}
    if "public_data" in cls.extra_args:  # generated rows inside the public bounds: public
        rng = np.random.default_rng(0)
        extra["public_data"] = rng.integers(0, 17, size=(200, small_digits.n_features)).astype(float)

    def sweep():
        return utility_sweep(lambda eps: cls(epsilon=eps, **extra), small_digits, [5.0], trials=1)

    if problem is None:
        frame = sweep()
        assert {"svm_accuracy", "logreg_accuracy"} <= set(frame["metric"])
        acc = frame[frame["metric"] == "svm_accuracy"]
        assert ((acc["lo"] >= 0) & (acc["hi"] <= 1)).all()
        assert acc["vs_chance"].iloc[0] != ""
    else:
        assert "secret" in problem
        with pytest.raises(ValueError, match="no public transform"):
            sweep()
    assert evaluation_problem(cls, "unsupervised") is None


def test_exploration_csv_says_in_the_file_that_it_is_not_private():
    frame = pd.DataFrame({"x": [1.0, 5.0], "metric": ["svm_accuracy"] * 2, "mean": [0.2, 0.7]})
    data = exploration_csv(frame, "Compare")
    first = data.decode("utf-8").splitlines()[0]
    assert first.startswith("# Compare: ") and NOT_DP_NOTICE in first
    back = pd.read_csv(io.BytesIO(data), comment="#")
    assert list(back["mean"]) == [0.2, 0.7] and set(back["privacy"]) == {NOT_DP_NOTICE}
    assert exploration_filename("compare") == "compare-NOT-DP.csv"
