"""Escape user-supplied strings (file and column names, messages quoting them) before markdown or HTML."""

from __future__ import annotations

import html
import re

__all__ = [
    "html_escape",
    "md_code",
    "md_escape",
]

_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$])")


def md_escape(text: object) -> str:
    """``text`` as literal markdown: every markdown/HTML special character backslash-escaped and
    line breaks folded, so a hostile name cannot become a link, an image fetch or a tag."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text).splitlines()))


def html_escape(text: object) -> str:
    """``text`` as literal HTML text or attribute value (``& < > " '`` escaped): user strings (file,
    column and class names) in the downloadable release report can never become markup."""
    return html.escape(str(text), quote=True)


def md_code(text: object) -> str:
    """``text`` as a markdown code span: shown as typed (a code span renders no markdown and no HTML,
    so nothing is backslash-escaped, unlike :func:`md_escape`, whose backslashes would show); its
    backticks, which could end the span, become quotes, and line breaks are folded."""
    return "`" + " ".join(str(text).replace("`", "'").splitlines()) + "`"
