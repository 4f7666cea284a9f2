"""DP one-way marginals and marginal-faithful decoding (dpcore.marginals).

What is checked: the cells come from public facts only and cover every row once; the counts'
sensitivity by a worst-case search over neighbouring tables; the noise the release draws matches the
scale on its card (a 1.5x mis-calibration is caught); the budget parts add up to the total; the
decoding's assignment honours the quotas and is optimal on small instances; the quantile map follows
the DP marginal, keeps the model's ranks and puts point masses on the bounds; the original-schema
file of a release follows its marginals.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import linear_sum_assignment

from dpcore import marginals as dpmarg
from dpcore.data import load_dataset
from dpcore.decode import PublicSchema, to_original, with_output_space
from dpcore.mechanisms import MODIPS, PCAGauss


def _mixed_frame(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """A table with a point mass at a bound, a skewed column, two categorical columns and a label."""
    age = rng.integers(17, 91, n)
    gain = np.where(rng.random(n) < 0.9, 0, rng.integers(1, 100_000, n))
    colour = rng.choice(["red", "green", "blue"], n, p=[0.6, 0.3, 0.1])
    size = rng.choice(["s", "m", "l", "xl"], n, p=[0.1, 0.5, 0.3, 0.1])
    score = 0.04 * (age - 50) + (colour == "blue") * 1.5 + rng.normal(size=n)
    label = np.where(score > 0.8, "yes", "no")
    return pd.DataFrame({"age": age, "gain": gain, "colour": colour, "size": size, "y": label})


CATEGORIES = {"colour": ["red", "green", "blue"], "size": ["s", "m", "l", "xl"]}
BOUNDS = {"age": [17, 90], "gain": [0, 99_999]}


def _dataset(frame: pd.DataFrame, task: str = "classification"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if task == "classification":
            return load_dataset(frame, label="y", task=task, bounds=BOUNDS, categories=CATEGORIES,
                                classes=["no", "yes"])
        return load_dataset(frame.drop(columns="y"), label="age", task="regression",
                            bounds={"gain": BOUNDS["gain"]}, categories=CATEGORIES, label_bounds=(17, 90))


def _plan(ds, noise_sd: float = 10.0) -> dpmarg.MarginalPlan:
    from dpcore.preprocessing import prepare_input

    data = prepare_input(ds)
    return dpmarg.plan_marginals(data.feature_names, data.bounds, data.onehot_groups, task=data.task,
                                 n_rows=data.n_samples, noise_sd=noise_sd,
                                 n_classes=0 if data.classes is None else data.classes.size,
                                 label_name=data.label_name, label_bounds=data.label_bounds), data


# ------------------------------------------------------------------------------------ plan and cells
def test_plan_has_one_table_per_original_column_and_class_rows():
    ds = _dataset(_mixed_frame(500, np.random.default_rng(0)))
    plan, data = _plan(ds)
    assert [c.name for c in plan.columns] == ["age", "gain", "colour", "size"]
    assert [c.kind for c in plan.columns] == ["numeric", "numeric", "categorical", "categorical"]
    assert plan.columns[2].categories == ("red", "green", "blue")
    assert plan.n_groups == 2 and plan.conditional
    counts = plan.counts(data.X, data.y)
    # every row in exactly one cell of each table, each class its own row of cells
    off = plan.offsets()
    for j in range(plan.n_tables):
        assert counts[:, off[j]:off[j + 1]].sum() == data.n_samples
    assert counts[1, off[0]:off[1]].sum() == np.sum(data.y == 1)


def test_regression_label_gets_a_numeric_table_of_its_public_bounds():
    ds = _dataset(_mixed_frame(300, np.random.default_rng(1)), task="regression")
    plan, _ = _plan(ds)
    label = plan.columns[-1]
    assert label.features == () and (label.lo, label.hi) == (17, 90) and not plan.conditional


def test_cells_of_bounds_are_point_masses_and_interior_cells_partition():
    col = dpmarg.MarginalColumn("x", "numeric", (0,), lo=0.0, hi=10.0, n_bins=5)
    values = np.array([0.0, 1e-9, 1.99, 2.0, 9.999, 10.0])
    assert col.cells(values).tolist() == [0, 1, 1, 2, 5, 6]
    cat = dpmarg.MarginalColumn("c", "categorical", (0, 1, 2), categories=("a", "b", "c"))
    assert cat.cells(np.array([[0, 1, 0], [0, 0, 0], [1, 0, 0]])).tolist() == [1, -1, 0]


def test_cell_rule_uses_public_facts_only_and_shrinks_with_noise():
    ds = _dataset(_mixed_frame(2000, np.random.default_rng(2)))
    bins = [_plan(ds, sd)[0].columns[0].n_bins for sd in (0.0, 1.0, 10.0, 100.0, 1e9)]
    assert bins[0] == dpmarg.MAX_BINS and bins[-1] == 1
    assert bins == sorted(bins, reverse=True)
    # n / (groups * CELL_SNR * sd) = 2000 / (2 * 8 * 10) = 12.5
    assert bins[2] == 12


# ------------------------------------------------------------------------------------ sensitivity
def _neighbour_deltas(plan, data, rng, trials):
    base = plan.counts(data.X, data.y)
    lo, hi = data.bounds[:, 0], data.bounds[:, 1]
    for _ in range(trials):
        i = rng.integers(data.n_samples)
        X, y = data.X.copy(), data.y.copy()
        row = np.where(rng.random(X.shape[1]) < 0.5, lo, hi) if rng.random() < 0.5 else \
            lo + rng.random(X.shape[1]) * (hi - lo)
        for g in data.onehot_groups:  # a row of the public domain: one category per group, or none
            row[g] = 0.0
            if rng.random() < 0.9:
                row[g[rng.integers(len(g))]] = 1.0
        X[i], y[i] = row, rng.integers(2)
        yield plan.counts(X, y) - base


def test_counts_sensitivity_by_search_never_exceeds_and_attains_the_bound():
    rng = np.random.default_rng(3)
    ds = _dataset(_mixed_frame(60, rng))
    plan, data = _plan(ds, 1.0)
    s1, s2 = plan.sensitivities
    assert (s1, s2) == (2.0 * plan.n_tables, math.sqrt(2.0 * plan.n_tables))
    worst1 = worst2 = 0.0
    for delta in _neighbour_deltas(plan, data, rng, 3000):
        worst1, worst2 = max(worst1, np.abs(delta).sum()), max(worst2, np.sqrt((delta**2).sum()))
    assert worst1 <= s1 + 1e-12 and worst2 <= s2 + 1e-12
    assert worst1 == s1  # attained: a record that moves to another cell of every table


# ------------------------------------------------------------------------------------ the release
@pytest.fixture(scope="module")
def mixed():
    return _dataset(_mixed_frame(4000, np.random.default_rng(4)))


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_pca_gauss_measures_marginals_within_the_total_budget(mixed, noise):
    kwargs = {"delta": 1e-6} if noise == "gaussian" else {"noise": "laplace"}
    rel = PCAGauss(epsilon=1.0, random_state=0, **kwargs).release(mixed)
    assert rel.guarantee.epsilon <= 1.0 + 1e-12
    assert rel.marginals is not None and rel.marginals.epsilon_share == dpmarg.MARGINAL_FRACTION
    rec = [r for r in rel.noise if r.statistic.startswith("counts of")]
    assert len(rec) == 1 and rec[0].sensitivity == pytest.approx(
        math.sqrt(2 * 4) if noise == "gaussian" else 2 * 4)
    if noise == "gaussian":
        parts = rel.details["rho_parts"]
        assert parts["marginals"] == pytest.approx(dpmarg.MARGINAL_FRACTION * rel.details["rho_total"])
    else:
        parts = rel.details["epsilon_parts"]
        assert parts["marginals"] == pytest.approx(dpmarg.MARGINAL_FRACTION)
        assert math.fsum(parts.values()) <= 1.0
    card = rel.details["marginals"]
    assert card["class_conditional"] and card["source"] == dpmarg.MARGINAL_SOURCE
    assert np.asarray(card["noisy_counts"]).shape == rel.marginals.counts.shape


def test_marginals_off_gives_the_model_the_whole_budget(mixed):
    rel = PCAGauss(epsilon=1.0, delta=1e-6, marginals="off", random_state=0).release(mixed)
    assert rel.marginals is None and "marginals" not in rel.details["rho_parts"]


@pytest.mark.parametrize("scale_factor", [1.0, 1.5])
def test_marginal_noise_matches_the_card_and_catches_a_1_5x_miscalibration(mixed, scale_factor):
    # noisy - exact counts over many cells and releases: their sd is the card's scale; a noise 1.5x
    # smaller than stated (a mis-calibrated sampler) falls outside the band
    diffs, scales = [], []
    for seed in range(6):
        mech = PCAGauss(epsilon=0.5, delta=1e-6, random_state=seed)
        exp = mech.explore(mixed)
        exact = exp.diagnostics["marginal_counts"]
        rec = next(r for r in exp.release.noise if r.statistic.startswith("counts of"))
        diffs.append((exp.release.marginals.counts - exact).ravel() / scale_factor)
        scales.append(rec.scale)
    sd = np.std(np.concatenate(diffs))
    ratio = sd / np.mean(scales)
    if scale_factor == 1.0:
        assert 0.9 < ratio < 1.1, ratio
    else:
        assert not 0.9 < ratio < 1.1, ratio


def test_marginals_are_skipped_when_their_noise_swamps_the_counts():
    small = _dataset(_mixed_frame(200, np.random.default_rng(5)))
    rel = PCAGauss(epsilon=0.5, noise="laplace", random_state=0).release(small)  # sd ~ 2 * 4 * sqrt(2)/0.15
    assert rel.marginals is None


def test_a_numeric_only_plan_needs_two_interior_cells_per_column():
    """measured_share: with category lists or classes one interior cell per group is enough; a plan
    of numeric columns only (regression without categories) needs MIN_NUMERIC_BINS, since one cell
    measures only the mass at the bounds. The threshold is a public function of n and the noise."""
    kw = {"epsilon": 0.1, "delta": 1e-6, "n_groups": 1, "n_tables": 3}
    sd = dpmarg.marginal_noise_sd(0.1, 1e-6, 0.3, 3)
    one_cell = math.ceil(dpmarg.CELL_SNR * sd)  # rows for exactly one interior cell
    assert dpmarg.measured_share(0.3, n_rows=one_cell, **kw) == 0.3
    assert dpmarg.measured_share(0.3, n_rows=one_cell, numeric_only=True, **kw) == 0.0
    two_cells = math.ceil(dpmarg.MIN_NUMERIC_BINS * dpmarg.CELL_SNR * sd)
    assert dpmarg.measured_share(0.3, n_rows=two_cells, numeric_only=True, **kw) == 0.3
    # a regression table of numbers only, with rows for one interior cell but not two: the model
    # gets the whole budget; with a category list the same rows are measured
    rng = np.random.default_rng(1)
    n = int(1.5 * one_cell)
    frame = pd.DataFrame({"a": rng.uniform(0, 10, n), "b": rng.uniform(0, 10, n),
                          "y": rng.uniform(0, 100, n)})
    ds = load_dataset(frame, label="y", task="regression", bounds={"a": [0, 10], "b": [0, 10]},
                      label_bounds=(0, 100))
    rel = PCAGauss(epsilon=0.1, delta=1e-6, random_state=0).release(ds)
    assert rel.marginals is None and "marginals" not in rel.details["epsilon_parts"]


def test_modips_measures_marginals_too(mixed):
    rel = MODIPS(epsilon=1.0, delta=1e-6, random_state=0).release(mixed)
    assert rel.marginals is not None and "marginals" in rel.details["rho_parts"]
    assert rel.guarantee.epsilon <= 1.0 + 1e-12


# ------------------------------------------------------------------------------------ decoding
def test_a_rare_class_leans_on_the_pooled_marginal_a_large_class_keeps_its_own():
    """probabilities(): a class's clipped counts plus sd*sqrt(cells) pseudo-counts spread as the
    pooled marginal. A class of 4 rows under noise sd 10 is mostly noise: its estimate must be nearer
    the pooled marginal than its own noisy counts are; a class of 10,000 rows barely moves."""
    ds = _dataset(_mixed_frame(500, np.random.default_rng(0)))
    plan, _ = _plan(ds, noise_sd=10.0)
    j = [c.name for c in plan.columns].index("colour")
    off = plan.offsets()
    counts = np.zeros((2, off[-1]))
    counts[0, off[j]:off[j + 1]] = [6000.0, 3000.0, 1000.0]  # large class: 60/30/10
    counts[1, off[j]:off[j + 1]] = [0.0, 0.0, 4.0]           # rare class: all noise-sized
    marg = dpmarg.DPMarginals(plan, counts, 0.3)
    pooled = marg.probabilities(j, None)
    np.testing.assert_allclose(pooled, np.array([6000, 3000, 1004]) / 10004)
    large = marg.probabilities(j, 0)
    np.testing.assert_allclose(large, [0.6, 0.3, 0.1], atol=0.002)
    rare = marg.probabilities(j, 1)
    own = np.array([0.0, 0.0, 1.0])
    assert abs(rare.sum() - 1) < 1e-12
    assert np.abs(rare - pooled).sum() < np.abs(own - pooled).sum() / 2
    alpha = 10.0 * math.sqrt(3)
    np.testing.assert_allclose(rare, (np.array([0, 0, 4.0]) + alpha * pooled) / (4 + alpha))


def test_quota_assignment_meets_quotas_and_is_optimal_on_small_instances():
    rng = np.random.default_rng(6)
    for _ in range(30):
        n, k = int(rng.integers(4, 12)), int(rng.integers(2, 5))
        S = rng.normal(size=(n, k))
        q = np.bincount(rng.integers(0, k, n), minlength=k)
        choice = dpmarg.quota_assign(S, q)
        assert np.array_equal(np.bincount(choice, minlength=k), q)
        # the optimum: rows against category slots
        slots = np.repeat(np.arange(k), q)
        r, c = linear_sum_assignment(-S[:, slots])
        best = S[r, slots[c]].sum()
        assert S[np.arange(n), choice].sum() == pytest.approx(best)
    # above the exact size: the prices' assignment is within 1% of the optimum (per row)
    n, k = dpmarg.EXACT_ASSIGNMENT_ROWS + 500, 6
    S = rng.normal(size=(n, k)) + np.linspace(0, 1, k)
    q = np.bincount(np.minimum(rng.geometric(0.4, n) - 1, k - 1), minlength=k)[::-1].copy()
    choice = dpmarg.quota_assign(S, q)
    assert np.array_equal(np.bincount(choice, minlength=k), q)
    slots = np.repeat(np.arange(k), q)
    r, c = linear_sum_assignment(-S[:, slots])
    best = S[r, slots[c]].mean()
    assert S[np.arange(n), choice].mean() >= best - 0.01 * abs(best), (S[np.arange(n), choice].mean(), best)


def test_quota_assignment_refuses_quotas_that_do_not_add_up():
    with pytest.raises(ValueError, match="sum to"):
        dpmarg.quota_assign(np.zeros((3, 2)), np.array([1, 1]))


def test_quantile_map_follows_the_marginal_keeps_ranks_and_hits_the_bounds():
    col = dpmarg.MarginalColumn("x", "numeric", (0,), lo=0.0, hi=100.0, n_bins=4)
    probs = np.array([0.5, 0.1, 0.2, 0.1, 0.0, 0.1])  # half the rows exactly 0, a tenth exactly 100
    v = np.random.default_rng(7).normal(size=1000)
    out = dpmarg.quantile_map(v, col, probs)
    assert np.all(np.diff(out[np.argsort(v)]) >= 0)  # the model's ranking is kept
    assert np.mean(out == 0.0) == pytest.approx(0.5, abs=1e-3)
    assert np.mean(out == 100.0) == pytest.approx(0.1, abs=1e-3)
    cells = col.cells(out)
    assert np.allclose(np.bincount(cells, minlength=6) / 1000, probs, atol=2e-3)


def test_original_schema_file_follows_its_dp_marginals(mixed):
    rel = PCAGauss(epsilon=5.0, delta=1e-6, random_state=1).release(mixed)
    schema = PublicSchema.from_dataset(mixed)
    frame = to_original(rel, schema).to_frame()
    marg = rel.marginals
    labels = frame["y"].to_numpy()
    for g, cls in enumerate(["no", "yes"]):
        rows = frame[labels == cls]
        colour = marg.plan.columns[2]
        expected = marg.probabilities(2, g)
        observed = rows["colour"].value_counts(normalize=True).reindex(colour.categories, fill_value=0)
        assert np.allclose(observed.to_numpy(), expected, atol=1.0 / max(1, len(rows)) + 1e-12)
        share_zero = marg.probabilities(1, g)[0]
        assert np.mean(rows["gain"].to_numpy() == 0) == pytest.approx(share_zero, abs=2.0 / len(rows))
    # the same release always decodes to the same file
    again = to_original(rel, schema).to_frame()
    pd.testing.assert_frame_equal(frame, again)


def test_decoding_without_marginals_is_the_models_argmax(mixed):
    rel = PCAGauss(epsilon=5.0, delta=1e-6, random_state=1).release(mixed)
    schema = PublicSchema.from_dataset(mixed)
    plain = to_original(rel, schema, marginals=False)
    assert plain.details["output"]["marginals"] is False
    assert with_output_space(rel, schema, None).details["output"]["marginals"] is True


def test_file_accuracy_beats_the_majority_rate_with_marginals(mixed):
    from dpcore.evaluation.fidelity import encode_file, encoded_real, file_model_score

    test = _dataset(_mixed_frame(3000, np.random.default_rng(8)))
    schema = PublicSchema.from_dataset(mixed)
    _, y_test = encode_file(_mixed_frame(3000, np.random.default_rng(8)), schema)
    X_test = encoded_real(test.X, mixed.bounds)
    majority = max(np.mean(y_test), 1 - np.mean(y_test))
    scores = []
    for seed in range(3):
        rel = PCAGauss(epsilon=1.0, delta=1e-6, random_state=seed).release(mixed)
        X, y = encode_file(to_original(rel, schema).to_frame(), schema)
        scores.append(file_model_score(X, y, X_test, y_test, "classification"))
    assert np.mean(scores) > majority + 0.02, (scores, majority)
