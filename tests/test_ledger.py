"""Tests of dpcore.ledger: basic-composition totals, budget checks and the ledger file."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from dpcore.exceptions import DataValidationError
from dpcore.ledger import Ledger, LedgerEntry
from dpcore.mechanisms import LocalGaussian


def _entries(eps_list, delta_list=None):
    delta_list = delta_list or [0.0] * len(eps_list)
    return [LedgerEntry(mechanism="local-gaussian", epsilon=e, delta=d, dataset="digits", sha256=f"{i:064x}")
            for i, (e, d) in enumerate(zip(eps_list, delta_list, strict=True))]


def test_totals_are_basic_composition():
    rng = np.random.default_rng(0)
    eps = [float(v) for v in rng.uniform(0.01, 3, 25)] + [0.1, 0.2]
    dl = [float(v) for v in rng.uniform(0, 1e-6, 27)]
    ledger = Ledger(_entries(eps, dl))
    # correctly rounded sums of the exact (rational) totals
    assert ledger.total_epsilon == float(sum(map(Fraction, eps)))
    assert ledger.total_delta == float(sum(map(Fraction, dl)))
    assert Ledger().total_epsilon == 0 and Ledger().total_delta == 0


def test_add_increases_totals():
    ledger = Ledger()
    for e in (0.5, 0.25, 1.0):
        before = ledger.total_epsilon
        ledger.add(_entries([e], [1e-7])[0])
        assert ledger.total_epsilon == pytest.approx(before + e)
    assert len(ledger.entries) == 3
    assert ledger.total_delta == pytest.approx(3e-7)


def test_would_exceed_budget():
    ledger = Ledger(_entries([0.5, 0.25]))
    assert not ledger.would_exceed(100.0, None)  # no budget: never refused
    assert not ledger.would_exceed(0.25, 1.0)  # exactly reaching the budget is allowed
    assert not ledger.would_exceed(0.2, 1.0)
    assert ledger.would_exceed(0.2500001, 1.0)
    assert ledger.would_exceed(2.0, 1.0)
    # 0.1 + 0.2 + 0.7: float round-off must not refuse a release that meets the budget exactly
    assert not Ledger(_entries([0.1, 0.2])).would_exceed(0.7, 1.0)


def test_would_exceed_delta_budget():
    ledger = Ledger(_entries([0.1], [4e-6]))
    assert not ledger.would_exceed(0.1, None, delta=1e-6, delta_budget=5e-6)
    assert ledger.would_exceed(0.1, None, delta=2e-6, delta_budget=5e-6)
    assert ledger.would_exceed(0.1, 10.0, delta=2e-6, delta_budget=5e-6)
    assert ledger.would_exceed(20.0, 10.0, delta=0.0, delta_budget=5e-6)


def test_save_load_round_trip(tmp_path):
    ledger = Ledger(_entries([0.5, 1.25, 0.3], [1e-6, 0.0, 1e-8]))
    path = tmp_path / "ledger.json"
    ledger.save(path)
    raw = json.loads(path.read_text())
    assert raw["composition"] == "basic"
    assert raw["total_epsilon"] == ledger.total_epsilon
    assert raw["total_delta"] == ledger.total_delta
    back = Ledger.load(path)
    assert back.entries == ledger.entries
    assert back.total_epsilon == ledger.total_epsilon


def test_missing_file_is_an_empty_ledger(tmp_path):
    ledger = Ledger.load(tmp_path / "nope.json")
    assert ledger.entries == [] and ledger.total_epsilon == 0


@pytest.mark.parametrize(
    "content",
    ["", "{not json", "[]", '{"total_epsilon": 1}', '{"entries": "abc"}', '{"entries": [1, 2]}',
     '{"entries": [{"epsilon": 1.0}]}',
     '{"entries": [{"mechanism": "x", "epsilon": 1, "delta": 0, "z": 1}]}'],
)
def test_corrupted_file_raises(tmp_path, content):
    path = tmp_path / "ledger.json"
    path.write_text(content)
    with pytest.raises(DataValidationError, match="not a dpcore ledger"):
        Ledger.load(path)


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe\x00\x01binary",
     b'{"entries": [{"mechanism": "x", "epsilon": NaN, "delta": 0}]}',
     b'{"entries": [{"mechanism": "x", "epsilon": -5.0, "delta": 0}]}',
     b'{"entries": [{"mechanism": "x", "epsilon": "abc", "delta": 0}]}',
     b'{"entries": [{"mechanism": "x", "epsilon": 1.0, "delta": -1e-3}]}'],
    ids=["binary", "nan", "negative", "string", "negative-delta"],
)
def test_semantically_invalid_file_raises(tmp_path, content):
    path = tmp_path / "ledger.json"
    path.write_bytes(content)
    with pytest.raises(DataValidationError):
        Ledger.load(path)


def test_entry_from_card():
    rel = LocalGaussian(epsilon=0.8, delta=1e-6, bounds=(0, 1)).release(
        np.random.default_rng(0).uniform(0, 1, (20, 3)))
    card = rel.card()
    entry = LedgerEntry.from_card(card, "toy")
    assert entry.mechanism == "local-gaussian"
    assert (entry.epsilon, entry.delta) == (0.8, 1e-6)
    assert entry.neighbouring == "replace-one"
    assert entry.sha256 == card["sha256"] and entry.created_utc == card["created_utc"]
    assert entry.dataset == "toy"


def test_summary_mentions_totals_and_mixed_relations():
    ledger = Ledger(_entries([0.5, 0.25]))
    text = ledger.summary()
    assert "2 release(s)" in text and "basic composition" in text
    assert f"{0.75:.4g}" in text
    assert "different neighbouring relations" not in text
    ledger.add(LedgerEntry(mechanism="jl-laplace", epsilon=1.0, delta=0.0, neighbouring="element"))
    assert "different neighbouring relations" in ledger.summary()
    assert math.isclose(ledger.total_epsilon, 1.75)
