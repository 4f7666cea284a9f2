"""Issue 16 item 7: latency as a person sees it, in a real browser (headless Chromium, Playwright).

Three browser figures and, beside them, the server-side figures they are often confused with:

* **cold first page** (browser): a freshly started ``streamlit run`` (health endpoint already
  answering), a new browser tab opens ``/``; time from ``page.goto`` to the settled page (run
  finished, title shown, no element still a grey placeholder waiting for its JavaScript chunk,
  pictures decoded, charts, if any, drawn; two frames painted). Also
  from the process start. Repeated ``--cold`` times, one new server each.
* **new session, warm server** (browser): the same on a server that has served a session already.
* **Explore epsilon slider** (browser): on the Explore page, the keyboard-focused ε slider gets
  one key press (ArrowRight through the finite values, then Home); time from the key press to
  the settled page. ``--repeats`` moves per dataset (default 12) after one untimed move; every
  move goes to a setting the session has not drawn in its last 12 (the page's memo size), so each
  one draws a new release. Reported: median and p90.

"Settled" means all of: the websocket carried ``script_finished`` for a run that started after
the key press and no run is in flight (``benchmarks.browser_harness.RunTracker``); the page shows no running
indicator and is connected (``benchmarks.browser_harness.IDLE_JS``); the Explore scatter shows
other points than before the press (its Vega-Lite canvas, scaled down and hashed; for a Plotly
chart its ``gd.data``); then two animation frames (it has been painted). The
"guaranteed ε" metric must then show the slider's value, or the move counts as an error.

Server figures: **server round trip** = from the websocket frame the page sent for the move to
the ``script_finished`` frame it received (what the server did, plus loopback); **AppTest** = the
same change made with Streamlit's ``AppTest`` in this process, no browser and no websocket (the
figure the README reported before as "app latency").

Run from the repository root (Chromium at ``/usr/bin/chromium`` or ``$DP_EXPLORER_CHROMIUM``)::

    python benchmarks/bench_browser.py                     # digits and mnist-10k, 12 moves each
    python benchmarks/bench_browser.py --repeats 20 --cold 3 --mechanism ron-gauss
    python benchmarks/bench_browser.py --json benchmarks/results/browser.json --no-apptest
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.browser_harness import (  # noqa: E402
    CANVAS_HASH_JS,
    CHROMIUM_ARGS,
    IDLE_JS,
    RunTracker,
    free_port,
    start_server,
    stop_server,
    wait_healthy,
)

CHROMIUM = Path(os.environ.get("DP_EXPLORER_CHROMIUM", "/usr/bin/chromium"))
LOG = ROOT / "test-artifacts" / "bench-browser-server.log"
EPS_LABEL = "ε (epsilon)"
METRIC_LABEL = "guaranteed ε"
TIMEOUT_S = 120.0
TWO_FRAMES_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"
#: A short signature of what the page's charts plot: per Plotly chart, per trace its name and the
#: start of its x and y arrays (Plotly's ``gd.data``); per Vega-Lite chart, a hash of its canvas
#: scaled down to 96 x 48 pixels (what is drawn). It changes when a new figure has been handed to
#: Plotly, or when Vega has drawn new points. ``null`` before every chart is drawn.
PLOT_SIGNATURE_JS = f"""() => {{
  const plotly = Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot'));
  const vega = Array.from(document.querySelectorAll('[data-testid="stVegaLiteChart"]'));
  if ((!plotly.length && !vega.length) || plotly.some(gd => !gd.data)) return null;
  const drawn = vega.map(v => ({CANVAS_HASH_JS})(v.querySelector('canvas')));
  if (drawn.some(h => h === null)) return null;
  // x, y and z arrive as typed arrays or as Plotly's base64 {{dtype, bdata}}: either serialises
  return JSON.stringify([drawn, plotly.map(gd => gd.data.map(t => [t.name,
    ...["x", "y", "z"].map(a => JSON.stringify(t[a] ?? null).slice(0, 200))]))]);
}}"""

#: True when the page's pictures (``st.image``) are decoded, each Plotly chart has its data and
#: each Vega-Lite chart has drawn on its canvas.
PAGE_DRAWN_JS = """() => {
  // an element whose JavaScript chunk is still loading is drawn as a grey stSkeleton placeholder
  if (document.querySelector('[data-testid="stSkeleton"]')) return false;
  const imgs = Array.from(document.querySelectorAll('[data-testid="stImage"] img'));
  const charts = Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"]'));
  const vega = Array.from(document.querySelectorAll('[data-testid="stVegaLiteChart"]'));
  return imgs.every(i => i.complete && i.naturalWidth > 0)
    && charts.every(c => { const gd = c.querySelector('.js-plotly-plot'); return !!gd && !!gd.data; })
    && vega.every(v => { const c = v.querySelector('canvas'); return !!c && c.clientWidth > 0; });
}"""


# ------------------------------------------------------------------------------------ figures
def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation (NumPy's default method)."""
    s = sorted(values)
    if not s:
        return float("nan")
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass
class Figure:
    """One measured quantity: its samples (seconds), where it was measured and its target."""

    name: str
    where: str  # "browser", "server (websocket)" or "server (AppTest)"
    samples: list[float] = field(default_factory=list)
    target_s: float | None = None
    note: str = ""
    #: the 1-minute load average when each sample was taken (the machine is shared)
    loads: list[float] = field(default_factory=list)

    def add(self, seconds: float) -> None:
        """One sample, with the load average at this moment."""
        self.samples.append(seconds)
        self.loads.append(os.getloadavg()[0])

    @property
    def load_text(self) -> str:
        return f"{min(self.loads):.1f}-{max(self.loads):.1f}" if self.loads else ""

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    @property
    def p90(self) -> float:
        return percentile(self.samples, 90)

    def row(self) -> str:
        target = "" if self.target_s is None else f"<= {self.target_s:g}"
        ok = "" if self.target_s is None or not self.samples else (
            "ok" if self.median <= self.target_s else "over")
        return (f"| {self.where} | {self.name} | {len(self.samples)} | {self.median:.3f} | "
                f"{self.p90:.3f} | {target} | {ok} | {self.load_text} | {self.note} |")


