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

import codecs
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
from dpcore.validation import bound_pair

__all__ = [
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


def _too_large(name: str, size: int, limit: int) -> str:
    return (f"{name} is {size / 2**20:.1f} MB, over the upload limit of {limit / 2**20:g} MB: "
            "use a smaller file (fewer rows or columns) or the dpcore command line")


def _over_cap(name: str, size: int, limit: int, verb: str) -> str:
    return (f"{name} {verb} {limits.format_bytes(size)}, over the input limit of "
            f"{limits.format_bytes(limit)} (DPCORE_MAX_INPUT_BYTES): use a smaller file; a Parquet or CSV "
            "table larger than memory is released in blocks by 'dpcore release ... --engine dask'")


def _expands(name: str, limit: int) -> str:
    return (f"{name} expands to more than {limit / 2**20:g} MB when decompressed; refusing it "
            "(a decompression bomb or a table far too large for this tool)")


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


#: Peak bytes reading a table needs per cell besides its text: the parsed frame, its float64 copy
#: and the missing-value mask (measured: a 199,000 x 1,000 CSV of 398 MB peaked at 3.6 GB, 18 bytes
#: per cell with the text; 24 leaves a margin).
LOAD_BYTES_PER_CELL = 24


def check_load_memory(n_rows: int, n_columns: int, what: str, *, text_bytes: int = 0) -> None:
    """Refuse, before it is parsed, a table whose reading would need more than
    :func:`dpcore.limits.max_memory_bytes` (:data:`LOAD_BYTES_PER_CELL` per cell plus its text)."""
    limits.check_memory(f"reading {what} ({n_rows:,} rows x {n_columns:,} columns)",
                        LOAD_BYTES_PER_CELL * n_rows * n_columns + text_bytes)


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


#: Byte-order marks of the Unicode encodings read besides UTF-8 (longest first: a UTF-32-LE mark
#: starts with the UTF-16-LE one). Such text is transcoded to UTF-8 before it is parsed.
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"),
         (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def bom_encoding(raw: bytes) -> str | None:
    """``"utf-16"`` / ``"utf-32"`` for text starting with that byte-order mark, else ``None``."""
    return next((enc for bom, enc in _BOMS if raw.startswith(bom)), None)


def _nul_pattern(sample: bytes) -> str | None:
    """The encoding whose NUL bytes ``sample`` shows (``"UTF-16"``, ``"UTF-32"``), or ``None``.

    Text in UTF-16 without a byte-order mark has a NUL byte beside nearly every ASCII character (at
    odd offsets little-endian, even ones big-endian); UTF-32 has three NULs per character."""
    n = len(sample) - len(sample) % 4
    if n < 8:
        return None
    arr = np.frombuffer(sample[:n], np.uint8).reshape(-1, 4) == 0
    share = arr.mean(axis=0)  # the NUL share of each byte position in the 4-byte frames
    text, nul = share < 0.5, share > 0.6  # positions holding the characters, and their NUL padding
    if (text[0] and nul[1:].all()) or (text[3] and nul[:3].all()):
        return "UTF-32"
    if (text[[0, 2]].all() and nul[[1, 3]].all()) or (text[[1, 3]].all() and nul[[0, 2]].all()):
        return "UTF-16"
    return None


def _as_utf8(raw: bytes, filename: str) -> bytes:
    """The text of ``raw`` as UTF-8 bytes (``raw`` itself if it is UTF-8, with or without a
    byte-order mark; UTF-16 / UTF-32 with a byte-order mark transcoded), or a clear error naming
    what it is: UTF-16 or UTF-32 without a byte-order mark, binary data (NUL bytes: they would
    otherwise end up inside the column names), another encoding by its first undecodable byte.
    UTF-8 is checked in pieces, so the decoded text is never held whole."""
    encoding = bom_encoding(raw)
    if encoding is not None:
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError:
            raise DataValidationError(
                f"{filename} starts like {encoding.upper()} text but cannot be decoded as such; re-save "
                "it as 'CSV UTF-8'"
            ) from None
        if "\x00" in text:
            raise DataValidationError(f"{filename} contains NUL characters: it is binary data, not a CSV "
                                      "text file. Export the table as 'CSV UTF-8'")
        return text.encode("utf-8")
    if b"\x00" in raw:
        wide = _nul_pattern(raw[:8192])
        if wide is not None:
            raise DataValidationError(
                f"{filename} looks like {wide} text without a byte-order mark (a NUL byte beside every "
                "character), not UTF-8: re-save it as 'CSV UTF-8'"
            )
        raise DataValidationError(
            f"{filename} contains NUL bytes: it is binary data, not a CSV text file. Export the "
            "table as 'CSV UTF-8'"
        )
    decoder = codecs.getincrementaldecoder("utf-8")()
    step = 8 << 20
    for start in range(0, len(raw), step):
        try:
            decoder.decode(raw[start:start + step], final=start + step >= len(raw))
        except UnicodeDecodeError as exc:
            _not_utf8(raw, start + exc.start, filename)
    return raw


def _not_utf8(raw: bytes, at: int, filename: str) -> None:
    """Raise the error for the undecodable byte at offset ``at`` of ``raw``."""
    text = raw[:8192].decode("utf-8", errors="replace")
    junk = sum(ch == "\ufffd" or (ord(ch) < 32 and ch not in "\r\n\t") for ch in text)
    if len(text) >= 32 and junk > 0.3 * len(text):
        raise DataValidationError(
            f"{filename} looks like binary data, not UTF-8 CSV text (undecodable byte "
            f"0x{raw[at]:02x} at byte {at}); export the table as 'CSV UTF-8'"
        ) from None
    raise DataValidationError(
        f"{filename} is not UTF-8 text: undecodable byte 0x{raw[at]:02x} at byte "
        f"{at} (Latin-1 or Windows-1252?). Re-save the file as 'CSV UTF-8'."
    ) from None


_EOF_QUOTE_RE = re.compile(r"EOF inside string starting at row (\d+)")
#: Delimiters that are not sniffed, but are recognised to explain a one-column result.
_OTHER_DELIMITERS = ("|", ":", "^", "~", " ")
_SEP_NAMES = {",": "comma", ";": "semicolon", "\t": "tab"}


def _read_csv(raw: bytes, filename: str, text_columns: Collection[str] = ()) -> pd.DataFrame:
    # an upper bound of the cells before anything is decoded or parsed (a bomb of short lines is
    # refused here, in one pass over the bytes); quoted line breaks only over-count
    n_lines = max(raw.count(b"\n"), raw.count(b"\r")) + 1
    limits.check_cells(n_lines, csv_field_count(raw[: 1 << 20]), filename)
    raw = _as_utf8(raw, filename)
    if not raw.removeprefix(b"\xef\xbb\xbf").strip():
        raise DataValidationError(f"{filename} is empty: it holds no header and no rows")
    # sniffing and the header never copy the whole text (a character cut at the end is dropped)
    head = raw[: 1 << 20].decode("utf-8-sig", errors="ignore")
    try:
        dialect = csv.Sniffer().sniff(head[:4096], delimiters=",;\t")
        sep = dialect.delimiter
    except csv.Error:
        sep = ","
    try:
        header = next(csv.reader(io.StringIO(head, newline=None), delimiter=sep))  # any line end
    except (csv.Error, StopIteration) as exc:
        raise DataValidationError(f"{filename} has an unreadable header line ({exc})") from None
    check_column_names([h.strip() for h in header], filename)
    limits.check_cells(n_lines, len(header), filename)
    check_load_memory(n_lines, len(header), filename, text_bytes=len(raw))
    check_field_counts(raw, sep, filename)
    try:  # from the bytes: a StringIO of the text would hold 4 bytes per character
        # the header's names as the parser sees them (leading spaces skipped), and as written
        text = {name: str for h in header if h.strip() in text_columns for name in (h, h.lstrip())}
        # index_col=False: never the first column as an index (rows longer than the header are
        # refused above; pandas would otherwise shift every column by one, silently)
        frame = pd.read_csv(io.BytesIO(raw), sep=sep, skipinitialspace=True, encoding="utf-8-sig",
                            dtype=text or None, index_col=False)
    except pd.errors.EmptyDataError:
        raise DataValidationError(f"{filename} has no data") from None
    except pd.errors.ParserError as exc:
        raise DataValidationError(_parser_message(str(exc), filename)) from None
    except (ValueError, OverflowError, MemoryError) as exc:  # pandas' C parser, rare inputs
        raise DataValidationError(
            f"{filename} is not a readable CSV table ({str(exc).splitlines()[0]})"
        ) from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if frame.shape[0] == 0:
        raise DataValidationError(
            f"{filename} has a header but no data rows; add the rows (one per record) below it"
        )
    if frame.shape[1] == 1:
        _check_one_column(frame, head, filename)
    return frame


class RaggedLineError(DataValidationError):
    """A CSV line whose number of fields is not the header's (:func:`check_field_counts`).

    Attributes: ``line`` (1-based line number in the text checked, blank lines counted),
    ``fields`` (its fields), ``expected`` (the header's), ``sep`` (the delimiter)."""

    def __init__(self, filename: str, line: int, fields: int, expected: int, sep: str) -> None:
        self.filename, self.line, self.fields, self.expected, self.sep = filename, line, fields, expected, sep
        super().__init__(self.message())

    def message(self, line: int | None = None, where: str | None = None) -> str:
        """The one-line error, with another line number and file name if given (a block of a
        file read on its own: :mod:`dpcore.dask_engine`)."""
        name = _SEP_NAMES.get(self.sep, repr(self.sep))
        line = self.line if line is None else line
        hint = (f"a missing or extra {name}, or an unquoted {name} inside a value"
                if self.fields > self.expected else f"a missing {name} or value")
        if self.fields == self.expected + 1 and line == 2:
            hint = "the header has no name for the first column, e.g. a saved index?"
        return (f"{where or self.filename}: line {line} has {self.fields} field{'s' * (self.fields != 1)} "
                f"but the header has "
                f"{self.expected} ({name}-separated); every line must have the header's fields ({hint}). "
                "Nothing is guessed: fix the line")


#: Bytes scanned at a time by :func:`check_field_counts` (its working arrays are a few times this).
_SCAN_BYTES = 8 << 20
_WHITESPACE = b" \t\r\x0b\x0c"


def check_field_counts(raw: bytes, sep: str, filename: str) -> None:
    """Refuse CSV text (UTF-8 bytes) in which a line has another number of fields than the header.

    pandas pads a short line with missing values (which ``missing='impute'`` would then fill as
    if they were empty cells) and takes a header one field shorter than every row as a nameless
    index column (every column shifted by one): both silent. Here every record counts its
    delimiters outside quotes (a record ends at a line break outside quotes; a doubled quote
    keeps the parity), vectorised over pieces of :data:`_SCAN_BYTES`; blank lines (only spaces,
    tabs, carriage returns) are skipped as pandas skips them. A mismatch found that way in a file
    holding quotes is confirmed by Python's ``csv`` reader, which treats a quote inside an
    unquoted value as pandas does (a literal character); the line reported is the one where the
    record starts, blank lines counted.

    Raises
    ------
    RaggedLineError
        Naming the first line with another number of fields than the header.
    """
    bad = _first_ragged_record(raw, sep.encode())
    if bad is None:
        return
    offset, fields, expected = bad
    if b'"' in raw:  # a quote inside an unquoted value may have misled the parity: ask csv
        confirmed = _first_ragged_row_csv(raw, sep)
        if confirmed is None:
            return
        line, fields, expected = confirmed
    else:
        line = raw.count(b"\n", 0, offset) + 1
        if b"\n" not in raw:  # old Mac line ends
            line = raw.count(b"\r", 0, offset) + 1
    raise RaggedLineError(filename, line, fields, expected, sep)


def _first_ragged_record(raw: bytes, sep: bytes) -> tuple[int, int, int] | None:
    """``(byte offset, fields, header fields)`` of the first non-blank record whose field count
    differs from the first non-blank record's (the header), or ``None``."""
    view = memoryview(raw)
    quote, delim = ord('"'), sep[0]
    parity = 0  # quotes seen so far, mod 2: odd = inside a quoted value
    seps = 0  # delimiters of the record that crosses into the next piece
    start = 0  # byte offset of the current record
    expected = None
    for pos in range(0, len(raw), _SCAN_BYTES):
        a = np.frombuffer(view[pos:pos + _SCAN_BYTES], np.uint8)
        if parity or quote in a:
            inside = (np.cumsum(a == quote, dtype=np.uint8) + parity) & 1  # mod 256 keeps the parity
            parity = int(inside[-1])
            outside = inside == 0
            is_sep, is_nl, is_cr = (a == delim) & outside, (a == 10) & outside, (a == 13) & outside
        else:
            is_sep, is_nl, is_cr = a == delim, a == 10, a == 13
        if is_cr.any():  # a CR alone ends a line too (CR LF is one line end)
            nxt = np.append(a[1:] == 10, raw[pos + len(a):pos + len(a) + 1] == b"\n")
            is_nl = is_nl | (is_cr & ~nxt)
        ends = np.flatnonzero(is_nl)
        before = np.searchsorted(np.flatnonzero(is_sep), ends)  # delimiters before each line end
        counts = np.diff(before, prepend=0)
        if counts.size:
            counts[0] += seps
        seps = int(np.count_nonzero(is_sep)) - (int(before[-1]) if before.size else -seps)
        starts = np.concatenate([[start], ends[:-1] + pos + 1])
        first = 0
        while expected is None and first < len(ends):  # the header: the first non-blank record
            if bytes(view[starts[first]:pos + ends[first]]).strip(_WHITESPACE):
                expected = int(counts[first]) + 1
            first += 1
        if expected is not None:
            for i in first + np.flatnonzero(counts[first:] != expected - 1):
                if bytes(view[starts[i]:pos + ends[i]]).strip(_WHITESPACE):  # blank lines are skipped
                    return int(starts[i]), int(counts[i]) + 1, expected
        if ends.size:
            start = pos + int(ends[-1]) + 1
    if expected is not None and bytes(view[start:]).strip(_WHITESPACE) and seps + 1 != expected:
        return start, seps + 1, expected
    return None


def _first_ragged_row_csv(raw: bytes, sep: str, strict: bool = True) -> tuple[int, int, int] | None:
    """``(line, fields, header fields)`` of the first ragged record by Python's ``csv`` reader
    (as pandas parses: spaces after a delimiter skipped, a quote inside a value literal); ``None``
    also for a quote never closed, which pandas reports."""
    text = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8-sig", newline="")
    reader = csv.reader(text, delimiter=sep, skipinitialspace=True, strict=strict)
    expected = None
    line = 1
    try:
        for row in reader:
            if any(cell.strip(" \t\r") for cell in row) or len(row) > 1:
                if expected is None:
                    expected = len(row)
                elif len(row) != expected:
                    return line, len(row), expected
            line = reader.line_num + 1
    except csv.Error as exc:  # strict: an unclosed quote, or text after a closing quote
        return None if "end of data" in str(exc) else _first_ragged_row_csv(raw, sep, strict=False)
    return None


def csv_field_count(head: bytes) -> int:
    """The fields of the header of a CSV file whose first bytes are ``head``: its first non-blank
    line, split at the most frequent of comma, semicolon and tab (before the file is parsed)."""
    first = next(iter(head.lstrip().splitlines()), b"")
    return max(first.count(d) for d in (b",", b";", b"\t")) + 1


def _parser_message(msg: str, filename: str) -> str:
    m = _EOF_QUOTE_RE.search(msg)
    if m:
        return (f"{filename}: a quote opened on data row {m.group(1)} is never closed; fix the "
                "quoting (values containing quotes must double them)")
    first = msg.strip().splitlines()[0] if msg.strip() else "parser error"
    return f"{filename} is not a valid CSV table ({first}); check the quotes and delimiters"


def _check_one_column(frame: pd.DataFrame, text: str, filename: str) -> None:
    """A single column whose header and rows share another separator: wrong delimiter."""
    lines = [ln for ln in text.splitlines()[:5] if ln.strip()]
    for delim in _OTHER_DELIMITERS:
        if len(lines) >= 2 and all(ln.strip().count(delim) >= 1 for ln in lines) and len(
            {ln.strip().count(delim) for ln in lines}
        ) == 1:
            shown = "space" if delim == " " else repr(delim)
            raise DataValidationError(
                f"{filename} was read as a single column: its values seem separated by {shown}. "
                "Use a comma, semicolon or tab as the delimiter"
            )


def _read_parquet(raw: bytes, filename: str, cap: int | None = None) -> pd.DataFrame:
    """A Parquet table. Before any column is decoded: the footer's names (unique), types (no
    nested column), row and column counts against the limits, and the decoded size of every column
    (:func:`check_parquet_size`) against ``cap``."""
    if not raw.startswith(b"PAR1"):
        raise DataValidationError(
            f"{filename} is not a Parquet file (Parquet files start with 'PAR1'); if it is a CSV, "
            "give it the .csv extension"
        )
    if not raw.endswith(b"PAR1"):
        raise DataValidationError(
            f"{filename} is a truncated or corrupt Parquet file (no footer); export it again"
        )
    import pyarrow as pa  # deferred: pyarrow is heavy and only Parquet needs it
    import pyarrow.parquet as pq

    cap = _input_cap(None) if cap is None else cap
    try:
        handle = pq.ParquetFile(io.BytesIO(raw))
        meta = handle.metadata
    except Exception as exc:  # pyarrow raises many types
        raise DataValidationError(f"{filename} is not a readable Parquet file: {_first_line(exc)}") from None
    check_parquet_schema(handle, filename)
    limits.check_cells(int(meta.num_rows), int(meta.num_columns), filename)
    decoded = check_parquet_size(io.BytesIO(raw), filename, cap)
    check_load_memory(int(meta.num_rows), int(meta.num_columns), filename, text_bytes=decoded)
    try:
        frame = handle.read().to_pandas()
    except (pa.ArrowException, OSError, ValueError, MemoryError) as exc:
        raise DataValidationError(f"{filename} is not a readable Parquet file: {_first_line(exc)}") from None
    # integer (or other non-string) column names, e.g. from a frame saved without a header
    frame.columns = [str(c) for c in frame.columns]
    check_column_names(list(frame.columns), filename)
    if frame.shape[0] == 0:
        raise DataValidationError(f"{filename} has columns but no rows")
    refuse_complex_columns(frame, filename)
    return frame


#: Physical types of Parquet text columns (strings, binary, fixed-length bytes such as decimals).
_TEXT_TYPES = ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY")
#: Encodings of a text column whose decoded size the footer bounds: plain values and their
#: lengths (the uncompressed pages hold every byte), dictionaries (counted from the dictionary and
#: its indices, :func:`check_parquet_size`), and the encodings of the levels (nulls). Front coding
#: (``DELTA_BYTE_ARRAY``) is not among them: a value may repeat its predecessor's bytes at no cost.
_BOUNDED_TEXT_ENCODINGS = frozenset({"PLAIN", "RLE", "BIT_PACKED", "PLAIN_DICTIONARY", "RLE_DICTIONARY",
                                     "DELTA_LENGTH_BYTE_ARRAY"})
#: Bytes a decoded cell is counted for: a number (float64, int64, a date), or the pointer of a
#: text cell of a pandas object column (its characters are counted besides).
CELL_BYTES = 8


def check_parquet_schema(handle: Any, filename: str) -> None:
    """Footer checks of an open ``pyarrow.parquet.ParquetFile``, before any column is read: no
    column name twice (pyarrow would fail with "Multiple matches for FieldRef"), no nested column
    (lists, structs, maps: one value per cell only), text columns in an encoding whose decoded size
    the footer bounds (:data:`_BOUNDED_TEXT_ENCODINGS`).

    Raises
    ------
    DataValidationError
        Naming the columns.
    """
    import pyarrow as pa

    schema = handle.schema_arrow
    names = [str(n) for n in schema.names]
    seen: set[str] = set()
    twice = sorted({n for n in names if n in seen or seen.add(n)})  # type: ignore[func-returns-value]
    if twice:
        raise DataValidationError(f"{filename} has duplicate column names {twice[:10]}: the column names "
                                  "repeat; rename them so each column is unique")
    nested = [str(f.name) for f in schema if pa.types.is_nested(f.type)]
    if nested:
        raise DataValidationError(f"{filename}: column(s) {nested[:10]} hold lists or records (a nested "
                                  "Parquet type); store one number or text per cell")
    meta = handle.metadata
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        for j in range(group.num_columns):
            col = group.column(j)
            other = set(col.encodings) - _BOUNDED_TEXT_ENCODINGS
            if col.physical_type in _TEXT_TYPES and other:
                raise DataValidationError(
                    f"{filename}: column {col.path_in_schema!r} is stored with the {sorted(other)[0]} "
                    "encoding, whose decoded size the file's footer does not bound; write the file again "
                    "with the default (dictionary or plain) encoding")


def check_parquet_size(source: Any, filename: str, cap: int, row_groups: Any = None) -> int:
    """The decoded size, in bytes, of the row groups ``row_groups`` (default: all) of the Parquet
    file ``source`` (a path or a file object), refused over ``cap`` before any value is decoded.

    Counted from the footer: :data:`CELL_BYTES` per cell, plus the characters of text columns,
    which are the uncompressed size of their pages (plain values) or, for a dictionary-encoded
    column, the length of the dictionary entry of every row: the dictionary and its indices are
    read (no more than their pages' uncompressed size, which is checked first) and the value
    bytes counted without decoding them, so a small file of long repeated strings (a dictionary
    page of one 1 MB value and 4,000 indices: 4 GB decoded) is refused, not decoded. The encoded
    sizes are never used: they depend on how well the values compress.

    Raises
    ------
    ResourceLimitError
        The decoded size is over ``cap`` (the message names the file and the limit).
    DataValidationError
        An unreadable file.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        handle = pq.ParquetFile(source)
        meta = handle.metadata
        groups = list(range(meta.num_row_groups)) if row_groups is None else list(row_groups)
        bound, exact = 0, 0
        dictionaries: set[str] = set()
        for i in groups:
            group = meta.row_group(i)
            for j in range(group.num_columns):
                col = group.column(j)
                bound += CELL_BYTES * group.num_rows
                if col.physical_type in _TEXT_TYPES:
                    bound += col.total_uncompressed_size
                    if col.has_dictionary_page:
                        dictionaries.add(col.path_in_schema)
                    else:
                        exact += col.total_uncompressed_size
                exact += CELL_BYTES * group.num_rows
        if bound > cap and not dictionaries:
            raise limits.ResourceLimitError(_decodes(filename, bound, cap))
        if dictionaries:  # the dictionary columns' bytes, counted from their dictionaries
            if hasattr(source, "seek"):
                source.seek(0)
            coded = pq.ParquetFile(source, read_dictionary=sorted(dictionaries))
            if bound - exact > cap:  # even their dictionaries and indices are too large to read
                raise limits.ResourceLimitError(_decodes(filename, bound, cap))
            table = coded.read_row_groups(groups, columns=sorted(dictionaries), use_threads=False)
            for column in table.columns:
                for chunk in column.chunks:
                    exact += _dictionary_bytes(chunk, pa, pc)
                    if exact > cap:
                        raise limits.ResourceLimitError(_decodes(filename, exact, cap))
    except (pa.ArrowException, OSError) as exc:
        raise DataValidationError(f"{filename} is not a readable Parquet file: {_first_line(exc)}") from None
    if exact > cap:
        raise limits.ResourceLimitError(_decodes(filename, exact, cap))
    return exact


def _dictionary_bytes(chunk: Any, pa: Any, pc: Any) -> int:
    """Bytes of a dictionary-encoded text chunk once decoded: the length of each row's entry."""
    if not pa.types.is_dictionary(chunk.type):  # a chunk pyarrow decoded anyway: count it
        return int(pc.sum(pc.binary_length(chunk)).as_py() or 0) if (
            pa.types.is_binary(chunk.type) or pa.types.is_string(chunk.type)) else 0
    entries = chunk.dictionary
    if pa.types.is_fixed_size_binary(entries.type):
        lengths = np.full(len(entries), entries.type.byte_width, dtype=np.int64)
    elif pa.types.is_binary(entries.type) or pa.types.is_string(entries.type) or \
            pa.types.is_large_binary(entries.type) or pa.types.is_large_string(entries.type):
        lengths = pc.binary_length(entries).to_numpy(zero_copy_only=False).astype(np.int64)
    else:  # decimals and other typed values: a Python object each
        lengths = np.full(len(entries), 64, dtype=np.int64)
    indices = pc.drop_null(chunk.indices).to_numpy(zero_copy_only=False)
    counts = np.bincount(indices, minlength=len(entries)) if len(entries) else np.zeros(0, np.int64)
    return int(counts @ np.nan_to_num(lengths)) + CELL_BYTES * len(chunk)


def _decodes(name: str, size: int, limit: int) -> str:
    return (f"{name} expands to more than {limit / 2**20:g} MB when decoded ({limits.format_bytes(size)} "
            "or more, counted from its footer before anything is decoded: long repeated values compress "
            "to almost nothing); refusing it (a decompression bomb or a table far too large for this tool)")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _npz_headers(raw: bytes, filename: str, cap: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shape and dtype of every ``.npy`` member of an ``.npz`` archive, read from the member
    headers (a few hundred bytes each) and checked against the limits before any array is loaded.

    Archives that cannot be inspected are left to ``np.load`` for its error message.
    """
    out: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    try:
        zf = zipfile.ZipFile(io.BytesIO(raw))
    except (zipfile.BadZipFile, OSError, ValueError):
        return out
    total = 0
    with zf:
        for info in zf.infolist():
            total += info.file_size
            if total > cap:
                raise limits.ResourceLimitError(_expands(filename, cap))
            if not info.filename.endswith(".npy"):
                continue
            try:
                with zf.open(info) as fh:
                    version = np.lib.format.read_magic(fh)
                    reader = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                              else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = reader(fh)
            except Exception:  # a corrupt member: np.load names the problem
                continue
            out[info.filename[:-4]] = (tuple(int(v) for v in shape), dtype)
    declared = 0
    for name, (shape, dtype) in out.items():
        if dtype.kind == "c":
            raise DataValidationError(
                f"{filename}: array {name!r} holds complex numbers ({dtype}); store real numbers only "
                "(the imaginary part would be silently dropped)"
            )
        declared += math.prod(shape) * (dtype.itemsize or 1)
        if declared > cap:
            raise limits.ResourceLimitError(_expands(filename, cap))
    if "X" in out and len(out["X"][0]) >= 1:
        shape = out["X"][0]
        limits.check_cells(shape[0], math.prod(shape[1:]), f"{filename} (array X)")
        check_load_memory(shape[0], math.prod(shape[1:]), f"{filename} (array X)")
    return out


def _read_npz(raw: bytes, filename: str, cap: int | None = None) -> pd.DataFrame:
    if not raw.startswith(b"PK"):
        raise DataValidationError(
            f"{filename} is not a NumPy .npz archive (save one with numpy.savez(path, X=..., y=...))"
        )
    _npz_headers(raw, filename, _input_cap(None) if cap is None else cap)
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except ValueError as exc:
        if "pickle" in str(exc) or "Object arrays" in str(exc):
            raise DataValidationError(
                f"{filename} holds Python objects (object arrays), which are never unpickled for "
                "safety: store numeric arrays only"
            ) from None
        raise DataValidationError(f"{filename} is not a readable .npz file: {exc}") from None
    except Exception as exc:  # zipfile / numpy format errors of many types
        raise DataValidationError(f"{filename} is not a readable .npz file: {_first_line(exc)}") from None
    if "X" not in arrays:
        raise DataValidationError(
            f"{filename} must contain an array named 'X' (and optionally 'y', 'feature_names'); "
            f"found {sorted(arrays)}"
        )
    X = arrays["X"]
    if X.ndim > 2:
        X = X.reshape(X.shape[0], -1)
    if X.ndim != 2:
        raise DataValidationError(f"{filename}: X must be 2-D (rows x features), got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise DataValidationError(f"{filename}: X is empty (shape {X.shape})")
    names = (
        [str(s) for s in np.ravel(arrays["feature_names"])] if "feature_names" in arrays
        else [f"x{j}" for j in range(X.shape[1])]
    )
    if len(names) != X.shape[1]:
        raise DataValidationError(f"{filename}: {len(names)} feature_names for {X.shape[1]} columns")
    check_column_names(names, filename)
    frame = pd.DataFrame(X, columns=names)
    if "y" in arrays:
        y = np.ravel(arrays["y"]) if arrays["y"].ndim == 2 and 1 in arrays["y"].shape else arrays["y"]
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise DataValidationError(
                f"{filename}: y must hold one label per row of X; y has shape {arrays['y'].shape}, "
                f"X has {X.shape[0]} rows"
            )
        if NPZ_LABEL in frame.columns:
            raise DataValidationError(
                f"{filename}: feature_names has a feature named {NPZ_LABEL!r}, the name the label y "
                f"gets: rename that feature (it would collide with y's column {NPZ_LABEL!r})"
            )
        frame[NPZ_LABEL] = y
    return frame


#: Column name the label array ``y`` of an ``.npz`` archive gets.
NPZ_LABEL = "label"


def refuse_complex_columns(frame: pd.DataFrame, filename: str) -> None:
    """Complex columns would lose their imaginary part silently when cast to float."""
    cplx = [str(c) for c, dt in zip(frame.columns, frame.dtypes, strict=True) if dt.kind == "c"]
    if cplx:
        raise DataValidationError(
            f"{filename}: column(s) {cplx[:5]} hold complex numbers; store real numbers only (the "
            "imaginary part would be silently dropped)"
        )


def check_column_names(names: list[str], filename: str) -> None:
    """Every column needs a unique, non-empty name."""
    empty = [j + 1 for j, n in enumerate(names) if not str(n).strip()]
    if empty:
        hint = (" (a trailing delimiter at the end of each line?)" if empty == [len(names)] else
                " (an unnamed index column?)" if empty == [1] else "")
        raise DataValidationError(
            f"{filename}: column(s) {empty[:10]} of the header have no name{hint}; give every "
            "column a name in the first line"
        )
    seen: set[str] = set()
    dups = sorted({n for n in names if n in seen or seen.add(n)})  # type: ignore[func-returns-value]
    if dups:
        raise DataValidationError(
            f"{filename} has duplicate column names {dups[:10]}; rename them so each column is unique"
        )


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
