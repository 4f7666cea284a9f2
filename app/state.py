"""Per-session state of the app: the dataset, the split, the mechanism and its parameters.

Uploaded data live only here, in ``st.session_state`` (one user's session), never in a cache
shared between users and never on disk (SPEC section 8). Bundled datasets are public, so their
parsing is cached across sessions with ``st.cache_data``.
"""

from __future__ import annotations

import gc
import sys
import tomllib
import warnings
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st

from dpcore.data import Dataset, bundled_datasets, load_dataset
from dpcore.exceptions import PrivacyLeakWarning
from dpcore.ledger import Ledger
from dpcore.mechanisms import MECHANISMS, available_mechanisms

DEFAULT_DATASET = "digits"
DEFAULT_MECHANISM = "local-gaussian"
MEMO_SIZE = 12
WIDGET_PREFIX = "p:"
#: The hardened server configuration shipped with the repository (``server.maxUploadSize``).
CONFIG_FILE = Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml"
DEFAULT_UPLOAD_LIMIT_MB = 50.0


#: BLAS threads per server process. The server runs many sessions' scripts at once, so parallelism
#: comes from sessions; OpenBLAS threads that wait for a busy core spin instead of sleeping: on
#: this 2-core machine with a browser on the other core, a 2-component PCA of 1,347 x 64 rows took
#: 70 ms per slider move with two threads (py-spy) and 1 ms with one.
BLAS_THREADS = 1
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
      per slider move under py-spy. ``gc.freeze()`` (made for long-lived servers) moves them to a
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
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=BLAS_THREADS)
    gc.collect()
    gc.freeze()
    _modules_at_tuning = len(sys.modules)
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
    ss.setdefault("ledger", Ledger())
    ss.setdefault("_memo", OrderedDict())
    # Parameter widgets ("p:" keys) outlive page switches through Streamlit's own
    # persist_state="session" (app.controls.initial). The older idiom, re-assigning every key on
    # every run, made the server push each widget's value back to the browser on every rerun.


def dataset() -> Dataset:
    return st.session_state.dataset


def set_dataset(ds: Dataset, label: str) -> None:
    ss = st.session_state
    ss.dataset = ds
    ss.dataset_label = label
    ss._memo.clear()
    ss.pop("pending_release", None)


def split() -> tuple[Dataset, Dataset]:
    """Train/test split of the current dataset (the test part is the real held-out data)."""
    ds = dataset()
    return memo(("split", ds.fingerprint, st.session_state["p:test_size"]),
                lambda: ds.split(st.session_state["p:test_size"], random_state=0))


def memo(key: tuple, compute: Callable[[], Any]) -> Any:
    """Session-scoped LRU memo (uploaded data must not enter the shared ``st.cache_data``)."""
    cache: OrderedDict = st.session_state._memo
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    value = compute()
    cache[key] = value
    while len(cache) > MEMO_SIZE:
        cache.popitem(last=False)
    return value


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


def data_bounds_warning(ds: Dataset) -> list[str]:
    """The warning for the columns whose bounds still come from the private data (or none)."""
    cols = ds.data_bound_columns()
    if not cols:
        return []
    return [f"no public bounds for {len(cols)} column(s) ({', '.join(cols[:5])}"
            f"{', ...' if len(cols) > 5 else ''}): they were computed from the private data. The "
            "differential-privacy guarantee does NOT hold; give public bounds instead."]
