"""Spreadsheet formula injection (OWASP "CSV injection") in released CSVs.

Column names and class labels are user strings that travel into the released CSV. A cell starting
with ``=``, ``+``, ``-``, ``@``, tab or CR is run as a formula when a custodian opens the file in
Excel or LibreOffice. Every release is serialised by ``Release.to_csv_bytes`` (CLI and app alike),
which escapes such strings with a leading ``'`` and leaves numbers alone; these tests read the CSV
back with the ``csv`` module, like a spreadsheet would, and check exactly that.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcore.cli import main
from dpcore.data import load_dataset
from dpcore.mechanisms import MECHANISMS
from dpcore.release import (
    FORMULA_TRIGGERS,
    Release,
    escape_formula,
    spreadsheet_safe,
    spreadsheet_safe_csv,
)

HOSTILE_COLUMNS = ['=HYPERLINK("http://x")', "+1", "@SUM(A1)", "-cmd"]
LABEL = "=class"
HOSTILE_LABELS = ["=cmd|' /C calc'!A0", "+evil", "-2+3", "@SUM(A1)", "\tspace", "\rcr", "plain"]
CARD_KEYS = {"mechanism", "parameters", "guarantee", "noise", "calibration", "bounds_source", "n_rows",
             "dpcore_version", "created_utc", "sha256"}


def _hostile_frame(n: int = 140) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({name: rng.uniform(0, 1, n).round(4) for name in HOSTILE_COLUMNS})
    frame[LABEL] = np.array(HOSTILE_LABELS, dtype=object)[np.arange(n) % len(HOSTILE_LABELS)]
    return frame


def _hostile_csv() -> bytes:
    """The hostile table as a CSV file; CRLF so that the label holding a CR is quoted."""
    return _hostile_frame().to_csv(index=False, lineterminator="\r\n").encode()


def _hostile_dataset():
    return load_dataset(_hostile_frame(), label=LABEL, task="classification", classes=HOSTILE_LABELS,
                        bounds={c: (0, 1) for c in HOSTILE_COLUMNS})


def _rows(csv_bytes: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(csv_bytes.decode("utf-8"), newline="")))


def _assert_no_formula(rows: list[list[str]]) -> None:
    """No header and no text cell starts with a formula trigger; only numbers may (``-1.5``)."""
    for name in rows[0]:
        assert not name.startswith(FORMULA_TRIGGERS), name
    for cell in (c for row in rows[1:] for c in row):
        if cell.startswith(FORMULA_TRIGGERS):
            float(cell)  # a negative number is a value, not a formula; anything else fails here


def _unescape(text: str) -> str:
    """Inverse of :func:`escape_formula` (the rule stated on the card)."""
    return text[1:] if text.startswith("'") and text.lstrip("'").startswith(FORMULA_TRIGGERS) else text


def _strict_json(text: str):
    def refuse(token: str):
        raise ValueError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=refuse)


def _assert_valid_card(card: dict, csv_bytes: bytes) -> None:
    assert CARD_KEYS <= set(card)
    assert card["sha256"] == hashlib.sha256(csv_bytes).hexdigest()
    g = card["guarantee"]
    assert {"epsilon", "delta", "neighbouring", "kind", "beta"} <= set(g)
    assert all({"statistic", "sensitivity", "scale", "distribution"} <= set(r) for r in card["noise"])


# ------------------------------------------------------------------------- the escaping rule
@pytest.mark.parametrize("text", ["=1+1", "+1", "-cmd", "@SUM(A1)", "\tx", "\rx", "\nx"])
def test_formula_strings_get_one_leading_quote(text):
    assert escape_formula(text) == "'" + text


@pytest.mark.parametrize("text", ["", "a=b", "label", "1.5", " =x", "'", "'abc", "x-1"])
def test_harmless_strings_are_unchanged(text):
    assert escape_formula(text) == text


def test_escaping_is_one_to_one_so_names_never_collide():
    names = ["=a", "'=a", "''=a", "a", "'a", "-1", "'-1", "@", "'@"]
    escaped = [escape_formula(n) for n in names]
    assert len(set(escaped)) == len(names)
    assert [_unescape(e) for e in escaped] == names
    assert all(not e.startswith(FORMULA_TRIGGERS) for e in escaped)


def test_spreadsheet_safe_touches_text_only():
    frame = pd.DataFrame({
        "-neg": [-1.5, 2.0, -3e-9],
        "=ints": [-1, 0, 1],
        "text": ["-x", "ok", "=1"],
        "mixed": [-0.25, "+y", None],  # DPMix-like object column: numbers and text
        "cat": pd.Categorical(["@a", "b", "@a"]),
    })
    safe = spreadsheet_safe(frame)
    assert list(safe.columns) == ["'-neg", "'=ints", "text", "mixed", "cat"]
    assert safe["'-neg"].dtype == np.float64 and safe["'=ints"].dtype == frame["=ints"].dtype
    np.testing.assert_array_equal(safe["'-neg"], frame["-neg"])
    assert list(safe["text"]) == ["'-x", "ok", "'=1"]
    assert safe["mixed"].iloc[0] == -0.25 and safe["mixed"].iloc[1] == "'+y"
    assert list(safe["cat"].astype(str)) == ["'@a", "b", "'@a"]
    assert list(frame.columns)[0] == "-neg" and frame["text"].iloc[0] == "-x"  # input untouched
    rows = _rows(spreadsheet_safe_csv(frame))
    _assert_no_formula(rows)
    assert [float(r[0]) for r in rows[1:]] == [-1.5, 2.0, -3e-9]


# ------------------------------------------------------------------------- releases
@pytest.mark.parametrize("name", ["local-gaussian", "dpmix", "jl-laplace", "modips"])
def test_released_csv_has_no_formula_and_keeps_numbers(name):
    ds = _hostile_dataset()
    rel = MECHANISMS[name](epsilon=2.0).release(ds)
    csv_bytes = rel.to_csv_bytes()
    rows = _rows(csv_bytes)
    assert len(rows) == np.asarray(rel.data).shape[0] + 1  # the CR label did not split a row
    _assert_no_formula(rows)
    expected = [*rel.columns, *rel.label_columns]
    assert [_unescape(h) for h in rows[0]] == expected
    # numbers: every data cell parses back to the released value (10 significant digits)
    data = np.asarray(rel.data, dtype=float)
    parsed = np.array([[float(c) for c in r[: data.shape[1]]] for r in rows[1:]])
    np.testing.assert_allclose(parsed, data, rtol=1e-9, atol=0)
    assert (parsed < 0).any(), "noise should make some released values negative"
    # text cells: the class labels, escaped, and recoverable exactly
    label_cells = [_unescape(r[-1]) for r in rows[1:]]
    lab = np.asarray(rel.labels, dtype=object)
    lab = lab if lab.ndim == 1 else lab[:, -1]
    assert label_cells == [str(v) for v in lab]
    assert set(label_cells) <= set(HOSTILE_LABELS)
    assert any(c.startswith("'") for r in rows[1:] for c in r)
    # the card: SPEC keys intact, hash of these bytes, original names, what was escaped
    card = _strict_json(rel.card_json(csv_bytes))
    _assert_valid_card(card, csv_bytes)
    assert card["columns"] == expected
    esc = card["csv_escaping"]
    assert esc["renamed_columns"] == {n: "'" + n for n in expected if n.startswith(FORMULA_TRIGGERS)}
    # DPMix names its argmax column for what it is (issue 13): LABEL_argmax
    assert (f"{LABEL}_argmax" if name == "dpmix" else LABEL) in esc["renamed_columns"]
    all_label_cells = np.asarray(rel.labels, dtype=object).ravel()
    assert esc["escaped_label_cells"] == sum(isinstance(v, str) and v.startswith(FORMULA_TRIGGERS)
                                             for v in all_label_cells)
    assert esc["escaped_label_cells"] > 0


def test_clean_release_is_byte_for_byte_what_it_was():
    """No user string to escape: the CSV is plain pandas output, the card says nothing renamed."""
    frame = _hostile_frame()
    frame.columns = [f"c{j}" for j in range(frame.shape[1])]
    frame[frame.columns[-1]] = np.arange(len(frame)) % 3
    ds = load_dataset(frame, label=frame.columns[-1], task="classification", classes=[0, 1, 2],
                      bounds={c: (0, 1) for c in frame.columns[:-1]})
    rel = MECHANISMS["local-gaussian"](epsilon=2.0).release(ds)
    buf = io.StringIO()
    rel.to_frame().to_csv(buf, index=False, float_format="%.10g")
    assert rel.to_csv_bytes() == buf.getvalue().encode("utf-8")
    assert rel.card()["csv_escaping"]["renamed_columns"] == {}
    assert rel.card()["csv_escaping"]["escaped_label_cells"] == 0


# ------------------------------------------------------------------------- CLI and app: same serialiser
@pytest.fixture
def serialiser_spy(monkeypatch):
    """Record every CSV produced by ``Release.to_csv_bytes`` (the one release serialiser)."""
    produced: list[bytes] = []
    original = Release.to_csv_bytes

    def spy(self: Release) -> bytes:
        out = original(self)
        produced.append(out)
        return out

    monkeypatch.setattr(Release, "to_csv_bytes", spy)
    return produced


def test_cli_release_writes_the_escaped_csv(tmp_path: Path, capsys, serialiser_spy):
    src = tmp_path / "hostile.csv"
    src.write_bytes(_hostile_csv())
    bounds = tmp_path / "bounds.json"
    bounds.write_text(json.dumps({c: [0, 1] for c in HOSTILE_COLUMNS}))
    classes = tmp_path / "classes.json"  # JSON: comma-separated --classes would strip the tab and CR labels
    classes.write_text(json.dumps(HOSTILE_LABELS))
    out = tmp_path / "out.csv"
    code = main(["release", "local-gaussian", str(src), "-o", str(out), "--label", LABEL,
                 "--task", "classification", "--classes", str(classes),
                 "--bounds", str(bounds), "--epsilon", "2", "--delta", "1e-6", "--no-clip"])
    assert code == 0, capsys.readouterr().err
    written = out.read_bytes()
    assert serialiser_spy and written == serialiser_spy[-1]
    rows = _rows(written)
    _assert_no_formula(rows)
    assert [_unescape(h) for h in rows[0]] == [*HOSTILE_COLUMNS, LABEL]
    values = np.array([[float(c) for c in r[:4]] for r in rows[1:]])
    assert np.isfinite(values).all() and (values < 0).any()
    card = _strict_json(out.with_name("out.card.json").read_text())
    _assert_valid_card(card, written)
    assert card["csv_escaping"]["renamed_columns"][LABEL] == "'" + LABEL
    assert card["classes_source"] == "user" and card["guarantee"]["holds"] is True


def test_app_download_is_the_escaped_csv(serialiser_spy):
    st_testing = pytest.importorskip("streamlit.testing.v1")
    entry = str(Path(__file__).resolve().parents[1] / "app" / "streamlit_app.py")
    at = st_testing.AppTest.from_file(entry, default_timeout=120)
    at.run()
    at.switch_page("../pages/data.py").run()
    at.radio(key="p:data_source").set_value("Upload a file").run()
    at.get("file_uploader")[0].set_value(("hostile.csv", _hostile_csv(), "text/csv")).run()
    at.selectbox(key="upload_label").select(LABEL).run()
    at.selectbox(key="upload_task").select("classification").run()
    # the app's class field is comma-separated and strips spaces, so the labels "\tspace" and
    # "\rcr" cannot be typed there: the class list is left to the data (flagged, holds false)
    next(b for b in at.button if b.label == "Use this table").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state.dataset.feature_names == HOSTILE_COLUMNS
    at.sidebar.selectbox(key="mechanism").select("local-gaussian").run()
    at.switch_page("../pages/release.py").run()
    at.checkbox(key="optin_unbounded").check().run()  # the class list is read from the data: opt in
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    pending = at.session_state.pending_release
    assert pending["csv"] and pending["csv"] == serialiser_spy[-1]
    rows = _rows(pending["csv"])
    _assert_no_formula(rows)
    assert [_unescape(h) for h in rows[0]] == [*HOSTILE_COLUMNS, LABEL]
    card = _strict_json(pending["card"])
    _assert_valid_card(card, pending["csv"])
    # the on-page preview (which Streamlit can export as CSV itself) shows the escaped table
    preview = at.dataframe[0].value
    assert list(preview.columns) == [escape_formula(c) for c in [*HOSTILE_COLUMNS, LABEL]]
    shown_labels = preview[preview.columns[-1]]
    assert not any(isinstance(v, str) and v.startswith(FORMULA_TRIGGERS) for v in shown_labels)
    assert math.isfinite(card["guarantee"]["epsilon"])
    assert card["classes_source"] == "data" and card["guarantee"]["holds"] is False


# ------------------------------------------------------------------------- the fast CSV formatter
def _awkward_frame(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """Floats of every magnitude and the special values, integers, text with the delimiter, quotes,
    empty strings and missing values, booleans, a float column with NaN."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, 5e-324, 1e-300, 1e300, 0.1, 1 / 3, 123456789012.5,
                        -1e-5, 1e10, 9999999999.5, 2.5e-5])
    floats = np.where(rng.random(n) < 0.3, rng.choice(special, n),
                      rng.normal(size=n) * 10.0 ** rng.integers(-30, 30, n))
    text = rng.choice(np.array(["a", "b,c", 'say "hi"', "", "'=1+1", "é ü", "  x  ", "%s", "%.10g"],
                               dtype=object), n)
    text[rng.random(n) < 0.1] = None
    with_nan = rng.normal(size=n)
    with_nan[rng.random(n) < 0.2] = np.nan
    nullable = pd.array(rng.integers(0, 9, n), dtype="Int64")
    nullable[rng.random(n) < 0.2] = pd.NA
    dates = pd.Series(pd.to_datetime("2020-01-01") + pd.to_timedelta(rng.integers(0, 10**6, n), unit="min"))
    return pd.DataFrame({"x": floats, "y": rng.normal(size=n), "count": rng.integers(-5, 10**12, n),
                         "label": text, "flag": rng.random(n) < 0.5, "gaps": with_nan,
                         "float32": rng.normal(size=n).astype(np.float32),
                         "kind": pd.Categorical(rng.choice(["p", "q,r"], n)), "when": dates,
                         "Int64": nullable, "objfloat": pd.Series(rng.normal(size=n), dtype=object),
                         "string": pd.Series(rng.choice(["s", "t u"], n), dtype="string")})


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lineterminator", ["\n", "\r\n"])
def test_csv_text_is_pandas_text_byte_for_byte(seed, lineterminator):
    """csv_text (the release CSVs' formatter) gives pandas' to_csv text exactly, for every column
    kind and subset of columns, across the blocks of rows it formats at once, and where a quoted
    cell holds a line break (pandas writes the frame)."""
    from dpcore import release as release_module
    from dpcore.release import csv_text

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3 * release_module._CSV_BLOCK_ROWS))
    frame = _awkward_frame(rng, n)
    subsets = [list(frame.columns), ["x", "y"], ["x", "label"], ["label", "x"], ["count", "x", "flag"],
               ["gaps", "y"], ["y"], ["label"], ["float32", "x"], ["kind", "x", "when"], ["Int64", "y"],
               ["objfloat", "x", "string"]]
    if seed % 2:  # a quoted cell with a line break (with "\r\n" endings, the fast path still holds)
        frame.loc[frame.index[n // 2], "label"] = "two\nlines" if lineterminator == "\n" else "two\r\nlines"
    for columns in subsets:
        part = frame[columns]
        expected = part.to_csv(index=False, float_format="%.10g", lineterminator=lineterminator)
        assert csv_text(part, float_format="%.10g", lineterminator=lineterminator) == expected, columns
        assert csv_text(part.iloc[:1], float_format="%.10g", lineterminator=lineterminator) == \
            part.iloc[:1].to_csv(index=False, float_format="%.10g", lineterminator=lineterminator)
    # formats the fast path does not take: pandas writes them
    part = frame[["x", "y"]].iloc[:50]
    for float_format, ending in (("%.3f,", "\n"), ('"%g"', "\n"), ("{:.4f}".format, "\n"), ("%.5g", "%\n")):
        assert csv_text(part, float_format=float_format, lineterminator=ending) == \
            part.to_csv(index=False, float_format=float_format, lineterminator=ending)
