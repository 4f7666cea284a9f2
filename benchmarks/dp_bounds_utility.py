"""DP bounds against hand-written public bounds: what a release of a wide table is worth with each.

Protocol (the downloaded-file protocol of SPEC section 11, in memory). A table is split 80/20
(stratified, seed 0); the train part is released with ``pca-gauss`` (its defaults) at a total epsilon (delta
1e-6), either

- **public**: hand-written public bounds (a rule such as ``{"f*": [0, 640]}``, or the bundled
  metadata's documented bounds), the whole epsilon for the release; or
- **DP bounds**: no bounds at all; ``--dp-bounds EPS_B`` spends ``EPS_B`` of the same total on
  DP quantile estimates (automatic levels, candidates in a public range) of every column, the release
  gets the rest (:mod:`dpcore.dp_bounds`, :func:`dpcore.dp_bounds.compose_release`).

The released CSV (original space, clipped to the bounds the release used) trains a
``LogisticRegression(max_iter=5000)`` on features scaled to [0, 1] by those bounds; the real
held-out rows are scaled (and clipped) by the same bounds. Accuracy: mean and sd over ``--trials``
releases (fresh OS entropy each). Baselines: the majority class and the same model on the real
train rows scaled by the public bounds. Also shown: the mean width of the DP bounds over the public
ones, and the share of held-out values the DP bounds clip.

Tables: ``wide-85`` (synthetic, 85 columns ``f0..f84`` of values in [0, 640] concentrated in
[~60, ~380], 25,000 rows, a label from six of them) and ``breast-cancer`` (bundled, 569 x 30, the
metadata's documented bounds): a wide table with many rows, and one with few.

Usage::

    python benchmarks/dp_bounds_utility.py [--trials 3] [--total 3] [--dp-eps 0.3 1]

Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpcore.data import load_dataset  # noqa: E402
from dpcore.decode import PublicSchema, with_output_space  # noqa: E402
from dpcore.dp_bounds import apply_estimate, compose_release, estimate_bounds  # noqa: E402
from dpcore.exceptions import PrivacyLeakWarning  # noqa: E402
from dpcore.mechanisms import get_mechanism  # noqa: E402

DELTA = 1e-6
MECHANISM = "pca-gauss"


def wide_table(n: int = 25_000, d: int = 85, seed: int = 0) -> tuple[pd.DataFrame, dict, tuple[float, float]]:
    """The synthetic wide table, its hand-written public bounds and the DP candidate range."""
    rng = np.random.default_rng(seed)
    centre = rng.uniform(120, 320, d)
    spread = rng.uniform(20, 60, d)
    X = np.clip(rng.normal(centre, spread, (n, d)), 0, 640)
    w = np.zeros(d)
    w[:6] = rng.normal(0, 1, 6) / spread[:6]
    logit = (X - centre) @ w + rng.normal(0, 0.5, n)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(d)])
    frame["y"] = (logit > 0).astype(int)
    return frame, {"f*": [0, 640]}, (0.0, 1000.0)


def breast_cancer() -> tuple[pd.DataFrame, dict, tuple[float, float]]:
    ds = load_dataset("breast-cancer")
    frame = ds.to_frame().rename(columns={ds.label_name: "y"})
    public = {c: list(b) for c, b in zip(ds.feature_names, ds.bounds.tolist(), strict=True)}
    return frame, public, (0.0, 10000.0)


def _scaled(X: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    lo, hi = bounds[:, 0], bounds[:, 1]
    return (np.clip(X, lo, hi) - lo) / (hi - lo)


def _accuracy(frame: pd.DataFrame, bounds: np.ndarray, test: pd.DataFrame, features: list[str]) -> float:
    y = frame["y"].to_numpy()
    if np.unique(y).size < 2:
        return float(np.mean(test["y"].to_numpy() == y[0]))
    model = LogisticRegression(max_iter=5000).fit(_scaled(frame[features].to_numpy(), bounds), y)
    return float(model.score(_scaled(test[features].to_numpy(), bounds), test["y"].to_numpy()))


def run(name: str, frame: pd.DataFrame, public: dict, cand: tuple[float, float], total: float,
        dp_eps: list[float], trials: int) -> list[dict]:
    features = [c for c in frame.columns if c != "y"]
    train, test = load_dataset(frame, label="y", task="classification", classes=[0, 1],
                               bounds=public).split(0.2, random_state=0)
    train_frame = train.to_frame().rename(columns={train.label_name: "y"})
    test_frame = test.to_frame().rename(columns={test.label_name: "y"})
    majority = max(np.mean(test_frame["y"] == 0), np.mean(test_frame["y"] == 1))
    nonprivate = _accuracy(train_frame, train.bounds, test_frame, features)
    rows = []
    for variant in ["public", *[f"dp {e:g}" for e in dp_eps]]:
        accs, widths, clipped, seconds = [], [], [], []
        for _ in range(trials):
            start = time.perf_counter()
            if variant == "public":
                ds, eps_mech, est = train, total, None
            else:
                eps_b = float(variant.split()[1])
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", PrivacyLeakWarning)
                    bare = load_dataset(train_frame, label="y", task="classification", classes=[0, 1])
                est = estimate_bounds(bare, eps_b, candidate_range=cand)
                ds, eps_mech = apply_estimate(bare, est), total - eps_b
            release = get_mechanism(MECHANISM)(epsilon=eps_mech, delta=DELTA).release(ds)
            if est is not None:
                release = compose_release(release, est)
            assert abs(release.guarantee.epsilon - total) < 1e-9 and release.guarantee.holds
            view = with_output_space(release, PublicSchema.from_dataset(ds), "original")
            released = pd.read_csv(io.BytesIO(view.to_csv_bytes()))
            seconds.append(time.perf_counter() - start)
            accs.append(_accuracy(released, ds.bounds, test_frame, features))
            widths.append(float(np.mean((ds.bounds[:, 1] - ds.bounds[:, 0])
                                        / (train.bounds[:, 1] - train.bounds[:, 0]))))
            Xt = test_frame[features].to_numpy()
            clipped.append(float(np.mean((Xt < ds.bounds[:, 0]) | (Xt > ds.bounds[:, 1]))))
        rows.append({"table": name, "n": train.n_samples, "d": train.n_features, "bounds": variant,
                     "acc": np.mean(accs), "sd": np.std(accs, ddof=1) if trials > 1 else 0.0,
                     "width": np.mean(widths), "clipped": np.mean(clipped), "seconds": np.mean(seconds),
                     "majority": majority, "nonprivate": nonprivate})
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--total", type=float, default=3.0, help="total epsilon of every release")
    ap.add_argument("--dp-eps", type=float, nargs="+", default=[0.3, 1.0], help="epsilon of the DP bounds")
    args = ap.parse_args(argv)
    rows = []
    for name, (frame, public, cand) in (("wide-85", wide_table()), ("breast-cancer", breast_cancer())):
        rows += run(name, frame, public, cand, args.total, args.dp_eps, args.trials)
    print(f"{MECHANISM} (defaults), total epsilon {args.total:g} (delta {DELTA:g}) in every row; "
          f"{args.trials} releases each\n")
    print("| table | n train x d | bounds (epsilon of the DP bounds) | accuracy (mean ± sd) | majority | "
          "non-private | width / public width | held-out values clipped | s per release |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['table']} | {r['n']:,} x {r['d']} | {r['bounds']} | {r['acc']:.3f} ± {r['sd']:.3f} | "
              f"{r['majority']:.3f} | {r['nonprivate']:.3f} | {r['width']:.3g} | {r['clipped']:.1%} | "
              f"{r['seconds']:.2f} |")


if __name__ == "__main__":
    main()
