"""Load test: N concurrent sessions moving the epsilon slider on the Explore page, two ways.

One ``streamlit run`` server on 127.0.0.1 (``benchmarks.browser_harness.serve``; a fresh one for each
mode and N, so its peak memory belongs to that run) and N independent Streamlit sessions. Each session opens
the Explore page (loading the default dataset) and, for a bounded time and a bounded number of
moves, moves the epsilon select-slider through its 13 finite values and back to the smallest one.
That cycle of 13 distinct settings defeats the page's per-session memo (12 entries), so every move
draws a new preview release, its 2-D view and plots: the worst case for the server.

Two modes (``--mode``):

- ``browser`` (default): one headless Chromium (the system browser, nothing is downloaded) and N
  browser contexts; the slider is moved with the keyboard like a person (ArrowRight, then Home).
  Latency = key press -> the run's ``script_finished`` has arrived and the page shows the app idle
  again, so it includes input handling and rendering; its server part (the page's rerun request
  -> ``script_finished``) is shown beside it. On a 2-core machine N Chromium renderers compete with
  the server for the CPU, so at N = 20 this measures Chromium as much as the app.
- ``ws``: N websocket clients in this one asyncio process speaking Streamlit's own protocol, no
  rendering: connect to ``/_stcore/stream`` as the frontend does (subprotocols ``streamlit`` and
  an auth-token placeholder), send ``BackMsg.rerun_script`` with the page, the context and the full
  widget state the frontend would send (every widget of the last run at its current value, found in
  the ``ForwardMsg`` deltas), read the reply up to ``script_finished``. Latency = rerun request sent
  -> ``script_finished``: what the server costs, with almost nothing else on the CPU (the clients'
  own CPU time is reported). No message cache is announced, so every element comes in full.
- ``both``: the two, one table each.

Measured per N:

- sessions held: sessions still connected at the end that completed at least one move (browser:
  the page shows CONNECTED; ws: the server answers an ``app_heartbeat``);
- interaction latency, p50 / p95 / max, as above;
- errors: failed or timed-out moves, exceptions shown by the app, wrong epsilon shown after the
  move (the "guaranteed ε" metric must show the new slider value), page errors, disconnections
  (must be 0);
- peak server RSS: ``VmHWM`` of the server process (/proc), plus its CPU time.

``--hostile-uploads`` (either mode): one more session, in its own headless Chromium, uploads
decompression bombs on the Data page the whole time (:func:`hostile_payloads`: a 1.5 MB gzip of
1 GiB, an ``.npz`` header declaring 745 GiB, 8 million Parquet rows in 70 KB), so the slider
latency of the others shows what a hostile upload costs them (issue 17); the refusals are counted
and timed. With ``--settle S`` the server's memory is sampled again S seconds after every session
has closed (Streamlit keeps a closed session ``server.disconnectedSessionTTL`` = 120 s for a
reconnection; the app's reaper then frees it within 10 s).

Usage::

    python benchmarks/load_test.py                     # browser mode, N = 5 and N = 20, 60 s each
    python benchmarks/load_test.py --mode ws --sessions 5 20 50
    python benchmarks/load_test.py --mode both --sessions 5 --duration 20 --max-iterations 20
    python benchmarks/load_test.py --sessions 2 --duration 60 --hostile-uploads
    python benchmarks/load_test.py --mode ws --sessions 2 --duration 60 --hostile-uploads --settle 140
    python benchmarks/load_test.py --session-memory    # memory given back when a session ends

Loopback only; it stops by itself (time and iteration bounds, per-move timeouts, a hard deadline)
and always stops the server. The browser mode needs ``playwright`` (Python package) and Chromium at
/usr/bin/chromium; the ws mode only Streamlit and its ``websockets`` dependency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # ``python benchmarks/load_test.py`` from a clone not pip-installed
    sys.path.insert(0, str(ROOT))

# one launcher (and session tracker) for the browser tests, this load test and dp-explorer
from benchmarks.browser_harness import CHROMIUM_ARGS, IDLE_JS, RunTracker, serve  # noqa: E402

EPS_LABEL = "ε (epsilon)"  # the slider's label starts with it (a lock icon may follow)
METRIC_LABEL = "guaranteed ε"
MODES = ("browser", "ws")


# ------------------------------------------------------------------------------------- server
def proc_status_kb(pid: int, field_name: str) -> int | None:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM), or None off Linux / after exit."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def proc_cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


# ------------------------------------------------------------------------------------ sessions
@dataclass
class SessionResult:
    opened: bool = False
    held: bool = False
    moves: int = 0
    latencies: list[float] = field(default_factory=list)
    server: list[float] = field(default_factory=list)  # rerun request sent -> script_finished
    errors: list[str] = field(default_factory=list)


def describe(exc: BaseException) -> str:
    """An exception as one short line (asyncio's timeouts have no message)."""
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"


async def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.02)


