"""Stop the Attack page's run from a real browser, many times: how often the stop ends in a result.

Each cycle opens a new session on the Attack page (digits), picks ``--mechanism``, asks for 5000
trials, presses Run, waits until the progress bar shows, waits a random 0-1.5 s, presses Stop once
and waits up to ``--wait`` seconds for the "Stopped after" notice. Prints one line per cycle
(ok + seconds from the click, or FAIL + the page's alerts) and the failure count.

A slow mechanism (modips: about 1 s per trial on digits) widens the window in which the run that
Stop interrupted is still drawing its last trial while the next run reads the scores.

    python benchmarks/attack_stop_loop.py --cycles 20 --mechanism modips
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.browser_harness import CHROMIUM_ARGS, RunTracker, serve  # noqa: E402
from tests import test_browser as tb  # noqa: E402


def cycle(browser, url: str, mechanism: str, wait_s: float, rng: random.Random) -> tuple[bool, str]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(60_000)
    page = context.new_page()
    tb.TRACKERS[page] = RunTracker(page)
    try:
        page.goto(url + "/attack")
        tb.expect(page.locator("h1").first).to_be_visible(timeout=120_000)
        tb.settle(page)
        if mechanism != "local-gaussian":
            box = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(
                has_text="Mechanism")
            box.click()
            option = next(o for o in page.get_by_role("option").all_inner_texts() if o.startswith(mechanism))
            tb.rerun(page, page.get_by_role("option", name=option, exact=True).click)
        tb.press_on_slider(page, "Trials (releases per world)", "End")
        page.get_by_role("button", name="Run attack").click()
        bar = page.locator('[data-testid="stProgress"]')
        tb.poll(page, lambda: bar.count() and "of 5000 trials" in bar.first.inner_text(), timeout_ms=120_000,
                what="the progress bar")
        page.wait_for_timeout(rng.uniform(0, 1500))
        page.get_by_role("button", name="Stop the attack").click()
        clicked = time.monotonic()
        deadline = clicked + wait_s
        while time.monotonic() < deadline:
            if page.get_by_text("Stopped after").count():
                return True, f"{time.monotonic() - clicked:.1f} s"
            page.wait_for_timeout(100)
        alerts = page.locator('[data-testid="stAlert"]').all_inner_texts()
        return False, f"no result {wait_s:.0f} s after Stop; alerts: {alerts}"
    finally:
        tb.TRACKERS.pop(page, None)
        context.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--mechanism", default="local-gaussian")
    ap.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the result after Stop")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    failures = 0
    with serve(ROOT / "test-artifacts" / "streamlit-attack-stop-loop.log", timeout=90.0) as srv:
        pw = tb.sync_api.sync_playwright().start()
        browser = pw.chromium.launch(executable_path=str(tb.CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            for i in range(args.cycles):
                ok, what = cycle(browser, srv.url, args.mechanism, args.wait, rng)
                failures += not ok
                print(f"cycle {i + 1}: {'ok' if ok else 'FAIL'} {what}", flush=True)
        finally:
            browser.close()
            pw.stop()
    print(f"{args.mechanism}: {failures} of {args.cycles} stops without a result")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
