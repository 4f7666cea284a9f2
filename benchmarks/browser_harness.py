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


def start_server(port: int, log_path: Path, *, address: str = LOOPBACK,
                 root: Path | None = None) -> subprocess.Popen:
    """Start the server from the repository root (so config.toml applies too), output to ``log_path``.

    ``root``: another checkout of the app to serve (``python -m app.launch`` run there imports its
    own ``app`` and ``dpcore``, the working directory coming first on ``sys.path``), e.g. the commit
    before a change, for a before/after benchmark in one session."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        return subprocess.Popen(server_command(port, address=address), cwd=root or ROOT, stdout=log,
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


# ------------------------------------------------------------------------------ layout check
#: A JavaScript function ``() => [problem, ...]``: what a person would see as broken text on the
#: page as it is drawn now, each problem a short description with the text involved:
#:
#: - **clipped**: an element holding text whose content is wider than its box (``scrollWidth >
#:   clientWidth``) while its overflow is hidden, clipped, cut with an ellipsis or scrolled (the
#:   metric "replace-…", a selectbox value "pca-gauss — PCA-Gauss (PCA + G", a table cut on the
#:   right). Data grids that are meant to scroll sideways (a 64-column preview) sit in a container
#:   keyed ``wide-...`` (class ``st-key-wide-...``) and are left out;
#: - **off page**: text that reaches past the right edge of the window;
#: - **overlap**: two pieces of text drawn over each other (HTML text, and the text of Plotly
#:   charts: titles, annotations, tick labels, legend entries), by more than 3 px each way;
#: - **cut chart text**: text of a Plotly chart that reaches outside the chart.
#:
#: Only what is displayed counts (closed expanders, hidden elements and empty text are skipped).
#: Vega-Lite charts draw on a canvas and place their own labels (no text to check).
LAYOUT_CHECK_JS = r"""() => {
  const out = [];
  const shown = el => {
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.display === 'none' || s.visibility === 'hidden' || s.opacity === '0') return false;
      if (e.tagName === 'DETAILS' && !e.open && !el.closest('summary')) return false;
    }
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  const text = el => (el.innerText || el.textContent || '').replace(/\s+/g, ' ').trim();
  const short = t => t.length > 70 ? t.slice(0, 67) + '...' : t;
  const wide = el => !!el.closest('[class*="st-key-wide-"]');
  const app = document.querySelector('[data-testid="stApp"]') || document.body;
  const W = window.innerWidth;
  // 1. clipped boxes
  const clipped = [];
  for (const el of app.querySelectorAll('*')) {
    if (el.closest('svg') || el.tagName === 'CANVAS' || wide(el)) continue;
    // clientWidth <= 2: a visually hidden element (the "Skip to main content" link)
    if (el.scrollWidth <= el.clientWidth + 1 || el.clientWidth <= 2) continue;
    const s = getComputedStyle(el);
    const cuts = ['hidden', 'clip', 'auto', 'scroll'].includes(s.overflowX) || s.textOverflow === 'ellipsis';
    const grid = el.classList.contains('dvn-scroller');
    if (!cuts || !shown(el)) continue;
    const field = el.tagName === 'INPUT' || el.tagName === 'TEXTAREA';  // a selectbox shows its value here
    const t = grid ? 'a data grid' : field ? el.value.trim() : text(el);
    if (!t) continue;
    clipped.push(el);
    out.push(`clipped: "${short(t)}" (${el.scrollWidth} px of text in ${el.clientWidth} px)`);
  }
  // 2. text nodes: off the page, and HTML text over other text
  const boxes = [];
  const walker = document.createTreeWalker(app, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || !n.textContent.trim() || el.closest('svg, script, style, noscript') || !shown(el)) continue;
    // text for screen readers in a 1 px box (the file uploader's "add icon"): not drawn
    const own = el.getBoundingClientRect();
    if (own.width <= 2 || own.height <= 2) continue;
    if (clipped.some(c => c.contains(el))) continue;  // reported above
    const range = document.createRange();
    range.selectNodeContents(n);
    for (const r of range.getClientRects()) {
      if (r.width < 2 || r.height < 2) continue;
      if (r.right > W + 1 && !wide(el))
        out.push(`off page: "${short(n.textContent.trim())}" ends at ${Math.round(r.right)} px of ${W}`);
      boxes.push({r, node: n, t: n.textContent.trim()});
    }
  }
  // 3. Plotly chart text: outside its chart, or over other text of the chart
  for (const gd of app.querySelectorAll('.js-plotly-plot')) {
    if (!shown(gd)) continue;
    const frame = gd.getBoundingClientRect();
    for (const t of gd.querySelectorAll('text')) {
      const s = t.textContent.trim();
      if (!s || !shown(t)) continue;
      const r = t.getBoundingClientRect();
      if (r.width < 1 || r.height < 1) continue;
      if (r.left < frame.left - 1 || r.right > frame.right + 1 || r.top < frame.top - 1
          || r.bottom > frame.bottom + 1)
        out.push(`cut chart text: "${short(s)}" outside its chart`);
      boxes.push({r, node: t, t: s});
    }
  }
  const seen = new Set();
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i], b = boxes[j];
      if (a.node === b.node || a.node.contains(b.node) || b.node.contains(a.node)) continue;
      const w = Math.min(a.r.right, b.r.right) - Math.max(a.r.left, b.r.left);
      const h = Math.min(a.r.bottom, b.r.bottom) - Math.max(a.r.top, b.r.top);
      if (w <= 3 || h <= 3) continue;
      const key = a.t + '|' + b.t;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(`overlap: "${short(a.t)}" and "${short(b.t)}"`);
    }
  }
  return out;
}"""


def layout_problems(page: Any) -> list[str]:
    """:data:`LAYOUT_CHECK_JS` on a Playwright page: the clipped, cut and overlapping text shown."""
    return list(page.evaluate(LAYOUT_CHECK_JS))
