"""Shared helpers of the benchmark suite (``benchmarks/run.py``): timing, memory, result rows.

Every ratio is measured against a baseline timed in the same run, interleaved with the
mechanism (baseline, mechanism, baseline, ...), and reported as median(mechanism) /
median(baseline) in wall-clock time. The machine is shared, so the ratio of process CPU times
(``time.process_time``: this process's own work, all of its threads) is reported beside it; with
single-threaded BLAS (the suite's default) it is the more stable of the two.
"""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

#: the BLAS libraries' thread count when the suite started (before any limit): run.py records it
DEFAULT_BLAS_THREADS: int | None = None


def blas_threads_now() -> int | None:
    """The largest thread count of the loaded BLAS libraries (threadpoolctl), or None."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    counts = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    return max(counts) if counts else None


def at_blas_threads(fn: Callable[[], Any], threads: int | None) -> Callable[[], Any]:
    """``fn`` run with exactly ``threads`` BLAS threads (threadpoolctl; None: as the caller has it)."""
    if threads is None:
        return fn

    def run() -> Any:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=threads, user_api="blas"):
            return fn()

    return run


def row_blocks(n_rows: int, n_features: int, block_bytes: int = 4 << 20):
    """Slices of about ``block_bytes`` of float64 rows (as ``dpcore.preprocessing.row_blocks``; a
    copy, so the suite also runs against checkouts that predate it with ``--root``)."""
    step = max(64, block_bytes // (8 * max(1, n_features)))
    for start in range(0, n_rows, step):
        yield slice(start, min(n_rows, start + step))


@dataclass
class Timing:
    """Wall-clock and process-CPU seconds of repeated calls."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    @property
    def wall_median(self) -> float:
        return statistics.median(self.wall)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    @property
    def wall_min(self) -> float:
        return min(self.wall)


def time_call(fn: Callable[[], Any], timing: Timing) -> Any:
    """Call ``fn`` once, appending its wall and CPU time to ``timing``; returns its result."""
    gc.collect()
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    w1, c1 = time.perf_counter(), time.process_time()
    timing.wall.append(w1 - w0)
    timing.cpu.append(c1 - c0)
    return out


def time_pair(baseline: Callable[[], Any], target: Callable[[], Any], repeats: int,
              warmup: int = 1) -> tuple[Timing, Timing]:
    """Interleaved timings of ``baseline`` and ``target`` (``warmup`` untimed rounds first)."""
    for _ in range(warmup):
        baseline()
        target()
    tb, tt = Timing(), Timing()
    for _ in range(repeats):
        time_call(baseline, tb)
        time_call(target, tt)
    return tb, tt


def time_repeat(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> Timing:
    for _ in range(warmup):
        fn()
    t = Timing()
    for _ in range(repeats):
        time_call(fn, t)
    return t


def peak_memory(fn: Callable[[], Any]) -> int:
    """Peak bytes allocated while ``fn`` runs, above what was allocated before (tracemalloc:
    NumPy reports its data buffers to it). The result of ``fn`` is dropped."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    del out
    return int(peak)


@dataclass
class Row:
    """One line of the results table."""

    group: str
    name: str
    baseline: str = ""
    baseline_s: float | None = None
    time_s: float | None = None
    ratio: float | None = None
    ratio_cpu: float | None = None
    goal: str = ""
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> str:
        """``ok`` when the wall-clock figure meets the goal, ``ok (CPU)`` when only the CPU one
        does (the wall clock then includes waiting for a shared CPU), else ``over``. Code that
        runs on several threads has a CPU figure (summed over threads) above its wall figure.
        Goals are ``<= r`` for ratios and ``<= t s`` / ``<= t ms`` for times."""
        if not self.goal.startswith("<="):
            return ""
        value, *unit = self.goal[2:].split()
        limit = float(value) * (1e-3 if unit and unit[0] == "ms" else 1.0)
        if unit:
            wall, cpu = self.time_s, self.extra.get("cpu_s")
        else:
            wall, cpu = self.ratio, self.ratio_cpu
        if wall is None:
            return ""
        if wall <= limit:
            return "ok"
        return "ok (CPU)" if cpu is not None and cpu <= limit else "over"

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["status"] = self.status
        return out


def ratio_row(group: str, name: str, baseline_name: str, tb: Timing, tt: Timing, goal: str = "",
              note: str = "", **extra: Any) -> Row:
    return Row(group, name, baseline_name, tb.wall_median, tt.wall_median,
               tt.wall_median / tb.wall_median, tt.cpu_median / tb.cpu_median, goal, note,
               dict(extra))


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return ""
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def markdown_table(rows: list[Row], before: dict[str, dict[str, Any]] | None = None) -> str:
    """The results as a Markdown table (``before``: rows of an earlier run by name, adding a
    "before" ratio column)."""
    head = ["benchmark", "baseline", "baseline s", "time s", "ratio (wall)", "ratio (CPU)"]
    if before:
        head += ["before (wall)", "before (CPU)"]
    head += ["goal", "status", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.name, r.baseline, fmt(r.baseline_s), fmt(r.time_s), fmt(r.ratio), fmt(r.ratio_cpu)]
        if before:
            b = before.get(r.name, {})
            cells += [fmt(b.get("ratio")), fmt(b.get("ratio_cpu"))]
        cells += [r.goal, r.status, r.note]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)
