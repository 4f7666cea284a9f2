"""Adult utility benchmark (issue 13, item 6): train on the release, test on real rows.

Protocol. The bundled ``adult`` table (the UCI training file, 32,561 x 105: one-hot categorical
groups over their published categories and six numerics with published bounds) is split 75/25
(stratified, seed 0). Each mechanism releases from the train part only, with only epsilon (and
delta = 1e-6 where the guarantee is approximate) set and every other parameter at its default. A
``LogisticRegression(max_iter=5000)`` is trained on the released rows and labels and tested on the
real test rows mapped through the release's public transform (:meth:`Release.transform`); a release
in the original feature units (MODIPS) and the test rows are both scaled by the public bounds, as
for the non-private baseline (the classifier does not converge on the raw units).
Baselines: the majority class of the test rows, and the same classifier trained without privacy
on the real train rows scaled to ``[0, 1]`` by the public bounds. Every cell is the mean over
``--trials`` releases (seeds 0..trials-1) with a 95% Student-t interval (mean +- half-width).
Nothing is tuned: no parameter is chosen by looking at the test rows.

Variants: each mechanism's defaults twice, with only epsilon given (``noise="auto"`` then uses the
papers' Laplace noise, pure epsilon) and with epsilon and delta = 1e-6 given (``noise="auto"`` then
uses Gaussian noise, :func:`dpcore.calibration.resolve_noise`); and papers' modes by name
(PCA-Gauss ``pca_source="analyze-gauss"`` with the Laplace model, RON-Gauss with Meckes's p = 6), and
PCA-Gauss with ``covariance_type="tied"`` (one pooled within-class covariance).
Defaults include the automatic ``n_components`` and budget split of the public rule
(:func:`dpcore.calibration.recommended_n_components`), which sees only n, d, the class count,
epsilon and delta.

Usage::

    python benchmarks/adult_utility.py [--trials 5] [--epsilons 0.1 1 10] [--only RON-Gauss ...]

Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpcore.data import load_dataset  # noqa: E402
from dpcore.mechanisms import PCAGauss, RONGauss  # noqa: E402
from dpcore.mechanisms.modips import MODIPS

DELTA = 1e-6


def _has(cls, name: str) -> bool:
    return any(p.name == name for p in cls.params)


def variants() -> dict[str, tuple[type, dict]]:
    """Name -> (mechanism class, parameters besides epsilon). Gaussian variants where they exist."""
    out: dict[str, tuple[type, dict]] = {}
    for label, cls in (("PCA-Gauss", PCAGauss), ("RON-Gauss", RONGauss), ("MODIPS", MODIPS)):
        if _has(cls, "delta"):
            out[f"{label} (defaults, δ = {DELTA:g} given)"] = (cls, {"delta": DELTA})
        out[f"{label} (defaults, ε only)"] = (cls, {})
    out[f"PCA-Gauss covariance_type=tied (δ = {DELTA:g} given)"] = (
        PCAGauss, {"covariance_type": "tied", "delta": DELTA})
    out["PCA-Gauss pca_source=analyze-gauss, noise=laplace"] = (
        PCAGauss, {"pca_source": "analyze-gauss", "noise": "laplace", "delta": DELTA})
    out["RON-Gauss n_components=6 (Meckes, the paper's)"] = (RONGauss, {"n_components": 6})
    return out


def _accuracy(X_train, y_train, X_test, y_test) -> float:
    classes = np.unique(y_train)
    if classes.size < 2:  # a release with a single class: the classifier predicts it
        return float(np.mean(y_test == classes[0]))
    clf = LogisticRegression(max_iter=5000).fit(X_train, y_train)
    return float(clf.score(X_test, y_test))


def _interval(values: list[float]) -> str:
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return f"{v.mean():.3f}"
    half = stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
    return f"{v.mean():.3f} ± {half:.3f}"


def run(trials: int, epsilons: list[float], only: list[str] | None = None) -> str:
    ds = load_dataset("adult")
    train, test = ds.split(test_size=0.25, random_state=0)
    span = np.ptp(train.bounds, axis=1)
    lo, width = train.bounds[:, 0], np.where(span > 0, span, 1.0)
    majority = float(np.mean(test.y == np.bincount(train.y.astype(int)).argmax()))
    nonprivate = _accuracy(np.clip((train.X - lo) / width, 0, 1), train.y,
                           np.clip((test.X - lo) / width, 0, 1), test.y)
    lines = [f"Adult (train {train.n_samples:,} / test {test.n_samples:,} rows, {train.n_features} "
             f"features), LogisticRegression(max_iter=5000), {trials} trials, mean ± 95% interval; "
             f"majority {majority:.3f}, non-private {nonprivate:.3f}", "",
             "| mechanism | " + " | ".join(f"ε = {e:g}" for e in epsilons) + " | seconds / release |",
             "|---" * (len(epsilons) + 2) + "|"]
    for name, (cls, extra) in variants().items():
        if only and not any(o.lower() in name.lower() for o in only):
            continue
        cells, seconds = [], []
        for eps in epsilons:
            accs, ps = [], set()
            for seed in range(trials):
                t0 = time.perf_counter()
                rel = cls(epsilon=eps, random_state=seed, **extra).release(train)
                seconds.append(time.perf_counter() - t0)
                X_rel, X_test = np.asarray(rel.data, dtype=float), rel.transform(test.X)
                if cls.space == "features":  # the non-private baseline's public [0, 1] scaling
                    X_rel, X_test = (X_rel - lo) / width, np.clip((X_test - lo) / width, 0, 1)
                accs.append(_accuracy(X_rel, np.asarray(rel.labels), X_test, test.y))
                ps.add(rel.details.get("n_components"))
            cells.append(_interval(accs) + (f" (p = {'/'.join(map(str, sorted(ps - {None})))})"
                                            if ps - {None} else ""))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {np.median(seconds):.2f} |")
        print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    ap.add_argument("--only", nargs="+", help="run only the variants whose name contains one of these")
    args = ap.parse_args(argv)
    print(run(args.trials, args.epsilons, args.only))


if __name__ == "__main__":
    main()
