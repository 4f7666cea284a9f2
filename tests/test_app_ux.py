"""The app as users use it (issue 16): one source of defaults, labelled exploration outputs,
trustworthy Compare/Utility pages, readable plots.

Driven headlessly with ``streamlit.testing.v1.AppTest`` like ``tests/test_app.py``; downloads are
opened and counted.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from app.figures.attack import score_histogram_figure
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


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_untouched_app_controls_release_what_the_cli_releases_without_options(mechanism, tmp_path,
                                                                              capsys):
    """One source of defaults: the card's parameters (``None`` = automatic included) and the
    released table's shape are the same in the app with untouched controls and in ``dpcore
    release MECH digits`` without options; a mechanism that needs more than its defaults (e.g.
    public data) is refused by both, for the same reason."""
    out = tmp_path / "out.csv"
    capsys.readouterr()
    code = cli_main(["release", mechanism, "digits", "-o", str(out)])
    cli_error = capsys.readouterr().err
    at = new_app()
    if code != 0:
        at.sidebar.selectbox(key="mechanism").select(mechanism).run()
        goto(at, "release")
        at.button[0].click().run()
        assert "pending_release" not in at.session_state
        reason = cli_error.split("error: ", 1)[1].split(":")[0].split(" (")[0]
        assert any(reason in e.value.replace("\\", "") for e in at.error), (reason, at.error)
        return
    pending = _draw_on_release_page(at, mechanism)
    app_card = json.loads(pending["card"])
    app_csv = pd.read_csv(io.BytesIO(pending["csv"]))
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


def _spec(chart) -> dict:
    return json.loads(chart.proto.spec)


def test_compare_defaults_exclude_mechanisms_that_cannot_be_evaluated_and_say_why():
    at = new_app()
    goto(at, "compare")
    chosen = at.multiselect(key="p:compare_mechs").value
    assert chosen and "jl-laplace" not in chosen
    assert at.number_input(key="p:compare_trials").value >= 3
    assert any("jl-laplace" in c.value and "secret" in c.value for c in at.caption)


@pytest.mark.slow
def test_compare_sweep_is_labelled_not_private_with_intervals_in_range_and_no_stale_controls(served):
    at = new_app("local-gaussian")
    goto(at, "compare")
    at.multiselect(key="p:compare_mechs").set_value(["local-gaussian", "modips", "jl-laplace"]).run()
    at.multiselect(key="p:compare_eps").set_value([0.1, 50.0]).run()
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    # after the sweep: no "To compute" caption, no Stop button
    assert not any(c.value.startswith(("To compute", "Computing")) for c in at.caption)
    assert [b.label for b in at.button] == ["Run sweep"]
    # jl-laplace is not run as a classifier, and the page says why
    assert any("jl-laplace was not evaluated" in w.value.replace("\\", "") and "secret" in w.value
               for w in at.warning)
    frame = at.dataframe[-2].value
    assert set(frame["mechanism"]) == {"local-gaussian", "modips"}
    acc = frame[frame["metric"].str.endswith("accuracy")]
    assert (acc["lo"] >= 0).all() and (acc["hi"] <= 1).all() and (acc["n_trials"] == 3).all()
    # at epsilon = 0.1 the results sit at the majority rate: marked, and no winner named
    low = acc[acc["x"] == 0.1]
    assert low["vs_chance"].str.startswith("not distinguishable").any()
    best = at.dataframe[0].value.set_index("epsilon")
    for eps, row in best.iterrows():
        verdicts = acc[(acc["x"] == eps) & (acc["metric"] == acc["metric"].iloc[0])]
        winner = verdicts[verdicts["mechanism"] == row["mechanism"]]
        assert winner.empty or not winner["vs_chance"].iloc[0].startswith("not distinguishable")
    # labelled NOT differentially private: page, plot, file name and inside the file
    assert any("NOT differentially private" in w.value for w in at.warning)
    assert "NOT differentially private" in json.dumps(_spec(at.get("plotly_chart")[0])["layout"])
    data, filename = download(at, served, "Download all numbers")
    assert "NOT-DP" in filename
    assert data.decode().splitlines()[0].startswith("# ") and "NOT differentially private" in \
        data.decode().splitlines()[0]
    back = pd.read_csv(io.BytesIO(data), comment="#")
    assert len(back) == len(frame) and back["privacy"].str.contains("NOT differentially").all()


def test_utility_download_is_labelled_not_private(served):
    at = new_app("local-gaussian")
    goto(at, "utility")
    at.multiselect(key="p:utility_eps").set_value([1.0]).run()
    at.slider(key="p:utility_trials").set_value(2).run()
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("NOT differentially private" in c.value for c in at.caption)
    data, filename = download(at, served, "Download the numbers")
    assert filename == "utility-local-gaussian-NOT-DP.csv"
    assert "NOT differentially private" in data.decode().splitlines()[0]
    frame = pd.read_csv(io.BytesIO(data), comment="#")
    assert set(frame["metric"]) == {"svm_accuracy", "logreg_accuracy"}
    assert ((frame["lo"] >= 0) & (frame["hi"] <= 1)).all()


def test_utility_page_says_why_jl_laplace_cannot_be_evaluated_on_a_classification_task():
    at = new_app()
    at.sidebar.selectbox(key="mechanism").select("jl-laplace").run()
    goto(at, "utility")
    assert any("secret" in w.value for w in at.warning)
    assert not at.button  # nothing to run that would fail


@pytest.mark.slow
def test_explore_scatter_has_axis_titles_with_units_and_a_class_legend():
    from tests.test_latency import scatter

    at = new_app("local-gaussian")
    goto(at, "explore")
    spec, data = scatter(at)
    encoding = spec["layer"][0]["encoding"]
    assert all(e["encoding"] == encoding for e in spec["layer"])  # one legend, shared axes
    assert "units" in encoding["x"]["title"] and "units" in encoding["y"]["title"]
    colour = encoding["color"]
    assert colour["field"] == "class" and colour["legend"]["title"] == "class"
    assert colour["scale"]["domain"] == [str(c) for c in range(10)]  # digits: one entry per class
    assert [layer["mark"]["filled"] for layer in spec["layer"]] == [False, True]  # real hollow
    # the released points of each class are exactly the plotted released rows of that class
    from app.runner import preview_rows, rows_at
    from dpcore.utility import release_class_labels

    key = next(k for k in at.session_state._memo if k[0] == "explore" and len(k) == 6)
    result = at.session_state._memo[key]  # local-gaussian: the displayed rows only (result.rows)
    labels = release_class_labels(result.release).astype(int)
    plotted = labels[rows_at(result.rows, preview_rows(result.release.n_rows))]
    released = data[data["rows"] == "released"]
    assert released["class"].tolist() == [str(v) for v in plotted]


def test_log_axes_read_as_plain_numbers_and_formulas_are_not_raw_ascii():
    from app.figures.common import log_ticks
    from app.figures.distances import best_k_text, variance_vs_k_figure

    ticks = log_ticks(0.1, 10)
    assert ticks["ticktext"][:7] == ["0.1", "0.2", "0.5", "1", "2", "5", "10"]
    wide = log_ticks(1e-6, 1e9)["ticktext"]
    assert wide == ["10<sup>-6</sup>", "10<sup>-4</sup>", "0.01", "1", "100", "10000", "10<sup>6</sup>",
                    "10<sup>8</sup>"]
    fig = variance_vs_k_figure([1, 2, 5, 10, 20], 4.0, 0.01, k_opt=0.1)
    text = json.dumps(fig.to_plotly_json(), ensure_ascii=False)
    assert "rho" not in text and "s2" not in text and "ρ²" in text and "σ⁴" in text
    assert fig.layout.yaxis.ticktext and "k_opt" not in text
    assert best_k_text(0.1) == "best k = 1 (formula: 0.1 < 1, the noise dominates at every k)"
    assert best_k_text(7.4, [1, 2, 50]) == "best k ≈ 7"


def test_page_icons_are_material_symbols_not_emoji():
    import re

    src = (Path(__file__).resolve().parents[1] / "app" / "streamlit_app.py").read_text()
    icons = re.findall(r'icon="([^"]*)"', src)
    assert len(icons) >= 9 and all(i.startswith(":material/") for i in icons), icons
    emoji = re.compile("[\U0001F300-\U0001FAFF\u2600-\u27BF]")
    for folder in ("app", "pages"):
        for path in (Path(__file__).resolve().parents[1] / folder).rglob("*.py"):
            assert not emoji.search(path.read_text()), path


def test_interval_bands_draw_no_stray_markers():
    from app.figures.utility import utility_curve_figure

    frame = pd.DataFrame({"param": "epsilon", "x": [0.1, 10.0], "metric": "svm_accuracy",
                          "mean": [0.1, 0.7], "lo": [0.08, 0.66], "hi": [0.12, 0.76],
                          "baseline": 0.98, "chance": 0.1,
                          "vs_chance": ["not distinguishable from majority", "above majority"]})
    fig = utility_curve_figure(frame, "svm_accuracy")
    band = next(t for t in fig.data if t.fill == "toself")
    assert band.mode == "lines"
    curve = next(t for t in fig.data if t.mode == "lines+markers")
    assert list(curve.marker.symbol) == ["circle-open", "circle"]
    assert list(fig.layout.yaxis.range) == [0, 1.02]


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["dpmix", "jl-laplace", "ron-gauss"])
def test_no_page_cites_spec(mechanism):
    """Users do not have SPEC.md: pages, tooltips, tables and figures cite the papers instead."""
    from tests.test_app import PAGES

    at = new_app()
    at.sidebar.selectbox(key="mechanism").select(mechanism).run()
    for page in PAGES:
        goto(at, page)
        texts = [e.proto.__str__() for kind in ("markdown", "caption", "info", "warning", "error",
                                                "success", "dataframe", "json")
                 for e in at.get(kind)]
        texts += [c.proto.spec for c in at.get("plotly_chart")]
        texts += [str(w.help) for w in [*at.slider, *at.number_input, *at.select_slider,
                                        *at.selectbox, *at.checkbox]]
        assert not [t for t in texts if "SPEC" in t], page


def _run_shown_command(at, served, tmp_path) -> dict:
    """Run the Release page's command line (in ``tmp_path``, with its bounds.json) -> its card."""
    import shlex

    words = shlex.split(at.code[0].value)
    assert words[:2] == ["dpcore", "release"] and "seed" not in at.code[0].value
    out = words.index("-o")
    words[out + 1] = str(tmp_path / "cli.csv")
    if "--bounds" in words:
        data, filename = download(at, served, "Download bounds.json")
        (tmp_path / filename).write_bytes(data)
        words[words.index("--bounds") + 1] = str(tmp_path / filename)
    assert cli_main(words[1:]) == 0
    return json.loads((tmp_path / "cli.card.json").read_text())


