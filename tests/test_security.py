"""Web-app hardening checks (no browser needed).

- ``.streamlit/config.toml`` and the ``dp-explorer`` launcher keep the hardened server defaults.
- User-supplied strings (file name, column names, category text) are rendered as text, never as
  HTML: no markdown element that carries them allows HTML, and no ``st.html`` / component renders
  them (checked on the AppTest element tree of every page, and statically on the source).
- An upload is never written to disk (audit hook on ``open`` + a scan of recently written files).
- Two sessions do not see each other's upload.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import tempfile
import time
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

st_testing = pytest.importorskip("streamlit.testing.v1")
AppTest = st_testing.AppTest

ROOT = Path(__file__).resolve().parents[1]
ENTRY = str(ROOT / "app" / "streamlit_app.py")
TIMEOUT = 120
PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
]
# Element protos whose body is interpreted as HTML by the browser.
HTML_PROTOS = {"Html", "IFrame", "ComponentInstance", "BidiComponent"}


# -------------------------------------------------------------------------------------- helpers
def new_app() -> AppTest:
    at = AppTest.from_file(ENTRY, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"../pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def page_files() -> list[str]:
    return sorted(p.stem for p in (ROOT / "pages").glob("*.py") if not p.name.startswith("_"))


def button(at: AppTest, label: str):
    matches = [b for b in at.button if b.label == label]
    assert matches, f"no button {label!r} among {[b.label for b in at.button]}"
    return matches[0]


def nodes(at: AppTest) -> Iterator:
    """Every element and block of the current run (main area and sidebar, nested included)."""
    yield from at.main
    yield from at.sidebar


def session_items(at: AppTest) -> dict:
    """User keys and values of an AppTest session (API differs across Streamlit versions)."""
    state = at.session_state
    try:
        return dict(state.items())
    except AttributeError:
        return dict(state.filtered_state)


def proto_text(node) -> str:
    proto = getattr(node, "proto", None)
    return "" if proto is None else str(proto)


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    goto(at, "data")
    at.radio(key="p:data_source").set_value("Upload a file").run()
    at.get("file_uploader")[0].set_value((name, data, "text/csv")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def choose_label(at: AppTest) -> AppTest:
    """Label ``y``, declared a classification label with the public class list ``0,1``."""
    at.selectbox(key="upload_label").select("y").run()
    at.selectbox(key="upload_task").select("classification").run()
    at.text_input(key="upload_classes").input("0,1").run()
    return at


def hostile_csv(marker: str = "") -> bytes:
    """Columns named with HTML/script payloads (+ an optional unique marker column), a
    non-numeric column whose name is a payload (its category-text input label shows the name)."""
    header = [PAYLOADS[0], PAYLOADS[1], PAYLOADS[2], *([marker] if marker else []), "y"]
    rows = [[str(i % 7), str((i * 3) % 5), "u" if i % 3 else "v", *([str(i % 4)] if marker else []),
             str(i % 2)] for i in range(60)]
    return ("\n".join(",".join(f'"{c}"' if "," in c else c for c in r) for r in [header, *rows])
            + "\n").encode()


# ------------------------------------------------------------------------------------ config
def test_streamlit_config_is_hardened():
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    server = cfg["server"]
    assert server["maxUploadSize"] == 50
    assert server["enableXsrfProtection"] is True
    assert server.get("enableCORS", True) is True  # True = CORS protection on
    assert server["address"] in {"localhost", "127.0.0.1"}  # loopback only unless opted in
    assert cfg["browser"]["gatherUsageStats"] is False
    assert cfg.get("client", {}).get("showErrorDetails") in {"none", False}  # no tracebacks shown
    assert server.get("runOnSave", False) is False


def test_launcher_passes_the_same_hardened_flags(monkeypatch):
    """``dp-explorer`` works from any directory, so it passes the settings on the command line."""
    from streamlit.web import cli as stcli

    from app import launch

    seen: list[list[str]] = []
    monkeypatch.setattr(stcli, "main", lambda: seen.append(list(sys.argv)) or 0)
    monkeypatch.setattr(sys, "argv", ["dp-explorer"])
    with pytest.raises(SystemExit):
        launch.main()
    argv = seen[0]
    flags = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert argv[:2] == ["streamlit", "run"] and argv[2].endswith("streamlit_app.py")
    assert flags["--server.address"] in {"localhost", "127.0.0.1"}
    assert flags["--server.maxUploadSize"] == "50"
    assert flags["--server.enableXsrfProtection"] == "true"
    assert flags["--browser.gatherUsageStats"] == "false"


# ------------------------------------------------------------------- user strings are text only
def _html_sinks(at: AppTest) -> list[str]:
    """Descriptions of elements that would render a payload as HTML."""
    bad = []
    for node in nodes(at):
        proto = getattr(node, "proto", None)
        if proto is None:
            continue
        kind = type(proto).__name__
        text = str(proto)
        hit = [p for p in PAYLOADS if p in text]
        if kind == "Markdown" and proto.allow_html and hit:
            bad.append(f"markdown with allow_html=True shows {hit}: {proto.body[:200]!r}")
        elif kind in HTML_PROTOS and hit:
            bad.append(f"{kind} element renders {hit}")
    return bad


def unescape_md(text: str) -> str:
    """Markdown backslash escapes removed (an escaped user string is still the user's string)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text)


def _shown_anywhere(at: AppTest, payload: str) -> bool:
    return any(payload in unescape_md(proto_text(n)) for n in nodes(at))


def test_uploaded_names_are_rendered_as_text_on_every_page():
    name = f"x{PAYLOADS[1]}.csv"
    at = upload(new_app(), name, hostile_csv())
    assert not _html_sinks(at), _html_sinks(at)
    assert _shown_anywhere(at, PAYLOADS[1]), "the file name should be shown (as text)"
    choose_label(at)
    at.text_input(key=f"cats:{PAYLOADS[2]}").input("u, v").run()
    assert not _html_sinks(at), _html_sinks(at)
    button(at, "Use this table").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state.dataset.name == name
    assert not _html_sinks(at), _html_sinks(at)
    assert _shown_anywhere(at, PAYLOADS[0]), "the column names should be shown (as text)"
    for page in page_files():
        goto(at, page)
        assert not _html_sinks(at), (page, _html_sinks(at))
    # the sidebar and the Release page echo the file name: as markdown that allows no HTML
    goto(at, "release")
    for box in [c for c in at.checkbox if c.key == "optin_unbounded"]:  # data bounds / class list: opt in
        box.check().run()
    button(at, "Draw release").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not _html_sinks(at), _html_sinks(at)
    assert any(PAYLOADS[1] in unescape_md(m.value) and not m.proto.allow_html for m in at.sidebar.markdown)


def _unsafe_demo_app() -> None:
    import streamlit as st

    st.markdown("<img src=x onerror=alert(1)>", unsafe_allow_html=True)
    st.html("<svg onload=alert(1)>")
    st.markdown("<script>alert(1)</script>")  # allow_html=False: shown as text, not a sink


def test_the_html_sink_check_is_not_vacuous():
    at = AppTest.from_function(_unsafe_demo_app, default_timeout=TIMEOUT).run()
    sinks = _html_sinks(at)
    assert len(sinks) == 2, sinks
    assert any("allow_html=True" in s for s in sinks) and any(s.startswith("Html") for s in sinks)


def test_bad_upload_error_message_is_text():
    """A validation error quoting the user's column names goes through st.error (no HTML)."""
    bad = f"{PAYLOADS[0]},{PAYLOADS[0]}\n1,2\n".encode()
    at = upload(new_app(), f"{PAYLOADS[2]}.csv", bad)
    assert any("duplicate column" in e.value for e in at.error)
    assert not _html_sinks(at), _html_sinks(at)


# Markdown that makes the browser load a remote image / show a link when interpreted.
MD_IMAGE = "![t](http://attacker.invalid/beacon.png)"
MD_LINK = "x` [click here](http://attacker.invalid/phish) `y"  # breaks out of a `code span`
MD_FILE = "x![f](https:attacker.invalid).csv"  # file names cannot hold "/"


def _markdown_injections(at: AppTest) -> list[str]:
    """User strings that reach a Markdown-interpreting field unescaped: bodies of st.markdown /
    st.write / st.caption / alerts, and widget labels (which render links and images)."""
    bad = []
    for node in nodes(at):
        proto = getattr(node, "proto", None)
        if proto is None:
            continue
        fields = [f for f in ("body", "label") if f in {d.name for d in proto.DESCRIPTOR.fields}]
        for f in fields:
            text = getattr(proto, f)
            # inside a `code span` Markdown is not interpreted: drop well-formed spans first
            if isinstance(text, str) and "](http" in re.sub(r"`[^`]*`", "", text):
                bad.append(f"{type(proto).__name__}.{f}: {text[:160]!r}")
    return bad


def test_user_strings_are_not_interpreted_as_markdown():
    header = [MD_IMAGE, MD_LINK, "y"]
    rows = [[str(i % 7), "u" if i % 3 else "v", str(i % 2)] for i in range(40)]
    data = "\n".join(",".join(r) for r in [header, *rows]).encode()
    at = upload(new_app(), MD_FILE, data)
    found = _markdown_injections(at)
    choose_label(at)
    found += _markdown_injections(at)  # the categories label of the non-numeric column
    at.text_input(key=f"cats:{MD_LINK}").input("u, v").run()
    button(at, "Use this table").click().run()
    assert at.session_state.dataset.name == MD_FILE
    found += _markdown_injections(at)  # sidebar label, bounds-from-data warning
    for page in ("explore", "release"):
        goto(at, page)
        found += _markdown_injections(at)
    assert not found, "\n".join(sorted(set(found)))


class _HtmlCalls(ast.NodeVisitor):
    """Calls that hand a string to the browser as HTML: ``st.html``, ``components.html``,
    ``components.iframe`` and anything with ``unsafe_allow_html=True``."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str, bool]] = []  # (line, what, first argument is a literal)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        unsafe = any(k.arg in {"unsafe_allow_html", "unsafe_allow_javascript"}
                     and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                     for k in node.keywords)
        if name in {"html", "iframe"} or unsafe:
            literal = bool(node.args) and isinstance(node.args[0], ast.Constant)
            self.found.append((node.lineno, name + (" unsafe_allow_html" if unsafe else ""), literal))
        self.generic_visit(node)


def test_no_html_sink_receives_a_non_literal_string():
    """Static check of app/ and pages/: HTML is only ever rendered from string literals."""
    offenders = []
    for path in sorted([*(ROOT / "app").rglob("*.py"), *(ROOT / "pages").glob("*.py")]):
        visitor = _HtmlCalls()
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        offenders += [f"{path.relative_to(ROOT)}:{line} {what}" for line, what, lit in visitor.found
                      if not lit]
    assert not offenders, "HTML built from non-literal (possibly user) strings: " + ", ".join(offenders)


# --------------------------------------------------------------------------- uploads stay in RAM
class _WriteRecorder:
    """Audit hook: every file opened for writing while ``active`` (audit hooks cannot be removed,
    so the hook stays installed but idle after the test)."""

    def __init__(self) -> None:
        self.active = False
        self.paths: list[str] = []

    def __call__(self, event: str, args: tuple) -> None:
        if not self.active or event != "open":
            return
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        if not isinstance(path, (str, bytes, os.PathLike)):
            return
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND))
        if writes:
            self.paths.append(os.fsdecode(path))


_RECORDER = _WriteRecorder()
_HOOKED: list[bool] = []


def _record_writes() -> _WriteRecorder:
    if not _HOOKED:  # installed once per process, only by the test that needs it
        sys.addaudithook(_RECORDER)
        _HOOKED.append(True)
    return _RECORDER

SKIP_DIRS = {".git", ".venv", ".venv-ci", "__pycache__", ".ruff_cache", "node_modules"}


def _recent_files(roots: list[Path], since: float) -> Iterator[Path]:
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            for f in filenames:
                p = Path(dirpath) / f
                try:
                    st = p.lstat()
                except OSError:
                    continue
                if p.is_file() and not p.is_symlink() and st.st_mtime >= since and st.st_size < 200e6:
                    yield p


def _contains(path: Path, needle: bytes) -> bool:
    try:
        return needle in path.read_bytes()
    except OSError:
        return False


def test_upload_is_never_written_to_disk(tmp_path):
    marker = f"secretcol{uuid.uuid4().hex}"
    data = hostile_csv(marker)
    since = time.time() - 1
    recorder = _record_writes()
    recorder.paths.clear()
    recorder.active = True
    try:
        at = upload(new_app(), f"{marker}.csv", data)
        choose_label(at)
        at.text_input(key=f"cats:{PAYLOADS[2]}").input("u, v").run()
        button(at, "Use this table").click().run()
        assert at.session_state.dataset.name == f"{marker}.csv"
        for page in ("explore", "release"):
            goto(at, page)
        for box in [c for c in at.checkbox if c.key == "optin_unbounded"]:  # data bounds / class list: opt in
            box.check().run()
        button(at, "Draw release").click().run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.session_state.pending_release["csv"]  # the release exists, in memory
        canary = tmp_path / "canary.txt"
        canary.write_text("the hook sees writes")
    finally:
        recorder.active = False
    assert str(canary) in recorder.paths, "the audit hook did not record a write"
    needle = marker.encode()
    written = [p for p in recorder.paths if Path(p).is_file() and _contains(Path(p), needle)]
    assert not written, f"the upload was written to {written}"
    scanned = [p for p in _recent_files([ROOT, Path(tempfile.gettempdir())], since)
               if _contains(p, needle)]
    assert not scanned, f"files holding the uploaded data: {scanned}"


# ------------------------------------------------------------------------- sessions are isolated
@pytest.mark.slow
def test_two_sessions_do_not_see_each_others_upload():
    marker = f"othercol{uuid.uuid4().hex}"
    a = upload(new_app(), f"{marker}.csv", hostile_csv(marker))
    choose_label(a)
    a.text_input(key=f"cats:{PAYLOADS[2]}").input("u, v").run()
    button(a, "Use this table").click().run()
    assert a.session_state.dataset.name == f"{marker}.csv"
    assert _shown_anywhere(a, marker)

    b = new_app()  # a second user, while the first session is alive
    assert b.session_state.dataset.name == "digits"
    for page in page_files():
        goto(b, page)
        assert not _shown_anywhere(b, marker), page
    goto(b, "data")
    b.radio(key="p:data_source").set_value("Upload a file").run()
    assert b.get("file_uploader")[0].value is None  # nothing pre-filled from the other session
    assert not _shown_anywhere(b, marker)
    leaked = [k for k, v in session_items(b).items() if marker in repr(v)]
    assert not leaked, leaked
    # and the first session still has its own data
    a.run()
    assert a.session_state.dataset.name == f"{marker}.csv"