async def run_session(browser, url: str, duration: float, max_iterations: int,
                      move_timeout: float, open_timeout: float) -> SessionResult:
    res = SessionResult()
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(move_timeout * 1000)
    page = await context.new_page()
    tracker = RunTracker(page)
    page.on("pageerror", lambda exc: res.errors.append(f"page error: {exc}"))
    try:
        await page.goto(url + "/explore", timeout=open_timeout * 1000)
        await wait_for(lambda: tracker.finished_ok >= 1 and tracker.started == tracker.finished,
                       open_timeout, "the first run")
        await page.wait_for_function(IDLE_JS, timeout=open_timeout * 1000)
        slider = page.locator('[data-testid="stSlider"]').filter(has_text=EPS_LABEL)
        thumb = slider.locator("input[type=range]")
        await thumb.focus()
        res.opened = True
        stop_at = time.monotonic() + duration  # each session moves the slider for `duration` s
        n_values = int(await thumb.get_attribute("max"))  # index of the last value (infinity)
        i = 0
        while i < max_iterations and time.monotonic() < stop_at:
            index = int(await thumb.get_attribute("value"))
            # right through the finite values, then Home (never onto epsilon = infinity)
            key, target = ("ArrowRight", index + 1) if index + 1 < n_values else ("Home", 0)
            before = tracker.finished_ok
            t0 = time.perf_counter()
            await thumb.press(key)
            await wait_for(lambda b=before: tracker.finished_ok > b and tracker.started == tracker.finished,
                           move_timeout, "the run after the move")
            await page.wait_for_function(IDLE_JS, timeout=move_timeout * 1000)
            res.latencies.append(time.perf_counter() - t0)
            sent = next((t for t in tracker.sent_at if t >= t0), None)
            if sent is not None and tracker.finished_ok_at >= sent:
                res.server.append(tracker.finished_ok_at - sent)
            i += 1
            res.moves = i
            if int(await thumb.get_attribute("value")) != target:
                res.errors.append(f"slider at index {await thumb.get_attribute('value')}, expected {target}")
            shown = (await slider.locator('[data-testid="stSliderThumbValue"]').inner_text()).strip()
            metric = page.locator('[data-testid="stMetric"]').filter(has_text=METRIC_LABEL)
            value = (await metric.locator('[data-testid="stMetricValue"]').inner_text()).strip()
            if value != shown:
                res.errors.append(f"guaranteed ε shows {value} for slider value {shown}")
            if await page.locator('[data-testid="stException"]').count():
                res.errors.append("the app shows an exception")
        res.held = (res.moves > 0 and not tracker.closed and await page.evaluate(
            "() => document.querySelector('[data-testid=\"stApp\"]')"
            ".getAttribute('data-test-connection-state') === 'CONNECTED'"))
        if not res.held:
            res.errors.append("session not connected at the end")
    except Exception as exc:  # a timeout or a crash of this session is an error, not a crash of the test
        res.errors.append(describe(exc))
    finally:
        await context.close()
    return res


