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
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "APP",
    "HARDENED_SETTINGS",
    "LAYOUT_SETTINGS",
    "RUNNER_SETTINGS",
    "LOOPBACK",
    "PRELOAD",
    "ROOT",
    "import_modules",
    "main",
    "prepare_process",
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


#: The page layout of ``.streamlit/config.toml``'s ``[theme]`` (tests/test_app_ux.py checks both): a
#: smaller gap above the title, h1-h3 and metric values, so that a page's main figure fits a 1280 x 720
#: projector without scrolling (Streamlit's defaults: 6rem above a 2.75rem title, 2.25rem metrics).
LAYOUT_SETTINGS: dict[str, str] = {
    "theme.paddingTop": "1.5rem",
    "theme.headingFontSizes": '["2rem", "1.5rem", "1.25rem"]',
    "theme.metricValueFontSize": "1.6rem",
}


#: Server settings for many sessions (``.streamlit/config.toml``'s ``[runner]``; the launcher passes
#: them too). ``runner.postScriptGC``: Streamlit runs a full ``gc.collect(2)`` after every script run,
#: holding the interpreter while it walks every session's objects; with 25 sessions moving the epsilon
#: slider (``benchmarks/load_test.py --mode ws --sessions 25``) turning it off gave 2,461 moves in 60 s
#: instead of 1,708, p50 0.80 -> 0.54 s, p95 1.68 -> 1.14 s, the same peak RSS (491 / 497 MB): Python's
#: own generational collection still runs, and ended sessions are collected by the reaper
#: (:func:`app.state.reap_ended_sessions`).
RUNNER_SETTINGS: dict[str, str] = {"runner.postScriptGC": "false"}


def _flags(settings: Mapping[str, str]) -> list[str]:
    return [item for key, value in settings.items() for item in (f"--{key}", value)]


#: Modules the app's pages need: the mechanism registry, the app state, pandas, scikit-learn (the
#: Explore view, the held-out split), Plotly's JSON. Streamlit imports a script's modules on the
#: first run that needs them, which made the first visitor wait (several seconds on a loaded
#: 2-core machine). The launcher imports them before the server starts listening: the server
#: answers once it can serve every page at once. (Imported on a background thread beside the server
#: start, as before, they took as long, held the interpreter lock while the first run needed it,
#: and the first run still waited: about 4 s of the cold first page came from scikit-learn.)
#: The first page's run also imported Pillow's image plugins (PNG encoding of the image grid),
#: pyarrow's pandas bridge (the preview grid), Streamlit's icon names and app.markdown.
PRELOAD = ("dpcore.mechanisms", "app.state", "app.controls", "app.explain", "app.upload",
           "app.figures.images", "dpcore.release",
           "app.runner", "app.figures.common", "sklearn.model_selection", "plotly.io",
           "sklearn.cluster", "sklearn.metrics", "app.markdown", "pyarrow.pandas_compat",
           "streamlit.material_icon_names", "PIL.BmpImagePlugin", "PIL.GifImagePlugin",
           "PIL.JpegImagePlugin", "PIL.PngImagePlugin", "PIL.PpmImagePlugin")


def import_modules(modules: tuple[str, ...] = PRELOAD) -> None:
    """Import ``modules``. An import that fails is skipped here: the script run that needs the
    module shows the error."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - reported by the run that imports it
            continue


def prepare_process(modules: tuple[str, ...] = PRELOAD) -> None:
    """Work the first visitor's run would otherwise do, done before the server listens.

    - :func:`import_modules` (``modules``);
    - Streamlit's once-per-process check for a bare ``python script.py`` or a REPL (to print "use
      streamlit run") is marked done: the launcher always runs ``streamlit run``, and the check
      walks the first run's whole stack with ``inspect.stack()``, resolving the path of every
      loaded module for every frame: 0.4-0.5 s of CPU in the first visitor's first run here;
    - the garbage is collected and the objects alive (the imported modules, mostly) are frozen
      (``gc.freeze``), so the first run's collection (:func:`app.state.tune_process`) and
      Streamlit's after every run skip them.
    """
    import gc

    import_modules(modules)
    try:
        from streamlit import delta_generator
    except ImportError:  # pragma: no cover - Streamlit is a dependency
        return
    if hasattr(delta_generator, "_use_warning_has_been_displayed"):  # Streamlit internals: if absent,
        delta_generator._use_warning_has_been_displayed = True  # the check just runs as before
    gc.collect()
    gc.freeze()


def main() -> None:
    """``dp-explorer``: ``streamlit run`` the app with the hardened flags, then the user's own;
    the pages' modules are imported first (:func:`prepare_process`)."""
    from streamlit.web import cli as stcli

    if str(ROOT) not in sys.path:  # `app` and `dpcore` from this checkout, as the script has them
        sys.path.insert(0, str(ROOT))
    prepare_process(PRELOAD)
    settings = {**HARDENED_SETTINGS, **LAYOUT_SETTINGS, **RUNNER_SETTINGS}
    sys.argv = ["streamlit", "run", str(APP), *_flags(settings), *sys.argv[1:]]
    sys.exit(stcli.main())


def server_command(port: int, *, address: str = LOOPBACK) -> list[str]:
    """``python -m app.launch`` (= ``dp-explorer``: ``streamlit run app/streamlit_app.py`` with
    :func:`import_modules`) on ``address:port`` for a test or benchmark.

    Hardened flags as for ``dp-explorer``, plus headless (no browser is opened) and no file
    watcher (nothing reruns while a test edits files; one less thread under load). The flags
    given here come after the launcher's defaults, so they win (``server.address``).
    """
    settings = {**HARDENED_SETTINGS, **LAYOUT_SETTINGS, **RUNNER_SETTINGS, "server.address": address,
                "server.port": str(port), "server.headless": "true", "server.fileWatcherType": "none"}
    return [sys.executable, "-m", "app.launch", *_flags(settings)]


if __name__ == "__main__":  # pragma: no cover
    main()
