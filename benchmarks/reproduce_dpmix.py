"""Reproduce the DPMix paper's MNIST experiment (Lee et al., ISIT 2019, Table I) on a CPU.

Protocol (paper section III-C): DPMix releases of the full MNIST training set (n = T = 60,000,
d_X = 784 pixels scaled to [0, 1] by the public range [0, 255], d_Y = 10 one-hot labels,
delta = 1/n, sigma_X = sigma_Y calibrated to the target epsilon), models trained on the release
only, accuracy on the real 10,000-image test set.

Models (the paper used a small CNN, not reproducible here on 2 CPU cores in reasonable time):
``softmax`` (linear softmax, SGD on the soft labels), ``linear`` (least squares by SGD, Theorem 2's
model, no noise correction) and ``mlp-classifier`` (scikit-learn ``MLPClassifier`` on the argmax
labels, one hidden layer of 256, 5 Adam epochs). Expect lower accuracies than the CNN.

Usage::

    python benchmarks/reproduce_dpmix.py                        # full grid, both bounds
    python benchmarks/reproduce_dpmix.py --ells 16 64 --epsilons 10 --models softmax --bounds tight

Releases are drawn with a fixed seed (reproducible benchmark previews, never publishable).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpcore.evaluation import evaluate, fit_on_real, train_on_release  # noqa: E402
from dpcore.mechanisms import DPMix  # noqa: E402

MNIST = Path("/work/shared/datasets/mnist/mnist.npz")

#: Lee et al. 2019, Table I, MNIST columns (CNN test accuracy), by ell: (eps=inf, eps=20, eps=10).
PAPER_TABLE_I = {
    1: (0.993, 0.098, 0.098), 2: (0.982, 0.098, 0.098), 4: (0.974, 0.098, 0.098),
    8: (0.964, 0.272, 0.098), 16: (0.949, 0.698, 0.484), 32: (0.934, 0.765, 0.585),
    64: (0.916, 0.800, 0.782), 128: (0.895, 0.791, 0.764), 256: (0.867, 0.759, 0.691),
    512: (0.839, 0.687, 0.629),
}
PAPER_DENOISED = {20: 0.806, 10: 0.785}  # Table II, "DPMix + denoising" at ell* = 64


def paper_accuracy(ell: int, epsilon: float) -> float | None:
    row = PAPER_TABLE_I.get(ell)
    if row is None:
        return None
    return {math.inf: row[0], 20.0: row[1], 10.0: row[2]}.get(float(epsilon))


def load_mnist(path: Path = MNIST) -> tuple[np.ndarray, ...]:
    data = np.load(path)
    Xtr = data["x_train"].reshape(len(data["x_train"]), -1).astype(np.float32)
    Xte = data["x_test"].reshape(len(data["x_test"]), -1).astype(np.float32)
    return Xtr, data["y_train"].astype(int), Xte, data["y_test"].astype(int)


def model_options(model: str, epochs: int, mlp_epochs: int, hidden: int) -> dict:
    if model.startswith("mlp"):
        return {"epochs": mlp_epochs, "hidden": (hidden,), "batch_size": 256}
    return {"epochs": epochs}


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[20.0, 10.0])
    ap.add_argument("--ells", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    ap.add_argument("--bounds", nargs="+", default=["paper", "tight"], choices=["paper", "tight"])
    ap.add_argument("--models", nargs="+", default=["softmax", "linear", "mlp-classifier"])
    ap.add_argument("--epochs", type=int, default=10, help="SGD epochs of the linear models")
    ap.add_argument("--mlp-epochs", type=int, default=5, help="Adam epochs of the MLP")
    ap.add_argument("--hidden", type=int, default=256, help="MLP hidden units")
    ap.add_argument("--nonprivate", action="store_true", help="also run eps = inf (sigma = 0)")
    ap.add_argument("--denoise", type=float, default=1.0,
                    help="also train on the denoised release at the best ell (0 = skip)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON-lines file: each row is appended as soon as it is measured, and rows "
                         "already in it are skipped (so an interrupted run resumes)")
    args = ap.parse_args(argv)

    Xtr, ytr, Xte, yte = load_mnist()
    n = len(Xtr)
    print(f"MNIST: n = {n} train, {len(Xte)} test; T = n, delta = 1/n; models {args.models}")
    rows: list[dict] = _load_rows(args.out)
    done = {_key(r) for r in rows}

    def record(row: dict) -> None:
        rows.append(row)
        done.add(_key(row))
        line = json.dumps(row, default=str)
        print(line, flush=True)
        if args.out:
            with args.out.open("a") as fh:
                fh.write(line + "\n")

    def run(eps: float, ell: int, bound: str, denoise: float = 0.0) -> None:
        todo = [m for m in args.models if (str(eps), ell, bound, denoise, m) not in done]
        if not todo:
            return
        t0 = time.perf_counter()
        mech = DPMix(epsilon=eps, ell=ell, bound=bound, denoise=denoise, dtype="float32",
                     bounds=(0.0, 255.0), classes=np.arange(10), random_state=args.seed)
        # the image shape (needed to denoise) comes with a Dataset
        rel = mech.release(_dataset(Xtr, ytr) if denoise else Xtr, None if denoise else ytr)
        t_rel = time.perf_counter() - t0
        for model in todo:
            t1 = time.perf_counter()
            trained = train_on_release(rel, model, random_state=args.seed,
                                       **model_options(model, args.epochs, args.mlp_epochs, args.hidden))
            record({"epsilon": eps, "ell": ell, "bound": bound, "denoise": denoise, "model": model,
                    "accuracy": evaluate(trained, Xte, yte)["value"], "sigma": rel.details["sigma_x"],
                    "epsilon_guaranteed": rel.guarantee.epsilon,
                    "alpha_star": rel.details["alpha_star"],
                    "paper_cnn": PAPER_DENOISED.get(eps) if denoise else paper_accuracy(ell, eps),
                    "release_s": round(t_rel, 1), "train_s": round(time.perf_counter() - t1, 1)})

    for model in args.models:  # non-private baseline: the same model on the real rows
        if ("real data", 0, "-", 0.0, model) in done:
            continue
        t1 = time.perf_counter()
        base = fit_on_real(Xtr, ytr, bounds=(0.0, 255.0), model=model, random_state=args.seed,
                           **model_options(model, args.epochs, args.mlp_epochs, args.hidden))
        record({"epsilon": "real data", "ell": 0, "bound": "-", "denoise": 0.0, "model": model,
                "accuracy": base.score(Xte, yte), "sigma": 0.0, "epsilon_guaranteed": math.inf,
                "alpha_star": None, "paper_cnn": None, "release_s": 0.0,
                "train_s": round(time.perf_counter() - t1, 1)})
    eps_list = list(args.epsilons) + ([math.inf] if args.nonprivate else [])
    for bound in args.bounds:
        for eps in eps_list:
            for ell in args.ells:
                run(eps, ell, "paper" if math.isinf(eps) else bound)  # no noise: bound irrelevant
    if args.denoise > 0:
        for bound in args.bounds:
            for eps in args.epsilons:
                best = _best_ell(rows, eps, bound)
                if best is not None:
                    run(eps, best, bound, denoise=args.denoise)
    print()
    print(markdown_table(rows, _models_in(rows)))
    return rows


def _key(row: dict) -> tuple:
    return (str(row["epsilon"]), row["ell"], row["bound"], row["denoise"], row["model"])


def _load_rows(path: Path | None) -> list[dict]:
    if path is None or not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for r in rows:  # JSON turns inf into the string "inf"/Infinity; restore the floats
        if r["epsilon"] not in ("real data",):
            r["epsilon"] = float(r["epsilon"])
    return rows


def _models_in(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["model"] for r in rows))


def _dataset(X: np.ndarray, y: np.ndarray):
    from dpcore.data import Dataset

    return Dataset(X=X.astype(float), y=y, feature_names=[f"px{i}" for i in range(X.shape[1])],
                   label_name="digit", task="classification",
                   bounds=np.tile([0.0, 255.0], (X.shape[1], 1)), bounds_source="metadata",
                   classes=np.arange(10), image_shape=(28, 28), name="mnist")


def _best_ell(rows: list[dict], eps: float, bound: str) -> int | None:
    cands = [r for r in rows if r["epsilon"] == eps and r["bound"] == bound and not r["denoise"]]
    if not cands:
        return None
    by_ell: dict[int, list[float]] = {}
    for r in cands:
        by_ell.setdefault(r["ell"], []).append(r["accuracy"])
    return max(by_ell, key=lambda e: max(by_ell[e]))


def markdown_table(rows: list[dict], models: list[str]) -> str:
    """One line per (epsilon, bound, ell, denoise): sigma, each model's accuracy, the paper's CNN."""
    keys: dict[tuple, dict] = {}
    for r in rows:
        key = (str(r["epsilon"]), r["bound"], r["ell"], r["denoise"])
        entry = keys.setdefault(key, {"sigma": r["sigma"], "paper": r["paper_cnn"],
                                      "eps_g": r["epsilon_guaranteed"]})
        entry[r["model"]] = r["accuracy"]
    head = ("| epsilon | bound | ell | denoise | sigma | eps guaranteed | "
            + " | ".join(models) + " | paper CNN |")
    lines = [head, "|" + "---|" * (6 + len(models) + 1)]
    for (eps, bound, ell, den), e in keys.items():
        accs = " | ".join(f"{e[m]:.3f}" if m in e else "" for m in models)
        paper = "" if e["paper"] is None else f"{e['paper']:.3f}"
        eg = e["eps_g"]
        lines.append(f"| {eps} | {bound} | {ell or '-'} | {den or '-'} | {e['sigma']:.4g} | "
                     f"{eg:.4g} | {accs} | {paper} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
