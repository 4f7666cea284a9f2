"""The Release page's output space, HTML report and Python snippet, and the Data page's categories and
classes file imports (issue 16), driven with AppTest like a user: upload a mixed-type table, import
its public facts, draw, download, open and count."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("streamlit.testing.v1")

from tests.test_app import goto, new_app  # noqa: E402  (after the importorskip)
from tests.test_app_ux import download, served  # noqa: E402,F401  (served: a fixture)

HOSTILE = "<script>alert(1)</script>"
BOUNDS = {"age": [18, 90], "income": [0, 200000], HOSTILE: [0, 10]}
COLOURS = ["red", "green", "blue", "<b>violet</b>"]
CLASSES = ["no", "yes"]


def _table(n: int = 120) -> bytes:
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"age": rng.integers(18, 91, n), "colour": rng.choice(COLOURS[:3], n),
                          "income": rng.integers(0, 200_001, n).astype(float),
                          HOSTILE: rng.uniform(0, 10, n), "y": rng.choice(CLASSES, n)})
    return frame.to_csv(index=False).encode()


def _uploader(at, key: str):
    return next(u for u in at.get("file_uploader") if u.proto.id and key in u.proto.id)


def _upload_mixed_table(at) -> None:
    """Data page: the table, then its classes and categories files, then its bounds file."""
    goto(at, "data")
    at.radio(key="p:data_source").set_value("Upload a file").run()
    at.get("file_uploader")[0].set_value(("mixed.csv", _table(), "text/csv")).run()
    at.selectbox(key="upload_label").select("y").run()
    at.selectbox(key="upload_task").select("classification").run()
    _uploader(at, "classes_file").set_value(("classes.json", json.dumps(CLASSES).encode(),
                                             "application/json")).run()
    assert at.text_input(key="upload_classes").value == "no, yes"
    _uploader(at, "categories_file").set_value(
        ("categories.json", json.dumps({"colour": COLOURS}).encode(), "application/json")).run()
    assert at.text_input(key="cats:colour").value == ", ".join(COLOURS)
    assert not at.exception and not at.error, [e.value for e in at.error]
    next(b for b in at.button if b.label == "Use this table").click().run()
    ds = at.session_state.dataset
    assert ds.name == "mixed.csv" and ds.classes.tolist() == CLASSES and ds.classes_source == "user"
    assert ds.categories == {"colour": COLOURS}
    _uploader(at, "bounds_file").set_value(("b.json", json.dumps(BOUNDS).encode(), "application/json")).run()
    next(b for b in at.button if b.label == "Apply the bounds file").click().run()
    assert at.session_state.dataset.bounds_source == "user"


def test_release_page_downloads_the_original_schema_report_and_snippet(served, tmp_path):  # noqa: F811
    at = new_app("local-gaussian")
    _upload_mixed_table(at)
    goto(at, "release")
    next(b for b in at.button if b.label == "Draw release").click().run()
    assert not at.exception, [e.value for e in at.exception]
    integers = next(m for m in at.multiselect if m.key.startswith("output_integers"))
    integers.set_value(["age"]).run()
    raw, name = download(at, served, "Download CSV")
    assert name == "mixed-local-gaussian.csv"
    frame = pd.read_csv(io.BytesIO(raw))
    # the file as the custodian gave it: original columns, public categories, bounds, integer ages
    assert frame.shape == (120, 5)
    assert list(frame.columns) == ["age", "colour", "income", HOSTILE, "y"]
    assert set(frame["colour"]) <= set(COLOURS) and set(frame["y"]) <= set(CLASSES)
    assert frame["age"].dtype.kind == "i" and frame["age"].between(18, 90).all()
    assert frame["income"].between(0, 200000).all() and frame[HOSTILE].between(0, 10).all()
    card = json.loads(download(at, served, "Download release card")[0])
    assert card["output_space"] == "original" and card["guarantee"]["epsilon"] == 1.0
    ledger = at.session_state.ledger
    assert len(ledger.entries) == 1
    # the HTML report: every user string escaped, the guarantee, the per-column noise, the settings
    report = download(at, served, "Download report (HTML)")[0].decode()
    assert HOSTILE not in report and "&lt;script&gt;alert(1)&lt;/script&gt;" in report
    assert "<b>violet</b>" not in report
    for text in ("What is assumed public", "Noise per statistic", "standard deviation", "dpcore release",
                 "get_mechanism", "original columns, categories and units"):
        assert text in report, text
    assert "random_state=" not in report.replace("no random_state", "")
    # the Python snippet on the page reproduces the settings: run it on the same files
    snippet = next(c.value for c in at.code if c.language == "python")
    (tmp_path / "mixed.csv").write_bytes(_table())
    (tmp_path / "bounds.json").write_bytes(download(at, served, "Download bounds.json")[0])
    (tmp_path / "categories.json").write_bytes(download(at, served, "Download categories.json")[0])
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        exec(compile(snippet, "snippet", "exec"), {})  # noqa: S102 - the page's own code
    finally:
        os.chdir(cwd)
    again = pd.read_csv(tmp_path / "mixed-local-gaussian.csv")
    assert list(again.columns) == list(frame.columns) and again["age"].dtype.kind == "i"
    assert json.loads((tmp_path / "mixed-local-gaussian.card.json").read_text())["parameters"] == \
        card["parameters"]
    # the released space is the same draw in the mechanism's numbers: nothing charged again
    radio = next(r for r in at.radio if r.label == "Output space")
    radio.set_value("released").run()
    released = pd.read_csv(io.BytesIO(download(at, served, "Download CSV")[0]))
    assert released.shape == (120, 8) and "colour=red" in released.columns
    assert len(at.session_state.ledger.entries) == 1


def test_release_page_says_when_the_original_space_is_out_of_reach():
    at = new_app()
    at.sidebar.selectbox(key="mechanism").select("ron-gauss").run()
    goto(at, "release")
    next(b for b in at.button if b.label == "Draw release").click().run()
    radio = next(r for r in at.radio if r.label == "Output space")
    assert radio.value == "released" and len(radio.options) == 1
    assert any("row lengths" in i.value for i in at.info)
    card = json.loads(at.session_state.pending_release["card"])
    assert card["output_space"] == "released" and "ron1" in card["columns"]
    assert any("row lengths" in m.value for m in at.markdown)


@pytest.mark.parametrize(("data", "fragment"), [
    (b"[1]", "at least two classes"), (b"not json", "not valid JSON"), (b'["a", "a"]', "twice")])
def test_bad_classes_file_is_refused_readably(data, fragment):
    from app.state import parse_classes_upload

    with pytest.raises(ValueError, match=fragment):
        parse_classes_upload(data, "c.json")
    assert parse_classes_upload(b'{"classes": [0, 1]}', "c.json") == [0, 1]


@pytest.mark.parametrize(("data", "fragment"), [
    (b'{"nope": ["a", "b"]}', "does not have: nope"), (b'{"colour": []}', "non-empty list"),
    (b'{"colour": ["a", "a"]}', "repeats"), (b"\xff\xfe", "UTF-8")])
def test_bad_categories_file_is_refused_readably(data, fragment):
    from app.state import parse_categories_upload

    with pytest.raises(ValueError, match=fragment):
        parse_categories_upload(data, "c.json", ["age", "colour"])


@pytest.mark.parametrize(("mechanism", "param", "value", "expected"), [
    ("jl-laplace", "relation", "element", "info"),          # the paper's unit: row-level equivalent shown
    ("ron-gauss", "label_privacy", "within-class", "warning"),  # public class sizes: no row-level epsilon
])
def test_release_page_states_the_row_level_guarantee_when_the_unit_differs(mechanism, param, value, expected):
    from app.controls import WIDGET_PREFIX

    at = new_app()
    at.sidebar.selectbox(key="mechanism").select(mechanism).run()
    goto(at, "release")
    at.session_state[f"{WIDGET_PREFIX}{mechanism}:{param}"] = value
    at.session_state[f"{WIDGET_PREFIX}{mechanism}:epsilon"] = 0.2  # row level stays within the budget
    at.run()
    if value == "within-class":  # no row-level epsilon: drawn only with the explicit opt-in
        assert next(b for b in at.button if b.label == "Draw release").proto.disabled
        at.checkbox(key="optin_unbounded").check().run()
    next(b for b in at.button if b.label == "Draw release").click().run()
    card = json.loads(at.session_state.pending_release["card"])
    assert card["row_level"]["same_as_guarantee"] is False
    shown = [e.value for e in getattr(at, expected) if "Row level" in e.value]
    assert shown and card["row_level"]["text"][:40] in shown[0].replace("\\", "")
