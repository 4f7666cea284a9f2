"""The Streamlit app, driven headlessly with ``streamlit.testing.v1.AppTest``.

Every page runs on every bundled dataset without an exception; widgets are set like a user would;
the Release page offers a CSV whose card matches the parameters, and refuses NOT PRIVATE settings.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from dpcore.data import bundled_datasets

st_testing = pytest.importorskip("streamlit.testing.v1")
AppTest = st_testing.AppTest

ROOT = Path(__file__).resolve().parents[1]
ENTRY = str(ROOT / "app" / "streamlit_app.py")
PAGES = ["data", "explore", "privacy", "distances", "utility", "compare", "attack", "release", "tour"]
TIMEOUT = 120


def new_app(mechanism: str | None = None) -> AppTest:
    """A fresh session on the bundled digits; ``mechanism``: chosen in the sidebar as a user would
    (the untouched default is the recommended one, pca-gauss on digits)."""
    at = AppTest.from_file(ENTRY, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    if mechanism is not None:
        at.sidebar.selectbox(key="mechanism").select(mechanism).run()
        assert not at.exception, at.exception
    return at


def goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"../pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def choose_dataset(at: AppTest, name: str) -> AppTest:
    goto(at, "data")
    at.selectbox[0].select(name).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state.dataset.name == name
    return at


def test_default_dataset_is_bundled_and_loaded():
    at = new_app()
    ds = at.session_state.dataset
    assert ds.name == "digits" and ds.bounds_source == "metadata"
    assert any("digits" in m.value for m in at.sidebar.markdown)


@pytest.mark.slow
@pytest.mark.parametrize("dataset", sorted(bundled_datasets()))
def test_every_page_runs_on_every_dataset(dataset):
    at = new_app()
    choose_dataset(at, dataset)
    mechanisms = at.sidebar.selectbox(key="mechanism").options
    assert mechanisms, "no mechanism offered"
    for page in PAGES:
        goto(at, page)
        assert not at.error or page in {"explore", "release"}, [e.value for e in at.error]


@pytest.mark.parametrize("mechanism", ["local-gaussian"])
def test_explore_page_follows_the_epsilon_slider(mechanism):
    at = new_app()
    at.sidebar.selectbox(key="mechanism").select(mechanism).run()
    goto(at, "explore")
    slider = at.select_slider(key=f"p:{mechanism}:epsilon")
    slider.set_value(0.1).run()
    assert not at.exception
    scales_low = [r for r in at.table[0].value["noise scale"]]
    slider.set_value(10.0).run()
    scales_high = [r for r in at.table[0].value["noise scale"]]
    assert float(scales_low[0]) > float(scales_high[0]) > 0
    slider.set_value(float("inf")).run()
    assert any("NOT PRIVATE" in e.value for e in at.error)


def test_parameters_survive_page_switches():
    """Widget values set on one page are there after visiting pages that do not show them."""
    at = new_app()
    at.sidebar.selectbox(key="mechanism").select("ron-gauss").run()
    goto(at, "explore")
    at.select_slider(key="p:ron-gauss:epsilon").set_value(5.0).run()
    at.number_input(key="p:preview_seed").set_value(7).run()
    goto(at, "data")
    at.slider(key="p:test_size").set_value(0.3).run()
    for page in ("privacy", "compare", "release", "explore"):
        goto(at, page)
    assert at.select_slider(key="p:ron-gauss:epsilon").value == 5.0
    assert at.number_input(key="p:preview_seed").value == 7
    assert at.session_state["p:test_size"] == 0.3
    assert any("5" in m.value for m in at.metric if m.label == "guaranteed ε")
    goto(at, "release")  # the Release page releases with the Explore page's parameters
    assert at.session_state["p:ron-gauss:epsilon"] == 5.0


def _pending(at: AppTest) -> dict:
    return at.session_state.pending_release


def test_release_download_carries_csv_and_matching_card():
    at = new_app("local-gaussian")
    goto(at, "explore")
    at.select_slider(key="p:local-gaussian:epsilon").set_value(2.0).run()
    at.select_slider(key="p:local-gaussian:delta").set_value(1e-6).run()
    goto(at, "release")
    at.button[0].click().run()
    assert not at.exception
    pending = _pending(at)
    card = json.loads(pending["card"])
    assert card["mechanism"] == "local-gaussian"
    assert card["parameters"]["epsilon"] == 2.0 and card["parameters"]["delta"] == 1e-6
    assert card["guarantee"]["epsilon"] == 2.0 and card["guarantee"]["delta"] == 1e-6
    assert card["guarantee"]["neighbouring"] == "replace-one"
    assert card["sha256"] == hashlib.sha256(pending["csv"]).hexdigest()
    frame = pd.read_csv(__import__("io").BytesIO(pending["csv"]))
    assert frame.shape == (1797, 65)
    assert "random_state" not in pending["card"] and "seed" not in card["parameters"]
    labels = [b.label for b in at.get("download_button")]
    assert "Download CSV" in labels and "Download release card" in labels
    # the shown release was charged once, whatever is downloaded afterwards
    at.get("download_button")[0].click().run()
    at.get("download_button")[1].click().run()
    ledger = at.session_state.ledger
    assert len(ledger.entries) == 1 and ledger.total_epsilon == pytest.approx(2.0)
    assert ledger.entries[0].sha256 == card["sha256"]


@pytest.fixture
def media(monkeypatch) -> dict[str, bytes]:
    """The bytes behind every download button of an AppTest run, by media file id."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
    from streamlit.testing.v1 import app_test

    files: dict[str, bytes] = {}

    class Recording(MemoryMediaFileStorage):
        def load_and_get_id(self, path_or_data, mimetype, kind, filename=None):
            file_id = super().load_and_get_id(path_or_data, mimetype, kind, filename)
            files[file_id] = self.get_file(file_id).content
            return file_id

    monkeypatch.setattr(app_test, "MemoryMediaFileStorage", Recording)
    return files


