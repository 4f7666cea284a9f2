"""The app's persistent budget and its release history (no widgets here).

**The ledger store.** Every session of a server, and the command line, charge one SQLite ledger
store (:mod:`dpcore.ledger_store`) per dataset: ``bundled:NAME`` for a bundled dataset, the
SHA-256 of an uploaded file's bytes for an upload (the same key as ``dpcore release FILE
--ledger STORE``). The budget survives reloads, new tabs and server restarts. Its location:

- ``$DP_EXPLORER_LEDGER`` if set (a path ending in ``.sqlite``, ``.sqlite3`` or ``.db``);
- else ``$XDG_DATA_HOME/dp-explorer/ledger.sqlite``, ``~/.local/share/dp-explorer/ledger.sqlite``
  when ``XDG_DATA_HOME`` is not set (the folder is created, readable by its owner only).

The store holds no data: dataset keys (a hash or a bundled name), budgets, and per release its
mechanism, epsilon, delta, relation, time and the SHA-256 of its CSV.

**The release history.** Each charged release stays in the session (:class:`HistoryItem`: its
files as first drawn) until the user discards it: a second draw never takes the first away.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpcore.data import Dataset
from dpcore.ledger_store import STORE_SUFFIXES, LedgerStore

__all__ = [
    "LEDGER_ENV",
    "HistoryItem",
    "default_store_path",
    "file_stem",
    "session_actor",
    "store",
    "store_label",
    "unbounded_reasons",
]

#: Environment variable naming the app's ledger store.
LEDGER_ENV = "DP_EXPLORER_LEDGER"
#: Seconds a session waits for another writer (a CLI release holds the store while it writes).
APP_TIMEOUT = 30.0


def default_store_path() -> Path:
    """Where the app keeps its ledger store (module docstring)."""
    given = os.environ.get(LEDGER_ENV, "").strip()
    if given:
        path = Path(given).expanduser()
        if not str(path).lower().endswith(STORE_SUFFIXES):
            raise ValueError(f"${LEDGER_ENV} = {given} must name a ledger store file ending in "
                             f"{', '.join(STORE_SUFFIXES)}")
        return path
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "dp-explorer" / "ledger.sqlite"


def store() -> LedgerStore:
    """The app's ledger store (its folder created if missing, owner-only)."""
    path = default_store_path()
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    return LedgerStore(path, timeout=APP_TIMEOUT)


def store_label(key: str, dataset_label: str) -> str:
    """The name the store keeps for a dataset and its releases: a bundled dataset's label, and for
    an upload only its key's prefix (``upload sha256:1a2b3c4d5e6f``): an uploaded file's name can
    say what the data are about, and nothing of an upload is written to the server's disk."""
    return dataset_label if key.startswith("bundled:") else f"upload {key[:19]}"


def session_actor() -> str:
    """Who charges or raises a budget from this session: ``"app session <id>"``."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        sid = ctx.session_id if ctx is not None else "?"
    except Exception:  # noqa: BLE001 - outside a Streamlit run
        sid = "?"
    return f"app session {sid[:8]}"


def unbounded_reasons(ds: Dataset, params: dict[str, Any]) -> list[str]:
    """Why a release of ``ds`` with ``params`` would have no finite row-level epsilon (empty: it
    would have one). Public facts only: the dataset's sources and the chosen parameters."""
    reasons = []
    data_cols = ds.data_bound_columns()
    if data_cols:
        reasons.append(f"the bounds of {len(data_cols)} column(s) ({', '.join(data_cols[:4])}"
                       f"{', ...' if len(data_cols) > 4 else ''}) come from the private data")
    if ds.label_bounds_source == "data":
        reasons.append("the label's bounds come from the private data")
    if ds.classes_source == "data":
        reasons.append("the class list was read from the private data")
    if ds.missing == "drop":
        reasons.append("rows with missing values were dropped (n depends on the data)")
    if ds.task == "classification" and params.get("label_privacy") == "within-class":
        reasons.append("label privacy 'within-class' leaves each record's label unprotected")
    return reasons


def file_stem(dataset_name: str, mechanism: str, differentially_private: bool) -> str:
    """The downloaded files' stem: ``people-local-gaussian`` from ``people.csv``, with
    ``-NOT-differentially-private`` when the guarantee does not hold."""
    base = dataset_name
    for suffix in (".gz", ".csv", ".tsv", ".txt", ".parquet", ".pq", ".npz"):
        base = base.removesuffix(suffix)
    stem = f"{base or 'release'}-{mechanism}"
    return stem if differentially_private else f"{stem}-NOT-differentially-private"


@dataclass
class HistoryItem:
    """A charged release kept in the session until discarded: the drawn release, the dataset it
    was drawn from (its fingerprint, to know whether the page's output-space choices apply) and
    the files as first offered (CSV, card, report, transform)."""

    number: int
    drawn: Any
    dataset_key: str
    dataset_label: str
    fingerprint: str
    stem: str
    csv: bytes
    card: str
    report: str
    npz: bytes | None
    epsilon: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        """``Release 2: local-gaussian on bundled: digits, row-level ε = 1, <time> UTC``."""
        if not self.drawn.differentially_private:
            eps = "∞ (NOT differentially private)"
        else:
            eps = "∞ (no row-level guarantee)" if math.isinf(self.epsilon) else f"{self.epsilon:.4g}"
        return (f"Release {self.number}: {self.drawn.mechanism} on {self.dataset_label}, "
                f"row-level ε = {eps}, {self.drawn.created_utc.replace('T', ' ').removesuffix('+00:00')} UTC")
