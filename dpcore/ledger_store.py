"""A persistent ledger store: one budget and one list of releases per dataset, in SQLite.

The JSON ledger (:mod:`dpcore.ledger`) is one file per ledger, kept by whoever holds it. A data
custodian who serves the app (many sessions, reloads, new tabs, server restarts) and runs the CLI
needs one budget per *dataset* that none of them can reset: this store. It is an SQLite database
(Python's standard ``sqlite3``) holding, per dataset key,

- the budget (epsilon, and optionally delta, per neighbouring relation as in :class:`Ledger`), set
  **once** by whoever registers the dataset first, and changed afterwards only by
  :meth:`LedgerStore.raise_budget`, an explicit action with a reason, recorded in the budget log;
- every release charged to it, as :class:`~dpcore.ledger.LedgerEntry` rows (row-level epsilon;
  ``inf`` for unbounded releases, :mod:`dpcore.ledger`).

**Dataset keys** (:func:`dataset_key`): ``bundled:NAME`` for a bundled dataset, ``sha256:HEX`` of
the file's bytes for a file (the same key as the app gives the same file uploaded), ``files:HEX``
over the names and hashes of a folder or glob of files. Another copy of the same bytes is the same
dataset; the same rows in another encoding (gzip, Parquet) are not recognised as such.

**Concurrency.** Every change is one SQLite transaction started with ``BEGIN IMMEDIATE`` (the
database's write lock, held until ``COMMIT``): the budget check and the record of a release happen
under that lock (:meth:`LedgerStore.transaction`), so processes and threads sharing a store never
admit more than its budget. Writers wait for the lock up to ``timeout`` seconds. No file lock of
our own is used, and nothing is left behind by a killed process: SQLite rolls an interrupted
transaction back from its journal when the database is next opened.

**One file, one name.** As for JSON ledgers, a store with a second name (a hard link) or reached
through a symbolic link is refused: SQLite names its journal after the path, so a crash under one
name could not be recovered under the other (SQLite's "How To Corrupt An SQLite Database File",
section 2.5).

The JSON format stays the exchange format: :meth:`LedgerStore.export_json` writes a dataset's
ledger as a JSON ledger (with ``dataset_key`` and the budget log added), :meth:`LedgerStore.import_ledger`
adds a JSON ledger's entries to a dataset.
"""

from __future__ import annotations

import getpass
import glob
import hashlib
import os
import socket
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dpcore.exceptions import DataValidationError
from dpcore.ledger import (
    Ledger,
    LedgerEntry,
    check_budgets,
    check_single_name,
    committable,
    ledger_transaction,
)

__all__ = [
    "BudgetConflictError",
    "BudgetChange",
    "DEFAULT_TIMEOUT",
    "DatasetRecord",
    "LedgerStore",
    "STORE_FORMAT",
    "STORE_SUFFIXES",
    "StoreTransaction",
    "UnregisteredDatasetError",
    "dataset_key",
    "default_actor",
    "is_store_path",
    "open_ledger_transaction",
    "precheck_ledger",
]

STORE_FORMAT = "dpcore-ledger-store"
SCHEMA_VERSION = 1
#: A path ending in one of these is a store; any other ``--ledger`` path is a JSON ledger file.
STORE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
#: Seconds a writer waits for another's transaction (a Dask release holds it while writing its parts).
DEFAULT_TIMEOUT = 600.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS datasets (
    key TEXT PRIMARY KEY, label TEXT NOT NULL, budget REAL NOT NULL, delta_budget REAL,
    registered_utc TEXT NOT NULL, registered_by TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL REFERENCES datasets(key),
    mechanism TEXT NOT NULL, epsilon REAL NOT NULL, delta REAL NOT NULL, neighbouring TEXT NOT NULL,
    name TEXT NOT NULL, created_utc TEXT NOT NULL, sha256 TEXT NOT NULL,
    recorded_utc TEXT NOT NULL, recorded_by TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS entries_dataset ON entries(dataset);
CREATE TABLE IF NOT EXISTS budget_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL REFERENCES datasets(key),
    time_utc TEXT NOT NULL, action TEXT NOT NULL, budget REAL, delta_budget REAL,
    previous_budget REAL, previous_delta_budget REAL, by TEXT NOT NULL, reason TEXT NOT NULL);
