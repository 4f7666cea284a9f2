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
    ``limit`` decompressed bytes are ever held)."""
    limit = _input_cap(None) if limit is None else limit
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh:
            out = fh.read(limit + 1)
    except (OSError, EOFError, zlib.error) as exc:
        reason = "it is truncated" if isinstance(exc, EOFError) else str(exc).splitlines()[0]
        raise DataValidationError(
            f"{filename} is not a valid gzip file ({reason}); re-compress it or give the plain .csv"
        ) from None
    if len(out) > limit:
        raise limits.ResourceLimitError(_expands(filename, limit))
    return out


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
    """A Parquet table; its footer's row count, column count and uncompressed size are checked
    against the limits before any column is read."""
    if not raw.startswith(b"PAR1"):
        raise DataValidationError(
            f"{filename} is not a Parquet file (Parquet files start with 'PAR1'); if it is a CSV, "
            "give it the .csv extension"
        )
    if not raw.endswith(b"PAR1"):
        raise DataValidationError(
            f"{filename} is a truncated or corrupt Parquet file (no footer); export it again"
        )
    import pyarrow.parquet as pq  # deferred: pyarrow is heavy and only Parquet needs it

    cap = _input_cap(None) if cap is None else cap
    try:
        meta = pq.ParquetFile(io.BytesIO(raw)).metadata
        n_rows, n_cols = int(meta.num_rows), int(meta.num_columns)
        unpacked = sum(int(meta.row_group(i).total_byte_size) for i in range(meta.num_row_groups))
    except Exception as exc:  # pyarrow raises many types
        raise DataValidationError(f"{filename} is not a readable Parquet file: {_first_line(exc)}") from None
    limits.check_cells(n_rows, n_cols, filename)
    if max(unpacked, 8 * n_rows * n_cols) > cap:
        raise limits.ResourceLimitError(_expands(filename, cap))
    try:
        frame = pd.read_parquet(io.BytesIO(raw))
    except Exception as exc:  # pyarrow raises many types
        raise DataValidationError(f"{filename} is not a readable Parquet file: {_first_line(exc)}") from None
    # integer (or other non-string) column names, e.g. from a frame saved without a header
    frame.columns = [str(c) for c in frame.columns]
    check_column_names(list(frame.columns), filename)
    if frame.shape[0] == 0:
        raise DataValidationError(f"{filename} has columns but no rows")
    refuse_complex_columns(frame, filename)
    return frame


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
    cplx = [str(c) for c in frame.columns if frame[c].dtype.kind == "c"]
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
