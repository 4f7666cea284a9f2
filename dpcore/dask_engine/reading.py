"""Reading a table's partitions: the pieces its files are cut into (a CSV file or a block of its
lines, a run of Parquet row groups), each read in batches of about :data:`BATCH_BYTES`, checked by the
in-memory loader (:func:`dpcore.data.load_dataset`), clipped to the public bounds and passed through
row maps inside one task per partition (:class:`_Source`, :func:`_source_array`): no partition-sized
intermediate is materialised, and the kernels of :mod:`dpcore.dask_engine.kernels` join the chain.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcore.exceptions import DataValidationError, PrivacyLeakWarning

if TYPE_CHECKING:
    from dpcore.data import Dataset


#: target bytes of one partition (decoded float64 rows), the default of ``blocksize``
DEFAULT_BLOCKSIZE = 128 << 20
#: decoded bytes of the row batches a partition task checks and reduces at a time: under glibc's
#: largest mmap threshold (32 MiB), so the allocator reuses their buffers (freshly mapped pages cost
#: more than the arithmetic), and large enough that each batch's fixed costs (the loader's checks,
#: a kernel's per-batch setup) stay small: measured with ``benchmarks/bench_dask.py`` at 1.6 x 10^7
#: rows (row groups of 2.5 x 10^5 rows: batches of 5 x 10^4 rows at 8 MiB, 1.25 x 10^5 here),
#: RON-Gauss's statistics took 14.0 CPU s at 8 MiB and 11.7 at this size, PCA-Gauss's 5.9 and 5.4
BATCH_BYTES = 24 << 20
PARQUET_SUFFIXES = (".parquet", ".pq")
CSV_SUFFIXES = (".csv", ".tsv", ".txt")

# Bounds or classes left to the data are warned about once, for the whole table (prepare_input);
# the per-partition loads would repeat it for each partition. A filter, not catch_warnings: the
# partitions are loaded on worker threads, and catch_warnings is not thread-safe.
warnings.filterwarnings("ignore", category=PrivacyLeakWarning, module=r"dpcore\.dask_engine\.reading$")


def public_part_rows(blocksize: int, width: int) -> int:
    """Rows per part file of a release: ``blocksize`` bytes of float64 rows of ``width`` columns.

    The parts' sizes are part of what is published, so they come from public facts only (the
    block size, the number of columns), never from the input's partitions, whose row counts
    depend on the rows (a CSV block holds the lines that fit in its bytes: one longer value in
    one row can move the rows after it to the next block). At least 100 rows per part."""
    return max(100, int(blocksize) // (8 * max(1, int(width))))


def is_lazy(x: Any) -> bool:
    """True for a Dask collection (array, DataFrame, scalar): the hooks' test, import-free."""
    return type(x).__module__.split(".", 1)[0] == "dask"


# ------------------------------------------------------------------------------------ pieces
@dataclass(frozen=True)
class _Piece:
    """One partition: a CSV file, whole or a block of its bytes (``byte_range = (start, length)``:
    the lines after the first line feed at or after ``start``, up to the first line feed at or
    after ``start + length``, :func:`_csv_block`), or a run of row groups of a Parquet file with
    the row count its footer states (``rows``, ``None`` for CSV)."""

    path: str
    row_groups: tuple[int, ...] | None = None
    rows: int | None = None
    byte_range: tuple[int, int] | None = None

    def label(self) -> str:
        if self.byte_range is not None:
            start, length = self.byte_range
            return f"{self.path} (bytes {start:,}-{start + length:,})"
        if self.row_groups is None:
            return self.path
        return f"{self.path} (row groups {self.row_groups[0]}-{self.row_groups[-1]})"


@dataclass(frozen=True)
class _Options:
    """What every partition is loaded with (the arguments of :func:`dpcore.data.load_dataset`)."""

    columns: tuple[str, ...]
    label: str | None
    task: str | None
    bounds: Any
    label_bounds: tuple[float, float] | None
    classes: Any
    categories: dict[str, list[Any]] | None
    missing: str

    @property
    def text_columns(self) -> tuple[str, ...]:
        """CSV columns read as text (:func:`_raw_frame`), as :func:`dpcore.data.load_dataset` reads
        them: those with a public category list, and a classification label unless its public class
        list is numeric."""
        from dpcore.validation import check_value_list

        text = tuple(self.categories or ())
        if self.label and self.task == "classification" and (
                self.classes is None or check_value_list(self.classes, "the class list")[1] == "text"):
            text += (self.label,)
        return text

