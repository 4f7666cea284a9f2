"""The persistent ledger store (dpcore.ledger_store, SQLite): a budget set once per dataset and
raised only by a logged action, every release at its row-level epsilon, JSON export / import,
the CLI's ``--ledger STORE`` and ``dpcore ledger``, and real processes racing on one budget."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dpcore.cli import main
from dpcore.exceptions import DataValidationError
from dpcore.ledger import BudgetExceededError, Ledger, LedgerEntry
from dpcore.ledger_store import (
    BudgetConflictError,
    LedgerStore,
    UnregisteredDatasetError,
    dataset_key,
)

ROOT = Path(__file__).resolve().parents[1]


def _entry(eps: float, tag: str = "") -> LedgerEntry:
    return LedgerEntry("local-gaussian", eps, 0.0, "replace-one", "t", sha256=tag)


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def test_a_budget_is_set_once_and_raised_only_by_a_logged_action(tmp_path):
    store = LedgerStore(tmp_path / "s.sqlite")
    assert store.dataset("bundled:x") is None
    with pytest.raises(UnregisteredDatasetError):
        store.charge("bundled:x", _entry(0.5))
    rec = store.register("bundled:x", 1.0, label="x", by="alice")
    assert (rec.budget, rec.delta_budget, rec.registered_by) == (1.0, None, "alice")
    assert store.register("bundled:x", 1.0) == rec  # the same budget again: nothing changes
    with pytest.raises(BudgetConflictError, match="set once"):
        store.register("bundled:x", 5.0)
    with pytest.raises(BudgetConflictError):
        store.charge("bundled:x", _entry(0.1), budget=5.0)  # a charge cannot change it either
    store.charge("bundled:x", _entry(0.75))
    with pytest.raises(BudgetExceededError, match="over the budget 1"):
        store.charge("bundled:x", _entry(0.5))
    with pytest.raises(ValueError, match="reason"):
        store.raise_budget("bundled:x", 2.0, reason=" ")
    with pytest.raises(ValueError, match="only be raised"):
        store.raise_budget("bundled:x", 0.5, reason="lower")
    store.raise_budget("bundled:x", 2.0, reason="board decision", by="bob")
    store.charge("bundled:x", _entry(0.5))
    log = store.budget_log("bundled:x")
    assert [(c.action, c.budget, c.previous_budget, c.by, c.reason) for c in log] == [
        ("register", 1.0, None, "alice", ""), ("raise", 2.0, 1.0, "bob", "board decision")]
    assert store.ledger("bundled:x").total_epsilon == 1.25
    # another object, another connection (a new process, a server restart): the same state
    again = LedgerStore(tmp_path / "s.sqlite")
    assert again.ledger("bundled:x").entries == store.ledger("bundled:x").entries
    assert again.dataset("bundled:x").budget == 2.0


def test_unbounded_entries_are_stored_as_infinity_and_spend_the_budget(tmp_path):
    store = LedgerStore(tmp_path / "s.sqlite")
    store.register("k", 3.0)
    with pytest.raises(BudgetExceededError, match="opt-in"):
        store.charge("k", _entry(math.inf))
    assert store.ledger("k").entries == []  # nothing recorded
    store.charge("k", _entry(math.inf), allow_unbounded=True)
    assert math.isinf(store.ledger("k").total_epsilon)
    with pytest.raises(BudgetExceededError):
        store.charge("k", _entry(0.01))
    exported = store.export_dict("k")
    assert exported["entries"][0]["epsilon"] == "inf" and exported["dataset_key"] == "k"


def test_a_transaction_that_is_left_records_nothing_and_a_revert_takes_the_entry_back(tmp_path):
    store = LedgerStore(tmp_path / "s.sqlite")
    with store.transaction("new", budget=1.0) as tx:
        tx.check(_entry(0.4))
    assert store.dataset("new") is None  # the registration went with it
    with store.transaction("new", budget=1.0) as tx:
        tx.check(_entry(0.4))
        tx.commit()
        tx.revert()
    assert store.ledger("new").entries == [] and store.dataset("new").budget == 1.0


def test_a_failed_write_records_nothing_and_is_an_os_error(tmp_path, monkeypatch):
    from dpcore import ledger_store

    store = LedgerStore(tmp_path / "s.sqlite")
    store.register("k", 1.0)

    def full_disk(*args):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(ledger_store, "_insert_entry", full_disk)
    with pytest.raises(OSError, match="could not record the release: database or disk is full"):
        store.charge("k", _entry(0.5))
    monkeypatch.undo()
    assert store.ledger("k").entries == [] and store.dataset("k").budget == 1.0
    store.charge("k", _entry(0.5))  # the store is usable afterwards (no lock left)
    assert len(store.ledger("k").entries) == 1


def test_json_export_and_import_round_trip(tmp_path):
    store = LedgerStore(tmp_path / "s.sqlite")
    store.register("k", 4.0, 1e-5)
    store.charge("k", _entry(1.0, "a"))
    (tmp_path / "L.json").write_text(json.dumps(store.export_dict("k")))
    ledger = Ledger.load(tmp_path / "L.json")  # a JSON ledger reader reads the export
    assert ledger.budget == 4.0 and ledger.delta_budget == 1e-5 and len(ledger.entries) == 1
    other = LedgerStore(tmp_path / "t.sqlite")
    assert other.import_ledger("k", ledger) == 1
    assert other.import_ledger("k", ledger) == 0  # the same releases are not added twice
    assert other.dataset("k").budget == 4.0
    with pytest.raises(UnregisteredDatasetError):
        other.import_ledger("j", Ledger([_entry(1.0)]))  # no budget anywhere: cannot register


def test_a_store_with_two_names_a_link_or_other_content_is_refused(tmp_path):
    LedgerStore(tmp_path / "s.sqlite").register("k", 1.0)
    os.link(tmp_path / "s.sqlite", tmp_path / "t.sqlite")
    with pytest.raises(DataValidationError, match="2 names"):
        LedgerStore(tmp_path / "t.sqlite")
    os.unlink(tmp_path / "t.sqlite")
    os.symlink(tmp_path / "s.sqlite", tmp_path / "u.sqlite")
    with pytest.raises(DataValidationError, match="symbolic link"):
        LedgerStore(tmp_path / "u.sqlite")
    (tmp_path / "v.sqlite").write_text("not a database at all, just text " * 40)
    with pytest.raises(DataValidationError, match="not a dpcore ledger store"):
        LedgerStore(tmp_path / "v.sqlite")
    con = sqlite3.connect(tmp_path / "w.sqlite")
    con.execute("CREATE TABLE other (x)")
    con.close()
    with pytest.raises(DataValidationError, match="not a dpcore ledger store"):
        LedgerStore(tmp_path / "w.sqlite")
    with pytest.raises(DataValidationError, match="does not exist"):
        LedgerStore(tmp_path / "missing" / "s.sqlite")


def test_dataset_keys(tmp_path):
    (tmp_path / "a.csv").write_bytes(b"x\n1\n")
    (tmp_path / "b.csv").write_bytes(b"x\n1\n")
    assert dataset_key(tmp_path / "a.csv") == dataset_key(b"x\n1\n") == dataset_key(tmp_path / "b.csv")
    assert dataset_key("digits") == "bundled:digits"
    assert dataset_key("sha256:abc") == "sha256:abc"
    folder = dataset_key(tmp_path)
    assert folder.startswith("files:") and folder == dataset_key(str(tmp_path))
    (tmp_path / "b.csv").write_bytes(b"x\n2\n")
    assert dataset_key(tmp_path) != folder
    with pytest.raises(DataValidationError):
        dataset_key(tmp_path / "nothing-*.csv")


def test_cli_release_with_a_store_and_the_ledger_commands(tmp_path, capsys):
    store = str(tmp_path / "s.sqlite")
    base = ["release", "local-gaussian", "breast-cancer", "--epsilon", "0.5", "--delta", "1e-6",
            "--ledger", store]
    code, text = _cli(capsys, *base, "-o", str(tmp_path / "r0.csv"))
    assert code == 2 and "give --budget EPS to register it" in text
    assert not Path(store).exists() and not (tmp_path / "r0.csv").exists()  # nothing written
    assert _cli(capsys, *base, "-o", str(tmp_path / "r1.csv"), "--budget", "1")[0] == 0
    code, text = _cli(capsys, *base, "-o", str(tmp_path / "r2.csv"), "--budget", "3")
    assert code == 2 and "set once" in text and not (tmp_path / "r2.csv").exists()
    assert _cli(capsys, *base, "-o", str(tmp_path / "r2.csv"))[0] == 0
    code, text = _cli(capsys, *base, "-o", str(tmp_path / "r3.csv"))
    assert code == 2 and "over the budget 1" in text
    code, text = _cli(capsys, "ledger", "raise-budget", store, "breast-cancer", "--budget", "1.5",
                      "--reason", "a third release approved")
    assert code == 0 and "raised" in text
    assert _cli(capsys, *base, "-o", str(tmp_path / "r3.csv"))[0] == 0
    code, text = _cli(capsys, "ledger", "show", store)
    assert code == 0 and "bundled:breast-cancer" in text and "replace-one 1.5" in text
    code, text = _cli(capsys, "ledger", "show", store, "breast-cancer")
    assert "a third release approved" in text and text.count("local-gaussian") == 3
    code, text = _cli(capsys, "ledger", "export", store, "breast-cancer", "-o", str(tmp_path / "L.json"))
    assert code == 0
    saved = Ledger.load(tmp_path / "L.json")
    cards = [json.loads((tmp_path / f"r{i}.card.json").read_text()) for i in (1, 2, 3)]
    assert [e.sha256 for e in saved.entries] == [c["sha256"] for c in cards]
    # the exported file continues as a JSON ledger with the CLI, and imports into another store
    code, text = _cli(capsys, "ledger", "import", str(tmp_path / "t.sqlite"), "breast-cancer",
                      str(tmp_path / "L.json"))
    assert code == 0 and "3 release(s) added" in text
    code, text = _cli(capsys, "ledger", "raise-budget", store, "breast-cancer", "--budget", "1",
                      "--reason", "x")
    assert code == 2 and "only be raised" in text


@pytest.mark.slow
def test_four_cli_processes_racing_on_a_store_never_overrun_its_budget(tmp_path):
    store = tmp_path / "s.sqlite"
    LedgerStore(store).register(dataset_key("breast-cancer"), 2.5)
    procs = [subprocess.Popen(
        [sys.executable, "-m", "dpcore.cli", "release", "local-gaussian", "breast-cancer", "--epsilon", "1",
         "--delta", "1e-6", "-o", str(tmp_path / f"r{i}.csv"), "--ledger", str(store)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in range(4)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for p in procs:
        p.stderr.close()
    assert sorted(code for code, _ in results) == [0, 0, 2, 2], results
    ledger = LedgerStore(store).ledger(dataset_key("breast-cancer"))
    assert ledger.total_epsilon == 2.0
    # the ledger records exactly the releases on disk
    published = sorted(json.loads(p.read_text())["sha256"] for p in tmp_path.glob("r*.card.json"))
    assert sorted(e.sha256 for e in ledger.entries) == published
