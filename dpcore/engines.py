"""Where the input is opened: the one place that chooses the engine of a release.

:func:`opened` and :func:`prepare` look at the input once: a table opened lazily
(:class:`dpcore.dask_engine.LazyTable`) or a Dask collection goes to the Dask engine (imported
then, and only then), anything else (an array, a frame, a :class:`~dpcore.data.Dataset`) to the
in-memory engine (:data:`dpcore.table.IN_MEMORY`). From there the engine travels with the prepared
input (:attr:`dpcore.preprocessing.PreparedInput.engine`) and, for the rows drawn from released
statistics, with the drawing engine (:func:`dpcore.table.drawing`); the mechanisms only ever
call the table protocol (:mod:`dpcore.table`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from dpcore.preprocessing import PreparedInput, prepare_input

__all__ = ["is_lazy_input", "opened", "prepare"]


def is_lazy_input(X: Any) -> bool:
    """True for an input of the Dask engine: a table it opened (its ``LazyTable``) or a Dask collection
    (array, DataFrame), told by the module of its type: no import of Dask needed."""
    module = type(X).__module__
    return module.split(".", 1)[0] == "dask" or module.startswith("dpcore.dask_engine.")


@contextlib.contextmanager
def opened(X: Any) -> Iterator[Any]:
    """``X`` as a release sees it: a lazy input opened by the Dask engine, with the lazy output of
    its public part size active for the release's drawn rows (unless a lazy output is active
    already); any other input as given."""
    if is_lazy_input(X):
        from dpcore import dask_engine

        if dask_engine.needs_lazy_output(X):
            with dask_engine.lazy_output_for(X) as table:
                yield table
            return
    yield X


def prepare(mechanism: Any, X: Any, y: Any, values: dict[str, Any], n_samples: int | None
            ) -> PreparedInput:
    """The prepared input of ``mechanism`` (its public bounds, labels and task), by the engine of
    ``X``: the Dask engine's ``prepare_input`` for a lazy input (one partition per worker thread is
    ever held, never the table); in memory :func:`dpcore.preprocessing.prepare_input`, with the
    mechanism's peak memory (:meth:`~dpcore.mechanisms.base.Mechanism.check_peak_memory`) checked
    from the input's shape before anything is copied, and again from the prepared shape."""
    common = {"bounds": mechanism.bounds, "label_bounds": mechanism.label_bounds,
              "classes": mechanism.classes, "task": mechanism.task, "supported_tasks": mechanism.tasks}
    if is_lazy_input(X):
        from dpcore import dask_engine

        return dask_engine.prepare_input(X, y, mechanism=mechanism.name, **common)
    mechanism.check_peak_memory(*_input_shape(X, mechanism.classes), values, n_released=n_samples)
    data = prepare_input(X, y, **common)
    n, d = data.X.shape
    mechanism.check_peak_memory(n, d, 0 if data.classes is None else len(data.classes), values,
                                n_released=n_samples)
    return data


def _input_shape(X: Any, classes: Any) -> tuple[int, int, int]:
    """``(n, d, n_classes)`` of a mechanism's input as given (a Dataset, an array or a frame), before
    it is prepared: the classes of ``classes`` or of the Dataset, else 0 (a list read from the
    labels is counted after preparing)."""
    import numpy as np

    shape = getattr(X, "shape", None) if not hasattr(X, "n_features") else (X.n_samples, X.n_features)
    if shape is None:
        shape = np.shape(X)
    n, d = (int(shape[0]), int(np.prod(shape[1:])) if len(shape) > 1 else 1) if len(shape) else (0, 0)
    given = classes if classes is not None else getattr(X, "classes", None)
    return n, d, len(given) if hasattr(given, "__len__") else 0
