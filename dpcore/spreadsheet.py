"""Spreadsheet-safe CSV: column names and text cells that a spreadsheet would run as a formula are
escaped (:func:`escape_formula`), and the release's CSV is written in blocks of rows with one number
format (:func:`csv_text`, :func:`csv_chunks`, :func:`spreadsheet_safe_csv`). Every CSV a user
downloads goes through it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "CSV_ESCAPE_RULE",
    "CSV_FLOAT_FORMAT",
    "FORMULA_TRIGGERS",
    "csv_chunks",
    "csv_text",
    "escape_formula",
    "spreadsheet_safe",
    "spreadsheet_safe_csv",
    "spreadsheet_safe_csv_chunks",
]

FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r", "\n")
#: the released CSVs' number format: 10 significant digits
CSV_FLOAT_FORMAT = "%.10g"
CSV_ESCAPE_RULE = (
    "OWASP CSV injection: a text cell or column name whose first character (after any leading "
    "single quotes) is = + - @ tab, CR or LF is written with one extra leading single quote ('); "
    "numbers are never changed. Remove one leading quote from such values to recover the originals."
)


def _escaped(value: Any) -> bool:
    """True for a text cell that :func:`escape_formula` changes."""
    return isinstance(value, str) and escape_formula(value) != value


def escape_formula(text: str) -> str:
    """Neutralise one string for spreadsheets: prefix ``'`` if it would be read as a formula.

    Column names and class labels are user strings that end up in released CSVs; a custodian who
    opens ``=HYPERLINK(...)`` in Excel runs it. The OWASP fix is a leading single quote, which
    spreadsheets show as text. Leading quotes are skipped before the test (``"'=a"`` becomes
    ``"''=a"``) so that escaping is one-to-one: ``"=a"`` and ``"'=a"`` never collide into one
    header, and removing one quote from escaped values recovers every original exactly.
    """
    return "'" + text if text.lstrip("'").startswith(FORMULA_TRIGGERS) else text


def _escape_cell(value: Any) -> Any:
    return escape_formula(value) if isinstance(value, str) else value


def _is_text_column(column: pd.Series) -> bool:
    return _is_text_dtype(column.dtype)


def _is_text_dtype(dtype: Any) -> bool:
    return (pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype)
            or isinstance(dtype, pd.CategoricalDtype))


def _text_positions(frame: pd.DataFrame) -> list[int]:
    """Positions of the text columns of ``frame``, from its dtypes (each distinct dtype looked at
    once: a table of 100,000 float columns is not walked column by column)."""
    text = {id(dt): _is_text_dtype(dt) for dt in frame.dtypes}
    return [j for j, dt in enumerate(frame.dtypes) if text[id(dt)]]


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` with formula-like column names and text cells escaped.

    Only ``str`` values are touched (object, string and categorical columns, and the header):
    numeric columns keep their dtype and a negative number stays a number, because the
    spreadsheet reads ``-1.5`` as a value, never as a formula, and escaping it would corrupt the
    release. Object columns that mix numbers and text (DPMix mixed labels) keep their numbers.
    """
    out = frame.copy(deep=False)  # copy-on-write: untouched (numeric) columns are not copied
    for j in _text_positions(out):
        out.isetitem(j, out.iloc[:, j].map(_escape_cell))
    out.columns = [_escape_cell(name) for name in out.columns]
    return out


def spreadsheet_safe_csv(frame: pd.DataFrame, *, float_format: str | None = None) -> bytes:
    """UTF-8 CSV bytes of ``frame`` (no index) after :func:`spreadsheet_safe`.

    The one CSV writer for anything a user downloads (releases, the Compare and Utility tables),
    so no download path can forget the escaping.
    """
    return b"".join(spreadsheet_safe_csv_chunks(frame, float_format=float_format))


def spreadsheet_safe_csv_chunks(frame: pd.DataFrame, *, float_format: str | None = None,
                                lineterminator: str | None = None) -> Iterator[bytes]:
    """:func:`spreadsheet_safe_csv` in pieces of a few MiB (a file is written piece by piece).

    ``lineterminator``: ``None`` chooses as :func:`spreadsheet_safe_csv` does (below); a table
    written in parts passes the one of the whole table, so that every part has the same.
    """
    safe = spreadsheet_safe(frame)
    if lineterminator is None:
        # Python's csv writer quotes a field only for the characters of its line terminator, so with
        # "\n" a bare CR inside a label or name is written unquoted and a spreadsheet (or csv.reader)
        # splits the row there. Such tables are written with RFC 4180's "\r\n", which quotes them;
        # every other table keeps the usual "\n" byte for byte.
        has_cr = any(isinstance(v, str) and "\r" in v for v in safe.columns) or any(
            safe.iloc[:, j].map(lambda v: isinstance(v, str) and "\r" in v).any()
            for j in _text_positions(safe))
        lineterminator = "\r\n" if has_cr else "\n"
    for text in csv_chunks(safe, float_format=float_format, lineterminator=lineterminator):
        yield text.encode("utf-8")


