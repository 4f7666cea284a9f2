"""Noise plans from public facts (dpcore.planning; CLI ``calibrate`` / ``epsilon`` for every mechanism).

The plan must be the release's own noise: for every mechanism and task, the records of a plan built
from a table's public facts equal, statistic by statistic, the records of a real release of that
table drawn with the same public seed. A scale that read a private value would differ here.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from dpcore.cli import main
from dpcore.data import load_dataset
from dpcore.mechanisms import MECHANISMS, get_mechanism
from dpcore.planning import PLACEHOLDER_SEED, epsilon_for_scale, noise_plan, placeholder_like

DATASETS = {"classification": "breast-cancer", "regression": "diabetes", "unsupervised": "breast-cancer"}


def _data(task: str):
    if task == "unsupervised":
        return replace(load_dataset(DATASETS[task]), task="unsupervised", y=None, classes=None)
    ds = load_dataset(DATASETS[task])
    if task == "regression" and ds.label_bounds is None:
        lo, hi = float(ds.y.min()), float(ds.y.max())
        ds = load_dataset(DATASETS[task], label_bounds=(lo, hi))
    return ds


CASES = [(name, task, delta) for name, cls in MECHANISMS.items() if name != "pca-identity"
         for task in cls.tasks
         for delta in ((None, 1e-6) if any(p.name == "delta" for p in cls.params) else (None,))]


def _records(noise):
    return [(r.statistic, r.distribution, r.norm, r.sensitivity, r.scale) for r in noise]


@pytest.mark.parametrize("name,task,delta", CASES)
def test_the_plan_is_the_releases_noise(name, task, delta):
    cls = get_mechanism(name)
    params = {"epsilon": 1.0} | ({} if delta is None else {"delta": delta})
    ds = _data(task)
    plan = noise_plan(name, params, like=ds)
    rel = cls(**params, random_state=PLACEHOLDER_SEED).release(ds)
    assert _records(plan.noise) == _records(rel.noise)
    assert plan.guarantee == rel.guarantee
    assert plan.facts["n"] == ds.n_samples and plan.facts["task"] == ds.task


@pytest.mark.slow
def test_the_placeholder_keeps_the_public_facts_and_no_private_value():
    ds = load_dataset("adult")
    ph = placeholder_like(ds)
    assert ph.feature_names == ds.feature_names and ph.onehot_groups == ds.onehot_groups
    assert np.array_equal(ph.bounds, ds.bounds) and list(ph.classes) == list(ds.classes)
    assert ph.X.shape == ds.X.shape and not np.shares_memory(ph.X, ds.X)
    assert np.all((ph.X >= ds.bounds[:, 0]) & (ph.X <= ds.bounds[:, 1]))
    assert np.mean(ph.X == ds.X) < 0.01  # nothing copied (a few bound-valued cells may coincide)
    # the plan does not change when every private value changes
    moved = load_dataset("adult")
    moved = placeholder_like(moved)  # another table with the same public facts
    assert _records(noise_plan("ron-gauss", {"epsilon": 1.0, "delta": 1e-6}, like=ds).noise) == \
        _records(noise_plan("ron-gauss", {"epsilon": 1.0, "delta": 1e-6}, like=moved).noise)


def test_matrix_dependent_scales_are_flagged_and_others_not():
    ds = _data("classification")
    assert noise_plan("dppro", {"epsilon": 1.0}, like=ds).varies  # row-level scale of the drawn R
    assert noise_plan("pca-gauss", {"epsilon": 1.0}, like=ds).varies == ()


@pytest.mark.parametrize("name,params,task", [
    ("pca-gauss", {"n_components": 3}, "unsupervised"),
    ("ron-gauss", {"delta": 1e-6, "n_components": 4}, "regression"),
    ("local-gaussian", {"delta": 1e-6}, "classification")])
def test_epsilon_for_scale_inverts_the_plan(name, params, task):
    facts = {"n": 2000, "n_features": 8, "task": task, "n_classes": 3}
    plan1 = noise_plan(name, {**params, "epsilon": 1.0}, **facts)
    rec = [r for r in plan1.noise if r.distribution in ("laplace", "gaussian")][-1]
    eps, plan = epsilon_for_scale(name, params, rec.statistic, rec.scale / 3, **facts)
    assert eps > 1.0
    assert math.isclose(plan.scale_of(rec.statistic), rec.scale / 3, rel_tol=1e-8)
    if plan1.guarantee.kind == "pure":  # Laplace: b = S1 / eps_share, so 3x less noise costs 3x the epsilon
        assert math.isclose(eps, 3.0, rel_tol=1e-6)


def test_epsilon_for_scale_errors():
    facts = {"n": 500, "n_features": 5}
    with pytest.raises(ValueError, match="positive"):
        epsilon_for_scale("pca-gauss", {}, "x", 0.0, **facts)
    with pytest.raises(ValueError, match="no noisy statistic named"):
        epsilon_for_scale("pca-gauss", {}, "nope", 0.1, **facts)
    with pytest.raises(ValueError, match="outside"):
        epsilon_for_scale("pca-gauss", {}, noise_plan("pca-gauss", {}, **facts).noise[0].statistic, 1e-30,
                          **facts)
    with pytest.raises(ValueError, match="task must be one of"):
        noise_plan("pca-gauss", {}, n=100, n_features=3, task="nonsense")
    with pytest.raises(ValueError, match="Laplace or Gaussian"):
        epsilon_for_scale("local-gaussian", {}, "class label of each row", 0.3, n=500, n_features=5,
                          task="classification")


def test_cli_calibrate_prints_the_cards_noise(capsys):
    assert main(["calibrate", "ron-gauss", "breast-cancer", "--epsilon", "1", "--delta", "1e-6"]) == 0
    out = capsys.readouterr().out
    ds = load_dataset("breast-cancer")
    rel = get_mechanism("ron-gauss")(epsilon=1.0, delta=1e-6, random_state=0).release(ds)
    assert "guarantee: approx epsilon = 1, delta = 1e-06" in out
    for rec in rel.noise:
        assert f"{rec.scale:12.6g}" in out and rec.statistic in out


def test_cli_epsilon_and_its_errors(capsys, tmp_path):
    assert main(["epsilon", "pca-gauss", "--n", "1000", "--features", "6", "--statistic", "1",
                 "--scale", "0.001", "--n-components", "3", "--noise", "laplace"]) == 0
    out = capsys.readouterr().out
    plan = noise_plan("pca-gauss", {"epsilon": 1.0, "n_components": 3, "noise": "laplace"}, n=1000,
                      n_features=6)
    s1 = plan.noise[0].sensitivity
    assert out.startswith(f"epsilon = {s1 / 0.001:.6g}")
    assert main(["calibrate", "ron-gauss"]) == 2
    assert "give INPUT" in capsys.readouterr().err
    assert main(["epsilon", "pca-gauss", "--n", "100", "--features", "4", "--statistic", "9",
                 "--scale", "1"]) == 2
    assert "statistics 1 to 1" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_cli_pca_identity_plan_uses_the_public_rows(capsys, tmp_path):
    ds = load_dataset("breast-cancer")
    pub = tmp_path / "pub.csv"
    pd.DataFrame(ds.X[:200], columns=ds.feature_names).to_csv(pub, index=False)
    assert main(["calibrate", "pca-identity", "breast-cancer", "--public-data", str(pub),
                 "--epsilon", "1"]) == 0
    assert "PCA coordinates" in capsys.readouterr().out
    assert main(["calibrate", "pca-identity", "--n", "100", "--features", "4"]) == 2
    assert "public_data" in capsys.readouterr().err
