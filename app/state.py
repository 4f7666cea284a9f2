"""Per-session state of the app: the dataset, the split, the mechanism and its parameters.

Uploaded data live only here, in ``st.session_state`` (one user's session), never in a cache
shared between users and never on disk (SPEC section 8). Bundled datasets are public, so their
parsing is cached across sessions with ``st.cache_data``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import hashlib
import json
import math
import sys
import threading
import time
import tomllib
import warnings
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st

from dpcore.bounds import resolve_bound_rules
from dpcore.data import Dataset, bundled_datasets, category_lists, load_dataset, parse_bounds, read_table
from dpcore.exceptions import DataValidationError, PrivacyLeakWarning
from dpcore.ledger import MAX_LEDGER_BYTES, Ledger
from dpcore.limits import env_bytes
from dpcore.mechanisms import MECHANISMS, available_mechanisms
from dpcore.threads import blas_threads
from dpcore.validation import check_value_list, data_bounds_message

__all__ = [
    "BLAS_THREADS",
    "CONFIG_FILE",
    "DEFAULT_DATASET",
    "DEFAULT_MECHANISM",
    "DEFAULT_UPLOAD_LIMIT_MB",
    "DEFAULT_SESSION_MEMORY",
    "MEMO_MAX_BYTES",
    "MEMO_SIZE",
    "PublicTable",
    "REAP_INTERVAL_S",
    "SESSION_MEMORY_ENV",
    "WIDGET_PREFIX",
    "apply_bounds_edit",
    "apply_recommendation",
    "apply_bounds_file",
    "approx_nbytes",
    "bundled_catalogue",
    "check_fits_session",
    "data_bounds_warning",
    "dataset",
    "enforce_session_budget",
    "init_state",
    "live_session_ids",
    "load_bundled",
    "load_public_table",
    "mechanism_names",
    "memo",
    "memo_get",
    "parse_categories_upload",
    "parse_classes_upload",
    "public_table",
    "read_ledger_upload",
    "recommendation",
    "reap_ended_sessions",
    "reclaim_memory",
    "set_column_bounds",
    "session_memory",
    "session_memory_budget",
    "set_dataset",
    "split",
    "split_sizes",
    "start_session_reaper",
    "tune_process",
    "upload_limit_bytes",
    "upload_limit_mb",
]

DEFAULT_DATASET = "digits"
#: the mechanism of a session whose dataset has no recommendation (never the case for a table with
#: two or more features): the recommended one (:func:`recommendation`) is the default
DEFAULT_MECHANISM = "pca-gauss"
#: the epsilon the recommendation is made for (the epsilon control's default)
RECOMMENDATION_EPSILON = 1.0
MEMO_SIZE = 12
#: Bytes of arrays and tables one session's memo may hold (parsed uploads, splits, releases): the
#: oldest entries are dropped first, the newest is always kept. With the 50 MB upload cap one entry
#: can hold a few hundred MB, so twelve entries could otherwise keep gigabytes per session.
MEMO_MAX_BYTES = 512 * 2**20
#: The per-session memory budget (:func:`session_memory_budget`): every array, table and file one
#: session holds (its uploaded table, uploaded files, the memo's releases, views and figures' data,
#: its release history and result tables) counted by :func:`session_memory`, and kept under it by
#: :func:`memo` and :func:`enforce_session_budget`; a table that would not fit is refused at upload.
SESSION_MEMORY_ENV = "DP_EXPLORER_SESSION_MEMORY"
DEFAULT_SESSION_MEMORY = 256 * 2**20
#: Seconds between two looks for sessions that ended (:func:`start_session_reaper`).
REAP_INTERVAL_S = 10.0
WIDGET_PREFIX = "p:"
#: The hardened server configuration shipped with the repository (``server.maxUploadSize``).
CONFIG_FILE = Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml"
DEFAULT_UPLOAD_LIMIT_MB = 50.0


#: BLAS threads per server process: dpcore's rule for every release (:func:`dpcore.threads.blas_threads`,
#: one unless the environment says otherwise). The server runs many sessions' scripts at once, so
#: parallelism comes from sessions; OpenBLAS threads that wait for a busy core spin instead of
#: sleeping: on this 2-core machine with a browser on the other core, a 2-component PCA of
#: 1,347 x 64 rows took 70 ms per slider move with two threads (py-spy) and 1 ms with one.
BLAS_THREADS = blas_threads()
_modules_at_tuning = 0


def tune_process() -> bool:
    """Per-process settings for a responsive multi-session server; cheap to call on every run.

    Acts only when new modules were imported since the last call (first visits of pages load
    libraries), so a steady state costs one ``len(sys.modules)``:

    - BLAS thread pools (OpenBLAS, OpenMP) of the libraries loaded so far are limited to
      :data:`BLAS_THREADS` (``threadpoolctl``, a scikit-learn dependency);
    - the objects alive now (imported modules, mostly) are moved out of the garbage collector's
      reach. Streamlit runs a full ``gc.collect(2)`` after every script run
      (``runner.postScriptGC``); with Streamlit, pandas, scikit-learn and Plotly imported that is
      about 180,000 tracked objects and 0.11-0.13 s per collection here, 40 % of the server's CPU
      per slider move under py-spy (the app's config now turns that collection off:
      ``app.launch.RUNNER_SETTINGS``; Python's own collections and the reaper's remain). ``gc.freeze()``
      (made for long-lived servers) moves them to a
      permanent generation that collections skip (a collection then takes microseconds); they
      are still freed by reference counting. The garbage is collected first, so none is frozen.
      What a session holds at such a moment is frozen too: freed by reference counting when the
      session ends, but never by the cycle collector. Freezes happen only on first imports, a
      handful of times per server process, so that cost is bounded.

    Returns whether it acted.
    """
    global _modules_at_tuning
    if len(sys.modules) <= _modules_at_tuning:
        return False
    import threadpoolctl

    threadpoolctl.threadpool_limits(limits=BLAS_THREADS)
    # threadpoolctl >= 3.6 remembers the thread that set an OpenBLAS limit (a class attribute, kept
    # until cleared). Here that is a session's script thread, whose run context holds the session's
    # state: that session's uploads and releases would stay in memory for the life of the server.
    controller = getattr(threadpoolctl, "OpenBLASController", None)
    if hasattr(controller, "clear_controlling_thread"):
        controller.clear_controlling_thread(force=True)
    gc.collect()
    gc.freeze()
    _modules_at_tuning = len(sys.modules)
    start_session_reaper()
    return True


# ------------------------------------------------------------------ memory of ended sessions
_seen_sessions: set[str] = set()
_reaper: threading.Thread | None = None
_reaper_guard = threading.Lock()


def _runtime() -> Any:
    """The running Streamlit ``Runtime``, or None (AppTest, scripts, other servers)."""
    try:
        from streamlit.runtime import Runtime

        return Runtime.instance() if Runtime.exists() else None
    except Exception:  # noqa: BLE001 - an internal API: without it, nothing is reclaimed
        return None


def live_session_ids(runtime: Any) -> set[str]:
    """Ids of the sessions the server still keeps: connected ones and disconnected ones kept for
    a reconnection (``server.disconnectedSessionTTL``, 120 s by default). Expired ones are purged
    from Streamlit's session storage first: its cache only drops them on its next write, so a
    closed session's state (uploads, releases) would otherwise stay until another one closes."""
    mgr = runtime._session_mgr
    storage = getattr(getattr(mgr, "_session_storage", None), "_cache", None)
    lock = getattr(mgr, "_storage_lock", None)
    if storage is not None and hasattr(storage, "expire"):
        if lock is not None:
            with lock:
                storage.expire()
        else:
            storage.expire()
    return {info.session.id for info in mgr.list_sessions()}