def download(at: AppTest, media: dict[str, bytes], label: str) -> bytes:
    """What the download button ``label`` hands to the browser."""
    button = next(b for b in at.get("download_button") if b.proto.label == label)
    file_id = button.proto.url.rsplit("/", 1)[-1].split(".")[0]
    return media[file_id]


def _plain(markdown: str) -> str:
    """Markdown from ``md_escape`` read as text."""
    return markdown.replace("\\", "")


def _draw(at: AppTest) -> AppTest:
    next(b for b in at.button if b.label == "Draw release").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_shown_draw_is_charged_and_a_draw_past_the_budget_is_refused():
    at = new_app()
    goto(at, "release")
    at.number_input(key="p:budget").set_value(1.5).run()
    _draw(at)  # epsilon 1 (the default): shown, so charged without any download; registers the budget
    ledger = at.session_state.ledger
    shown = _pending(at)
    assert [e.sha256 for e in ledger.entries] == [json.loads(shown["card"])["sha256"]]
    assert ledger.total_epsilon == 1.0 and ledger.budget == 1.5 and at.dataframe  # its rows are shown
    at.run()
    assert not [n for n in at.number_input if n.key == "p:budget"]  # set once: no longer an input
    # a second epsilon-1 draw would make 2 > 1.5: refused before anyone sees it, nothing charged
    _draw(at)
    assert any("Refused" in e.value and "over the budget 1.5" in _plain(e.value) for e in at.error)
    assert _pending(at)["csv"] == shown["csv"]  # the first release is still shown and downloadable
    assert len(at.session_state.release_history) == 1
    assert len(at.session_state.ledger.entries) == 1 and at.session_state.ledger.total_epsilon == 1.0
    # the budget can be raised only by the explicit, logged action (a reason is required)
    at.number_input(key="raise_eps").set_value(2.0).run()
    next(b for b in at.button if b.label == "Raise the budget").click().run()
    assert any("reason" in _plain(e.value) for e in at.error)
    at.text_input(key="raise_reason").input("second release approved").run()
    next(b for b in at.button if b.label == "Raise the budget").click().run()
    assert any("Budget raised" in m.value for m in at.success)
    _draw(at)
    assert at.session_state.ledger.total_epsilon == 2.0 and _pending(at)["csv"] != shown["csv"]
    # both releases stay listed and downloadable until discarded
    labels = [b.proto.label for b in at.get("download_button")]
    assert "CSV of release 1" in labels and "CSV of release 2" in labels
    next(b for b in at.button if b.label == "Discard release 1").click().run()
    labels = [b.proto.label for b in at.get("download_button")]
    assert "CSV of release 1" not in labels and "CSV of release 2" in labels
    assert at.session_state.ledger.total_epsilon == 2.0  # discarding refunds nothing


