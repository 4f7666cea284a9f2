"""The checks and messages every reader of :mod:`dpcore.io` shares: the input limits' messages, the
memory a table's reading needs (:func:`check_load_memory`), column names (:func:`check_column_names`)
and complex columns (:func:`refuse_complex_columns`).
"""

from __future__ import annotations

import pandas as pd

from dpcore import limits
from dpcore.exceptions import DataValidationError


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


#: Peak bytes reading a table needs per cell besides its text: the parsed frame, its float64 copy
#: and the missing-value mask (measured: a 199,000 x 1,000 CSV of 398 MB peaked at 3.6 GB, 18 bytes
#: per cell with the text; 24 leaves a margin).
LOAD_BYTES_PER_CELL = 24


def check_load_memory(n_rows: int, n_columns: int, what: str, *, text_bytes: int = 0) -> None:
    """Refuse, before it is parsed, a table whose reading would need more than
    :func:`dpcore.limits.max_memory_bytes` (:data:`LOAD_BYTES_PER_CELL` per cell plus its text)."""
    limits.check_memory(f"reading {what} ({n_rows:,} rows x {n_columns:,} columns)",
                        LOAD_BYTES_PER_CELL * n_rows * n_columns + text_bytes)


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