def _kind(path: str) -> str:
    low = path.lower()
    if low.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if low.endswith(CSV_SUFFIXES):
        return "csv"
    raise DataValidationError(f"{path}: not a Parquet (.parquet) or CSV (.csv) file")

def _raw_frame(piece: _Piece | Any, numbered: bool = False, text_columns: Any = ()) -> tuple[Any, str]:
    """The partition's raw DataFrame and where it came from (for messages). ``numbered``: a CSV
    block's index gives its rows' numbers in the file (:func:`_csv_block`: a read of the file up to
    the block, so only for error messages). ``text_columns``: CSV columns read as text (the
    columns with a public category list: :func:`dpcore.io.read_table`), so that a block's values
    are read as the whole file's are."""
    import pandas as pd

    from dpcore.data import read_table

    if not isinstance(piece, _Piece):
        frame = pd.DataFrame(piece)
        frame.columns = [str(c) for c in frame.columns]
        return frame, "a partition of the Dask input"
    where = piece.label()
    if piece.byte_range is not None:
        return _csv_block(piece, numbered=numbered, text_columns=text_columns), where
    if piece.row_groups is None:
        return read_table(piece.path, text_columns=text_columns), where
    import pyarrow.parquet as pq

    _check_decoded_size(piece)
    handle = pq.ParquetFile(piece.path)
    frame = handle.read_row_groups(list(piece.row_groups)).to_pandas()
    start = _first_row(handle, piece)  # the loader's errors give the file's row numbers
    frame.index = pd.RangeIndex(start, start + len(frame))
    if len(frame) != piece.rows:
        raise DataValidationError(f"{where}: {len(frame):,} rows read where the Parquet footer "
                                  f"states {piece.rows:,}: the public n would not be the count")
    return frame, where


def _csv_header(fh: Any, path: str) -> bytes:
    """The bytes of a CSV file up to the end of its header line (blank lines before it included),
    read from the start of ``fh``."""
    prefix = b""
    while len(prefix) < 1 << 20:
        line = fh.readline(1 << 20)
        if not line.endswith(b"\n"):
            break
        prefix += line
        if line.strip(b"\r\n"):
            return prefix
    raise DataValidationError(f"{path}: no line feed after the header line (in its first MiB); a CSV file "
                              "larger than the block size is read in blocks of lines")


def _csv_blocks(path: str, size: int, blocksize: int) -> list[_Piece]:
    """The blocks of ``blocksize`` bytes of a CSV file that hold at least one row (a block whose
    range holds no line start, the end of a line longer than the block or of the file, or only
    blank lines, holds none: its lines, if any, are the block's before)."""
    pieces = []
    with open(path, "rb") as fh:
        header_end = len(_csv_header(fh, path))
        for start in range(0, size, blocksize):
            length = min(blocksize, size - start)
            if _block_has_rows(fh, start, length, header_end):
                pieces.append(_Piece(path, byte_range=(start, length)))
    return pieces


def _block_has_rows(fh: Any, start: int, length: int, header_end: int) -> bool:
    """Whether the block ``fsspec.utils.read_block(fh, start, length, b"\\n")`` (the first block
    less the header) holds a line that is not blank: it starts after the first line feed at or after
    ``start`` and ends at the first line feed at or after ``start + length``."""
    stop = start + length
    if start == 0:
        first = header_end - 1
    else:
        fh.seek(start)
        pos, first = start, -1
        while first < 0:
            chunk = fh.read(1 << 16)
            if not chunk:
                return False  # the last line of the file crosses ``start``
            i = chunk.find(b"\n")
            first = pos + i if i >= 0 else -1
            pos += len(chunk)
        if first >= stop:
            return False  # one line crosses the whole block
    fh.seek(first + 1)
    pos = first + 1
    while True:  # the first byte of a non-blank line
        chunk = fh.read(1 << 16)
        if not chunk:
            return False  # blank lines to the end of the file
        rest = chunk.lstrip(b"\r\n")
        if rest:
            found = pos + len(chunk) - len(rest)
            break
        pos += len(chunk)
    if found < stop:
        return True
    fh.seek(stop)  # blank lines cross ``stop``: the block ends at the first line feed after it
    return b"\n" not in fh.read(found - stop)


