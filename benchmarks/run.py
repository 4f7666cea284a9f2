"""Run the performance benchmarks and print one Markdown table.

Usage::

    python benchmarks/run.py                 # full suite (about 10 minutes on 2 cores)
    python benchmarks/run.py --quick         # tiny sizes, one repeat: a smoke run of every group
                                             # (CI runs it: a benchmark that crashes fails the build)
    python benchmarks/run.py --only mechanisms scaling
    python benchmarks/run.py --root /path/to/older/checkout --json before.json
    python benchmarks/run.py --before before.json          # adds "before" ratio columns

Groups: ``mechanisms`` (RON-Gauss and PCA-Gauss against ``X.T @ X + X @ W``, JL-Laplace and DPPro
against ``X @ P`` plus as many float Laplace / normal draws; the exact noise alone; each release at
the BLAS libraries' default thread count against one thread), ``dpmix`` (DPMix on MNIST against
the memory bandwidth, the DPMix accountant), ``noise`` (the exact samplers against NumPy's float
samplers), ``app`` (Streamlit slider latency and server start), ``scaling`` (time vs n, d, ell;
log-log figure in ``benchmarks/results/scaling.html``), ``dask`` (``--quick`` only: every branch of
``bench_dask.py`` on a small table, and one run in its own process checked to report its own peak
memory; the full Dask benchmark runs on its own). Every ratio's baseline is measured in the same
run; see ``benchmarks/README.md`` for what each number means. Results are also written to
``benchmarks/results/latest.json``. The exit status is 1 when a benchmark failed (a row noted
``failed: ...``).

BLAS threads: by default the whole run, baselines included, uses dpcore's rule
(``dpcore.threads.blas_limit``: one BLAS thread unless ``DPCORE_BLAS_THREADS`` says otherwise),
as every release does. ``--blas-threads N`` sets N for the run instead (0: the library default).
On a shared 2-core machine multi-threaded OpenBLAS is erratic (a lone ``X.T @ X`` measured 0.3 s
on one thread and 5-10 s on two under load).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GROUPS = ("mechanisms", "dpmix", "noise", "app", "scaling", "dask")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats")
    ap.add_argument("--only", nargs="+", choices=GROUPS, help="run only these groups")
    ap.add_argument("--repeats", type=int, help="timed runs per measurement (median)")
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="BLAS threads for the whole run (0 = library default; default: dpcore's rule)")
    ap.add_argument("--root", type=Path, default=ROOT,
                    help="import dpcore (and the app) from this checkout (default: this one)")
    ap.add_argument("--json", type=Path, default=HERE / "results" / "latest.json",
                    help="where to write the results as JSON")
    ap.add_argument("--before", type=Path, help="JSON of an earlier run: adds its ratios as columns")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    root = args.root.resolve()
    sys.path.insert(0, str(root))
    sys.path.insert(0, str(HERE))
    import bench_common
    import numpy as np

    groups = args.only or list(GROUPS)
    quick = args.quick
    repeats = args.repeats or (1 if quick else 5)
    started = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    bench_common.DEFAULT_BLAS_THREADS = bench_common.blas_threads_now()
    limiter: Any
    from threadpoolctl import threadpool_limits

    if args.blas_threads is None:
        try:
            from dpcore.threads import blas_limit, blas_threads
        except ImportError:  # a checkout (--root) from before the rule: its value, one thread
            limiter, blas_label = threadpool_limits(limits=1), "1 (dpcore's rule)"
        else:
            limiter, blas_label = blas_limit(), f"{blas_threads()} (dpcore's rule)"
    elif args.blas_threads > 0:
        limiter, blas_label = threadpool_limits(limits=args.blas_threads), str(args.blas_threads)
    else:
        limiter = contextlib.nullcontext()
        blas_label = f"{bench_common.DEFAULT_BLAS_THREADS} (library default)"
    rows: list[bench_common.Row] = []
    extras: dict[str, Any] = {}
    with limiter:
        if "mechanisms" in groups:
            import bench_mechanisms

            log("mechanisms")
            rows += bench_mechanisms.run(20_000 if quick else 500_000, 50 if quick else 100, repeats, log)
        if "dpmix" in groups:
            import bench_dpmix

            log("DPMix and accountant")
            rows += bench_dpmix.run(2_000 if quick else 60_000, 1 if quick else 3, log, quick=quick)
        if "noise" in groups:
            import bench_noise

            log("exact samplers")
            rows += bench_noise.rows((10**5,) if quick else (10**6, 10**7), repeats)
        if "app" in groups:
            import bench_app

            log("app latency")
            app_rows, extras["app_profiles"] = bench_app.run(1 if quick else 5, log,
                                                             server_starts=1 if quick else 3, quick=quick)
            rows += app_rows
        if "scaling" in groups:
            import bench_scaling

            log("scaling")
            if quick:
                sc_rows, extras["scaling"] = bench_scaling.run(
                    [2_000, 4_000, 8_000], [25, 35, 50], [2, 4, 8], 4_000, 2_000, 1, log)
            else:
                ns = [10_000, 30_000, 100_000, 300_000, 1_000_000]
                sc_rows, extras["scaling"] = bench_scaling.run(
                    ns, [25, 50, 100, 200, 400], [4, 16, 64, 256], 100_000, 20_000, 3, log)
            rows += sc_rows
        if "dask" in groups and quick:
            import bench_dask

            log("Dask engine smoke run")
            rows += bench_dask.smoke(log)

    before = None
    if args.before:
        before = {r["name"]: r for r in json.loads(args.before.read_text())["rows"]}
    info = {
        "python": platform.python_version(), "numpy": np.__version__, "machine": platform.machine(),
        "blas_threads": blas_label, "load_average": [round(x, 2) for x in os.getloadavg()],
        "quick": quick, "repeats": repeats,
        "root": str(root), "seconds": round(time.perf_counter() - started, 1),
    }
    print(f"## dp-explorer benchmarks ({'quick' if quick else 'full'} run, "
          f"{info['seconds']} s, BLAS threads: {info['blas_threads']}, root {root})\n")
    print(bench_common.markdown_table(rows, before))
    slopes = [r for r in rows if r.group == "scaling" and "slope" in r.extra]
    if slopes:
        print("\nFitted log-log slopes (1 = linear):")
        for r in slopes:
            print(f"- {r.name.removeprefix('scaling: ')}: {r.extra['slope']:.2f}")
    for label, prof in extras.get("app_profiles", {}).items():
        print(f"\nProfile, {label} (cumulative seconds per rerun):")
        for name, sec in prof.get("project", []):
            print(f"- {name}: {sec:.3f}")
        if prof.get("other"):
            print("  third-party: " + "; ".join(f"{n} {s:.3f}" for n, s in prof["other"][:5]))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"info": info, "rows": [r.as_dict() for r in rows]},
                                    indent=1, default=str))
    log(f"results written to {args.json}")
    failed = [r.name for r in rows if r.note.startswith("failed")]
    if failed:
        print(f"\n{len(failed)} benchmark(s) failed: {'; '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