def table(figures: list[Figure]) -> str:
    head = ("| measured in | what | n | median (s) | p90 (s) | target (s) | median vs target | load average "
            "| note |\n|---|---|---:|---:|---:|---:|---|---|---|")
    return "\n".join([head, *(f.row() for f in figures)])


# -------------------------------------------------------------------------------- CPU accounting
def _proc_table() -> dict[int, tuple[int, str, float]]:
    """``{pid: (parent pid, command name, CPU seconds)}`` of every process, from ``/proc`` (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
        except OSError:
            continue
        fields = rest.split()
        out[int(entry)] = (int(fields[1]), head.split("(", 1)[1],
                           (int(fields[11]) + int(fields[12])) / tick)
    return out


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` (0 if it is gone)."""
    entry = _proc_table().get(pid)
    return entry[2] if entry else 0.0


def chromium_cpu_seconds() -> float:
    """CPU seconds used so far by the live Chromium processes this process started (browser,
    renderers, GPU and utility processes; not Playwright's driver, not the server)."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0.0, list(children.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        _, name, cpu = table[pid]
        total += cpu if name.startswith("chrom") else 0.0
        stack.extend(children.get(pid, []))
    return total


# ------------------------------------------------------------------------------- browser driving
class Session:
    """One browser tab (its own Streamlit session) and the runs seen on its websocket."""

    def __init__(self, browser: Any, url: str, server_pid: int,
                 viewport: tuple[int, int] = (1400, 1000)) -> None:
        self.context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
        self.context.set_default_timeout(TIMEOUT_S * 1000)
        self.page = self.context.new_page()
        self.tracker = RunTracker(self.page)
        self.url = url
        self.server_pid = server_pid
        self.errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))

    def close(self) -> None:
        self.context.close()

    def wait(self, predicate: Callable[[], bool], what: str, timeout: float = TIMEOUT_S) -> None:
        """Poll ``predicate`` every 5 ms while Playwright delivers events (websocket frames)."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
            self.page.wait_for_timeout(5)

    def settled(self, runs_before: int, plot_before: str | None, *, need_plot: bool) -> None:
        """Block until the page is settled after an action (see the module docstring): the run
        finished, the page idle, the charts showing other data (``need_plot``), nothing still a
        placeholder, pictures decoded and charts drawn (``PAGE_DRAWN_JS``), two frames painted."""
        tr = self.tracker
        self.wait(lambda: tr.finished_ok > runs_before and tr.idle, "the script run to finish")
        self.page.wait_for_function(IDLE_JS, timeout=TIMEOUT_S * 1000, polling="raf")
        if need_plot:
            self.page.wait_for_function(
                f"(before) => {{ const s = ({PLOT_SIGNATURE_JS})(); return s !== null && s !== before; }}",
                arg=plot_before, timeout=TIMEOUT_S * 1000, polling="raf")
        self.page.wait_for_function(PAGE_DRAWN_JS, timeout=TIMEOUT_S * 1000, polling="raf")
        self.page.evaluate(TWO_FRAMES_JS)

    def quiet(self, ms: int = 400) -> None:
        """Wait until no run is in flight and nothing was sent or started for ``ms`` ms (a
        follow-up run, e.g. ``st.rerun`` after a dataset change, has then started and ended)."""
        tr = self.tracker
        while True:
            self.wait(lambda: tr.idle, "the page to become idle")
            self.page.wait_for_function(IDLE_JS, timeout=TIMEOUT_S * 1000)
            marks = (tr.started, tr.sent)
            self.page.wait_for_timeout(ms)
            if tr.idle and (tr.started, tr.sent) == marks:
                return

    def plot_signature(self) -> str | None:
        return self.page.evaluate(PLOT_SIGNATURE_JS)

    def open(self, path: str = "/") -> float:
        """Open ``path`` in this tab; seconds from ``goto`` to the settled page (the run finished,
        the title shown, no element still a placeholder (stSkeleton), every picture decoded and
        every Plotly chart drawn, two frames painted)."""
        t0 = time.perf_counter()
        self.page.goto(self.url + path, wait_until="commit")
        self.settled(0, None, need_plot=False)
        self.page.locator("h1").first.wait_for()
        self.page.wait_for_function(PAGE_DRAWN_JS, timeout=TIMEOUT_S * 1000, polling="raf")
        self.page.evaluate(TWO_FRAMES_JS)
        return time.perf_counter() - t0

    def click_and_settle(self, locator: Any) -> None:
        before = self.tracker.finished_ok
        locator.click()
        self.wait(lambda: self.tracker.finished_ok > before, "a run after the click")
        self.quiet()

    def choose_dataset(self, name: str) -> None:
        """On the Data page: pick the bundled dataset ``name`` in the "Dataset" selectbox."""
        box = self.page.locator('[data-testid="stSelectbox"]').filter(has_text="Dataset").first
        box.click()
        option = self.page.get_by_role("option").filter(has_text=f"{name} — ").first
        self.click_and_settle(option)
        sidebar = self.page.locator('[data-testid="stSidebar"]')
        sidebar.get_by_text(f"bundled: {name}").wait_for()

    def choose_mechanism(self, name: str) -> None:
        box = self.page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(
            has_text="Mechanism")
        box.click()
        # "dppro", "pca-gauss (recommended)" or, before the sidebar showed names only,
        # "dppro — DPPro (...)"
        option = self.page.get_by_role(
            "option", name=re.compile(rf"^{re.escape(name)}( \(recommended\)| — .*)?$")).first
        if option.get_attribute("aria-selected") == "true":  # already chosen: no run would follow
            self.page.keyboard.press("Escape")
            return
        self.click_and_settle(option)

    def goto_page(self, title: str) -> None:
        link = self.page.locator('[data-testid="stSidebarNavLink"]').filter(has_text=title)
        self.click_and_settle(link)
        self.page.locator("h1").filter(has_text=title).first.wait_for()

    def nav_titles(self) -> list[str]:
        links = self.page.locator('[data-testid="stSidebarNav"] [data-testid="stSidebarNavLink"]')
        return [t.split("\n")[-1].strip() for t in links.all_inner_texts()]

    def switch_page(self, title: str) -> float:
        """Click the navigation link ``title``; seconds from the click to the settled page (its run
        finished, the page idle, nothing a placeholder, pictures and charts drawn, two frames)."""
        link = self.page.locator('[data-testid="stSidebarNavLink"]').filter(has_text=title)
        before = self.tracker.finished_ok
        t0 = time.perf_counter()
        link.click()
        self.settled(before, None, need_plot=False)
        seconds = time.perf_counter() - t0
        self.quiet()  # a follow-up run (st.rerun) is over before the next action
        if self.page.locator('[data-testid="stException"]').count():
            self.errors.append(f"{title}: the page shows an exception")
        return seconds

    def metric(self, label: str) -> str:
        m = self.page.locator('[data-testid="stMetric"]').filter(has_text=label).first
        return m.locator('[data-testid="stMetricValue"]').inner_text().strip()

    def slider_moves(self, repeats: int, *, warmup: int = 1, label: str = EPS_LABEL,
                     metric: str | None = METRIC_LABEL,
                     need_plot: bool | None = True) -> dict[str, list[float]]:
        """Key presses on the slider ``label`` (by default the ε slider, ArrowRight through its finite
        values, then Home); seconds per move: ``browser`` (key press to settled),
        ``server`` (websocket round trip), ``server_cpu`` and ``chromium_cpu`` (CPU time the
        server process and the Chromium processes used from the press to the settled page),
        ``renderer_task`` and ``renderer_script`` (the page's main thread busy, and running
        JavaScript: Chrome DevTools ``Performance.getMetrics`` TaskDuration and ScriptDuration,
        which count the page's own work, not the time it waited for a core).

        ``metric``: a metric that must show the slider's value after the move (None: no check);
        ``need_plot``: the page's charts must show other data after the move (None: if the page
        has a chart before the first move)."""
        cdp = self.context.new_cdp_session(self.page)
        cdp.send("Performance.enable")

        def devtools() -> tuple[float, float]:
            m = {x["name"]: x["value"] for x in cdp.send("Performance.getMetrics")["metrics"]}
            return m["TaskDuration"], m["ScriptDuration"]

        slider = self.page.locator('[data-testid="stSlider"]').filter(has_text=label).first
        thumb = slider.locator("input[type=range]")
        thumb.focus()
        if need_plot is None:
            need_plot = self.plot_signature() is not None
        last = int(thumb.get_attribute("max"))  # index of the last value (infinity: not private)
        out: dict[str, list[float]] = {"browser": [], "server": [], "server_cpu": [], "chromium_cpu": [],
                                       "renderer_task": [], "renderer_script": []}
        for i in range(warmup + repeats):
            index = int(thumb.get_attribute("value"))
            key, target = ("ArrowRight", index + 1) if index + 1 < last else ("Home", 0)
            before_runs = self.tracker.finished_ok
            before_plot = self.plot_signature()
            cpu0 = (cpu_seconds(self.server_pid), chromium_cpu_seconds())
            dev0 = devtools()
            t0 = time.perf_counter()
            thumb.press(key)
            self.settled(before_runs, before_plot, need_plot=need_plot)
            t1 = time.perf_counter()
            cpu1 = (cpu_seconds(self.server_pid), chromium_cpu_seconds())
            dev1 = devtools()
            sent = next((t for t in self.tracker.sent_at if t >= t0), None)
            shown = slider.locator('[data-testid="stSliderThumbValue"]').inner_text().strip()
            if int(thumb.get_attribute("value")) != target:
                self.errors.append(f"slider at index {thumb.get_attribute('value')}, expected {target}")
            elif metric is not None and self.metric(metric) != shown:
                self.errors.append(f"{metric} shows {self.metric(metric)} for ε = {shown}")
            if self.page.locator('[data-testid="stException"]').count():
                self.errors.append("the page shows an exception")
            if i >= warmup:
                out["browser"].append(t1 - t0)
                out["server_cpu"].append(cpu1[0] - cpu0[0])
                out["chromium_cpu"].append(cpu1[1] - cpu0[1])
                out["renderer_task"].append(dev1[0] - dev0[0])
                out["renderer_script"].append(dev1[1] - dev0[1])
                if sent is not None:
                    out["server"].append(self.tracker.finished_ok_at - sent)
        return out


