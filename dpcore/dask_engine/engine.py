"""The Dask engine's implementation of the table protocol (:class:`dpcore.table.TableEngine`), and the
lazy output of a release (its rows drawn per output partition).

Every operation a mechanism asks for maps onto a function of this package: blockwise sums onto
:func:`~dpcore.dask_engine.kernels.block_sums` (the kernel per partition, a tree reduction), row maps
onto :func:`~dpcore.dask_engine.kernels.row_map` (fused into the partition's read), per-row noise onto
:func:`~dpcore.dask_engine.kernels.partition_noise` (each partition's own stream), DPMix's mixture
means onto :func:`~dpcore.dask_engine.mixtures.draw_mixtures` (index pairs grouped by partition),
drawn rows onto :func:`~dpcore.dask_engine.outputs.lazy_normal`, writing onto
:func:`~dpcore.dask_engine.writing.write_release`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from dpcore import table as tables
from dpcore.dask_engine.kernels import (
    add_grid_noise,
    block_sums,
    client_map,
    column_stack,
    count_cells,
    row_map,
    take,
)
from dpcore.dask_engine.mixtures import draw_mixtures
from dpcore.dask_engine.outputs import lazy_normal
from dpcore.dask_engine.reading import is_lazy
from dpcore.dask_engine.writing import write_release

__all__ = [
    "ENGINE",
    "DaskEngine",
    "gaussian_rows",
    "lazy_output",
    "output_rows",
    "standard_normal",
]


@dataclass(frozen=True)
class DaskEngine:
    """The rows are a lazy Dask array of row partitions (:func:`dpcore.dask_engine.open_table`).
    ``output_rows``: rows per partition of the released rows this engine draws (``None``: it draws
    none; :func:`lazy_output` activates one that does)."""

    output_rows: int | None = None
    name: str = "dask"
    in_memory: bool = False

    def holds(self, values: Any) -> bool:
        return is_lazy(values)

    def sums(self, kernel: Callable[..., Any], X: Any, labels: Any = None, *, keep: bool = False) -> Any:
        """:func:`~dpcore.dask_engine.kernels.block_sums`; with ``keep``, the kernel's per-row state
        stays in its task (``None`` is returned for it: a later kernel recomputes it per block)."""
        if keep:
            return block_sums(partial(_sums_only, kernel=kernel), X, labels), None
        return block_sums(kernel, X, labels)

    def map_rows(self, kernel: Callable[[np.ndarray], np.ndarray], X: Any, n_columns: int, *,
                 dtype: Any = float) -> Any:
        return row_map(kernel, X, n_columns, dtype=dtype)

    def noisy_rows(self, kernel: Callable[[np.ndarray, Any], np.ndarray], X: Any, n_columns: int,
                   plan: Any) -> Any:
        """The row map per partition, its grid noise drawn in the same task from the partition's own
        stream (:func:`~dpcore.dask_engine.kernels.partition_noise`); ``plan`` None: the lazy map."""
        from dpcore.dask_engine.kernels import partition_noise

        rows = row_map(partial(_without_noise, kernel=kernel), X, n_columns)
        return rows if plan is None else partition_noise(plan, rows)

    def add_noise(self, plan: Any, values: Any) -> Any:
        return add_grid_noise(plan, values) if is_lazy(values) else plan.add(values)

    def column_stack(self, blocks: list[Any]) -> Any:
        return column_stack(blocks)

    def take(self, table: np.ndarray, indices: Any) -> Any:
        return take(table, indices) if is_lazy(indices) else table[indices]

    def on_client(self, values: Any, finish: Callable[[np.ndarray], np.ndarray]) -> Any:
        return client_map(values, finish) if is_lazy(values) else finish(values)

    def count_cells(self, test: Callable[[Any], bool], values: Any) -> int:
        return count_cells(values, test) if is_lazy(values) else tables.IN_MEMORY.count_cells(test, values)

    def mixtures(self, Z: Any, n_mixtures: int, *, indices: Callable[[int], np.ndarray],
                 noise: Callable[[int], Any], finish: Callable[[np.ndarray, Any], np.ndarray],
                 means: Callable[..., np.ndarray], unit: np.ndarray | None = None, dtype: Any = None,
                 chunk_rows: int = 1, workers: int = 1) -> Any:
        return draw_mixtures(Z, n_mixtures, indices=indices, noise=noise, finish=finish, dtype=dtype)

    def normal_rows(self, rng: np.random.Generator, size: int, k: int, factor_t: np.ndarray | None = None,
                    mean: np.ndarray | None = None) -> Any:
        if self.output_rows is None:  # no lazy output active: the rows are drawn in memory
            return tables.IN_MEMORY.normal_rows(rng, size, k, factor_t, mean)
        return lazy_normal(rng, int(size), int(k), factor_t,
                           None if mean is None else np.asarray(mean, dtype=float), self.output_rows)

    def write(self, release: Any, output: Any, **options: Any) -> dict[str, Path]:
        return write_release(release, output, **options)


def _sums_only(block: np.ndarray, labels: Any = None, *, kernel: Callable[..., Any]) -> Any:
    return (kernel(block) if labels is None else kernel(block, labels))[0]


def _without_noise(block: np.ndarray, kernel: Callable[[np.ndarray, Any], np.ndarray]) -> np.ndarray:
    return kernel(block, None)


#: the Dask engine (its values registered with :func:`dpcore.table.engine_of`)
ENGINE = DaskEngine()
tables.register(ENGINE)


# ------------------------------------------------------------------------------------ lazy outputs
@contextlib.contextmanager
def lazy_output(rows_per_partition: int) -> Iterator[None]:
    """While active, the released rows of a release (:meth:`DaskEngine.normal_rows`, the engine
    :func:`dpcore.table.drawing` returns) are lazy Dask arrays in partitions of
    ``rows_per_partition`` rows instead of arrays drawn in memory."""
    with tables.drawing_with(DaskEngine(output_rows=int(rows_per_partition))):
        yield


def output_rows() -> int | None:
    """Rows per lazy output partition, or ``None`` outside :func:`lazy_output`."""
    return getattr(tables.drawing(), "output_rows", None)


def standard_normal(rng: np.random.Generator, shape: tuple[int, int]) -> Any:
    """``rng.standard_normal(shape)``; inside :func:`lazy_output` the same distribution drawn per
    output partition, lazily (``shape[0]`` may then exceed memory)."""
    return tables.drawing().normal_rows(rng, int(shape[0]), int(shape[1]))


def gaussian_rows(factor_t: np.ndarray, mean: np.ndarray, size: int, rng: np.random.Generator) -> Any:
    """``size`` draws ``z F + mean`` of ``N(mean, F^T F)`` (``F = factor_t``), lazily per output
    partition inside :func:`lazy_output`."""
    return tables.drawing().normal_rows(rng, int(size), int(factor_t.shape[0]), factor_t, mean)
