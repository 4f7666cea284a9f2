"""Four edge cases where a card printed a finite epsilon and the truth was epsilon = infinity, and
the ledger's identity rules (each test fails on the code before these fixes):

- ``missing="drop"``: n depends on the data, so the guarantee does not hold (``holds: false``),
  and the front ends refuse it;
- the ledger books every release at its row-level epsilon: infinity for within-class releases
  and for releases whose guarantee does not hold, admitted only with an explicit opt-in;
- no presence check once the class list is public;
- randomized response compares a uniform integer with an exact threshold;
- a ledger file with two names (hard links) is one ledger: refused, never two budgets;
- a release that fails while claiming its output leaves no marker behind.
"""

from __future__ import annotations

import errno
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcore.cli import main
from dpcore.data import load_dataset
from dpcore.exceptions import DataValidationError, PrivacyLeakWarning
from dpcore.ledger import BudgetExceededError, Ledger, LedgerEntry, ledger_transaction
from dpcore.mechanisms import MECHANISMS, get_mechanism
from dpcore.mechanisms._labels import randomized_response

ROOT = Path(__file__).resolve().parents[1]


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


# ------------------------------------------------------------------ 1. missing="drop"
def _table_with_a_missing_value(path: Path) -> Path:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.uniform(0, 1, (50, 3)), columns=["a", "b", "c"])
    frame.loc[7, "b"] = np.nan
    frame.to_csv(path, index=False)
    return path


def test_dropping_rows_voids_the_guarantee(tmp_path):
    path = _table_with_a_missing_value(tmp_path / "t.csv")
    ds = load_dataset(path, bounds={c: (0, 1) for c in "abc"}, missing="drop")
    assert ds.n_samples == 49  # one changed row (a value made missing) changes n
    release = get_mechanism("local-gaussian")(epsilon=1.0, delta=1e-6).release(ds)
    assert release.guarantee.holds is False
    card = release.card()
    assert card["guarantee"]["holds"] is False and card["differentially_private"] is False
    assert card["warnings"][0].startswith("NOT differentially private")
    assert math.isinf(LedgerEntry.from_card(card).epsilon)
    # imputing keeps n public and the guarantee holds
    kept = load_dataset(path, bounds={c: (0, 1) for c in "abc"}, missing="impute")
    assert get_mechanism("local-gaussian")(epsilon=1.0, delta=1e-6).release(kept).guarantee.holds


@pytest.mark.parametrize("flag", [["--missing", "drop"], ["--drop-nonfinite"]])
@pytest.mark.parametrize("engine", ["memory", "dask"])
def test_cli_refuses_drop_with_nothing_written(tmp_path, capsys, flag, engine):
    path = _table_with_a_missing_value(tmp_path / "t.csv")
    (tmp_path / "b.json").write_text(json.dumps({c: [0, 1] for c in "abc"}))
    before = sorted(tmp_path.iterdir())
    code, text = _cli(capsys, "release", "local-gaussian", str(path), "-o", str(tmp_path / "out.csv"),
                      "--epsilon", "1", "--delta", "1e-6", "--bounds", str(tmp_path / "b.json"), "--engine",
                      engine, *flag)
    assert code == 2 and "--missing drop is refused" in text and "Traceback" not in text
    assert sorted(tmp_path.iterdir()) == before


# ------------------------------------------------------------------ 2. row-level booking
def _toy(classes_public: bool = True):
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(rng.uniform(0, 1, (120, 3)), columns=["a", "b", "c"])
    frame["y"] = np.arange(120) % 2
    return load_dataset(frame, label="y", task="classification", classes=[0, 1] if classes_public else None,
                        bounds={c: (0, 1) for c in "abc"})


def test_a_within_class_release_is_booked_as_unbounded():
    mech = get_mechanism("ron-gauss")(epsilon=1.0, delta=1e-6, label_privacy="within-class")
    release = mech.release(_toy())
    assert release.guarantee.neighbouring == "replace-one-within-class"
    entry = LedgerEntry.from_card(release.card(), "toy")
    assert math.isinf(entry.epsilon) and entry.neighbouring == "replace-one"
    assert LedgerEntry.from_release(release, "toy") == LedgerEntry(
        entry.mechanism, math.inf, entry.delta, "replace-one", "toy", release.created_utc, "")


