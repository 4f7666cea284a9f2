"""Per-session state of the app: the dataset, the split, the mechanism and its parameters.

Uploaded data live only here, in ``st.session_state`` (one user's session), never in a cache
shared between users and never on disk (SPEC section 8). Bundled datasets are public, so their
parsing is cached across sessions with ``st.cache_data``.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import streamlit as st

from dpcore.data import Dataset, bundled_datasets, load_dataset
from dpcore.exceptions import PrivacyLeakWarning
from dpcore.ledger import Ledger
from dpcore.mechanisms import MECHANISMS, available_mechanisms

DEFAULT_DATASET = "digits"
DEFAULT_MECHANISM = "local-gaussian"
MEMO_SIZE = 12
WIDGET_PREFIX = "p:"


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
    # Streamlit forgets the value of a widget whose page is not shown; re-assigning the key on
    # every run keeps parameter widgets alive across pages (documented "widget behaviour" idiom).
    for key in list(ss.keys()):
        if isinstance(key, str) and key.startswith(WIDGET_PREFIX):
            ss[key] = ss[key]


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
