"""Data layer: load CSV / Parquet / NumPy ``.npz`` or a bundled dataset into a :class:`Dataset`.

Validation errors are specific (which column, which rows, what to do) and raised as
:class:`~dpcore.exceptions.DataValidationError` (a ``ValueError``). Public bounds come from the
bundled metadata or from the user; bounds computed from the data raise a
:class:`~dpcore.exceptions.PrivacyLeakWarning` and set ``bounds_source = "data"`` (per column in
``Dataset.column_bounds_source``). Malformed files (another format saved as ``.csv``, bad encodings,
ragged rows, empty or duplicate column names, truncated archives, decompression bombs, values too
large to calibrate noise) raise ``DataValidationError`` as well, never a raw parser error; the
corpus in ``tests/data/bad`` holds one file per case.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
import numbers
import os
import re
import stat
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpcore import limits
from dpcore.exceptions import DataValidationError, PrivacyLeakWarning
from dpcore.preprocessing import TASKS

__all__ = [
    "Dataset",
    "bundled_datasets",
    "load_bounds_file",
    "load_dataset",
    "read_regular_file",
    "read_table",
    "sample_data_dir",
]

SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq", ".npz", ".txt", ".tsv")

#: An input may expand to at most this many bytes once decompressed (gzip, ``.npz`` members,
#: Parquet); ``None``: :func:`dpcore.limits.max_input_bytes` (``DPCORE_MAX_INPUT_BYTES``, 1 GiB).
MAX_DECOMPRESSED_BYTES: int | None = None
#: Largest magnitude accepted for a feature bound: beyond it the sensitivities (squared widths
#: summed over columns and rows) overflow float64 and the noise calibration breaks down.
MAX_ABS_BOUND = 1e100
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


@dataclass
class Dataset:
    """A table ready for a mechanism.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,) or None
    feature_names : list[str]
    label_name : str or None
    task : {"unsupervised", "classification", "regression"}
    bounds : ndarray of shape (n_features, 2)
        Per-feature ``[lo, hi]``; public unless ``bounds_source == "data"``.
    bounds_source : {"metadata", "user", "data"}
    label_bounds : (lo, hi) or None
        Public range of a regression label.
    classes : ndarray or None
        Class list of a classification label (public if it came from metadata).
    image_shape : tuple or None
        E.g. ``(8, 8)`` when each row is an image.
    name, description : str
    meta : dict
        The bundled metadata (origin of each bound, source, licence), if any.
    n_dropped : int
        Rows dropped for NaN/inf with ``missing="drop"`` (private: exploration only; the
        guarantee then covers the cleaned table, see :func:`load_dataset`).
    label_bounds_source : {"user", "data"} or None
        Where ``label_bounds`` came from.
    column_bounds_source : tuple of str or None
        Source of each feature's bounds (``"metadata"``, ``"user"`` or ``"data"``); ``None``
        means every column has ``bounds_source``. ``bounds_source`` is ``"data"`` as soon as one
        column's bounds came from the data.
    classes_source : {"metadata", "user", "data"} or None
        Where the class list came from (classification). ``"data"`` voids the guarantee.
    missing : {"error", "impute", "drop"}
        How missing values were handled (:func:`load_dataset`).
    data_sides : ndarray of bool, shape (n_features, 2), or None
        Which sides (``lo``, ``hi``) of each feature's bounds were computed from the private data;
        a column's source is ``"data"`` while either side is.
    """

    X: np.ndarray
    y: np.ndarray | None
    feature_names: list[str]
    label_name: str | None
    task: str
    bounds: np.ndarray
    bounds_source: str
    label_bounds: tuple[float, float] | None = None
    classes: np.ndarray | None = None
    image_shape: tuple[int, ...] | None = None
    name: str = "uploaded"
    description: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    n_dropped: int = 0
    label_bounds_source: str | None = None
    column_bounds_source: tuple[str, ...] | None = None
    classes_source: str | None = None
    missing: str = "error"
    data_sides: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.classes is not None:  # before any per-class work (issue 17: 100k-class labels)
            limits.check_n_classes(len(self.classes), self.label_name)

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @cached_property
    def fingerprint(self) -> str:
        """sha256 of the data, bounds and labels (a cache key; never shown on a release)."""
        h = hashlib.sha256()
        h.update(np.ascontiguousarray(self.X).tobytes())
        h.update(np.ascontiguousarray(self.bounds).tobytes())
        if self.y is not None:
            h.update(np.asarray(self.y).astype(str).astype("U").tobytes())
        h.update(repr((self.task, self.label_bounds, self.feature_names)).encode())
        return h.hexdigest()

    def to_frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.X, columns=self.feature_names)
        if self.y is not None:
            frame[self.label_name or "label"] = self.y
        return frame

    @property
    def bounds_sources(self) -> list[str]:
        """The source of each feature's bounds, in column order."""
        if self.column_bounds_source is not None and len(self.column_bounds_source) == self.n_features:
            return list(self.column_bounds_source)
        return [self.bounds_source] * self.n_features

    def with_bounds(self, bounds: Any, source: str = "user", columns: Any = None,
                    sides: np.ndarray | None = None) -> Dataset:
        """A copy with new per-feature bounds (validated) and their source.

        ``columns`` (indices or names): only those columns take ``source``; the others keep the
        source they had (so unedited data-derived bounds stay ``"data"`` and the guarantee stays
        flagged). Default: every column. ``sides``: boolean ``(n_features, 2)``, the sides
        (``lo``, ``hi``) this call declares; default both sides of the chosen columns. A bound is
        public per side: a column declared on one side only keeps its other side's source, and
        stays ``"data"`` while that side came from the private data (issue 12, row 9).

        Raises
        ------
        DataValidationError
            Non-finite bounds, ``lo > hi``, a wrong shape or bounds too large to calibrate noise.
        """
        from dpcore.preprocessing import normalize_bounds

        try:
            arr = normalize_bounds(bounds, self.n_features)
        except ValueError as exc:
            raise DataValidationError(str(exc)) from None
        _check_bound_magnitude(arr, self.feature_names)
        sources = self.bounds_sources
        if columns is None:
            picked = list(range(self.n_features))
        else:
            index = {n: j for j, n in enumerate(self.feature_names)}
            picked = [index[c] if isinstance(c, str) else int(c) for c in columns]
        declared = np.zeros((self.n_features, 2), dtype=bool)
        declared[picked] = True
        if sides is not None:
            declared &= np.asarray(sides, dtype=bool)
        data_sides = self.data_side_mask()
        data_sides[declared] = source == "data"
        for j in picked:
            sources[j] = "data" if data_sides[j].any() else source
        label_flag = ["data"] if self.label_bounds_source == "data" else []
        return replace(self, bounds=arr, bounds_source=_overall_source(sources + label_flag),
                       column_bounds_source=tuple(sources), data_sides=data_sides)

    def data_side_mask(self) -> np.ndarray:
        """Boolean ``(n_features, 2)``: which bound sides (lo, hi) came from the private data."""
        if self.data_sides is not None and self.data_sides.shape == (self.n_features, 2):
            return self.data_sides.copy()
        data_cols = np.array([s == "data" for s in self.bounds_sources], dtype=bool)
        return np.repeat(data_cols[:, None], 2, axis=1)

    def bound_side_sources(self) -> list[tuple[str, str]]:
        """``(source of lo, source of hi)`` per feature, for the release card."""
        sides = self.data_side_mask()
        return [("data" if sides[j, 0] else (src if src != "data" else "user"),
                 "data" if sides[j, 1] else (src if src != "data" else "user"))
                for j, src in enumerate(self.bounds_sources)]

    def data_bound_columns(self) -> list[str]:
        """Names of the features whose bounds were computed from the private data."""
        return [c for c, s in zip(self.feature_names, self.bounds_sources, strict=True) if s == "data"]

    def subset(self, rows: np.ndarray) -> Dataset:
        return replace(self, X=self.X[rows], y=None if self.y is None else self.y[rows])

    def split(self, test_size: float = 0.25, random_state: int | None = 0) -> tuple[Dataset, Dataset]:
        """Train/test split (stratified for classification), for utility evaluation.

        The test part plays the role of real held-out data: mechanisms release from the train part
        only. Raises ``ValueError`` if ``test_size`` is not in (0, 1).
        """
        from sklearn.model_selection import train_test_split

        if not (0 < test_size < 1):
            raise ValueError(f"test_size must lie in (0, 1), got {test_size}")
        idx = np.arange(self.n_samples)
        strat = self.y if self.task == "classification" else None
        try:
            tr, te = train_test_split(idx, test_size=test_size, random_state=random_state,
                                      stratify=strat)
        except ValueError:
            tr, te = train_test_split(idx, test_size=test_size, random_state=random_state)
        return self.subset(np.sort(tr)), self.subset(np.sort(te))


