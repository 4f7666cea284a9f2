"""Privacy ledger: the releases made from one dataset, their totals and a budget that holds.

Totals use **basic (sequential) composition**: epsilons add up and deltas add up (Dwork & Roth
2014, Thm 3.16), valid for any mix of mechanisms but loose.

**One unit.** An entry made from a release card records its row-level guarantee (the card's
``row_level``: replace-one, label included), which every mechanism reports, also those released in
the papers' element or row-l2 modes (whose row-level equivalent is computed for the drawn
projection). A release with no finite row-level epsilon is booked as **unbounded**
(``epsilon = inf``, replace-one): the papers' per-class modes with public class sizes
(``replace-one-within-class``: one record's label is not protected at all) and every release whose
guarantee does not hold (``holds: false``: bounds or a class list read from the private data, rows
dropped for missing values). An unbounded entry is admitted only with an explicit opt-in
(``allow_unbounded=True``: the CLI's ``--data-bounds`` / ``--data-classes`` / ``--label-privacy
within-class``, the app's opt-in box) and only while the relation's budget is not yet spent; its
total is then infinite, so nothing more is admitted under that budget.

**Totals are kept per neighbouring relation** (``replace-one``, ``element``, ``row-l2``, ...) and
each is checked against the budget on its own: an epsilon under one relation is not an epsilon
under another, and no conversion between them is stated for this project's mechanisms (turning an
element-level epsilon into a row-level one needs group privacy over the number of entries a row can
change, and the public bounds of each entry, which a ledger does not know). So a budget of 1 allows
epsilon 1 of ``replace-one`` releases *and* epsilon 1 of ``element`` releases; :meth:`Ledger.summary`
says so whenever more than one relation is present. ``total_epsilon`` / ``total_delta`` (the sums
over every entry, kept for readers of the first file format) are only meaningful with one relation.

**A budget that cannot be overrun** (:func:`ledger_transaction`): an exclusive ``flock`` on a lock
file beside the ledger (``L.json.lock``, never removed: removing a lock file while another process
waits on it would let two processes hold "the" lock) is held from the budget check to the record;
the ledger is re-read under the lock; it is written to a temporary file in the same folder,
fsynced, renamed over the old one and the folder fsynced, so a crash or a full disk leaves either
the old or the new ledger, never a mix. Callers publish a release only after its entry is committed
(reserve, write temporaries, commit, publish — or roll back and remove what was written). A process
killed at any step leaves the ledger valid; if it dies between commit and publish the ledger holds an
entry whose files never appeared, an over-count (the safe direction).

**One file, one name.** A ledger file with a second name (a hard link) is refused: each name
would lock its own ``.lock`` file, and the first atomic rename splits the link into two ledgers
(two processes then admit releases against two copies of one budget). The persistent store
(:mod:`dpcore.ledger_store`, SQLite) keeps a ledger per dataset and takes the same rule.

The file is JSON (``Ledger.to_json``), the same for the CLI (``--ledger``) and the app (download
and upload). Version 1 files (``composition``, ``total_epsilon``, ``total_delta``, ``entries``) are
read as they are; version 2 adds keys (``format``, ``version``, ``totals_by_neighbouring``,
``budget``) and keeps every entry in the version 1 form, so a version 1 reader still reads it.
An unbounded entry's epsilon (and an infinite total) is written as the string ``"inf"``, as on
release cards (JSON has no infinity).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dpcore.exceptions import DataValidationError

__all__ = [
    "BUDGET_RTOL",
    "BudgetExceededError",
    "FORMAT",
    "Ledger",
    "LedgerEntry",
    "LedgerTransaction",
    "MAX_LEDGER_BYTES",
    "RelationTotal",
    "VERSION",
    "check_budget",
    "check_budgets",
    "check_ledger_path",
    "check_single_name",
    "committable",
    "is_unbounded",
    "ledger_transaction",
    "lock_path",
    "safe_sum",
]

FORMAT = "dpcore-ledger"
VERSION = 2
#: Relative slack of the budget comparison: ``0.1 + 0.2 + 0.7`` must meet a budget of 1. The
#: largest overrun it allows is ``1e-12 * budget``.
BUDGET_RTOL = 1e-12
#: A ledger is small (about 300 bytes per entry); a bigger file is not a ledger.
MAX_LEDGER_BYTES = 64 * 2**20


class BudgetExceededError(ValueError):
    """A release would bring a ledger total past its budget (nothing was written)."""


def safe_sum(values: Any) -> float:
    """``math.fsum`` of ``values``, ``inf`` where the exact sum is past the largest float (fsum
    raises ``OverflowError`` for two entries of 1e308) or an entry is infinite."""
    values = list(values)
    if any(math.isinf(v) for v in values):
        return math.inf
    try:
        return math.fsum(values)
    except OverflowError:
        return math.inf


def is_unbounded(epsilon: float) -> bool:
    """True for an entry or total with no finite epsilon (booked as ``inf``)."""
    return math.isinf(epsilon)


def _json_epsilon(value: float) -> float | str:
    return "inf" if math.isinf(value) else value


def check_budget(value: Any, name: str = "budget", *, allow_zero: bool = False,
                 upper: float = math.inf) -> float:
    """``value`` as a float if it is a finite number > 0 (``>= 0`` with ``allow_zero``) and ``<= upper``.

    Raises
    ------
    ValueError
        For NaN, infinities, negative numbers, zero (unless ``allow_zero``), booleans and
        non-numbers (a NaN budget compares false with everything and would disable the check).
    """
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and (value >= 0 if allow_zero else value > 0) and value <= upper
    if not ok:
        what = "a finite number >= 0" if allow_zero else "a finite positive number"
        if math.isfinite(upper):
            what = f"a number in [0, {upper:g}]" if allow_zero else f"{what} <= {upper:g}"
        raise ValueError(f"the {name} must be {what}, got {value!r}")
    return float(value)


def check_budgets(budget: float | None, delta_budget: float | None) -> tuple[float | None, float | None]:
    """Validated ``(epsilon budget > 0, delta budget in [0, 1])``; ``None`` means no budget.

    A delta budget of 0 allows pure-DP releases only.
    """
    return (None if budget is None else check_budget(budget, "epsilon budget"),
            None if delta_budget is None else check_budget(delta_budget, "delta budget",
                                                           allow_zero=True, upper=1.0))


@dataclass(frozen=True)
class LedgerEntry:
    """One published release: mechanism, guaranteed (epsilon, delta), relation, time, CSV hash."""

    mechanism: str
    epsilon: float
    delta: float
    neighbouring: str = "replace-one"
    dataset: str = ""
    created_utc: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    sha256: str = ""

    def __post_init__(self) -> None:
        if self.epsilon == "inf":  # the file's spelling of an unbounded entry
            object.__setattr__(self, "epsilon", math.inf)
        for name, hi in (("epsilon", math.inf), ("delta", 1.0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 <= v <= hi) \
                    or (not math.isfinite(v) and not (name == "epsilon" and v == math.inf)):
                what = "a number >= 0 or 'inf' (unbounded)" if name == "epsilon" else \
                    f"a finite number in [0, {hi}]"
                raise TypeError(f"ledger entry {name} must be {what}, got {v!r}")
        for name in ("mechanism", "neighbouring", "dataset", "created_utc", "sha256"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"ledger entry {name} must be a string, got {getattr(self, name)!r}")

    @property
    def unbounded(self) -> bool:
        """No finite row-level epsilon (booked as ``inf``)."""
        return is_unbounded(self.epsilon)

    @classmethod
    def from_release(cls, release: Any, dataset: str = "") -> LedgerEntry:
        """The entry a :class:`~dpcore.release.Release` will have once its card is written (the
        reservation made before the files exist): :meth:`from_card` on its guarantee and
        ``row_level``, with no ``sha256`` yet."""
        return cls.from_card({"mechanism": release.mechanism, "guarantee": release.guarantee.as_card(),
                              "row_level": release.row_level_card(), "created_utc": release.created_utc,
                              "sha256": ""}, dataset)

    @classmethod
    def from_card(cls, card: dict[str, Any], dataset: str = "") -> LedgerEntry:
        """The entry of a release card, at the card's row-level guarantee (``row_level``: replace-one,
        label included), so that every release is counted in one unit.

        **Unbounded** (``epsilon = inf``, replace-one) when the card has no finite row-level
        epsilon: its ``row_level`` epsilon is ``"inf"`` (the papers' per-class modes, whose class
        sizes and labels are public), or its guarantee does not hold (``holds: false``: a public
        fact read from the private data, or rows dropped for missing values), whatever epsilon
        the calibration used. Cards without ``row_level`` (written before it existed) are booked
        at their own guarantee and relation."""
        g = card["guarantee"]
        row = card.get("row_level")
        holds = g.get("holds", True) is not False
        epsilon = math.inf
        delta = g.get("delta") or 0.0
        if isinstance(row, dict):
            holds = holds and row.get("holds", True) is not False
            value = row.get("epsilon")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                g, delta = row, row.get("delta") or 0.0
        if holds and isinstance(g.get("epsilon"), (int, float)):
            epsilon = float(g["epsilon"])
        neighbouring = "replace-one" if math.isinf(epsilon) else g["neighbouring"]
        return cls(
            mechanism=card["mechanism"], epsilon=epsilon, delta=float(delta),
            neighbouring=neighbouring, dataset=dataset, created_utc=card["created_utc"],
            sha256=card["sha256"],
        )


@dataclass(frozen=True)
class RelationTotal:
    """Basic-composition totals of the releases under one neighbouring relation."""

    epsilon: float
    delta: float
    releases: int


@dataclass
class Ledger:
    """A list of :class:`LedgerEntry` with per-relation basic-composition totals and a budget check.

    ``budget`` / ``delta_budget`` are the budgets last used with this ledger (stored in its file,
    ``None`` = none); each relation's total is checked against them separately (module docstring).
    """

    entries: list[LedgerEntry] = field(default_factory=list)
    budget: float | None = None
    delta_budget: float | None = None

    def __post_init__(self) -> None:
        self.set_budgets(self.budget, self.delta_budget)

    def set_budgets(self, budget: float | None, delta_budget: float | None) -> None:
        """Set both budgets (``None``: none); raises ``ValueError`` as :func:`check_budgets`."""
        self.budget, self.delta_budget = check_budgets(budget, delta_budget)

    # ------------------------------------------------------------------ totals
    @property
    def total_epsilon(self) -> float:
        """Sum of every entry's epsilon (a total only when all entries share one relation)."""
        return safe_sum(e.epsilon for e in self.entries)

    @property
    def total_delta(self) -> float:
        """Sum of every entry's delta (a total only when all entries share one relation)."""
        return safe_sum(e.delta for e in self.entries)

    def totals(self) -> dict[str, RelationTotal]:
        """``{neighbouring relation: RelationTotal}``, relations in order of first use."""
        by: dict[str, list[LedgerEntry]] = {}
        for e in self.entries:
            by.setdefault(e.neighbouring, []).append(e)
        return {rel: RelationTotal(safe_sum(e.epsilon for e in es), safe_sum(e.delta for e in es),
                                   len(es)) for rel, es in by.items()}

    def total(self, neighbouring: str) -> RelationTotal:
        """The totals of one relation (zero if it has no release)."""
        return self.totals().get(neighbouring, RelationTotal(0.0, 0.0, 0))

    # ------------------------------------------------------------------ budget
    def _budgets(self, budget: float | None, delta_budget: float | None) -> tuple[float | None, float | None]:
        budget, delta_budget = check_budgets(budget, delta_budget)
        return (self.budget if budget is None else budget,
                self.delta_budget if delta_budget is None else delta_budget)

    def would_exceed(self, epsilon: float, budget: float | None = None, *, delta: float = 0.0,
                     delta_budget: float | None = None, neighbouring: str = "replace-one",
                     allow_unbounded: bool = False) -> bool:
        """True if adding a release of ``(epsilon, delta)`` under ``neighbouring`` pushes that
        relation's total past its budget (``None``: the ledger's own budget, if any)."""
        entry = LedgerEntry("?", epsilon, delta, neighbouring)
        return self.refusal(entry, budget, delta_budget, allow_unbounded=allow_unbounded) is not None

    def spent(self, neighbouring: str = "replace-one", budget: float | None = None) -> bool:
        """True when the relation's epsilon total has reached its budget (nothing more fits)."""
        budget, _ = self._budgets(budget, None)
        return budget is not None and self.total(neighbouring).epsilon >= budget * (1 - BUDGET_RTOL)

    def refusal(self, entry: LedgerEntry, budget: float | None = None,
                delta_budget: float | None = None, *, allow_unbounded: bool = False) -> str | None:
        """Why ``entry`` may not be added (one sentence), or ``None`` if it fits the budgets.

        An unbounded entry (``epsilon = inf``) needs ``allow_unbounded`` (the explicit opt-in) and
        a relation whose epsilon budget is not yet spent; it is never compared with the budget by
        its epsilon (it cannot fit any finite one), and its delta is checked as any other."""
        budget, delta_budget = self._budgets(budget, delta_budget)
        t = self.total(entry.neighbouring)
        rel = entry.neighbouring
        if entry.unbounded:
            if not allow_unbounded:
                return ("this release has no finite row-level epsilon (its guarantee does not hold, or "
                        "its relation leaves a record's label unprotected): it would be booked as "
                        "epsilon = inf, which needs an explicit opt-in")
            if budget is not None and self.spent(rel, budget):
                return (f"the {rel} budget {budget:g} is already spent (total epsilon = "
                        f"{_fmt_eps(t.epsilon)}): not even an opted-in unbounded release is admitted")
        elif budget is not None and t.epsilon + entry.epsilon > budget * (1 + BUDGET_RTOL):
            return (f"this release (epsilon = {entry.epsilon:.4g}, {rel}) would bring the {rel} total to "
                    f"epsilon = {_fmt_eps(t.epsilon + entry.epsilon)}, over the budget {budget:g}")
        if delta_budget is not None and t.delta + entry.delta > delta_budget * (1 + BUDGET_RTOL):
            return (f"this release (delta = {entry.delta:.3g}, {rel}) would bring the {rel} total to "
                    f"delta = {t.delta + entry.delta:.3g}, over the delta budget {delta_budget:g}")
        return None

    def check(self, entry: LedgerEntry, budget: float | None = None,
              delta_budget: float | None = None, *, allow_unbounded: bool = False) -> None:
        """Raise :class:`BudgetExceededError` if ``entry`` does not fit (see :meth:`refusal`)."""
        reason = self.refusal(entry, budget, delta_budget, allow_unbounded=allow_unbounded)
        if reason is not None:
            raise BudgetExceededError(f"refused: {reason}; nothing was written")

    def add(self, entry: LedgerEntry) -> None:
        """Append ``entry`` (no budget check: use :meth:`check` first, or :func:`ledger_transaction`)."""
        self.entries.append(entry)

    def merge(self, other: Ledger) -> int:
        """Add the entries of ``other`` not already here (same fields); returns how many were added.

        Budgets: the smaller of the two where both are set (a merge never loosens a budget).
        """
        seen = set(self.entries)
        new = [e for e in other.entries if e not in seen]
        self.entries.extend(new)
        self.budget = _smaller(self.budget, other.budget)
        self.delta_budget = _smaller(self.delta_budget, other.delta_budget)
        return len(new)

    def summary(self) -> str:
        """One paragraph: number of releases and the totals, per relation when there are several."""
        totals = self.totals()
        text = f"{len(self.entries)} release(s); "
        if len(totals) <= 1:
            rel = next(iter(totals), None)
            text += (f"total epsilon = {_fmt_eps(self.total_epsilon)}, total delta = {self.total_delta:.3g} "
                     "(basic composition" + (f", neighbouring = {rel})" if rel else ")"))
        else:
            text += ("totals per neighbouring relation (basic composition): "
                     + "; ".join(f"{rel}: epsilon = {_fmt_eps(t.epsilon)}, delta = {t.delta:.3g}"
                                 for rel, t in totals.items())
                     + ". Releases use different neighbouring relations; no conversion between "
                     "them is stated, so the totals are kept apart and each is checked against "
                     "the budget separately")
        unbounded = sum(e.unbounded for e in self.entries)
        if unbounded:
            text += (f"; {unbounded} release(s) booked as unbounded (epsilon = inf: no finite "
                     "row-level guarantee)")
        if self.budget is not None or self.delta_budget is not None:
            text += "; budget: " + ", ".join(
                s for s in (f"epsilon {self.budget:g}" if self.budget is not None else "",
                            f"delta {self.delta_budget:g}" if self.delta_budget is not None else "") if s)
            text += " per relation" if len(totals) > 1 else ""
        return text

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        """The file's content (module docstring: version 2, readable as version 1)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "composition": "basic",
            "total_epsilon": _json_epsilon(self.total_epsilon),
            "total_delta": self.total_delta,
            "totals_by_neighbouring": {rel: {**asdict(t), "epsilon": _json_epsilon(t.epsilon)}
                                       for rel, t in self.totals().items()},
            "budget": {"epsilon": self.budget, "delta": self.delta_budget},
            "entries": [{**asdict(e), "epsilon": _json_epsilon(e.epsilon)} for e in self.entries],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    @classmethod
    def from_json(cls, text: str | bytes, source: str = "the ledger") -> Ledger:
        """Parse a ledger file's content (version 1 or 2).

        Raises
        ------
        DataValidationError
            ``"<source> is not a dpcore ledger file: ..."`` for anything else (bad JSON, NaN,
            missing or unknown entry fields, negative or non-finite values, bad budgets).
        """
        try:
            raw = json.loads(text, parse_constant=_refuse_constant)
            if not isinstance(raw, dict) or not isinstance(raw["entries"], list):
                raise TypeError("expected an object with a list of entries")
            if raw.get("format", FORMAT) != FORMAT:
                raise TypeError(f"format is {raw['format']!r}")
            budget = raw.get("budget") or {}
            if not isinstance(budget, dict):
                raise TypeError("budget must be an object")
            entries = []
            for e in raw["entries"]:
                if not isinstance(e, dict):
                    raise TypeError(f"an entry must be an object, got {e!r}")
                entries.append(LedgerEntry(**e))
            return cls(entries, budget.get("epsilon"), budget.get("delta"))
        except (ValueError, KeyError, TypeError, RecursionError) as exc:  # RecursionError: deep nesting
            raise DataValidationError(f"{source} is not a dpcore ledger file: {exc}") from None

    # ------------------------------------------------------------------ files
    @classmethod
    def load(cls, path: str | Path) -> Ledger:
        """Read a ledger JSON file; a missing file is an empty ledger.

        Raises
        ------
        DataValidationError
            If the path is a symbolic link (dangling or not) or not a regular file, or the file is
            not a ledger.
        """
        path = check_ledger_path(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return cls()
        except OSError as exc:
            raise DataValidationError(f"cannot read the ledger {path}: {exc.strerror or exc}") from None
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise DataValidationError(f"the ledger {path} is not a regular file")
            check_single_name(path, info)  # also under the lock (ledger_transaction re-reads here)
            data = fh.read(MAX_LEDGER_BYTES + 1)
        if len(data) > MAX_LEDGER_BYTES:
            raise DataValidationError(f"{path} is not a dpcore ledger file: larger than "
                                      f"{MAX_LEDGER_BYTES // 2**20} MB")
        return cls.from_json(data, str(path))

    def save(self, path: str | Path) -> None:
        """Replace ``path`` atomically: temporary file in the same folder, fsync, rename, fsync of
        the folder. A failure leaves the old file as it was (and no temporary file).

        Concurrent writers must hold the lock: use :func:`ledger_transaction`.
        """
        _atomic_write(check_ledger_path(path), self.to_json().encode())


def _fmt_eps(value: float) -> str:
    return "inf (unbounded)" if math.isinf(value) else f"{value:.4g}"


def _smaller(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a ledger may hold")


def lock_path(path: str | Path) -> Path:
    """The lock file of ledger ``path``: ``<path>.lock`` beside it."""
    path = Path(path)
    return path.with_name(path.name + ".lock")


def check_single_name(path: Path, st: os.stat_result) -> None:
    """Refuse a ledger file with more than one name (hard links: ``st_nlink > 1``).

    Two names of one file would be two ledgers: each name has its own lock (``<name>.lock``, or
    SQLite's journal ``<name>-journal``), and the first atomic rename of a JSON ledger gives one
    name a new file while the other keeps the old one, so two processes could each admit a
    release against the same budget.

    Raises
    ------
    DataValidationError
        Naming the file and the number of names.
    """
    if st.st_nlink > 1:
        raise DataValidationError(
            f"the ledger {path} has {st.st_nlink} names (hard links): each name would be locked "
            "separately and count its own copy of the budget; remove the other names and use one path")


def check_ledger_path(path: str | Path) -> Path:
    """``path`` as a :class:`Path` if it can be a ledger: not a symbolic link (dangling ones
    included), a regular file if it exists, in an existing folder.

    Raises
    ------
    DataValidationError
        Naming the problem.
    """
    path = Path(path)
    for p, what in ((path, "ledger"), (lock_path(path), "ledger's lock file")):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise DataValidationError(f"cannot use the {what} {p}: {exc.strerror or exc}") from None
        if stat.S_ISLNK(st.st_mode):
            raise DataValidationError(f"the {what} {p} is a symbolic link; give the real file's path")
        if not stat.S_ISREG(st.st_mode):
            raise DataValidationError(f"the {what} {p} is not a regular file")
        if what == "ledger":
            check_single_name(p, st)
    if not path.parent.is_dir():
        raise DataValidationError(f"the ledger's folder {path.parent} does not exist; create it first")
    return path


def _atomic_write(path: Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` through a fsynced temporary file renamed over it."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        with os.fdopen(fd, "wb") as fh:
            if mode is not None:  # the new ledger keeps the old one's permissions
                os.fchmod(fh.fileno(), mode)
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX: fsync the directory)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_stale_temporaries(path: Path) -> None:
    """Temporary ledgers left by killed writers (only lock holders write them, so none is live)."""
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        if tmp.is_file() and not tmp.is_symlink():
            tmp.unlink(missing_ok=True)


def committable(reserved: LedgerEntry | None, entry: LedgerEntry | None) -> LedgerEntry:
    """The entry a transaction's ``commit(entry)`` records: ``entry`` (or the reservation itself),
    which must cost what was reserved.

    Raises
    ------
    RuntimeError
        No reservation, or ``entry`` differs from it in epsilon, delta or relation.
    """
    entry = entry or reserved
    if reserved is None or entry is None:
        raise RuntimeError("commit() needs a reservation: call check(entry) first")
    if (entry.epsilon, entry.delta, entry.neighbouring) != (reserved.epsilon, reserved.delta,
                                                            reserved.neighbouring):
        raise RuntimeError("the committed entry must have the reserved epsilon, delta and relation")
    return entry


@dataclass
class LedgerTransaction:
    """The state inside :func:`ledger_transaction`: the ledger as re-read under the lock.

    ``check(entry)`` reserves (raises if over budget), ``commit(entry)`` records durably,
    ``revert()`` takes back a committed entry whose release could not be published.
    """

    path: Path
    ledger: Ledger
    budget: float | None
    delta_budget: float | None
    reserved: LedgerEntry | None = None
    committed: LedgerEntry | None = None

    def check(self, entry: LedgerEntry, *, allow_unbounded: bool = False) -> None:
        """Reserve ``entry``: raise :class:`BudgetExceededError` if it does not fit the budgets
        (an unbounded entry needs ``allow_unbounded``: :meth:`Ledger.refusal`).

        Nothing is written; the lock keeps the reservation valid until :meth:`commit`.
        """
        if self.committed is not None:
            raise RuntimeError("this transaction already committed an entry")
        self.ledger.check(entry, self.budget, self.delta_budget, allow_unbounded=allow_unbounded)
        self.reserved = entry

    def commit(self, entry: LedgerEntry | None = None) -> None:
        """Record the reserved entry (or ``entry``, which must have the reserved cost) durably.

        Raises
        ------
        RuntimeError
            Without a reservation, or if ``entry`` costs more than the reservation.
        OSError
            The ledger could not be written: the old ledger is intact and nothing is recorded.
        """
        entry = committable(self.reserved, entry)
        new = Ledger([*self.ledger.entries, entry], self.budget, self.delta_budget)
        new.save(self.path)
        self.ledger, self.committed, self.reserved = new, entry, None

    def revert(self) -> None:
        """Remove the committed entry again (its release was not published after all)."""
        if self.committed is None:
            return
        entries = list(self.ledger.entries)
        entries.remove(self.committed)
        old = Ledger(entries, self.budget, self.delta_budget)
        old.save(self.path)
        self.ledger, self.committed = old, None


@contextmanager
def ledger_transaction(path: str | Path, *, budget: float | None = None,
                       delta_budget: float | None = None) -> Iterator[LedgerTransaction]:
    """Hold ledger ``path``'s lock from the budget check to the record.

    ::

        with ledger_transaction("L.json", budget=1.0) as tx:
            tx.check(entry)            # reserve: BudgetExceededError if over budget
            ... write the release to temporary files ...
            tx.commit(entry)           # the entry is on disk
            ... rename the temporary files into place (on failure: tx.revert()) ...

    Blocks until the exclusive ``flock`` on ``<path>.lock`` is free, then re-reads the ledger.
    ``budget`` / ``delta_budget`` default to the budgets stored in the ledger; given ones are stored
    with the next commit. Leaving the block without :meth:`~LedgerTransaction.commit` leaves the file
    untouched. Temporary ledgers of killed writers are removed.

    Raises
    ------
    ValueError
        Bad budgets (NaN, infinite, <= 0; delta outside [0, 1]).
    DataValidationError
        A symbolic-link or non-regular ledger or lock file, a missing folder, a file that is not a
        ledger.
    """
    budget, delta_budget = check_budgets(budget, delta_budget)
    path = check_ledger_path(path)
    lock = lock_path(path)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise DataValidationError(f"cannot open the ledger's lock file {lock}: {exc.strerror or exc}") \
            from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DataValidationError(f"the ledger's lock file {lock} is not a regular file")
        fcntl.flock(fd, fcntl.LOCK_EX)
        ledger = Ledger.load(path)  # re-read under the lock: another run may have committed
        _remove_stale_temporaries(path)
        yield LedgerTransaction(path, ledger, budget if budget is not None else ledger.budget,
                                delta_budget if delta_budget is not None else ledger.delta_budget)
    finally:
        os.close(fd)  # closing the descriptor releases the lock
