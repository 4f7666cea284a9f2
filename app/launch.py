"""Start the Streamlit app: the ``dp-explorer`` console script and a loopback test server.

Everything that runs ``streamlit run`` on this app goes through here, so the hardened settings
live in one place: the console script (:func:`main`) and :func:`server_command`, which the
test/benchmark harness (``benchmarks/browser_harness.py``: real-browser tests, load test, browser
latency benchmark) starts its servers with.
The flags repeat ``.streamlit/config.toml`` on the command line because that file is only read
when Streamlit starts from the repository root, and ``dp-explorer`` may start from anywhere.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "APP",
    "HARDENED_SETTINGS",
    "LOOPBACK",
    "PRELOAD",
    "PRELOAD_LATER",
    "ROOT",
    "import_modules",
    "main",
    "preload",
    "preload_later",
    "server_command",
]

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


#: Modules the first page (Data) of every session needs: the mechanism registry, the app state,
#: pandas. Streamlit imports a script's modules on the first session's first run, which made the
#: first visitor wait for them (several seconds on a loaded 2-core machine); the launcher imports
#: them before the server starts listening instead, so the server answers once it can serve the
#: first page (on a background thread beside the server start they took as long, sharing the
#: interpreter lock, and the first run still waited for them).
PRELOAD = ("dpcore.mechanisms", "app.state", "app.controls", "app.figures.images", "dpcore.release")
#: Modules of the other pages (scikit-learn for the Explore view, Plotly's JSON for charts):
#: imported after the first page's run, not during it. Imported at start-up they held the
#: interpreter lock while the first run needed it: about 4 s of scikit-learn import on a loaded
#: machine, most of the cold first page (``benchmarks/bench_browser.py``).
PRELOAD_LATER = ("app.runner", "app.figures.common", "sklearn.model_selection", "plotly.io",
                 "sklearn.cluster", "sklearn.metrics")
#: Seconds :func:`preload_later` waits before importing: the browser is then drawing the first page
#: (about 1-2 s), and an import would take one of the two cores from it.
LATER_DELAY_S = 2.0
_later_started = threading.Event()


def import_modules(modules: tuple[str, ...] = PRELOAD) -> None:
    """Import ``modules`` in this thread. An import that fails is skipped here: the script run
    that needs the module shows the error."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - reported by the run that imports it
            continue


def preload(modules: tuple[str, ...] = PRELOAD, delay_s: float = 0.0) -> threading.Thread:
    """:func:`import_modules` on a daemon thread (started; returned for joining), after
    ``delay_s`` seconds. A run that needs a module meanwhile imports it itself (Python's import
    lock makes it wait for, not repeat, an import under way)."""
    def run() -> None:
        time.sleep(delay_s)
        import_modules(modules)

    thread = threading.Thread(target=run, name="dp-explorer-preload", daemon=True)
    thread.start()
    return thread


def preload_later() -> threading.Thread | None:
    """Start importing :data:`PRELOAD_LATER` after :data:`LATER_DELAY_S` s, once per process
    (called at the end of every script run; only the first call starts a thread)."""
    if _later_started.is_set():
        return None
    _later_started.set()
    return preload(PRELOAD_LATER, LATER_DELAY_S)


def main() -> None:
    """``dp-explorer``: ``streamlit run`` the app with the hardened flags, then the user's own;
    the first page's modules are imported first (:func:`import_modules`), the other pages' after
    the first run (:func:`preload_later`, called by the app script)."""
    from streamlit.web import cli as stcli

    if str(ROOT) not in sys.path:  # `app` and `dpcore` from this checkout, as the script has them
        sys.path.insert(0, str(ROOT))
    import_modules(PRELOAD)
    sys.argv = ["streamlit", "run", str(APP), *_flags(HARDENED_SETTINGS), *sys.argv[1:]]
    sys.exit(stcli.main())


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


if __name__ == "__main__":  # pragma: no cover
    main()
