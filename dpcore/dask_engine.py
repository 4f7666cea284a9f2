"""Releases from tables larger than memory, on Dask (issue 14; SPEC section 10, "Scale-out").

The same mechanisms, the same calibration code, the same cards: the engine only changes where the
rows live. A table is opened lazily (:func:`open_table`: a path or glob of Parquet/CSV files, a
Dask DataFrame or a Dask Array) as a :class:`LazyTable`; passing it to any supported mechanism's
``release`` runs that mechanism's own ``_release`` with ``PreparedInput.X`` a Dask array:

- **Checks, per partition.** Every partition goes through the in-memory loader
  (:func:`dpcore.data.load_dataset`: non-numeric columns, NaN/inf, labels, bound magnitudes), so a
  bad chunk raises the same :class:`~dpcore.exceptions.DataValidationError`, prefixed with the file
  it came from, before any noise is drawn or anything written. A file without one of the table's
  columns is refused by name. Clipping to the public bounds is a per-partition ``clip``.
- **n is public.** From the user (``n=``), else the Parquet footers (metadata), else the row count
  (as the in-memory path takes the input's row count). Rows actually read are checked against it:
  each Parquet partition against its footer's count, and the table's total against a given ``n``;
  a mismatch is an error, never a silent change of ``n``.
- **Statistics are Dask reductions** of the mechanisms' own streaming kernels. The functions that
  compute a mechanism's sufficient statistics in memory (``box_moments``, RON-Gauss's two passes and
  per-class passes, PCA-Gauss's ``_Moments.collect``, MODIPS's ``_group_moments``) call themselves on
  each partition through :func:`block_sums` (kernel per partition, with the partition's labels for
  per-class and label-augmented statistics, packed into one vector, summed by Dask's tree
  reduction ``sum(split_every=...)``) or
  :func:`row_map` (kernel per partition, e.g. the projected rows ``Z``) when their input is a
  Dask array; products such as ``Z^T Z`` are Dask's own ``matmul`` reduction. The noise code then
  calls ``np.asarray`` on the (small) statistic, which computes it: noise is drawn once, on the
  client, with the release's secure sampler (:mod:`dpcore.noise`).
- **Per-row noise in the partitions' tasks.** The grid noise of row-wise releases (JL-Laplace,
  DPPro, LocalGaussian, the baselines, Laplace labels) is drawn inside each partition's task, from
  that partition's own stream of the same exact sampler (:func:`partition_noise`: ChaCha20 keyed by
  HMAC-SHA256 of one fresh ``os.urandom`` secret per release and the partition's index): every
  cell gets an independent exact draw, as on the client. DPMix's mixture noise (a seed gives the
  in-memory release) and randomized response of labels are drawn on the client.
- **One task per partition, in batches.** Over a table's files, reading, the loader's checks,
  clipping, the row maps and the kernel of a reduction run inside one task per partition, on
  batches of about :data:`BATCH_BYTES` (:class:`_Source`, :data:`_SOURCES`): no partition-sized
  intermediate is materialised and the buffers stay small enough to be reused (page faults on
  fresh large buffers cost more than the arithmetic on this kind of machine).
- **Labels** (classification with a public class list, regression with public label bounds) are a
  lazy column encoded per batch as the in-memory ``prepare_input`` encodes them; labels released
  on their own get their noise per partition (Laplace, :func:`partition_noise`) or on the client
  partition by partition (randomized response), and the label columns are written with the parts.
- **Row-wise outputs stay lazy.** Synthetic rows are drawn per output partition from generators
  spawned from the release's public ``rng`` (:func:`standard_normal`, :func:`gaussian_rows`), and
  :func:`write_release` writes them partition by partition (a Parquet or CSV directory) without
  collecting them.

Mechanisms and tasks not in :data:`SUPPORTED` are refused with a clear error saying why
(:data:`NOT_STREAMED`): the engine never falls back to loading a large table into memory.
"""

from __future__ import annotations

import contextlib
import copy
import glob
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcore.exceptions import DataValidationError, NonFiniteNoiseError, PrivacyLeakWarning

__all__ = [
    "BATCH_BYTES",
    "CSV_SUFFIXES",
    "DEFAULT_BLOCKSIZE",
    "HEAD_ROWS",
    "LazyTable",
    "MIXTURE_CHUNK_BYTES",
    "NOT_STREAMED",
    "PARQUET_SUFFIXES",
    "SPLIT_EVERY",
    "SUPPORTED",
    "block_sums",
    "add_grid_noise",
    "check_supported",
    "client_map",
    "column_stack",
    "connect",
    "dask_delayed",
    "escaped_cells",
    "draw_mixtures",
    "expand_paths",
    "fits_in_memory",
    "gaussian_mechanism",
    "gaussian_rows",
    "is_lazy",
    "is_lazy_input",
    "lazy_output",
    "noisy_projection",
    "open_table",
    "output_rows",
    "pairs_by_partition",
    "partition_noise",
    "prepare_input",
    "projection_pass",
    "release_table",
    "row_map",
    "standard_normal",
    "take",
    "unit_rows_pass",
    "write_release",
]

if TYPE_CHECKING:
    from dpcore.data import Dataset
    from dpcore.preprocessing import PreparedInput
    from dpcore.release import Release

#: the card's ``noise_streams`` on this engine: where each noise record's random bits come from
NOISE_STREAMS = (
    "statistics (sums, moments, histograms) and DPMix's mixtures: drawn on the client with the sampler "
    "named in 'noise'; per-row noise (projections, perturbed rows, labels): drawn inside each "
    "partition's task with that sampler, partition i reading a ChaCha20 stream keyed by "
    "HMAC-SHA256(secret, i), one fresh 256-bit secret per release from os.urandom (a seeded preview: "
    "from the seed), never written")
#: mechanism name -> tasks the Dask engine runs for it (everything else is refused by name)
SUPPORTED: dict[str, tuple[str, ...]] = {
    "ron-gauss": ("unsupervised", "classification", "regression"),
    "pca-gauss": ("unsupervised", "classification", "regression"),
    "dpmix": ("unsupervised", "classification", "regression"),
    "jl-laplace": ("unsupervised", "classification", "regression"),
    "dppro": ("unsupervised", "classification", "regression"),
    "local-gaussian": ("unsupervised", "classification", "regression"),
    "identity-laplace": ("unsupervised", "classification", "regression"),
    "pca-identity": ("unsupervised", "classification", "regression"),
    "rp-gaussian": ("unsupervised", "classification", "regression"),
    "modips": ("unsupervised", "classification", "regression"),
}
#: why a (mechanism, task) is refused (shown in the error); every mechanism of the package streams,
#: so it is empty: a new mechanism is refused by name until its statistics are wired to the engine
NOT_STREAMED: dict[str, str] = {}
#: bytes of one chunk of DPMix mixtures (the client's sum of their rows); T/chunk passes
MIXTURE_CHUNK_BYTES = 256 << 20
#: target bytes of one partition (decoded float64 rows), the default of ``blocksize``
DEFAULT_BLOCKSIZE = 128 << 20
#: decoded bytes of the row batches a partition task checks and reduces at a time: under glibc's
#: largest mmap threshold (32 MiB), so the allocator reuses their buffers (freshly mapped pages cost
#: more than the arithmetic), and large enough that each batch's fixed costs (the loader's checks,
#: a kernel's per-batch setup) stay small: measured with ``benchmarks/bench_dask.py`` at 1.6 x 10^7
#: rows (row groups of 2.5 x 10^5 rows: batches of 5 x 10^4 rows at 8 MiB, 1.25 x 10^5 here),
#: RON-Gauss's statistics took 14.0 CPU s at 8 MiB and 11.7 at this size, PCA-Gauss's 5.9 and 5.4
BATCH_BYTES = 24 << 20
#: rows of the first partition read on the client to resolve names, task and bounds
HEAD_ROWS = 1_000
#: partitions summed per node of the tree reductions
SPLIT_EVERY = 8
PARQUET_SUFFIXES = (".parquet", ".pq")
CSV_SUFFIXES = (".csv", ".tsv", ".txt")

# Bounds or classes left to the data are warned about once, for the whole table (prepare_input);
# the per-partition loads would repeat it for each partition. A filter, not catch_warnings: the
# partitions are loaded on worker threads, and catch_warnings is not thread-safe.
warnings.filterwarnings("ignore", category=PrivacyLeakWarning, module=r"dpcore\.dask_engine$")

# rows per output partition while a lazy release is drawn (None: draw in memory, as always)
_OUTPUT_ROWS: ContextVar[int | None] = ContextVar("dpcore_dask_output_rows", default=None)
#: where the local progress bars go while :func:`_progress` shows them (None: not shown)
_BAR_STREAM: ContextVar[Any | None] = ContextVar("dpcore_dask_bar_stream", default=None)


def is_lazy(x: Any) -> bool:
    """True for a Dask collection (array, DataFrame, scalar): the hooks' test, import-free."""
    return type(x).__module__.split(".", 1)[0] == "dask"


def is_lazy_input(x: Any) -> bool:
    """True for what :meth:`Mechanism.release` hands to this engine: a :class:`LazyTable` or a
    Dask collection."""
    return isinstance(x, LazyTable) or is_lazy(x)


# ------------------------------------------------------------------------------------ opening
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


@dataclass(frozen=True)
class LazyTable:
    """A table opened lazily by :func:`open_table`; pass it to ``Mechanism.release``.

    Attributes
    ----------
    frame : dask.dataframe.DataFrame
        Validated partitions: the feature columns as float64 (and ``label`` if any).
    head : Dataset
        The first :data:`HEAD_ROWS` rows loaded in memory on the client: feature names, bounds and
        their sources, task and class list exactly as the in-memory loader resolves them.
    n : int
        The public number of rows.
    n_source : str
        Where ``n`` came from (for the card's ``public_facts``).
    lengths : tuple of int
        Rows per partition (Parquet footers, or counted).
    sources : list of str
        The files read (empty for a Dask collection).
    """

    frame: Any
    head: Dataset
    n: int
    n_source: str
    lengths: tuple[int, ...]
    sources: tuple[str, ...] = ()
    pieces: tuple[_Piece, ...] = ()
    options: _Options | None = None
    blocksize: int = DEFAULT_BLOCKSIZE

    @property
    def feature_names(self) -> list[str]:
        return list(self.head.feature_names)

    @property
    def part_rows(self) -> int:
        """Rows per part file of a release of this table: :func:`public_part_rows` of the block
        size and the number of columns (public facts only)."""
        return public_part_rows(self.blocksize, len(self.feature_names))

    @property
    def n_partitions(self) -> int:
        return len(self.lengths)