def hostile_payloads() -> list[tuple[str, str, bytes]]:
    """Small uploads that expand enormously (issue 17): (name, MIME type, bytes), made in memory.

    A 1.5 MB gzip of 1 GiB of CSV, an ``.npz`` whose ``X`` header declares 745 GiB, a Parquet file
    of 8 million rows in about 70 KB, Parquet text columns that decode to 400 MiB (plain texts) and
    20 GiB (a categorical column) from a few KB. The app refuses each from its decompressed size
    (its cap is the upload limit), its header or its footer and dictionaries, before allocating the
    table.
    """
    import io
    import zipfile
    import zlib

    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"0,0,0\n" * (1 << 20)
    gz = b"".join([co.compress(b"a,b,y\n")] + [co.compress(chunk) for _ in range(170)] + [co.flush()])
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (1_000_000, 100_000)})
    npz = io.BytesIO()
    with zipfile.ZipFile(npz, "w") as zf:
        zf.writestr("X.npy", header.getvalue() + bytes(16))
    rows = io.BytesIO()
    pd.DataFrame({"a": np.zeros(8_000_000, dtype=np.int64)}).to_parquet(rows, compression="zstd")
    # a text column of one 1 MiB value on 400 rows (a dictionary of one entry: 400 MiB decoded), and
    # a categorical (dictionary-typed) column of one 1 MiB category on 20,000 rows (20 GiB expanded);
    # built as dictionaries (a list of the rows' texts would itself be the bomb)
    texts, categorical = io.BytesIO(), io.BytesIO()
    for buf, n, typed in ((texts, 400, False), (categorical, 20_000, True)):
        one = pa.array(["x" * (1 << 20)])
        column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), one)
        pq.write_table(pa.table({"a": np.zeros(n), "s": column}), buf, compression="zstd", store_schema=typed,
                       dictionary_pagesize_limit=8 << 20)
    return [("bomb.csv.gz", "application/gzip", gz), ("bomb.npz", "application/octet-stream", npz.getvalue()),
            ("bomb.parquet", "application/octet-stream", rows.getvalue()),
            ("texts.parquet", "application/octet-stream", texts.getvalue()),
            ("categorical.parquet", "application/octet-stream", categorical.getvalue())]


async def open_upload_box(page, url: str, timeout: float):
    """Open the Data page (the default page), choose "Upload a file"; the table's file input."""
    await page.goto(url + "/", timeout=timeout * 1000)
    await page.wait_for_function(IDLE_JS, timeout=timeout * 1000)
    await page.locator('[data-testid="stRadio"] label').filter(has_text="Upload a file").click()
    # the table's own uploader, named by its label: under load the click's rerun may not have
    # drawn it yet, and the Data page's other uploaders (bounds or public files) are not it
    uploader = (page.locator('[data-testid="stFileUploader"]').filter(has_text="(X, y, feature_names)")
                .locator('input[type="file"]').first)
    await uploader.wait_for(state="attached", timeout=timeout * 1000)
    await page.wait_for_function(IDLE_JS, timeout=timeout * 1000)
    return uploader


async def run_hostile_uploader(browser, url: str, duration: float, move_timeout: float,
                               open_timeout: float) -> SessionResult:
    """One more session that uploads :func:`hostile_payloads` in turn on the Data page for
    ``duration`` seconds; ``latencies`` are upload -> the app's refusal on screen."""
    res = SessionResult()
    payloads = hostile_payloads()
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(move_timeout * 1000)
    page = await context.new_page()
    tracker = RunTracker(page)
    try:
        uploader = await open_upload_box(page, url, open_timeout)
        res.opened = True
        stop_at = time.monotonic() + duration
        i = 0
        while time.monotonic() < stop_at:
            base, mime, data = payloads[i % len(payloads)]
            name = f"{i}-{base}"  # a new file each time: the uploader never sees a repeat
            t0 = time.perf_counter()
            await uploader.set_input_files(files=[{"name": name, "mimeType": mime, "buffer": data}])
            # the refusal naming this file is on screen (not "the page is idle": an upload can
            # start two runs, the first cut short by the second without a script_finished)
            alert = page.locator('[data-testid="stAlert"]').filter(has_text=name)
            await alert.first.wait_for(timeout=move_timeout * 1000)
            res.latencies.append(time.perf_counter() - t0)
            i += 1
            res.moves = i
            if await page.locator('[data-testid="stException"]').count():
                res.errors.append(f"the app shows an exception after {name}")
        res.held = not tracker.closed
    except Exception as exc:
        res.errors.append(f"hostile uploader: {describe(exc)}")
    finally:
        await context.close()
    return res