def reclaim_memory() -> None:
    """Free what ended sessions left: cycle garbage, including objects :func:`tune_process` froze
    while those sessions were alive (``gc.unfreeze``, collect, freeze again what is still alive),
    then return freed heap pages to the OS (glibc ``malloc_trim``)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    if _libc is not None:
        _libc.malloc_trim(0)


def _load_libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return libc if libc is not None and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_libc = _load_libc()


def reap_ended_sessions(runtime: Any) -> list[str]:
    """Release the memory of the sessions that ended since the last call: their uploaded files
    in Streamlit's upload manager (kept there for good when a disconnected session expires, as
    such a session is dropped without ``shutdown()``), then :func:`reclaim_memory`.

    Returns the ids of the sessions that ended (empty: nothing was done).
    """
    mgr = runtime.uploaded_file_mgr
    with getattr(mgr, "_lock", threading.Lock()):  # before the live list: a session that connects
        with_files = set(getattr(mgr, "file_storage", {}))  # meanwhile is not taken for ended
    live = live_session_ids(runtime)
    ended = (_seen_sessions | with_files) - live
    for session_id in ended:
        mgr.remove_session_files(session_id)
    _seen_sessions.clear()
    _seen_sessions.update(live)
    if ended:
        reclaim_memory()
    return sorted(ended)


def start_session_reaper(interval: float = REAP_INTERVAL_S) -> bool:
    """Start, once per server process, a daemon thread that calls :func:`reap_ended_sessions`
    every ``interval`` seconds. Returns whether a thread was started (False outside a server)."""
    global _reaper
    runtime = _runtime()
    with _reaper_guard:
        if runtime is None or (_reaper is not None and _reaper.is_alive()):
            return False

        def loop() -> None:
            while True:
                time.sleep(interval)
                try:
                    reap_ended_sessions(runtime)
                except Exception:  # noqa: BLE001,S112 - Streamlit internals changed: try again later
                    continue
        _reaper = threading.Thread(target=loop, name="dp-explorer-session-reaper", daemon=True)
        _reaper.start()
        return True


@st.cache_data(show_spinner="Loading the bundled dataset...")
def load_bundled(name: str) -> Dataset:
    """Parse a bundled (public) dataset once per server process."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return load_dataset(name)


