"""Resource limits checked *before* allocation (issue 17: small inputs must not exhaust a server).

Six limits, each with a default and an environment variable that changes it (read at every check,
so a test or a server can lower them without re-importing anything):

========================  ==========================  ===================================================
limit                     environment variable        default
========================  ==========================  ===================================================
decompressed input bytes  ``DPCORE_MAX_INPUT_BYTES``  1 GiB (the app also caps each upload at its limit)
table cells (rows x cols) ``DPCORE_MAX_CELLS``        200,000,000 (1.6 GB as float64)
classes of a label        ``DPCORE_MAX_CLASSES``      1,000
categories of a column    ``DPCORE_MAX_CATEGORIES``   1,000
Dask partitions           ``DPCORE_MAX_PARTITIONS``   20,000
peak memory of a release  ``DPCORE_MAX_MEMORY``       8 GiB
========================  ==========================  ===================================================

Byte values accept a suffix: ``512M``, ``8G``, ``1.5GiB``. Every refusal raises a ``ValueError``
subclass naming the figure and the limit, so the CLI exits 2 with one line and the app shows it.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

from dpcore.exceptions import DataValidationError

__all__ = [
    "ResourceLimitError",
    "check_cells",
    "check_memory",
    "check_n_categories",
    "check_n_classes",
    "env_bytes",
    "format_bytes",
    "max_cells",
    "max_categories",
    "max_classes",
    "max_input_bytes",
    "max_memory_bytes",
    "max_partitions",
]

GIB = 1 << 30
DEFAULT_MAX_INPUT_BYTES = GIB
DEFAULT_MAX_CELLS = 200_000_000
DEFAULT_MAX_CLASSES = 1_000
DEFAULT_MAX_CATEGORIES = 1_000
DEFAULT_MAX_PARTITIONS = 20_000
DEFAULT_MAX_MEMORY = 8 * GIB

_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_BYTES_RE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)


class ResourceLimitError(DataValidationError):
    """An input or a release would need more memory, cells or classes than the configured limit."""


def _env_number(var: str, default: int, *, byte_units: bool = False) -> int:
    raw = os.environ.get(var)
    if raw is None or not raw.strip():
        return default
    m = _BYTES_RE.fullmatch(raw) if byte_units else re.fullmatch(r"\s*[0-9]+\s*", raw)
    value = float(m.group(1)) * _SUFFIX[m.group(2).upper()] if (m and byte_units) else (
        float(raw) if m else math.nan)
    if not (math.isfinite(value) and value >= 1):
        raise ValueError(f"the environment variable {var}={raw!r} is not a positive "
                         f"{'size (e.g. 8G, 512M)' if byte_units else 'whole number'}")
    return int(value)


def env_bytes(var: str, default: int) -> int:
    """A byte size from the environment variable ``var`` (suffixes as the limits': ``256M``),
    ``default`` when unset; a ``ValueError`` naming the variable for anything else (servers built
    on :mod:`dpcore` use it for their own limits, e.g. the app's per-session memory budget)."""
    return _env_number(var, default, byte_units=True)


def max_input_bytes() -> int:
    """Largest decompressed size of an input file (``DPCORE_MAX_INPUT_BYTES``, default 1 GiB)."""
    return _env_number("DPCORE_MAX_INPUT_BYTES", DEFAULT_MAX_INPUT_BYTES, byte_units=True)


def max_cells() -> int:
    """Largest table, in rows x columns (``DPCORE_MAX_CELLS``, default 200 million)."""
    return _env_number("DPCORE_MAX_CELLS", DEFAULT_MAX_CELLS)


def max_classes() -> int:
    """Largest number of classes of a classification label (``DPCORE_MAX_CLASSES``, default 1,000)."""
    return _env_number("DPCORE_MAX_CLASSES", DEFAULT_MAX_CLASSES)


def max_categories() -> int:
    """Largest public category list of one column (``DPCORE_MAX_CATEGORIES``, default 1,000): each
    category becomes a one-hot column."""
    return _env_number("DPCORE_MAX_CATEGORIES", DEFAULT_MAX_CATEGORIES)


def max_partitions() -> int:
    """Largest number of partitions the Dask engine cuts a table into (``DPCORE_MAX_PARTITIONS``,
    default 20,000, 2.5 TB in blocks of 128 MiB): each is a task, planned and scheduled one by one."""
    return _env_number("DPCORE_MAX_PARTITIONS", DEFAULT_MAX_PARTITIONS)


def max_memory_bytes() -> int:
    """Largest estimated peak memory of one release (``DPCORE_MAX_MEMORY``, default 8 GiB)."""
    return _env_number("DPCORE_MAX_MEMORY", DEFAULT_MAX_MEMORY, byte_units=True)


def format_bytes(n_bytes: float) -> str:
    """``n_bytes`` in the largest binary unit that keeps the number >= 1 (``29.8 GiB``)."""
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1024
    return f"{value:.3g} PiB"  # pragma: no cover - the loop returns at TiB


def check_cells(n_rows: int, n_columns: int, what: str, limit: int | None = None) -> None:
    """Refuse a table of ``n_rows x n_columns`` cells over :func:`max_cells` (``what`` names it)."""
    limit = max_cells() if limit is None else limit
    if n_rows * n_columns > limit:
        raise ResourceLimitError(
            f"{what} has {n_rows:,} rows x {n_columns:,} columns = {n_rows * n_columns:,} cells, over "
            f"the limit of {limit:,} cells (DPCORE_MAX_CELLS): use fewer rows or columns"
        )


def check_n_classes(n_classes: int, label: Any = None, limit: int | None = None) -> None:
    """Refuse a classification label with more than :func:`max_classes` distinct values."""
    limit = max_classes() if limit is None else limit
    if n_classes > limit:
        named = f"label {label!r}" if label is not None else "the label"
        raise ResourceLimitError(
            f"{named} has {n_classes:,} classes, over the limit of {limit:,} (DPCORE_MAX_CLASSES): "
            "is it an identifier or a continuous value? Choose task 'regression' or another label"
        )


def check_n_categories(n_categories: int, column: Any, limit: int | None = None) -> None:
    """Refuse a public category list of more than :func:`max_categories` values (before any of
    its one-hot columns is made)."""
    limit = max_categories() if limit is None else limit
    if n_categories > limit:
        raise ResourceLimitError(
            f"the category list of column {column!r} has {n_categories:,} values, over the limit of "
            f"{limit:,} (DPCORE_MAX_CATEGORIES): each category is a one-hot column; is the column an "
            "identifier? Drop it, or group its values"
        )


def check_memory(what: str, n_bytes: float, limit: int | None = None) -> None:
    """Refuse work whose estimated peak memory ``n_bytes`` exceeds :func:`max_memory_bytes`.

    Raises
    ------
    ResourceLimitError
        Naming ``what`` (the parameters that drive the figure), the estimate and the limit.
    """
    limit = max_memory_bytes() if limit is None else limit
    if not n_bytes <= limit:  # also refuses a NaN estimate
        raise ResourceLimitError(
            f"{what} needs about {format_bytes(n_bytes)} of memory, over the limit of "
            f"{format_bytes(limit)} (DPCORE_MAX_MEMORY): lower these parameters or use fewer rows"
        )
