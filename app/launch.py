"""Start the Streamlit app: the ``dp-explorer`` console script and a loopback test server.

Everything that runs ``streamlit run`` on this app goes through here, so the hardened settings
live in one place: the console script (:func:`main`), the real-browser tests
(``tests/test_browser.py``) and the load test (``benchmarks/load_test.py``) use the same flags.
The flags repeat ``.streamlit/config.toml`` on the command line because that file is only read
when Streamlit starts from the repository root, and ``dp-explorer`` may start from anywhere.
The last section holds what the browser tests and the load test both need to drive that server
with Chromium: its flags, the page's idle test and :class:`RunTracker`.
"""

from __future__ import annotations

import importlib
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

APP = Path(__file__).resolve().parent / "streamlit_app.py"
ROOT = APP.parents[1]
LOOPBACK = "127.0.0.1"

#: The hardened defaults of ``.streamlit/config.toml`` (tests/test_security.py checks both).
HARDENED_SETTINGS: dict[str, str] = {
    "server.address": "localhost",
    "server.maxUploadSize": "50",
    "server.enableXsrfProtection": "true",
    "browser.gatherUsageStats": "false",
    "client.showErrorDetails": "none",
}


def _flags(settings: Mapping[str, str]) -> list[str]:
    return [item for key, value in settings.items() for item in (f"--{key}", value)]


#: Modules the first page of every session needs (mechanism registry with SciPy and scikit-learn,
#: pandas, Plotly). Streamlit imports a script's modules on the first session's first run, which
#: made the first visitor wait for them (several seconds on a loaded 2-core machine); the
#: launcher imports them on a background thread while the server starts instead.
PRELOAD = ("dpcore.mechanisms", "app.state", "app.controls", "app.runner", "app.figures.common",
           "app.figures.images", "plotly.graph_objects", "plotly.io")


def preload(modules: tuple[str, ...] = PRELOAD) -> threading.Thread:
    """Import ``modules`` on a daemon thread (started; returned for joining). An import that
    fails is skipped here: the script run that needs the module shows the error."""
    def run() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001, S112 - reported by the run that imports it
                continue

    thread = threading.Thread(target=run, name="dp-explorer-preload", daemon=True)
    thread.start()
    return thread


def main() -> None:
    """``dp-explorer``: ``streamlit run`` the app with the hardened flags, then the user's own;
    the app's heavy modules are imported meanwhile (:func:`preload`)."""
    from streamlit.web import cli as stcli

    if str(ROOT) not in sys.path:  # `app` and `dpcore` from this checkout, as the script has them
        sys.path.insert(0, str(ROOT))
    preload()
    sys.argv = ["streamlit", "run", str(APP), *_flags(HARDENED_SETTINGS), *sys.argv[1:]]
    sys.exit(stcli.main())


# ------------------------------------------------------------------------------ a test server
def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that was free a moment ago (the OS picks it; a race with others is unlikely)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def server_command(port: int, *, address: str = LOOPBACK) -> list[str]:
    """``python -m app.launch`` (= ``dp-explorer``: ``streamlit run app/streamlit_app.py`` with
    :func:`preload`) on ``address:port`` for a test or benchmark.

    Hardened flags as for ``dp-explorer``, plus headless (no browser is opened) and no file
    watcher (nothing reruns while a test edits files; one less thread under load). The flags
    given here come after the launcher's defaults, so they win (``server.address``).
    """
    settings = {**HARDENED_SETTINGS, "server.address": address, "server.port": str(port),
                "server.headless": "true", "server.fileWatcherType": "none"}
    return [sys.executable, "-m", "app.launch", *_flags(settings)]


