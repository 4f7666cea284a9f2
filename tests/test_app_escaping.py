"""Every page of the app, rendered with a hostile file name, hostile column names, a hostile
label name and hostile category values (issue 17, "Escaping everywhere").

A user-supplied string reaches the page only through ``app.markdown.md_escape``: the test parses
every markdown-rendered string of every page (bodies, captions, alerts, widget and metric labels,
help texts, in the main area and the sidebar) with markdown-it-py (CommonMark with raw HTML and
GFM-style autolinks enabled, i.e. at least as permissive as Streamlit's renderer) and fails on any
link, image or raw HTML token that carries the payload.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

st_testing = pytest.importorskip("streamlit.testing.v1")
markdown_it = pytest.importorskip("markdown_it")
AppTest = st_testing.AppTest

from tests.test_app import ENTRY, PAGES, TIMEOUT  # noqa: E402  (after the importorskip)

HOST = "attacker.invalid"
FILE_NAME = f"![x](https://{HOST}/leak.png)<img src=x onerror=alert(1)>[c](javascript:alert(1)).csv"
COLUMNS = [f"![i](https://{HOST}/col.png)", f"[l](https://{HOST}/l)", "<b>b</b><script>alert(1)</script>"]
TEXT_COLUMN = f"**t**<i>https://{HOST}/t</i>"
LABEL = f"<y>![y](https://{HOST}/y.png)"
CATEGORIES = [f"[v](https://{HOST}/v)", "w"]
#: proto fields rendered as markdown by Streamlit's frontend
MARKDOWN_FIELDS = {"body", "label", "help", "caption", "placeholder"}
#: elements whose ``body`` is shown verbatim, never as markdown (st.json, st.code, st.text)
PLAIN_ELEMENTS = {"Json", "Code", "Text"}


def _hostile_csv() -> bytes:
    header = [*COLUMNS, TEXT_COLUMN, LABEL]
    rows = [[str(i % 7), str((3 * i) % 5), str(i % 3), CATEGORIES[i % 2], str(i % 2)] for i in range(60)]

    def cell(c: str) -> str:
        return '"' + c.replace('"', '""') + '"' if any(ch in c for ch in ',"\n') else c

    return ("\n".join(",".join(cell(c) for c in r) for r in [header, *rows]) + "\n").encode()


def _strings(message: Any, field: str = "") -> Iterator[str]:
    """Every markdown-rendered string field of a protobuf message, recursively."""
    for desc, value in message.ListFields():
        repeated = not isinstance(value, (str, bytes)) and not hasattr(value, "ListFields") \
            and hasattr(value, "__iter__")
        values = value if repeated else [value]
        for v in values:
            if isinstance(v, str):
                if desc.name in MARKDOWN_FIELDS:
                    yield v
            elif hasattr(v, "ListFields"):
                yield from _strings(v, desc.name)


def _nodes(node: Any) -> Iterator[Any]:
    yield node
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for child in children.values():
            yield from _nodes(child)


def _rendered(at: AppTest) -> list[str]:
    out: list[str] = []
    for root in (at.main, at.sidebar):
        for node in _nodes(root):
            proto = getattr(node, "proto", None)
            if (proto is not None and hasattr(proto, "ListFields")
                    and type(proto).__name__ not in PLAIN_ELEMENTS):
                out.extend(_strings(proto))
    return out


_MD = markdown_it.MarkdownIt("commonmark", {"html": True, "linkify": True}).enable(
    ["linkify", "table", "strikethrough"])


def _active_tokens(text: str) -> list[str]:
    """Links, images and raw HTML that ``text`` would render to, if they carry the payload."""
    bad = []
    stack = list(_MD.parse(text))
    while stack:
        tok = stack.pop()
        stack.extend(tok.children or [])
        target = " ".join(str(v) for v in (tok.attrs or {}).values())
        if tok.type in ("link_open", "image") and (HOST in target or "javascript:" in target):
            bad.append(f"{tok.type} -> {target}")
        if tok.type in ("html_inline", "html_block"):
            bad.append(f"{tok.type}: {tok.content!r}")
    return bad


def _check_page(at: AppTest, page: str) -> list[str]:
    assert not at.exception, [e.value for e in at.exception]
    texts = _rendered(at)
    bad = [f"{page}: {b} (in {t[:120]!r})" for t in texts for b in _active_tokens(t)]
    assert not bad, bad
    return texts


def _use_hostile_table(at: AppTest) -> None:
    at.switch_page("../pages/data.py").run()
    at.radio(key="p:data_source").set_value("Upload a file").run()
    at.get("file_uploader")[0].set_value((FILE_NAME, _hostile_csv(), "text/csv")).run()
    assert not at.exception, [e.value for e in at.exception]
    _check_page(at, "data (uploaded)")
    at.selectbox(key="upload_label").select(LABEL).run()
    at.selectbox(key="upload_task").select("classification").run()
    at.text_input(key=f"cats:{TEXT_COLUMN}").input(", ".join(CATEGORIES)).run()
    next(b for b in at.button if b.label == "Use this table").click().run()
    assert not at.exception, [e.value for e in at.exception]
    ds = at.session_state.dataset
    assert ds.name == FILE_NAME and ds.label_name == LABEL
    assert [c for c in ds.feature_names if c in COLUMNS] == COLUMNS
    assert f"{TEXT_COLUMN}={CATEGORIES[0]}" in ds.feature_names


@pytest.mark.slow
def test_every_page_escapes_hostile_names():
    from dpcore.ledger import LedgerEntry

    at = AppTest.from_file(ENTRY, default_timeout=TIMEOUT)
    at.run()
    _use_hostile_table(at)
    shown_on: dict[str, list[str]] = {}
    for page in PAGES:
        at.switch_page(f"../pages/{page}.py").run()
        texts = _check_page(at, page)
        for box in [c for c in at.checkbox if c.key == "optin_unbounded"]:  # a class list from the data
            box.check().run()
        for label in ("Draw release", "Run sweep"):  # the pages' results render user strings too
            buttons = [b for b in at.button if b.label == label and not b.disabled]
            if buttons:
                buttons[0].click().run()
                texts = _check_page(at, f"{page} after {label!r}")
        if page == "release" and at.session_state.get("pending_release"):
            card = at.session_state.pending_release["card"]  # a download records it in the ledger
            at.session_state.ledger.add(LedgerEntry.from_card(json.loads(card), FILE_NAME))
            at.run()
            texts = _check_page(at, "release with a ledger entry")
        shown_on[page] = [t for t in texts if f"{HOST}/leak" in t.replace("\\", "")]
    # not vacuous: the hostile file name is on every page (at least in the sidebar), as text
    assert all(shown_on.values()), {p: len(v) for p, v in shown_on.items()}