@pytest.mark.slow
def test_release_page_shows_card_in_words_and_a_command_that_reproduces_the_settings(served, tmp_path):
    at = new_app()
    at.sidebar.selectbox(key="mechanism").select("ron-gauss").run()
    goto(at, "explore")
    at.select_slider(key="p:ron-gauss:epsilon").set_value(5.0).run()
    at.number_input(key="p:ron-gauss:n_components").set_value(7).run()
    at.checkbox(key="p:ron-gauss:reconstruct").check().run()
    pending = _draw_on_release_page(at, "ron-gauss")
    words = "\n".join(m.value for m in at.markdown)
    for needle in ("**Guarantee.**", "**Assumed public**", "n = 1,797", "**Noise added**",
                   "Laplace noise", "**The file.**"):
        assert needle in words, needle
    command = at.code[0].value
    assert "--n-components 7" in command and "--epsilon 5" in command and "--reconstruct" in command
    assert "--projection" not in command  # defaults are left out
    cli_card = _run_shown_command(at, served, tmp_path)
    app_card = json.loads(pending["card"])
    assert cli_card["parameters"] == app_card["parameters"]
    assert cli_card["guarantee"] == app_card["guarantee"]


@pytest.mark.slow
def test_upload_bulk_bounds_then_release_command_reproduces_it(served, tmp_path):
    csv = "a,b,y\n" + "\n".join(f"{i % 7},{(i * 3) % 5},{i % 2}" for i in range(60))
    at = new_app("local-gaussian")
    goto(at, "data")
    at.radio(key="p:data_source").set_value("Upload a file").run()
    at.get("file_uploader")[0].set_value(("mine.csv", csv.encode(), "text/csv")).run()
    # the chosen file is previewed at once, before "Use this table"
    preview = at.dataframe[0]  # above the current dataset's preview
    assert list(preview.value.columns) == ["a", "b", "y"] and len(preview.value) == 20
    assert at.session_state.dataset.name == "digits"
    at.selectbox(key="upload_label").select("y").run()
    at.selectbox(key="upload_task").select("classification").run()
    at.text_input(key="upload_classes").input("0, 1").run()
    next(b for b in at.button if b.label == "Use this table").click().run()
    ds = at.session_state.dataset
    assert ds.name == "mine.csv" and ds.bounds_source == "data" and ds.classes_source != "data"
    # "set these columns to [lo, hi]": pick the data-bound columns, set [0, 10]
    next(b for b in at.button if b.label.startswith("Pick the 2 column(s)")).click().run()
    at.number_input(key="bulk_lo").set_value(0.0).run()
    at.number_input(key="bulk_hi").set_value(10.0).run()
    at.button(key="bulk_set").click().run()
    assert not at.exception, [e.value for e in at.exception]
    ds = at.session_state.dataset
    assert ds.bounds_sources == ["user", "user"] and ds.bounds.tolist() == [[0, 10], [0, 10]]
    assert any("every column now has public bounds" in s.value for s in at.success)
    goto(at, "explore")
    at.select_slider(key="p:local-gaussian:epsilon").set_value(2.0).run()
    pending = _draw_on_release_page(at, "local-gaussian")
    command = at.code[0].value
    assert "mine.csv" in command
    assert "--label y --task classification --classes 0,1 --bounds bounds.json" in command
    (tmp_path / "mine.csv").write_text(csv)
    import shlex
    words = shlex.split(command)
    words[words.index("mine.csv")] = str(tmp_path / "mine.csv")
    at.code[0].proto.code_text = shlex.join(words)
    cli_card = _run_shown_command(at, served, tmp_path)
    assert cli_card["parameters"] == json.loads(pending["card"])["parameters"]
    assert cli_card["bounds_source"] == "user"


