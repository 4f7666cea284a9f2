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
- **Statistics are Dask reductions** of the mechanisms' own kernels. A mechanism asks the table
  protocol (:class:`dpcore.table.TableEngine`) for the sums of a kernel (``box_gram``, RON-Gauss's
  two passes and per-class passes, PCA-Gauss's moments, MODIPS's ``_group_moments``) or a row map
  (the projected rows); this engine (:class:`~dpcore.dask_engine.engine.DaskEngine`) runs the kernel
  on each partition through :func:`block_sums` (with the partition's labels for per-class and
  label-augmented statistics, packed into one vector, summed by Dask's tree reduction
  ``sum(split_every=...)``) or :func:`row_map`. The (small) statistic comes back to the client,
  where its noise is drawn once, with the release's secure sampler (:mod:`dpcore.noise`).
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

The package, by what each file does (the mechanisms never import it: they ask the table protocol,
:mod:`dpcore.table`, which :class:`~dpcore.dask_engine.engine.DaskEngine` implements):

- :mod:`~dpcore.dask_engine.opening`: opening and planning (the files, their partitions, the public
  ``n``, the first rows; the prepared input of a mechanism);
- :mod:`~dpcore.dask_engine.reading`: reading a partition (CSV blocks, Parquet row groups, batches
  checked by the in-memory loader, the fused read-check-clip-map chain of one task);
- :mod:`~dpcore.dask_engine.kernels`: per-partition kernels (blockwise sums, row maps, per-row noise
  from each partition's stream, work on the client, spilled chunks);
- :mod:`~dpcore.dask_engine.mixtures`: DPMix's mixture means from index pairs grouped by partition;
- :mod:`~dpcore.dask_engine.outputs`: released rows drawn per output partition;
- :mod:`~dpcore.dask_engine.writing`: writing a release partition by partition;
- :mod:`~dpcore.dask_engine.releasing`: :func:`release_table` (open, release, write: the CLI's path);
- :mod:`~dpcore.dask_engine.cluster`: the scheduler (local threads or a checked ``distributed``
  address) and the BLAS rule on local threads;
- :mod:`~dpcore.dask_engine.engine`: the table protocol's Dask implementation and the lazy output.
"""

from __future__ import annotations

from dpcore.dask_engine.cluster import (
    DEFAULT_SCHEDULER_TIMEOUT,
    check_scheduler,
    connect,
    one_blas_thread,
    scheduler_timeout,
)
from dpcore.dask_engine.engine import (
    ENGINE,
    DaskEngine,
    gaussian_rows,
    lazy_output,
    output_rows,
    standard_normal,
)
from dpcore.dask_engine.kernels import (
    _SPILL_PREFIX,
    SPLIT_EVERY,
    _spilled,
    add_grid_noise,
    block_sums,
    client_map,
    column_stack,
    escaped_cells,
    partition_noise,
    row_map,
    take,
)
from dpcore.dask_engine.mixtures import (
    MIXTURE_CHUNK_BYTES,
    PARTITION_TABLE_MAX,
    _partial_sums,
    _piece_partial_sums,
    _spread,
    draw_mixtures,
    pairs_by_partition,
)
from dpcore.dask_engine.opening import (
    DEFAULT_BLOCKSIZE,
    HEAD_ROWS,
    NOT_STREAMED,
    SUPPORTED,
    LazyTable,
    check_supported,
    expand_paths,
    fits_in_memory,
    is_lazy_input,
    lazy_output_for,
    needs_lazy_output,
    open_table,
    prepare_input,
    public_part_rows,
)
from dpcore.dask_engine.reading import (
    BATCH_BYTES,
    CSV_SUFFIXES,
    PARQUET_SUFFIXES,
    _cuts,
    _Source,
    _source_batches,
    dask_delayed,
    is_lazy,
)
from dpcore.dask_engine.releasing import release_table
from dpcore.dask_engine.writing import NOISE_STREAMS, _progress, write_release

__all__ = [
    "BATCH_BYTES",
    "CSV_SUFFIXES",
    "DEFAULT_BLOCKSIZE",
    "DEFAULT_SCHEDULER_TIMEOUT",
    "ENGINE",
    "HEAD_ROWS",
    "MIXTURE_CHUNK_BYTES",
    "NOISE_STREAMS",
    "NOT_STREAMED",
    "PARQUET_SUFFIXES",
    "PARTITION_TABLE_MAX",
    "SPLIT_EVERY",
    "SUPPORTED",
    "DaskEngine",
    "LazyTable",
    "add_grid_noise",
    "block_sums",
    "check_scheduler",
    "check_supported",
    "client_map",
    "column_stack",
    "connect",
    "dask_delayed",
    "draw_mixtures",
    "escaped_cells",
    "expand_paths",
    "fits_in_memory",
    "gaussian_rows",
    "is_lazy",
    "is_lazy_input",
    "lazy_output",
    "lazy_output_for",
    "needs_lazy_output",
    "one_blas_thread",
    "open_table",
    "output_rows",
    "pairs_by_partition",
    "partition_noise",
    "prepare_input",
    "public_part_rows",
    "release_table",
    "row_map",
    "scheduler_timeout",
    "standard_normal",
    "take",
    "write_release",
]
# private names the tests reach (their home is the module named above)
_PRIVATE = (_SPILL_PREFIX, _Source, _cuts, _partial_sums, _piece_partial_sums, _progress, _source_batches,
            _spilled, _spread)
