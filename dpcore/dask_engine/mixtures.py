"""DPMix on partitions: the means of the rows at the mixtures' index sets, each set's pairs grouped
by the partition holding the row (:func:`pairs_by_partition`), summed in each partition's task as a
sparse product (:func:`_partial_sums`) and added on the client or in a tree on a cluster's workers
(:func:`draw_mixtures`); the noisy chunks are spilled to disk and returned lazily.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from dpcore.dask_engine.kernels import _BAR_STREAM, _cluster_client, _Spill
from dpcore.dask_engine.reading import _batches, _from_batch, _fused, _Piece, _Source, dask_delayed
from dpcore.exceptions import DataValidationError

#: bytes of one chunk of DPMix mixtures (the client's sum of their rows); T/chunk passes
MIXTURE_CHUNK_BYTES = 256 << 20
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


def draw_mixtures(Z: Any, n_mixtures: int, *, indices: Callable[[int], np.ndarray],
                  noise: Callable[[int], Any], finish: Callable[[np.ndarray, Any], np.ndarray],
                  dtype: Any = None) -> Any:
    """DPMix's noisy mixture means over a Dask array ``Z`` (``n`` scaled rows of width ``w``): the
    engine's ``mixtures`` (:class:`dpcore.table.TableEngine`), with the randomness of the in-memory
    path.

    Per chunk of :data:`MIXTURE_CHUNK_BYTES` / (8 w) mixtures, the client takes the chunk's index
    sets from ``indices`` (drawn by the mechanism from the public ``n``, in the same stream order as
    in memory, so a seed gives the in-memory index sets), groups the pairs by partition
    (:func:`pairs_by_partition`, a stable sort), and every partition gathers its rows and sums them
    into their mixtures (:func:`_partial_sums`). The client divides by ``ell`` and hands the chunk
    and its noise (``noise(m)``, drawn by a second client thread in its fixed order while the
    partitions are summed) to ``finish`` (the grid noise applied, then DPMix's denoising filter),
    and spills the chunk to a temporary file. Returns a lazy ``(T, w)`` array over those files.
    The first chunk reads every partition, including those no index set of it names, so that every
    row is checked (the loader's errors) whatever index sets were drawn. Cost: one read of ``Z``
    per chunk; the partial sums are added in place on the client (local scheduler) or in a tree on
    the workers (:func:`_sum_partials`).
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
    step = max(1, MIXTURE_CHUNK_BYTES // (8 * max(1, w)))
    spill, parts = _Spill(), []
    client = _cluster_client()
    with ThreadPoolExecutor(1) as noise_thread:
        for i, start in enumerate(range(0, n_mixtures, step)):
            m = min(step, n_mixtures - start)
            # the chunk's noise is drawn by another thread (streams in their fixed order, nothing
            # else draws from them meanwhile) while the index sets are drawn (from their own
            # stream) and the partitions' rows are read and summed
            drawn = noise_thread.submit(noise, m)
            idx = indices(m)
            rows, mixtures, cuts = pairs_by_partition(idx, offsets)
            # the first chunk reads every partition, those its index sets miss included, so every
            # row is checked whatever rows were drawn: whether the release is refused (a bad value,
            # a file that changed) must not depend on the secret index sets
            used = [(p, rows[lo:hi], mixtures[lo:hi])
                    for p, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)) if hi > lo or i == 0]
            if client is not None:  # the pairs go to the workers as data, not inside the task graph
                used = [(p, *client.scatter([r, mx])) for p, r, mx in used]
            partials = [blocks[p](r, mx) for p, r, mx in used]
            block = _sum_partials(partials, m, w) / idx.shape[1]
            block = finish(block.astype(dtype or np.float64, copy=False), drawn.result())
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
