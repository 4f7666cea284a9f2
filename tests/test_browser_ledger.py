"""The persistent budget and the opt-in for releases that are NOT differentially private, in a real
browser (Chromium driven by Playwright; the harness of tests/test_browser.py).

- a release on bounds read from the private data is not drawn, and nothing is offered for
  download, until the user opts in; then the file name, the card and the report say "NOT
  differentially private" and the ledger books it as unbounded;
- a reload, a second tab and a server restart all show the same spent budget (one SQLite store);
- a second draw keeps the first downloadable; past the budget nothing is shown.

Each test starts its own server on a ledger store of its own (``$DP_EXPLORER_LEDGER``).
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.browser_harness import RunTracker, ServerStartError, serve
from dpcore.ledger_store import LedgerStore
from tests.test_browser import (  # noqa: F401 - browser: the session's Chromium (a fixture)
    ARTIFACTS,
    RUN_TIMEOUT_MS,
    TRACKERS,
    assert_no_exception,
    browser,
    expect,
    goto,
    metric,
    pytestmark,
    rerun,
    screenshot,
    settle,
)


@pytest.fixture
def store_path(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "ledger.sqlite"
    monkeypatch.setenv("DP_EXPLORER_LEDGER", str(path))  # read by the server processes started below
    return path


def _serve(tag: str):
    log = ARTIFACTS / f"streamlit-ledger-{tag}.log"
    try:
        return serve(log, timeout=120.0)
    except ServerStartError as exc:  # pragma: no cover - the message carries the server's log
        pytest.fail(str(exc))


@pytest.fixture
def open_session(browser):  # noqa: F811 - the imported fixture
    """``open_session(url, path)``: a new browser context (= a new Streamlit session) at ``path``."""
    contexts = []

    def _open(url: str, path: str = "/"):
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        context.set_default_timeout(30_000)
        contexts.append(context)
        pg = context.new_page()
        TRACKERS[pg] = RunTracker(pg)
        pg.goto(url + path)
        expect(pg.locator("h1").first).to_be_visible(timeout=RUN_TIMEOUT_MS)
        settle(pg)
        assert_no_exception(pg)
        return pg

    yield _open
    for context in contexts:
        for pg in context.pages:
            TRACKERS.pop(pg, None)
        context.close()


def _download(page, label: str) -> tuple[str, bytes]:
    """Click the download button ``label``: (the file name the browser is given, its bytes)."""
    button = page.locator('[data-testid="stDownloadButton"]').filter(has_text=label)
    with page.expect_download(timeout=60_000) as info:
        rerun(page, button.locator("button").first.click)
    return info.value.suggested_filename, Path(info.value.path()).read_bytes()


def _draw(page) -> None:
    rerun(page, page.get_by_role("button", name="Draw release").click)
    assert_no_exception(page)


def _spent(page) -> str:
    return metric(page, "Spent so far, replace-one")


def _reload(page) -> None:
    """Reload the tab: a new Streamlit session in the same browser tab."""
    TRACKERS[page] = RunTracker(page)
    page.reload()
    expect(page.locator("h1").first).to_be_visible(timeout=RUN_TIMEOUT_MS)
    settle(page)


def test_budget_survives_reload_second_tab_and_restart_and_releases_stay_downloadable(
        open_session, store_path):
    with _serve("a") as server:
        page = open_session(server.url, "/release")
        budget = page.locator('[data-testid="stNumberInput"]').filter(has_text="budget of this dataset")
        budget.locator("input").fill("2.5")
        rerun(page, lambda: budget.locator("input").press("Enter"))
        _draw(page)  # epsilon 1: registers the budget 2.5 and is charged when shown
        assert _spent(page) == "ε = 1 of 2.5"
        _draw(page)  # a second draw keeps the first listed and downloadable
        assert _spent(page) == "ε = 2 of 2.5"
        expect(page.get_by_text("Release 1: local-gaussian")).to_be_visible()
        expect(page.get_by_text("Release 2: local-gaussian")).to_be_visible()
        name1, csv1 = _download(page, "CSV of release 1")
        _, card1 = _download(page, "Card of release 1")
        name2, csv2 = _download(page, "CSV of release 2")
        assert json.loads(card1)["sha256"] == hashlib.sha256(csv1).hexdigest()
        assert csv1 != csv2
        assert name1 == name2 == "digits-local-gaussian.csv"
        assert pd.read_csv(io.BytesIO(csv1)).shape == (1797, 65)
        screenshot(page, "ledger-two-releases")
        # past the budget nothing is shown: 2 + 1 > 2.5, refused unseen, nothing charged
        _draw(page)
        expect(page.locator('[data-testid="stAlert"]').filter(has_text="over the budget 2.5")).to_be_visible()
        expect(page.get_by_text("Release 3:")).to_have_count(0)
        assert _spent(page) == "ε = 2 of 2.5"
        screenshot(page, "ledger-refused-past-the-budget")
        # a reload (a new session in the same tab) and a second tab show the same spent budget
        _reload(page)
        goto(page, "Release")
        assert _spent(page) == "ε = 2 of 2.5" and metric(page, "ε budget of this dataset") == "2.5"
        expect(page.get_by_text("Release 1:")).to_have_count(0)  # the history is per session
        second = open_session(server.url, "/release")
        assert _spent(second) == "ε = 2 of 2.5"
    # the server stopped; a new one on the same store
    with _serve("b") as restarted:
        page = open_session(restarted.url, "/release")
        assert _spent(page) == "ε = 2 of 2.5" and metric(page, "ε budget of this dataset") == "2.5"
        screenshot(page, "ledger-after-restart")
    ledger = LedgerStore(store_path).ledger("bundled:digits")
    assert len(ledger.entries) == 2 and ledger.total_epsilon == 2.0


def test_a_release_on_data_bounds_needs_the_opt_in_and_is_marked_not_dp(open_session, store_path):
    csv = "a,b\n" + "\n".join(f"{i % 7},{(i * 3) % 5}" for i in range(60))
    with _serve("c") as server:
        page = open_session(server.url, "/")
        rerun(page, page.get_by_text("Upload a file", exact=True).click)
        uploader = page.locator('[data-testid="stFileUploader"] input[type="file"]').first
        rerun(page, lambda: uploader.set_input_files(
            files=[{"name": "mine.csv", "mimeType": "text/csv", "buffer": csv.encode()}]))
        rerun(page, page.get_by_role("button", name="Use this table").click)
        expect(page.get_by_text("Some bounds below were computed from the private data")).to_be_visible()
        goto(page, "Release")
        expect(page.locator('[data-testid="stAlert"]').filter(has_text="NOT differentially private")
               .first).to_be_visible()
        expect(page.get_by_role("button", name="Draw release")).to_be_disabled()
        expect(page.locator('[data-testid="stDownloadButton"]').filter(has_text="CSV")).to_have_count(0)
        screenshot(page, "ledger-data-bounds-refused")
        rerun(page, page.get_by_text("I publish it anyway").click)
        _draw(page)
        name, data = _download(page, "Download CSV")
        assert name == "mine-local-gaussian-NOT-differentially-private.csv"
        card_name, card = _download(page, "Download release card")
        card = json.loads(card)
        assert card_name.endswith("NOT-differentially-private.card.json")
        assert card["differentially_private"] is False and card["guarantee"]["holds"] is False
        assert card["warnings"][0].startswith("NOT differentially private")
        assert card["sha256"] == hashlib.sha256(data).hexdigest()
        _, report = _download(page, "Download report (HTML)")
        assert b"NOT differentially private" in report
        assert _spent(page).startswith("ε = ∞")
        screenshot(page, "ledger-data-bounds-opted-in")
    key = "sha256:" + hashlib.sha256(csv.encode()).hexdigest()  # the uploaded bytes' key
    entries = LedgerStore(store_path).ledger(key).entries
    assert len(entries) == 1 and entries[0].unbounded