@pytest.mark.slow
def test_ledger_download_is_the_cli_file_and_an_upload_adds_its_releases(tmp_path, media):
    from dpcore.cli import main
    from dpcore.ledger import Ledger

    cli_ledger = tmp_path / "L.json"
    assert main(["release", "local-gaussian", "digits", "--epsilon", "2", "--delta", "1e-6", "-o",
                 str(tmp_path / "r.csv"), "--ledger", str(cli_ledger), "--budget", "4"]) == 0
    at = new_app()
    goto(at, "release")
    at.number_input(key="p:budget").set_value(4.0).run()
    _draw(at)  # epsilon 1
    session_file = download(at, media, "Download ledger (JSON)")
    raw = json.loads(session_file)
    cli_raw = json.loads(cli_ledger.read_text())
    assert set(cli_raw) <= set(raw)  # the CLI's format (plus dataset_key and the budget log)
    assert [e.keys() for e in raw["entries"]] == [e.keys() for e in cli_raw["entries"]]
    assert Ledger.from_json(session_file).entries == at.session_state.ledger.entries
    assert raw["total_epsilon"] == 1.0 and raw["budget"]["epsilon"] == 4.0
    assert raw["dataset_key"] == "bundled:digits"
    # upload the CLI's ledger: its releases are added to this dataset's ledger
    at.get("file_uploader")[0].set_value(("L.json", cli_ledger.read_bytes(), "application/json")).run()
    assert not at.exception, [e.value for e in at.exception]
    ledger = at.session_state.ledger
    assert ledger.total_epsilon == 3.0 and len(ledger.entries) == 2 and ledger.budget == 4.0
    assert any("Imported the ledger" in m.value for m in at.success)
    # the round trip: the downloaded file is the dataset's ledger, and the CLI continues it
    merged = tmp_path / "merged.json"
    merged.write_bytes(download(at, media, "Download ledger (JSON)"))
    assert Ledger.load(merged).entries == ledger.entries
    assert main(["release", "local-gaussian", "digits", "--epsilon", "1.5", "-o", str(tmp_path / "s.csv"),
                 "--ledger", str(merged)]) == 2  # 3 + 1.5 > 4
    _draw(at)  # 3 + 1 meets the budget exactly: allowed
    assert at.session_state.ledger.total_epsilon == 4.0 and not at.error
    at.run()
    assert next(b for b in at.button if b.label == "Draw release").proto.disabled  # the budget is spent
    assert any("budget (ε = 4) is spent" in _plain(w.value) for w in at.warning)
    # a file that is not a ledger is refused with a message, the ledger unchanged
    ledger = at.session_state.ledger
    at.get("file_uploader")[0].set_value(("bad.json", b'{"entries": [{"epsilon": NaN}]}',
                                          "application/json")).run()
    assert any("not a dpcore ledger" in _plain(e.value) for e in at.error)
    assert at.session_state.ledger.entries == ledger.entries


def test_not_private_settings_cannot_be_downloaded():
    at = new_app("local-gaussian")
    goto(at, "explore")
    at.select_slider(key="p:local-gaussian:epsilon").set_value(float("inf")).run()
    goto(at, "release")
    at.button[0].click().run()
    assert any("NOT PRIVATE" in e.value for e in at.error)
    assert not [b for b in at.get("download_button") if b.key != "dl_ledger"]  # the ledger is always offered


