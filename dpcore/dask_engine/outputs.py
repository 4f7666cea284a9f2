"""Drawing the released rows lazily: synthetic rows drawn per output partition from generators spawned
from the release's public ``rng`` (:func:`lazy_normal`), so a release of ``n`` rows never holds them
in memory (the engine's ``normal_rows`` inside :func:`dpcore.dask_engine.engine.lazy_output`).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np


def _normal_block(rng: np.random.Generator, rows: int, k: int, factor_t: np.ndarray | None,
                  mean: np.ndarray | None) -> np.ndarray:
    """``rows`` i.i.d. draws ``z F + mean``, ``z ~ N(0, I_k)``, as a column-major ``(rows, k)`` array:
    drawn and transformed transposed (``F^T z^T``), so the writer's DataFrame takes the columns
    without a copy (a row-major block costs a transposing copy per partition). Drawn from a copy
    of ``rng`` (the task graph's own stays unused): computing the lazy release again, as its
    writer or its reader, gives the same rows."""
    out = copy.deepcopy(rng).standard_normal((k, rows))
    if factor_t is not None:
        out = factor_t.T @ out
    if mean is not None:
        out += np.asarray(mean, dtype=float)[:, None]
    return out.T


def lazy_normal(rng: np.random.Generator, size: int, k: int, factor_t: np.ndarray | None,
                mean: np.ndarray | None, rows_per_partition: int) -> Any:
    """``size`` draws ``z F + mean`` (``F = factor_t``, ``z ~ N(0, I_k)``; ``None``: ``z`` itself, no
    shift) as a lazy array in partitions of ``rows_per_partition`` rows, each drawn by its own task
    from one of ``rng.spawn(...)``'s independent streams (the release's public generator)."""
    import dask
    import dask.array as da

    step = int(rows_per_partition) or size
    starts = list(range(0, size, step))
    children = rng.spawn(len(starts))  # independent streams from the release's public generator
    blocks = [da.from_delayed(dask.delayed(_normal_block)(child, min(step, size - s), k, factor_t, mean),
                              shape=(min(step, size - s), k), dtype=float)
              for child, s in zip(children, starts, strict=True)]
    return da.concatenate(blocks, axis=0) if blocks else da.zeros((0, k), chunks=(1, k))
