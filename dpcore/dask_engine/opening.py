"""Opening and planning a table larger than memory: the files named by a path or glob, their
partitions (CSV blocks of lines, runs of Parquet row groups), the public ``n``, the first rows that
resolve names, task and bounds as the in-memory loader does (:func:`open_table`), and the prepared
input of a mechanism (:func:`prepare_input`: the lazily read, checked and clipped rows and labels).
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcore.dask_engine.engine import ENGINE, lazy_output, output_rows
from dpcore.dask_engine.reading import (
    CSV_SUFFIXES,
    DEFAULT_BLOCKSIZE,
    PARQUET_SUFFIXES,
    _as_frame,
    _checked,
    _csv_blocks,
    _encoded_labels,
    _kind,
    _Options,
    _parquet_metadata,
    _Piece,
    _raw_frame,
    _read_partition,
    _Source,
    _source_array,
    _source_dtype,
    is_lazy,
    public_part_rows,
)
from dpcore.exceptions import DataValidationError

if TYPE_CHECKING:
    from dpcore.data import Dataset
    from dpcore.preprocessing import PreparedInput


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
#: rows of the first partition read on the client to resolve names, task and bounds
HEAD_ROWS = 1_000


def is_lazy_input(x: Any) -> bool:
    """True for what :meth:`Mechanism.release` hands to this engine: a :class:`LazyTable` or a
    Dask collection."""
    return isinstance(x, LazyTable) or is_lazy(x)


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
    return replace(small, X=clipped, y=labels, diagnostics={}, public_facts=facts, engine=ENGINE)


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


# ------------------------------------------------------------------------------------ lazy output
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
