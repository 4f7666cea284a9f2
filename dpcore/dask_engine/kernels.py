"""Per-partition kernels: a mechanism's kernel run in one task per partition and summed by a tree
reduction (:func:`block_sums`), row maps (:func:`row_map`), per-row grid noise drawn inside each
partition's task from its own stream (:func:`partition_noise`), and what runs on the client
(:func:`client_map`: the release's sampler over the partitions in order, spilled to disk).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from dpcore.dask_engine.reading import (
    _batches,
    _from_batch,
    _fused,
    _Piece,
    _Source,
    _source_array,
    dask_delayed,
    is_lazy,
)

#: partitions summed per node of the tree reductions
SPLIT_EVERY = 8
#: where the local progress bars go while :func:`dpcore.dask_engine.writing._progress` shows them
#: (None: not shown)
_BAR_STREAM: ContextVar[Any | None] = ContextVar("dpcore_dask_bar_stream", default=None)


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


def row_map(kernel: Callable[[np.ndarray], np.ndarray], X: Any, n_columns: int, dtype: Any = float) -> Any:
    """``kernel`` applied to every partition of ``X`` (a row-wise map): a lazy Dask array of shape
    ``(n, n_columns)`` with ``X``'s row partitions (``X`` 1-D, e.g. labels: the kernel's blocks are
    1-D). Over a table's rows the kernel joins the partition task's chain (applied batch by batch
    after reading, checking and clipping)."""
    fused = _fused(X)
    if fused is not None and X.ndim == 2:
        pieces, source = fused
        return _source_array(pieces, tuple(int(c) for c in X.chunks[0]),
                             replace(source, maps=(*source.maps, kernel)), n_columns)
    if X.ndim == 1:
        return X.map_blocks(kernel, new_axis=1, chunks=(X.chunks[0], (n_columns,)), dtype=dtype)
    Xr = X.rechunk({1: -1})
    return Xr.map_blocks(kernel, chunks=(Xr.chunks[0], (n_columns,)), dtype=dtype)


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
    """How many text cells of lazy ``labels`` ``escape`` changes (:meth:`Release.csv_escaping`)."""
    if labels.dtype.kind not in "OUS":
        return 0
    return count_cells(labels, lambda v: isinstance(v, str) and escape(v) != v)


def count_cells(labels: Any, test: Callable[[Any], bool]) -> int:
    """How many cells of the lazy ``labels`` satisfy ``test``, counted per partition (with local
    threads when they were spilled on the client's disk: a cluster's workers on other hosts cannot
    read those files)."""
    labels = labels if labels.ndim == 1 else labels.rechunk({1: -1})
    counts = labels.map_blocks(lambda b: np.full((1,) * b.ndim, sum(bool(test(v)) for v in b.ravel())),
                               chunks=((1,) * labels.numblocks[0],) + ((1,) if labels.ndim == 2 else ()),
                               dtype=np.int64)
    # labels spilled on the client's disk (DPMix's, randomised response's) load only there
    return int(counts.sum().compute(**({"scheduler": "threads"} if _spilled(labels) else {})))


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


# ------------------------------------------------------------------------------------ spilled chunks
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


def _cluster_client() -> Any | None:
    """The ``distributed`` client of the current context, or None (Dask's local schedulers)."""
    try:
        from distributed import get_client

        return get_client()
    except (ImportError, ValueError):
        return None
