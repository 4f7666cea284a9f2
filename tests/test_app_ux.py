"""The app as users use it (issue 16): one source of defaults, labelled exploration outputs,
trustworthy Compare/Utility pages, readable plots.

Driven headlessly with ``streamlit.testing.v1.AppTest`` like ``tests/test_app.py``; downloads are
opened and counted.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from dpcore.cli import main as cli_main
from dpcore.mechanisms import MECHANISMS
from tests.test_app import goto, new_app


@pytest.fixture
def served(monkeypatch) -> dict[str, tuple[bytes, str | None]]:
    """What the app's media server would send: ``{file id: (bytes, file name)}``."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    files: dict[str, tuple[bytes, str | None]] = {}
    original = MemoryMediaFileStorage.load_and_get_id

    def record(self, path_or_data, mimetype, kind, filename=None):
        file_id = original(self, path_or_data, mimetype, kind, filename)
        data = path_or_data if isinstance(path_or_data, bytes) else Path(path_or_data).read_bytes()
        files[file_id] = (data, filename)
        return file_id

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", record)
    return files


def download(at, served: dict, label_start: str) -> tuple[bytes, str | None]:
    """The bytes and file name a click on the download button ``label_start...`` would give."""
    button = next(b for b in at.get("download_button") if b.label.startswith(label_start))
    file_id = button.proto.url.rsplit("/", 1)[-1].split(".")[0]
    return served[file_id]


def _draw_on_release_page(at, mechanism: str) -> dict:
    """Select ``mechanism`` in the sidebar, draw on the Release page, return the pending release."""
    at.sidebar.selectbox(key="mechanism").select(mechanism).run()
    goto(at, "release")
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    pending = at.session_state.pending_release
    assert pending["card"], [e.value for e in at.error]
    return pending


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_untouched_app_controls_release_what_the_cli_releases_without_options(mechanism, tmp_path):
    """One source of defaults: the card's parameters (``None`` = automatic included) and the
    released table's shape are the same in the app with untouched controls and in ``dpcore
    release MECH digits`` without options."""
    at = new_app()
    pending = _draw_on_release_page(at, mechanism)
    app_card = json.loads(pending["card"])
    app_csv = pd.read_csv(io.BytesIO(pending["csv"]))

    out = tmp_path / "out.csv"
    assert cli_main(["release", mechanism, "digits", "-o", str(out)]) == 0
    cli_card = json.loads(Path(str(out).replace(".csv", ".card.json")).read_text())
    cli_csv = pd.read_csv(out)

    assert app_card["parameters"] == cli_card["parameters"]
    for key in ("epsilon", "delta", "neighbouring", "kind"):
        assert app_card["guarantee"][key] == pytest.approx(cli_card["guarantee"][key]) \
            if isinstance(cli_card["guarantee"][key], float) else \
            app_card["guarantee"][key] == cli_card["guarantee"][key]
    assert list(app_csv.columns) == list(cli_csv.columns)
    assert app_csv.shape == cli_csv.shape


def test_dpmix_download_from_the_release_page_has_all_rows(served):
    """Issue 16, item 1: the app's DPMix download had 10 rows (n_mixtures filled with 10)."""
    at = new_app()
    ds = at.session_state.dataset
    _draw_on_release_page(at, "dpmix")
    data, filename = download(at, served, "Download CSV")
    assert filename.endswith(".csv")
    frame = pd.read_csv(io.BytesIO(data))
    assert len(frame) == ds.n_samples == 1797
    card = json.loads(download(at, served, "Download release card")[0])
    assert card["n_rows"] == ds.n_samples
    assert card["parameters"]["n_mixtures"] is None and card["parameters"]["sigma_x"] is None
    # the nominal epsilon is what the card guarantees (calibrated, not a fixed sigma = 1)
    assert card["guarantee"]["epsilon"] == pytest.approx(card["parameters"]["epsilon"], rel=1e-6)
