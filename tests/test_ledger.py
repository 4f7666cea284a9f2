"""Tests of dpcore.ledger: basic-composition totals, budget checks and the ledger file; the locked
transaction under concurrent processes, SIGKILL at every step and failing writes; the CLI's output
refusals and signal handling."""

from __future__ import annotations

import errno
import hashlib
import json
import math
import multiprocessing
import os
import signal
import stat
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dpcore import ledger as ledger_mod
from dpcore import release as release_mod
from dpcore import staging
from dpcore.cli import main
from dpcore.exceptions import DataValidationError
from dpcore.ledger import (
    BudgetExceededError,
    Ledger,
    LedgerEntry,
    LedgerTransaction,
    check_budget,
    ledger_transaction,
    lock_path,
)
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
     '{"entries": [{"mechanism": "x", "epsilon": 1, "delta": 0, "z": 1}]}',
     '{"entries": ' + "[" * 5000],  # nested past the JSON parser's recursion limit
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
    text = ledger.summary()
    assert "different neighbouring relations" in text and "checked against the budget separately" in text
    assert "replace-one: epsilon = 0.75" in text and "element: epsilon = 1" in text
    assert math.isclose(ledger.total_epsilon, 1.75)


# ------------------------------------------------------------------------- per-relation totals
def _entry(eps: float, rel: str = "replace-one", delta: float = 0.0, tag: str = "") -> LedgerEntry:
    # a fixed time: two calls either side of a second boundary (a loaded machine) must stay equal
    return LedgerEntry(mechanism="m", epsilon=eps, delta=delta, neighbouring=rel,
                       created_utc="2026-01-01T00:00:00+00:00",
                       sha256=hashlib.sha256(f"{eps}{rel}{delta}{tag}".encode()).hexdigest())


def test_totals_are_kept_and_checked_per_relation():
    """No sum across relations: each relation's total meets the budget on its own."""
    ledger = Ledger([_entry(0.6), _entry(0.9, "element"), _entry(0.1, "replace-one", 1e-6)])
    totals = ledger.totals()
    assert set(totals) == {"replace-one", "element"}
    assert (totals["replace-one"].epsilon, totals["replace-one"].delta, totals["replace-one"].releases) \
        == (pytest.approx(0.7), 1e-6, 2)
    assert (totals["element"].epsilon, totals["element"].releases) == (0.9, 1)
    # budget 1: replace-one has 0.3 left, element 0.1, a fresh relation all of it
    assert not ledger.would_exceed(0.3, 1.0)
    assert ledger.would_exceed(0.31, 1.0)
    assert not ledger.would_exceed(0.1, 1.0, neighbouring="element")
    assert ledger.would_exceed(0.11, 1.0, neighbouring="element")
    assert not ledger.would_exceed(1.0, 1.0, neighbouring="row-l2")
    # delta budgets per relation too
    assert ledger.would_exceed(0.0, None, delta=1e-6, delta_budget=1.5e-6)
    assert not ledger.would_exceed(0.0, None, delta=1e-6, delta_budget=1.5e-6, neighbouring="element")
    with pytest.raises(BudgetExceededError, match="element total to epsilon = 1.1, over the budget 1"):
        ledger.check(_entry(0.2, "element"), 1.0)
    # the file carries the per-relation totals next to the old keys
    raw = ledger.to_dict()
    assert raw["totals_by_neighbouring"]["element"] == {"epsilon": 0.9, "delta": 0.0, "releases": 1}
    assert raw["total_epsilon"] == pytest.approx(1.6)  # kept for version-1 readers


# ------------------------------------------------------------------------- budgets
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -1.0, 0.0, True, "1", None])
def test_budget_must_be_a_finite_positive_number(bad):
    with pytest.raises(ValueError, match="finite positive number"):
        check_budget(bad)
    if bad is not None:
        with pytest.raises(ValueError):
            Ledger(budget=bad)
        with pytest.raises(ValueError):
            Ledger().would_exceed(0.1, bad)