@st.cache_data
def bundled_catalogue() -> dict[str, dict[str, Any]]:
    return bundled_datasets()


def init_state() -> None:
    """Defaults for a new session; keeps widget values alive across pages."""
    ss = st.session_state
    if "dataset" not in ss:
        ss.dataset = load_bundled(DEFAULT_DATASET)
        ss.dataset_label = f"bundled: {DEFAULT_DATASET}"
    ss.setdefault("p:test_size", 0.25)
    ss.setdefault("mechanism", DEFAULT_MECHANISM)
    ss.setdefault("mechanism_chosen", False)  # True once the user picks a mechanism in the sidebar
    ss.setdefault("ledger", Ledger())  # the current dataset's ledger, read from the store (Release page)
    ss.setdefault("dataset_key", f"bundled:{DEFAULT_DATASET}")  # its key in the ledger store
    ss.setdefault("_memo", OrderedDict())
    # Parameter widgets ("p:" keys) outlive page switches through Streamlit's own
    # persist_state="session" (app.controls.initial). The older idiom, re-assigning every key on
    # every run, made the server push each widget's value back to the browser on every rerun.


def dataset() -> Dataset:
    return st.session_state.dataset


def set_dataset(ds: Dataset, label: str, key: str | None = None) -> None:
    """Use ``ds``; ``key``: its key in the ledger store (:func:`dpcore.ledger_store.dataset_key`),
    given when the data change (a bundled choice, an upload), kept when only bounds change."""
    ss = st.session_state
    ss.dataset = ds
    ss.dataset_label = label
    if key is not None:
        ss.dataset_key = key
    ss._memo.clear()
    ss.pop("_memo_bytes", None)
    ss.pop("pending_release", None)


def split() -> tuple[Dataset, Dataset]:
    """Train/test split of the current dataset (the test part is the real held-out data)."""
    ds = dataset()
    return memo(("split", ds.fingerprint, st.session_state["p:test_size"]),
                lambda: ds.split(st.session_state["p:test_size"], random_state=0))


def split_sizes() -> tuple[int, int]:
    """The (train, test) row counts of :func:`split` without drawing the split: ``Dataset.split``
    (scikit-learn's ``train_test_split``, stratified or not) holds out ceil(test_size * n) rows.
    The Data page shows them; importing scikit-learn for them was most of the first page's run on
    a fresh server (about 4 s of the 5 s on a loaded machine)."""
    n = dataset().n_samples
    n_test = math.ceil(float(st.session_state["p:test_size"]) * n)
    return n - n_test, n_test


