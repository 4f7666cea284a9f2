"""Per-session memory of the app (issue 17): a byte-bounded memo per session, and the memory of
ended sessions given back (their uploads, their state, cycles frozen by ``tune_process``)."""

from __future__ import annotations

import gc
import inspect
import threading
import weakref
from collections import OrderedDict
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from app import runner, state
from dpcore.data import load_dataset


class _SessionState(dict):
    """``st.session_state`` as the memo uses it: a mapping with attribute access."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@pytest.fixture
def session(monkeypatch):
    ss = _SessionState(_memo=OrderedDict())
    monkeypatch.setattr(state, "st", SimpleNamespace(session_state=ss))
    return ss


def test_memo_keeps_a_session_under_its_byte_limit(session, monkeypatch):
    monkeypatch.setattr(state, "MEMO_MAX_BYTES", 10_000)
    calls = []

    def array(n_floats, tag):
        def compute():
            calls.append(tag)
            return SimpleNamespace(release=np.zeros(n_floats))
        return compute

    for i in range(3):
        state.memo(("r", i), array(400, i))  # 3,200 bytes each: three fit
    assert list(session._memo) == [("r", 0), ("r", 1), ("r", 2)]
    state.memo(("r", 0), array(400, "again"))  # a hit: no recomputation, becomes the newest
    assert calls == [0, 1, 2]
    state.memo(("r", 3), array(400, 3))  # 12,800 bytes: the least recently used goes
    assert list(session._memo) == [("r", 2), ("r", 0), ("r", 3)]
    state.memo(("big",), array(5_000, "big"))  # 40,000 bytes alone: kept, everything else dropped
    assert list(session._memo) == [("big",)]
    assert set(session._memo_bytes) == {("big",)}
    monkeypatch.setattr(state, "MEMO_MAX_BYTES", 10**9)
    for i in range(state.MEMO_SIZE + 3):  # the entry limit still applies
        state.memo(("small", i), lambda: 1)
    assert len(session._memo) == state.MEMO_SIZE


def test_approx_nbytes_counts_datasets_releases_and_tables():
    ds = load_dataset("digits")
    assert state.approx_nbytes(ds) >= ds.X.nbytes
    res = runner.draw_release("local-gaussian", {"epsilon": 1.0, "delta": 1e-5}, ds, seed=0)
    assert res.release is not None
    assert state.approx_nbytes(res) >= res.release.data.nbytes
    frame = pd.DataFrame(np.zeros((1000, 4)))
    assert state.approx_nbytes(("upload", frame)) >= 32_000
    X = np.zeros((100, 10))
    assert state.approx_nbytes([X, X, {"same": X}]) == X.nbytes  # one array counted once


class _Holder:
    """Cycle garbage around a large array, as a closed session's objects are."""

    def __init__(self) -> None:
        self.me = self
        self.data = np.zeros(1 << 20)


@pytest.mark.slow
def test_reclaim_memory_frees_cycles_frozen_while_a_session_lived():
    holder = _Holder()
    alive = weakref.ref(holder)
    gc.freeze()  # what tune_process does when a page imports a library while the session lives
    try:
        del holder
        gc.collect()
        assert alive() is not None  # frozen: the collector never looks at it again
        state.reclaim_memory()
        assert alive() is None
    finally:
        gc.unfreeze()


class _FakeSessionManager:
    """The two parts of Streamlit's ``WebsocketSessionManager`` the reaper reads."""

    def __init__(self, clock) -> None:
        from streamlit.runtime.caching.ttl_cache import TTLCache
        from streamlit.runtime.memory_session_storage import MemorySessionStorage

        self.active: list = []
        self._session_storage = MemorySessionStorage()
        self._session_storage._cache = TTLCache(maxsize=128, ttl=120, timer=lambda: clock[0])
        self._storage_lock = threading.Lock()

    def list_sessions(self) -> list:
        return self.active + self._session_storage.list()


def test_the_reaper_frees_the_uploads_and_state_of_ended_sessions(monkeypatch):
    from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
    from streamlit.runtime.session_manager import SessionInfo
    from streamlit.runtime.uploaded_file_manager import UploadedFileRec
    from streamlit.runtime.websocket_session_manager import WebsocketSessionManager

    # the internals read are still there in the installed Streamlit
    assert "_session_storage" in inspect.getsource(WebsocketSessionManager.__init__)
    assert "_storage_lock" in inspect.getsource(WebsocketSessionManager)
    assert hasattr(WebsocketSessionManager, "list_sessions")

    monkeypatch.setattr(state, "_seen_sessions", set())
    clock = [0.0]
    mgr = _FakeSessionManager(clock)
    files = MemoryUploadedFileManager("/_stcore/upload_file")
    runtime = SimpleNamespace(_session_mgr=mgr, uploaded_file_mgr=files)

    def session(sid: str) -> SessionInfo:
        return SessionInfo(client=None, session=SimpleNamespace(id=sid, state=_Holder()))

    a, b = session("a"), session("b")
    mgr.active = [a, b]
    for sid in ("a", "b"):
        files.add_file(sid, UploadedFileRec(f"{sid}1", "bomb.csv.gz", "application/gzip", bytes(1000)))
    assert state.reap_ended_sessions(runtime) == []
    state_of_b = weakref.ref(b.session.state)
    # b's browser closes: Streamlit keeps it for a reconnection, then lets it expire
    mgr.active = [a]
    mgr._session_storage.save(b)
    del b
    assert state.reap_ended_sessions(runtime) == []  # still kept for a reconnection
    assert set(files.file_storage) == {"a", "b"}
    clock[0] = 121.0
    assert len(mgr._session_storage._cache._data) == 1  # expired, yet still held by the cache
    gc.freeze()  # b's state was frozen while it lived
    try:
        assert state.reap_ended_sessions(runtime) == ["b"]
        assert set(files.file_storage) == {"a"}  # b's upload is gone, a's is kept
        assert len(mgr._session_storage._cache._data) == 0
        assert state_of_b() is None  # b's state freed although it had been frozen
        assert state.reap_ended_sessions(runtime) == []  # nothing more to do
    finally:
        gc.unfreeze()


def test_the_reaper_starts_only_in_a_server(monkeypatch):
    monkeypatch.setattr(state, "_reaper", None)
    monkeypatch.setattr(state, "_runtime", lambda: None)
    assert not state.start_session_reaper()
    assert state._reaper is None


@pytest.mark.slow
def test_tune_process_does_not_pin_the_script_thread_that_ran_it(monkeypatch):
    """threadpoolctl remembers the thread that set an OpenBLAS limit; in the server that is a
    session's script thread, whose run context holds the session's state. It must be released."""
    monkeypatch.setattr(state, "_modules_at_tuning", 0)
    acted = []
    thread = threading.Thread(target=lambda: acted.append(state.tune_process()))
    thread.session_state = SimpleNamespace(data=np.zeros(1000))  # the run context Streamlit attaches
    held = weakref.ref(thread.session_state.data)  # (no cycle: freed by reference counting, frozen or not)
    try:
        thread.start()
        thread.join()
        assert acted == [True]
        del thread
        assert held() is None
    finally:
        gc.unfreeze()