async def session_memory(args) -> dict:
    """Server memory given back after a session that uploaded a large table closes (issue 17).

    A fresh server with ``server.disconnectedSessionTTL`` = 5 s (Streamlit keeps a closed session
    that long for a reconnection). One Chromium session uploads a 46 MB CSV (1.8 million rows) on
    the Data page; its browser context is closed; 25 s later a second session opens (Streamlit's
    runtime loop holds the last session it served until it serves another one). Server RSS (MB):
    before the upload, after parsing, 25 s after the close, 30 s after the second session opened.
    """
    import tempfile

    import numpy as np
    from playwright.async_api import async_playwright

    rows = np.random.default_rng(0).uniform(0, 1, (1_800_000, 3))
    rss: dict[str, float] = {}
    os.environ["STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL"] = "5"
    try:
        with tempfile.TemporaryDirectory() as tmp, \
                serve(ROOT / "test-artifacts" / "load-session-memory.log") as srv:
            big = Path(tmp) / "big.csv"
            np.savetxt(big, rows, fmt="%.6f", delimiter=",", header="a,b,c", comments="")

            def sample(key: str) -> None:
                rss[key] = (proc_status_kb(srv.proc.pid, "VmRSS") or 0) / 1024
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
                try:
                    ctx = await browser.new_context(viewport={"width": 1280, "height": 900})
                    page = await ctx.new_page()
                    uploader = await open_upload_box(page, srv.url, args.open_timeout)
                    await asyncio.sleep(3)
                    sample("before_upload")
                    await uploader.set_input_files(str(big), timeout=args.open_timeout * 1000)
                    await page.get_by_text("1,800,000 rows").first.wait_for(timeout=args.open_timeout * 1000)
                    await page.wait_for_function(IDLE_JS, timeout=args.open_timeout * 1000)
                    await asyncio.sleep(3)
                    sample("after_parsing")
                    await ctx.close()
                    await asyncio.sleep(25)
                    sample("closed_25s")
                    page = await (await browser.new_context()).new_page()
                    await page.goto(srv.url + "/", timeout=args.open_timeout * 1000)
                    await page.wait_for_function(IDLE_JS, timeout=args.open_timeout * 1000)
                    await asyncio.sleep(30)
                    sample("other_session_30s")
                finally:
                    await browser.close()
    finally:
        os.environ.pop("STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL", None)
    return rss


# ----------------------------------------------------------------------- websocket sessions (ws)
#: What the frontend offers when it has no auth token: the subprotocol, then a token placeholder.
WS_SUBPROTOCOLS = ["streamlit", "PLACEHOLDER_AUTH_TOKEN"]


@dataclass
class ScriptRun:
    """What the server sent for one script run, as far as the load test looks at it."""

    status: int = -1  # ForwardMsg.ScriptFinishedStatus
    page_hash: str = ""
    sliders: dict = field(default_factory=dict)  # label -> Slider proto
    metrics: dict[str, str] = field(default_factory=dict)  # label -> shown value
    exceptions: list[str] = field(default_factory=list)


def frontend_widget_state(kind: str, el):
    """The value the frontend reports for a widget it has just drawn (set by the script or default).

    Covers the widget kinds of the Explore page; others (charts without selections) report nothing.
    """
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    if kind == "selectbox":
        return WidgetState(id=el.id, string_value=el.raw_value if el.set_value else el.options[el.default])
    if kind == "slider" and el.type == el.SELECT_SLIDER:
        state = WidgetState(id=el.id)
        state.string_array_value.data.extend(el.raw_value if el.set_value
                                             else [el.options[int(i)] for i in el.default])
        return state
    if kind == "number_input":
        if not el.set_value and not el.HasField("default"):  # an empty box ("automatic") reports no value
            return None
        value = el.value if el.set_value else el.default
        if el.data_type == el.INT:
            return WidgetState(id=el.id, int_value=int(value))
        return WidgetState(id=el.id, double_value=value)
    return None