def _csv_block(piece: _Piece, numbered: bool = False, text_columns: Any = ()) -> Any:
    """The rows of a CSV block: the lines that follow the first line feed at or after its start, up
    to the first line feed at or after its end (``fsspec.utils.read_block`` with the line feed as
    delimiter: every line is in exactly one block), parsed by the in-memory reader with the
    file's header put before them. ``numbered``: the frame's index gives the rows' numbers in the
    file, counted from the line feeds before the block (a line break inside a quoted cell before
    it shifts them; only error messages use them, so the file is read up to the block only then).

    Raises
    ------
    DataValidationError
        What the in-memory reader refuses, naming the block (its line numbers count from the
        block's first line).
    """
    import pandas as pd
    from fsspec.utils import read_block

    from dpcore.data import read_table
    from dpcore.io import RaggedLineError

    assert piece.byte_range is not None
    start, length = piece.byte_range
    with open(piece.path, "rb") as fh:
        header = _csv_header(fh, piece.path)
        block = read_block(fh, start, length, delimiter=b"\n")
        if start == 0:
            block = block[len(header):]
        # rows before the block: the lines ended by a line feed before ``start`` and the line that
        # crosses it (the block starts after that line's feed), less the header line
        before = 0
        if numbered:
            fh.seek(0)
            while fh.tell() < start:
                before += fh.read(min(8 << 20, start - fh.tell())).count(b"\n")
            before -= header.count(b"\n") - 1  # blank lines before the header
    try:
        frame = read_table(header + block, filename=os.path.basename(piece.path), text_columns=text_columns)
    except RaggedLineError as exc:  # the line's number in the file: count the lines before the block
        raise DataValidationError(exc.message(_line_in_file(piece, header, exc.line), piece.path)) from None
    except DataValidationError as exc:
        raise DataValidationError(f"{piece.label()}: {exc} (line numbers count from the block's first line; "
                                  "a line break inside a quoted cell cuts its row at a block's edge: give "
                                  "a larger --blocksize)") from None
    if numbered:
        frame.index = pd.RangeIndex(before, before + len(frame))
    return frame


def _line_in_file(piece: _Piece, header: bytes, line: int) -> int:
    """The line of ``piece``'s file that is line ``line`` of the text ``header + block`` the block
    is parsed as (:func:`_csv_block`): the lines before the block's first byte, plus the line's
    place in the block (read on the error path only)."""
    start = piece.byte_range[0] if piece.byte_range else 0
    before = 0
    with open(piece.path, "rb") as fh:
        if start:
            while fh.tell() < start:
                before += fh.read(min(8 << 20, start - fh.tell())).count(b"\n")
            while (byte := fh.read(1)) and byte != b"\n":  # the block starts after the line crossing start
                pass
            before += bool(byte)
        else:
            before = header.count(b"\n")
    return before + line - header.count(b"\n")


def _first_row(handle: Any, piece: _Piece) -> int:
    """The number in its file of a Parquet piece's first row (rows of the row groups before it)."""
    return sum(handle.metadata.row_group(i).num_rows for i in range(piece.row_groups[0]))


def _check_decoded_size(piece: _Piece) -> None:
    """Refuse a Parquet partition whose row groups decode to more than ``DPCORE_MAX_INPUT_BYTES``
    (:func:`dpcore.io.check_parquet_size`: from the footer and the dictionaries, before any value is
    decoded), naming the file and its row groups."""
    from dpcore.io import check_parquet_size
    from dpcore.limits import max_input_bytes

    check_parquet_size(piece.path, piece.label(), max_input_bytes(), piece.row_groups)