"""


class UnregisteredDatasetError(DataValidationError):
    """The dataset has no budget in the store yet (register it with one)."""


class BudgetConflictError(DataValidationError):
    """A budget was given that differs from the dataset's registered one (set once; raise it
    explicitly with :meth:`LedgerStore.raise_budget`)."""


@dataclass(frozen=True)
class DatasetRecord:
    """A registered dataset: its key, a label for people, its budgets and who registered it."""

    key: str
    label: str
    budget: float
    delta_budget: float | None
    registered_utc: str
    registered_by: str


@dataclass(frozen=True)
class BudgetChange:
    """One line of a dataset's budget log: ``action`` is ``"register"`` or ``"raise"``."""

    time_utc: str
    action: str
    budget: float | None
    delta_budget: float | None
    previous_budget: float | None
    previous_delta_budget: float | None
    by: str
    reason: str


def is_store_path(path: str | Path) -> bool:
    """True if ``path`` names a ledger store (:data:`STORE_SUFFIXES`), not a JSON ledger."""
    return str(path).lower().endswith(STORE_SUFFIXES)


def default_actor(front_end: str = "cli") -> str:
    """Who makes a change, for the store's records: ``"cli user@host pid N"``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{front_end} {user}@{socket.gethostname()} pid {os.getpid()}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def dataset_key(source: str | Path | bytes, *, bundled: set[str] | None = None) -> str:
    """The store's key of a dataset.

    Parameters
    ----------
    source : str, Path or bytes
        A bundled dataset's name (``bundled:NAME``), a file's bytes or path (``sha256:HEX`` of its
        bytes), a folder or glob of files (``files:HEX``: SHA-256 over each file's name relative to
        the folder or glob and the SHA-256 of its bytes, in sorted order), or a key already
        (``bundled:``, ``sha256:``, ``files:``, returned as it is).
    bundled : set of str, optional
        The bundled names (default: :func:`dpcore.io.bundled_datasets`).

    Raises
    ------
    DataValidationError
        Nothing matches ``source``.
    """
    if isinstance(source, bytes):
        return "sha256:" + hashlib.sha256(source).hexdigest()
    text = str(source)
    if text.startswith(("bundled:", "sha256:", "files:")):
        return text
    if bundled is None:
        from dpcore.io import bundled_datasets

        bundled = set(bundled_datasets())
    if text in bundled and not os.path.exists(text):
        return f"bundled:{text}"
    if os.path.isfile(text):
        return "sha256:" + _file_sha256(text)
    if os.path.isdir(text):
        files = sorted(str(p.relative_to(text)) for p in Path(text).rglob("*") if p.is_file())
        base = Path(text)
    else:
        files = sorted(glob.glob(text))
        base = None
    if not files:
        raise DataValidationError(f"{text!r} is not a file, a folder of files, a glob or a bundled dataset")
    h = hashlib.sha256()
    for name in files:
        path = base / name if base is not None else Path(name)
        h.update(f"{path.name if base is None else name}\0{_file_sha256(path)}\n".encode())
    return "files:" + h.hexdigest()


def _check_store_path(path: Path) -> Path:
    """``path`` if it can be a store: in an existing folder, not a symbolic link, a regular file
    with one name if it exists."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise DataValidationError(f"cannot use the ledger store {path}: {exc.strerror or exc}") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise DataValidationError(f"the ledger store {path} is a symbolic link; give the real "
                                      "file's path")
        if not stat.S_ISREG(st.st_mode):
            raise DataValidationError(f"the ledger store {path} is not a regular file")
        check_single_name(path, st)
    if not path.parent.is_dir():
        raise DataValidationError(f"the ledger store's folder {path.parent} does not exist; create it first")
    return path