def test_delta_budget_is_a_number_in_0_1(tmp_path):
    assert Ledger(delta_budget=0.0).would_exceed(0.1, None, delta=1e-9)  # 0: pure DP only
    assert not Ledger(delta_budget=0.0).would_exceed(0.1, None, delta=0.0)
    for bad in (1.5, -1e-9, math.nan):
        with pytest.raises(ValueError, match="delta budget"):
            Ledger(delta_budget=bad)
        with pytest.raises(ValueError):  # refused before the lock file is even created
            with ledger_transaction(tmp_path / "L.json", delta_budget=bad):
                pass
    assert list(tmp_path.iterdir()) == []


def test_a_stored_budget_is_used_and_a_nan_budget_in_a_file_is_refused(tmp_path):
    path = tmp_path / "L.json"
    with ledger_transaction(path, budget=1.0, delta_budget=1e-5) as tx:
        tx.check(_entry(0.75))
        tx.commit()
    stored = Ledger.load(path)
    assert (stored.budget, stored.delta_budget) == (1.0, 1e-5)
    with ledger_transaction(path) as tx:  # no budget given: the stored one holds
        with pytest.raises(BudgetExceededError):
            tx.check(_entry(0.5, tag="2"))
    raw = json.loads(path.read_text())
    text = json.dumps(raw)
    assert '"budget": {"epsilon": 1.0' in text
    for bad in ("NaN", '"x"', "-1", "1e999", "true"):
        path.write_text(text.replace('"budget": {"epsilon": 1.0', f'"budget": {{"epsilon": {bad}'))
        with pytest.raises(DataValidationError, match="not a dpcore ledger"):
            Ledger.load(path)


def test_version_1_file_is_read_and_version_2_stays_readable_by_the_version_1_loader(tmp_path):
    v1 = {"composition": "basic", "total_epsilon": 1.5, "total_delta": 0.0,
          "entries": [{"mechanism": "x", "epsilon": 1.5, "delta": 0.0, "neighbouring": "replace-one",
                       "dataset": "d", "created_utc": "2026-01-01T00:00:00+00:00", "sha256": "ab"}]}
    path = tmp_path / "L.json"
    path.write_text(json.dumps(v1))
    ledger = Ledger.load(path)
    assert ledger.total_epsilon == 1.5 and ledger.budget is None
    ledger.add(_entry(0.5, "element"))
    ledger.budget = 2.0
    ledger.save(path)
    raw = json.loads(path.read_text())
    # what the version-1 loader did: LedgerEntry(**e) for every entry, nothing else
    assert [LedgerEntry(**e) for e in raw["entries"]] == ledger.entries
    assert raw["format"] == "dpcore-ledger" and raw["version"] == 2 and raw["budget"]["epsilon"] == 2.0
    assert Ledger.from_json(ledger.to_json()) == ledger


# ------------------------------------------------------------------------- paths
def test_symlinks_and_non_regular_files_are_refused(tmp_path):
    real = tmp_path / "real.json"
    Ledger([_entry(1.0)]).save(real)
    before = real.read_bytes()
    link, dangling = tmp_path / "link.json", tmp_path / "dangling.json"
    link.symlink_to(real)
    dangling.symlink_to(tmp_path / "nowhere.json")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.json"
    folder.mkdir()
    for path, what in ((link, "symbolic link"), (dangling, "symbolic link"), (fifo, "not a regular"),
                       (folder, "not a regular")):
        with pytest.raises(DataValidationError, match=what):
            Ledger.load(path)
        with pytest.raises(DataValidationError, match=what):
            Ledger([_entry(2.0)]).save(path)
        with pytest.raises(DataValidationError, match=what):
            with ledger_transaction(path, budget=5.0):
                pass
    assert not (tmp_path / "nowhere.json").exists()  # the dangling link was not followed
    assert real.read_bytes() == before
    # a lock file that is a link is refused too
    lock_path(real).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(DataValidationError, match="lock file .* symbolic link"):
        with ledger_transaction(real):
            pass
    with pytest.raises(DataValidationError, match="does not exist"):
        Ledger.load(tmp_path / "nodir" / "L.json")