def _parquet_metadata(path: str) -> Any:
    """The footer of a Parquet file. Raises DataValidationError for an unreadable file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpcore.io import check_parquet_schema

    try:
        handle = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise DataValidationError(f"{path}: truncated or corrupt Parquet file, or not a Parquet file "
                                  f"({exc})") from None
    check_parquet_schema(handle, path)  # names, nested types, text encodings: from the footer
    return handle.metadata


def _load_piece(piece: _Piece | Any, options: _Options) -> Dataset:
    """One partition through the in-memory loader (runs on the workers); an error gives the rows'
    numbers in their file."""
    text = options.text_columns
    frame, where = _raw_frame(piece, text_columns=text)
    return _checked(frame, where, options, lambda: _raw_frame(piece, numbered=True, text_columns=text)[0])


def _load_frame(frame: Any, where: str, options: _Options) -> Dataset:
    from dpcore.data import load_dataset

    missing = [c for c in options.columns if c not in frame.columns]
    extra = [c for c in frame.columns if c not in options.columns]
    if missing or extra:
        raise DataValidationError(
            f"{where}: " + (f"column(s) {missing[:5]} missing" if missing else "")
            + ("; " if missing and extra else "") + (f"unexpected column(s) {extra[:5]}" if extra else "")
            + f"; every file must hold the table's columns {list(options.columns)[:10]}")
    if tuple(frame.columns) != options.columns:
        frame = frame[list(options.columns)]
    try:  # the checks of each row; the table's row count is checked by open_table
        return load_dataset(frame, label=options.label if options.label else "",
                            task=options.task, bounds=options.bounds, label_bounds=options.label_bounds,
                            classes=options.classes, categories=options.categories, missing=options.missing,
                            part_of_table=True)
    except DataValidationError as exc:
        raise DataValidationError(f"{where}: {exc}") from None


def _read_partition(piece: Any, options: _Options) -> Any:
    """The validated partition as a float64 DataFrame (features, then ``label``)."""
    return _as_frame(_load_piece(piece, options))


def _as_frame(ds: Dataset) -> Any:
    import pandas as pd

    out = pd.DataFrame(ds.X, columns=ds.feature_names)
    if ds.y is not None:
        out["label"] = ds.y
    return out

# ------------------------------------------------------------------------------------ fused reading
@dataclass(frozen=True)
class _Source:
    """How one task produces a partition's rows: read the piece in batches of about
    :data:`BATCH_BYTES`, check each batch with the in-memory loader, clip it in place to the public
    bounds ``[lo, hi]`` (``None``: raw), then apply the row maps ``maps`` in order."""

    options: _Options
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    maps: tuple[Callable[[np.ndarray], np.ndarray], ...] = ()
    #: produce the label instead of the features: ``("classification", classes)`` (indices into
    #: the public class list) or ``("regression", (lo, hi))`` (clipped to the public label bounds)
    label: tuple[str, Any] | None = None


# Dask array name -> (its file partitions, how a task produces their rows). block_sums, row_map and
# draw_mixtures look their input up here to run the whole chain (read, check, clip, maps, kernel)
# inside one task per partition, batch by batch, instead of materialising each step's partition.
_SOURCES: dict[str, tuple[tuple[_Piece, ...], _Source]] = {}
_SOURCES_KEPT = 64


def _cuts(rows: int, width: int) -> np.ndarray:
    """Batch boundaries of ``rows`` rows of ``width`` float64 columns: about :data:`BATCH_BYTES`
    each, never a one-row batch (unless ``rows`` is 1)."""
    k = max(1, min(-(-rows * max(1, width) * 8 // BATCH_BYTES), rows // 2))
    return np.linspace(0, rows, k + 1).astype(np.int64)


def _batches(piece: _Piece, options: _Options) -> Iterator[Dataset]:
    """The checked batches of a file partition, in row order. A batch the loader refuses raises
    the loader's error for the whole partition (:func:`_checked`): its counts, the rows' numbers in
    the file, and the file's name, as the in-memory loader reports them for that file."""
    where = piece.label()
    width = len(options.columns)
    text = options.text_columns
    if piece.row_groups is None:  # a CSV file or block: read whole, checked batch by batch
        frame, _ = _raw_frame(piece, text_columns=text)
        whole = ((lambda: frame) if piece.byte_range is None
                 else (lambda: _raw_frame(piece, numbered=True, text_columns=text)[0]))
        cuts = _cuts(len(frame), width)
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):  # each slice's index: the file's row numbers
            yield _checked(frame.iloc[a:b], where, options, whole)
        return
    import pandas as pd
    import pyarrow.parquet as pq

    _check_decoded_size(piece)
    handle = pq.ParquetFile(piece.path)
    read = 0
    first_row = _first_row(handle, piece)
    for group in piece.row_groups:
        table = handle.read_row_group(group)  # Arrow's pool; each batch is decoded on its own
        cuts = _cuts(table.num_rows, width)
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            frame = table.slice(a, b - a).to_pandas()
            start = first_row + read + int(a)  # the loader's errors give the file's row numbers
            frame.index = pd.RangeIndex(start, start + len(frame))
            yield _checked(frame, where, options, lambda: _raw_frame(piece, numbered=True,
                                                                     text_columns=text)[0])
        read += table.num_rows
    if read != piece.rows:
        raise DataValidationError(f"{where}: {read:,} rows read where the Parquet footer states "
                                  f"{piece.rows:,}: the public n would not be the count")