@dataclass
class StoreTransaction:
    """The state inside :meth:`LedgerStore.transaction`, as :class:`~dpcore.ledger.LedgerTransaction`:
    ``check(entry)`` reserves (raises if over budget), ``commit(entry)`` records durably (the
    SQLite transaction is committed), ``revert()`` takes a committed entry back."""

    store: LedgerStore
    key: str
    connection: sqlite3.Connection
    ledger: Ledger
    actor: str
    reserved: LedgerEntry | None = None
    committed: LedgerEntry | None = None
    _committed_id: int | None = None

    def check(self, entry: LedgerEntry, *, allow_unbounded: bool = False) -> None:
        """Reserve ``entry``: :meth:`Ledger.check` against the dataset's registered budget."""
        if self.committed is not None:
            raise RuntimeError("this transaction already committed an entry")
        self.ledger.check(entry, allow_unbounded=allow_unbounded)
        self.reserved = entry

    def commit(self, entry: LedgerEntry | None = None) -> None:
        """Record the reserved entry (or ``entry``, of the reserved cost) and commit.

        Raises
        ------
        RuntimeError
            No reservation, or ``entry`` costs other than the reservation.
        OSError
            SQLite could not write (a full disk): nothing is recorded.
        """
        entry = committable(self.reserved, entry)
        try:
            self._committed_id = _insert_entry(self.connection, self.key, entry, self.actor)
            self.connection.execute("COMMIT")
        except sqlite3.Error as exc:  # a full disk, an I/O error: nothing is recorded (rolled back)
            raise OSError(f"the ledger store {self.store.path} could not record the release: {exc}") from None
        self.ledger = Ledger([*self.ledger.entries, entry], self.ledger.budget, self.ledger.delta_budget)
        self.committed, self.reserved = entry, None

    def revert(self) -> None:
        """Remove the committed entry again (its release was not published after all)."""
        if self.committed is None or self._committed_id is None:
            return
        try:
            with self.store._write() as con:
                con.execute("DELETE FROM entries WHERE id = ?", (self._committed_id,))
        except sqlite3.Error as exc:
            raise OSError(f"the ledger store {self.store.path} could not take the entry back: "
                          f"{exc}") from None
        entries = list(self.ledger.entries)
        entries.remove(self.committed)
        self.ledger = Ledger(entries, self.ledger.budget, self.ledger.delta_budget)
        self.committed = self._committed_id = None


def _insert_entry(con: sqlite3.Connection, key: str, entry: LedgerEntry, actor: str) -> int:
    cur = con.execute(
        "INSERT INTO entries (dataset, mechanism, epsilon, delta, neighbouring, name, created_utc, sha256, "
        "recorded_utc, recorded_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (key, entry.mechanism, float(entry.epsilon), float(entry.delta), entry.neighbouring, entry.dataset,
         entry.created_utc, entry.sha256, _now(), actor))
    return int(cur.lastrowid)


