"""Harness for driving the app in a real browser: a loopback server and Chromium helpers.

Used by the real-browser tests (``tests/test_browser.py``), the websocket load test
(``benchmarks/load_test.py``) and the browser latency benchmark (``benchmarks/bench_browser.py``).
The server is started with :func:`app.launch.server_command` (the same hardened flags and launcher
as ``dp-explorer``). Test-side code: the app itself never imports this module.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.launch import LOOPBACK, ROOT, server_command


# ------------------------------------------------------------------------------ a test server
def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that was free a moment ago (the OS picks it; a race with others is unlikely)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


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

#: A JavaScript function ``canvas => number | null``: what a canvas shows, as a number (its pixels
#: scaled down to 96 x 48 and hashed), or null while it has no size or nothing is drawn on it (all
#: pixels transparent). A Vega-Lite chart (the Explore scatter) draws on a canvas: this is how a
#: test or benchmark sees that new points were drawn.
CANVAS_HASH_JS = """(c) => {
  if (!c || !c.width) return null;
  const small = document.createElement('canvas');
  small.width = 96; small.height = 48;
  const ctx = small.getContext('2d', {willReadFrequently: true});
  ctx.drawImage(c, 0, 0, 96, 48);
  const px = ctx.getImageData(0, 0, 96, 48).data;
  let h = 0, ink = 0;
  for (let i = 0; i < px.length; i++) { h = (Math.imul(h, 31) + px[i]) | 0; if (i % 4 === 3) ink += px[i]; }
  return ink ? h : null;
}"""


class RunTracker:
    """Script runs of one browser session, counted from its websocket (decoded ``ForwardMsg``).

    The DOM's running state alone is not enough on a busy machine: when the browser's main
    thread stalls, "running" and "finished" can be rendered in one batch and a run goes unseen.
    A run (of the whole script or of one fragment) starts with a ``new_session`` message and ends
    with ``script_finished``; ``finished_ok`` counts those that ended successfully. Works with
    Playwright's sync and async pages alike (the handlers are plain callbacks).
    """

    def __init__(self, page: Any) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self._msg = ForwardMsg
        # a whole run, or a fragment's run (``@st.fragment``: a widget inside it reruns only it)
        self._ok = {ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY}
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
            if msg.script_finished in self._ok:
                self.finished_ok += 1
                self.finished_ok_at = time.perf_counter()