#: rows formatted per ``%`` operation by :func:`csv_chunks` (a few MiB of text)
_CSV_BLOCK_ROWS = 8192


def csv_text(frame: pd.DataFrame, *, float_format: str | None, lineterminator: str = "\n") -> str:
    """``frame.to_csv(index=False, float_format=float_format, lineterminator=lineterminator)``:
    the same text, about 4x faster for float columns (:func:`csv_chunks`, joined)."""
    return "".join(csv_chunks(frame, float_format=float_format, lineterminator=lineterminator))


def csv_chunks(frame: pd.DataFrame, *, float_format: str | None, lineterminator: str = "\n"
               ) -> Iterator[str]:
    """The text of ``frame.to_csv(index=False, float_format=float_format,
    lineterminator=lineterminator)`` in pieces: the header, then blocks of
    :data:`_CSV_BLOCK_ROWS` rows.

    pandas formats each float with a Python call (``float_format % value``, holding the GIL: 19.9 s
    for 10^6 x 20 values). Here the rows of a block are formatted by one ``%`` operation of a
    row format repeated per row, in C (3.8x faster); columns pandas formats otherwise (text,
    integers, dates, NaN) are formatted by pandas column by column and inserted as ``%s``. Where
    that would not give pandas' text (a quoted cell holding a line break, a ``float_format`` that is
    not a plain ``%`` format), pandas writes the whole frame. Tested byte for byte against pandas
    (``tests/test_csv_injection.py``).
    """
    fast = _csv_columns(frame, float_format, lineterminator)
    if fast is None:
        yield frame.to_csv(index=False, float_format=float_format, lineterminator=lineterminator)
        return
    formats, columns = fast
    n = frame.shape[0]
    row = ",".join(formats) + lineterminator.replace("%", "%%")
    yield frame.iloc[:0].to_csv(index=False, lineterminator=lineterminator)  # the header, as pandas
    for start in range(0, n, _CSV_BLOCK_ROWS):
        stop = min(n, start + _CSV_BLOCK_ROWS)
        block = np.empty((stop - start, len(columns)), dtype=object)  # a block's Python objects only
        for j, values in enumerate(columns):
            block[:, j] = values[start:stop]
        yield (row * block.shape[0]) % tuple(block.ravel().tolist())


def _csv_columns(frame: pd.DataFrame, float_format: Any, lineterminator: str
                 ) -> tuple[list[str], list[Any]] | None:
    """For :func:`csv_chunks`: each column's ``%`` format (``float_format`` for a float64 column
    without NaN, ``%s`` for the others) and its values (the floats, or the cells as pandas writes
    them); ``None`` where pandas must write the frame (no float column to speed up, a format that is
    not a plain ``%`` format, a quoted cell holding the line terminator)."""
    n = frame.shape[0]
    if not isinstance(float_format, str) or set(float_format) & set(',"\r\n') or n == 0:
        return None
    formats: list[str] = []
    columns: list[Any] = []
    dtypes = list(frame.dtypes)
    floats = [j for j, dt in enumerate(dtypes) if dt == np.float64]
    values = frame.iloc[:, floats].to_numpy() if floats else np.empty((n, 0))  # one block, not per column
    plain = dict(zip(floats, ~np.isnan(values).any(axis=0), strict=True))  # pandas writes NaN as ""
    at = {j: k for k, j in enumerate(floats)}
    for j in range(frame.shape[1]):
        if plain.get(j, False):
            formats.append(float_format)
            columns.append(values[:, at[j]])
            continue
        column = frame.iloc[:, j]
        cells = column.to_frame().to_csv(index=False, header=False, float_format=float_format,
                                         lineterminator=lineterminator).split(lineterminator)[:-1]
        if len(cells) != n:  # a quoted cell holds the line terminator
            return None
        # a row of one empty field is written '""' by the csv module, an empty field of a longer row ''
        formats.append("%s")
        columns.append(np.array(["" if c == '""' else c for c in cells], dtype=object))
    return (formats, columns) if any(c.dtype == np.float64 for c in columns) else None