class LedgerStore:
    """A ledger store at ``path`` (created on first use): see the module docstring.

    Each method opens its own SQLite connection (cheap), so one object may be shared by threads
    (the app's sessions) and processes may open the same file.

    Parameters
    ----------
    path : str or Path
        The database file (conventionally ``.sqlite``); its folder must exist.
    timeout : float
        Seconds to wait for another writer's transaction before giving up (``DataValidationError``
        "the ledger store is busy").

    Raises
    ------
    DataValidationError
        A symbolic link, a non-regular file, a file with two names, a missing folder, a file that
        is not a dpcore ledger store.
    """

    def __init__(self, path: str | Path, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.path = _check_store_path(Path(path))
        self.timeout = float(timeout)
        with self._write():  # creates the schema in a new file, checks an existing one
            pass

    # ------------------------------------------------------------------ connections
    def _connect(self) -> sqlite3.Connection:
        _check_store_path(self.path)  # also between uses: a link made meanwhile is refused
        try:
            con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise DataValidationError(f"cannot open the ledger store {self.path}: {exc}") from None
        con.execute("PRAGMA foreign_keys = ON")
        return con

    def _ensure_schema(self, con: sqlite3.Connection) -> None:
        version = con.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if version == 0 and not tables:
            for statement in filter(str.strip, _SCHEMA.split(";")):  # executescript would COMMIT
                con.execute(statement)
            con.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (STORE_FORMAT,))
            con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            return
        fmt = (con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
               if "meta" in tables else None)
        if fmt is None or fmt[0] != STORE_FORMAT:
            raise DataValidationError(f"{self.path} is an SQLite database but not a dpcore ledger store")
        if version > SCHEMA_VERSION:
            raise DataValidationError(f"the ledger store {self.path} has schema version {version}; this "
                                      f"dpcore reads version {SCHEMA_VERSION}: upgrade dpcore")

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``; rolled back on error)."""
        with closing(self._connect()) as con:
            self._begin(con)
            try:
                self._ensure_schema(con)
                yield con
                con.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise OSError(f"the ledger store {self.path} could not be written: {exc}") from None
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise

    def _begin(self, con: sqlite3.Connection) -> None:
        try:
            con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise DataValidationError(f"the ledger store {self.path} is busy: another release held it "
                                          f"for more than {self.timeout:g} s; try again") from None
            raise DataValidationError(f"cannot use the ledger store {self.path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise DataValidationError(f"{self.path} is not a dpcore ledger store ({exc})") from None

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot (one deferred read transaction)."""
        with closing(self._connect()) as con:
            try:
                con.execute("BEGIN")
                self._ensure_schema(con)
                yield con
            except sqlite3.DatabaseError as exc:
                raise DataValidationError(f"{self.path} is not a dpcore ledger store ({exc})") from None
            finally:
                if con.in_transaction:
                    con.execute("ROLLBACK")

    # ------------------------------------------------------------------ reading
    @staticmethod
    def _record(row: tuple | None) -> DatasetRecord | None:
        return None if row is None else DatasetRecord(*row)

    def dataset(self, key: str) -> DatasetRecord | None:
        """The registered dataset ``key``, or ``None``."""
        with self._read() as con:
            return self._dataset(con, key)

    def _dataset(self, con: sqlite3.Connection, key: str) -> DatasetRecord | None:
        return self._record(con.execute(
            "SELECT key, label, budget, delta_budget, registered_utc, registered_by FROM datasets "
            "WHERE key = ?", (key,)).fetchone())

    def datasets(self) -> list[DatasetRecord]:
        """Every registered dataset, in order of registration."""
        with self._read() as con:
            rows = con.execute("SELECT key, label, budget, delta_budget, registered_utc, registered_by "
                               "FROM datasets ORDER BY registered_utc, key").fetchall()
        return [DatasetRecord(*r) for r in rows]

    def _ledger(self, con: sqlite3.Connection, key: str) -> Ledger:
        rec = self._dataset(con, key)
        rows = con.execute("SELECT mechanism, epsilon, delta, neighbouring, name, created_utc, sha256 FROM "
                           "entries WHERE dataset = ? ORDER BY id", (key,)).fetchall()
        entries = [LedgerEntry(*r) for r in rows]
        return Ledger(entries, None if rec is None else rec.budget, None if rec is None else rec.delta_budget)

    def ledger(self, key: str) -> Ledger:
        """The dataset's releases and registered budgets as a :class:`Ledger` (a copy: changing it
        changes nothing in the store). An unregistered dataset: an empty ledger without budget."""
        with self._read() as con:
            return self._ledger(con, key)

    def budget_log(self, key: str) -> list[BudgetChange]:
        """The registration and every budget change of ``key``, oldest first."""
        with self._read() as con:
            rows = con.execute("SELECT time_utc, action, budget, delta_budget, previous_budget, "
                               "previous_delta_budget, by, reason FROM budget_log WHERE dataset = ? "
                               "ORDER BY id", (key,)).fetchall()
        return [BudgetChange(*r) for r in rows]

    # ------------------------------------------------------------------ budgets
    def _register(self, con: sqlite3.Connection, key: str, budget: float | None, delta_budget: float | None,
                  label: str, by: str) -> DatasetRecord:
        rec = self._dataset(con, key)
        if rec is not None:
            given = (budget, delta_budget if delta_budget is not None else rec.delta_budget)
            if budget is not None and given != (rec.budget, rec.delta_budget):
                raise BudgetConflictError(
                    f"the dataset {rec.label or key} is registered with the budget epsilon = {rec.budget:g}"
                    + (f", delta = {rec.delta_budget:g}" if rec.delta_budget is not None else "")
                    + f" (set {rec.registered_utc} by {rec.registered_by}); a budget is set once: raise it "
                    "explicitly (`dpcore ledger raise-budget`, or the app's 'Raise the budget') or leave "
                    "--budget out")
            return rec
        if budget is None:
            raise UnregisteredDatasetError(
                f"the dataset {label or key} has no budget in the ledger store {self.path}: give one to "
                "register it (--budget EPS; it is set once, by whoever registers the dataset first)")
        budget, delta_budget = check_budgets(budget, delta_budget)
        now = _now()
        con.execute("INSERT INTO datasets VALUES (?, ?, ?, ?, ?, ?)",
                    (key, label, budget, delta_budget, now, by))
        con.execute("INSERT INTO budget_log (dataset, time_utc, action, budget, delta_budget, by, reason) "
                    "VALUES (?, ?, 'register', ?, ?, ?, '')", (key, now, budget, delta_budget, by))
        return DatasetRecord(key, label, budget, delta_budget, now, by)

    def register(self, key: str, budget: float, delta_budget: float | None = None, *, label: str = "",
                 by: str = "") -> DatasetRecord:
        """Register ``key`` with its budgets (once). Registering again with the same budgets returns
        the record; other budgets raise :class:`BudgetConflictError`.

        Raises
        ------
        ValueError
            A budget that is not a finite positive number (delta in [0, 1]).
        BudgetConflictError
            Already registered with other budgets.
        """
        with self._write() as con:
            return self._register(con, key, budget, delta_budget, label, by or default_actor())

    def raise_budget(self, key: str, budget: float | None = None, delta_budget: float | None = None, *,
                     reason: str, by: str = "") -> DatasetRecord:
        """Raise the budget of a registered dataset: an explicit action, logged with ``reason``.

        Raises
        ------
        ValueError
            No reason, nothing to change, a new budget below the current one (a budget is only
            raised here) or not a valid budget.
        UnregisteredDatasetError
            ``key`` is not registered.
        """
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("raising a budget needs a reason (it is kept in the budget log)")
        if budget is None and delta_budget is None:
            raise ValueError("give the new epsilon budget, the new delta budget, or both")
        budget, delta_budget = check_budgets(budget, delta_budget)
        with self._write() as con:
            rec = self._dataset(con, key)
            if rec is None:
                raise UnregisteredDatasetError(f"the dataset {key} is not registered in {self.path}")
            new_eps = rec.budget if budget is None else budget
            new_delta = rec.delta_budget if delta_budget is None else delta_budget
            if new_eps < rec.budget or (rec.delta_budget is not None and new_delta is not None
                                        and new_delta < rec.delta_budget):
                raise ValueError(f"a budget can only be raised here: epsilon {rec.budget:g} -> {new_eps:g}"
                                 + (f", delta {rec.delta_budget:g} -> {new_delta:g}"
                                    if rec.delta_budget is not None and new_delta is not None else ""))
            if rec.delta_budget is None and delta_budget is not None:
                raise ValueError("the dataset has no delta budget (no limit); one cannot be raised to "
                                 f"{delta_budget:g}")
            if (new_eps, new_delta) == (rec.budget, rec.delta_budget):
                raise ValueError("the new budget equals the current one: nothing to raise")
            con.execute("UPDATE datasets SET budget = ?, delta_budget = ? WHERE key = ?",
                        (new_eps, new_delta, key))
            con.execute("INSERT INTO budget_log (dataset, time_utc, action, budget, delta_budget, "
                        "previous_budget, previous_delta_budget, by, reason) "
                        "VALUES (?, ?, 'raise', ?, ?, ?, ?, ?, ?)",
                        (key, _now(), new_eps, new_delta, rec.budget, rec.delta_budget,
                         by or default_actor(), reason.strip()))
            return DatasetRecord(key, rec.label, new_eps, new_delta, rec.registered_utc, rec.registered_by)

    # ------------------------------------------------------------------ charging
    @contextmanager
    def transaction(self, key: str, *, budget: float | None = None, delta_budget: float | None = None,
                    label: str = "", by: str = "") -> Iterator[StoreTransaction]:
        """Hold the store's write lock from the budget check to the record of one release.

        ::

            with store.transaction(key, budget=1.0) as tx:   # registers key if new
                tx.check(entry)           # BudgetExceededError if over budget
                ... write the release to temporary files ...
                tx.commit(entry)          # recorded and committed
                ... rename the files into place (on failure: tx.revert()) ...

        ``budget`` / ``delta_budget``: registers an unregistered dataset with them; for a
        registered one they must equal its budgets (:class:`BudgetConflictError`) or be left out.
        Leaving the block without :meth:`~StoreTransaction.commit` changes nothing (a
        registration made here is rolled back with it).

        Raises
        ------
        UnregisteredDatasetError
            ``key`` is not registered and no budget is given.
        BudgetConflictError, ValueError, DataValidationError
            As :meth:`register`; the store is busy past ``timeout``.
        """
        by = by or default_actor()
        with closing(self._connect()) as con:
            self._begin(con)
            try:
                self._ensure_schema(con)
                self._register(con, key, budget, delta_budget, label, by)
                tx = StoreTransaction(self, key, con, self._ledger(con, key), by)
                yield tx
            finally:
                if con.in_transaction:
                    con.execute("ROLLBACK")

    def charge(self, key: str, entry: LedgerEntry, *, allow_unbounded: bool = False,
               budget: float | None = None, delta_budget: float | None = None, label: str = "",
               by: str = "") -> Ledger:
        """Check and record ``entry`` in one transaction (the app: its release is already in memory
        and is shown only after this returns). Returns the dataset's ledger after the record.

        Raises
        ------
        BudgetExceededError
            The entry does not fit (nothing recorded).
        """
        with self.transaction(key, budget=budget, delta_budget=delta_budget, label=label, by=by) as tx:
            tx.check(entry, allow_unbounded=allow_unbounded)
            tx.commit(entry)
            return tx.ledger

    # ------------------------------------------------------------------ JSON exchange
    def import_ledger(self, key: str, ledger: Ledger, *, label: str = "", by: str = "") -> int:
        """Add the entries of a JSON ledger not already recorded for ``key`` (same mechanism,
        epsilon, delta, relation, time and hash); returns how many were added. Past releases are
        recorded even past the budget (they happened): nothing more is then admitted. An
        unregistered dataset is registered with the file's budget (one is needed); a registered
        one keeps its own.

        Raises
        ------
        UnregisteredDatasetError
            ``key`` is not registered and the file has no budget.
        """
        by = by or default_actor()
        with self._write() as con:
            rec = self._dataset(con, key)
            if rec is None:
                self._register(con, key, ledger.budget, ledger.delta_budget, label, by)
            seen = {_identity(e) for e in self._ledger(con, key).entries}
            added = 0
            for e in ledger.entries:
                if _identity(e) not in seen:
                    _insert_entry(con, key, e, by)
                    seen.add(_identity(e))
                    added += 1
            return added

    def export_dict(self, key: str) -> dict[str, Any]:
        """The dataset's ledger in the JSON ledger format (:meth:`Ledger.to_dict`), plus
        ``dataset_key`` and ``budget_log`` (ignored by the JSON reader)."""
        with self._read() as con:
            ledger = self._ledger(con, key)
        log = [{**c.__dict__} for c in self.budget_log(key)]
        return {**ledger.to_dict(), "dataset_key": key, "budget_log": log}


