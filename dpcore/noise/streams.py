"""Noise drawn in parallel blocks: one :class:`NoiseStream` of a sampler's integers, its blocks drawn on
every core with the same values whatever the threads (:func:`noise_blocks`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from dpcore.noise.bits import BitSource, DerivedBits, stream_secret

# -------------------------------------------------------------------------- noise in parallel blocks
#: draws per block of a :class:`NoiseStream`: block ``i`` of a stream of ``size`` draws holds the draws
#: at positions ``[i B, min((i + 1) B, size))`` (:func:`noise_blocks`), from its own keyed stream
NOISE_BLOCK = 1 << 16


def noise_blocks(size: int) -> list[tuple[int, int]]:
    """The block layout of ``size`` draws: ``[(start, stop), ...]`` in blocks of :data:`NOISE_BLOCK`.

    A function of the number of draws only (the public shape of what is perturbed): never of the
    values, the machine, the thread count or how the draws are taken.
    """
    return [(start, min(int(size), start + NOISE_BLOCK)) for start in range(0, int(size), NOISE_BLOCK)]


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_in_pool = threading.local()


def _noise_pool() -> ThreadPoolExecutor:
    """The process's pool of noise threads, one per CPU (:func:`dpcore.threads.cpu_count`), shared
    by every stream (a server's sessions too): block draws are NumPy and ChaCha20 work that releases
    the GIL, so the blocks of one draw run on every core."""
    global _pool
    with _pool_lock:
        if _pool is None:
            from dpcore.threads import cpu_count

            _pool = ThreadPoolExecutor(cpu_count(), thread_name_prefix="dpcore-noise",
                                       initializer=lambda: setattr(_in_pool, "worker", True))
        return _pool


def _forget_pool() -> None:  # a forked child has none of the parent's threads
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _map_blocks(fn: Callable[[Any], Any], jobs: list[Any], workers: int | None) -> list[Any]:
    """``[fn(job) for job in jobs]``, on the noise pool when there are several jobs (and this is
    not already a noise thread, and ``workers`` is not 1)."""
    if len(jobs) <= 1 or workers == 1 or getattr(_in_pool, "worker", False):
        return [fn(job) for job in jobs]
    return list(_noise_pool().map(fn, jobs))


class NoiseStream:
    """The integer noise of a grid mechanism as one stream of ``size`` i.i.d. draws, drawn in blocks
    on every core.

    Block ``i`` (:func:`noise_blocks`: the draws at ``[i B, (i + 1) B)``, ``B =`` :data:`NOISE_BLOCK`)
    comes from ``draw(len, DerivedBits(secret, i))``: its own ChaCha20 stream, keyed by HMAC-SHA256
    of one fresh 256-bit ``secret`` per stream (:func:`stream_secret` of the mechanism's bit source:
    ``os.urandom`` for secure bits) and ``i``. HMAC-SHA256 is a pseudorandom function, so the blocks'
    streams are independent uniform keystreams and each block holds i.i.d. draws of the exact
    sampler: the stream has the law of ``size`` i.i.d. draws, the same as one sequential draw. A draw
    is a function of ``(secret, position)`` only: taking the draws in any pieces, on any number of
    threads, gives the same values (a seeded preview is reproducible on any machine), and the block
    layout depends on ``size`` alone.

    Parameters
    ----------
    draw : callable ``(count, bits, out=None) -> ndarray of int64``
        The exact sampler (:meth:`GridNoise.exact_sampler`).
    size : int
        Number of draws the stream holds.
    bits : BitSource or None
        The mechanism's bit source; only its secret is taken (one call of :func:`stream_secret`).
    workers : int, optional
        1 draws the blocks on the calling thread; otherwise on the noise pool (one thread per CPU).
    """

    def __init__(self, draw: Callable[..., np.ndarray], size: int, bits: BitSource | None, *,
                 workers: int | None = None) -> None:
        self._draw, self.size, self.workers = draw, int(size), workers
        # no bits: a mechanism that adds nothing (its sampler ignores them)
        self._secret, self._secure = stream_secret(bits) if bits is not None else (bytes(32), False)
        self._taken = 0
        self._next_block = 0
        self._left = np.empty(0, dtype=np.int64)

    def _block_size(self, i: int) -> int:
        return max(0, min(self.size, (i + 1) * NOISE_BLOCK) - i * NOISE_BLOCK)

    def block(self, i: int, out: np.ndarray | None = None) -> np.ndarray:
        """The draws of block ``i`` (int64, as long as :func:`noise_blocks`' block ``i``), into ``out``
        if given."""
        count = self._block_size(i)
        if count == 0:
            raise IndexError(f"block {i} is beyond the stream's {self.size} draws")
        return self._draw(count, DerivedBits(self._secret, i, secure=self._secure), out=out)

    def take(self, count: int) -> np.ndarray:
        """The next ``count`` draws (int64), the blocks they need drawn in parallel, each straight
        into its place in the result.

        Raises
        ------
        ValueError
            More draws than the stream has left.
        """
        count = int(count)
        if count < 0 or self._taken + count > self.size:
            raise ValueError(f"{count} draws asked of a stream with {self.size - self._taken} left")
        out = np.empty(count, dtype=np.int64)
        pos = min(count, self._left.size)
        out[:pos] = self._left[:pos]
        self._left = self._left[pos:]
        jobs, last = [], None
        while pos < count:
            i, n_i = self._next_block, self._block_size(self._next_block)
            self._next_block += 1
            if pos + n_i <= count:
                jobs.append((i, out[pos:pos + n_i]))
            else:  # the block that ends past this take: its rest is kept for the next one
                last = (np.empty(n_i, dtype=np.int64), count - pos)
                jobs.append((i, last[0]))
            pos += n_i
        _map_blocks(lambda job: self.block(*job), jobs, self.workers)
        if last is not None:
            block, used = last
            out[count - used:] = block[:used]
            self._left = block[used:]
        self._taken += count
        return out
