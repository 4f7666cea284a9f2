"""The load test's websocket mode, small: 2 clients speaking Streamlit's protocol to a real server.

Starts ``streamlit run`` on a free loopback port (``benchmarks.browser_harness.serve``, via
``benchmarks/load_test.py``), opens the Explore page from 2 websocket clients and moves the epsilon
slider 3 times in each; every move must finish, show the new epsilon and raise nothing. About 10 s
(mostly the server start); skipped when the server cannot start here.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from benchmarks import load_test  # benchmarks/ is a namespace package beside app/
from benchmarks.browser_harness import ServerStartError

pytestmark = pytest.mark.slow
pytest.importorskip("websockets", reason="the websockets package (a Streamlit dependency) is missing")


def test_two_websocket_clients_move_the_slider_without_errors():
    args = load_test.parse_args(["--mode", "ws", "--duration", "5", "--max-iterations", "3",
                                 "--move-timeout", "10", "--open-timeout", "20"])
    try:
        # a thread of its own: Playwright's sync API (the browser tests, same worker) leaves an
        # event loop running in this one, and asyncio.run refuses to nest
        with ThreadPoolExecutor(1) as pool:
            row = pool.submit(asyncio.run, load_test.run_phase(2, args, "ws")).result()
    except ServerStartError as exc:
        pytest.skip(f"the Streamlit server did not start: {exc}")
    assert row["errors"] == 0, row["error_samples"]
    assert row["opened"] == row["held"] == 2
    assert all(moves >= 1 for moves in row["session_moves"]), row["session_moves"]
    assert row["moves"] == sum(row["session_moves"]) <= 6
    assert 0 < row["min_s"] <= row["max_s"] <= 10
    assert row["peak_rss_mb"] > 0
