"""Releases from a Parquet table larger than memory on the Dask engine (issue 14).

Generates ``--rows`` x 20 columns of Parquet (files of 10^6 rows, row groups of 2.5 x 10^5; in
``--folder``, reused when present, never committed), then for each size of ``--sizes`` and each
mechanism runs ``dask_engine.release_table`` in a fresh subprocess (so its peak memory is its own)
and reports wall time, rows/s, peak resident memory (client and workers: Dask's threaded scheduler
runs both in that one process), the CPU seconds of that process (robust to other load on the
machine) and the ratios against one Dask pass that only reads the files and sums the columns
(``read-and-sum``: ``dask.dataframe.read_parquet(files).sum()``) and against one Dask pass that reads
the files and writes them back as Parquet with the release writer's settings (``read-and-rewrite``:
float columns plain-encoded, no dictionary): the least any release that writes n rows of the
table's width can cost. ``engine-pass`` is one pass of the engine itself: read, the loader's checks,
clipping to the bounds, sum of the columns.

Each release is split into two phases (wall and CPU seconds): the **statistics** phase (reads,
kernels, the model's noise: everything up to the first row of output) and the **output** phase
(drawing the rows, their per-row noise, writing and hashing the parts): the time spent inside the
engine's output functions (:data:`OUTPUT_PHASE`), the rest being statistics. For the row-wise
mechanisms (DPPro's ``X P``, DPMix's mixtures) the output phase includes the read of the rows it maps.

Every run starts with the table's files in the page cache (:func:`warm` reads them first: without
it, a run after one that wrote n rows reads part of the table from the disk, and ratios measured in
the same round differed by up to 2x). ``--repeats R`` makes R interleaved rounds over the
mechanisms; the table gives each measure's median.

    python benchmarks/bench_dask.py                      # 10^6, 4 x 10^6 and 1.6 x 10^7 rows
    python benchmarks/bench_dask.py --sizes 5e7 --repeats 3  # the issue's size (9 GB of Parquet in /tmp)
    python benchmarks/bench_dask.py --mechanisms read-and-sum dpmix --dpmix-mixtures 1e6 \
        --memory ron-gauss pca-gauss dpmix               # DPMix with T <= 10^6, in-memory comparison
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's dpcore

N_COLUMNS = 20
FILE_ROWS = 1_000_000
ROW_GROUP = 250_000
MECHANISMS = ("read-and-sum", "read-and-rewrite", "engine-pass", "ron-gauss", "pca-gauss", "dppro", "dpmix")
BASELINES = ("read-and-sum", "read-and-rewrite")
#: the row-wise mechanisms: their read is in the output phase (the rows they map), not in the statistics
ROW_WISE = ("dppro", "dpmix")
#: the engine's functions that produce the output rows (per-row noise of the client-noised
#: mechanisms, DPMix's mixtures, drawing and writing the parts): time inside them is the output phase
OUTPUT_PHASE = ("_client_rows", "draw_mixtures", "write_release")


class _PhaseClock:
    """Wall and CPU seconds spent inside the wrapped functions (outermost calls only)."""

    def __init__(self) -> None:
        self.depth = 0
        self.seconds = self.cpu_seconds = 0.0

    def wrap(self, fn):
        def timed(*args, **kwargs):
            self.depth += 1
            start, cpu = time.perf_counter(), _cpu()
            try:
                return fn(*args, **kwargs)
            finally:
                self.depth -= 1
                if self.depth == 0:
                    self.seconds += time.perf_counter() - start
                    self.cpu_seconds += _cpu() - cpu
        return timed


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_gib() -> float:
    """This process's peak resident memory in GiB: ``VmHWM`` of ``/proc/self/status``, the high-water
    mark of its own address space. (``getrusage``'s ``ru_maxrss`` is not: Linux carries the largest
    RSS of the image a process replaced over ``execve``, so a run started from a large driver
    process reported the driver's size.) Elsewhere, ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def set_file_rows(rows: int) -> None:
    """Rows per generated file (and row groups of at most a quarter of it), for smaller tables."""
    global FILE_ROWS, ROW_GROUP
    FILE_ROWS, ROW_GROUP = int(rows), min(250_000, max(1, int(rows) // 4))


def generate(folder: Path, rows: int, seed: int = 0) -> None:
    """``rows`` rows of correlated features in [0, 1], one Parquet file per 10^6 rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    mix = np.random.default_rng(seed).uniform(0, 1, (N_COLUMNS, N_COLUMNS)) / N_COLUMNS
    for i in range(-(-rows // FILE_ROWS)):
        path = folder / f"part-{i:05d}.parquet"
        if path.exists():
            continue
        rng = np.random.default_rng([seed, i])
        m = min(FILE_ROWS, rows - i * FILE_ROWS)
        X = np.clip(rng.uniform(0, 1, (m, N_COLUMNS)) @ mix * 1.5, 0, 1)
        table = pa.table({f"x{j}": X[:, j] for j in range(N_COLUMNS)})
        pq.write_table(table, path, row_group_size=ROW_GROUP)


def warm(folder: Path, rows: int) -> None:
    """Read the files of the first ``rows`` rows once, so that every run starts with them in the
    page cache (a release that writes n rows evicts part of them; without this the run after it
    would pay for reading from the disk, and the ratios would depend on the order of the runs)."""
    buffer = bytearray(16 << 20)
    for path in sorted(folder.glob("part-*.parquet"))[: rows // FILE_ROWS]:
        with open(path, "rb", buffering=0) as fh:
            while fh.readinto(buffer):
                pass


def one(mechanism: str, folder: Path, rows: int, dpmix_mixtures: int | None) -> dict:
    """One measured run (in this process): seconds and peak RSS. ``memory:NAME`` loads the files
    into memory and runs the in-memory release (for comparison, small sizes only); its output phase
    is the serialisation of the release as the app's CSV download."""
    import dask.array  # noqa: F401  (imports before the clock, for every run alike)
    import dask.dataframe  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow.dataset  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import scipy.optimize  # noqa: F401

    import dpcore.dask_engine  # noqa: F401  (loads the engine modules the phase clock wraps)
    import dpcore.data  # noqa: F401
    import dpcore.mechanisms  # noqa: F401

    files = sorted(folder.glob("part-*.parquet"))[: -(-rows // FILE_ROWS)]
    bounds = {f"x{j}": (0.0, 1.0) for j in range(N_COLUMNS)}
    name = mechanism.removeprefix("memory:")
    # dpmix: ell = 16, T = min(n, --dpmix-mixtures)
    params = {"delta": 1e-9, "n_mixtures": min(rows, dpmix_mixtures or rows)} if name == "dpmix" else {}
    clock = _PhaseClock()
    # the engine is a package: a function is looked up in the module that imported it, so every
    # dpcore.dask_engine module holding one of the output functions gets the timed wrapper
    patched = []
    modules = [m for name, m in list(sys.modules.items()) if name.startswith("dpcore.dask_engine")]
    for fn in OUTPUT_PHASE:
        original = next(getattr(m, fn) for m in modules if hasattr(m, fn))
        timed = clock.wrap(original)
        for module in modules:
            if getattr(module, fn, None) is original:
                setattr(module, fn, timed)
                patched.append((module, fn, original))
    try:
        return _measured(mechanism, rows, files, bounds, name, params, clock)
    finally:
        for module, fn, original in patched:
            setattr(module, fn, original)


def _measured(mechanism: str, rows: int, files: list[Path], bounds: dict, name: str,
              params: dict, clock: _PhaseClock) -> dict:
    """The timed part of :func:`one` (its phase clock wraps the engine's output functions)."""
    import dask.dataframe as dd
    import pandas as pd

    from dpcore import dask_engine
    from dpcore.data import load_dataset
    from dpcore.mechanisms import get_mechanism

    out = Path(tempfile.mkdtemp(prefix="bench_dask_")) / "release"
    cpu_start, start = _cpu(), time.perf_counter()
    if mechanism == "read-and-sum":
        dd.read_parquet([str(f) for f in files]).sum().compute()
    elif mechanism == "read-and-rewrite":  # the writer's settings of dask_engine.write_release
        dd.read_parquet([str(f) for f in files]).to_parquet(
            out, write_index=False, name_function=lambda i: f"part-{i:05d}.parquet", use_dictionary=False)
    elif mechanism == "engine-pass":  # one pass of the engine: read, check, clip, sum the columns
        data = dask_engine.prepare_input(dask_engine.open_table([str(f) for f in files], bounds=bounds),
                                         mechanism="ron-gauss", supported_tasks=("unsupervised",))
        dask_engine.block_sums(lambda block: block.sum(axis=0), data.X)
    elif mechanism.startswith("memory:"):  # the output phase: serialising the app's CSV download
        ds = load_dataset(pd.concat([pd.read_parquet(f) for f in files], ignore_index=True), bounds=bounds)
        release = get_mechanism(name)(epsilon=1.0, **params).release(ds)
        clock.wrap(release.to_csv_bytes)()
    else:
        mech = get_mechanism(mechanism)(epsilon=1.0, **params)
        dask_engine.release_table(mech, [str(f) for f in files], out, bounds=bounds)
    seconds = time.perf_counter() - start
    cpu = _cpu() - cpu_start
    shutil.rmtree(out.parent, ignore_errors=True)
    return {"mechanism": mechanism, "rows": rows, "seconds": seconds, "cpu_seconds": cpu,
            "output_seconds": clock.seconds, "output_cpu_seconds": clock.cpu_seconds,
            "peak_rss_gib": peak_rss_gib()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e6, 4e6, 1.6e7])
    parser.add_argument("--folder", default="/tmp/dpcore_bench_dask")
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS))
    parser.add_argument("--memory", nargs="*", default=[], metavar="MECHANISM",
                        help="also run these in memory (memory:NAME) at sizes up to --memory-max rows")
    parser.add_argument("--memory-max", type=float, default=1e6)
    parser.add_argument("--dpmix-mixtures", type=float, default=1e6, help="cap on T (0: T = n)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="rounds over the mechanisms (interleaved, so every mechanism meets the "
                             "same page-cache states); the table gives the medians")
    parser.add_argument("--json", help="also write the results (every run) to this JSON file")
    parser.add_argument("--scheduler", choices=("threads", "sync"), default="threads",
                        help="Dask's local scheduler (sync: one thread, for profiles)")
    parser.add_argument("--table", metavar="JSON", help="only print the table of a saved --json run "
                        "(e.g. benchmarks/results/bench_dask.json: the README's figures)")
    parser.add_argument("--file-rows", type=float, default=FILE_ROWS,
                        help="rows per generated Parquet file (sizes must be multiples of it)")
    parser.add_argument("--one", nargs=2, metavar=("MECHANISM", "ROWS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    set_file_rows(int(args.file_rows))
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return
    folder = Path(args.folder)
    if args.one:
        import dask

        dask.config.set(scheduler=args.scheduler)
        cap = int(args.dpmix_mixtures) if args.dpmix_mixtures else None
        print(json.dumps(one(args.one[0], folder, int(float(args.one[1])), cap)))
        return
    sizes = [int(s) for s in args.sizes]
    if any(rows % FILE_ROWS for rows in sizes):
        parser.error(f"--sizes must be multiples of {FILE_ROWS:,} (the table's files hold {FILE_ROWS:,} rows "
                     "each, and a release reads whole files)")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    generate(folder, max(sizes))
    results = []
    for rows in sizes:
        memory = [f"memory:{m}" for m in args.memory] if rows <= args.memory_max else []
        for mech in [*args.mechanisms, *memory] * args.repeats:
            command = [sys.executable, __file__, "--folder", str(folder), "--one", mech, str(rows),
                       "--scheduler", args.scheduler, "--file-rows", str(FILE_ROWS)]
            if args.dpmix_mixtures:
                command += ["--dpmix-mixtures", str(args.dpmix_mixtures)]
            warm(folder, rows)
            proc = subprocess.run(command, capture_output=True, text=True, check=True)
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            r = results[-1]
            print(f"{rows:>12,} {mech:<16} {r['seconds']:8.1f} s (CPU {r['cpu_seconds']:8.1f} s; output "
                  f"{r['output_seconds']:6.1f} s, CPU {r['output_cpu_seconds']:6.1f} s) "
                  f"{rows / r['seconds']:>12,.0f} rows/s peak RSS {r['peak_rss_gib']:.2f} GiB", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(table(results))


def smoke(log: Any, rows: int = 100_000, file_rows: int = 25_000) -> list[Any]:
    """``run.py --quick``'s ``dask`` group: every measured branch of :func:`one` (each mechanism,
    the baselines, an in-memory release) on a small generated table, in this process, and the
    results table; then one run in its own process, as the benchmark measures, while this process
    holds 0.75 GiB of ballast: a peak RSS that reaches it reads the driver's memory, not the run's
    (the bug :func:`peak_rss_gib` fixes), and the row says ``failed``, as for a run that fails."""
    from bench_common import Row

    set_file_rows(file_rows)
    out: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="bench_dask_smoke_") as tmp:
        folder = Path(tmp) / "table"
        generate(folder, rows)
        results = []
        for mechanism in (*MECHANISMS, "memory:pca-gauss"):
            log(f"  Dask {mechanism}, {rows:,} rows ...")
            name = f"Dask engine smoke run: {mechanism}, {rows:,} rows x {N_COLUMNS}"
            try:
                results.append(one(mechanism, folder, rows, None))
            except Exception as exc:  # reported, and run.py exits with an error
                out.append(Row("dask", name, note=f"failed: {type(exc).__name__}: {exc}"))
                continue
            out.append(Row("dask", name, "", None, results[-1]["seconds"], None, None, "",
                           f"CPU {results[-1]['cpu_seconds']:.2f} s"))
        table(results)
        ballast = np.ones(96 << 20)  # 0.75 GiB, touched: resident in this process
        command = [sys.executable, __file__, "--folder", str(folder), "--one", "read-and-sum", str(rows),
                   "--file-rows", str(file_rows)]
        proc = subprocess.run(command, capture_output=True, text=True)
        name = f"Dask engine smoke run: read-and-sum in its own process, {rows:,} rows (peak RSS)"
        if proc.returncode:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            out.append(Row("dask", name, note=f"failed: exit {proc.returncode}: {last}"))
        else:
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            peak, held = r["peak_rss_gib"], ballast.nbytes / 2**30
            note = (f"peak RSS {peak:.2f} GiB, this run's own (the driver holds {held:.2f})" if peak < held
                    else f"failed: peak RSS {peak:.2f} GiB reads the driver's")
            out.append(Row("dask", name, "", None, r["seconds"], None, None, "", note,
                           {"peak_rss_gib": peak}))
        del ballast
    return out


MEASURES = ("seconds", "cpu_seconds", "output_seconds", "output_cpu_seconds", "peak_rss_gib")


def medians(results: list[dict]) -> list[dict]:
    """One row per (rows, mechanism), in first-run order: the median of each measure over its runs
    (``runs``: how many)."""
    groups: dict[tuple[int, str], list[dict]] = {}
    for r in results:
        groups.setdefault((r["rows"], r["mechanism"]), []).append(r)
    return [{"rows": rows, "mechanism": mech, "runs": len(runs),
             "seconds_range": (min(r["seconds"] for r in runs), max(r["seconds"] for r in runs)),
             **{m: float(np.median([r[m] for r in runs])) for m in MEASURES}}
            for (rows, mech), runs in groups.items()]


def _run_of(results: list[dict], rows: int, mechanism: str) -> dict | None:
    """The (median) row of ``mechanism`` at ``rows`` rows, if it was run."""
    return next((r for r in results if r["rows"] == rows and r["mechanism"] == mechanism), None)


def table(results: list[dict]) -> str:
    """The results as a Markdown table (medians over repeated runs: :func:`medians`): totals,
    phases, the ratios to both baselines, and, for the aggregate mechanisms, the statistics phase
    against the engine's own pass (their statistics can cost no less than one checked read of the
    table per pass over it)."""
    results = medians(results)
    lines = [("| rows | mechanism | runs | seconds (range) | CPU s | statistics s (CPU) | output s (CPU) | "
              "rows/s | peak RSS (GiB) | / read-and-sum wall (CPU) | / read-and-rewrite wall (CPU) | "
              "statistics / engine-pass wall |"),
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        ratios = []
        for name in BASELINES:
            base = _run_of(results, r["rows"], name)
            ratios.append("" if base is None else f"{r['seconds'] / base['seconds']:.2f} "
                          f"({r['cpu_seconds'] / base['cpu_seconds']:.2f})")
        statistics = r["seconds"] - r["output_seconds"]
        engine = _run_of(results, r["rows"], "engine-pass")
        aggregate = r["mechanism"] not in (*BASELINES, "engine-pass", *ROW_WISE) and ":" not in r["mechanism"]
        per_pass = f"{statistics / engine['seconds']:.2f}" if engine is not None and aggregate else ""
        stats = f"{statistics:.1f} ({r['cpu_seconds'] - r['output_cpu_seconds']:.1f})"
        output = f"{r['output_seconds']:.1f} ({r['output_cpu_seconds']:.1f})"
        low, high = r["seconds_range"]
        span = f" ({low:.1f}-{high:.1f})" if r["runs"] > 1 else ""
        lines.append(f"| {r['rows']:,} | {r['mechanism']} | {r['runs']} | {r['seconds']:.1f}{span} | "
                     f"{r['cpu_seconds']:.1f} | {stats} | {output} | {r['rows'] / r['seconds']:,.0f} | "
                     f"{r['peak_rss_gib']:.2f} | {ratios[0]} | {ratios[1]} | {per_pass} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