async def script_run(ws, client_state, widgets: dict) -> ScriptRun:
    """Ask for a rerun with ``client_state``, read the reply up to ``script_finished``.

    ``widgets`` (id -> WidgetState) is the frontend's widget state: widgets drawn for the first
    time get their value, widgets no longer drawn are dropped, the others keep theirs.
    """
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    await ws.send(BackMsg(rerun_script=client_state).SerializeToString())
    run, drawn = ScriptRun(), set()
    while run.status < 0:
        msg = ForwardMsg.FromString(await ws.recv())
        kind = msg.WhichOneof("type")
        if kind == "navigation":
            run.page_hash = msg.navigation.page_script_hash
        elif kind == "script_finished":
            run.status = msg.script_finished
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            el_kind = msg.delta.new_element.WhichOneof("type")
            el = getattr(msg.delta.new_element, el_kind)
            if el_kind == "exception":
                run.exceptions.append(f"{el.type}: {el.message}"[:200])
            elif el_kind == "metric":
                run.metrics[el.label] = el.body
            elif el_kind == "slider":
                run.sliders[el.label] = el
            state = frontend_widget_state(el_kind, el)
            if state is not None:
                drawn.add(state.id)
                if el.set_value or state.id not in widgets:
                    widgets[state.id] = state
    for stale in set(widgets) - drawn:
        del widgets[stale]
    return run


def is_finite_option(option: str) -> bool:
    try:
        return math.isfinite(float(option))
    except ValueError:
        return False