def test_bounds_file_import_on_the_data_page():
    from app.state import apply_bounds_file

    csv = "a,b,y\n" + "\n".join(f"{i % 7},{(i * 3) % 5},{i % 2}" for i in range(60))
    at = new_app()
    goto(at, "data")
    at.radio(key="p:data_source").set_value("Upload a file").run()
    at.get("file_uploader")[0].set_value(("mine.csv", csv.encode(), "text/csv")).run()
    at.selectbox(key="upload_label").select("y").run()
    at.selectbox(key="upload_task").select("classification").run()
    next(b for b in at.button if b.label == "Use this table").click().run()
    ds = at.session_state.dataset
    assert ds.name == "mine.csv"
    uploaders = at.get("file_uploader")
    bounds_uploader = next(u for u in uploaders if u.proto.id and "bounds_file" in u.proto.id)
    bounds_uploader.set_value(("b.csv", b"column,lo,hi\na,0,6\n", "text/csv")).run()
    next(b for b in at.button if b.label == "Apply the bounds file").click().run()
    assert not at.exception
    new = at.session_state.dataset
    assert new.bounds_sources == ["user", "data"] and new.bounds[0].tolist() == [0, 6]
    assert any("still have bounds from the data" in s.value for s in at.success)
    # the CLI's JSON format too; a file naming an unknown column is refused whole
    ok, _ = apply_bounds_file(ds, b'{"a": [0, 6], "b": [0, 4]}', "b.json")
    assert ok.bounds_sources == ["user", "user"] and ok.bounds.tolist() == [[0, 6], [0, 4]]
    bad, message = apply_bounds_file(ds, b'{"a": [0, 6], "typo": [0, 4]}', "b.json")
    assert bad is None and "typo" in message
    bad, message = apply_bounds_file(ds, b'{"a": [6, 0]}', "b.json")
    assert bad is None and "lo < hi" in message