def _checked(frame: Any, where: str, options: _Options, whole: Callable[[], Any]) -> Dataset:
    """``frame`` (a batch) through the loader; if refused, the loader's error for ``whole()`` (the
    partition the batch is part of: the counts and first rows of the in-memory error, and the
    right message where a batch alone misleads, e.g. a text column whose bad value is in another
    batch), else the batch's own."""
    try:
        return _load_frame(frame, where, options)
    except DataValidationError:
        _load_frame(whole(), where, options)
        raise


def _source_batches(piece: _Piece, source: _Source) -> Iterator[np.ndarray]:
    """The rows of ``piece`` produced by ``source``, batch after batch (float64, C order)."""
    for ds in _batches(piece, source.options):
        yield _from_batch(ds, source)


def _from_batch(ds: Dataset, source: _Source) -> np.ndarray:
    """What ``source`` produces from one checked batch: the encoded labels ``(rows, 1)``, or the
    features clipped to the bounds and passed through the row maps."""
    if source.label is not None:
        return _encoded_labels(ds.y, *source.label)[:, None]
    X = ds.X
    if source.lo is not None:
        cells = ds.imputed_cells()
        if cells is not None:  # missing="impute": the midpoints of the public bounds, not the batch's
            from dpcore.data import fill_imputed

            X = fill_imputed(X, cells, np.column_stack([source.lo, source.hi]), copy=not X.flags.writeable)
        X = np.clip(X, source.lo, source.hi, out=X if X.flags.writeable else None)
    for fn in source.maps:
        X = fn(X)
    return X


def _encoded_labels(y: np.ndarray, task: str, public: Any) -> np.ndarray:
    """Labels as :func:`dpcore.preprocessing.prepare_input` encodes them: indices into the public
    class list, or floats clipped to the public label bounds.

    A label outside the class list is refused with the in-memory error: the loader checks the
    table's own list (``open_table(classes=...)``), but a list given to the mechanism only reaches
    the batches here (the first rows alone were checked when the table was opened)."""
    from dpcore.preprocessing import _index_of, _sorted

    if task == "classification":
        y = np.asarray(y).ravel()
        if _sorted(public):
            index = np.minimum(np.searchsorted(public, y), max(len(public) - 1, 0))
            unknown = public[index] != y if len(public) else np.ones(len(y), dtype=bool)
        else:
            index = _index_of(public, y)
            unknown = index < 0
        if unknown.any():
            raise DataValidationError(
                f"{int(unknown.sum())} labels are not in the public class list {public.tolist()[:10]} "
                f"(e.g. {y[unknown][:3].tolist()})")
        return index
    return np.clip(np.asarray(y, dtype=float).ravel(), public[0], public[1])


def _read_block(piece: _Piece, source: _Source, rows: int, width: int) -> np.ndarray:
    """The whole partition ``(rows, width)`` produced by ``source`` (one allocation)."""
    out = np.empty((rows, width), dtype=_source_dtype(source))
    start = 0
    for X in _source_batches(piece, source):
        out[start:start + X.shape[0]] = X
        start += X.shape[0]
    return out


def _source_dtype(source: _Source) -> Any:
    return np.int64 if source.label is not None and source.label[0] == "classification" else np.float64


def _source_array(pieces: tuple[_Piece, ...], lengths: tuple[int, ...], source: _Source, width: int) -> Any:
    """A lazy ``(n, width)`` array of the rows ``source`` produces from ``pieces``, registered in
    :data:`_SOURCES` so the reductions and maps over it run fused per partition."""
    import dask.array as da

    dtype = _source_dtype(source)
    blocks = [da.from_delayed(dask_delayed(_read_block)(piece, source, rows, width), shape=(rows, width),
                              dtype=dtype) for piece, rows in zip(pieces, lengths, strict=True)]
    arr = da.concatenate(blocks, axis=0)
    while len(_SOURCES) >= _SOURCES_KEPT:
        _SOURCES.pop(next(iter(_SOURCES)))
    _SOURCES[arr.name] = (pieces, source)
    return arr


def _fused(X: Any) -> tuple[tuple[_Piece, ...], _Source] | None:
    return _SOURCES.get(getattr(X, "name", None)) if is_lazy(X) else None

def dask_delayed(fn: Callable[..., Any]) -> Callable[..., Any]:
    import dask

    return dask.delayed(fn, pure=True)
