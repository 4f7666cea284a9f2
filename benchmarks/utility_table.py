"""Reproduction table: utility of RON-Gauss and PCA-Gauss against epsilon (SPEC section 7).

Classification (train on the release, test on real held-out rows, RBF-SVM accuracy): RON-Gauss
Alg. 5 (GMM) and PCA-Gauss Alg. 3 (GMM, W from PubPCA and from LapPCA) at
epsilon in {0.1, 0.5, 1, 2, 5, 10} and inf (NOT PRIVATE), next to the non-private SVM on the real
training rows. Clustering: unsupervised RON-Gauss (Alg. 3), K-means with k by silhouette analysis:
the papers' silhouette of the release, plus the real-data-grounded silhouette and ARI.

Datasets: the bundled ``digits`` (1,797 x 64) and ``mnist-10k`` (10,000 x 784), split 75/25
(stratified, seed 0). The SVM trains on at most 5,000 rows (random sub-sample; only the
non-private MNIST baseline has more, 7,500) and silhouettes use at most 2,000 rows.

Usage::

    python benchmarks/utility_table.py [--trials 3] [--datasets digits mnist-10k]

Prints Markdown tables (mean +- 95% half-width over the trials).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpcore.data import load_dataset  # noqa: E402
from dpcore.evaluation import EvalSettings, evaluate_non_private, utility_sweep  # noqa: E402
from dpcore.mechanisms import PCAGauss, RONGauss  # noqa: E402

EPSILONS = [0.1, 0.5, 1.0, 2.0, 5.0, 10.0, math.inf]
# projection dimensions, fixed for every epsilon; picked from a small exploratory run on digits
# (p in {5, 10, 20, 40} at epsilon = 1, 10, inf). Like the papers' "best over dimensions", this
# choice looks at the data and is not itself private.
P_RON = 20
P_PCA = 10


def _fmt(mean: float, lo: float, hi: float, n: int, trials: int) -> str:
    if not math.isfinite(mean):
        return "n/a"
    text = f"{mean:.3f}" if not (math.isfinite(lo) and math.isfinite(hi)) \
        else f"{mean:.3f} ± {(hi - lo) / 2:.3f}"
    # fewer finite values than trials: e.g. every real row fell into one cluster (no silhouette)
    return text + (f" (n={int(n)})" if n < trials else "")


def _table(frames: dict[str, pd.DataFrame], metric: str, title: str, trials: int) -> str:
    cols = [("∞ (not private)" if math.isinf(e) else f"{e:g}") for e in EPSILONS]
    lines = [f"**{title}**", "", "| method | " + " | ".join(f"ε = {c}" for c in cols)
             + " | non-private |", "|---" * (len(cols) + 2) + "|"]
    for name, df in frames.items():
        rows = df[df["metric"] == metric].set_index("x")
        cells = [_fmt(*rows.loc[e, ["mean", "lo", "hi", "n_trials"]], trials) if e in rows.index
                 else "" for e in EPSILONS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {rows['baseline'].iloc[0]:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--datasets", nargs="+", default=["digits", "mnist-10k"])
    args = ap.parse_args(argv)

    def progress(done: int, total: int, msg: str) -> None:
        print(f"  [{done}/{total}] {msg}", file=sys.stderr, flush=True)

    for name in args.datasets:
        ds = load_dataset(name)
        t0 = time.time()
        print(f"\n### {name} ({ds.n_samples} x {ds.n_features}), {args.trials} trials per ε\n")
        train, test = ds.split(test_size=0.25, random_state=0)
        base = evaluate_non_private(train, test, settings=EvalSettings(random_state=0))
        factories = {
            f"RON-Gauss GMM (p = {P_RON})": lambda e: RONGauss(epsilon=e, n_components=P_RON),
            f"PCA-Gauss GMM, PubPCA 10% (p = {P_PCA})":
                lambda e: PCAGauss(epsilon=e, n_components=P_PCA, pca_source="public"),
            f"PCA-Gauss GMM, LapPCA ε/2 (p = {P_PCA})":
                lambda e: PCAGauss(epsilon=e, n_components=P_PCA, pca_source="lap"),
        }
        clf = {label: utility_sweep(f, (train, test), EPSILONS, trials=args.trials,
                                    progress=progress, baseline=base)
               for label, f in factories.items()}
        print(_table(clf, "svm_accuracy", f"{name}: SVM accuracy on real held-out rows", args.trials))
        print()
        print(_table(clf, "logreg_accuracy", f"{name}: logistic regression accuracy", args.trials))
        unsup = tuple(replace(part, task="unsupervised", y=None) for part in (train, test))
        clu = utility_sweep(lambda e: RONGauss(epsilon=e, n_components=P_RON), unsup, EPSILONS,
                            trials=args.trials, progress=progress)
        for metric, what in [("silhouette_release", "silhouette of the release (papers' metric)"),
                             ("silhouette_real", "silhouette of real rows under the release's "
                                                 "K-means"),
                             ("ari_real", "ARI vs K-means on the real rows"),
                             ("k", "number of clusters chosen")]:
            print()
            print(_table({f"RON-Gauss unsupervised (p = {P_RON})": clu}, metric,
                         f"{name}: clustering, {what}", args.trials))
        print(f"\n({name}: {time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