# ------------------------------------------------------------------------- transaction, failures
def test_transaction_commit_revert_and_no_commit(tmp_path):
    path = tmp_path / "L.json"
    Ledger([_entry(0.5)]).save(path)
    before = path.read_bytes()
    with ledger_transaction(path, budget=1.0) as tx:
        tx.check(_entry(0.25))
    assert path.read_bytes() == before  # reserved, never committed: the file is untouched
    with pytest.raises(RuntimeError, match="reservation"):
        with ledger_transaction(path, budget=1.0) as tx:
            tx.commit(_entry(0.1))
    with pytest.raises(RuntimeError, match="reserved epsilon"):
        with ledger_transaction(path, budget=1.0) as tx:
            tx.check(_entry(0.1))
            tx.commit(_entry(0.2))
    with ledger_transaction(path, budget=1.0) as tx:
        tx.check(_entry(0.5, tag="b"))
        tx.commit()
        assert Ledger.load(path).entries == [_entry(0.5), _entry(0.5, tag="b")]
        tx.revert()
    assert Ledger.load(path).entries == [_entry(0.5)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L.json", "L.json.lock"]


@pytest.mark.parametrize("failing", ["write", "fsync", "replace"])
def test_failing_write_leaves_the_old_ledger_intact(tmp_path, monkeypatch, failing):
    path = tmp_path / "L.json"
    Ledger(_entries([0.1] * 3000)).save(path)  # a long ledger, as in the report
    os.chmod(path, 0o600)
    before = path.read_bytes()

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    if failing == "write":  # the temporary file cannot be written (ulimit -f, full disk)
        real_fdopen = os.fdopen
        monkeypatch.setattr(ledger_mod.os, "fdopen",
                            lambda fd, mode: _ShortWriter(fd) if "w" in mode else real_fdopen(fd, mode))
    else:
        monkeypatch.setattr(ledger_mod.os, failing, disk_full)
    with pytest.raises(OSError):
        with ledger_transaction(path, budget=1e6) as tx:
            tx.check(_entry(1.0))
            tx.commit()
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert len(Ledger.load(path).entries) == 3000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L.json", "L.json.lock"]  # no temporary
    # a successful write keeps the file's permissions
    with ledger_transaction(path, budget=1e6) as tx:
        tx.check(_entry(1.0))
        tx.commit()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and len(Ledger.load(path).entries) == 3001


class _ShortWriter:
    """A file object whose write stops after 100 bytes with "file too large"."""

    def __init__(self, fd: int) -> None:
        self.fh = open(fd, "wb")  # noqa: SIM115 - closed in __exit__

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()

    def fileno(self) -> int:
        return self.fh.fileno()

    def write(self, data: bytes) -> int:
        self.fh.write(data[:100])
        raise OSError(errno.EFBIG, "File too large")


def test_stale_temporary_ledgers_are_removed_under_the_lock(tmp_path):
    path = tmp_path / "L.json"
    Ledger([_entry(0.5)]).save(path)
    stale = tmp_path / ".L.json.0123456789ab.tmp"
    stale.write_text('{"entries": [')
    with ledger_transaction(path) as tx:
        assert tx.ledger.entries == [_entry(0.5)]
    assert not stale.exists()


# ------------------------------------------------------------------------- processes
BASE = ["release", "local-gaussian", "breast-cancer", "--delta", "1e-6"]


def _child(argv: list[str], patch: str | None, stderr_file: str) -> None:
    """Run the CLI in a forked process, after ``patch``; exits with its status."""
    code = 99
    try:
        sys.stderr = open(stderr_file, "w")  # noqa: SIM115 - the process ends below
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        _PATCHES[patch]() if patch else None
        code = main(argv)
    finally:
        sys.stderr.flush()
        os._exit(code)


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _wrap(owner, name: str, before=None, after=None) -> None:
    real = getattr(owner, name)

    def wrapped(*args, **kwargs):
        if before:
            before()
        result = real(*args, **kwargs)
        if after:
            after()
        return result
    setattr(owner, name, wrapped)


def _half_write_then(action):
    """Patch: the release's temporary files get half their bytes, then ``action`` (a signal)."""
    def patch() -> None:
        import builtins

        real_open = builtins.open

        class HalfWriter:
            def __init__(self, fh) -> None:
                self.fh = fh

            def __enter__(self):
                return self

            def __exit__(self, *exc) -> None:
                self.fh.close()

            def write(self, data: bytes) -> None:
                self.fh.write(data[: len(data) // 2])
                self.fh.flush()
                action()

        def fake_open(path, mode="r", *args, **kwargs):
            fh = real_open(path, mode, *args, **kwargs)
            return HalfWriter(fh) if "x" in mode else fh
        staging.open = fake_open  # shadows the builtin inside dpcore.staging (writes releases) only
    return patch


def _kill_on_replace_call(n: int):
    def patch() -> None:
        calls = []
        real = os.replace

        def replace(a, b):
            calls.append(b)
            if len(calls) == n:
                _kill_self()
            return real(a, b)
        os.replace = replace
    return patch


def _slow_check() -> None:
    # widens the window between the budget check and the record: without the lock, every
    # process would pass the check before any of them records
    _wrap(LedgerTransaction, "check", after=lambda: time.sleep(0.3))


_PATCHES = {
    "slow-check": _slow_check,
    "before-lock": lambda: setattr(ledger_mod.fcntl, "flock", lambda *a: _kill_self()),
    "after-reserve": lambda: _wrap(LedgerTransaction, "check", after=_kill_self),
    "during-write": _half_write_then(_kill_self),
    "during-ledger-write": lambda: setattr(ledger_mod.os, "fsync", lambda fd: _kill_self()),
    "before-commit": lambda: _wrap(LedgerTransaction, "commit", before=_kill_self),
    "after-commit": lambda: _wrap(release_mod.StagedFiles, "publish", before=_kill_self),
    "during-publish": _kill_on_replace_call(3),  # ledger, CSV, then killed before the card
    "sigterm-during-write": _half_write_then(lambda: os.kill(os.getpid(), signal.SIGTERM)),
    "sigint-during-write": _half_write_then(lambda: os.kill(os.getpid(), signal.SIGINT)),
}


def _wait_for_go() -> None:
    """Patch: announce the release is staged (``$DPCORE_TEST_READY``), then publish only once
    ``$DPCORE_TEST_GO`` exists: a release held in flight while another process tries its output."""
    def wait() -> None:
        ready = Path(os.environ["DPCORE_TEST_READY"])
        # written whole, then renamed: the waiting test must never see (and snapshot) an empty file
        ready.with_name(ready.name + ".part").write_text(str(os.getpid()))
        os.replace(ready.with_name(ready.name + ".part"), ready)
        deadline = time.monotonic() + 120
        while not Path(os.environ["DPCORE_TEST_GO"]).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    _wrap(release_mod.StagedFiles, "publish", before=wait)


_PATCHES["wait-before-publish"] = _wait_for_go
_PATCHES["killed-in-flight"] = lambda: _wrap(release_mod.StagedFiles, "publish", before=_kill_self)


def _spawn(argv: list[str], patch: str | None, stderr_file: Path) -> multiprocessing.Process:
    proc = multiprocessing.get_context("fork").Process(target=_child, args=(argv, patch, str(stderr_file)))
    proc.start()
    return proc


def _published(folder: Path) -> dict[str, str]:
    """sha256 of every released CSV in ``folder`` (visible ``r*.csv`` files)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("r*.csv")}


@pytest.mark.slow
@pytest.mark.parametrize(("budget", "n_ok"), [("1", 1), ("2.5", 2)])
def test_concurrent_processes_cannot_overrun_the_budget(tmp_path, budget, n_ok):
    ledger = tmp_path / "L.json"
    procs = [_spawn([*BASE, "--epsilon", "1", "-o", str(tmp_path / f"r{i}.csv"), "--ledger", str(ledger),
                     "--budget", budget], "slow-check", tmp_path / f"err{i}") for i in range(4)]
    for proc in procs:
        proc.join(120)
    codes = [proc.exitcode for proc in procs]
    assert sorted(codes) == [0] * n_ok + [2] * (4 - n_ok), codes
    for i, code in enumerate(codes):
        err = (tmp_path / f"err{i}").read_text()
        assert (code == 0) == ("over the budget" not in err), err
    saved = Ledger.load(ledger)
    assert len(saved.entries) == n_ok and saved.total_epsilon == n_ok
    # the ledger records exactly the releases on disk
    assert sorted(e.sha256 for e in saved.entries) == sorted(_published(tmp_path).values())
    assert len(_published(tmp_path)) == n_ok


KILL_STEPS = ["before-lock", "after-reserve", "during-write", "during-ledger-write", "before-commit",
              "after-commit", "during-publish"]


@pytest.mark.parametrize("step", KILL_STEPS)
def test_sigkill_at_every_step_leaves_a_valid_consistent_ledger(tmp_path, step):
    ledger = tmp_path / "L.json"
    assert main([*BASE, "--epsilon", "0.5", "-o", str(tmp_path / "r0.csv"), "--ledger", str(ledger),
                 "--budget", "2"]) == 0
    before = ledger.read_bytes()
    proc = _spawn([*BASE, "--epsilon", "0.5", "-o", str(tmp_path / "r1.csv"), "--ledger", str(ledger)],
                  step, tmp_path / "err")
    proc.join(120)
    assert proc.exitcode == -signal.SIGKILL
    saved = Ledger.load(ledger)  # valid JSON, a valid ledger
    recorded = {e.sha256 for e in saved.entries}
    published = _published(tmp_path)
    assert set(published.values()) <= recorded  # every release on disk is paid for
    if step in ("after-commit", "during-publish"):  # committed: recorded (over-count if unpublished)
        assert len(saved.entries) == 2
        assert ("r1.csv" in published) == (step == "during-publish")
    else:  # before the commit: the old ledger byte for byte, and nothing published
        assert ledger.read_bytes() == before and set(published) == {"r0.csv"}
    # nothing visible is left over: only hidden temporaries, which are never taken for outputs
    visible = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert set(visible) <= {"L.json", "L.json.lock", "err", "r0.csv", "r0.card.json", "r1.csv"}
    assert all(p.name.endswith((".tmp", release_mod.OUTPUT_LOCK_SUFFIX))
               for p in tmp_path.iterdir() if p.name.startswith("."))
    # the lock died with the process: the next run goes through, and the budget still holds
    assert main([*BASE, "--epsilon", "0.5", "-o", str(tmp_path / "r2.csv"), "--ledger", str(ledger)]) == 0
    after = Ledger.load(ledger)
    assert len(after.entries) == len(saved.entries) + 1 and after.budget == 2.0
    assert set(_published(tmp_path).values()) <= {e.sha256 for e in after.entries}
    assert not list(tmp_path.glob(".L.json.*.tmp"))  # stale temporary ledgers removed


@pytest.mark.parametrize(("step", "signum"), [("sigterm-during-write", signal.SIGTERM),
                                              ("sigint-during-write", signal.SIGINT)])
def test_sigterm_and_sigint_remove_temporaries_and_exit_with_one_line(tmp_path, step, signum):
    ledger = tmp_path / "L.json"
    out = tmp_path / "r0.csv"
    assert main([*BASE, "--epsilon", "0.5", "-o", str(out), "--ledger", str(ledger)]) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    proc = _spawn([*BASE, "--epsilon", "0.5", "-o", str(out), "--ledger", str(ledger)], step,
                  tmp_path / "err")
    proc.join(120)
    assert proc.exitcode == 128 + signum
    lines = (tmp_path / "err").read_text().strip().splitlines()
    assert lines == [f"dpcore: interrupted by {signal.Signals(signum).name}; nothing was written"]
    # the previous release, its card and the ledger are exactly as they were; no temporary is left
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != "err"} == before


# ------------------------------------------------------------------------- CLI outputs
def _snapshot(folder: Path) -> dict[str, tuple[int, bytes | None]]:
    return {p.name: (p.lstat().st_mode, p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in folder.iterdir()}


def _cli(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.parametrize("case", ["input", "input-link", "ledger", "lock", "bounds", "categories",
                                  "dev-null", "fifo", "folder", "card-folder"])
def test_cli_refuses_outputs_that_would_destroy_a_file(tmp_path, capsys, case):
    src = tmp_path / "in.csv"
    src.write_text("a,b\n" + "\n".join(f"{i % 5},{i % 3}" for i in range(40)) + "\n")
    bounds = tmp_path / "bounds.json"
    bounds.write_text(json.dumps({"a": [0, 4], "b": [0, 2]}))
    ledger = tmp_path / "L.json"
    Ledger([_entry(0.5)]).save(ledger)
    lock_path(ledger).write_bytes(b"")
    os.mkfifo(tmp_path / "f.csv")
    (tmp_path / "dir.csv").mkdir()
    (tmp_path / "c.card.json").mkdir()
    (tmp_path / "alias.csv").symlink_to(src)
    categories = tmp_path / "cats.json"
    categories.write_text("{}")
    out = {"input": src, "input-link": tmp_path / "alias.csv", "ledger": ledger, "lock": lock_path(ledger),
           "bounds": bounds, "categories": categories, "dev-null": Path(os.devnull),
           "fifo": tmp_path / "f.csv", "folder": tmp_path / "dir.csv",
           "card-folder": tmp_path / "c.csv"}[case]
    before = _snapshot(tmp_path)
    code, err = _cli(capsys, "release", "local-gaussian", str(src), "--label", "", "--bounds", str(bounds),
                     "--categories", str(categories), "-o", str(out), "--ledger", str(ledger),
                     "--budget", "5")
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpcore: error: --output"), err
    assert _snapshot(tmp_path) == before  # nothing written, nothing replaced
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_cli_ledger_write_failure_leaves_every_previous_file(tmp_path, capsys, monkeypatch):
    ledger = tmp_path / "L.json"
    out = tmp_path / "r.csv"
    assert main([*BASE, "--epsilon", "0.5", "-o", str(out), "--ledger", str(ledger)]) == 0
    before = _snapshot(tmp_path)

    def disk_full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ledger_mod.os, "fsync", disk_full)
    code, err = _cli(capsys, *BASE, "--epsilon", "0.5", "-o", str(out), "--ledger", str(ledger))
    assert code == 2 and err.strip() == "dpcore: error: [Errno 28] No space left on device"
    assert _snapshot(tmp_path) == before  # the old release, its card and the ledger are untouched


@pytest.mark.parametrize("with_ledger", [False, True])
def test_a_failed_publish_puts_the_previous_release_back(tmp_path, capsys, monkeypatch, with_ledger):
    """The card's rename fails after the CSV's succeeded: the previous CSV (replaced by then)
    comes back from its hidden hard link, and the ledger entry is taken back."""
    out = tmp_path / "r.csv"
    ledger = ["--ledger", str(tmp_path / "L.json")] if with_ledger else []
    assert main([*BASE, "--epsilon", "0.5", "-o", str(out), *ledger]) == 0
    before = _snapshot(tmp_path)
    real_replace, calls = os.replace, []

    def replace(src, dst):
        calls.append(Path(dst).name)
        if Path(dst).name == "r.card.json" and len(calls) <= 3:
            raise OSError(errno.EIO, "Input/output error")
        return real_replace(src, dst)

    monkeypatch.setattr(staging.os, "replace", replace)
    code, err = _cli(capsys, *BASE, "--epsilon", "0.5", "-o", str(out), *ledger)
    assert code == 2 and "Input/output error" in err, err
    expected = (["L.json"] if with_ledger else []) + ["r.csv", "r.card.json"]
    assert calls[:len(expected)] == expected  # the CSV was replaced, then the card failed...
    assert _snapshot(tmp_path) == before  # ...and put back: every file as it was, nothing hidden left


def test_cli_budget_options(tmp_path, capsys):
    ledger = tmp_path / "L.json"
    for flag, value, needle in (("--budget", "nan", "epsilon budget must be a finite positive"),
                                ("--budget", "inf", "finite positive"), ("--budget", "-1", "finite positive"),
                                ("--budget", "0", "finite positive"), ("--delta-budget", "2", "[0, 1]"),
                                ("--delta-budget", "nan", "[0, 1]")):
        code, err = _cli(capsys, *BASE, "-o", str(tmp_path / "r.csv"), "--ledger", str(ledger), flag, value)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    code, err = _cli(capsys, *BASE, "-o", str(tmp_path / "r.csv"), "--delta-budget", "1e-5")
    assert code == 2 and "--ledger" in err
    assert list(tmp_path.iterdir()) == []
    # the delta budget is enforced: 1e-6 + 1e-6 > 1.5e-6
    ok = [*BASE, "--epsilon", "0.1", "--ledger", str(ledger), "--delta-budget", "1.5e-6"]
    assert main([*ok, "-o", str(tmp_path / "r1.csv")]) == 0
    code, err = _cli(capsys, *ok, "-o", str(tmp_path / "r2.csv"))
    assert code == 2 and "over the delta budget" in err and not (tmp_path / "r2.csv").exists()


# ------------------------------------------------------------------------- outputs in flight
def _wait_file(path: Path, proc: multiprocessing.Process) -> None:
    while not path.exists():
        assert proc.is_alive(), "the first release ended before it was staged"
        time.sleep(0.02)


@pytest.mark.parametrize("second_output", ["r.csv", "r", "r.card.json"])
def test_an_output_another_release_is_writing_is_refused_before_any_work(tmp_path, capsys, monkeypatch,
                                                                          second_output):
    """Process A is between staging and publishing ``r.csv``; B's ``-o`` shares one of A's files
    (``-o r`` writes ``r.card.json`` too): B exits 2 at once, without reading its input, and A's
    release is published intact."""
    out = tmp_path / "r.csv"
    assert main([*BASE, "--epsilon", "0.5", "-o", str(out)]) == 0  # an earlier release at that path
    ready, go = tmp_path / "ready", tmp_path / "go"
    monkeypatch.setenv("DPCORE_TEST_READY", str(ready))
    monkeypatch.setenv("DPCORE_TEST_GO", str(go))
    proc = _spawn([*BASE, "--epsilon", "0.5", "-o", str(out)], "wait-before-publish", tmp_path / "err")
    try:
        _wait_file(ready, proc)
        before = _snapshot(tmp_path)

        def no_work(*args, **kwargs):
            raise AssertionError("the input was read although the output is in use")
        monkeypatch.setattr("dpcore.cli_data.load_dataset", no_work)  # where the CLI reads its input
        code, err = _cli(capsys, *BASE, "--epsilon", "0.5", "-o", str(tmp_path / second_output))
        assert code == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "is being written by another release in flight" in lines[0], err
        assert f"(process {proc.pid})" in lines[0]
        assert _snapshot(tmp_path) == before  # B touched nothing
        go.write_text("")
        proc.join(120)
    finally:
        go.write_text("")
        proc.join(120)
    assert proc.exitcode == 0, (tmp_path / "err").read_text()
    card = json.loads((tmp_path / "r.card.json").read_text())
    assert card["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()  # A's pair, intact
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # marker and temporaries gone
    monkeypatch.undo()
    assert main([*BASE, "--epsilon", "0.5", "-o", str(tmp_path / second_output)]) == 0  # free again


def test_a_killed_release_leaves_a_marker_that_neither_blocks_nor_counts_as_an_output(tmp_path, capsys):
    out = tmp_path / "r.csv"
    proc = _spawn([*BASE, "--epsilon", "0.5", "-o", str(out)], "killed-in-flight", tmp_path / "err")
    proc.join(120)
    assert proc.exitcode == -signal.SIGKILL
    hidden = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert ".r.csv.release-lock" in hidden and len(hidden) >= 3  # marker(s) and staged temporaries
    assert not out.exists() and not (tmp_path / "r.card.json").exists()
    # the kernel dropped the dead process's lock: the next run is not blocked, and it clears the
    # stale temporaries and markers of its files
    code, err = _cli(capsys, *BASE, "--epsilon", "0.5", "-o", str(out))
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["err", "r.card.json", "r.csv"]
    card = json.loads((tmp_path / "r.card.json").read_text())
    assert card["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()


def test_output_lock_is_exclusive_between_threads_and_reentrant_in_one(tmp_path):
    import threading

    path = tmp_path / "r.csv"
    with release_mod.output_lock(path) as targets:
        assert set(targets) == {"csv", "card", "transform"}
        with release_mod.output_lock(path):  # the same thread: re-entrant (the CLI, then save())
            pass
        assert release_mod.output_lock_path(path).exists()  # still held after the inner block
        errors: list[BaseException] = []

        def other() -> None:
            try:
                with release_mod.output_lock(tmp_path / "r"):  # shares r.card.json
                    pass
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert len(errors) == 1 and isinstance(errors[0], release_mod.OutputBusyError), errors
    assert list(tmp_path.iterdir()) == []  # every marker removed
    (tmp_path / ".r.csv.release-lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(release_mod.OutputBusyError, match="symbolic link"), release_mod.output_lock(path):
        pass


def _contend(path: str, inside: str, rounds: int, counts) -> None:
    """Child: claim ``path`` ``rounds`` times; while holding it, create ``inside`` exclusively
    (two holders at once would find it there). A pause between opening a marker and locking it
    widens the window in which its holder removes it."""
    code = 0
    real_flock = staging.fcntl.flock

    def slow_flock(fd, op):
        time.sleep(0.002)
        return real_flock(fd, op)
    staging.fcntl.flock = slow_flock  # this child only
    try:
        for _ in range(rounds):
            try:
                with release_mod.output_lock(path):
                    fd = os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                    os.close(fd)
                    with counts.get_lock():
                        counts[0] += 1
                    time.sleep(0.001)
                    os.unlink(inside)
            except release_mod.OutputBusyError:
                with counts.get_lock():
                    counts[1] += 1
    except FileExistsError:
        code = 3  # two processes held the claim at once
    finally:
        os._exit(code)


@pytest.mark.slow
def test_output_lock_never_admits_two_processes(tmp_path):
    """Four processes claim one path 150 times each while markers are created and removed; the
    re-check after locking keeps the claim exclusive."""
    ctx = multiprocessing.get_context("fork")
    counts = ctx.Array("i", 2)
    procs = [ctx.Process(target=_contend, args=(str(tmp_path / "r.csv"), str(tmp_path / "inside"), 150,
                                                counts)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    assert [proc.exitcode for proc in procs] == [0] * 4
    assert counts[0] > 0 and counts[0] + counts[1] == 600, list(counts)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------- Ctrl-C at start
def test_ctrl_c_while_the_command_starts_ends_with_one_line():
    """A Ctrl-C during ``dpcore.cli``'s imports (seconds on a busy machine, before ``main`` runs)."""
    import subprocess

    code = ("import os, signal, sys; sys.argv = ['dpcore', 'datasets']; import dpcore._interrupt; "
            "os.kill(os.getpid(), signal.SIGINT); import dpcore.cli; print('not reached')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 130 and proc.stdout == ""
    assert proc.stderr == "dpcore: interrupted by SIGINT while starting; nothing was written\n"


def test_only_the_command_process_gets_the_start_handlers(monkeypatch):
    from types import SimpleNamespace

    from dpcore import _interrupt

    assert not _interrupt.is_cli_process()  # pytest: importing dpcore.cli left SIGINT alone
    assert signal.getsignal(signal.SIGINT) is not _interrupt._exit_at_start
    monkeypatch.setitem(sys.modules, "__main__", SimpleNamespace(__spec__=SimpleNamespace(name="dpcore.cli")))
    assert _interrupt.is_cli_process()  # python -m dpcore.cli
    monkeypatch.setitem(sys.modules, "__main__", SimpleNamespace(__spec__=None))
    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/dpcore", "release"])
    assert _interrupt.is_cli_process()  # the console script


@pytest.mark.parametrize("fail", [False, True])
def test_a_release_without_a_map_removes_the_older_releases_map(tmp_path, capsys, monkeypatch, fail):
    """``-o r.csv`` first with a projection (writes ``r.transform.npz``), then with LocalGaussian
    (no public map): the old map must not stay beside the new CSV and card (``load_transform``
    would pair them). If the new release fails to publish, the old map comes back with the rest."""
    from dpcore.transform import load_transform

    out = tmp_path / "r.csv"
    assert main(["release", "pca-gauss", "breast-cancer", "--epsilon", "1", "-o", str(out)]) == 0
    assert (tmp_path / "r.transform.npz").is_file()
    before = _snapshot(tmp_path)
    if fail:
        real_replace = os.replace

        def replace(src, dst):
            if Path(dst).name == "r.card.json":
                raise OSError(errno.EIO, "Input/output error")
            return real_replace(src, dst)

        monkeypatch.setattr(staging.os, "replace", replace)
    code, err = _cli(capsys, *BASE, "--epsilon", "0.5", "-o", str(out))
    if fail:
        assert code == 2 and "Input/output error" in err, err
        assert _snapshot(tmp_path) == before  # old CSV, card and map all back, nothing hidden left
        return
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.card.json", "r.csv"]
    with pytest.raises((ValueError, FileNotFoundError)):
        load_transform(out)