async def run_ws_session(url: str, duration: float, max_iterations: int,
                         move_timeout: float, open_timeout: float) -> SessionResult:
    """One websocket client: open the Explore page, then move the epsilon slider (see the module doc)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ClientState_pb2 import ClientState
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.asyncio.client import connect

    res = SessionResult()
    widgets: dict = {}
    # the first run: no page hash yet, the page named by the URL path, as the frontend does
    client_state = ClientState(page_name="explore")
    client_state.context_info.timezone, client_state.context_info.locale = "UTC", "en-US"
    client_state.context_info.url = url + "/explore"
    try:
        async with connect(url.replace("http://", "ws://", 1) + "/_stcore/stream", origin=url,
                           subprotocols=WS_SUBPROTOCOLS, proxy=None, max_size=None, ping_interval=None,
                           open_timeout=open_timeout) as ws:
            run = await asyncio.wait_for(script_run(ws, client_state, widgets), open_timeout)
            slider = next((s for label, s in run.sliders.items() if label.startswith(EPS_LABEL)), None)
            if run.status != ForwardMsg.FINISHED_SUCCESSFULLY or run.exceptions or slider is None:
                raise RuntimeError(f"first run: status {run.status}, exceptions {run.exceptions}, "
                                   f"epsilon slider {'found' if slider else 'missing'}")
            res.opened = True
            finite = [o for o in slider.options if is_finite_option(o)]
            value = widgets[slider.id].string_array_value.data[0]
            stop_at = time.monotonic() + duration
            while res.moves < max_iterations and time.monotonic() < stop_at:
                # the next finite value, then back to the smallest (never onto epsilon = infinity)
                value = finite[(finite.index(value) + 1) % len(finite)] if value in finite else finite[0]
                del widgets[slider.id].string_array_value.data[:]
                widgets[slider.id].string_array_value.data.append(value)
                client_state.page_name, client_state.page_script_hash = "", run.page_hash
                del client_state.widget_states.widgets[:]
                client_state.widget_states.widgets.extend(widgets.values())
                t0 = time.perf_counter()
                run = await asyncio.wait_for(script_run(ws, client_state, widgets), move_timeout)
                res.latencies.append(time.perf_counter() - t0)
                res.moves += 1
                if run.status != ForwardMsg.FINISHED_SUCCESSFULLY:
                    res.errors.append(f"run finished with status {run.status}")
                res.errors.extend(f"the app sent an exception: {e}" for e in run.exceptions)
                if run.metrics.get(METRIC_LABEL) != value:
                    res.errors.append(f"{METRIC_LABEL} shows {run.metrics.get(METRIC_LABEL)} for {value}")
            # held: the server still answers this session
            await ws.send(BackMsg(app_heartbeat=True).SerializeToString())
            await asyncio.wait_for(_heartbeat_ack(ws), move_timeout)
            res.held = res.moves > 0
    except Exception as exc:  # a timeout or a disconnection of this session is an error, not a crash
        res.errors.append(describe(exc))
    return res


async def _heartbeat_ack(ws) -> None:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    while not ForwardMsg.FromString(await ws.recv()).heartbeat_ack:
        pass


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


@asynccontextmanager
async def session_starter(mode: str, url: str, args) -> AsyncIterator[Callable[[], Awaitable[SessionResult]]]:
    """For the ``with`` block: a function that runs one session of ``mode`` against ``url``."""
    bounds = (args.duration, args.max_iterations, args.move_timeout, args.open_timeout)
    if mode == "ws":
        yield lambda: run_ws_session(url, *bounds)
        return
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        try:
            yield lambda: run_session(browser, url, *bounds)
        finally:
            await browser.close()


@asynccontextmanager
async def hostile_starter(url: str, args) -> AsyncIterator[Callable[[], Awaitable[SessionResult]] | None]:
    """For the ``with`` block: a function that runs the hostile uploader in its own Chromium, or
    None without ``--hostile-uploads``."""
    if not args.hostile_uploads:
        yield None
        return
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        try:
            yield lambda: run_hostile_uploader(browser, url, args.duration, args.move_timeout,
                                               args.open_timeout)
        finally:
            await browser.close()


async def run_phase(n: int, args, mode: str = "browser") -> dict:
    """N concurrent sessions of ``mode`` against a fresh server; one row of the table."""
    sampled_peak = 0
    with serve(ROOT / "test-artifacts" / f"load-{mode}-{n}.log") as srv:
        proc = srv.proc
        cpu0, client_cpu0 = proc_cpu_seconds(proc.pid) or 0.0, time.process_time()
        async with session_starter(mode, srv.url, args) as start_session, \
                hostile_starter(srv.url, args) as start_hostile:
            t_start = time.monotonic()
            tasks = [asyncio.create_task(start_session()) for _ in range(n)]
            if start_hostile is not None:
                tasks.append(asyncio.create_task(start_hostile()))
            hard_deadline = t_start + args.open_timeout + args.duration + args.move_timeout + 60
            while not all(t.done() for t in tasks):
                sampled_peak = max(sampled_peak, proc_status_kb(proc.pid, "VmRSS") or 0)
                if time.monotonic() > hard_deadline:
                    for t in tasks:
                        t.cancel()
                    break
                await asyncio.sleep(0.25)
            results = []
            for t in tasks:
                try:
                    results.append(await t)
                except asyncio.CancelledError:
                    results.append(SessionResult(errors=["cancelled at the hard deadline"]))
            elapsed = time.monotonic() - t_start
        peak_kb = max(proc_status_kb(proc.pid, "VmHWM") or 0, sampled_peak)
        cpu = (proc_cpu_seconds(proc.pid) or 0.0) - cpu0
        end_kb = proc_status_kb(proc.pid, "VmRSS") or 0
        if args.settle:  # every session has closed: is their memory given back?
            await asyncio.sleep(args.settle)
        settled_kb = proc_status_kb(proc.pid, "VmRSS") or 0
    hostile = results[n:]  # the uploader, if any: its uploads are not slider moves
    results = results[:n]
    lat = sorted(x for r in results for x in r.latencies)
    server = lat if mode == "ws" else sorted(x for r in results for x in r.server)
    errors = [e for r in results + hostile for e in r.errors]
    refusals = sorted(x for r in hostile for x in r.latencies)
    return {
        "mode": mode,
        "sessions": n,
        "held": sum(r.held for r in results),
        "opened": sum(r.opened for r in results),
        "moves": len(lat),
        "session_moves": [r.moves for r in results],
        "min_s": lat[0] if lat else float("nan"),
        "p50_s": percentile(lat, 50),
        "p95_s": percentile(lat, 95),
        "max_s": lat[-1] if lat else float("nan"),
        "server_p50_s": percentile(server, 50),
        "server_p95_s": percentile(server, 95),
        "errors": len(errors),
        "error_samples": sorted(set(errors))[:5],
        "peak_rss_mb": peak_kb / 1024,
        "server_cpu_s": cpu,
        "client_cpu_s": time.process_time() - client_cpu0,  # this process: all of the ws clients
        "elapsed_s": elapsed,
        "rss_end_mb": end_kb / 1024,
        "rss_settled_mb": settled_kb / 1024,
        "settle_s": args.settle,
        "hostile_uploads": len(refusals),
        "hostile_refusal_max_s": refusals[-1] if refusals else float("nan"),
    }


def markdown_table(rows: list[dict]) -> str:
    """One mode's rows. Browser mode: latency and its server part; ws mode: latency and client CPU."""
    ws = rows[0]["mode"] == "ws"
    head = ["N sessions", "held", "moves", "p50 latency (s)", "p95 latency (s)", "max (s)",
            "client CPU (s)" if ws else "server part p50 / p95 (s)",
            "errors", "peak server RSS (MB)", "server CPU (s)", "wall (s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for r in rows:
        cells = [r["sessions"], f"{r['held']}/{r['sessions']}", r["moves"], f"{r['p50_s']:.2f}",
                 f"{r['p95_s']:.2f}", f"{r['max_s']:.2f}",
                 f"{r['client_cpu_s']:.1f}" if ws else f"{r['server_p50_s']:.2f} / {r['server_p95_s']:.2f}",
                 r["errors"], f"{r['peak_rss_mb']:.0f}", f"{r['server_cpu_s']:.1f}", f"{r['elapsed_s']:.0f}"]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=[*MODES, "both"], default="browser",
                    help="browser sessions (default), websocket clients, or both")
    ap.add_argument("--sessions", type=int, nargs="+", default=[5, 20], help="N values (default 5 20)")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of slider moves per N")
    ap.add_argument("--max-iterations", type=int, default=200, help="moves per session at most")
    ap.add_argument("--move-timeout", type=float, default=90.0, help="seconds allowed for one move")
    ap.add_argument("--open-timeout", type=float, default=120.0, help="seconds to open a session")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    ap.add_argument("--hostile-uploads", action="store_true",
                    help="one more session (in Chromium) uploads decompression bombs meanwhile")
    ap.add_argument("--session-memory", action="store_true",
                    help="instead: server memory before/after one session uploads 46 MB and closes")
    ap.add_argument("--settle", type=float, default=0.0,
                    help="seconds after the sessions closed before sampling the server memory again")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.session_memory:
        rss = asyncio.run(session_memory(args))
        print("Server RSS (MB): " + ", ".join(f"{k.replace('_', ' ')} {v:.0f}" for k, v in rss.items()))
        return 0
    modes = MODES if args.mode == "both" else (args.mode,)
    if "browser" in modes:
        if not Path(args.chromium).exists():
            print(f"Chromium not found at {args.chromium}", file=sys.stderr)
            return 2
        try:
            import playwright  # noqa: F401
        except ImportError:
            print("the playwright package is not installed (pip install playwright)", file=sys.stderr)
            return 2
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    tables: dict[str, list[dict]] = {}
    for mode in modes:
        for n in args.sessions:
            print(f"{mode}, N = {n}: {args.duration:.0f} s of slider moves ...", file=sys.stderr, flush=True)
            row = asyncio.run(run_phase(n, args, mode))
            tables.setdefault(mode, []).append(row)
            if row["error_samples"]:
                print("  errors: " + "; ".join(row["error_samples"]), file=sys.stderr)
    how = {"browser": "moved by keyboard in Chromium", "ws": "moved by websocket clients (no browser)"}
    for mode, rows in tables.items():
        print(f"\nLoad test ({mode}): Explore page, epsilon slider {how[mode]}, {args.duration:.0f} s per N, "
              f"<= {args.max_iterations} moves per session; {os.cpu_count()} CPUs, load average at start "
              f"{load[0]:.1f}.\n")
        print(markdown_table(rows))
        for r in rows:
            if r.get("hostile_uploads"):
                print(f"\nN = {r['sessions']}: meanwhile {r['hostile_uploads']} hostile uploads (gzip, "
                      f".npz and Parquet bombs) were refused, the slowest in "
                      f"{r['hostile_refusal_max_s']:.2f} s.")
            if r.get("settle_s"):
                print(f"N = {r['sessions']}: server RSS {r['rss_end_mb']:.0f} MB when the sessions closed, "
                      f"{r['rss_settled_mb']:.0f} MB {r['settle_s']:.0f} s later.")
    if args.json:
        args.json.write_text(json.dumps([r for rows in tables.values() for r in rows], indent=2))
    return 1 if any(r["errors"] for rows in tables.values() for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