def memo(key: tuple, compute: Callable[[], Any]) -> Any:
    """Session-scoped LRU memo (uploaded data must not enter the shared ``st.cache_data``).

    At most :data:`MEMO_SIZE` entries and :data:`MEMO_MAX_BYTES` bytes (:func:`approx_nbytes`),
    and no more than what the session's memory budget leaves (:func:`session_memory_budget` less
    what the session holds besides the memo); the least recently used go first, the newest entry
    is always kept.
    """
    ss = st.session_state
    cache: OrderedDict = ss._memo
    sizes: dict = ss.setdefault("_memo_bytes", {})
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    value = compute()
    cache[key] = value
    sizes[key] = approx_nbytes(value)
    _trim_memo(ss)
    return value


def _trim_memo(ss: Any) -> None:
    """Drop the least recently used memo entries (never the newest) until the memo fits its entry
    and byte limits and the session its budget."""
    cache: OrderedDict = ss._memo
    sizes: dict = ss.setdefault("_memo_bytes", {})
    for stale in [k for k in sizes if k not in cache]:  # entries cleared by set_dataset
        del sizes[stale]
    room = min(MEMO_MAX_BYTES, session_memory_budget() - sum(
        v for k, v in session_memory(ss).items() if k != "cache"))
    while len(cache) > 1 and (len(cache) > MEMO_SIZE or sum(sizes.get(k, 0) for k in cache) > room):
        old, _ = cache.popitem(last=False)
        sizes.pop(old, None)


def session_memory_budget() -> int:
    """Bytes one session may hold: ``$DP_EXPLORER_SESSION_MEMORY`` (``256M``, ``1G``...), default
    :data:`DEFAULT_SESSION_MEMORY` (256 MiB). The server's memory is then about its own (some
    300 MB with the libraries) plus the sessions' budgets, whatever they upload or draw."""
    return env_bytes(SESSION_MEMORY_ENV, DEFAULT_SESSION_MEMORY)


def session_memory(ss: Any = None) -> dict[str, int]:
    """Bytes this session holds, by holder (:func:`approx_nbytes`): ``dataset`` (an uploaded table;
    a bundled one is shared by every session through ``st.cache_data``: 0), ``files`` (the uploaded
    files the session's widgets keep), ``cache`` (the memo: releases, views, the data of figures),
    ``history`` (drawn releases kept with their files), ``results`` (the other pages' tables and the
    public reference table)."""
    ss = st.session_state if ss is None else ss
    ds = ss.get("dataset")
    bundled = str(ss.get("dataset_label", "")).startswith("bundled:")
    files = sum(int(getattr(v, "size", 0) or 0) for v in list(ss.values())
                if type(v).__name__ == "UploadedFile")
    return {
        "dataset": 0 if ds is None or bundled else approx_nbytes(ds),
        "files": files,
        "cache": sum(ss.get("_memo_bytes", {}).values()),
        "history": approx_nbytes(ss.get("release_history", [])),
        "results": approx_nbytes([ss.get(k) for k in ("_utility_results", "_compare_results", "public_table",
                                                      "not_private_release", "pending_release")]),
    }


def enforce_session_budget() -> dict[str, int]:
    """Keep this session under :func:`session_memory_budget` after a run: the memo gives up its
    least recently used entries first (:func:`_trim_memo`), then the Utility and Compare pages'
    cached result tables (computed again when next shown). The uploaded table and files, and the
    release history the user keeps, are not evicted: an upload that would not fit is refused
    (:func:`check_fits_session`). Returns what the session holds afterwards."""
    ss = st.session_state
    if "_memo" not in ss:
        return {}
    _trim_memo(ss)
    usage = session_memory(ss)
    if sum(usage.values()) > session_memory_budget():
        for key in ("_utility_results", "_compare_results"):
            if key in ss:
                ss[key] = {}
        usage = session_memory(ss)
    return usage


def check_fits_session(n_bytes: float, what: str) -> None:
    """Refuse (``DataValidationError``) a table of ``n_bytes`` that would not fit this session's
    budget next to what it keeps (uploaded files, release history; its memo and current uploaded
    table are let go when a new table is used).

    Raises
    ------
    DataValidationError
        Naming the sizes, the budget and its variable.
    """
    usage = session_memory()
    kept = usage["files"] + usage["history"]
    budget = session_memory_budget()
    if n_bytes + kept > budget:
        raise DataValidationError(
            f"{what} takes about {n_bytes / 2**20:.0f} MB in memory, and this session keeps "
            f"{kept / 2**20:.0f} MB of files and releases: over its budget of {budget / 2**20:g} MB "
            f"({SESSION_MEMORY_ENV}). Use fewer rows or columns, or the dpcore command line")