def start_server(port: int, log_path: Path, *, address: str = LOOPBACK) -> subprocess.Popen:
    """Start the server from the repository root (so config.toml applies too), output to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        return subprocess.Popen(server_command(port, address=address), cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT)


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 120.0, poll: float = 0.25) -> None:
    """Block until ``url/_stcore/health`` answers ``ok``: the app can take sessions from then on.

    ``poll``: seconds between attempts (the start-up benchmark uses a short one).

    Raises
    ------
    RuntimeError
        The server process exited (its log says why).
    TimeoutError
        No healthy answer within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
                if resp.status == 200 and resp.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(poll)
    raise TimeoutError(f"{url}/_stcore/health did not answer within {timeout:g} s")


def stop_server(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """Terminate the server (SIGTERM lets Streamlit close its sessions), kill it if it hangs."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


class ServerStartError(RuntimeError):
    """The test server did not become healthy; the message ends with the tail of its log."""


@dataclass(frozen=True)
class Server:
    """A running test server: its base URL, process (for its pid, RSS, CPU time) and log file."""

    url: str
    proc: subprocess.Popen
    log_path: Path


@contextmanager
def serve(log_path: Path, *, timeout: float = 120.0) -> Iterator[Server]:
    """Run the app on a free loopback port for the ``with`` block; always stopped afterwards.

    Raises
    ------
    ServerStartError
        The server exited or did not answer within ``timeout`` s (it is stopped; the message
        carries the end of its log, which is where Streamlit says why).
    """
    port = free_port()
    server = Server(f"http://{LOOPBACK}:{port}", start_server(port, log_path), log_path)
    try:
        try:
            wait_healthy(server.url, server.proc, timeout)
        except (RuntimeError, TimeoutError) as exc:
            tail = log_path.read_text(errors="replace")[-3000:] if log_path.exists() else ""
            raise ServerStartError(f"{exc}; server log:\n{tail}") from exc
        yield server
    finally:
        stop_server(server.proc)


# ------------------------------------------------------------------ watching a browser session
#: Flags for the system Chromium on a CI machine (no sandbox in containers, no background traffic).
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]
#: True when the page shows no script run in flight and its websocket is connected.
IDLE_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return !!app && app.getAttribute('data-test-script-state') === 'notRunning'
    && app.getAttribute('data-test-connection-state') === 'CONNECTED'
    && !document.querySelector('[data-testid="stStatusWidget"]');
}"""


class RunTracker:
    """Script runs of one browser session, counted from its websocket (decoded ``ForwardMsg``).

    The DOM's running state alone is not enough on a busy machine: when the browser's main
    thread stalls, "running" and "finished" can be rendered in one batch and a run goes unseen.
    A run starts with a ``new_session`` message and ends with ``script_finished``. Works with
    Playwright's sync and async pages alike (the handlers are plain callbacks).
    """

    def __init__(self, page: Any) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self._msg = ForwardMsg
        self.started = self.finished = self.finished_ok = 0
        self.closed = False
        self.sent_at: list[float] = []  # perf_counter() of each message the page sent
        self.finished_ok_at = 0.0  # perf_counter() of the last successful script_finished
        page.on("websocket", self._attach)

    @property
    def sent(self) -> int:
        """Messages the page has sent (widget changes, rerun requests)."""
        return len(self.sent_at)

    @property
    def idle(self) -> bool:
        return self.started == self.finished

    def _attach(self, ws: Any) -> None:
        ws.on("framereceived", self._received)
        ws.on("framesent", lambda _payload: self.sent_at.append(time.perf_counter()))
        ws.on("close", lambda _ws: setattr(self, "closed", True))

    def _received(self, payload: str | bytes) -> None:
        if isinstance(payload, str):
            return
        msg = self._msg()
        try:
            msg.ParseFromString(payload)
        except Exception:  # not a ForwardMsg: ignore
            return
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            self.started += 1
        elif kind == "script_finished":
            self.finished += 1
            if msg.script_finished == self._msg.FINISHED_SUCCESSFULLY:
                self.finished_ok += 1
                self.finished_ok_at = time.perf_counter()


if __name__ == "__main__":  # pragma: no cover
    main()