def test_upload_box_states_its_size_limit_in_words():
    at = new_app()
    goto(at, "data")
    at.radio(key="p:data_source").set_value("Upload a file").run()
    uploader = at.get("file_uploader")[0]
    assert "up to 50 MB" in uploader.proto.label and "command line" in uploader.proto.help
    assert uploader.proto.max_upload_size_mb == 50


def test_optional_budget_split_and_model_mean_stay_automatic_until_set():
    """RON-Gauss's ``epsilon_split`` and ``model_mean`` are empty (automatic) by default: the split's
    "automatic" box is ticked and hides the slider; unticking it reveals the slider and the card
    then carries the chosen split; the model-mean box set to "on" puts True on the card."""
    at = new_app()
    at.sidebar.selectbox(key="mechanism").select("ron-gauss").run()
    goto(at, "release")
    auto = at.checkbox(key="p:ron-gauss:epsilon_split:automatic")
    assert auto.value is True
    assert not [s for s in at.slider if s.key == "p:ron-gauss:epsilon_split"]
    assert at.selectbox(key="p:ron-gauss:model_mean").value is None
    auto.uncheck().run()
    slider = at.slider(key="p:ron-gauss:epsilon_split")
    slider.set_value(0.4).run()
    at.selectbox(key="p:ron-gauss:model_mean").select(True).run()
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    card = json.loads(at.session_state.pending_release["card"])
    assert card["parameters"]["epsilon_split"] == pytest.approx([0.4, 0.6])
    assert card["parameters"]["model_mean"] is True


