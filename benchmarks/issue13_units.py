"""Issue 13, items 1, 3 and 6 (branch ``units``): label artefacts on Adult, mnist-10k at epsilon = 1,
and clustering agreement against the isotropic null.

* ``adult``: SVM / logistic-regression accuracy (``dpcore.evaluation.evaluate_release``) of every
  registered mechanism's release at its defaults (delta = 1e-6 where it has a delta), epsilon 1 and 10,
  against the majority rate, with the released label rate.
* ``mnist``: the same on mnist-10k at epsilon = 1 for RON-Gauss (Laplace and Gaussian noise, several
  p), PCA-Gauss (Analyze Gauss) and DPMix (several ell).
* ``mnist-dct``: mnist-10k, delta = 1e-6, ``--trials`` releases (mean +- 95% interval) of PCA-Gauss
  with the recommended setting for images (``pca_source="dct"``, the public low-frequency DCT basis, and
  ``covariance_type="tied"``, one pooled within-class covariance; p and the budget split from the public
  rules) at epsilon = 0.5 / 1 / 2, and at epsilon = 1 with the paper's per-class covariances
  (``covariance_type="full"``, DCT basis) and with its defaults (DP basis).
* ``null``: unsupervised releases at epsilon = 1 on the small bundled tables: ``ari_real`` against
  ``ari_null`` (:func:`dpcore.evaluation.null_verdict`).

Every number is computed on the private data (exploration, NOT differentially private). 75/25
stratified split, seed 0; one release per setting unless ``--trials`` says otherwise.

Usage::

    python benchmarks/issue13_units.py [--only adult mnist mnist-dct null] [--trials 1] [--mechanisms ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from adult_utility import _interval  # noqa: E402

from dpcore.data import load_dataset  # noqa: E402
from dpcore.evaluation import EvalSettings, evaluate_release, null_verdict, utility_sweep  # noqa: E402
from dpcore.evaluation.targets import has_public_transform  # noqa: E402
from dpcore.mechanisms import MECHANISMS, get_mechanism  # noqa: E402

DELTA = 1e-6


def _mech(name: str, **kw):
    cls = get_mechanism(name)
    if any(p.name == "delta" for p in cls.params):
        kw.setdefault("delta", DELTA)
    return cls(**kw)


def _accuracy(name: str, train, test, trials: int, **kw) -> tuple[float, float, float]:
    accs = []
    for t in range(trials):
        rel = _mech(name, **kw).set_params(random_state=t).release(train)
        r = evaluate_release(rel, test.X, test.y, "classification", bounds=train.bounds,
                             settings=EvalSettings(random_state=t))
        accs.append((r["svm_accuracy"], r["logreg_accuracy"]))
    a = np.asarray(accs)
    return float(a[:, 0].mean()), float(a[:, 1].mean()), float(r["chance"])


def adult(trials: int, names: list[str] | None = None) -> None:
    """Every registered mechanism at its defaults (epsilon; delta = 1e-6 where it has one), epsilon 1
    and 10: accuracy, the released rate of the minority label (real: ~0.25) and a flag where the
    mean SVM or logistic-regression accuracy is below the majority rate."""
    train, test = load_dataset("adult").split(test_size=0.25, random_state=0)
    real_rate = float(np.mean(train.y == 1))
    for name in names or sorted(MECHANISMS):
        try:
            probe = _mech(name).release(train.subset(np.arange(200)))
        except ValueError as exc:  # e.g. pca-identity needs public_data
            print(f"adult {name}: no release at its defaults ({exc}): not evaluated", flush=True)
            continue
        if not has_public_transform(probe):
            print(f"adult {name}: no public transform at its defaults (real rows cannot be mapped into "
                  "the release's space): not evaluated", flush=True)
            continue
        for eps in (1.0, 10.0):
            svm, lr, rate = [], [], []
            for t in range(trials):
                rel = _mech(name, epsilon=eps).set_params(random_state=t).release(train)
                r = evaluate_release(rel, test.X, test.y, "classification", bounds=train.bounds,
                                     settings=EvalSettings(random_state=t))
                svm.append(r["svm_accuracy"])
                lr.append(r["logreg_accuracy"])
                labels = np.asarray(rel.labels, dtype=float)
                rate.append(float(np.mean(labels if labels.ndim == 1 else labels[:, -1])))
            chance = float(r["chance"])
            flag = " BELOW MAJORITY" if min(np.mean(svm), np.mean(lr)) < chance - 1e-9 else ""
            print(f"adult {name} eps={eps:g}: svm={_interval(svm)} logreg={_interval(lr)} "
                  f"majority={chance:.3f} label rate={np.mean(rate):.3f} (real {real_rate:.3f}){flag}",
                  flush=True)


def mnist(trials: int) -> None:
    train, test = load_dataset("mnist-10k").split(test_size=0.25, random_state=0)
    settings = [("ron-gauss", {"noise": "gaussian", "n_components": p}) for p in (5, 10, 20, 40, 80)]
    settings += [("ron-gauss", {"n_components": p}) for p in (5, 10)]
    settings += [("pca-gauss", {"pca_source": "analyze-gauss", "n_components": p}) for p in (10, 20, 40)]
    settings += [("dpmix", {"ell": ell}) for ell in (16, 256)]
    for name, kw in settings:
        t0 = time.time()
        svm, lr, _ = _accuracy(name, train, test, trials, epsilon=1.0, **kw)
        print(f"mnist-10k {name} {kw}: svm={svm:.3f} logreg={lr:.3f} ({time.time() - t0:.0f} s)", flush=True)


def mnist_dct(trials: int) -> None:
    train, test = load_dataset("mnist-10k").split(test_size=0.25, random_state=0)
    tied = {"pca_source": "dct", "covariance_type": "tied"}
    for kw, eps in ((tied, 0.5), (tied, 1.0), (tied, 2.0), ({"pca_source": "dct"}, 1.0), ({}, 1.0)):
        t0 = time.time()
        svm, lr, ps = [], [], set()
        for t in range(trials):
            rel = _mech("pca-gauss", epsilon=eps, random_state=t, **kw).release(train)
            r = evaluate_release(rel, test.X, test.y, "classification", bounds=train.bounds,
                                 settings=EvalSettings(random_state=t))
            svm.append(r["svm_accuracy"])
            lr.append(r["logreg_accuracy"])
            ps.add((rel.details["n_components"], round(rel.parameters["epsilon_split"][0], 3)))
        print(f"mnist-10k pca-gauss {kw} eps={eps:g} ((p, mean share) = {sorted(ps)}): svm={_interval(svm)} "
              f"logreg={_interval(lr)} ({time.time() - t0:.0f} s)", flush=True)


def null(trials: int) -> None:
    for dsn in ("digits", "breast-cancer", "diabetes"):
        train, test = load_dataset(dsn).split(test_size=0.25, random_state=0)
        unsup = tuple(replace(part, task="unsupervised", y=None) for part in (train, test))
        for name, kw in (("ron-gauss", {}), ("ron-gauss", {"noise": "gaussian", "n_components": 2}),
                         ("local-gaussian", {}), ("dppro", {}), ("dpmix", {})):
            df = utility_sweep(lambda e, name=name, kw=kw: _mech(name, epsilon=e, **kw), unsup, [1.0],
                               trials=max(trials, 3), random_state=0)
            print(f"{dsn} {name} {kw}: {null_verdict(df)}", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parts = ["adult", "mnist", "mnist-dct", "null"]
    ap.add_argument("--only", nargs="+", default=parts, choices=parts)
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--mechanisms", nargs="+", choices=sorted(MECHANISMS),
                    help="adult: only these mechanisms (default: every registered one)")
    args = ap.parse_args(argv)
    for part in args.only:
        if part == "adult":
            adult(args.trials, args.mechanisms)
        else:
            {"mnist": mnist, "mnist-dct": mnist_dct, "null": null}[part](args.trials)


if __name__ == "__main__":
    main()
