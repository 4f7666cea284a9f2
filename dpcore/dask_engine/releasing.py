"""Releasing a table larger than memory from its files to a written folder (:func:`release_table`:
the ``dpcore release ... --engine dask`` path): the scheduler, the table opened lazily, the
mechanism's release with its rows drawn lazily, the parts written.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpcore.dask_engine.cluster import connect, one_blas_thread
from dpcore.dask_engine.opening import open_table
from dpcore.dask_engine.writing import _progress, write_release

if TYPE_CHECKING:
    from dpcore.release import Release


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
