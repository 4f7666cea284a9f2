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


# ------------------------------------------------------------------ the per-session budget
def test_the_memo_leaves_room_for_what_the_session_keeps(session, monkeypatch):
    """The memo was held to its own 512 MB only: a session with an uploaded table, files and a
    release history could hold all of them and the memo's 512 MB besides. The session's budget
    (DP_EXPLORER_SESSION_MEMORY) is now shared: the memo gets what the rest leaves, the newest
    entry always kept."""
    monkeypatch.setenv(state.SESSION_MEMORY_ENV, "100K")
    frame = pd.DataFrame(np.zeros((1_000, 8)), columns=list("abcdefgh"))
    session.update(dataset=load_dataset(frame, bounds=(0, 1)), dataset_label="upload: t.csv")  # 64,000 bytes
    for i in range(5):
        state.memo(("r", i), lambda: np.zeros(2_000))  # 16,000 bytes each
    usage = state.session_memory(session)
    assert usage["dataset"] >= 64_000 and usage["cache"] == 32_000, usage
    assert list(session._memo) == [("r", 3), ("r", 4)]
    assert sum(usage.values()) <= state.session_memory_budget()
    session.update(dataset_label="bundled: digits")  # a bundled table is shared: it does not count
    state.memo(("r", 5), lambda: np.zeros(2_000))
    assert len(session._memo) == 3
    monkeypatch.setenv(state.SESSION_MEMORY_ENV, "lots")
    with pytest.raises(ValueError, match="DP_EXPLORER_SESSION_MEMORY='lots' is not a positive size"):
        state.session_memory_budget()


st_testing = pytest.importorskip("streamlit.testing.v1")
ENTRY = str(state.CONFIG_FILE.parents[1] / "app" / "streamlit_app.py")


def test_an_upload_that_does_not_fit_the_session_budget_is_refused(monkeypatch):
    """An upload under the 50 MB limit may be a table of hundreds of MB in memory; over the
    session's budget it is refused when read, before the session keeps it."""
    monkeypatch.setenv(state.SESSION_MEMORY_ENV, "1M")
    at = st_testing.AppTest.from_file(ENTRY, default_timeout=120)
    at.run()
    at.switch_page("../pages/data.py").run()
    at.radio(key="p:data_source").set_value("Upload a file").run()
    data = ("a,b,c,y\n" + "".join(f"{i % 7},{i % 5},{i % 3},{i % 2}\n" for i in range(50_000))).encode()
    at.get("file_uploader")[0].set_value(("big.csv", data, "text/csv")).run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert any("over its budget of 1 MB" in e and "SESSION\\_MEMORY" in e for e in errors), errors
    assert not [b for b in at.button if b.label == "Use this table"]
    assert at.session_state.dataset.name == "digits"


def test_a_session_stays_within_its_budget_while_it_explores(monkeypatch):
    """Every slider move draws a new release; the memo kept twelve (each with its views: 2.1 MB on
    digits) whatever the session held. With a budget of 600 KB the memo stays under it (its newest
    entry aside)."""
    monkeypatch.setenv(state.SESSION_MEMORY_ENV, "600K")
    at = st_testing.AppTest.from_file(ENTRY, default_timeout=120)
    at.run()
    at.switch_page("../pages/explore.py").run()
    from app.controls import EPSILON_GRID

    mech = at.session_state.mechanism
    for value in [e for e in EPSILON_GRID if e != float("inf")][:8]:
        at.select_slider(key=f"p:{mech}:epsilon").set_value(value).run()
        assert not at.exception, [e.value for e in at.exception]
        sizes = at.session_state["_memo_bytes"]
        newest = list(at.session_state["_memo"])[-1]
        assert sum(v for k, v in sizes.items() if k != newest) <= 600 * 2**10, sizes
    assert len(at.session_state["_memo"]) < state.MEMO_SIZE


def test_the_server_skips_streamlit_s_full_collection_after_every_run():
    """With 25 sessions a full gc.collect(2) after every script run held the interpreter: the
    config file and the launcher both turn it off (app.launch.RUNNER_SETTINGS)."""
    import tomllib

    from app import launch

    cfg = tomllib.loads(state.CONFIG_FILE.read_text())
    assert cfg["runner"]["postScriptGC"] is False
    assert launch.RUNNER_SETTINGS == {"runner.postScriptGC": "false"}
    assert "--runner.postScriptGC" in launch.server_command(8501)