def launch_browser(pw: Any) -> Any:
    return pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)


def run_browser(args: argparse.Namespace, log: Callable[[str], None]) -> list[Figure]:
    from playwright.sync_api import sync_playwright

    cold = Figure("cold first page: tab opens / (Data) -> settled, fresh server", "browser",
                  target_s=3.0, note="server already answering /_stcore/health")
    cold_total = Figure("cold start: `streamlit run` -> first page settled", "browser",
                        note="includes Python and Streamlit start-up")
    warm = Figure("first page of a new session, warm server", "browser", target_s=3.0)
    figures = [cold, cold_total, warm]
    targets = {"digits": 0.5, "mnist-10k": 1.0}
    with sync_playwright() as pw:
        browser = launch_browser(pw)
        try:
            for i in range(args.cold):
                port = free_port()
                url = f"http://127.0.0.1:{port}"
                log(f"cold start {i + 1}/{args.cold} on port {port} ...")
                t_start = time.perf_counter()
                proc = start_server(port, LOG)
                try:
                    wait_healthy(url, proc, timeout=TIMEOUT_S, poll=0.02)
                    s = Session(browser, url, proc.pid)
                    cold.add(s.open("/"))
                    cold_total.add(time.perf_counter() - t_start)
                    log(f"  {cold.samples[-1]:.2f} s (from process start {cold_total.samples[-1]:.2f} s)")
                    s.close()
                    if i < args.cold - 1:
                        continue
                    for _ in range(args.warm):  # the last server stays up for the rest
                        s = Session(browser, url, proc.pid)
                        warm.add(s.open("/"))
                        s.close()
                    log(f"  new session on the warm server: median {warm.median:.2f} s")
                    for dataset in args.datasets:
                        log(f"Explore, {args.mechanism} on {dataset}: {args.repeats} slider moves ...")
                        s = Session(browser, url, proc.pid)
                        s.open("/")
                        if dataset != "digits":
                            s.choose_dataset(dataset)
                        s.choose_mechanism(args.mechanism)
                        s.goto_page("Explore")
                        s.quiet()
                        m = s.slider_moves(args.repeats)
                        note = f"{len(s.errors)} errors" + (f": {s.errors[0]}" if s.errors else "")
                        what = f"Explore ε slider, {args.mechanism} on {dataset}"
                        figures += [
                            Figure(f"{what}: key press -> settled", "browser", m["browser"],
                                   targets.get(dataset), note),
                            Figure(f"{what}: websocket frame sent -> script_finished", "server (websocket)",
                                   m["server"]),
                            Figure(f"{what}: server process CPU s per move", "server CPU", m["server_cpu"]),
                            Figure(f"{what}: Chromium CPU s per move (all its processes)", "browser CPU",
                                   m["chromium_cpu"]),
                            Figure(f"{what}: page main thread busy s per move (DevTools TaskDuration)",
                                   "browser CPU", m["renderer_task"]),
                            Figure(f"{what}: page JavaScript s per move (DevTools ScriptDuration)",
                                   "browser CPU", m["renderer_script"])]
                        log("  " + "; ".join(f"{f.where} median {f.median:.3f} s p90 {f.p90:.3f}"
                                             for f in figures[-6:]) + f"; {note}")
                        s.close()
                finally:
                    stop_server(proc)
        finally:
            browser.close()
    return figures


