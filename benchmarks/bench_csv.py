"""CSV output: the released CSV's formatter against pandas, and CSV parts against Parquet parts.

1. In memory (the app's download and the CLI's ``-o out.csv``): ``dpcore.release.csv_text``
   against pandas' ``DataFrame.to_csv(float_format="%.10g")``, which it must equal byte for byte
   (checked here on every run), on the frame of a LocalGaussian release of ``--rows`` x 20
   columns with a class label; interleaved, medians of ``--repeats``.
2. On the Dask engine: a PCA-Gauss release of ``--dask-rows`` rows of ``bench_dask.py``'s
   generated table (``--folder``; generated if absent) written with ``--format csv`` against the
   same release written as Parquet (the baseline, in the same run), interleaved.

    python benchmarks/bench_csv.py                                   # 10^6 rows; 4 x 10^6 on Dask
    python benchmarks/bench_csv.py --rows 2e5 --dask-rows 1e6 --repeats 1    # quick
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import time_pair  # noqa: E402
from bench_dask import FILE_ROWS, N_COLUMNS, generate, warm  # noqa: E402

from dpcore import dask_engine  # noqa: E402
from dpcore.data import load_dataset  # noqa: E402
from dpcore.mechanisms import LocalGaussian, PCAGauss  # noqa: E402
from dpcore.release import CSV_FLOAT_FORMAT, csv_text  # noqa: E402


def release_frame(rows: int) -> pd.DataFrame:
    """The table a LocalGaussian release of ``rows`` x 20 features and a 3-class label writes."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.uniform(0, 1, (rows, 20)), columns=[f"x{j}" for j in range(20)])
    frame["kind"] = rng.choice(["a", "b", "c"], rows)
    ds = load_dataset(frame, label="kind", task="classification", classes=["a", "b", "c"],
                      bounds={f"x{j}": (0.0, 1.0) for j in range(20)})
    return LocalGaussian(epsilon=1.0).release(ds).to_frame()


def in_memory(rows: int, repeats: int) -> str:
    frame = release_frame(rows)
    expected = frame.to_csv(index=False, float_format=CSV_FLOAT_FORMAT)
    assert csv_text(frame, float_format=CSV_FLOAT_FORMAT) == expected, "not pandas' text"
    pandas_t, ours_t = time_pair(lambda: frame.to_csv(index=False, float_format=CSV_FLOAT_FORMAT),
                                 lambda: csv_text(frame, float_format=CSV_FLOAT_FORMAT), repeats, warmup=0)
    return (f"| in memory, {rows:,} x {frame.shape[1]} | pandas to_csv {pandas_t.wall_median:.2f} s "
            f"| csv_text {ours_t.wall_median:.2f} s | {pandas_t.wall_median / ours_t.wall_median:.2f}x "
            f"(CPU {pandas_t.cpu_median / ours_t.cpu_median:.2f}x) |")


def on_dask(folder: Path, rows: int, repeats: int) -> str:
    generate(folder, rows)
    files = [str(f) for f in sorted(folder.glob("part-*.parquet"))[: -(-rows // FILE_ROWS)]]
    bounds = {f"x{j}": (0.0, 1.0) for j in range(N_COLUMNS)}
    scratch = Path(tempfile.mkdtemp(prefix="bench_csv_"))

    def release(fmt: str):
        def run() -> None:
            warm(folder, rows)
            out = scratch / fmt
            dask_engine.release_table(PCAGauss(epsilon=1.0), files, out, bounds=bounds, fmt=fmt)
            shutil.rmtree(out)
        return run

    try:
        parquet_t, csv_t = time_pair(release("parquet"), release("csv"), repeats, warmup=0)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return (f"| Dask PCA-Gauss release, {rows:,} x {N_COLUMNS} | Parquet parts {parquet_t.wall_median:.1f} s "
            f"| CSV parts {csv_t.wall_median:.1f} s | {csv_t.wall_median / parquet_t.wall_median:.2f}x "
            f"Parquet (CPU {csv_t.cpu_median / parquet_t.cpu_median:.2f}x) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e6)
    parser.add_argument("--dask-rows", type=float, default=4e6, help="0: skip the Dask comparison")
    parser.add_argument("--folder", default="/tmp/dpcore_bench_dask")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| what | baseline | ours | ratio |\n|---|---|---|---|")
    print(in_memory(int(args.rows), args.repeats), flush=True)
    if args.dask_rows:
        print(on_dask(Path(args.folder), int(args.dask_rows), args.repeats), flush=True)


if __name__ == "__main__":
    main()