def memo_get(key: tuple) -> Any:
    """The session memo's value for ``key`` (:func:`memo`), or ``None`` when it holds none."""
    return st.session_state._memo.get(key)


def approx_nbytes(value: Any, _depth: int = 0, _seen: set[int] | None = None) -> int:
    """Bytes held by the arrays and tables inside ``value`` (NumPy arrays, pandas objects, and
    the lists, tuples, dicts and object attributes around them, 4 levels deep; each object
    counted once). Small Python objects are not counted: they are not what fills a server."""
    seen = set() if _seen is None else _seen
    if id(value) in seen or _depth > 4:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        base = value.base if isinstance(value.base, np.ndarray) else None
        return 0 if base is not None and id(base) in seen else int(value.nbytes)
    if hasattr(value, "memory_usage") and hasattr(value, "shape"):  # pandas DataFrame / Series
        try:
            usage = value.memory_usage(index=True, deep=False)
            return int(getattr(usage, "sum", lambda: usage)())
        except (TypeError, ValueError):
            return 0
    if isinstance(value, (str, bytes, int, float, bool, type(None))):
        return len(value) if isinstance(value, bytes) else 0
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
    elif hasattr(value, "__dict__"):
        items = list(vars(value).values())
    else:
        return 0
    return sum(approx_nbytes(v, _depth + 1, seen) for v in items)


def recommendation(ds: Dataset) -> dict[str, Any]:
    """The recommended mechanism and settings for ``ds``'s public facts
    (:func:`dpcore.calibration.recommended_mechanism` at epsilon = 1 with the automatic delta)."""
    from dpcore.calibration import recommended_mechanism

    def build() -> dict[str, Any]:
        rec = recommended_mechanism(ds.task, ds.n_samples, ds.n_features, epsilon=RECOMMENDATION_EPSILON,
                                    image_shape=ds.image_shape,
                                    n_classes=0 if ds.classes is None else len(ds.classes))
        if rec["mechanism"] not in mechanism_names(ds.task):
            rec = {"mechanism": mechanism_names(ds.task)[0], "parameters": {}, "reason": ""}
        return rec
    return memo(("recommendation", ds.fingerprint), build)


def apply_recommendation(ds: Dataset) -> dict[str, Any]:
    """Make the recommendation the session's default: the sidebar's mechanism, while the user has
    not chosen one (``mechanism_chosen``). Its settings are the mechanism's own automatic values
    (untouched controls), as in ``dpcore release`` without options. Returns the recommendation."""
    ss = st.session_state
    rec = recommendation(ds)
    # follow the recommendation while the mechanism is the one it set (a choice made in the sidebar,
    # or by any other code, is kept)
    automatic = ss.get("mechanism") in (ss.get("mechanism_auto", DEFAULT_MECHANISM), None)
    if not ss.get("mechanism_chosen") and automatic:
        ss.mechanism = ss.mechanism_auto = rec["mechanism"]
    return rec


def mechanism_names(task: str) -> list[str]:
    return [name for name in MECHANISMS if name in available_mechanisms(task)]


def upload_limit_mb() -> float:
    """The upload size limit in MB: the smaller of the running server's ``server.maxUploadSize``
    and the repository's ``.streamlit/config.toml`` (Streamlit's own default is 200 MB when the
    app is started from another folder without the launcher)."""
    limits = []
    try:
        limits.append(float(st.get_option("server.maxUploadSize")))
    except (RuntimeError, TypeError, ValueError):
        pass
    try:
        cfg = tomllib.loads(CONFIG_FILE.read_text())
        limits.append(float(cfg["server"]["maxUploadSize"]))
    except (OSError, KeyError, TypeError, ValueError, tomllib.TOMLDecodeError):
        pass
    return min(limits) if limits else DEFAULT_UPLOAD_LIMIT_MB


def upload_limit_bytes() -> int:
    """:func:`upload_limit_mb` in bytes (Streamlit counts 1 MB = 2**20 bytes)."""
    return int(upload_limit_mb() * 2**20)