def _unescaped(text: str) -> str:
    return text.replace("\\", "")


def test_automatic_choices_are_shown_in_words_on_explore_and_release_and_in_the_report(served):
    """What the automatic rule chose for empty fields (the card's ``details["recommended"]``) is
    said where the card is shown: RON-Gauss on unlabelled digits leaves p, the split and
    model_mean empty, and the pages and the report name the values the card's ``chosen`` holds."""
    from dataclasses import replace

    at = new_app()
    ds = at.session_state.dataset
    at.session_state.dataset = replace(ds, task="unsupervised", y=None, classes=None, name="digits-unsup")
    goto(at, "explore")  # off the Data page, whose bundled-dataset box would load a bundled table
    at.sidebar.selectbox(key="mechanism").select("ron-gauss").run()
    shown = [_unescaped(c.value) for c in at.caption if "Chosen automatically" in c.value]
    assert len(shown) == 1, [c.value for c in at.caption]
    pending = _draw_on_release_page(at, "ron-gauss")
    card = json.loads(pending["card"])
    assert card["parameters"]["n_components"] is None and card["parameters"]["model_mean"] is None
    chosen = card["details"]["recommended"]["chosen"]
    expected = (f"n_components = {chosen['n_components']}, epsilon_split = "
                f"{chosen['epsilon_split'][0]:g} / {chosen['epsilon_split'][1]:g}, model_mean = on")
    # the Explore preview (training split, seeded) and the release (all rows) may differ in n only
    assert "n_components = " in shown[0] and "model_mean = on" in shown[0] and "no labels" in shown[0]
    main, rule = _chosen_on_release_page(at)
    assert expected in main and chosen["why"] not in main  # the values in the card's words
    assert expected in rule and chosen["why"] in rule  # and the rule behind "How is this computed?"
    report = download(at, served, "Download report (HTML)")[0].decode()
    assert "Settings chosen automatically" in report and f"<b>{expected}</b>" in report


