"""Labels that carry signal (issue 13, item 3): the baselines' label budget share, DPMix's soft labels
and what the utility trains on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcore.mechanisms import DPMix, IdentityLaplace
from dpcore.mechanisms._labels import DEFAULT_LABEL_SHARE, label_budget_share, rows_by_class
from dpcore.utility import release_class_labels, release_training_labels, soft_label_draw


def keep_margin(eps_label: float, K: int) -> float:
    """k-ary randomized response: P(keep) - 1/K."""
    return math.exp(eps_label) / (math.exp(eps_label) + K - 1) - 1 / K


@pytest.mark.parametrize("K", [2, 3, 5, 10])
def test_label_share_rule_and_the_default(K):
    assert label_budget_share(1e-3, K) == pytest.approx(0.5, abs=0.01)  # m ~ eps_l / K: optimum 1/2
    assert abs(label_budget_share(1.0, K) - DEFAULT_LABEL_SHARE) <= 0.05
    assert label_budget_share(10.0, K) < 0.45  # nearly noise-free labels: the features get more
    # at epsilon = 1 the default keeps the label clearly above chance; the former 10% share did not
    assert keep_margin(DEFAULT_LABEL_SHARE, K) >= 0.05
    assert keep_margin(0.1, K) < 0.03
    assert label_budget_share(1.0, None) == 0.5  # regression: eps_l eps_f is maximal at 1/2


def test_soft_label_draw_keeps_the_mixing_proportions():
    rng = np.random.default_rng(0)
    soft = np.tile([0.7, 0.2, 0.1, -0.05], (40_000, 1))
    soft[:10_000] = [-0.1, -0.2, 0.0, -0.3]  # no positive mass: uniform
    idx = soft_label_draw(soft, rng)
    freq = np.bincount(idx[10_000:], minlength=4) / 30_000
    np.testing.assert_allclose(freq, [0.7, 0.2, 0.1, 0.0], atol=0.012)  # 4.5 s.e.
    np.testing.assert_allclose(np.bincount(idx[:10_000], minlength=4) / 10_000, 0.25, atol=0.02)


def test_dpmix_trains_on_its_soft_labels_not_the_majority_argmax():
    # 25% minority, ell = 16: the argmax of a mixture's labels is its majority class, almost always
    # the overall majority; the drawn labels keep the class rate. Noise-free (sigma = 0) for a
    # sharp check.
    rng = np.random.default_rng(1)
    n = 8000
    y = (rng.uniform(size=n) < 0.25).astype(int)
    X = rng.uniform(size=(n, 3))
    rel = DPMix(ell=16, sigma_x=0.0, sigma_y=0.0, bounds=(0, 1), classes=[0, 1],
                random_state=0).release(X, y)
    assert rel.label_columns == ["label=0", "label=1", "label_argmax"]
    assert "do not train on it" in rel.details["label_units"]
    argmax = release_class_labels(rel).astype(int)
    drawn = release_training_labels(rel, np.random.default_rng(2)).astype(int)
    assert argmax.mean() < 0.08
    assert drawn.mean() == pytest.approx(y.mean(), abs=0.02)


def test_identity_laplace_labels_keep_the_majority_side_at_epsilon_one():
    # imbalanced labels (25% minority), epsilon = 1: the released label rate stays clearly on the
    # majority side (0.5 - 0.24 * 0.25 = 0.44 in expectation; 0.49 at the former 10% share)
    rng = np.random.default_rng(3)
    n = 20_000
    y = (rng.uniform(size=n) < 0.25).astype(int)
    rel = IdentityLaplace(epsilon=1.0, n_components=2, bounds=(0, 1), classes=[0, 1],
                          random_state=0).release(rng.uniform(size=(n, 4)), y)
    p_keep = math.exp(0.5) / (math.exp(0.5) + 1)
    expected = 0.25 * p_keep + 0.75 * (1 - p_keep)
    assert np.mean(rel.labels) == pytest.approx(expected, abs=0.015)
    assert np.mean(rel.labels) < 0.47


def test_rows_by_class_are_each_class_positions_in_order():
    """The per-class mechanisms' grouping (one sort instead of one pass over y per class): the
    positions of every class of the public list, ascending; absent classes get none."""
    y = np.random.default_rng(3).integers(0, 40, 5000)
    y[y == 7] = 8  # class 7 absent
    groups = rows_by_class(y, 45)
    assert len(groups) == 45 and groups[7].size == 0 and all(g.size == 0 for g in groups[40:])
    for c, rows in enumerate(groups):
        np.testing.assert_array_equal(rows, np.flatnonzero(y == c))
