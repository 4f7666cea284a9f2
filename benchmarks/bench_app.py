"""Issue 7 item 6: app latency, measured only (the app and pages are not edited here).

* Slider latency with Streamlit's ``AppTest`` (the pattern of ``tests/test_app.py``): on the
  Explore page with RON-Gauss, a change of the epsilon slider to a finished rerun, on ``digits``
  and on ``mnist-10k`` (chosen on the Data page); the DPMix Privacy page likewise (if DPMix is
  registered). Each change goes to a value not seen before, so the session memo never answers it.
  The reruns are profiled with cProfile (the script runs in its own thread, so its thread body is
  wrapped) and the functions of ``app/``, ``pages/`` and ``dpcore/`` with the largest cumulative
  time are reported, with the largest third-party ones.
* Server start: ``streamlit run`` as a subprocess, to the health endpoint answering and to the
  first rendered page (the Data page's title) in headless Chromium through Playwright (browser
  launched beforehand, not counted), or the first HTML response when Playwright/Chromium are
  missing.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import shutil
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_common import Row, Timing, time_call

ROOT = Path(__file__).resolve().parents[1]
ENTRY = ROOT / "app" / "streamlit_app.py"
EPS_SEQUENCE = [2.0, 0.5, 5.0, 0.2, 10.0, 0.1, 20.0, 0.05, 50.0, 0.02]


class _ScriptProfiler:
    """Wraps the AppTest script thread in cProfile while active; collects the stats."""

    def __init__(self) -> None:
        from streamlit.testing.v1.local_script_runner import LocalScriptRunner

        self.cls = LocalScriptRunner
        self.original = LocalScriptRunner._run_script_thread
        self.profiles: list[cProfile.Profile] = []
        self.active = False
        profiler = self

        def wrapped(runner: Any) -> None:
            if not profiler.active:
                return profiler.original(runner)
            prof = cProfile.Profile()
            prof.enable()
            try:
                return profiler.original(runner)
            finally:
                prof.disable()
                profiler.profiles.append(prof)

        LocalScriptRunner._run_script_thread = wrapped

    def restore(self) -> None:
        self.cls._run_script_thread = self.original

    def summary(self, top: int = 8) -> dict[str, list[tuple[str, float]]]:
        """Largest cumulative times per rerun: project functions and third-party ones."""
        if not self.profiles:
            return {"project": [], "other": []}
        stats = pstats.Stats(self.profiles[0], stream=io.StringIO())
        for prof in self.profiles[1:]:
            stats.add(prof)
        runs = len(self.profiles)
        project, other = [], []
        for (file, line, func), (_, _, _, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
            path = file.replace("\\", "/")
            entry = (f"{Path(file).name}:{line}({func})", cum / runs)
            if any(f"/{part}/" in path for part in ("app", "pages", "dpcore")) and str(ROOT) in path:
                project.append(entry)
            elif func not in {"<module>", "exec", "run", "_run_script", "_run_script_thread",
                              "wrapped"} and "threading" not in path:
                other.append(entry)
        project.sort(key=lambda e: -e[1])
        other.sort(key=lambda e: -e[1])
        return {"project": project[:top], "other": other[:top]}


def _new_app() -> Any:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ENTRY), default_timeout=600)
    at.run()
    _check(at)
    return at


def _check(at: Any) -> None:
    if at.exception:
        raise RuntimeError(f"app raised: {[e.value for e in at.exception]}")


def _slider_latency(at: Any, key: str, repeats: int, profiler: _ScriptProfiler,
                    budget_s: float = 60.0) -> Timing:
    """Time ``repeats`` changes of the select-slider ``key`` to values not used before (fewer
    when they take more than ``budget_s`` in all)."""
    values = EPS_SEQUENCE[: repeats + 1]  # all on the app's epsilon grid
    t = Timing()
    at.select_slider(key=key).set_value(values[0]).run()  # warm-up (first figure build, imports)
    _check(at)
    profiler.active = True
    for v in values[1:]:
        time_call(lambda v=v: at.select_slider(key=key).set_value(v).run(), t)
        _check(at)
        if sum(t.wall) > budget_s:  # a slow page: fewer repeats rather than a stalled suite
            break
    profiler.active = False
    return t


def _app_with(dataset: str, mechanism: str) -> Any | None:
    """A new AppTest session on the bundled ``dataset`` with ``mechanism`` chosen in the sidebar, or
    ``None`` when the app does not offer that mechanism for that dataset."""
    at = _new_app()
    if dataset != "digits":  # digits is the app's default
        _page(at, "data")
        at.selectbox[0].select(dataset).run()
        _check(at)
    names = [o.split(" ")[0] for o in at.sidebar.selectbox(key="mechanism").options]
    if mechanism not in names:
        return None
    at.sidebar.selectbox(key="mechanism").select(mechanism).run()
    _check(at)
    return at


def _page(at: Any, page: str) -> None:
    at.switch_page(f"../pages/{page}.py").run()
    _check(at)


CASES = [("digits", "ron-gauss", "explore", 0.3), ("mnist-10k", "ron-gauss", "explore", 1.0),
         ("digits", "dpmix", "privacy", 0.5)]


def run_apptest(repeats: int, log: Callable[[str], None], cases: list[tuple[str, str, str, float]] = CASES
                ) -> tuple[list[Row], dict[str, Any]]:
    try:
        import streamlit.testing.v1  # noqa: F401
    except ImportError as exc:
        return [Row("app", "app latency", note=f"skipped: {exc}")], {}
    rows: list[Row] = []
    profiles: dict[str, Any] = {}
    for dataset, mech, page, goal in cases:
        label = f"app: {page.title()} page, {mech} on {dataset}, epsilon slider -> rerun"
        log(f"  {label} ...")
        profiler = _ScriptProfiler()
        try:
            at = _app_with(dataset, mech)
            if at is None:
                rows.append(Row("app", label, note=f"skipped: {mech} not offered on {dataset}"))
                continue
            _page(at, page)
            t = _slider_latency(at, f"p:{mech}:epsilon", repeats, profiler)
        except Exception as exc:  # report and go on: the lead needs the other numbers too
            rows.append(Row("app", label, note=f"failed: {type(exc).__name__}: {exc}"))
            log(f"    failed: {exc}")
            continue
        finally:
            profiler.restore()
        summary = profiler.summary()
        profiles[label] = summary
        top = "; ".join(f"{name} {sec:.3f}s" for name, sec in summary["project"][:3])
        rows.append(Row("app", label, "", None, t.wall_median, None, None, f"<= {goal} s",
                        f"{len(t.wall)} changes; CPU {t.cpu_median:.3f} s; top: {top}",
                        {"profile": summary, "cpu_s": t.cpu_median}))
        log(f"    {t.wall_median:.3f} s (CPU {t.cpu_median:.3f} s)")
    return rows, profiles


def run_server_start(repeats: int, log: Callable[[str], None]) -> list[Row]:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    try:
        from playwright.sync_api import sync_playwright
        have_browser = Path(chromium).exists()
    except ImportError:
        have_browser = False
    from benchmarks.browser_harness import free_port, start_server, stop_server, wait_healthy

    t_health, t_render = Timing(), Timing()
    pw = browser = None
    if have_browser:
        pw = sync_playwright().start()
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
    try:
        for i in range(repeats):
            port = free_port()
            log(f"  streamlit run, start {i + 1}/{repeats} (port {port}) ...")
            url = f"http://127.0.0.1:{port}"
            t0 = time.perf_counter()
            proc = start_server(port, ROOT / "test-artifacts" / "bench-server-start.log")
            try:
                wait_healthy(url, proc, timeout=120, poll=0.02)
                t_health.wall.append(time.perf_counter() - t0)
                if browser is not None:
                    page = browser.new_page()
                    page.goto(f"{url}/", wait_until="commit")
                    page.wait_for_selector("h1", timeout=120_000)
                    t_render.wall.append(time.perf_counter() - t0)
                    page.close()
                else:
                    with urllib.request.urlopen(f"{url}/", timeout=30) as r:
                        r.read()
                    t_render.wall.append(time.perf_counter() - t0)
            finally:
                stop_server(proc)
    except Exception as exc:
        return [Row("app", "server start", note=f"failed: {type(exc).__name__}: {exc}")]
    finally:
        if browser is not None:
            browser.close()
        if pw is not None:
            pw.stop()
    what = "first rendered page (Chromium, Data page title)" if have_browser else "first HTML"
    rows = [Row("app", "server start: streamlit run -> /_stcore/health ok", "", None,
                t_health.wall_median, None, None, "", ""),
            Row("app", f"server start: streamlit run -> {what}", "", None, t_render.wall_median,
                None, None, "<= 5 s", f"{len(t_render.wall)} starts")]
    for r in rows:
        log(f"    {r.name}: {r.time_s:.2f} s")
    return rows


def run(repeats: int, log: Callable[[str], None], server_starts: int = 3, quick: bool = False
        ) -> tuple[list[Row], dict[str, Any]]:
    """The AppTest cases (``quick``: the first only) and ``server_starts`` server starts."""
    rows, profiles = run_apptest(repeats, log, CASES[:1] if quick else CASES)
    rows += run_server_start(server_starts, log)
    return rows, profiles
