"""Reading CSV text: the encoding (a BOM, UTF-8 checked, NUL bytes refused), the delimiter, pandas'
parser with its messages made specific, and the count of fields per record checked before parsing
(:func:`check_field_counts`, :class:`RaggedLineError`). :func:`dpcore.io.read_table` is the entry.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
from collections.abc import Collection

import numpy as np
import pandas as pd

from dpcore import limits
from dpcore.exceptions import DataValidationError
from dpcore.io_checks import (
    check_column_names,
    check_load_memory,
)

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