def _chosen_on_release_page(at) -> tuple[str, str]:
    """The Release page's "Chosen automatically" paragraphs: the card in words (values only) and
    the one behind "How is this computed?" (values and the public rule)."""
    from app.explain import HOW

    words = [_unescaped(m.value) for m in at.markdown if "Chosen automatically" in m.value]
    how = [_unescaped(m.value) for e in at.expander if e.label == HOW for m in e.markdown
           if "Chosen automatically" in m.value]
    assert len(words) == 2 and len(how) == 1, words
    return next(w for w in words if w != how[0]), how[0]


def test_automatic_p_of_a_labelled_release_is_shown_and_a_given_p_is_not():
    """Labelled RON-Gauss: an empty p is chosen by recommended_n_components and the Release page
    says which; with p given, no automatic choice is claimed."""
    at = new_app()
    pending = _draw_on_release_page(at, "ron-gauss")
    rec = json.loads(pending["card"])["details"]["recommended"]
    main, rule = _chosen_on_release_page(at)
    p = f"n_components = {rec['n_components']}."
    assert p in main and p in rule
    assert "recommended_n_components" in rule and "recommended_n_components" not in main
    at.number_input(key="p:ron-gauss:n_components").set_value(7).run()
    at.button[0].click().run()
    assert json.loads(at.session_state.pending_release["card"])["parameters"]["n_components"] == 7
    assert not [m for m in at.markdown if "Chosen automatically" in m.value]


def test_attack_stopped_before_ten_trials_still_ends_with_a_result():
    """A Stop that lands early (the bar now updates by time, so after the first trial) resumes the
    game to its minimum of 10 trials per world and shows the result: never a dead end."""
    at = new_app()
    goto(at, "attack")
    at.select_slider(key="p:attack_trials").set_value(20).run()
    next(b for b in at.button if b.label == "Run attack").click().run()
    assert not at.exception, [e.value for e in at.exception]
    results = at.session_state["_attack_results"]
    (key, full), = results.items()
    assert full.trials == 20 and not full.stopped
    hist = score_histogram_figure(full).layout  # scores of order 1e-4 were ticked "500μ"
    assert hist.xaxis.exponentformat == "power" and hist.legend.y < -0.3
    # what an interrupted run leaves: its key and the scores drawn so far (3 trials per world)
    def resume(scores: tuple[list[float], list[float]]):
        """The next run after a stop that left these scores: the stored result."""
        results.clear()
        at.session_state["_attack_partial"] = {"key": key, "scores": scores, "t0": 0.0}
        at.run()
        assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
        return at.session_state["_attack_results"][key]

    res = resume((list(full.scores_out[:3]), list(full.scores_in[:3])))
    assert res.stopped and res.trials == 10 and res.requested == 20
    assert np.array_equal(res.scores_out, full.scores_out[:10])  # resumed: the same seeded trials
    assert any(i.value == "Stopped after 10 trials per world." for i in at.info)
    assert at.session_state["_attack_partial"] is None
    # a Stop during trial 12: the interrupted run's thread (still running beside the next run, with
    # Streamlit's fast reruns) has drawn world 0 of that trial but not world 1 when the next run
    # reads the scores; the summary keeps the 11 complete trials (it showed no result before)
    res = resume((list(full.scores_out[:12]), list(full.scores_in[:11])))
    assert res.stopped and res.trials == 11
    assert np.array_equal(res.scores_out, full.scores_out[:11])
    assert np.array_equal(res.scores_in, full.scores_in[:11])
    assert any(i.value == "Stopped after 11 trials per world." for i in at.info)


