"""File readers: CSV / Parquet / NumPy ``.npz`` tables, bounds files, the bundled datasets.

Every reader returns plain values (a ``DataFrame``, bytes, ``{column: (lo, hi)}``) and knows
nothing of tasks, labels or privacy; :func:`dpcore.data.load_dataset` turns a table into a
:class:`~dpcore.data.Dataset`. Malformed files (another format saved as ``.csv``, bad encodings,
ragged rows, empty or duplicate column names, truncated archives, decompression bombs, FIFOs and
devices) raise :class:`~dpcore.exceptions.DataValidationError` (a ``ValueError``) with one line
naming the problem and what to do, never a raw parser error; inputs over the resource limits raise
:class:`~dpcore.limits.ResourceLimitError` before anything large is allocated. The corpus in
``tests/data/bad`` holds one file per case.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpcore import limits
from dpcore.exceptions import DataValidationError
from dpcore.io_binary import (  # re-exported: their home was this module
    CELL_BYTES,
    _read_npz,
    _read_parquet,
    check_parquet_schema,
    check_parquet_size,
)
from dpcore.io_checks import (  # re-exported: their home was this module
    LOAD_BYTES_PER_CELL,
    NPZ_LABEL,
    _expands,
    _over_cap,
    _too_large,
    check_column_names,
    check_load_memory,
    refuse_complex_columns,
)
from dpcore.io_csv import (  # re-exported: their home was this module
    RaggedLineError,
    _read_csv,
    bom_encoding,
    check_field_counts,
    csv_field_count,
)
from dpcore.validation import bound_pair

__all__ = [
    "CELL_BYTES",
    "LOAD_BYTES_PER_CELL",
    "MAX_DECOMPRESSED_BYTES",
    "NPZ_LABEL",
    "SUFFIXES",
    "RaggedLineError",
    "bom_encoding",
    "bundled_datasets",
    "check_column_names",
    "check_field_counts",
    "check_parquet_schema",
    "check_parquet_size",
    "check_load_memory",
    "csv_field_count",
    "table_shape",
    "load_bounds_file",
    "parse_bounds",
    "read_regular_file",
    "read_table",
    "refuse_complex_columns",
    "sample_data_dir",
]

SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq", ".npz", ".txt", ".tsv")

#: An input may expand to at most this many bytes once decompressed (gzip, ``.npz`` members,
#: Parquet); ``None``: :func:`dpcore.limits.max_input_bytes` (``DPCORE_MAX_INPUT_BYTES``, 1 GiB).
MAX_DECOMPRESSED_BYTES: int | None = None
#: Leading bytes of formats that are sometimes saved or renamed as ``.csv`` by mistake.
_MAGIC = (
    (b"PK\x03\x04", "a ZIP archive (or an Excel .xlsx/.ods workbook), not CSV text: extract the CSV "
                     "or export the sheet as 'CSV UTF-8'"),
    (b"PK\x05\x06", "an (empty) ZIP archive, not CSV text: export the table as 'CSV UTF-8'"),
    (b"\x1f\x8b", "gzip-compressed: name it .csv.gz or decompress it first"),
    (b"PAR1", "a Parquet file: give it the .parquet extension"),
    (b"\x93NUMPY", "a NumPy .npy array: save it with numpy.savez as .npz (arrays X, y)"),
    (b"\xd0\xcf\x11\xe0", "an old Excel .xls workbook: export the sheet as 'CSV UTF-8'"),
    (b"%PDF", "a PDF document, not a CSV table"),
    (b"SQLite format 3", "an SQLite database, not a CSV table: export the table as CSV"),
)


def sample_data_dir() -> Path:
    """Folder holding the bundled datasets (the repository's ``sample_data/``)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_sample_data", here.parent / "sample_data"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("the bundled sample_data folder was not found next to dpcore")


def bundled_datasets() -> dict[str, dict[str, Any]]:
    """Metadata of every bundled dataset, by name (``digits``, ``mnist-10k``, ...)."""
    out: dict[str, dict[str, Any]] = {}
    try:
        folder = sample_data_dir()
    except FileNotFoundError:
        return out
    for meta_path in sorted(folder.glob("*.meta.json")):
        meta = json.loads(meta_path.read_text())
        out[meta["name"]] = meta
    return out


# ---------------------------------------------------------------------------------------- reading
def read_table(
    source: str | Path | bytes | io.IOBase, filename: str | None = None, *,
    max_bytes: int | None = None, text_columns: Collection[str] = (),
) -> pd.DataFrame:
    """Read a CSV, Parquet or ``.npz`` file (path or bytes) into a DataFrame.

    ``.npz`` files hold ``X`` (2-D, or 3-D images which are flattened), optional ``y`` and
    optional ``feature_names``; the label column is then called ``label``. CSV text may be UTF-8
    (with or without a byte-order mark) or UTF-16 with a byte-order mark; the delimiter is a
    comma, semicolon or tab.

    Parameters
    ----------
    text_columns : collection of str
        CSV columns read as text whatever their values look like: the columns with a public
        category list (codes such as ``"01"`` stay ``"01"``; read as numbers where no other value
        in the file, or in a block of it, is text, they would become ``1`` and miss their list).
    max_bytes : int, optional
        Refuse inputs larger than this, counted before *and after* decompression (the app passes
        its per-session upload limit). Whatever it is, every input is also held to
        :func:`dpcore.limits.max_input_bytes` decompressed bytes and
        :func:`dpcore.limits.max_cells` rows x columns, checked before the table is allocated
        (from the gzip stream, the ``.npz`` member headers, the Parquet footer, the CSV's lines).

    Raises
    ------
    DataValidationError
        Every problem with the file itself, as one line naming the problem and what to do: empty
        file, not a regular file (FIFO, device), over ``max_bytes`` or a resource limit
        (:class:`~dpcore.limits.ResourceLimitError`), another format saved as ``.csv``
        (ZIP/xlsx, gzip, Parquet, binary), undecodable bytes, ragged rows, empty or duplicate
        column names, complex values, unreadable Parquet/``.npz``.
    """
    cap = _input_cap(max_bytes)
    if isinstance(source, (str, Path)):
        path = Path(source)
        filename = filename or path.name
        raw = read_regular_file(path, "input file", max_bytes=max_bytes, display=filename)
    elif isinstance(source, (bytes, bytearray, memoryview)):
        raw = bytes(source)
    else:
        raw = source.read(cap + 1)
    display = filename or "upload.csv"
    filename = display.lower()
    if max_bytes is not None and len(raw) > max_bytes:
        raise DataValidationError(_too_large(display, len(raw), max_bytes))
    if len(raw) > cap:
        raise limits.ResourceLimitError(_over_cap(display, len(raw), cap, "is"))
    if not raw or raw.isspace():
        raise DataValidationError(f"{display} is empty: it holds no header and no rows")
    if filename.endswith(".npz"):
        return _read_npz(raw, display, cap)
    if filename.endswith((".parquet", ".pq")):
        return _read_parquet(raw, display, cap)
    if filename.endswith(".gz"):
        raw = _gunzip(raw, display, cap)
        if not raw or raw.isspace():
            raise DataValidationError(f"{display} is empty once decompressed")
    else:
        _refuse_other_formats(raw, display)
    return _read_csv(raw, display, text_columns)


def read_regular_file(
    path: str | Path, what: str = "file", *, max_bytes: int | None = None, display: str | None = None,
) -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``max_bytes`` (and
    :func:`dpcore.limits.max_input_bytes`) bytes.

    A FIFO, socket or device (``/dev/zero``) is refused from its ``stat`` before it is opened,
    so it can neither hang the reader nor fill the memory; a file that grows while it is read
    is cut at the limit and refused.

    Raises
    ------
    DataValidationError
        Missing path, a folder, not a regular file, too large, unreadable (the OS reason).
    """
    path = Path(path)
    shown = display or str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise DataValidationError(f"{what} not found: {path}") from None
    except OSError as exc:
        raise DataValidationError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise DataValidationError(f"{path} is a folder, not a data file" if what == "input file"
                                  else f"the {what} {path} is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(info.st_mode) else
                "a character device" if stat.S_ISCHR(info.st_mode) else
                "a block device" if stat.S_ISBLK(info.st_mode) else
                "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file")
        raise DataValidationError(f"the {what} {path} is {kind}, not a regular file; give the path "
                                  "of a file on disk")
    cap = _input_cap(max_bytes)
    if max_bytes is not None and info.st_size > max_bytes:
        raise DataValidationError(_too_large(shown, info.st_size, max_bytes))
    if info.st_size > cap:
        raise limits.ResourceLimitError(_over_cap(shown, info.st_size, cap, "is"))
    try:
        with open(path, "rb") as fh:
            raw = fh.read(cap + 1)
    except OSError as exc:
        raise DataValidationError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    if len(raw) > cap:
        raise limits.ResourceLimitError(_over_cap(shown, len(raw), cap, "grew to"))
    return raw


def _input_cap(max_bytes: int | None) -> int:
    """Decompressed-size limit of one input: the smallest of ``max_bytes``,
    :data:`MAX_DECOMPRESSED_BYTES` and :func:`dpcore.limits.max_input_bytes`."""
    caps = [limits.max_input_bytes()]
    if MAX_DECOMPRESSED_BYTES is not None:
        caps.append(MAX_DECOMPRESSED_BYTES)
    if max_bytes is not None:
        caps.append(max_bytes)
    return int(min(caps))


def _gunzip(raw: bytes, filename: str, limit: int | None = None) -> bytes:
    """Decompress gzip bytes, refusing truncated/corrupt data and decompression bombs (at most
    ``limit`` decompressed bytes are ever held). A first pass streams the text in pieces and counts
    its lines and header fields: the table's cells and the memory its reading needs are checked
    (:func:`dpcore.limits.check_cells`, :func:`check_load_memory`) before the text is held whole."""
    limit = _input_cap(None) if limit is None else limit
    step = 8 << 20
    try:
        size, lines, returns, head = 0, 0, 0, b""
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh:
            for chunk in iter(lambda: fh.read(step), b""):
                size += len(chunk)
                if size > limit:
                    raise limits.ResourceLimitError(_expands(filename, limit))
                if len(head) < 1 << 20:
                    head += chunk[: (1 << 20) - len(head)]
                lines += chunk.count(b"\n")
                returns += chunk.count(b"\r")
        n_lines, fields = max(lines, returns) + 1, csv_field_count(head)
        limits.check_cells(n_lines, fields, filename)
        check_load_memory(n_lines, fields, filename, text_bytes=size)
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh:
            return fh.read(limit + 1)
    except (OSError, EOFError, zlib.error) as exc:
        reason = "it is truncated" if isinstance(exc, EOFError) else str(exc).splitlines()[0]
        raise DataValidationError(
            f"{filename} is not a valid gzip file ({reason}); re-compress it or give the plain .csv"
        ) from None


def table_shape(path: str | Path) -> tuple[int, int] | None:
    """``(rows, columns)`` of a table file, from what is known before it is parsed: the Parquet
    footer, the ``.npz`` member headers, a CSV's lines (a gzip CSV decompressed in pieces, never
    whole) and its header's fields. Rows are an upper bound for CSV (blank lines and line breaks
    inside quotes count). ``None`` for anything else or a file that cannot be inspected (the
    reader then says what is wrong with it)."""
    path = Path(path)
    name = path.name.lower()
    try:
        if not path.is_file():
            return None
        if name.endswith((".parquet", ".pq")):
            import pyarrow.parquet as pq

            meta = pq.ParquetFile(path).metadata
            return int(meta.num_rows), int(meta.num_columns)
        if name.endswith(".npz"):
            with zipfile.ZipFile(path) as zf:
                with zf.open("X.npy") as fh:
                    version = np.lib.format.read_magic(fh)
                    reader = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                              else np.lib.format.read_array_header_2_0)
                    shape = reader(fh)[0]
                extra = int("y.npy" in zf.namelist())
            return (int(shape[0]), math.prod(shape[1:]) + extra) if len(shape) >= 1 else None
        if not name.endswith((".csv", ".csv.gz", ".txt", ".tsv")):
            return None
        opener = gzip.open if name.endswith(".gz") else open
        lines, returns, head, last = 0, 0, b"", b""
        with opener(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(8 << 20), b""):
                head = head or chunk[: 1 << 20]
                lines += chunk.count(b"\n")
                returns += chunk.count(b"\r")
                last = chunk[-1:]
        # the lines less the header's (a last line without a line end counts too)
        return max(1, max(lines, returns) - (last in (b"\n", b"\r"))), csv_field_count(head)
    except Exception:  # noqa: BLE001 - unreadable here: the reader names the problem
        return None


def _refuse_other_formats(raw: bytes, filename: str) -> None:
    """Clear errors for files that are not text at all (renamed archives, binaries)."""
    head = raw[:64]
    for magic, what in _MAGIC:
        if head.startswith(magic):
            raise DataValidationError(f"{filename} is {what}")


# ---------------------------------------------------------------------------------------- bounds
def load_bounds_file(path: str | Path) -> dict[str, tuple[float, float]]:
    """Read public bounds from JSON (``{"col": [lo, hi], ...}``) or CSV (``column,lo,hi``).

    Each entry must be exactly two finite numbers with ``lo < hi``: JSON numbers (not strings,
    not booleans, no third value) or, in CSV, two plain decimal numbers. The file must be a
    regular file (a FIFO or device is refused before it is opened).

    Raises
    ------
    DataValidationError
        Unreadable file, malformed entries (the column is named), a column listed twice.
    """
    path = Path(path)
    raw = read_regular_file(path, "bounds file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataValidationError(f"the bounds file {path} is not UTF-8 text") from None
    return parse_bounds(text, str(path))


def parse_bounds(text: str, filename: str = "bounds.csv") -> dict[str, tuple[float, float] | None]:
    """The text of a bounds file (formats of :func:`load_bounds_file`; JSON when ``filename``
    ends in ``.json``, else CSV rows ``column,lo,hi`` with an optional header) as
    ``{column: (lo, hi)}``, strictly parsed (:func:`bound_pair`). Used for files uploaded to the
    app too, which are never written to disk. Keys may be patterns and values ``None`` (JSON
    ``null``, CSV ``column,,``: no public bound), resolved against a table's columns by
    :func:`dpcore.bounds.resolve_bound_rules`.

    Raises
    ------
    DataValidationError
        Malformed entries (the column is named), a column listed twice.
    """
    if filename.lower().endswith(".json"):
        try:
            data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
        except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise DataValidationError(
                f"bounds file {filename} is not valid JSON ({exc}); it must map each column to [lo, hi]"
            ) from None
        data = data.get("bounds", data) if isinstance(data, dict) else data
        if not isinstance(data, dict):
            raise DataValidationError(
                f"bounds file {filename} must map each column to [lo, hi] (JSON object), got a "
                f"{type(data).__name__}"
            )
        # null: "no public bound here" (a template's empty value; dpcore.bounds)
        return {str(k): None if v is None else bound_pair(k, v, f"bounds file {filename}")
                for k, v in data.items()}
    rows = [r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
    if rows and rows[0] and rows[0][0].strip().lower() in {"column", "name", "feature"}:
        rows = rows[1:]
    out: dict[str, tuple[float, float]] = {}
    for i, r in enumerate(rows, start=1):
        if len(r) != 3:
            raise DataValidationError(
                f"bounds file {filename}: row {i} has {len(r)} field(s); each row must be 'column,lo,hi'"
            )
        name = r[0].strip()
        if name in out:
            raise DataValidationError(f"bounds file {filename} lists column {name!r} twice")
        if not any(v.strip() for v in r[1:]):  # "column,,": no public bound here (a template's row)
            out[name] = None
            continue
        out[name] = bound_pair(name, [_csv_number(v) for v in r[1:]], f"bounds file {filename}")
    return out


_NUMBER_RE = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _csv_number(text: str) -> Any:
    """A plain decimal number from a CSV cell, else the text (which :func:`bound_pair` refuses)."""
    text = text.strip()
    return float(text) if _NUMBER_RE.fullmatch(text) else text


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise DataValidationError(f"the bounds file lists column {k!r} twice")
        out[k] = v
    return out
