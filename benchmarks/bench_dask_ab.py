"""Interleaved A/B of two checkouts on the Dask benchmark (``bench_dask.py``): every run alternates
between the ``--before`` checkout and this one (or ``--after``), so both meet the same machine
and page-cache states, and the table gives each measure's median.

Each run is ``bench_dask.py --one MECHANISM ROWS`` of that checkout, in a fresh process (its
peak memory is its own), after reading the table's files once (``bench_dask.warm``). The table's
files are those of ``bench_dask.py`` (``--folder``; generate them with it first).

    git worktree add /tmp/before HEAD~1
    python benchmarks/bench_dask_ab.py --before /tmp/before --rows 5e7 --repeats 3 \\
        --json benchmarks/results/bench_dask_batch_ab.json
    python benchmarks/bench_dask_ab.py --table benchmarks/results/bench_dask_batch_ab.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

MECHANISMS = ("read-and-sum", "engine-pass", "ron-gauss", "pca-gauss", "dppro", "dpmix")
#: the aggregate mechanisms: their statistics phase is also given per read of the table
PASSES = {"ron-gauss": 2, "pca-gauss": 1}


def table(runs: list[dict]) -> str:
    """Medians per (mechanism, side) as a Markdown table: wall and CPU seconds of the run and of
    its statistics phase (for the aggregate mechanisms also against the engine's own pass, per
    read of the table), and the peak resident memory."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in runs:
        groups.setdefault((r["mechanism"], r["side"]), []).append(r)

    def median(side: str, mech: str, key: str) -> float:
        return float(np.median([key(r) if callable(key) else r[key] for r in groups[(mech, side)]]))

    sides = ("before", "after")
    engine = {s: median(s, "engine-pass", "seconds") for s in sides if ("engine-pass", s) in groups}
    lines = ["| mechanism | " + " | ".join(f"{s}: wall s (CPU) | {s}: statistics s (CPU) | {s}: peak GiB"
                                           for s in sides) + " |",
             "|---|" + "---:|" * 6]
    for mech in dict.fromkeys(r["mechanism"] for r in runs):
        cells = []
        for s in sides:
            if (mech, s) not in groups:
                cells += ["", "", ""]
                continue
            stats = median(s, mech, lambda r: r["seconds"] - r["output_seconds"])
            stats_cpu = median(s, mech, lambda r: r["cpu_seconds"] - r["output_cpu_seconds"])
            per = (f" = {stats / engine[s] / PASSES[mech]:.2f} x engine pass per read"
                   if mech in PASSES and s in engine else "")
            cells += [f"{median(s, mech, 'seconds'):.1f} ({median(s, mech, 'cpu_seconds'):.1f})",
                      f"{stats:.1f} ({stats_cpu:.1f}){per}", f"{median(s, mech, 'peak_rss_gib'):.2f}"]
        lines.append(f"| {mech} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="the other checkout (a git worktree)")
    parser.add_argument("--after", type=Path, default=HERE.parent, help="default: this checkout")
    parser.add_argument("--rows", type=float, default=5e7)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS))
    parser.add_argument("--folder", default="/tmp/dpcore_bench_dask")
    parser.add_argument("--json", help="also write every run to this JSON file")
    parser.add_argument("--table", metavar="JSON", help="only print the table of a saved --json run")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return
    if args.before is None:
        parser.error("--before ROOT is required (or --table JSON)")
    import bench_dask

    folder, rows, runs = Path(args.folder), int(args.rows), []
    for _ in range(args.repeats):
        for mech in args.mechanisms:
            for side, root in (("before", args.before), ("after", args.after)):
                bench_dask.warm(folder, rows)
                proc = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_dask.py"), "--folder",
                                       str(folder), "--one", mech, str(rows)],
                                      capture_output=True, text=True, check=True)
                runs.append({**json.loads(proc.stdout.strip().splitlines()[-1]), "side": side})
                r = runs[-1]
                print(f"{side:<6} {mech:<14} {r['seconds']:6.1f} s (CPU {r['cpu_seconds']:6.1f} s) "
                      f"peak {r['peak_rss_gib']:.2f} GiB", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    print(table(runs))


if __name__ == "__main__":
    main()