def apply_bounds_edit(ds: Dataset, new: Any) -> tuple[Dataset | None, str | None]:
    """Apply an edit of the bounds table: ``(new dataset, None)`` or ``(None, error message)``.

    Only the sides (lo, hi) the user changed become user-declared ("user"); unedited rows and
    unedited sides keep their source, so data-derived bounds stay ``"data"`` until both sides are
    replaced (and the card keeps saying so). ``(new dataset, note)`` when a data-derived column was
    edited on one side only: the note says which columns stay flagged. ``(None, None)`` when
    nothing changed.
    """
    arr = np.asarray(new, dtype=float)
    if arr.shape != ds.bounds.shape:
        return None, f"the bounds table must have {ds.n_features} rows of lo, hi"
    if not np.isfinite(arr).all() or np.any(arr[:, 0] > arr[:, 1]):
        return None, "Each bound needs finite lo <= hi."
    changed = np.flatnonzero(np.any(arr != ds.bounds, axis=1))
    if changed.size == 0:
        if ds.bounds_source == "data":
            return None, ("These are still the minimum and maximum of the private data. Replace them "
                          "with bounds known from public sources before declaring them public.")
        return None, None
    edited_sides = arr != ds.bounds
    try:
        new_ds = ds.with_bounds(arr, "user", columns=changed.tolist(), sides=edited_sides)
    except ValueError as exc:
        return None, str(exc)
    half = [ds.feature_names[j] for j in changed if new_ds.data_side_mask()[j].any()]
    if half:
        return new_ds, ("only one side was replaced for " + ", ".join(half[:5])
                        + (", ..." if len(half) > 5 else "") + ": the other side is still the "
                        "private minimum or maximum, so these columns stay flagged as data bounds")
    return new_ds, None


def apply_bounds_file(ds: Dataset, data: bytes, filename: str) -> tuple[Dataset | None, str]:
    """Public bounds from an uploaded bounds file (the CLI's ``--bounds`` formats: JSON
    ``{"column": [lo, hi]}`` or CSV rows ``column,lo,hi``); the named columns become "user".

    Returns ``(new dataset, summary)`` or ``(None, error message)``: a file naming columns the
    table does not have is refused whole (a typo must not leave a column on data bounds).
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, f"{filename} is not UTF-8 text"
    try:
        bounds = parse_bounds(text, filename)
    except ValueError as exc:
        return None, str(exc)
    try:
        resolved = resolve_bound_rules(bounds, list(ds.feature_names))  # patterns such as "f*", nulls
    except ValueError as exc:
        return None, f"{filename}: {exc}"
    if not resolved:
        return None, f"{filename} holds no bounds (every value is empty)"
    return set_column_bounds(ds, resolved, what=f"from {filename}")


def set_column_bounds(ds: Dataset, bounds: dict[str, tuple[float, float]], *,
                      what: str = "") -> tuple[Dataset | None, str]:
    """Declare public bounds ``{column: (lo, hi)}``; those columns become "user", the others keep
    their bounds and source. Returns ``(new dataset, summary)`` or ``(None, error message)``."""
    if not bounds:
        return None, "choose at least one column"
    arr = np.array(ds.bounds, dtype=float)
    index = {c: j for j, c in enumerate(ds.feature_names)}
    for c, (lo, hi) in bounds.items():
        if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
            return None, f"the bounds of {c} need finite lo <= hi, got [{lo:g}, {hi:g}]"
        arr[index[c]] = (lo, hi)
    try:
        new = ds.with_bounds(arr, "user", columns=list(bounds))
    except ValueError as exc:
        return None, str(exc)
    left = len(new.data_bound_columns())
    return new, (f"public bounds set for {len(bounds)} column(s) {what}".rstrip() + "; "
                 + (f"{left} column(s) still have bounds from the data." if left else
                    "every column now has public bounds."))


def data_bounds_warning(ds: Dataset) -> list[str]:
    """The warning for the columns whose bounds still come from the private data (or none)."""
    cols = ds.data_bound_columns()
    if not cols:
        return []
    return [data_bounds_message(cols)]


def read_ledger_upload(data: bytes, name: str) -> Ledger:
    """An uploaded ledger file (the CLI's ``--ledger`` JSON or a session's download).

    Raises
    ------
    DataValidationError
        If it is larger than a ledger can be or is not a ledger (the message names the file).
    """
    if len(data) > MAX_LEDGER_BYTES:
        raise DataValidationError(f"{name} is not a dpcore ledger file: larger than "
                                  f"{MAX_LEDGER_BYTES // 2**20} MB")
    return Ledger.from_json(data, name)


class PublicTable:
    """Public reference rows uploaded on the Data page (``public_data`` of PubPCA / pca-identity).

    Kept apart from the private table; its short repr (the SHA-256 of the rows) keys the caches.
    """

    def __init__(self, X: np.ndarray, name: str, columns: list[str]) -> None:
        self.X = np.ascontiguousarray(X, dtype=float)
        self.name = name
        self.columns = list(columns)
        self.sha256 = hashlib.sha256(self.X.tobytes()).hexdigest()

    def __repr__(self) -> str:
        return f"PublicTable({self.sha256[:16]}, {self.X.shape[0]} rows)"


def public_table(ds: Dataset | None = None) -> PublicTable | None:
    """The uploaded public rows, if they match the current dataset's columns."""
    table = st.session_state.get("public_table")
    ds = ds or dataset()
    if table is None or table.columns != list(ds.feature_names):
        return None
    return table