def test_two_downloads_with_same_settings_differ():
    at = new_app()
    goto(at, "release")
    at.button[0].click().run()
    first = _pending(at)["csv"]
    at.button[0].click().run()
    assert _pending(at)["csv"] != first


def test_upload_csv_without_bounds_is_flagged_and_stays_in_session():
    csv = "a,b,y\n" + "\n".join(f"{i % 7},{(i * 3) % 5},{i % 2}" for i in range(60))
    at = new_app()
    goto(at, "data")
    at.radio(key="p:data_source").set_value("Upload a file").run()
    at.get("file_uploader")[0].set_value(("mine.csv", csv.encode(), "text/csv")).run()
    assert not at.exception
    at.selectbox(key="upload_label").select("y").run()
    # no task chosen: the table cannot be used (the task is never guessed from the labels); the step
    # still missing is the one shown, and it asks for the task
    assert not [b for b in at.button if b.label == "Use this table"]
    assert any("Choose the task" in i.value for i in at.info)
    assert any("**2 · Label and task**" in m.value and "now" in m.value for m in at.markdown)
    assert not at.exception
    assert at.session_state.dataset.name == "digits"
    at.selectbox(key="upload_task").select("classification").run()
    at.text_input(key="upload_classes").input("0, 1").run()
    next(b for b in at.button if b.label == "Use this table").click().run()
    assert not at.exception
    ds = at.session_state.dataset
    assert ds.name == "mine.csv" and ds.n_samples == 60 and ds.bounds_source == "data"
    assert ds.classes_source == "user" and ds.classes.tolist() == [0, 1]
    assert any("computed from the private data" in e.value for e in at.error)
    # another session does not see the upload
    other = new_app()
    assert other.session_state.dataset.name == "digits"


def test_upload_with_bad_file_shows_error_not_traceback():
    at = new_app()
    goto(at, "data")
    at.radio(key="p:data_source").set_value("Upload a file").run()
    at.get("file_uploader")[0].set_value(("bad.csv", b"a,a\n1,2\n", "text/csv")).run()
    assert not at.exception
    assert any("duplicate column" in e.value for e in at.error)


@pytest.mark.slow
def test_compare_page_small_sweep_plots_every_mechanism_and_offers_csv():
    at = new_app()
    goto(at, "compare")
    at.multiselect(key="p:compare_mechs").set_value(["local-gaussian", "modips"]).run()
    at.multiselect(key="p:compare_eps").set_value([1.0, 50.0]).run()
    at.number_input(key="p:compare_trials").set_value(1).run()
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    frame = at.dataframe[-2].value  # the table of all numbers (the last one is the guarantee table)
    assert set(frame["mechanism"]) == {"local-gaussian", "modips"}
    assert set(frame["x"]) == {1.0, 50.0}
    chart = at.get("plotly_chart")[0]
    series = {trace["name"] for trace in json.loads(chart.proto.spec)["data"] if "name" in trace}
    assert any("local-gaussian" in s for s in series) and any("modips" in s for s in series)
    assert any(b.label.startswith("Download all numbers") for b in at.get("download_button"))
    # returning to the page is instant: the results are kept for this session
    goto(at, "data")
    goto(at, "compare")
    assert at.get("plotly_chart")


def test_utility_page_sweeps_dpmix_over_ell():
    at = new_app()
    at.sidebar.selectbox(key="mechanism").select("dpmix").run()
    goto(at, "utility")
    at.radio(key="p:utility_axis").set_value("ell").run()
    at.multiselect(key="p:utility_ell").set_value([1, 16]).run()
    at.slider(key="p:utility_trials").set_value(1).run()
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    frame = at.dataframe[0].value
    assert set(frame["param"]) == {"ell"} and set(frame["x"]) == {1, 16}
    assert frame["baseline"].notna().all()