# ---------------------------------------------------------------------------------------- reading
def read_table(
    source: str | Path | bytes | io.IOBase, filename: str | None = None, *,
    max_bytes: int | None = None,
) -> pd.DataFrame:
    """Read a CSV, Parquet or ``.npz`` file (path or bytes) into a DataFrame.

    ``.npz`` files hold ``X`` (2-D, or 3-D images which are flattened), optional ``y`` and
    optional ``feature_names``; the label column is then called ``label``. CSV text may be UTF-8
    (with or without a byte-order mark) or UTF-16 with a byte-order mark; the delimiter is a
    comma, semicolon or tab.

    Parameters
    ----------
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
    return _read_csv(raw, display)


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
            f"{limits.format_bytes(limit)} (DPCORE_MAX_INPUT_BYTES): use a smaller file")


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


def _decode(raw: bytes, filename: str) -> str:
    """UTF-8 (BOM optional) or UTF-16 with a BOM; a clear error for anything else."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError:
            raise DataValidationError(
                f"{filename} starts like UTF-16 text but cannot be decoded as such; re-save it as "
                "'CSV UTF-8'"
            ) from None
    sample = raw[:8192]
    if b"\x00" in sample:
        raise DataValidationError(
            f"{filename} contains NUL bytes: it is binary data, not a CSV text file. Export the "
            "table as 'CSV UTF-8'"
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        text = sample.decode("utf-8", errors="replace")
        junk = sum(ch == "\ufffd" or (ord(ch) < 32 and ch not in "\r\n\t") for ch in text)
        if len(text) >= 32 and junk > 0.3 * len(text):
            raise DataValidationError(
                f"{filename} looks like binary data, not UTF-8 CSV text (undecodable byte "
                f"0x{raw[exc.start]:02x} at byte {exc.start}); export the table as 'CSV UTF-8'"
            ) from None
        raise DataValidationError(
            f"{filename} is not UTF-8 text: undecodable byte 0x{raw[exc.start]:02x} at byte "
            f"{exc.start} (Latin-1 or Windows-1252?). Re-save the file as 'CSV UTF-8'."
        ) from None


_FIELDS_RE = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")
_EOF_QUOTE_RE = re.compile(r"EOF inside string starting at row (\d+)")
#: Delimiters that are not sniffed, but are recognised to explain a one-column result.
_OTHER_DELIMITERS = ("|", ":", "^", "~", " ")


def _read_csv(raw: bytes, filename: str) -> pd.DataFrame:
    # an upper bound of the cells before anything is decoded or parsed (a bomb of short lines is
    # refused here, in one pass over the bytes); quoted line breaks only over-count
    n_lines = max(raw.count(b"\n"), raw.count(b"\r")) + 1
    first = next(iter(raw[: 1 << 20].lstrip().splitlines()), b"")
    limits.check_cells(n_lines, max(first.count(d) for d in (b",", b";", b"\t")) + 1, filename)
    text = _decode(raw, filename)
    if not text or text.isspace():
        raise DataValidationError(f"{filename} is empty: it holds no header and no rows")
    head = text[: 1 << 20]  # sniffing and the header never copy the whole text
    del text
    try:
        dialect = csv.Sniffer().sniff(head[:4096], delimiters=",;\t")
        sep = dialect.delimiter
    except csv.Error:
        sep = ","
    try:
        header = next(csv.reader(io.StringIO(head), delimiter=sep))
    except (csv.Error, StopIteration) as exc:
        raise DataValidationError(f"{filename} has an unreadable header line ({exc})") from None
    _check_column_names([h.strip() for h in header], filename)
    limits.check_cells(n_lines, len(header), filename)
    encoding = "utf-16" if raw.startswith((b"\xff\xfe", b"\xfe\xff")) else "utf-8-sig"
    try:  # from the bytes: a StringIO of the text would hold 4 bytes per character
        frame = pd.read_csv(io.BytesIO(raw), sep=sep, skipinitialspace=True, encoding=encoding)
    except pd.errors.EmptyDataError:
        raise DataValidationError(f"{filename} has no data") from None
    except pd.errors.ParserError as exc:
        raise DataValidationError(_parser_message(str(exc), filename, sep)) from None
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


def _parser_message(msg: str, filename: str, sep: str) -> str:
    name = {",": "comma", ";": "semicolon", "\t": "tab"}[sep]
    m = _FIELDS_RE.search(msg)
    if m:
        want, line, saw = m.groups()
        return (f"{filename}: line {line} has {saw} fields but the header has {want} ({name}-"
                f"separated); fix the ragged rows (a missing or extra {name}, or an unquoted "
                f"{name} inside a value)")
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
    _check_column_names(list(frame.columns), filename)
    if frame.shape[0] == 0:
        raise DataValidationError(f"{filename} has columns but no rows")
    _refuse_complex(frame, filename)
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
    _check_column_names(names, filename)
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


def _refuse_complex(frame: pd.DataFrame, filename: str) -> None:
    """Complex columns would lose their imaginary part silently when cast to float."""
    cplx = [str(c) for c in frame.columns if frame[c].dtype.kind == "c"]
    if cplx:
        raise DataValidationError(
            f"{filename}: column(s) {cplx[:5]} hold complex numbers; store real numbers only (the "
            "imaginary part would be silently dropped)"
        )


def _check_column_names(names: list[str], filename: str) -> None:
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


def _overall_source(sources: list[str]) -> str:
    """The dataset-level bounds source: ``data`` if any column's bounds came from the data."""
    if "data" in sources:
        return "data"
    return "user" if "user" in sources else "metadata"


def _check_bound_magnitude(bounds: np.ndarray, names: list[str]) -> None:
    """Refuse bounds so large that the noise calibration would overflow."""
    big = np.flatnonzero(np.abs(bounds).max(axis=1) > MAX_ABS_BOUND) if bounds.size else []
    if len(big):
        j = int(big[0])
        raise DataValidationError(
            f"column {names[j]!r} has bounds of magnitude {np.abs(bounds[j]).max():.3g}, above "
            f"{MAX_ABS_BOUND:.0e}: the noise calibration would overflow. Rescale the column (change "
            "its units) or declare narrower public bounds"
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


def parse_bounds(text: str, filename: str = "bounds.csv") -> dict[str, tuple[float, float]]:
    """The text of a bounds file (formats of :func:`load_bounds_file`; JSON when ``filename``
    ends in ``.json``, else CSV rows ``column,lo,hi`` with an optional header) as
    ``{column: (lo, hi)}``, strictly parsed (:func:`bound_pair`). Used for files uploaded to the
    app too, which are never written to disk.

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
        return {str(k): bound_pair(k, v, f"bounds file {filename}") for k, v in data.items()}
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


def bound_pair(
    column: Any, value: Any, origin: str = "bounds", *, strict: bool = True,
) -> tuple[float, float]:
    """``value`` as public bounds ``(lo, hi)`` of ``column``: exactly two real, finite numbers
    (bool, strings and complex refused) with ``lo < hi`` (``lo <= hi`` if not ``strict``).

    Raises
    ------
    DataValidationError
        Naming the column and what is wrong.
    """
    where = f"{origin}: bounds for column {column!r}"
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__"):
        raise DataValidationError(f"{where} must be a pair [lo, hi] of numbers, got {value!r:.60}")
    items = list(value)
    if len(items) != 2:
        raise DataValidationError(
            f"{where} must be exactly two numbers [lo, hi], got {len(items)} value(s): {items!r:.60}"
        )
    for v in items:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            what = ("a boolean" if isinstance(v, (bool, np.bool_)) else
                    "a complex number" if isinstance(v, numbers.Complex) else
                    f"a {type(v).__name__}")
            raise DataValidationError(f"{where} must be numbers, got {what} ({v!r:.40})")
    lo, hi = float(items[0]), float(items[1])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise DataValidationError(f"{where} must be finite numbers, got [{lo:g}, {hi:g}]")
    if lo > hi or (strict and lo == hi):
        raise DataValidationError(
            f"{where} must have lo {'<' if strict else '<='} hi, got [{lo:g}, {hi:g}]"
        )
    return lo, hi


def _resolve_bounds(
    frame: pd.DataFrame, bounds: Any, meta_bounds: dict[str, Any] | None,
    onehot: set[str] | None = None,
) -> tuple[np.ndarray, str, tuple[str, ...]]:
    """Per-column bounds: the user's, else the metadata's, else [0, 1] for one-hot columns
    (public by construction), else from the data (PrivacyLeakWarning, source "data").

    Returns the bounds, the overall source and the source of each column.
    """
    cols = list(frame.columns)
    d = len(cols)
    if bounds is not None and not isinstance(bounds, dict):
        from dpcore.preprocessing import normalize_bounds

        try:
            arr = normalize_bounds(bounds, d)
        except ValueError as exc:
            raise DataValidationError(str(exc)) from None
        _check_bound_magnitude(arr, cols)
        return arr, "user", ("user",) * d
    user = dict(bounds or {})
    unknown = sorted(set(user) - set(cols))
    if unknown:
        raise DataValidationError(
            f"bounds given for unknown column(s) {unknown[:10]}; the columns are {cols[:10]}"
            f"{' ...' if d > 10 else ''}"
        )
    given: dict[str, Any] = {c: (0.0, 1.0) for c in (onehot or set())}
    given.update(meta_bounds or {})
    given.update(user)
    source = "user" if user else "metadata"
    out = np.empty((d, 2))
    per_col = [source] * d
    missing = []
    for j, c in enumerate(cols):
        if c in given:
            out[j] = bound_pair(c, given[c], "bounds", strict=c in user)
            per_col[j] = "user" if c in user else ("metadata" if c in (meta_bounds or {}) else source)
        else:
            missing.append(j)
    if missing:
        names = [cols[j] for j in missing]
        warnings.warn(
            f"no public bounds for {len(names)} column(s) ({', '.join(names[:5])}"
            f"{', ...' if len(names) > 5 else ''}): they were computed from the private data. "
            "The differential-privacy guarantee does NOT hold; give public bounds instead.",
            PrivacyLeakWarning,
            stacklevel=3,
        )
        vals = frame.iloc[:, missing].to_numpy(dtype=float)
        with warnings.catch_warnings():  # an all-NaN column (missing="impute") gives NaN bounds
            warnings.simplefilter("ignore", RuntimeWarning)
            out[missing, 0] = np.nanmin(vals, axis=0)
            out[missing, 1] = np.nanmax(vals, axis=0)
        for j in missing:
            per_col[j] = "data"
        source = "data"
    _check_bound_magnitude(out, cols)
    return out, source, tuple(per_col)


# ---------------------------------------------------------------------------------------- loading
def load_dataset(
    source: str | Path | bytes | pd.DataFrame,
    *,
    filename: str | None = None,
    label: str | None = None,
    task: str | None = None,
    bounds: Any = None,
    label_bounds: tuple[float, float] | None = None,
    categories: dict[str, list[Any]] | None = None,
    classes: Any = None,
    missing: str = "error",
    drop_nonfinite: bool = False,
) -> Dataset:
    """Load a bundled dataset (by name), a file (path or bytes + ``filename``) or a DataFrame.

    Everything that shapes a release besides the noisy values (the task, the class list, ``n``,
    the bounds) must be a public fact: it comes from the bundled metadata or from the caller,
    never silently from the private rows (issue 12). Where the caller leaves a fact to the data
    (bounds, class list), a :class:`~dpcore.exceptions.PrivacyLeakWarning` is raised and the
    dataset records the source ``"data"``, which makes every release's card say ``holds: false``.

    Parameters
    ----------
    source : str, Path, bytes or DataFrame
        A bundled name (``digits``, ``breast-cancer``, ``diabetes``, ``mnist-10k``, ``adult``),
        a path to ``.csv``/``.parquet``/``.npz``, raw bytes (give ``filename`` for the format),
        or a DataFrame.
    label : str, optional
        Label column (bundled datasets default to their own; ``""`` means none).
    task : {"unsupervised", "classification", "regression"}, optional
        Required with a label, except for a bundled dataset's own label (its metadata's task).
        It is never guessed from the labels: the guess would depend on the private values (a
        51st distinct value would flip it), so one record could change the release's format.
    bounds : dict {column: (lo, hi)}, (lo, hi) or array (n_features, 2), optional
        Public feature bounds. Columns without one get data bounds plus a PrivacyLeakWarning.
    label_bounds : (lo, hi), optional
        Public bounds of a regression label.
    categories : dict {column: list of categories}, optional
        Public category lists: those non-numeric columns are one-hot encoded (``col=value``).
    classes : sequence, optional
        Public class list of a classification label (default: the bundled metadata's). Without
        one the list is read from the data with a PrivacyLeakWarning (``classes_source="data"``).
    missing : {"error", "impute", "drop"}, default "error"
        Rows with NaN/inf features: ``"error"`` refuses them; ``"impute"`` replaces each missing
        or infinite feature value by the midpoint of the column's public bounds, so ``n`` stays
        the public row count (missing labels are still an error); ``"drop"`` removes those rows:
        ``n`` then depends on the data and the guarantee covers the *cleaned* table only (the
        card says so).
    drop_nonfinite : bool
        Old spelling of ``missing="drop"``.

    Raises
    ------
    DataValidationError
        Missing label column, no task for a label, non-numeric columns without categories,
        NaN/inf under ``missing="error"`` (with counts per column), a missing label, fewer than
        two rows, a classification label with one class or with values outside ``classes``,
        bad bounds.
    """
    if drop_nonfinite:
        missing = "drop"
    if missing not in ("error", "impute", "drop"):
        raise DataValidationError(f"missing must be 'error', 'impute' or 'drop', got {missing!r}")
    frame, meta, name = _read_source(source, filename)
    label = _resolve_label(frame, label, meta)
    task = _resolve_task(task, label, meta)
    y_series = frame.pop(label) if label is not None else None
    categories = dict(categories or {})
    frame = _encode_categoricals(frame, categories)
    frame, y_series, n_dropped = _handle_missing(frame, y_series, label, missing)
    values = frame.to_numpy(dtype=float)
    if values.shape[0] < 2:
        raise DataValidationError(
            f"the table has {values.shape[0]} usable row(s); differentially private release needs "
            "at least 2 (and, to be useful, many more)"
        )
    if values.shape[1] == 0:
        raise DataValidationError("the table has no feature columns besides the label")

    y = None
    cls, cls_source = None, None
    lb = None
    lb_from_data = False
    if y_series is not None:
        y = y_series.to_numpy()
        if task == "classification":
            meta_classes = meta.get("classes") if label == meta.get("label") else None
            y, cls, cls_source = _resolve_classes(y, label, classes, meta_classes)
        elif task == "regression":
            try:
                y = y.astype(float)
            except (TypeError, ValueError):
                raise DataValidationError(
                    f"label {label!r} is not numeric; a regression label must be a number"
                ) from None
            lb = label_bounds or (tuple(meta["label_bounds"]) if meta.get("label_bounds") else None)
            if lb is None:
                warnings.warn(
                    f"no public bounds for the regression label {label!r}: computed from the data "
                    "(the privacy guarantee does NOT hold).", PrivacyLeakWarning, stacklevel=2,
                )
                lb = (float(np.min(y)), float(np.max(y)))
                lb_from_data = True
            else:
                lb = (float(lb[0]), float(lb[1]))
                if not (np.isfinite(lb[0]) and np.isfinite(lb[1])) or lb[0] > lb[1]:
                    raise DataValidationError(
                        f"label bounds must be finite with lo <= hi, got [{lb[0]:g}, {lb[1]:g}]"
                    )
            _check_bound_magnitude(np.asarray([lb], dtype=float), [f"{label} (label)"])
    if task != "unsupervised" and y is None:
        raise DataValidationError(f"task {task!r} needs a label column")
    meta_bounds = meta.get("bounds") if bounds is None or isinstance(bounds, dict) else None
    onehot = {c for c in frame.columns if "=" in c and c.split("=", 1)[0] in categories}
    b, bsource, per_col = _resolve_bounds(frame, bounds, meta_bounds, onehot)
    if missing == "impute":
        values = _impute_midpoints(values, b)
    if task == "regression" and lb_from_data:
        bsource = "data"
    image_shape = tuple(meta["image_shape"]) if meta.get("image_shape") else None
    return Dataset(
        X=values, y=y, feature_names=list(frame.columns), label_name=label, task=task,
        bounds=b, bounds_source=bsource, label_bounds=lb, classes=cls,
        image_shape=image_shape, name=name, description=meta.get("description", ""), meta=meta,
        n_dropped=n_dropped,
        label_bounds_source=("data" if lb_from_data else "user") if lb is not None else None,
        column_bounds_source=per_col, classes_source=cls_source, missing=missing,
    )


def _read_source(
    source: str | Path | bytes | pd.DataFrame, filename: str | None
) -> tuple[pd.DataFrame, dict[str, Any], str]:
    """Stage 1 of :func:`load_dataset`: the raw table, the bundled metadata (or ``{}``) and a name."""
    meta: dict[str, Any] = {}
    name = "uploaded"
    if isinstance(source, pd.DataFrame):
        frame = source.copy()
        frame.columns = [str(c) for c in frame.columns]
        _check_column_names(list(frame.columns), "the table")
    elif isinstance(source, str) and source in bundled_datasets():
        meta = bundled_datasets()[source]
        name = source
        frame = read_table(sample_data_dir() / meta["file"])
    else:
        if isinstance(source, (str, Path)):
            path = Path(source)
            if not path.exists() and not str(source).lower().endswith(SUFFIXES):
                raise DataValidationError(
                    f"{source!r} is neither a file nor a bundled dataset; bundled: "
                    f"{sorted(bundled_datasets())}"
                )
            name = path.stem
        frame = read_table(source, filename)
        name = Path(filename).stem if filename else name
    return frame, meta, name


def _resolve_label(frame: pd.DataFrame, label: str | None, meta: dict[str, Any]) -> str | None:
    if label is None:
        label = meta.get("label") or None
    if label == "":
        label = None
    if label is not None and label not in frame.columns:
        raise DataValidationError(
            f"label column {label!r} not found; columns are {list(frame.columns)[:20]}"
        )
    return label


def _resolve_task(task: str | None, label: str | None, meta: dict[str, Any]) -> str:
    """The task: given, the bundled metadata's for its own label, or unsupervised without a label.

    Never guessed from the label values (issue 12, row 4)."""
    if task is None:
        if label is None:
            task = "unsupervised"
        elif label == meta.get("label") and meta.get("task"):
            task = meta["task"]
        else:
            raise DataValidationError(
                f"choose the task for label {label!r}: 'classification' or 'regression' (CLI "
                "--task, app: Task). It is a public choice; guessing it from the private labels "
                "would let one record change the release's format"
            )
    if task not in TASKS:
        raise DataValidationError(f"task must be unsupervised, classification or regression: {task!r}")
    return task


def _handle_missing(
    frame: pd.DataFrame, y_series: pd.Series | None, label: str | None, missing: str
) -> tuple[pd.DataFrame, pd.Series | None, int]:
    """Stage 3 of :func:`load_dataset`: refuse, keep (for imputation) or drop rows with NaN/inf.

    With ``"impute"`` non-finite feature values become NaN here and are filled once the public
    bounds are known (:func:`_impute_midpoints`)."""
    values = frame.to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    bad_rows = bad.any(axis=1)
    y_bad = np.zeros(len(frame), dtype=bool)
    if y_series is not None:
        y_bad = y_series.isna().to_numpy().copy()
        if y_series.dtype.kind in "fc":
            y_bad |= ~np.isfinite(y_series.to_numpy(dtype=float))
    if not (bad_rows.any() or y_bad.any()):
        return frame, y_series, 0
    per_col = {c: int(k) for c, k in zip(frame.columns, bad.sum(axis=0), strict=True) if k}
    if y_bad.any():
        per_col[f"{label} (label)"] = int(y_bad.sum())
    all_bad = bad_rows | y_bad
    if missing == "error" or (missing == "impute" and y_bad.any()):
        rows = np.flatnonzero(y_bad if missing == "impute" else all_bad)
        what = ("labels are missing (labels are never imputed)" if missing == "impute"
                else "rows contain missing or infinite values")
        raise DataValidationError(
            f"{rows.size} {what} (by column: {dict(list(per_col.items())[:8])}; first rows: "
            f"{rows[:5].tolist()}). Clean them, impute features with a public value "
            "(missing='impute' / --missing impute: the midpoint of each column's public bounds, "
            "which keeps n public), or drop those rows (missing='drop' / --missing drop: the "
            "guarantee then covers the cleaned table)."
        )
    if missing == "impute":
        frame = frame.mask(~np.isfinite(values))
        return frame, y_series, 0
    keep = ~all_bad
    frame = frame.loc[keep].reset_index(drop=True)
    y_series = y_series.loc[keep].reset_index(drop=True) if y_series is not None else None
    return frame, y_series, int(all_bad.sum())


def _impute_midpoints(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """NaN entries replaced by the midpoint of their column's public bounds (a public value)."""
    nan = np.isnan(values)
    if nan.any():
        mid = (bounds[:, 0] + bounds[:, 1]) / 2
        values = np.where(nan, mid[None, :], values)
    return values


def _resolve_classes(
    y: np.ndarray, label: str | None, classes: Any, meta_classes: Any
) -> tuple[np.ndarray, np.ndarray, str]:
    """The public class list of a classification label and its source.

    Given (``"user"``) or from the bundled metadata (``"metadata"``); otherwise read from the
    data with a :class:`PrivacyLeakWarning` (``"data"``: the guarantee does not hold, since one
    record with a rare class would put that class into the release). Labels are converted to the
    list's type where the list is numeric (a CSV label read as text stays text)."""
    if classes is not None or meta_classes is not None:
        source = "user" if classes is not None else "metadata"
        cls = np.asarray(list(classes if classes is not None else meta_classes))
        if cls.size != np.unique(cls).size:
            raise DataValidationError(f"the class list of {label!r} repeats a class: {cls.tolist()[:10]}")
        if cls.size < 2:
            raise DataValidationError(f"the class list of {label!r} needs at least two classes")
        y, cls = _align_class_types(y, cls, label)
        unknown = ~np.isin(y, cls)
        if unknown.any():
            raise DataValidationError(
                f"{int(unknown.sum())} values of label {label!r} are not in its public class list "
                f"{cls.tolist()[:10]} (e.g. {y[unknown][:3].tolist()})"
            )
    else:
        warnings.warn(
            f"no public class list for label {label!r}: it was read from the private data. One "
            "record with a rare class would change the release, so the differential-privacy "
            "guarantee does NOT hold; give the class list (classes=[...], CLI --classes).",
            PrivacyLeakWarning, stacklevel=3,
        )
        source = "data"
        cls = np.unique(y)
    if np.unique(y).size < 2:
        only = y[0].item() if isinstance(y[0], np.generic) else y[0]
        raise DataValidationError(
            f"label {label!r} has a single class ({only!r}); classification needs at "
            "least two. Choose another label or task 'unsupervised'."
        )
    return y, cls, source


def _align_class_types(y: np.ndarray, cls: np.ndarray, label: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Make labels and class list comparable: numeric lists stay numeric, else both as text."""
    if cls.dtype.kind in "iuf" and y.dtype.kind in "iufb":
        return y, cls
    try:
        if y.dtype.kind in "iuf" and cls.dtype.kind in "OUS":
            num = cls.astype(float)
            if np.all(np.mod(num, 1) == 0) and y.dtype.kind in "iu":
                return y, num.astype(y.dtype)
            return y, num
    except (TypeError, ValueError):
        pass
    return y.astype(str), cls.astype(str)


def _encode_categoricals(frame: pd.DataFrame, categories: dict[str, list[Any]]) -> pd.DataFrame:
    unknown = sorted(set(categories) - set(frame.columns))
    if unknown:
        raise DataValidationError(f"categories given for unknown column(s) {unknown}")
    _refuse_complex(frame, "the table")
    # booleans count as numeric in pandas; everything else non-numeric needs a public category list
    nonnumeric = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    missing = [c for c in nonnumeric if c not in categories]
    for c in missing:
        _explain_non_numeric_type(frame[c], c)
        _explain_text_in_numeric(frame[c], c)
    if missing:
        raise DataValidationError(
            f"column(s) {missing[:10]} are not numeric. Give a public category list for each "
            "(categories={column: [...]}, or the app's category editor) to one-hot encode them, "
            "or drop them. Category lists taken from the data itself would leak which values occur."
        )
    if not categories:
        return frame.astype(float)
    parts = []
    for c in frame.columns:
        if c in categories:
            cats = list(categories[c])
            col = frame[c]
            present = col.dropna()
            outside = sorted(set(present.astype(str)) - {str(v) for v in cats})
            if outside:
                raise DataValidationError(
                    f"column {c!r} has values outside its public category list: {outside[:5]}"
                )
            onehot = pd.DataFrame(
                {f"{c}={v}": (col.astype(str) == str(v)).astype(float) for v in cats},
                index=frame.index,
            )
            onehot[col.isna()] = np.nan
            parts.append(onehot)
        else:
            parts.append(frame[[c]].astype(float))
    out = pd.concat(parts, axis=1) if parts else frame
    _check_onehot_collisions(list(out.columns), list(frame.columns), categories)
    return out


def _check_onehot_collisions(names: list[str], original: list[str], categories: dict[str, Any]) -> None:
    """A one-hot name ``col=value`` equal to another column (or to another one-hot name) would
    give two columns of the same name, with the wrong bounds for one of them."""
    seen: dict[str, str] = {}
    for c in original:
        made = [(f"{c}={v}", f"the one-hot column {f'{c}={v}'!r} (from {c!r})") for v in categories[c]] \
            if c in categories else [(c, f"the column {c!r}")]
        for name, desc in made:
            if name in seen:
                raise DataValidationError(
                    f"{seen[name]} and {desc} have the same name {name!r}: rename one of them"
                    + (" (or remove the duplicated category)" if seen[name] == desc else "")
                )
            seen[name] = desc
    if len(set(names)) != len(names):  # pragma: no cover - the loop above finds every duplicate
        raise DataValidationError("one-hot encoding produced duplicate column names")


def _explain_non_numeric_type(col: pd.Series, name: str) -> None:
    """Dates, times, durations, decimals and other typed values named as such (not as 'text')."""
    kind = col.dtype.kind
    what = None
    if kind == "M" or isinstance(col.dtype, pd.DatetimeTZDtype):
        what = f"dates/times ({col.dtype})"
    elif kind == "m":
        what = f"durations ({col.dtype})"
    elif isinstance(col.dtype, pd.PeriodDtype):
        what = f"periods ({col.dtype})"
    elif kind == "O":
        present = col.dropna()
        types = {type(v) for v in present.iloc[:1000]}
        if types and not types <= {str}:
            import datetime
            import decimal

            names = sorted({t.__name__ for t in types if t is not str})
            if types & {decimal.Decimal}:
                what = "decimal.Decimal values"
            elif any(issubclass(t, (datetime.date, datetime.time, datetime.timedelta)) for t in types):
                what = f"dates/times ({', '.join(names)})"
            elif any(issubclass(t, complex) for t in types):
                what = "complex numbers (store real numbers only)"
            elif any(issubclass(t, (bytes, bytearray)) for t in types):
                what = "binary values (bytes)"
            else:
                what = f"values of type {', '.join(names)}"
    if what is not None:
        raise DataValidationError(
            f"column {name!r} holds {what}, not numbers: convert it to floats (a date to a "
            "timestamp, a duration to seconds) or drop it"
        )


def _explain_text_in_numeric(col: pd.Series, name: str) -> None:
    """A mostly numeric column with a few text entries: name them (rows and values)."""
    present = col.dropna()
    if present.empty:
        return
    text = present.astype(str).str.strip()
    if text.str.fullmatch(r"[-+]?\d*,\d+").mean() > 0.5:
        raise DataValidationError(
            f"column {name!r} uses decimal commas (e.g. {text.iloc[0][:40]!r}); write numbers with a "
            "decimal point (1234.5): export the CSV with '.' as the decimal separator"
        )
    as_num = pd.to_numeric(present, errors="coerce")
    bad = as_num.isna()
    if bad.all() or bad.sum() > 0.5 * len(present):
        return
    rows = present.index[bad.to_numpy()]
    examples = ", ".join(f"{str(present[r])[:40]!r} (row {r})" for r in rows[:3])
    comma = any("," in str(present[r]) for r in rows[:20])
    hint = " (decimal commas or thousands separators? write 1234.5)" if comma else ""
    raise DataValidationError(
        f"column {name!r} is numeric except for {int(bad.sum())} value(s) that are not numbers: "
        f"{examples}{hint}. Fix or remove those values, or drop the rows"
    )