# ----------------------------------------------------------------------------- every page
#: Pages whose slider is moved in ``--pages`` mode: (navigation title, slider label, metric that
#: must show the slider's value or None, charts that must change: True / None = if present).
SLIDER_PAGES = (("Explore", EPS_LABEL, METRIC_LABEL, True), ("Privacy", EPS_LABEL, None, None),
                ("Distances", EPS_LABEL, None, True))
SIZES = ((1280, 720), (1920, 1080))


def _cold_server(browser: Any, root: Path, log_path: Path) -> tuple[Any, str, float]:
    """A new server from ``root`` and the seconds its first page took to settle in a new tab."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_server(port, log_path, root=root)
    try:
        wait_healthy(url, proc, timeout=TIMEOUT_S, poll=0.02)
        first = Session(browser, url, proc.pid)
        seconds = first.open("/")
        first.close()
    except BaseException:
        stop_server(proc)
        raise
    return proc, url, seconds


def run_pages(args: argparse.Namespace, log: Callable[[str], None]) -> list[Figure]:
    """Every page of the navigation, for each app root in ``--roots`` (rounds interleaved: root A,
    root B, root A, ...; one cold server per root and round):

    - cold first page (a new tab on a new server);
    - each page's first visit in a session, and later visits, by its navigation link;
    - ``--repeats`` moves of the slider of each page in :data:`SLIDER_PAGES`;
    - with ``--screenshots DIR`` (last round only): every page at each size in :data:`SIZES`, the
      picture and the problems :data:`benchmarks.browser_harness.LAYOUT_CHECK_JS` finds.
    """
    from playwright.sync_api import sync_playwright

    figures: dict[tuple[str, str], Figure] = {}

    def fig(root: str, what: str, target: float | None) -> Figure:
        key = (root, what)
        if key not in figures:
            figures[key] = Figure(f"[{root}] {what}", "browser", target_s=target)
        return figures[key]

    layout: list[str] = []
    with sync_playwright() as pw:
        browser = launch_browser(pw)
        try:
            for r in range(args.rounds):
                for name, root in args.roots:
                    log(f"round {r + 1}/{args.rounds}, {name} ({root}): cold start ...")
                    proc, url, first = _cold_server(browser, root, LOG)
                    try:
                        fig(name, "cold first page (Data): new tab -> settled", 3.0).add(first)
                        s = Session(browser, url, proc.pid)
                        s.open("/")
                        titles = s.nav_titles()
                        for title in titles:  # first visits, in the navigation's order
                            fig(name, f"page switch, first visit: {title}", 1.0).add(s.switch_page(title))
                        for title in titles:  # again, now that each was visited
                            fig(name, f"page switch, visited: {title}", 1.0).add(s.switch_page(title))
                        for title, label, metric, plots in SLIDER_PAGES:
                            if title not in titles:
                                continue
                            s.switch_page(title)
                            m = s.slider_moves(args.repeats, label=label, metric=metric, need_plot=plots)
                            f = fig(name, f"{title} slider ({label}): key press -> settled", 0.5)
                            for v in m["browser"]:
                                f.add(v)
                        if s.errors:
                            fig(name, "cold first page (Data): new tab -> settled", 3.0).note = \
                                f"{len(s.errors)} errors: {s.errors[0]}"
                        log("  " + "; ".join(f"{f.name.split('] ', 1)[1]} {f.median:.2f}"
                                             for (n, _), f in figures.items() if n == name))
                        s.close()
                        if args.screenshots and r == args.rounds - 1:
                            layout += screenshots(browser, url, proc.pid, args.screenshots / name, log)
                    finally:
                        stop_server(proc)
        finally:
            browser.close()
    args.layout_report = layout
    return list(figures.values())


def screenshots(browser: Any, url: str, pid: int, folder: Path, log: Callable[[str], None]) -> list[str]:
    """Every page at each size of :data:`SIZES`: a picture of what the window shows (no scrolling)
    in ``folder`` and the layout check's problems; returns one report line per page and size."""
    from benchmarks.browser_harness import layout_problems

    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for width, height in SIZES:
        s = Session(browser, url, pid, viewport=(width, height))
        s.open("/")
        for title in s.nav_titles():
            s.switch_page(title)
            path = folder / f"{'-'.join(title.lower().split())}-{width}x{height}.png"
            s.page.screenshot(path=str(path))
            problems = layout_problems(s.page)
            lines.append(f"{path.name}: " + ("no clipped or overlapping text" if not problems
                                             else f"{len(problems)} problem(s): " + "; ".join(problems)))
            log("  " + lines[-1])
        s.close()
    return lines