def load_public_table(raw: bytes, filename: str, ds: Dataset) -> PublicTable:
    """Read an uploaded public table with the dataset's feature columns (the label, if present, is
    dropped). Raises ``ValueError`` naming the columns when they do not match."""
    frame = read_table(raw, filename, max_bytes=upload_limit_bytes())
    frame = frame.drop(columns=[c for c in [ds.label_name] if c and c in frame.columns])
    missing = [c for c in ds.feature_names if c not in frame.columns]
    if missing:
        raise ValueError(f"the public table lacks the columns {missing[:5]}"
                         f"{' ...' if len(missing) > 5 else ''} of the private table")
    X = frame[ds.feature_names].to_numpy(dtype=float)
    if not np.isfinite(X).all():
        raise ValueError("the public table has missing or infinite values")
    return PublicTable(X, filename, ds.feature_names)



def _json_upload(data: bytes, filename: str, what: str) -> Any:
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ValueError(f"the {what} file {filename} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"the {what} file {filename} is not valid JSON ({exc.msg}, line "
                         f"{exc.lineno})") from None


def parse_categories_upload(data: bytes, filename: str, columns: list[str]) -> dict[str, list[str]]:
    """An uploaded categories file in the CLI's ``--categories`` format, JSON
    ``{"column": ["cat1", "cat2", ...]}``, checked against the table's ``columns``.

    Raises
    ------
    ValueError
        Not JSON, not an object of non-empty lists, a column the table does not have, a category
        repeated within a column (readable, naming the column).
    """
    raw = _json_upload(data, filename, "categories")
    if not isinstance(raw, dict) or not raw or not all(isinstance(v, list) and v for v in raw.values()):
        raise ValueError(f"the categories file {filename} must map each column to a non-empty list: "
                         '{"column": ["cat1", "cat2", ...]}')
    unknown = [str(c) for c in raw if c not in columns]
    if unknown:
        raise ValueError(f"the categories file {filename} names column(s) this table does not have: "
                         + ", ".join(unknown[:5]))
    lists = category_lists(raw)  # no missing, nested or repeated category (1 and "1" are one)
    return {str(c): [str(v) for v in vals] for c, vals in lists.items()}


def parse_classes_upload(data: bytes, filename: str) -> list[Any]:
    """An uploaded classes file in the CLI's ``--classes FILE`` format: a JSON list such as
    ``[0, 1]`` or ``["no", "yes"]``, or ``{"classes": [...]}``.

    Raises
    ------
    ValueError
        Not JSON, not a list of at least two distinct classes.
    """
    raw = _json_upload(data, filename, "classes")
    raw = raw.get("classes") if isinstance(raw, dict) else raw
    if not isinstance(raw, list) or len(raw) < 2:
        raise ValueError(f"the classes file {filename} must hold a list of at least two classes, e.g. "
                         '[0, 1] or ["no", "yes"]')
    check_value_list(raw, f"the classes file {filename}", least=2)  # no missing, nested or repeated class
    return raw
