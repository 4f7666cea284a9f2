"""The table protocol: the few operations a mechanism asks of the rows of a table, and the in-memory
(NumPy) engine that implements them.

Mechanisms (:mod:`dpcore.mechanisms`), :mod:`dpcore.noise`, :mod:`dpcore.release` and
:mod:`dpcore.decode` are written once, against :class:`TableEngine`; they never ask where the rows
live. Two engines implement it:

- :data:`IN_MEMORY` (this module): the rows are one NumPy array; every operation is the plain
  NumPy expression (a kernel applied to the whole table), so the in-memory path pays nothing for
  the protocol.
- the Dask engine (:mod:`dpcore.dask_engine`): the rows are a lazy Dask array of row partitions
  read from files; a kernel runs in one task per partition and its results are summed by a tree
  reduction, per-row noise is drawn in each partition's task from its own stream, and DPMix's index
  sets are grouped by the partition holding each row.

The engine is chosen once, where the input is opened (:func:`dpcore.engines.prepare`: the Dask
engine for a table opened lazily, else this one), and travels with the prepared input
(:attr:`dpcore.preprocessing.PreparedInput.engine`). Rows drawn from released statistics (synthetic
rows, after the statistics are noised) are drawn by the engine active for drawing
(:func:`drawing`), which the opener sets for the whole release of a lazily opened table. Values an
engine produced (released rows, labels) are recognised by :func:`engine_of`: each engine other
than the in-memory one registers itself (:func:`register`) when it is imported.

An engine-specific optimisation lives in its engine, never in a mechanism: the mechanism states the
computation (``sums`` of a kernel, a row map, the means of the rows at index sets), the engine
decides how to run it (the in-memory engine: whole-array NumPy, thread pools; Dask: fused read,
check and kernel per partition, partition pairs for DPMix).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from dpcore.noise import GridNoise, NoiseDraw
    from dpcore.release import Release

__all__ = [
    "BLOCK_BYTES",
    "IN_MEMORY",
    "InMemory",
    "TableEngine",
    "drawing",
    "drawing_with",
    "engine_of",
    "register",
    "row_blocks",
]

#: Rows are streamed in blocks of about this many bytes (fits the L2/L3 caches of common CPUs).
BLOCK_BYTES = 4 << 20


def row_blocks(n_rows: int, n_features: int, block_bytes: int = BLOCK_BYTES, itemsize: int = 8):
    """Consecutive ``slice`` objects covering ``range(n_rows)`` in blocks of about
    ``block_bytes`` (at least 64 rows per block)."""
    step = max(64, block_bytes // (itemsize * max(1, n_features)))
    for start in range(0, n_rows, step):
        yield slice(start, min(n_rows, start + step))


class TableEngine(Protocol):
    """What a mechanism may ask of the rows of a table (``PreparedInput.X``, ``.y``), and of the rows
    it releases.

    A *kernel* is a function of in-memory NumPy rows (``(m, d)``, and the ``(m,)`` labels of the same
    rows when asked); an engine applies it to the whole table (in memory) or to every partition
    (Dask). *Rows* are what an engine returns for a table-sized result: a NumPy array in memory, a
    lazy array on Dask; a mechanism only passes them back to the engine, to :mod:`dpcore.noise` via
    :meth:`add_noise`, or into the release.
    """

    #: the engine's name (the card's ``engine`` of a written release)
    name: str
    #: True when the rows are one NumPy array in memory (their memory is then checked up front,
    #: and the layout optimisations that need the whole array, such as DPMix's ``uint8`` counts, apply)
    in_memory: bool

    def holds(self, values: Any) -> bool:
        """True when ``values`` are rows of this engine (registered engines: :func:`engine_of`)."""
        ...

    def sums(self, kernel: Callable[..., Any], X: Any, labels: Any = None, *, keep: bool = False) -> Any:
        """The blockwise sums ``sum over blocks B of kernel(B)`` (``kernel(B, labels of B)`` with
        ``labels``) of a kernel returning an array or a tuple of arrays (Gram matrices, column sums,
        counts, per-class statistics), as a tuple of NumPy arrays, computed now.

        ``keep``: the kernel returns ``(sums, state)``, ``state`` being per-row by-products of its
        pass (RON-Gauss's row norms) that a later pass over the same rows may reuse; the result is
        ``(sums, state)`` when the engine ran the kernel on the whole table at once (in memory),
        ``(sums, None)`` otherwise (a later kernel then recomputes them on its block)."""
        ...

    def map_rows(self, kernel: Callable[[np.ndarray], np.ndarray], X: Any, n_columns: int, *,
                 dtype: Any = float) -> Any:
        """``kernel`` applied row-wise: rows ``(n, n_columns)`` (``X`` may be 1-D: labels)."""
        ...

    def noisy_rows(self, kernel: Callable[[np.ndarray, GridNoise | None], np.ndarray], X: Any,
                   n_columns: int, plan: GridNoise | None) -> Any:
        """The row map ``kernel(block, None)`` plus the grid noise of ``plan`` on every cell (``None``:
        none, NOT PRIVATE). The in-memory engine hands ``plan`` to the kernel (it may draw the noise
        in the same pass); the others add it per block."""
        ...

    def add_noise(self, plan: GridNoise, values: Any) -> NoiseDraw:
        """``plan.add(values)``: the grid noise of ``plan`` on every cell of rows or of a statistic."""
        ...

    def column_stack(self, blocks: list[Any]) -> Any:
        """``np.column_stack(blocks)`` of rows (an empty ``(n, 0)`` block adds nothing)."""
        ...

    def take(self, table: np.ndarray, indices: Any) -> Any:
        """``table[indices]``: a gather from a small public array by row-sized indices (class
        indices to class values)."""
        ...

    def on_client(self, values: Any, finish: Callable[[np.ndarray], np.ndarray]) -> Any:
        """``finish(values)`` where the release's noise sampler is (the client), in row order
        (randomized response of the labels)."""
        ...

    def count_cells(self, test: Callable[[Any], bool], values: Any) -> int:
        """How many cells of ``values`` satisfy ``test`` (a text check of released labels)."""
        ...

    def mixtures(self, Z: Any, n_mixtures: int, *, indices: Callable[[int], np.ndarray],
                 noise: Callable[[int], Any], finish: Callable[[np.ndarray, Any], np.ndarray],
                 means: Callable[..., np.ndarray], unit: np.ndarray | None = None, dtype: Any = None,
                 chunk_rows: int = 1, workers: int = 1) -> Any:
        """The ``n_mixtures`` noisy means of the rows of ``Z`` at index sets (DPMix), chunk by chunk
        in order: ``idx = indices(m)`` (the next ``m`` index sets, ``(m, ell)``, drawn by the
        mechanism in a fixed order), the means of the rows at ``idx``, ``drawn = noise(m)`` (the
        chunk's noise, drawn in a fixed order while the means are computed) and ``finish(block,
        drawn)`` (the noise applied and any post-processing, in place; returns the block).

        ``means(Z, idx, out=..., unit=...)`` is the mechanism's gather-and-sum of rows held in
        memory (:func:`dpcore.mechanisms.dpmix.mixture_means`); an engine whose rows are elsewhere
        computes the same means its own way. ``unit``: ``Z`` holds ``uint8`` counts standing for
        ``Z * unit``. ``chunk_rows`` and ``workers``: the in-memory chunk size and threads.
        """
        ...

    def normal_rows(self, rng: np.random.Generator, size: int, k: int, factor_t: np.ndarray | None = None,
                    mean: np.ndarray | None = None) -> Any:
        """``size`` draws ``z F + mean`` with ``z ~ N(0, I_k)`` from the public ``rng``
        (``F = factor_t``; ``None``: ``z`` itself, and ``mean`` None: no shift)."""
        ...

    def write(self, release: Release, output: Any, **options: Any) -> dict[str, Path]:
        """Write ``release`` (all files or none); returns the written paths by kind."""
        ...


class InMemory:
    """The in-memory engine: the rows are one NumPy array, and every operation of
    :class:`TableEngine` is the NumPy expression itself (one kernel call on the whole table)."""

    name = "memory"
    in_memory = True

    def holds(self, values: Any) -> bool:
        return isinstance(values, np.ndarray)

    def sums(self, kernel: Callable[..., Any], X: Any, labels: Any = None, *, keep: bool = False) -> Any:
        out = kernel(X) if labels is None else kernel(X, labels)
        if keep:
            sums, state = out
            return (sums if isinstance(sums, tuple) else (sums,)), state
        return out if isinstance(out, tuple) else (out,)

    def map_rows(self, kernel: Callable[[np.ndarray], np.ndarray], X: Any, n_columns: int, *,
                 dtype: Any = float) -> Any:
        return kernel(X)

    def noisy_rows(self, kernel: Callable[[np.ndarray, Any], np.ndarray], X: Any, n_columns: int,
                   plan: Any) -> Any:
        return kernel(X, plan)

    def add_noise(self, plan: Any, values: Any) -> Any:
        return plan.add(values)

    def column_stack(self, blocks: list[Any]) -> Any:
        return np.column_stack(blocks)

    def take(self, table: np.ndarray, indices: Any) -> Any:
        return table[indices]

    def on_client(self, values: Any, finish: Callable[[np.ndarray], np.ndarray]) -> Any:
        return finish(values)

    def count_cells(self, test: Callable[[Any], bool], values: Any) -> int:
        return int(sum(bool(test(v)) for v in np.asarray(values).ravel()))

    def mixtures(self, Z: Any, n_mixtures: int, *, indices: Callable[[int], np.ndarray],
                 noise: Callable[[int], Any], finish: Callable[[np.ndarray, Any], np.ndarray],
                 means: Callable[..., np.ndarray], unit: np.ndarray | None = None, dtype: Any = None,
                 chunk_rows: int = 1, workers: int = 1) -> np.ndarray:
        """In chunks of ``chunk_rows`` mixtures written into one output array: ``workers`` threads
        compute a chunk's means (NumPy and the compiled kernel release the GIL) while this thread
        draws its noise and the next chunk's index sets, each stream in its fixed order, so the
        result does not depend on ``workers``."""
        out_dtype = np.dtype(dtype) if dtype is not None else (Z.dtype if unit is None else np.float64)
        out = np.empty((n_mixtures, Z.shape[1]), dtype=out_dtype)
        pool = ThreadPoolExecutor(workers) if workers > 1 else None
        starts = list(range(0, n_mixtures, chunk_rows))
        try:
            idx_next = indices(min(chunk_rows, n_mixtures)) if starts else None
            for i, start in enumerate(starts):
                idx = idx_next
                assert idx is not None
                stop = start + len(idx)
                block = out[start:stop]
                jobs = []
                if pool is None:
                    means(Z, idx, out=block, unit=unit)
                else:
                    parts = np.array_split(np.arange(stop - start), workers)
                    jobs = [pool.submit(means, Z, idx[p[0]:p[-1] + 1], out=block[p[0]:p[-1] + 1], unit=unit)
                            for p in parts if p.size]
                drawn = noise(stop - start)
                if i + 1 < len(starts):
                    idx_next = indices(min(chunk_rows, n_mixtures - starts[i + 1]))
                for job in jobs:
                    job.result()
                finish(block, drawn)
        finally:
            if pool is not None:
                pool.shutdown()
        return out

    def normal_rows(self, rng: np.random.Generator, size: int, k: int, factor_t: np.ndarray | None = None,
                    mean: np.ndarray | None = None) -> np.ndarray:
        """Drawn block by block into the output when ``factor_t`` is given (the same standard
        normals, in the same order, as one ``(size, k)`` draw): the only large allocation is the
        result."""
        if factor_t is None:
            rows = rng.standard_normal((size, k))
            return rows if mean is None else rows + mean
        out = np.empty((size, factor_t.shape[1]))
        for sl in row_blocks(size, k):
            np.matmul(rng.standard_normal((sl.stop - sl.start, k)), factor_t, out=out[sl])
        if mean is not None:
            out += mean
        return out

    def write(self, release: Release, output: Any, **options: Any) -> dict[str, Path]:
        """:meth:`dpcore.release.Release.save` (the CSV, its card and any public transform)."""
        return release.save(output, **options)


#: the in-memory engine (the default everywhere)
IN_MEMORY = InMemory()

_REGISTERED: list[TableEngine] = []
_DRAWING: ContextVar[TableEngine] = ContextVar("dpcore_drawing_engine", default=IN_MEMORY)


def register(engine: TableEngine) -> None:
    """Make ``engine``'s values recognisable by :func:`engine_of` (called by an engine module on import)."""
    if all(e is not engine for e in _REGISTERED):
        _REGISTERED.append(engine)


def engine_of(values: Any) -> TableEngine:
    """The engine whose rows ``values`` are: a registered engine that :meth:`~TableEngine.holds`
    them, else :data:`IN_MEMORY`."""
    for engine in _REGISTERED:
        if engine.holds(values):
            return engine
    return IN_MEMORY


def drawing() -> TableEngine:
    """The engine that draws released rows now (:meth:`TableEngine.normal_rows`): :data:`IN_MEMORY`
    unless a lazily opened table's release is under way (:func:`drawing_with`)."""
    return _DRAWING.get()


@contextlib.contextmanager
def drawing_with(engine: TableEngine) -> Iterator[TableEngine]:
    """While active, released rows are drawn by ``engine``."""
    token = _DRAWING.set(engine)
    try:
        yield engine
    finally:
        _DRAWING.reset(token)
