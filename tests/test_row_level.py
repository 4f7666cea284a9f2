"""One privacy unit (issue 13, item 1): every card states the row-level (replace-one, label
included) guarantee; JL-Laplace and DPPro are calibrated at it by default, and their papers'
element / row-l2 modes report its equivalent for the drawn matrix."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from dpcore.calibration import gaussian_epsilon
from dpcore.data import Dataset
from dpcore.ledger import LedgerEntry
from dpcore.mechanisms import MECHANISMS, DPPro, JLLaplace, RONGauss, get_mechanism
from dpcore.mechanisms._projection import box_sensitivity, gaussian_projection
from dpcore.utility import utility_sweep


def box_vertices(d: int) -> np.ndarray:
    return np.array(list(itertools.product([-1.0, 1.0], repeat=d)))


def probe_projection(cls: type, seed: int, d: int, **kw) -> np.ndarray:
    """The drawn matrix of a seeded release, read off a noise-free run on {0, e_1..e_d}."""
    rows = np.vstack([np.zeros(d), np.eye(d)])
    out = cls(epsilon=math.inf, rescale=False, bounds=(0, 1), random_state=seed, **kw).release(rows).data
    return out[1:] - out[0]


# ------------------------------------------------------------------------- worst-case searches
@pytest.mark.parametrize(("d", "k", "seed"), [(6, 3, 0), (9, 4, 1), (12, 2, 2)])
def test_box_sensitivity_equals_an_exhaustive_search_over_the_box(d, k, seed):
    rng = np.random.default_rng(seed)
    P = gaussian_projection(d, k, rng)
    w = rng.choice([0.0, 1.0, 2.5], size=d)
    # v -> ||v P|| is convex: its supremum over the box of changes |v_i| <= w_i is at a vertex
    V = box_vertices(d) * w
    l1, how1 = box_sensitivity(P, w, ord=1)
    l2, how2 = box_sensitivity(P, w, ord=2)
    assert how1.startswith("exact") and how2.startswith("exact")
    assert l1 == pytest.approx(np.abs(V @ P).sum(axis=1).max(), rel=1e-12)
    assert l2 == pytest.approx(np.linalg.norm(V @ P, axis=1).max(), rel=1e-12)
    # random interior points never exceed it (a change inside the box, not only at a vertex)
    U = rng.uniform(-1, 1, size=(20_000, d)) * w
    assert np.abs(U @ P).sum(axis=1).max() <= l1 * (1 + 1e-12)
    assert np.linalg.norm(U @ P, axis=1).max() <= l2 * (1 + 1e-12)


def test_l2_box_bound_for_large_d_dominates_a_local_search():
    # d = 300: no enumeration; the bound must still dominate the best vertex an ascent finds
    # (alternate t = sign(P u), u = P^T t / ||P^T t||: each step cannot decrease ||t^T P||)
    rng = np.random.default_rng(3)
    d, k = 300, 10
    P = gaussian_projection(d, k, rng)
    w = np.ones(d)
    bound, how = box_sensitivity(P, w, ord=2)
    assert how.startswith("bound")
    best = 0.0
    for _ in range(50):
        u = rng.standard_normal(k)
        for _ in range(30):
            t = np.sign(P @ u)
            u = P.T @ t / np.linalg.norm(P.T @ t)
        best = max(best, float(np.linalg.norm(t @ P)))
    assert best <= bound <= 1.5 * best


# ------------------------------------------------------------------------- JL-Laplace
def test_jl_laplace_default_is_row_level_with_the_drawn_box_sensitivity():
    d, k, seed = 8, 4, 5
    X = np.random.default_rng(0).uniform(0, 1, size=(300, d))
    rel = JLLaplace(epsilon=1.0, n_components=k, rescale=False, bounds=(0, 1), random_state=seed).release(X)
    P = probe_projection(JLLaplace, seed, d, n_components=k)
    exhaustive = np.abs(box_vertices(d) @ P).sum(axis=1).max()  # widths 1: vertices of [-1, 1]^d
    assert rel.guarantee.neighbouring == "replace-one" and rel.guarantee.epsilon == pytest.approx(1.0)
    assert rel.noise[0].sensitivity == pytest.approx(exhaustive, rel=1e-9)
    assert rel.noise[0].scale >= exhaustive / 1.0
    card = rel.card()
    assert card["row_level"]["same_as_guarantee"] and card["row_level"]["epsilon"] == rel.guarantee.epsilon


@pytest.mark.parametrize("relation", ["element", "row"])
def test_jl_laplace_paper_modes_report_their_row_level_equivalent(relation):
    d, k, seed, eps = 8, 4, 5, 1.0
    rng = np.random.default_rng(0)
    X, y = rng.uniform(0, 1, size=(300, d)), rng.integers(0, 2, 300)
    kw = {"row_bound": 1.0} if relation == "row" else {}
    rel = JLLaplace(epsilon=eps, n_components=k, relation=relation, rescale=False, bounds=(0, 1),
                    classes=[0, 1], random_state=seed, **kw).release(X, y)
    P = probe_projection(JLLaplace, seed, d, n_components=k, relation=relation, **kw)
    c_box = np.abs(box_vertices(d) @ P).sum(axis=1).max()
    rec = rel.noise[0]
    eps_labels = rel.details["epsilon_labels"]
    # the grid Laplace mechanism of scale b is ((c + k g) / b)-DP for a query of L1 sensitivity c
    expected = (c_box + k * rec.grid) / rec.scale + eps_labels
    row = rel.row_guarantee()
    assert row is not None and row.neighbouring == "replace-one" and row.kind == "pure"
    assert row.epsilon == pytest.approx(expected, rel=1e-12)
    assert row.epsilon > rel.guarantee.epsilon  # the paper's unit is the weaker one here
    card = json.loads(rel.card_json())
    assert card["guarantee"]["neighbouring"] != "replace-one"
    assert card["row_level"]["epsilon"] == pytest.approx(expected, rel=1e-12)
    assert not card["row_level"]["same_as_guarantee"]
    # the ledger counts the release in the row-level unit
    entry = LedgerEntry.from_card(card)
    assert entry.neighbouring == "replace-one" and entry.epsilon == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------------------------------- DPPro
def test_dppro_default_is_row_level_and_splits_the_budget_with_labels():
    d, k, seed = 8, 3, 2
    rng = np.random.default_rng(1)
    X, y = rng.uniform(0, 1, size=(400, d)), rng.integers(0, 2, 400)
    rel = DPPro(epsilon=1.0, delta=1e-6, n_components=k, rescale=False, bounds=(0, 1), classes=[0, 1],
                random_state=seed).release(X, y)
    R = rel.transform_arrays["R"]
    exhaustive = np.linalg.norm(box_vertices(d) @ R, axis=1).max()
    assert rel.noise[0].sensitivity == pytest.approx(exhaustive, rel=1e-9)
    assert rel.guarantee.neighbouring == "replace-one"
    eps_f, eps_l = rel.details["epsilon_features"], rel.details["epsilon_labels"]
    assert eps_f + eps_l == pytest.approx(1.0) and eps_l == pytest.approx(0.5)
    assert rel.guarantee.epsilon == pytest.approx(1.0) and rel.guarantee.delta == pytest.approx(1e-6)
    # the features' sigma buys at most eps_f at the box sensitivity
    assert gaussian_epsilon(rel.noise[0].scale, exhaustive, 1e-6) <= eps_f * (1 + 1e-9)


def test_dppro_element_epsilon_one_is_tens_of_epsilons_per_row():
    # issue 13: the paper's per-attribute epsilon = 1 on a ~100-column table is epsilon 20-56 per row
    rng = np.random.default_rng(0)
    d = 105
    X = (rng.uniform(0, 1, size=(2000, d)) < 0.2).astype(float)
    rel = DPPro(epsilon=1.0, delta=1e-5, relation="element", bounds=(0, 1), random_state=4).release(X)
    row = rel.row_guarantee()
    assert rel.guarantee.epsilon == pytest.approx(1.0) and rel.guarantee.neighbouring == "element"
    assert row is not None and row.neighbouring == "replace-one"
    R = rel.transform_arrays["R"]
    s2_box = rel.details["row_level_sensitivity"]
    assert s2_box <= float(np.linalg.norm(R, 2)) * math.sqrt(d) * (1 + 1e-12)
    assert 10.0 < row.epsilon < 100.0
    assert row.epsilon == pytest.approx(gaussian_epsilon(rel.noise[0].scale, s2_box, row.delta), rel=1e-3)


# ------------------------------------------------------------------------- every card
def _small_dataset() -> Dataset:
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(120, 6))
    return Dataset(X=X, y=(X[:, 0] > 0.5).astype(int), feature_names=[f"f{i}" for i in range(6)],
                   label_name="label", task="classification", bounds=np.tile([0.0, 1.0], (6, 1)),
                   bounds_source="metadata", classes=np.array([0, 1]), classes_source="metadata")


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_every_card_states_the_row_level_guarantee(name):
    ds = _small_dataset()
    cls = get_mechanism(name)
    kw = {}
    if "public_data" in cls.extra_args:
        kw["public_data"] = np.random.default_rng(9).uniform(0, 1, (40, 6))
    params = {"epsilon": 2.0}
    if any(p.name == "n_components" for p in cls.params):
        params["n_components"] = 2
    rel = cls(**params, random_state=0, **kw).release(ds)
    card = json.loads(rel.card_json())
    row = card["row_level"]
    assert set(row) >= {"epsilon", "delta", "neighbouring", "kind", "holds", "same_as_guarantee", "text"}
    assert row["neighbouring"] == "replace-one"
    # at the defaults every mechanism is calibrated in the row-level unit
    assert row["same_as_guarantee"] and row["epsilon"] == card["guarantee"]["epsilon"], name
    assert LedgerEntry.from_card(card).neighbouring == "replace-one"


def test_within_class_mode_has_no_row_level_guarantee():
    rel = RONGauss(epsilon=1.0, n_components=2, label_privacy="within-class",
                   random_state=0).release(_small_dataset())
    card = json.loads(rel.card_json())
    assert rel.row_guarantee() is None
    assert card["row_level"]["epsilon"] == "inf" and card["row_level"]["holds"] is False
    assert "label" in card["row_level"]["text"]
    entry = LedgerEntry.from_card(card)  # no row-level epsilon: booked as unbounded, row level
    assert entry.neighbouring == "replace-one" and math.isinf(entry.epsilon)


def test_utility_sweep_records_the_row_level_epsilon():
    ds = _small_dataset()
    df = utility_sweep(lambda e: JLLaplace(epsilon=e, n_components=2, relation="element"), ds,
                       [1.0], trials=1, task="unsupervised")
    assert (df["epsilon_row"] > 1.0).all()
    df = utility_sweep(lambda e: JLLaplace(epsilon=e, n_components=2), ds, [1.0], trials=1,
                       task="unsupervised")
    assert np.allclose(df["epsilon_row"], 1.0)
