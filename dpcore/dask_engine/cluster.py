"""Where the tasks run: Dask's local threaded scheduler, or a ``distributed`` scheduler at an address
checked before any work (:func:`connect`), with dpcore's BLAS rule on the local threads
(:func:`one_blas_thread`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from dpcore.exceptions import DataValidationError

# ------------------------------------------------------------------------------------ API
#: Seconds a scheduler has to accept a connection and answer its handshake
#: (``DPCORE_SCHEDULER_TIMEOUT``); the Client's own timeout covers the connection only.
DEFAULT_SCHEDULER_TIMEOUT = 30.0


def scheduler_timeout() -> float:
    """``DPCORE_SCHEDULER_TIMEOUT`` seconds (default :data:`DEFAULT_SCHEDULER_TIMEOUT`)."""
    raw = os.environ.get("DPCORE_SCHEDULER_TIMEOUT", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_SCHEDULER_TIMEOUT
    except ValueError:
        value = float("nan")
    if not (0 < value < float("inf")):
        raise ValueError(f"the environment variable DPCORE_SCHEDULER_TIMEOUT={raw!r} is not a positive "
                         "number of seconds")
    return value


def check_scheduler(scheduler: str, timeout: float | None = None) -> None:
    """Refuse a ``--scheduler`` address that names no reachable scheduler, before any work: not a
    ``tcp://`` / ``tls://`` address with a port (an ``inproc://`` address lives in another process),
    or a listener that does not complete distributed's handshake within ``timeout`` seconds
    (:func:`scheduler_timeout`; a listener that accepts and never answers hung the release until it
    was killed).

    Raises
    ------
    DataValidationError
        Naming the address and what is wrong.
    """
    import asyncio

    from distributed.comm import connect as comm_connect
    from distributed.comm.addressing import parse_address, parse_host_port

    timeout = scheduler_timeout() if timeout is None else timeout
    try:
        scheme, location = parse_address(scheduler)
        if scheme not in ("tcp", "tls"):
            raise ValueError(f"an address {scheme}:// cannot be reached from this process")
        parse_host_port(location)
    except (ValueError, TypeError) as exc:
        raise DataValidationError(f"--scheduler {scheduler!r} is not the address of a scheduler ({exc}); "
                                  "give tcp://HOST:PORT (e.g. tcp://127.0.0.1:8786)") from None

    async def handshake() -> None:
        comm = await asyncio.wait_for(comm_connect(scheduler, timeout=timeout), timeout)
        comm.abort()

    try:
        asyncio.run(handshake())
    except TimeoutError:
        raise DataValidationError(f"the scheduler at {scheduler} did not answer within {timeout:g} s "
                                  "(DPCORE_SCHEDULER_TIMEOUT): is a Dask scheduler running there?") from None
    except OSError as exc:
        raise DataValidationError(f"cannot connect to the scheduler at {scheduler}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None


@contextlib.contextmanager
def connect(scheduler: str | None) -> Iterator[Any]:
    """A ``distributed.Client`` of the scheduler at ``scheduler`` (``tcp://host:8786``) while the
    block runs, after :func:`check_scheduler`; ``None``: Dask's local threaded scheduler (embedded,
    no server to start)."""
    if not scheduler:
        yield None
        return
    from distributed import Client

    check_scheduler(scheduler)
    with Client(scheduler, timeout=scheduler_timeout()) as client:
        yield client


@contextlib.contextmanager
def one_blas_thread(client: Any) -> Iterator[None]:
    """dpcore's BLAS rule (:func:`dpcore.threads.blas_limit`: one thread per task unless the
    environment says otherwise) while Dask's local threaded scheduler runs the tasks (``client``
    ``None``): its worker threads already use every core, and OpenBLAS's own threads inside each
    task's products then spin against them (measured with ``benchmarks/bench_dask.py`` at 4 x 10^6
    rows: RON-Gauss's statistics phase took 11.5 CPU s with the default threads, 7.7 with one).
    A ``distributed`` cluster's workers set this themselves (their nannies start them with
    ``OPENBLAS_NUM_THREADS=1``). The limit is lifted when the block ends."""
    if client is not None:
        yield
        return
    from dpcore.threads import blas_limit

    with blas_limit():
        yield