def test_a_release_whose_guarantee_does_not_hold_is_booked_as_unbounded():
    with pytest.warns(PrivacyLeakWarning):
        ds = _toy(classes_public=False)
    release = get_mechanism("local-gaussian")(epsilon=0.5, delta=1e-6).release(ds)
    assert release.guarantee.holds is False and release.guarantee.epsilon == 0.5
    assert math.isinf(LedgerEntry.from_card(release.card()).epsilon)


def test_unbounded_entries_need_the_opt_in_and_a_budget_not_yet_spent(tmp_path):
    ledger = Ledger(budget=2.0)
    unbounded = LedgerEntry("local-gaussian", math.inf, 0.0)
    assert "opt-in" in ledger.refusal(unbounded)
    assert ledger.refusal(unbounded, allow_unbounded=True) is None
    ledger.add(unbounded)
    assert math.isinf(ledger.total_epsilon)
    # nothing fits after it, not even another opted-in unbounded release
    assert ledger.refusal(LedgerEntry("x", 1e-9, 0.0)) is not None
    assert "already spent" in ledger.refusal(unbounded, allow_unbounded=True)
    # the file says "inf" (JSON has no infinity) and reads back
    ledger.save(tmp_path / "L.json")
    raw = json.loads((tmp_path / "L.json").read_text())
    assert raw["entries"][0]["epsilon"] == "inf" and raw["total_epsilon"] == "inf"
    assert math.isinf(Ledger.load(tmp_path / "L.json").entries[0].epsilon)
    # a spent budget refuses the opt-in too
    full = Ledger([LedgerEntry("x", 2.0, 0.0)], budget=2.0)
    assert full.refusal(unbounded, allow_unbounded=True) is not None
    # sums past the largest float are infinite, never an OverflowError
    assert math.isinf(Ledger([LedgerEntry("x", 1e308, 0.0)] * 2).total_epsilon)


def test_cli_books_a_data_bounds_release_as_unbounded(tmp_path, capsys):
    rng = np.random.default_rng(2)
    pd.DataFrame(rng.uniform(0, 5, (40, 2)), columns=["a", "b"]).to_csv(tmp_path / "t.csv", index=False)
    ledger = tmp_path / "L.json"
    base = ["release", "local-gaussian", str(tmp_path / "t.csv"), "--epsilon", "0.5", "--delta", "1e-6",
            "--ledger", str(ledger), "--budget", "3"]
    code, text = _cli(capsys, *base, "-o", str(tmp_path / "r1.csv"), "--data-bounds")
    assert code == 0, text
    assert "NOT differentially private" in text
    saved = Ledger.load(ledger)
    assert [e.epsilon for e in saved.entries] == [math.inf]
    card = json.loads((tmp_path / "r1.card.json").read_text())
    assert card["differentially_private"] is False
    # the budget is spent: a proper release is refused now
    (tmp_path / "b.json").write_text(json.dumps({"a": [0, 5], "b": [0, 5]}))
    code, text = _cli(capsys, *base, "-o", str(tmp_path / "r2.csv"), "--bounds", str(tmp_path / "b.json"))
    assert code == 2 and "over the budget" in text and not (tmp_path / "r2.csv").exists()


# ------------------------------------------------------------------ 3. no presence check
@pytest.mark.parametrize("name", sorted(set(MECHANISMS) - {"pca-identity"}))
def test_a_one_class_table_is_released_like_its_neighbour(name):
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, (80, 3))
    cls = MECHANISMS[name]
    kwargs = {"epsilon": 1.0}
    if any(p.name == "delta" for p in cls.params):
        kwargs["delta"] = 1e-6
    shapes = []
    for y in (np.zeros(80, dtype=int), np.r_[np.zeros(79, dtype=int), 1]):  # neighbours
        frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(y=y)
        ds = load_dataset(frame, label="y", task="classification", classes=[0, 1],
                          bounds={c: (0, 1) for c in "abc"})
        release = get_mechanism(name)(**kwargs).release(ds)
        assert release.guarantee.holds
        shapes.append((np.shape(release.data), list(release.columns)))
    assert shapes[0] == shapes[1]


def test_cli_releases_a_one_class_file_with_a_public_class_list(tmp_path, capsys):
    frame = pd.DataFrame({"a": np.linspace(0, 1, 30), "b": np.linspace(1, 0, 30), "y": ["no"] * 30})
    frame.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "b.json").write_text(json.dumps({"a": [0, 1], "b": [0, 1]}))
    code, text = _cli(capsys, "release", "identity-laplace", str(tmp_path / "t.csv"), "-o",
                      str(tmp_path / "r.csv"), "--label", "y", "--task", "classification", "--classes",
                      "no,yes", "--bounds", str(tmp_path / "b.json"), "--epsilon", "1")
    assert code == 0, text
    # a class list read from the data still needs two classes present
    with pytest.raises(DataValidationError, match="single class"), pytest.warns(PrivacyLeakWarning):
        load_dataset(frame, label="y", task="classification")


