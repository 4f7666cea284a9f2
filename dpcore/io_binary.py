"""Reading Parquet and ``.npz`` tables within the input limits: the Parquet footer's schema (names,
nested types, text encodings) and the decoded size of its row groups checked before any value is
decoded (:func:`check_parquet_schema`, :func:`check_parquet_size`), and the ``.npz`` headers before
the arrays are loaded. :func:`dpcore.io.read_table` is the entry.
"""

from __future__ import annotations

import io
import math
import zipfile
from typing import Any

import numpy as np
import pandas as pd

from dpcore import limits
from dpcore.exceptions import DataValidationError
from dpcore.io_checks import (
    NPZ_LABEL,
    _expands,
    check_column_names,
    check_load_memory,
    refuse_complex_columns,
)


def _read_parquet(raw: bytes, filename: str, cap: int) -> pd.DataFrame:
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


def _read_npz(raw: bytes, filename: str, cap: int) -> pd.DataFrame:
    if not raw.startswith(b"PK"):
        raise DataValidationError(
            f"{filename} is not a NumPy .npz archive (save one with numpy.savez(path, X=..., y=...))"
        )
    _npz_headers(raw, filename, cap)
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