def public_part_rows(blocksize: int, width: int) -> int:
    """Rows per part file of a release: ``blocksize`` bytes of float64 rows of ``width`` columns.

    The parts' sizes are part of what is published, so they come from public facts only (the
    block size, the number of columns), never from the input's partitions, whose row counts
    depend on the rows (a CSV block holds the lines that fit in its bytes: one longer value in
    one row can move the rows after it to the next block). At least 100 rows per part."""
    return max(100, int(blocksize) // (8 * max(1, int(width))))


def expand_paths(source: str | os.PathLike | list[Any]) -> list[str]:
    """The files named by a path, a glob, a directory (its Parquet files, or its CSV files) or a
    list of those, sorted; one format only.

    Raises
    ------
    DataValidationError
        Nothing matches, an unknown suffix, or Parquet and CSV files mixed.
    """
    items = source if isinstance(source, (list, tuple)) else [source]
    paths: list[str] = []
    for item in items:
        text = os.fspath(item)
        if os.path.isdir(text):  # its Parquet files, or its CSV files
            entries = sorted(glob.glob(os.path.join(text, "*")))
            parquet = [p for p in entries if p.lower().endswith(PARQUET_SUFFIXES)]
            csv = [p for p in entries if p.lower().endswith(CSV_SUFFIXES)]
            if parquet and csv:
                raise DataValidationError(f"the folder {text!r} holds Parquet and CSV files; give one format "
                                          f"(a glob such as {os.path.join(text, '*.parquet')!r})")
            if not entries or not (parquet or csv):
                raise DataValidationError(f"the folder {text!r} holds no Parquet (.parquet, .pq) or CSV "
                                          "(.csv, .tsv, .txt) file")
            found = parquet or csv
        elif glob.has_magic(text):
            found = sorted(glob.glob(text))
        else:
            found = [text] if os.path.exists(text) else []
        if not found:
            raise DataValidationError(f"no Parquet or CSV file matches {text!r}")
        paths += found
    kinds = {_kind(p) for p in paths}
    if len(kinds) > 1:
        raise DataValidationError("the input mixes Parquet and CSV files; give one format")
    return paths


def _kind(path: str) -> str:
    low = path.lower()
    if low.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if low.endswith(CSV_SUFFIXES):
        return "csv"
    raise DataValidationError(f"{path}: not a Parquet (.parquet) or CSV (.csv) file")


def _plan_pieces(paths: list[str], blocksize: int) -> list[_Piece]:
    """Partitions: CSV files cut into blocks of ``blocksize`` bytes of text (at line ends,
    :func:`_csv_block`; a smaller file whole); runs of Parquet row groups of at least
    :func:`public_part_rows` rows (``blocksize`` bytes of float64 rows of the file's columns): the
    footers' row counts and the schema only, as ``n`` (not the byte sizes, which depend on the
    values through their encoding); Parquet files of no rows left out."""

    from dpcore.io import bom_encoding

    pieces: list[_Piece] = []
    for path in paths:
        if _kind(path) == "csv":
            size = os.path.getsize(path)
            with open(path, "rb") as fh:  # UTF-16/32 text: its line feeds are several bytes
                wide = bom_encoding(fh.read(4)) is not None
            if size <= blocksize or wide:
                pieces.append(_Piece(path))
            else:
                pieces.extend(_csv_blocks(path, size, blocksize))
            continue
        meta = _parquet_metadata(path)
        if meta.num_rows == 0:  # an empty part (as Spark writes): no rows to read
            continue
        least = public_part_rows(blocksize, meta.num_columns)
        groups: list[int] = []
        rows = 0
        for i in range(meta.num_row_groups):
            groups.append(i)
            rows += meta.row_group(i).num_rows
            if rows >= least:
                pieces.append(_Piece(path, tuple(groups), rows))
                groups, rows = [], 0
        if groups:
            pieces.append(_Piece(path, tuple(groups), rows))
    return pieces


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


def open_table(
    source: Any, *, label: str | None = None, task: str | None = None, bounds: Any = None,
    label_bounds: tuple[float, float] | None = None, classes: Any = None,
    categories: dict[str, list[Any]] | None = None, n: int | None = None,
    blocksize: int | str | None = None, missing: str = "error",
) -> LazyTable:
    """Open a table larger than memory, lazily.

    Parameters
    ----------
    source : str, path, list of those, dask DataFrame or dask Array
        A path, glob (``'data/*.parquet'``) or directory of Parquet files, CSV files (a file
        larger than ``blocksize`` is cut into blocks of whole lines, one partition each; a line
        break inside a quoted cell must not fall on a block's edge, as with
        ``dask.dataframe.read_csv``), or a Dask collection (an Array's columns are named
        ``x0, x1, ...``).
    label, task, bounds, label_bounds, classes, categories, missing
        As :func:`dpcore.data.load_dataset` (applied to every partition). ``missing="drop"`` is
        refused: n would then depend on the data.
    n : int, optional
        The public number of rows. Default: the Parquet footers' total; for CSV files or a Dask
        collection, the rows counted in one pass (the in-memory path likewise takes the input's row
        count as public).
    blocksize : int or str, optional
        Target decoded bytes per Parquet partition, bytes of text per CSV partition
        (``"256MiB"``, default 128 MiB).

    Raises
    ------
    DataValidationError
        No file matches, mixed formats, ``n`` that disagrees with the footers or the count, or the
        first partition fails the in-memory loader's checks (the others are checked as they are
        read, before any noise is drawn).
    """
    import dask.dataframe as dd
    from dask.utils import parse_bytes

    if isinstance(source, LazyTable):
        return source
    if missing == "drop":
        # n must be fixed before any statistic is calibrated; the rows left after dropping are a
        # private count, and a record with a missing value replaced by a complete one changes it
        # (add/remove, not the replace-one relation every mechanism's sensitivity assumes), so a DP
        # count of the dropped rows would not restore the stated guarantee either
        raise DataValidationError("missing='drop' is not available on the Dask engine: n would be the "
                                  "private count of complete rows, not the public n every sensitivity "
                                  "uses; use missing='impute' (keeps n), or clean the files first and "
                                  "release the cleaned table (its row count is then its public n)")
    if n is not None and (isinstance(n, bool) or int(n) != n or n < 2):
        raise DataValidationError(f"n must be a whole number >= 2, got {n!r}")
    size = _blocksize(blocksize, parse_bytes)
    sources: tuple[str, ...] = ()
    if is_lazy(source):
        frame_in = source
        if getattr(source, "ndim", None) == 2 and not hasattr(source, "columns"):  # a Dask Array
            frame_in = dd.from_dask_array(source.rechunk({1: -1}),
                                          columns=[f"x{j}" for j in range(source.shape[1])])
        parts: list[Any] = [None]
        for i in range(frame_in.npartitions):  # the first rows: of the first partition that has any
            head_frame, where = _raw_frame(frame_in.partitions[i].head(HEAD_ROWS, compute=True))
            if len(head_frame):
                break
        lengths_meta = None
    else:
        sources = tuple(expand_paths(source))
        _check_partitions(sum(-(-os.path.getsize(p) // size) for p in sources if _kind(p) == "csv"), size)
        parts = _plan_pieces(list(sources), size)
        _check_partitions(len(parts), size)
        if not parts:
            raise DataValidationError(f"{source}: the Parquet files hold no rows")
        first = parts[0]
        if first.row_groups is not None:  # the first row group that has rows
            import pyarrow.parquet as pq

            meta = pq.ParquetFile(first.path).metadata
            group = next(i for i in range(meta.num_row_groups) if meta.row_group(i).num_rows)
            first = _Piece(first.path, (group,), meta.row_group(group).num_rows)
        head_frame, where = _raw_frame(first, text_columns=tuple(categories or ()))
        lengths_meta = None if parts[0].row_groups is None else tuple(int(p.rows) for p in parts)
    # the first rows resolve names, task, bounds and their sources as the in-memory loader does;
    # every row is checked again as its partition is read
    head_frame = head_frame.iloc[:HEAD_ROWS]
    options = _Options(columns=tuple(head_frame.columns), label=label, task=task, bounds=bounds,
                       label_bounds=label_bounds, classes=classes, categories=categories, missing=missing)
    # refused: the loader's error for the first partition (as the other partitions' batches)
    head = _checked(head_frame, where, options,
                    (lambda: _raw_frame(parts[0], numbered=True, text_columns=options.text_columns)[0])
                    if sources else (lambda: head_frame))
    meta = _as_frame(replace(head, X=head.X[:0], y=None if head.y is None else head.y[:0]))
    if sources:
        frame = dd.from_map(_read_partition, parts, options=options, meta=meta, enforce_metadata=False)
    else:
        frame = frame_in.map_partitions(_read_partition, options, meta=meta, enforce_metadata=False)
    if lengths_meta is not None:
        lengths = lengths_meta
        counted = sum(lengths)
        if n is not None and int(n) != counted:
            raise DataValidationError(f"n = {int(n):,} was given but the Parquet footers hold {counted:,} "
                                      "rows; a mismatch is refused, never a silent change of n")
        n_source = "user (checked against the Parquet footers)" if n is not None else "Parquet metadata"
    else:
        lengths = tuple(int(v) for v in frame.map_partitions(len).compute())
        counted = sum(lengths)
        if n is not None and int(n) != counted:
            raise DataValidationError(f"n = {int(n):,} was given but the input holds {counted:,} rows; a "
                                      "mismatch is refused, never a silent change of n")
        n_source = ("user (checked against the row count)" if n is not None
                    else "the input's row count (public)")
    if counted < 2:  # the loader's table-level check (its partitions are checked row by row)
        raise DataValidationError(f"the table has {counted} row(s); differentially private release needs "
                                  "at least 2 (and, to be useful, many more)")
    return LazyTable(frame=frame, head=head, n=int(counted), n_source=n_source, lengths=lengths,
                     sources=sources, pieces=tuple(parts) if sources else (), options=options, blocksize=size)


# ------------------------------------------------------------------------------------ preparing
def _blocksize(blocksize: Any, parse_bytes: Callable[[Any], int]) -> int:
    """``blocksize`` in bytes (``None``: :data:`DEFAULT_BLOCKSIZE`), a positive whole number.

    Raises
    ------
    DataValidationError
        Not a size, or not positive (``--blocksize 0`` gave "range() arg 3 must not be zero",
        ``-1`` "the Parquet files hold no rows")."""
    if blocksize is None:
        return DEFAULT_BLOCKSIZE
    try:
        size = parse_bytes(blocksize)
    except (ValueError, TypeError, KeyError):
        raise DataValidationError(f"blocksize {blocksize!r} is not a size: give bytes, e.g. 128MiB or "
                                  "134217728") from None
    if isinstance(size, bool) or not size >= 1 or int(size) != size:
        raise DataValidationError(f"blocksize must be a positive number of bytes (e.g. 128MiB), got "
                                  f"{blocksize!r}")
    return int(size)


def _check_partitions(count: int, size: int) -> None:
    """Refuse a block size that cuts the table into more than :func:`dpcore.limits.max_partitions`
    partitions (``--blocksize 16`` on a 10 MB CSV planned 655,360 blocks, 1.8 GB, killed at 120 s;
    each partition is a task of some 20 ms of fixed cost here, so 20,000 are minutes),
    before the blocks are planned (CSV: from the files' sizes) and after (Parquet: row groups)."""
    from dpcore.limits import ResourceLimitError, max_partitions

    limit = max_partitions()
    if count > limit:
        raise ResourceLimitError(f"a block size of {size:,} bytes cuts the table into {count:,} partitions, "
                                 f"over the limit of {limit:,} (DPCORE_MAX_PARTITIONS): give a larger block "
                                 f"size (the default is {DEFAULT_BLOCKSIZE >> 20} MiB)")


def check_supported(mechanism: str, task: str) -> None:
    """Refuse a mechanism or task the engine does not run (never a silent in-memory fallback).

    Raises
    ------
    ValueError
        Naming what is supported.
    """
    tasks = SUPPORTED.get(mechanism)
    why = f" ({NOT_STREAMED[mechanism]})" if mechanism in NOT_STREAMED else ""
    if tasks is None:
        raise ValueError(f"{mechanism} is not supported on the Dask engine yet{why} (supported: "
                         f"{sorted(SUPPORTED)}); load the table in memory instead if it fits")
    if task not in tasks:
        raise ValueError(f"{mechanism} on the Dask engine supports the task(s) {list(tasks)}, not {task!r}"
                         f"{why}; load the table in memory instead if it fits")


def prepare_input(
    X: Any, y: Any = None, *, bounds: Any = None, label_bounds: Any = None, classes: Any = None,
    task: str | None = None, supported_tasks: tuple[str, ...] = (), mechanism: str = "",
) -> PreparedInput:
    """:func:`dpcore.preprocessing.prepare_input` for a :class:`LazyTable` (or a Dask collection).

    Bounds, task, class list and public facts are resolved by the in-memory ``prepare_input`` on
    the first partition (:attr:`LazyTable.head`), so they are the in-memory path's; bounds taken
    from the data are the whole table's column ranges (one Dask pass, with the same
    :class:`PrivacyLeakWarning`). ``X`` of the result is the lazily clipped Dask array; the
    diagnostic ``n_clipped_entries`` is not counted (it would cost a pass over the table).

    Raises
    ------
    ValueError
        An unsupported mechanism or task, labels given apart from the table, and everything the
        in-memory ``prepare_input`` raises.
    """

    from dpcore import preprocessing

    table = open_table(X)
    if y is not None:
        raise ValueError("on the Dask engine the labels are the table's label column (open_table(label=...))")
    head = table.head
    if task is not None and task != head.task:
        head = replace(head, task=task)
    check_supported(mechanism, head.task)
    d = len(table.feature_names)
    fused = bool(table.pieces) and table.options is not None
    if fused:
        assert table.options is not None
        Xd = _source_array(table.pieces, table.lengths, _Source(table.options), d)
    else:
        Xd = table.frame[table.feature_names].to_dask_array(lengths=list(table.lengths))
    if bounds is None and head.bounds_source == "data":
        lo, hi = _column_range(Xd)
        sources = list(head.bounds_sources)
        whole = preprocessing.data_bounds(Xd, col_range=(lo, hi))
        b = np.where(np.array([s == "data" for s in sources])[:, None], whole, head.bounds)
        head = replace(head, bounds=b)
    small = preprocessing.prepare_input(head, bounds=bounds, label_bounds=label_bounds, classes=classes,
                                        task=task, supported_tasks=supported_tasks)
    lo, hi = small.bounds[:, 0], small.bounds[:, 1]
    if fused:  # read, check and clip in one task per partition, batch by batch
        assert table.options is not None
        clipped = _source_array(table.pieces, table.lengths, _Source(table.options, lo, hi), d)
    else:
        clipped = Xd.map_blocks(np.clip, lo, hi, dtype=float)
    labels = None
    if small.task in ("classification", "regression"):
        _check_public_label_facts(small)
        encoding = (small.task, small.classes if small.task == "classification" else small.label_bounds)
        if fused:
            assert table.options is not None
            labels = _source_array(table.pieces, table.lengths, _Source(table.options, label=encoding),
                                   1)[:, 0]
        else:
            raw = table.frame["label"].to_dask_array(lengths=list(table.lengths))
            labels = raw.map_blocks(_encoded_labels, *encoding, dtype=_source_dtype(
                _Source(table.options, label=encoding)))  # type: ignore[arg-type]
    facts = {**small.public_facts, "n": table.n, "n_source": table.n_source}
    # the clipping count (an exploration diagnostic) would cost one more pass: not counted
    return replace(small, X=clipped, y=labels, diagnostics={}, public_facts=facts)


def _column_range(X: Any) -> tuple[np.ndarray, np.ndarray]:
    """The whole table's column minima and maxima, one pass; empty partitions add nothing (Dask's
    own ``min`` fails on an empty block of a DataFrame's array)."""
    X = X.rechunk({1: -1})
    ranges = X.map_blocks(_block_range, chunks=((2,) * X.numblocks[0], (X.shape[1],)), dtype=np.float64)
    both = np.asarray(ranges.compute()).reshape(-1, 2, X.shape[1])
    return both[:, 0].min(axis=0), both[:, 1].max(axis=0)


def _block_range(block: np.ndarray) -> np.ndarray:
    if not len(block):
        return np.vstack([np.full(block.shape[1], np.inf), np.full(block.shape[1], -np.inf)])
    return np.vstack([block.min(axis=0), block.max(axis=0)])


def _check_public_label_facts(small: PreparedInput) -> None:
    """The class list / label bounds of a labelled table must be public on the Dask engine: read
    from the first rows they would not be the table's (and from the whole table, one more pass for a
    release whose guarantee would not hold)."""
    if small.task == "classification" and small.classes_source == "data":
        raise DataValidationError("the Dask engine needs the public class list of the label (classes=, CLI "
                                  "--classes); it is not read from the data")
    if small.task == "regression" and small.public_facts.get("label_bounds_source", "user") == "data":
        raise DataValidationError("the Dask engine needs the public label bounds (label_bounds=, CLI "
                                  "--label-bounds); they are not read from the data")


# ------------------------------------------------------------------------------------ kernels
def _packed(block: np.ndarray, kernel: Callable[..., Any], sizes: tuple[int, ...], labels: Any = None
            ) -> np.ndarray:
    """``kernel(block)`` (``kernel(block, labels)``) flattened into one row (shape ``(1, sum(sizes))``)."""
    parts = kernel(block) if labels is None else kernel(block, labels)
    parts = parts if isinstance(parts, tuple) else (parts,)
    return np.concatenate([np.asarray(p, dtype=float).ravel() for p in parts])[None, :]


def block_sums(kernel: Callable[..., Any], X: Any, labels: Any = None) -> tuple[np.ndarray, ...]:
    """``sum over partitions B of kernel(B)`` for a kernel returning an array or a tuple of arrays
    (sums of rows: Gram matrices, column sums, counts), computed now. With ``labels`` (the lazy
    encoded label column of the same table, ``(n,)``): ``kernel(B, labels of B)``, for per-class
    statistics (counts, per-class sums and second moments) and the label-augmented moments.

    Each partition's results are packed into one row and Dask's tree reduction
    (``sum(split_every=SPLIT_EVERY)``) adds them up; the client receives only the totals.
    Over a table's files the rows and their labels come from the same read of each batch (one
    task per partition). Integer outputs come back as floats (exact below 2^53).
    """
    import dask.array as da

    zeros = np.zeros((1, X.shape[1]))
    probe = kernel(zeros) if labels is None else kernel(zeros, np.zeros(1, dtype=labels.dtype))
    probe = probe if isinstance(probe, tuple) else (probe,)
    shapes = [np.shape(p) for p in probe]
    sizes = tuple(int(np.prod(s)) for s in shapes)
    fused = _fused(X)
    fused_labels = None if labels is None else _fused(labels)
    if labels is not None and (fused is None or fused_labels is None or fused_labels[0] != fused[0]):
        fused = None  # rows and labels from different sources: pair their partitions
    if fused is not None:  # read, check, clip, map and reduce in one task per partition
        pieces, source = fused
        label_source = None if fused_labels is None else fused_labels[1]
        rows = da.concatenate([da.from_delayed(dask_delayed(_piece_sums)(piece, source, kernel, sizes,
                                                                         label_source),
                                               shape=(1, sum(sizes)), dtype=float) for piece in pieces])
    elif labels is None:
        Xr = X.rechunk({1: -1})
        rows = Xr.map_blocks(_packed, kernel, sizes, chunks=((1,) * Xr.numblocks[0], (sum(sizes),)),
                             dtype=float)
    else:
        Xr = X.rechunk({1: -1})
        yr = labels.rechunk({0: Xr.chunks[0]})
        rows = da.concatenate([
            da.from_delayed(dask_delayed(_packed)(b, kernel, sizes, lab), shape=(1, sum(sizes)), dtype=float)
            for b, lab in zip(Xr.to_delayed().ravel(), yr.to_delayed().ravel(), strict=True)])
    total = np.asarray(rows.sum(axis=0, split_every=SPLIT_EVERY).compute())
    out, start = [], 0
    for shape, size in zip(shapes, sizes, strict=True):
        out.append(total[start:start + size].reshape(shape))
        start += size
    return tuple(out)


def _piece_sums(piece: _Piece, source: _Source, kernel: Callable[..., Any], sizes: tuple[int, ...],
                label_source: _Source | None = None) -> np.ndarray:
    """``kernel`` summed over the batches of one partition, packed as :func:`_packed`; with
    ``label_source``, ``kernel(rows, labels)`` with the labels of the same batch (one read)."""
    total = np.zeros((1, sum(sizes)))
    for ds in _batches(piece, source.options):
        labels = None if label_source is None else _from_batch(ds, label_source)[:, 0]
        total += _packed(_from_batch(ds, source), kernel, sizes, labels)
    return total


def row_map(kernel: Callable[[np.ndarray], np.ndarray], X: Any, n_columns: int) -> Any:
    """``kernel`` applied to every partition of ``X`` (a row-wise map): a lazy Dask array of shape
    ``(n, n_columns)`` with ``X``'s row partitions. Over a table's rows the kernel joins the
    partition task's chain (applied batch by batch after reading, checking and clipping)."""
    fused = _fused(X)
    if fused is not None:
        pieces, source = fused
        return _source_array(pieces, tuple(int(c) for c in X.chunks[0]),
                             replace(source, maps=(*source.maps, kernel)), n_columns)
    Xr = X.rechunk({1: -1})
    return Xr.map_blocks(kernel, chunks=(Xr.chunks[0], (n_columns,)), dtype=float)


def unit_rows_pass(loader: Any, kernel: Callable[..., Any]) -> tuple[None, np.ndarray, int, None]:
    """RON-Gauss pass 1 over a Dask array (``kernel`` is ``ron_gauss._unit_rows_pass``): the sum
    of the unit-normalised rows and the number of zero rows, summed over partitions. The per-row
    ``1/||x||`` and cancellation positions stay with their partitions: :func:`projection_pass`
    recomputes them there (they are row-wise), so ``None`` is returned for both."""
    if loader.rows is not None:
        raise ValueError("per-class row selections are not supported on the Dask engine yet")
    kernel_loader = replace(loader, X=None)  # the tasks get their partition, never the whole array
    total, n_zero = block_sums(partial(_unit_rows_block, loader=kernel_loader, kernel=kernel), loader.X)
    return None, total, int(n_zero), None


def _unit_rows_block(block: np.ndarray, loader: Any, kernel: Callable[..., Any]) -> tuple[np.ndarray, int]:
    _, total, n_zero, _ = kernel(replace(loader, X=block))
    return total, n_zero


def projection_pass(loader: Any, W: np.ndarray, mu: np.ndarray | None, unit_kernel: Callable[..., Any],
                    kernel: Callable[..., Any]) -> tuple[Any, None]:
    """RON-Gauss pass 2 over a Dask array: per partition, pass 1 and pass 2 of the in-memory
    kernels (``ron_gauss._unit_rows_pass``, ``ron_gauss._projection_pass``) on that partition's rows,
    giving the lazy projected rows ``Z`` (``(n, p)``, one block per partition). The count of rows
    zeroed after centring (a diagnostic) is not computed: ``None``."""
    return row_map(partial(_projection_block, loader=replace(loader, X=None), W=W, mu=mu,
                           unit_kernel=unit_kernel, kernel=kernel), loader.X, W.shape[1]), None


def _projection_block(block: np.ndarray, loader: Any, W: np.ndarray, mu: np.ndarray | None,
                      unit_kernel: Callable[..., Any], kernel: Callable[..., Any]) -> np.ndarray:
    part = replace(loader, X=block)
    inv_norms, _, _, direct = unit_kernel(part)
    return np.ascontiguousarray(kernel(part, inv_norms, W, mu, direct)[0])


# ------------------------------------------------------------------------------------ projections
def noisy_projection(inp: Any, P: np.ndarray, noise: Any, kernel: Callable[..., np.ndarray]) -> Any:
    """JL-Laplace / DPPro over a Dask array ``inp.raw``: the lazy branch of
    ``jl_laplace.ProjectionInput.project`` (``kernel``). Each partition's ``X P`` is computed by the
    in-memory kernel on the workers and gets the grid noise of ``noise`` in the same task, from that
    partition's own stream of the release's sampler (:func:`partition_noise`). ``noise=None`` (NOT
    PRIVATE): the lazy product."""
    Y = row_map(partial(_project_block, inp=replace(inp, raw=None), P=P, kernel=kernel), inp.raw, P.shape[1])
    if noise is None:
        return Y
    return partition_noise(noise, Y)


def gaussian_mechanism(values: Any, l2_sensitivity: float, calibrate: Callable[[float], float], *,
                       n_changed: int, bits: Any) -> Any:
    """:func:`dpcore.noise.gaussian_mechanism` for a Dask array of rows (LocalGaussian): the same
    calibrated grid plan, its noise drawn in each partition's task (:func:`partition_noise`).
    Returns a :class:`dpcore.noise.NoiseDraw` whose ``values`` are lazy."""
    from dpcore import noise as dpnoise

    return add_grid_noise(
        dpnoise.calibrated_gaussian_plan(l2_sensitivity, calibrate, n_changed=n_changed, bits=bits), values)


def add_grid_noise(plan: Any, values: Any) -> Any:
    """``plan.add(values)`` (:class:`dpcore.noise.GridNoise`) for a lazy array of rows: the grid
    noise is drawn in each partition's task from that partition's own stream of the release's
    sampler (:func:`partition_noise`). Returns a :class:`dpcore.noise.NoiseDraw` whose ``values``
    are lazy. A lazy array of one block (a statistic reduced over the row partitions, such as a
    mean) is computed and noised in memory, as any statistic."""
    from dpcore import noise as dpnoise

    if values.numblocks[0] == 1:
        return plan.add(np.asarray(values.compute(), dtype=np.float64))
    return dpnoise.NoiseDraw(
        values=partition_noise(plan, values), grid=plan.grid,
        scale=plan.scale, sensitivity_used=plan.sensitivity_used, distribution=plan.distribution,
        sampler=plan.sampler, extra_epsilon=plan.extra_epsilon, extra_delta=plan.extra_delta,
        n_changed=plan.n_changed, sigma_grid=plan.sigma_grid)


def partition_noise(plan: Any, values: Any) -> Any:
    """``plan.apply(block, plan.draw(block.shape))`` for every row partition of the lazy ``values``,
    inside that partition's task: the per-row grid noise of :class:`dpcore.noise.GridNoise`, drawn
    where the rows are computed instead of serially on the client.

    Partition ``i`` draws from :class:`dpcore.noise.DerivedBits` ``(secret, i)``: the same exact
    sampler (``plan.draw``), on a ChaCha20 stream keyed by HMAC-SHA256 of one fresh 256-bit
    ``secret`` per call and the partition's index (:func:`dpcore.noise.stream_secret`: from
    ``os.urandom`` for a secure ``plan``, held in memory in the task graph only, never written; on a
    cluster it travels with the tasks to the workers, which hold the rows anyway; from the seeded
    generator for a preview, so a seed gives the same release). Distinct partitions have
    independent streams, so every cell gets an independent exact draw of the plan's distribution:
    the same distribution, scale, card and guarantee as drawing them all on the client. A
    partition computed twice (a second compute of the release, a retried task) gets the same noise,
    never a second independent draw: the stream is a function of ``(secret, i)``. The graph's key
    names are random, never derived from the secret.

    Returns
    -------
    dask.array.Array
        float64, ``values``' shape, rows partitioned as ``values``, full width.
    """
    import secrets as _secrets

    from dpcore import noise as dpnoise

    secret, secure = (b"", True) if plan.distribution == "none" else dpnoise.stream_secret(plan.bits)
    values = values.rechunk({1: -1}) if values.ndim == 2 else values
    return values.map_blocks(_noised_block, replace(plan, bits=None), secret, secure, dtype=np.float64,
                             name=f"dpcore-noise-{_secrets.token_hex(16)}")


def _noised_block(block: np.ndarray, plan: Any, secret: bytes, secure: bool,
                  block_id: tuple[int, ...] = (0,)) -> np.ndarray:
    """One partition of :func:`partition_noise` (``block_id[0]``: the partition's index)."""
    from dpcore import noise as dpnoise

    block = np.asarray(block, dtype=np.float64)
    if plan.distribution == "none":
        return plan.apply(block, np.zeros(block.shape, dtype=np.int64))
    plan = replace(plan, bits=dpnoise.DerivedBits(secret, block_id[0], secure=secure))
    # i.i.d. cells: drawn transposed, so the noisy block is column-major (the writer's DataFrame then
    # takes its columns without a copy, as for the drawn synthetic rows)
    return plan.apply(block, plan.draw(block.shape[::-1]).T)


def column_stack(blocks: list[Any]) -> Any:
    """``np.column_stack(blocks)``, lazily when a block is a Dask array (``np.column_stack`` would
    load it into memory): the lazy blocks side by side, empty ``(n, 0)`` blocks dropped.

    Raises
    ------
    ValueError
        A non-empty in-memory block beside a lazy one (the engine never mixes them).
    """
    if not any(is_lazy(b) for b in blocks):
        return np.column_stack(blocks)
    import dask.array as da

    kept = [b for b in blocks if not (not is_lazy(b) and np.ndim(b) == 2 and np.shape(b)[1] == 0)]
    if any(not is_lazy(b) for b in kept):
        raise ValueError("column_stack: an in-memory block beside a Dask array")
    kept = [b[:, None] if b.ndim == 1 else b for b in kept]
    if len(kept) == 1:
        return kept[0]
    # full-width row partitions, as everywhere in the engine (a reduction over rows is then one block)
    return da.concatenate([b.rechunk({0: kept[0].chunks[0]}) for b in kept], axis=1).rechunk({1: -1})


def client_map(values: Any, finish: Callable[[np.ndarray], np.ndarray]) -> Any:
    """``finish`` applied on the client to the partitions of a lazy array, in row order (noise
    drawn with the release's sampler, e.g. randomized response of the labels); the results are
    spilled to temporary files and returned as a lazy array."""
    return _client_rows(values, finish)


def take(table: np.ndarray, indices: Any) -> Any:
    """``table[indices]`` for a lazy ``indices`` (``np.ndarray[dask_array]`` would load it)."""
    return indices.map_blocks(lambda block: table[block], dtype=table.dtype)


def escaped_cells(labels: Any, escape: Callable[[str], str]) -> int:
    """How many text cells of lazy ``labels`` ``escape`` changes (:meth:`Release.csv_escaping`),
    counted per partition (with local threads when they were spilled on the client's disk: a
    cluster's workers on other hosts cannot read those files)."""
    if labels.dtype.kind not in "OUS":
        return 0
    labels = labels if labels.ndim == 1 else labels.rechunk({1: -1})
    counts = labels.map_blocks(lambda b: np.full((1,) * b.ndim, sum(isinstance(v, str) and escape(v) != v
                                                                    for v in b.ravel())),
                               chunks=((1,) * labels.numblocks[0],) + ((1,) if labels.ndim == 2 else ()),
                               dtype=np.int64)
    # labels spilled on the client's disk (DPMix's, randomised response's) load only there
    return int(counts.sum().compute(**({"scheduler": "threads"} if _spilled(labels) else {})))


def _project_block(block: np.ndarray, inp: Any, P: np.ndarray, kernel: Callable[..., np.ndarray]
                   ) -> np.ndarray:
    return kernel(replace(inp, raw=block), P, None)


def _client_rows(Y: Any, finish: Callable[[np.ndarray], np.ndarray]) -> Any:
    """``finish`` (noise from the client's sampler) applied to the partitions of ``Y`` in order, on
    the client; the partitions are computed a few at a time (one per CPU) and spilled to a
    temporary directory. Returns the lazy array over the spilled blocks."""
    import dask
    import dask.array as da

    blocks = (Y.rechunk({1: -1}) if Y.ndim == 2 else Y).to_delayed().ravel()
    step = max(1, os.cpu_count() or 1)
    spill, parts = _Spill(), []
    dtype = float if Y.dtype.kind == "f" else Y.dtype
    for start in range(0, len(blocks), step):
        for i, block in enumerate(dask.compute(*blocks[start:start + step]), start=start):
            parts.append(spill.lazy(i, finish(np.array(block, dtype=dtype))))
    return da.concatenate(parts, axis=0)


# ------------------------------------------------------------------------------------ DPMix
class _Spill:
    """A temporary directory of client-written chunks, removed when no graph refers to it."""

    def __init__(self) -> None:
        import weakref

        self.path = Path(tempfile.mkdtemp(prefix="dpcore_mixtures_"))
        weakref.finalize(self, shutil.rmtree, str(self.path), True)

    def save(self, i: int, values: np.ndarray) -> Path:
        path = self.path / f"chunk-{i:06d}.npy"
        np.save(path, values)
        return path

    def lazy(self, i: int, values: np.ndarray) -> Any:
        """``values`` saved as chunk ``i``, as a lazy array that loads it (its graph layer is named
        with :data:`_SPILL_PREFIX`: :func:`_spilled` finds it)."""
        import dask.array as da

        return da.from_delayed(dask_delayed(_load_chunk)(self, self.save(i, values)), shape=values.shape,
                               dtype=values.dtype, name=f"{_SPILL_PREFIX}{Path(self.path).name}-{i}")


#: name prefix of the graph layers that load a client's spilled chunk
_SPILL_PREFIX = "dpcore-spilled-"


def _spilled(*arrays: Any) -> bool:
    """True when a lazy array among ``arrays`` loads chunks spilled on the client's disk (these can
    only be computed where the client's temporary directory is: with local threads)."""
    return any(is_lazy(a) and any(str(name).startswith(_SPILL_PREFIX) for name in a.__dask_graph__().layers)
               for a in arrays)


def _load_chunk(spill: _Spill, path: Path) -> np.ndarray:
    return np.load(path)


#: the largest lookup table (entries) :func:`pairs_by_partition` builds to find rows' partitions
PARTITION_TABLE_MAX = 1 << 20


def pairs_by_partition(idx: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``(mixture, row)`` pairs of the index sets ``idx`` (``(m, ell)``) grouped by the partition
    holding the row (``offsets``: first row of each partition, then ``n``), mixture-major within a
    partition. Returns ``(local rows, mixtures, cuts)``: partition ``p``'s pairs are
    ``cuts[p]:cuts[p + 1]``, its rows counted from its first row."""
    flat = idx.ravel()  # mixture-major
    unit = int(np.gcd.reduce(offsets))  # every partition is a whole number of units of rows
    if unit and offsets[-1] // unit <= PARTITION_TABLE_MAX:
        # a table of the partition of each unit (n / unit entries, at most PARTITION_TABLE_MAX;
        # 100 for files of 750,000 + 250,000 rows) indexed by flat // unit (a scalar divisor:
        # fast), instead of a binary search per pair
        table = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets) // unit)
        part = table[flat // unit]
    else:
        part = np.searchsorted(offsets, flat, side="right") - 1
    order = np.argsort(_small_ints(part, len(offsets)), kind="stable")  # a radix sort when it can
    counts = np.bincount(part, minlength=len(offsets) - 1)
    # sorted by partition, so each pair's partition start is a run of equal values: a repeat
    local = flat[order] - np.repeat(offsets[:-1], counts)
    return local, order // idx.shape[1], np.concatenate([[0], np.cumsum(counts)])


def _piece_partial_sums(piece: _Piece, source: _Source, rows: np.ndarray, mixtures: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_partial_sums` of a file partition, reading only what the pairs use: every batch is
    read and checked by the loader (a bad value in any row raises, used or not), but only the rows
    the pairs name are kept (gathered, in row order, into one compact array: about
    ``1 - exp(-T ell / n)`` of a partition, 27% for ``ell`` = 16 and ``T`` = n / 50), and only they
    are clipped and mapped (``source``'s clipping and row maps are row-wise, so mapping then
    gathering and gathering then mapping give the same values). The pairs' columns are
    renumbered into the compact rows, in the same order, so the sums are the same floating-point
    sums."""
    keep = np.zeros(piece.rows if piece.rows is not None else int(rows.max(initial=-1)) + 1, dtype=bool)
    keep[rows] = True
    used = np.flatnonzero(keep)  # the partition's rows the pairs name, increasing
    compact: np.ndarray | None = None
    start = 0
    for ds in _batches(piece, source.options):
        stop = start + ds.X.shape[0]
        lo, hi = np.searchsorted(used, (start, stop))
        values = _from_batch(ds.subset(used[lo:hi] - start), source)  # a copy: clipped in place
        if compact is None:
            compact = np.empty((used.size, values.shape[1]), dtype=values.dtype)
        compact[lo:hi] = values
        start = stop
    if used.size and used[-1] >= start:
        raise DataValidationError(f"{piece.label()}: {start:,} rows read where row {used[-1]:,} was "
                                  "expected: the file changed since the table was opened")
    if compact is None:  # no batch at all (an empty file)
        compact = np.empty((0, 0))
    position = np.cumsum(keep) - 1  # position[r]: row r's index in the compact rows
    return _partial_sums(compact, position[rows], mixtures)


def _small_ints(values: np.ndarray, bound: int) -> np.ndarray:
    """``values`` (in ``[0, bound)``) as ``uint16`` when they fit: NumPy's stable sort is then a
    radix sort."""
    return values.astype(np.uint16) if bound <= 1 << 16 else values


def _partial_sums(block: np.ndarray, rows: np.ndarray, mixtures: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sums of ``block``'s rows per mixture, for pairs ``(rows[i], mixtures[i])`` in mixture
    order (:func:`pairs_by_partition`): ``(ids, sums)`` with ``ids`` the distinct mixtures of the
    pairs (increasing) and ``sums[j] = sum of block[rows[i]] over the pairs i of mixture ids[j]``,
    shape ``(ids.size, w)``. One sparse 0/1 matrix ``S`` (a row per distinct mixture, a column per
    row of ``block``; CSR built directly from the sorted pairs, no sort) times ``block``: SciPy's
    sparse-dense product, one C loop over the pairs, no gathered copy of the rows and no scattered
    additions (the caller adds ``sums`` into its mixtures once per partition)."""
    from scipy import sparse

    block = np.ascontiguousarray(block, dtype=np.float64)  # the product's C loop reads C-order rows
    if rows.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, block.shape[1]))
    first = np.flatnonzero(np.r_[True, mixtures[1:] != mixtures[:-1]])  # mixtures[first] distinct
    pairs = sparse.csr_matrix((np.ones(rows.size), rows, np.append(first, rows.size)),
                              shape=(first.size, block.shape[0]))
    return mixtures[first], pairs @ block


def draw_mixtures(Z: Any, ell: int, n_mixtures: int, rng: np.random.Generator, plans: list[Any], *,
                  sample_indices: Callable[..., np.ndarray], method: str, noise_rows: Callable[..., Any],
                  dtype: Any, finish: Callable[[np.ndarray], np.ndarray] | None = None) -> Any:
    """DPMix over a Dask array ``Z`` (``n`` scaled rows of width ``w``), the lazy branch of
    :func:`dpcore.mechanisms.dpmix.draw_mixtures`, with the same randomness.

    The ``(T, ell)`` index sets are drawn on the client from the public ``n``, chunk after chunk,
    from the first child of ``rng.spawn(2)`` with ``sample_indices`` (uniform ``ell``-subsets,
    independent per mixture; the stream does not depend on the chunking, so a seed gives the
    in-memory path's index sets). Per chunk of mixtures, the client groups the pairs by partition
    (:func:`pairs_by_partition`, a stable sort), every partition gathers its rows and sums them into
    their mixtures (:func:`_partial_sums`). The client divides by ``ell``, adds the grid
    Gaussian noise of ``plans`` with the release's sampler, in the same fixed order as in memory
    (``noise_rows`` is ``dpmix._NoiseRows``; the chunk's noise is drawn by a second client thread
    while the partitions are summed), applies ``finish`` (post-processing: DPMix's
    denoising filter), and spills the chunk to a temporary file. Returns a lazy ``(T, w)`` array over
    those files. The first chunk reads every partition, including those no index set of it names,
    so that every row is checked (the loader's errors) whatever index sets were drawn.
    Cost: one read of ``Z`` per chunk of :data:`MIXTURE_CHUNK_BYTES` / (8 w) mixtures;
    the partial sums are added in place on the client (local scheduler) or in a tree on the
    workers (:func:`_sum_partials`).
    """
    import dask.array as da

    n, w = Z.shape
    fused = _fused(Z)
    Z = Z.rechunk({1: -1})
    offsets = np.concatenate([[0], np.cumsum(Z.chunks[0])])
    if fused is not None:  # each task reads its partition batch by batch and gathers from the batches
        blocks = [partial(dask_delayed(_piece_partial_sums), piece, fused[1]) for piece in fused[0]]
    else:
        blocks = [partial(dask_delayed(_partial_sums), block) for block in Z.to_delayed().ravel()]
    idx_rng, _ = rng.spawn(2)  # as dpmix.draw_mixtures: indices from the first child
    streams = [(sl, plan, noise_rows(plan, sl.stop - sl.start, n_mixtures)) for sl, plan in plans]
    step = max(1, MIXTURE_CHUNK_BYTES // (8 * max(1, w)))
    spill, parts = _Spill(), []
    client = _cluster_client()
    with ThreadPoolExecutor(1) as noise_thread:
        for i, start in enumerate(range(0, n_mixtures, step)):
            m = min(step, n_mixtures - start)
            # the chunk's noise is drawn by another thread (streams in their fixed order, nothing
            # else draws from them meanwhile) while the index sets are drawn (from their own
            # stream) and the partitions' rows are read and summed
            noise = noise_thread.submit(lambda m=m: [stream.take(m) for _, _, stream in streams])
            rows, mixtures, cuts = pairs_by_partition(sample_indices(n, ell, m, idx_rng, method=method),
                                                      offsets)
            # the first chunk reads every partition, those its index sets miss included, so every
            # row is checked whatever rows were drawn: whether the release is refused (a bad value,
            # a file that changed) must not depend on the secret index sets
            used = [(p, rows[lo:hi], mixtures[lo:hi])
                    for p, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)) if hi > lo or i == 0]
            if client is not None:  # the pairs go to the workers as data, not inside the task graph
                used = [(p, *client.scatter([r, mx])) for p, r, mx in used]
            partials = [blocks[p](r, mx) for p, r, mx in used]
            block = _sum_partials(partials, m, w) / ell
            block = block.astype(dtype, copy=False)
            for (sl, plan, _), values in zip(streams, noise.result(), strict=True):
                block[:, sl] = plan.apply(block[:, sl], values)
            if finish is not None:  # post-processing of the noisy chunk (dpmix._denoise)
                block = finish(block)
            parts.append(spill.lazy(i, block))
    return da.concatenate(parts, axis=0)


def _sum_partials(partials: list[Any], m: int, w: int) -> np.ndarray:
    """The ``(m, w)`` sum of the partitions' partial sums (delayed ``(ids, sums)`` of
    :func:`_partial_sums`). On the local scheduler, the partitions are computed on a pool of one
    thread per CPU, at most two per CPU in flight, and the client adds each one's sums into its
    mixtures as it arrives (while the next ones are computed), so at most that many partial sums
    are held besides the total. On a ``distributed`` cluster, each partition's sums are spread
    into an ``(m, w)`` array on its worker and those are added in a tree on the workers (four per
    node, to bound their memory)."""
    import dask
    import dask.array as da

    if _cluster_client() is None:
        total = np.zeros((m, w))
        workers = max(1, os.cpu_count() or 1)
        bar = _Bar(_BAR_STREAM.get(), len(partials))
        with ThreadPoolExecutor(workers) as pool:
            pending: list[Any] = []
            for part in [*partials, None]:
                if part is not None:
                    # callbacks=(): each partition's compute runs without Dask's global callbacks
                    # (a progress bar per partition, whose stop waits for its timer, and their
                    # swaps of the global set from two threads); _Bar shows the partitions instead
                    pending.append(pool.submit(dask.compute, part, scheduler="synchronous", callbacks=()))
                while pending and (part is None or len(pending) >= 2 * workers):
                    (ids, sums), = pending.pop(0).result()
                    total[ids] += sums
                    bar.advance()
        bar.close()
        return total
    dense = [da.from_delayed(dask_delayed(_spread)(p, m), shape=(m, w), dtype=float) for p in partials]
    return np.asarray(da.stack(dense).sum(axis=0, split_every=4).compute())


class _Bar:
    """A progress bar over ``total`` steps of a loop of the client (Dask's bar's look, on
    ``stream``; nothing if None)."""

    def __init__(self, stream: Any | None, total: int) -> None:
        import time

        self.stream, self.total, self.done, self.start = stream, max(1, total), 0, time.perf_counter()

    def advance(self) -> None:
        import time

        from dask.utils import format_time

        self.done += 1
        if self.stream is not None:
            frac = self.done / self.total
            elapsed = format_time(time.perf_counter() - self.start)
            self.stream.write(f"\r[{'#' * int(40 * frac):<40}] | {int(100 * frac)}% Completed | {elapsed}")
            self.stream.flush()

    def close(self) -> None:
        if self.stream is not None and self.done:
            self.stream.write("\n")
            self.stream.flush()


def _spread(partial_sums: tuple[np.ndarray, np.ndarray], m: int) -> np.ndarray:
    """``(ids, sums)`` of :func:`_partial_sums` as the ``(m, w)`` array with ``sums`` at rows ``ids``."""
    ids, sums = partial_sums
    out = np.zeros((m, sums.shape[1]))
    out[ids] = sums
    return out


def _cluster_client() -> Any | None:
    """The ``distributed`` client of the current context, or None (Dask's local schedulers)."""
    try:
        from distributed import get_client

        return get_client()
    except (ImportError, ValueError):
        return None


def dask_delayed(fn: Callable[..., Any]) -> Callable[..., Any]:
    import dask

    return dask.delayed(fn, pure=True)


# ------------------------------------------------------------------------------------ lazy outputs
@contextlib.contextmanager
def lazy_output(rows_per_partition: int) -> Iterator[None]:
    """While active, :func:`standard_normal` and :func:`gaussian_rows` return lazy Dask arrays in
    partitions of ``rows_per_partition`` rows instead of drawing in memory."""
    token = _OUTPUT_ROWS.set(int(rows_per_partition))
    try:
        yield
    finally:
        _OUTPUT_ROWS.reset(token)


def output_rows() -> int | None:
    """Rows per lazy output partition, or ``None`` outside :func:`lazy_output`."""
    return _OUTPUT_ROWS.get()


def needs_lazy_output(X: Any) -> bool:
    """True for a table larger than memory (:func:`is_lazy_input`) outside :func:`lazy_output`:
    a mechanism's ``explore`` then opens it and draws its rows lazily (:func:`lazy_output_for`),
    in parts of the table's public size, whether called by :func:`release_table` or directly
    (a synthetic release would otherwise draw its n rows in memory)."""
    return is_lazy_input(X) and output_rows() is None


@contextlib.contextmanager
def lazy_output_for(X: Any) -> Iterator[LazyTable]:
    """``X`` opened (:func:`open_table`) with the lazy output of its public part size active."""
    table = open_table(X)
    with lazy_output(table.part_rows):
        yield table


def _normal_block(rng: np.random.Generator, rows: int, k: int, factor_t: np.ndarray | None,
                  mean: np.ndarray | None) -> np.ndarray:
    """``rows`` i.i.d. draws ``z F + mean``, ``z ~ N(0, I_k)``, as a column-major ``(rows, k)`` array:
    drawn and transformed transposed (``F^T z^T``), so the writer's DataFrame takes the columns
    without a copy (a row-major block costs a transposing copy per partition). Drawn from a copy
    of ``rng`` (the task graph's own stays unused): computing the lazy release again, as its
    writer or its reader, gives the same rows."""
    out = copy.deepcopy(rng).standard_normal((k, rows))
    if factor_t is not None:
        out = factor_t.T @ out
    if mean is not None:
        out += np.asarray(mean, dtype=float)[:, None]
    return out.T


def _lazy_normal(rng: np.random.Generator, size: int, k: int, factor_t: np.ndarray | None,
                 mean: np.ndarray | None) -> Any:
    import dask
    import dask.array as da

    step = output_rows() or size
    starts = list(range(0, size, step))
    children = rng.spawn(len(starts))  # independent streams from the release's public generator
    blocks = [da.from_delayed(dask.delayed(_normal_block)(child, min(step, size - s), k, factor_t, mean),
                              shape=(min(step, size - s), k), dtype=float)
              for child, s in zip(children, starts, strict=True)]
    return da.concatenate(blocks, axis=0) if blocks else da.zeros((0, k), chunks=(1, k))


def standard_normal(rng: np.random.Generator, shape: tuple[int, int]) -> Any:
    """``rng.standard_normal(shape)``; inside :func:`lazy_output` the same distribution drawn per
    output partition, lazily (``shape[0]`` may then exceed memory)."""
    if output_rows() is None:
        return rng.standard_normal(shape)
    return _lazy_normal(rng, int(shape[0]), int(shape[1]), None, None)


def gaussian_rows(factor_t: np.ndarray, mean: np.ndarray, size: int, rng: np.random.Generator) -> Any:
    """``size`` lazy draws ``z F + mean`` of ``N(mean, F^T F)`` (``F = factor_t``), per output
    partition (the lazy branch of :func:`dpcore.mechanisms.ron_gauss.gaussian_samples`)."""
    return _lazy_normal(rng, int(size), int(factor_t.shape[0]), factor_t, np.asarray(mean, dtype=float))


# ------------------------------------------------------------------------------------ writing
def _checked_partition(frame: Any) -> Any:
    values = frame.select_dtypes("number").to_numpy()
    bad = int(np.count_nonzero(~np.isfinite(values)))
    if bad:
        raise NonFiniteNoiseError(f"the released table has {bad:,} NaN/inf value(s) in a partition; nothing "
                                  "is released: the noise overflows float64 arithmetic, use a larger epsilon")
    return frame


def _csv_line_end(release: Release) -> str:
    """The line end of every CSV part: ``"\\r\\n"`` where a column name or a class of the public
    class list holds a CR (as the in-memory CSV, where such a value appears: see
    :func:`dpcore.release.spreadsheet_safe_csv_chunks`), else ``"\\n"``; decided once, from public
    facts, not from what each part holds."""
    names = [*release.columns, *release.label_columns, *(release.public_facts.get("classes") or [])]
    return "\r\n" if any(isinstance(v, str) and "\r" in v for v in names) else "\n"


def _write_csv_part(frame: Any, path: Path, lineterminator: str) -> None:
    """One CSV part, written piece by piece as the in-memory release's CSV
    (:meth:`Release.to_csv_bytes`: number format, escaping)."""
    from dpcore.release import CSV_FLOAT_FORMAT, spreadsheet_safe_csv_chunks

    with open(path, "wb") as fh:
        for chunk in spreadsheet_safe_csv_chunks(frame, float_format=CSV_FLOAT_FORMAT,
                                                 lineterminator=lineterminator):
            fh.write(chunk)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_release(release: Release, output: str | os.PathLike, *, fmt: str = "parquet",
                  progress: bool = False, diagnostics: dict[str, Any] | None = None,
                  commit: Callable[[dict[str, Any]], Callable[[], None] | None] | None = None,
                  part_rows: int | None = None) -> dict[str, Path]:
    """Write ``release`` into the directory ``output``: ``part-*.parquet`` (or ``part-*.csv``),
    ``card.json`` and, if any, ``transform.npz``, partition by partition.

    Releases with parts already on the client's disk (:func:`_spilled`: DPMix's mixtures, labels
    noised on the client) are written with local threads; the others (synthetic rows, noisy
    projections) are drawn and written by the workers, so on a cluster ``output`` must be a path the
    workers can write (a shared file system).
    Everything is written into a temporary directory beside ``output`` and renamed into place at
    the end: on any failure (a bad partition, a NaN in the release, a full disk) nothing is left.
    The card is :meth:`Release.card` with ``sha256`` the digest of the manifest (``name sha256``
    lines of the part files, sorted) and ``files`` the digest of each part. ``diagnostics`` (the
    exploration facts of :meth:`Mechanism.explore`, never written): its lazy entries are computed in
    the same pass as the write. ``commit`` (e.g. a privacy ledger's): called with the card once every
    file is written, before the folder is renamed into place; it may return an undo, called if the
    rename fails (an exception from ``commit`` itself leaves nothing written).

    The parts' row counts are published, so they are public facts: the released rows are
    regrouped into parts of ``part_rows`` rows (the last holds the rest; a public choice,
    :attr:`LazyTable.part_rows`; default :func:`public_part_rows` of :data:`DEFAULT_BLOCKSIZE` and
    the release's width), whatever partitions they were computed in: the input's partitions' row
    counts are not public (a CSV block's depend on its lines' lengths; Parquet row groups may be
    a file per class, or cut by bytes as Spark does).

    Raises
    ------
    NotPrivateError
        NOT PRIVATE releases and seeded previews (nothing is written).
    FileExistsError
        ``output`` exists and is not an empty directory.
    OutputBusyError
        Another release in flight writes ``output`` (the claim of :func:`dpcore.release.output_lock`,
        under which hidden temporary folders of killed releases to ``output`` are removed).
    """
    from dpcore.release import output_lock

    if fmt not in ("parquet", "csv"):
        raise ValueError(f"fmt must be 'parquet' or 'csv', got {fmt!r}")
    release.check_downloadable()

    out = Path(output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not an empty directory; choose a new output directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(out):  # no other release writes this folder meanwhile: a killed run's leftovers go
        _remove_stale_folders(out)
        return _write_release(release, out, fmt, progress, diagnostics, commit, part_rows)


def _temporary_folders(out: Path) -> list[Path]:
    """The hidden temporary folders :func:`write_release` makes beside ``out`` (``.<name>.XXXXXXXX``)."""
    pattern = re.compile(rf"\.{re.escape(out.name)}\.[a-z0-9_]{{8}}")
    try:
        names = os.listdir(out.parent)
    except OSError:
        return []
    return [out.parent / n for n in names if pattern.fullmatch(n) and (out.parent / n).is_dir()]


def _remove_stale_folders(out: Path) -> None:
    """Remove the temporary folders of killed releases to ``out`` (a SIGKILL leaves its partly
    written parts, gigabytes of them): called under the output's claim, so none is live."""
    for folder in _temporary_folders(out):
        shutil.rmtree(folder, ignore_errors=True)


def _write_release(release: Release, out: Path, fmt: str, progress: bool, diagnostics: dict[str, Any] | None,
                   commit: Callable[[dict[str, Any]], Callable[[], None] | None] | None,
                   part_rows: int | None) -> dict[str, Path]:
    """:func:`write_release`'s work, under the output's claim."""
    import dask
    import dask.array as da

    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        values = release.data
        rows = part_rows or public_part_rows(DEFAULT_BLOCKSIZE, values.shape[1])
        if not is_lazy(values):
            values = da.from_array(np.asarray(values), chunks=(rows, -1))
        frame = _release_frame(values, release, rows)
        frame = frame.map_partitions(_checked_partition, meta=frame._meta)
        if fmt == "csv":
            # the in-memory release's CSV writer (escaping, number format) per partition; part-00000.csv,
            # ... as the Parquet parts: the names sort in row order
            ending = _csv_line_end(release)
            job = [dask.delayed(_write_csv_part)(part, tmp / f"part-{i:05d}.csv", ending)
                   for i, part in enumerate(frame.to_delayed())]
        else:
            # no dictionary encoding of the float columns: their values are (almost) all distinct, and
            # building the dictionary before falling back to plain encoding cost 7x the write
            label_columns = list(release.label_columns) if release.labels is not None else []
            job = frame.to_parquet(tmp, write_index=False, compute=False,
                                   name_function=lambda i: f"part-{i:05d}.parquet",
                                   use_dictionary=label_columns or False)
        lazy_diag = {k: v for k, v in (diagnostics or {}).items() if is_lazy(v)}
        local = {"scheduler": "threads"} if _spilled(release.data, release.labels) else {}
        with _progress(progress), warnings.catch_warnings():
            # lazy diagnostics (array expressions) are computed in the same pass as the write
            warnings.filterwarnings("ignore", "Computing mixed collections", UserWarning)
            _, diag = dask.compute(job, lazy_diag, **local)
        if diagnostics is not None:
            diagnostics.update({k: v.item() if hasattr(v, "item") else v for k, v in diag.items()})
        parts = sorted(p for p in tmp.iterdir() if p.name.startswith("part-"))
        with ThreadPoolExecutor(max(1, os.cpu_count() or 1)) as pool:  # hashlib releases the GIL
            files = dict(zip([p.name for p in parts], pool.map(_sha256, parts), strict=True))
        manifest = "".join(f"{name} {digest}\n" for name, digest in files.items()).encode()
        card = release.card(csv_bytes=manifest)
        card.update({"format": fmt, "files": files, "engine": "dask", "noise_streams": NOISE_STREAMS,
                     "sha256_of": "the manifest: one 'name sha256' line per part file, sorted by name"})
        (tmp / "card.json").write_text(json.dumps(card, indent=2, allow_nan=False), encoding="utf-8")
        if release.transform_arrays:
            (tmp / "transform.npz").write_bytes(release.transform_npz_bytes())
        undo = commit(card) if commit is not None else None
        try:
            if out.exists():
                out.rmdir()
            os.replace(tmp, out)
        except BaseException:
            if undo is not None:
                undo()
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    written = {"card": out / "card.json", **{name: out / name for name in files}}
    if release.transform_arrays:
        written["transform"] = out / "transform.npz"
    return written


def _release_frame(values: Any, release: Release, rows: int) -> Any:
    """The released rows as a Dask DataFrame in partitions of ``rows`` rows (the last holds the
    rest), the labels (lazy or not) appended as the last columns (as :meth:`Release.to_frame`).
    Each partition is one task on the slices of the blocks it overlaps (blocks that already have
    ``rows`` rows are taken whole)."""
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    columns = list(release.columns)
    values = values.rechunk({1: -1})
    blocks = values.to_delayed().ravel()
    label_columns: list[str] = []
    label_blocks: list[Any] = [None] * len(blocks)
    meta_labels = None
    if release.labels is not None:
        labels = release.labels if is_lazy(release.labels) else da.from_array(np.asarray(release.labels))
        labels = labels.rechunk({0: values.chunks[0], **({1: -1} if labels.ndim == 2 else {})})
        label_columns = list(release.label_columns)
        label_blocks = list(labels.to_delayed().ravel())
        meta_labels = np.zeros((0,) + labels.shape[1:], labels.dtype)
    meta = _label_frame(np.zeros((0, values.shape[1])), meta_labels, columns, label_columns)
    edges = np.concatenate([[0], np.cumsum(values.chunks[0])])
    parts = []
    for start in range(0, values.shape[0], rows):
        stop = min(values.shape[0], start + rows)
        first, last = np.searchsorted(edges, start, "right") - 1, np.searchsorted(edges, stop, "left")
        pieces = [(blocks[k], label_blocks[k], int(max(start, edges[k]) - edges[k]),
                   int(min(stop, edges[k + 1]) - edges[k])) for k in range(first, last)]
        parts.append(dask_delayed(_part_frame)(pieces, columns, label_columns))
    return dd.from_delayed(parts, meta=pd.DataFrame(meta), verify_meta=False)


def _part_frame(pieces: list[tuple[np.ndarray, np.ndarray | None, int, int]], columns: list[str],
                label_columns: list[str]) -> Any:
    """One part's DataFrame from ``(values, labels, start, stop)`` slices of consecutive blocks."""
    if len(pieces) == 1 and pieces[0][2] == 0 and pieces[0][3] == len(pieces[0][0]):
        return _label_frame(pieces[0][0], pieces[0][1], columns, label_columns)
    values = np.concatenate([v[a:b] for v, _, a, b in pieces])
    labels = None if pieces[0][1] is None else np.concatenate([lab[a:b] for _, lab, a, b in pieces])
    return _label_frame(values, labels, columns, label_columns)


def _label_frame(values: np.ndarray, labels: np.ndarray | None, columns: list[str], label_columns: list[str]
                 ) -> Any:
    """One partition's DataFrame. Its float columns are the columns of a column-major copy of
    ``values`` (none when ``values`` is column-major already, as the drawn synthetic rows are):
    pandas and Arrow then take them without the transposing copies a row-major block costs."""
    import pandas as pd

    frame = pd.DataFrame(np.asfortranarray(values), columns=columns, copy=False)
    if labels is not None:
        lab = labels[:, None] if labels.ndim == 1 else labels
        for j, name in enumerate(label_columns):
            frame[name] = lab[:, j]
    return frame


@contextlib.contextmanager
def _progress(show: bool) -> Iterator[None]:
    """Dask's progress bar (local schedulers) or ``distributed.progress`` (a cluster client)."""
    if not show:
        yield
        return
    if _cluster_client() is None:
        from dask.diagnostics import ProgressBar

        # the terminal itself: Dask's bar redraws with carriage returns (no data in it), which a
        # control-escaping wrapper of sys.stdout (the CLI's) would print as text
        stream = sys.__stderr__ or sys.stderr
        token = _BAR_STREAM.set(stream)
        try:
            with ProgressBar(dt=1.0, out=stream):
                yield
        finally:
            _BAR_STREAM.reset(token)
        return
    yield  # a distributed client shows its progress on its dashboard


# ------------------------------------------------------------------------------------ API
#: Seconds a scheduler has to accept a connection and answer its handshake
#: (``DPCORE_SCHEDULER_TIMEOUT``); the Client's own timeout covers the connection only.
DEFAULT_SCHEDULER_TIMEOUT = 30.0


def scheduler_timeout() -> float:
    """``DPCORE_SCHEDULER_TIMEOUT`` seconds (default :data:`DEFAULT_SCHEDULER_TIMEOUT`)."""
    raw = os.environ.get("DPCORE_SCHEDULER_TIMEOUT", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_SCHEDULER_TIMEOUT
    except ValueError:
        value = float("nan")
    if not (0 < value < float("inf")):
        raise ValueError(f"the environment variable DPCORE_SCHEDULER_TIMEOUT={raw!r} is not a positive "
                         "number of seconds")
    return value


def check_scheduler(scheduler: str, timeout: float | None = None) -> None:
    """Refuse a ``--scheduler`` address that names no reachable scheduler, before any work: not a
    ``tcp://`` / ``tls://`` address with a port (an ``inproc://`` address lives in another process),
    or a listener that does not complete distributed's handshake within ``timeout`` seconds
    (:func:`scheduler_timeout`; a listener that accepts and never answers hung the release until it
    was killed).

    Raises
    ------
    DataValidationError
        Naming the address and what is wrong.
    """
    import asyncio

    from distributed.comm import connect as comm_connect
    from distributed.comm.addressing import parse_address, parse_host_port

    timeout = scheduler_timeout() if timeout is None else timeout
    try:
        scheme, location = parse_address(scheduler)
        if scheme not in ("tcp", "tls"):
            raise ValueError(f"an address {scheme}:// cannot be reached from this process")
        parse_host_port(location)
    except (ValueError, TypeError) as exc:
        raise DataValidationError(f"--scheduler {scheduler!r} is not the address of a scheduler ({exc}); "
                                  "give tcp://HOST:PORT (e.g. tcp://127.0.0.1:8786)") from None

    async def handshake() -> None:
        comm = await asyncio.wait_for(comm_connect(scheduler, timeout=timeout), timeout)
        comm.abort()

    try:
        asyncio.run(handshake())
    except TimeoutError:
        raise DataValidationError(f"the scheduler at {scheduler} did not answer within {timeout:g} s "
                                  "(DPCORE_SCHEDULER_TIMEOUT): is a Dask scheduler running there?") from None
    except OSError as exc:
        raise DataValidationError(f"cannot connect to the scheduler at {scheduler}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None


@contextlib.contextmanager
def connect(scheduler: str | None) -> Iterator[Any]:
    """A ``distributed.Client`` of the scheduler at ``scheduler`` (``tcp://host:8786``) while the
    block runs, after :func:`check_scheduler`; ``None``: Dask's local threaded scheduler (embedded,
    no server to start)."""
    if not scheduler:
        yield None
        return
    from distributed import Client

    check_scheduler(scheduler)
    with Client(scheduler, timeout=scheduler_timeout()) as client:
        yield client


@contextlib.contextmanager
def one_blas_thread(client: Any) -> Iterator[None]:
    """dpcore's BLAS rule (:func:`dpcore.threads.blas_limit`: one thread per task unless the
    environment says otherwise) while Dask's local threaded scheduler runs the tasks (``client``
    ``None``): its worker threads already use every core, and OpenBLAS's own threads inside each
    task's products then spin against them (measured with ``benchmarks/bench_dask.py`` at 4 x 10^6
    rows: RON-Gauss's statistics phase took 11.5 CPU s with the default threads, 7.7 with one).
    A ``distributed`` cluster's workers set this themselves (their nannies start them with
    ``OPENBLAS_NUM_THREADS=1``). The limit is lifted when the block ends."""
    if client is not None:
        yield
        return
    from dpcore.threads import blas_limit

    with blas_limit():
        yield


def release_table(
    mechanism: Any, source: Any, output: str | os.PathLike | None = None, *, n: int | None = None,
    n_samples: int | None = None, fmt: str = "parquet", scheduler: str | None = None,
    progress: bool = False, diagnostics: dict[str, Any] | None = None, **table_options: Any,
) -> tuple[Release, dict[str, Path]]:
    """Open ``source`` lazily, release it with ``mechanism`` and write the result to ``output``
    (the Python side of ``dpcore release ... --engine dask``).

    Parameters
    ----------
    mechanism : Mechanism
        A configured mechanism instance (``RONGauss(epsilon=1)``).
    source : see :func:`open_table` (or a :class:`LazyTable`)
    output : directory, optional
        Where :func:`write_release` writes; ``None``: nothing is written (the release stays lazy).
    n, **table_options
        :func:`open_table` arguments (``label``, ``bounds``, ``blocksize``...).
    scheduler : str, optional
        Address of a running ``distributed`` scheduler (:func:`connect`); default: Dask's local
        threaded scheduler, or the ``distributed`` client already active.
    progress : bool
        Show Dask's progress bar for each pass (local schedulers).
    diagnostics : dict, optional
        Filled with the exploration facts of :meth:`Mechanism.explore` (never written).

    Returns
    -------
    (Release, dict of written paths)
    """
    with connect(scheduler) as client, one_blas_thread(client), _progress(progress):
        table = open_table(source, n=n, **table_options)
        rel, diag = mechanism.explore(table, n_samples=n_samples)  # rows lazy: lazy_output_for
        from dpcore.decode import released_space_note

        # the parts are the mechanism's own space (DPMix's columns keep their names, scaled to [0, 1])
        in_memory = "drawn from a table in memory (the CLI's --engine memory, output space 'original')"
        rel = replace(rel, output_space="released", output_note=released_space_note(rel, original=in_memory))
        written = (write_release(rel, output, fmt=fmt, diagnostics=diag, part_rows=table.part_rows)
                   if output is not None else {})
        if diagnostics is not None:
            diagnostics.update(diag)
    return rel, written


def fits_in_memory(source: Any, fraction: float = 0.25) -> bool:
    """True when ``source``'s table, as float64 (rows x columns x 8 bytes), is at most ``fraction``
    of :func:`dpcore.limits.max_memory_bytes`: the CLI then uses the in-memory path (whose
    mechanisms hold a few copies of the table).

    The choice decides the release's form (one file, or a folder of parts), so it comes from
    public facts only: the row count (Parquet footers; a CSV file's line feeds, counted over its
    bytes until the table is known not to fit: the in-memory path takes the row count as public,
    as ``n``) and the number of columns,
    never the files' byte sizes, which depend on the values (their digits, their encoding). An
    unreadable file counts as fitting: the in-memory reader then reports what is wrong with it."""
    from dpcore.io import csv_field_count
    from dpcore.limits import max_memory_bytes

    most = fraction * max_memory_bytes() / 8  # cells
    cells = 0
    for path in expand_paths(source):
        if _kind(path) == "csv":  # counted until the table is known not to fit
            with open(path, "rb") as fh:
                head = fh.read(1 << 20)
                fields, lines = csv_field_count(head), head.count(b"\n")
                for chunk in iter(lambda: fh.read(8 << 20), b""):
                    lines += chunk.count(b"\n")
                    if cells + (lines - 1) * fields > most:
                        return False
            cells += max(0, lines - 1) * fields
        else:
            try:
                meta = _parquet_metadata(path)
            except DataValidationError:
                return True
            cells += meta.num_rows * meta.num_columns
        if cells > most:
            return False
    return True