def test_tune_process_limits_blas_threads_and_freezes_only_after_new_imports(monkeypatch):
    """The server's per-run hook: one BLAS thread, long-lived objects frozen out of the GC."""
    import gc
    import sys
    import types

    from threadpoolctl import threadpool_info

    from app import state

    monkeypatch.setattr(state, "_modules_at_tuning", 0)
    try:
        assert state.tune_process()
        assert gc.get_freeze_count() > 10_000  # the imported libraries' objects
        blas = [i for i in threadpool_info() if i["user_api"] == "blas"]
        assert blas and all(i["num_threads"] == state.BLAS_THREADS for i in blas)
        assert not state.tune_process()  # nothing new imported: no work
        monkeypatch.setitem(sys.modules, "dpx_fake_module", types.ModuleType("dpx_fake_module"))
        assert state.tune_process()  # a page imported something: tune again
    finally:
        gc.unfreeze()


@pytest.mark.slow
def test_utility_page_reports_clustering_against_the_isotropic_null():
    from dataclasses import replace

    at = new_app()
    ds = at.session_state.dataset
    at.session_state.dataset = replace(ds, task="unsupervised", y=None, classes=None, name="digits-unsup")
    goto(at, "utility")
    at.multiselect(key="p:utility_eps").set_value([1.0]).run()
    at.slider(key="p:utility_trials").set_value(1).run()
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    verdict = [m.value for m in at.markdown if "isotropic noise of the same scale" in m.value]
    assert verdict and "epsilon = 1" in verdict[0] and "null" in verdict[0]
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    names = {t.get("name", "") for spec in charts for t in spec["data"]}
    assert any("null" in n for n in names)


def test_sidebar_shows_the_recommended_mechanism_for_the_data():
    at = new_app()  # digits: 8 x 8 images, classification
    assert at.session_state.mechanism == "pca-gauss"  # the recommendation is the untouched default
    shown = [c.value for c in at.sidebar.caption if "Recommended" in c.value]
    assert shown and "pca-gauss" in shown[0] and "= dct" in shown[0] and "gaussian" in shown[0]
    choose_dataset(at, "adult")
    shown = [c.value for c in at.sidebar.caption if "Recommended" in c.value]
    assert shown and "pca-gauss" in shown[0] and "dct" not in shown[0]
    # delta automatic: min(1e-5, n^-1.5) on adult's n, shown to 2 significant digits
    assert "delta = automatic, 1.7e-07" in shown[0].replace("\\", ""), shown[0]  # markdown-escaped


def test_switching_back_to_bundled_keeps_an_uploaded_table_until_one_is_chosen():
    from dataclasses import replace

    at = new_app()
    at.session_state.dataset = replace(at.session_state.dataset, name="people.csv")  # as after an upload
    goto(at, "data")
    at.radio(key="p:data_source").set_value("Upload a file").run()
    at.radio(key="p:data_source").set_value("Bundled real dataset").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state.dataset.name == "people.csv"  # no silent switch to the first bundled one
    assert at.selectbox[0].value is None
    assert any("people.csv" in i.value.replace("\\", "") and "stays in use" in i.value for i in at.info)
    at.selectbox[0].select("digits").run()
    assert not at.exception and at.session_state.dataset.name == "digits"


@pytest.mark.slow
def test_compare_page_untouched_on_digits_rises_above_chance_by_epsilon_one():
    # A class opening the app and pressing Run sweep sees the recommended mechanism (first in the
    # default selection, with its automatic settings) clearly above chance by epsilon = 1
    at = new_app()
    goto(at, "compare")
    chosen = at.multiselect(key="p:compare_mechs").value
    assert chosen[0] == "pca-gauss"
    at.multiselect(key="p:compare_mechs").set_value(chosen[:1]).run()  # the recommended curve only
    next(b for b in at.button if b.label == "Run sweep").click().run()
    assert not at.exception, [e.value for e in at.exception]
    frame = at.dataframe[-2].value
    rows = frame[(frame["mechanism"] == "pca-gauss") & (frame["x"] == 1.0)]
    chance = float(rows["chance"].iloc[0]) if "chance" in rows else 0.1
    metric = rows[rows["metric"].str.contains("accuracy")]
    assert len(metric) and float(metric["mean"].max()) > chance + 0.15, metric