# ----------------------------------------------------------------------------------- AppTest
def run_apptest(args: argparse.Namespace, log: Callable[[str], None]) -> list[Figure]:
    """The same slider change through Streamlit's AppTest (server only), as ``bench_app`` does."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_app import _app_with, _page, _ScriptProfiler, _slider_latency

    out = []
    for dataset in args.datasets:
        log(f"AppTest: Explore, {args.mechanism} on {dataset} ...")
        profiler = _ScriptProfiler()
        try:
            at = _app_with(dataset, args.mechanism)
            if at is None:
                raise RuntimeError(f"the app does not offer {args.mechanism} on {dataset}")
            _page(at, "explore")
            t = _slider_latency(at, f"p:{args.mechanism}:epsilon", min(args.repeats, 9), profiler)
        finally:
            profiler.restore()
        out.append(Figure(f"Explore ε slider, {args.mechanism} on {dataset}: set_value().run()",
                          "server (AppTest)", t.wall, note=f"CPU median {t.cpu_median:.3f} s"))
        log(f"  median {out[-1].median:.3f} s")
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=12, help="timed slider moves per dataset (>= 10)")
    p.add_argument("--cold", type=int, default=3, help="cold starts (one new server each)")
    p.add_argument("--warm", type=int, default=3, help="new sessions on the warm server")
    p.add_argument("--datasets", nargs="+", default=["digits", "mnist-10k"])
    p.add_argument("--mechanism", default="local-gaussian",
                   help="mechanism on the Explore page (default: the app's default)")
    p.add_argument("--no-apptest", action="store_true", help="skip the AppTest (server-only) figures")
    p.add_argument("--json", type=Path, help="also write the samples to this JSON file")
    p.add_argument("--pages", action="store_true",
                   help="every page instead: cold first page, page switches, each page's slider "
                        "(see run_pages); --repeats moves per slider")
    p.add_argument("--roots", type=_root, nargs="+", default=[("app", ROOT)], metavar="NAME=DIR",
                   help="--pages: checkouts of the app to measure, interleaved round by round "
                        "(e.g. before=/tmp/base after=.)")
    p.add_argument("--rounds", type=int, default=2, help="--pages: rounds over the roots")
    p.add_argument("--screenshots", type=Path, metavar="DIR",
                   help="--pages: screenshots of every page at 1280x720 and 1920x1080 with the "
                        "layout check, in DIR/NAME/")
    return p.parse_args(argv)


def _root(text: str) -> tuple[str, Path]:
    name, _, folder = text.rpartition("=")
    path = Path(folder).resolve()
    if not (path / "app" / "launch.py").exists():
        raise argparse.ArgumentTypeError(f"{folder} holds no app/launch.py")
    return name or path.name, path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not CHROMIUM.exists():
        print(f"Chromium not found at {CHROMIUM} (set DP_EXPLORER_CHROMIUM)", file=sys.stderr)
        return 2

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    load = os.getloadavg()[0]
    if args.pages:
        figures = run_pages(args, log)
    else:
        figures = run_browser(args, log)
        if not args.no_apptest:
            figures += run_apptest(args, log)
    print(f"\nLatency (issue 16 item 7), {os.cpu_count()} cores, load average at start {load:.1f}, "
          f"{time.perf_counter() - t0:.0f} s in all. 'browser' = what a person sees in headless "
          "Chromium; 'server' = without rendering.\n")
    print(table(figures))
    if getattr(args, "layout_report", None):
        print(f"\nScreenshots in {args.screenshots} (what a 1280x720 projector and a 1920x1080 laptop "
              "show without scrolling), with the layout check (clipped, cut or overlapping text):\n")
        print("\n".join(f"- {line}" for line in args.layout_report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        record = {"load_average": load, "args": {k: str(v) for k, v in vars(args).items()},
                  "figures": [asdict(f) for f in figures]}
        args.json.write_text(json.dumps(record, indent=1))
    errors = [f.note for f in figures if "errors:" in f.note]
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
