"""How many threads a release uses: one rule for the library, the CLI, the Dask engine and the app.

A release parallelises its own work in blocks (noise blocks, :mod:`dpcore.noise`; DPMix's gathers;
the input passes of :func:`dpcore.preprocessing.map_row_blocks`; Dask partitions) on up to
:func:`cpu_count` threads of NumPy code that releases the GIL; each thread waits for a core without
costing anything meanwhile. The linear algebra inside (OpenBLAS, MKL) runs with
:func:`blas_threads` threads, by default **one**: OpenBLAS's threads spin-wait for each other, so
when another process holds a core they burn it instead of sleeping. Measured on the 2-core
development machine while other jobs ran (load 5-7): ``X.T @ X`` for a 500,000 x 100 ``X`` took
0.28-0.33 s on one thread and 4.8-9.6 s on OpenBLAS's default two; on an idle machine two
threads save at most half of the product. One thread per running task never oversubscribes;
:envvar:`DPCORE_BLAS_THREADS` (or ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS`` /
``OMP_NUM_THREADS``, set before the libraries load) raises it on a machine reserved for the job.

:func:`blas_limit` applies the rule to a block of code (a context manager and a decorator):
:meth:`dpcore.mechanisms.base.Mechanism.release`, the generative mechanisms' ``fit`` and
``sample``, the ``dpcore`` CLI, the Dask engine's local scheduler (one BLAS thread in each of
its worker threads) and the app's server process (:func:`app.state.tune_process`) all use it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["BLAS_THREADS_ENV", "blas_limit", "blas_threads", "cpu_count"]

#: environment variable that sets the BLAS threads per running task (an integer >= 1)
BLAS_THREADS_ENV = "DPCORE_BLAS_THREADS"
_LIBRARY_ENVS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity mask, e.g. a container's or ``taskset``'s;
    ``os.cpu_count()`` where the platform has no affinity)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def blas_threads() -> int:
    """BLAS threads per running task: :data:`BLAS_THREADS_ENV` if set, else the first of
    ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OMP_NUM_THREADS`` that is set, else 1; at most
    :func:`cpu_count`.

    Raises
    ------
    ValueError
        :data:`BLAS_THREADS_ENV` is set to something other than a positive integer.
    """
    value = os.environ.get(BLAS_THREADS_ENV)
    if value is not None:
        try:
            threads = int(value)
        except ValueError:
            threads = 0
        if threads < 1:
            raise ValueError(f"{BLAS_THREADS_ENV} must be a positive integer, got {value!r}")
        return min(threads, cpu_count())
    for name in _LIBRARY_ENVS:
        try:
            threads = int(os.environ.get(name, ""))
        except ValueError:
            continue
        if threads >= 1:
            return min(threads, cpu_count())
    return 1


_controller: Any = None
_controller_modules = -1
_controller_lock = threading.Lock()


def _blas_controller() -> Any:
    """threadpoolctl's controller of the BLAS libraries loaded so far (building one inspects every
    loaded library, ~5 ms: it is rebuilt only when modules were imported since, which may have
    loaded another BLAS)."""
    global _controller, _controller_modules
    with _controller_lock:
        if _controller is None or len(sys.modules) != _controller_modules:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController().select(user_api="blas")
            _controller_modules = len(sys.modules)
        return _controller


@contextlib.contextmanager
def blas_limit(threads: int | None = None) -> Iterator[None]:
    """Run the block with at most ``threads`` BLAS threads (default :func:`blas_threads`).

    Libraries already at or below the limit are left alone (so nesting costs nothing and a process
    limited once, as the app's server, is never changed back); the others are limited for the
    block and restored after it (threadpoolctl). Usable as a decorator. With OpenBLAS's shared
    thread pool the limit is process-wide, and threadpoolctl lets only one thread at a time change
    it: a block entered while another thread holds a limit runs under that one.
    """
    limit = blas_threads() if threads is None else max(1, int(threads))
    controller = _blas_controller()
    if all((lib.num_threads or 1) <= limit for lib in controller.lib_controllers):
        yield
        return
    with controller.limit(limits=limit):
        yield