def test_automatic_delta_is_not_labelled_one_over_n():
    """DPMix's empty delta is default_delta(n) = min(1e-5, n^-1.5) (1e-5 on digits), far below
    1/n: the slider must not call it "1/n" (the card's delta is what the label says)."""
    at = new_app()
    at.sidebar.selectbox(key="mechanism").select("dpmix").run()
    goto(at, "explore")
    delta = at.select_slider(key="p:dpmix:delta")
    assert delta.value is None and delta.options[0] == "automatic" and "1/n" not in delta.options
    pending = _draw_on_release_page(at, "dpmix")
    card = json.loads(pending["card"])
    assert card["parameters"]["delta"] is None
    assert card["guarantee"]["delta"] == pytest.approx(min(1e-5, 1797 ** -1.5)) != pytest.approx(1 / 1797)


@pytest.mark.slow
def test_gaussian_noise_savings_are_said_on_explore_and_in_the_card_text():
    """Issue 13 item 2: the app shows how much noise the Gaussian variant saves. The card's
    ``laplace_over_gaussian_variance`` (per statistic) is said on the Explore page, in the card in
    words (Release page) and in the HTML report; a release without it says nothing of the kind."""
    from app.card_text import card_in_words, noise_savings, report_html
    from dpcore.data import load_dataset
    from dpcore.mechanisms import get_mechanism

    rel = get_mechanism("pca-gauss")(epsilon=1.0, delta=1e-6, random_state=0).release(load_dataset("digits"))
    card = json.loads(rel.card_json())
    ratios = {k: v for k, v in card["details"]["laplace_over_gaussian_variance"].items() if k != "note"}
    assert ratios and all(v > 0 for v in ratios.values())
    words = _unescaped(card_in_words(card))
    for part, ratio in ratios.items():
        assert f"{part} {ratio:.3g}x" in words
    assert "Gaussian against Laplace noise" in report_html(card, dataset="digits")
    laplace = json.loads(get_mechanism("pca-gauss")(epsilon=1.0, noise="laplace", random_state=0)
                         .release(load_dataset("digits")).card_json())
    assert noise_savings(laplace["details"]) is None and "Gaussian against" not in card_in_words(laplace)

    at = new_app("local-gaussian")
    goto(at, "explore")
    assert not [c for c in at.caption if "Gaussian against Laplace" in c.value]  # local-gaussian
    at.sidebar.selectbox(key="mechanism").select("pca-gauss").run()
    at.selectbox(key="p:pca-gauss:noise").select("gaussian").run()
    assert not at.exception, [e.value for e in at.exception]
    shown = [_unescaped(c.value) for c in at.caption if "Gaussian against Laplace" in c.value]
    assert len(shown) == 1 and "x" in shown[0]


def test_a_text_column_waiting_for_its_categories_is_the_next_step_not_an_error():
    """Data page, step 3: before anything is typed, a text column's missing category list is shown
    as the next step (an info naming the column); a list that still fails is an error."""
    from tests.test_security import choose_label, upload

    csv = "colour,x,y\n" + "".join(f"{'red' if i % 2 else 'blue'},{i % 5},{i % 2}\n" for i in range(40))
    at = choose_label(upload(new_app(), "colours.csv", csv.encode()))
    assert not at.error, [e.value for e in at.error]
    assert any("colour" in i.value and "Next" in i.value for i in at.info), [i.value for i in at.info]
    at.text_input(key="cats:colour").input("red").run()  # 'blue' is missing from the public list
    assert at.error, "a list that misses a value is an error"
