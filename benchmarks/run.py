"""Run every performance benchmark of issue 7 and print one Markdown table.

Usage::

    python benchmarks/run.py                 # full suite (about 10 minutes on 2 cores)
    python benchmarks/run.py --quick         # smaller sizes, fewer repeats (about 3 minutes)
    python benchmarks/run.py --only mechanisms scaling
    python benchmarks/run.py --root /path/to/older/checkout --json before.json
    python benchmarks/run.py --before before.json          # adds "before" ratio columns

Groups: ``mechanisms`` (RON-Gauss, PCA-Gauss, JL-Laplace, DPPro against ``X @ W``, ``X.T @ X``,
``X @ P``), ``dpmix`` (DPMix on MNIST against the memory bandwidth, the DPMix accountant),
``app`` (Streamlit slider latency and server start), ``scaling`` (time vs n, d, ell; log-log
figure in ``benchmarks/results/scaling.html``). Every ratio's baseline is measured in the same run;
see ``benchmarks/README.md`` for what each number means. Results are also written to
``benchmarks/results/latest.json``.

BLAS threads: ``--blas-threads`` (default 1) limits OpenBLAS/MKL through threadpoolctl for the
whole run, baselines included. On a shared 2-core machine multi-threaded OpenBLAS is erratic
(a lone ``X.T @ X`` measured 0.35 s on one thread and 9 s on two under load), so one thread gives
reproducible ratios; pass ``--blas-threads 0`` to leave the library default.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GROUPS = ("mechanisms", "dpmix", "app", "scaling")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats")
    ap.add_argument("--only", nargs="+", choices=GROUPS, help="run only these groups")
    ap.add_argument("--repeats", type=int, help="timed runs per measurement (median)")
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="BLAS threads for the whole run (0 = library default)")
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
    repeats = args.repeats or (3 if quick else 5)
    started = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    limiter: Any = contextlib.nullcontext()
    if args.blas_threads > 0:
        try:
            from threadpoolctl import threadpool_limits
            limiter = threadpool_limits(limits=args.blas_threads)
        except ImportError:
            log("threadpoolctl not installed: BLAS threads left at the library default")
    rows: list[bench_common.Row] = []
    extras: dict[str, Any] = {}
    with limiter:
        if "mechanisms" in groups:
            import bench_mechanisms

            log("mechanisms (items 1-3)")
            rows += bench_mechanisms.run(100_000 if quick else 500_000, 100, repeats, log)
        if "dpmix" in groups:
            import bench_dpmix

            log("DPMix and accountant (items 4-5)")
            rows += bench_dpmix.run(10_000 if quick else 60_000, 1 if quick else 2, log)
        if "app" in groups:
            import bench_app

            log("app latency (item 6)")
            app_rows, extras["app_profiles"] = bench_app.run(3 if quick else 5, log,
                                                             server_starts=1 if quick else 3)
            rows += app_rows
        if "scaling" in groups:
            import bench_scaling

            log("scaling (item 7)")
            if quick:
                ns = [10_000, 30_000, 100_000, 300_000]
                sc_rows, extras["scaling"] = bench_scaling.run(
                    ns, [25, 50, 100, 200], [4, 16, 64], 30_000, 10_000, 3, log)
            else:
                ns = [10_000, 30_000, 100_000, 300_000, 1_000_000]
                sc_rows, extras["scaling"] = bench_scaling.run(
                    ns, [25, 50, 100, 200, 400], [4, 16, 64, 256], 100_000, 20_000, 3, log)
            rows += sc_rows

    before = None
    if args.before:
        before = {r["name"]: r for r in json.loads(args.before.read_text())["rows"]}
    info = {
        "python": platform.python_version(), "numpy": np.__version__, "machine": platform.machine(),
        "blas_threads": args.blas_threads or "default", "quick": quick, "repeats": repeats,
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