# ------------------------------------------------------------------ 4. randomized response exact
class _TopBits:
    """Every word all ones: the largest uniform integer (and the largest float below 1)."""

    def words(self, n: int) -> np.ndarray:
        return np.full(n, np.uint64(2**64 - 1), dtype=np.uint64)


@pytest.mark.parametrize("epsilon", [37.5, 40.0, 300.0])
def test_randomized_response_still_flips_where_the_float_keep_probability_is_one(epsilon):
    assert 1.0 / (1.0 + math.exp(-epsilon)) == 1.0  # the old float comparison could never flip
    y = np.zeros(4, dtype=int)
    # the largest uniform integer is above the exact threshold: the label is flipped
    assert randomized_response(y, 2, epsilon, _TopBits()).tolist() == [1, 1, 1, 1]
    from dpcore.mechanisms._labels import RR_BITS, keep_threshold

    t = keep_threshold(epsilon, 2)
    assert 0 < 2**RR_BITS - t  # the flip probability never rounds to 0


@pytest.mark.parametrize(("epsilon", "k"), [(0.1, 2), (1.0, 2), (1.0, 10), (5.0, 3), (20.0, 7)])
def test_the_exact_threshold_never_exceeds_the_stated_epsilon(epsilon, k):
    from decimal import Decimal, localcontext

    from dpcore.mechanisms._labels import RR_BITS, keep_threshold

    t = keep_threshold(epsilon, k)
    with localcontext() as ctx:
        ctx.prec = 100
        q = Decimal(t) / Decimal(2**RR_BITS)
        ratio = q * (k - 1) / (1 - q)  # likelihood ratio of the realised mechanism
        assert ratio <= Decimal(epsilon).exp()
        # and it is not loose: the keep probability is within 2^-62 of e^eps / (e^eps + K - 1)
        p = 1 / (1 + (k - 1) * (-Decimal(epsilon)).exp())
        assert Decimal(0) <= p - q <= Decimal(2) ** -62


# ------------------------------------------------------------------ ledger identity (two names)
def test_a_hard_linked_ledger_is_refused_by_every_name(tmp_path):
    ledger = tmp_path / "L.json"
    Ledger(budget=1.0).save(ledger)
    os.link(ledger, tmp_path / "L2.json")
    for name in ("L.json", "L2.json"):
        with pytest.raises(DataValidationError, match="2 names"):
            Ledger.load(tmp_path / name)
        with pytest.raises(DataValidationError, match="hard links"), \
                ledger_transaction(tmp_path / name):
            pass


@pytest.mark.slow
def test_four_concurrent_releases_on_a_hard_linked_ledger_never_overrun_its_budget(tmp_path):
    ledger = tmp_path / "L.json"
    Ledger(budget=1.0).save(ledger)
    os.link(ledger, tmp_path / "L2.json")
    procs = [subprocess.Popen(
        [sys.executable, "-m", "dpcore.cli", "release", "local-gaussian", "breast-cancer", "--epsilon", "1",
         "--delta", "1e-6", "-o", str(tmp_path / f"r{i}.csv"), "--ledger",
         str(tmp_path / ("L.json" if i % 2 else "L2.json"))],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    admitted = [i for i, (code, _) in enumerate(results) if code == 0]
    assert not admitted, results  # both names refused: never two copies of one budget
    assert all("hard links" in err and err.count("\n") == 1 for _, err in results)
    assert not list(tmp_path.glob("r*.csv"))


def test_a_failed_claim_leaves_no_output_marker(tmp_path, monkeypatch):
    def full_disk(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full_disk)
    release = get_mechanism("local-gaussian")(epsilon=1.0, delta=1e-6, bounds=(0, 1)).release(
        np.random.default_rng(0).uniform(0, 1, (20, 2)))
    with pytest.raises(OSError, match="No space"):
        release.save(tmp_path / "out.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_budget_errors_say_nothing_was_written():
    ledger = Ledger([LedgerEntry("x", 1.0, 0.0)], budget=1.0)
    with pytest.raises(BudgetExceededError, match="nothing was written"):
        ledger.check(LedgerEntry("x", 0.5, 0.0))
