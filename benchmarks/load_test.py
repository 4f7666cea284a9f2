"""Load test: N concurrent browser sessions moving the epsilon slider on the Explore page.

One ``streamlit run`` server on 127.0.0.1 (``app.launch.serve``; a fresh one for each N, so its peak
memory belongs to that N), one headless Chromium (the system browser, nothing is downloaded) and N
browser contexts, i.e. N independent Streamlit sessions. Each session opens ``/explore`` and, for a
bounded time and a bounded number of iterations, moves the epsilon select-slider with the keyboard
like a person: ArrowRight through the 13 finite values, then Home back to the smallest one. That
cycle of 13 distinct settings defeats the page's per-session memo (12 entries), so every move draws
a new preview release, its 2-D view and plots: the worst case for the server.

Measured per N:

- sessions held: sessions still connected at the end that completed at least one move;
- interaction latency: key press -> the run's ``script_finished`` message has arrived and the page
  shows the app idle again (``stApp`` not running, no ``stStatusWidget``), p50 / p95 / max; and
  its server part: the page's rerun request on the websocket -> ``script_finished`` (the rest is
  the browser: input handling before the request, rendering after the reply);
- errors: failed or timed-out moves, exceptions shown by the app, page errors, wrong epsilon shown
  after the move, disconnections (must be 0);
- peak server RSS: ``VmHWM`` of the server process (/proc), plus its CPU time.

Usage::

    python benchmarks/load_test.py                     # N = 5 and N = 20, 60 s each
    python benchmarks/load_test.py --sessions 5 --duration 20 --max-iterations 20

Loopback only; it stops by itself (time and iteration bounds, per-move timeouts, a hard deadline).
Needs ``playwright`` (Python package) and Chromium at /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # ``python benchmarks/load_test.py`` from a clone not pip-installed
    sys.path.insert(0, str(ROOT))

# one launcher (and session tracker) for the browser tests, this load test and dp-explorer
from app.launch import CHROMIUM_ARGS, IDLE_JS, RunTracker, serve  # noqa: E402

EPS_LABEL = "ε (epsilon)"


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
            metric = page.locator('[data-testid="stMetric"]').filter(has_text="guaranteed ε")
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
        res.errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    finally:
        await context.close()
    return res


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


async def run_phase(n: int, args) -> dict:
    from playwright.async_api import async_playwright

    sampled_peak = 0
    with serve(ROOT / "test-artifacts" / f"load-streamlit-{n}.log") as srv:
        url, proc = srv.url, srv.proc
        cpu0 = proc_cpu_seconds(proc.pid) or 0.0
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
            t_start = time.monotonic()
            tasks = [asyncio.create_task(run_session(browser, url, args.duration, args.max_iterations,
                                                     args.move_timeout, args.open_timeout))
                     for _ in range(n)]
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
            await browser.close()
        peak_kb = max(proc_status_kb(proc.pid, "VmHWM") or 0, sampled_peak)
        cpu = (proc_cpu_seconds(proc.pid) or 0.0) - cpu0
    lat = sorted(x for r in results for x in r.latencies)
    server = sorted(x for r in results for x in r.server)
    errors = [e for r in results for e in r.errors]
    return {
        "sessions": n,
        "held": sum(r.held for r in results),
        "opened": sum(r.opened for r in results),
        "moves": len(lat),
        "p50_s": percentile(lat, 50),
        "p95_s": percentile(lat, 95),
        "max_s": lat[-1] if lat else float("nan"),
        "server_p50_s": percentile(server, 50),
        "server_p95_s": percentile(server, 95),
        "errors": len(errors),
        "error_samples": sorted(set(errors))[:5],
        "peak_rss_mb": peak_kb / 1024,
        "server_cpu_s": cpu,
        "elapsed_s": elapsed,
    }


def markdown_table(rows: list[dict]) -> str:
    lines = [
        "| N sessions | held | moves | p50 latency (s) | p95 latency (s) | max (s) "
        "| server part p50 / p95 (s) | errors | peak server RSS (MB) | server CPU (s) | wall (s) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['sessions']} | {r['held']}/{r['sessions']} | {r['moves']} | {r['p50_s']:.2f} "
                     f"| {r['p95_s']:.2f} | {r['max_s']:.2f} "
                     f"| {r['server_p50_s']:.2f} / {r['server_p95_s']:.2f} | {r['errors']} "
                     f"| {r['peak_rss_mb']:.0f} | {r['server_cpu_s']:.1f} | {r['elapsed_s']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[5, 20], help="N values (default 5 20)")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of slider moves per N")
    ap.add_argument("--max-iterations", type=int, default=200, help="moves per session at most")
    ap.add_argument("--move-timeout", type=float, default=90.0, help="seconds allowed for one move")
    ap.add_argument("--open-timeout", type=float, default=120.0, help="seconds to open a session")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = ap.parse_args(argv)
    if not Path(args.chromium).exists():
        print(f"Chromium not found at {args.chromium}", file=sys.stderr)
        return 2
    try:
        import playwright  # noqa: F401
    except ImportError:
        print("the playwright package is not installed (pip install playwright)", file=sys.stderr)
        return 2
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    rows = []
    for n in args.sessions:
        print(f"N = {n}: {args.duration:.0f} s of slider moves ...", file=sys.stderr, flush=True)
        rows.append(asyncio.run(run_phase(n, args)))
        if rows[-1]["error_samples"]:
            print("  errors: " + "; ".join(rows[-1]["error_samples"]), file=sys.stderr)
    print(f"Load test: Explore page, epsilon slider moved by keyboard, {args.duration:.0f} s per N, "
          f"<= {args.max_iterations} moves per session; {os.cpu_count()} CPUs, load average at start "
          f"{load[0]:.1f}.\n")
    print(markdown_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 1 if any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