def _identity(e: LedgerEntry) -> tuple:
    return (e.mechanism, e.epsilon, e.delta, e.neighbouring, e.created_utc, e.sha256)


def precheck_ledger(path: str | Path, key: str, *, budget: float | None = None,
                    delta_budget: float | None = None) -> None:
    """Refuse, before any work and without writing anything, a ``--ledger PATH`` that cannot
    take the release: a bad JSON ledger or store file, or (store) a dataset without a registered
    budget and none given, or a given budget that differs from the registered one.

    Raises
    ------
    DataValidationError
        Naming the problem (:class:`UnregisteredDatasetError`, :class:`BudgetConflictError`).
    """
    if not is_store_path(path):
        Ledger.load(path)
        return
    path = _check_store_path(Path(path))
    if not path.exists() or path.stat().st_size == 0:
        rec = None
    else:
        rec = LedgerStore(path).dataset(key)
    if rec is None and budget is None:
        raise UnregisteredDatasetError(
            f"the dataset {key} has no budget in the ledger store {path}: give --budget EPS to register "
            "it (set once, by whoever registers the dataset first)")
    if rec is not None and budget is not None and (budget, delta_budget if delta_budget is not None
                                                   else rec.delta_budget) != (rec.budget, rec.delta_budget):
        raise BudgetConflictError(
            f"the dataset {rec.label or key} is registered in {path} with the budget epsilon = {rec.budget:g}"
            + (f", delta = {rec.delta_budget:g}" if rec.delta_budget is not None else "")
            + "; a budget is set once: leave --budget out, or raise it with `dpcore ledger raise-budget`")


@contextmanager
def open_ledger_transaction(path: str | Path, key: str, *, label: str = "", budget: float | None = None,
                            delta_budget: float | None = None) -> Iterator[Any]:
    """The CLI's ``--ledger PATH``: a store transaction for dataset ``key`` when ``PATH`` is a
    store (:func:`is_store_path`), else the JSON ledger's :func:`~dpcore.ledger.ledger_transaction`.
    Both yield an object with ``check(entry, allow_unbounded=...)``, ``commit``, ``revert`` and
    ``ledger``."""
    if is_store_path(path):
        with LedgerStore(path).transaction(key, budget=budget, delta_budget=delta_budget, label=label) as tx:
            yield tx
    else:
        with ledger_transaction(path, budget=budget, delta_budget=delta_budget) as tx:
            yield tx

