"""Issue 13, items 1, 3 and 6 (branch ``units``): label artefacts on Adult, mnist-10k at epsilon = 1,
and clustering agreement against the isotropic null.

* ``adult``: SVM / logistic-regression accuracy (``dpcore.evaluation.evaluate_release``) of releases at
  their defaults (delta = 1e-6 where approximate), against the majority rate.
* ``mnist``: the same on mnist-10k at epsilon = 1 for RON-Gauss (Laplace and Gaussian noise, several
  p), PCA-Gauss (Analyze Gauss) and DPMix (several ell).
* ``mnist-dct``: mnist-10k, delta = 1e-6, ``--trials`` releases (mean +- 95% interval) of PCA-Gauss
  with the recommended setting for images (``pca_source="dct"``, the public low-frequency DCT basis;
  p from the public rule) at epsilon = 0.5 / 1 / 2, and with its defaults (DP basis) at epsilon = 1.
* ``null``: unsupervised releases at epsilon = 1 on the small bundled tables: ``ari_real`` against
  ``ari_null`` (:func:`dpcore.evaluation.null_verdict`).

Every number is computed on the private data (exploration, NOT differentially private). 75/25
stratified split, seed 0; one release per setting unless ``--trials`` says otherwise.

Usage::

    python benchmarks/issue13_units.py [--only adult mnist mnist-dct null] [--trials 1]
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
from dpcore.mechanisms import get_mechanism  # noqa: E402

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


def adult(trials: int) -> None:
    train, test = load_dataset("adult").split(test_size=0.25, random_state=0)
    for name in ("rp-gaussian", "identity-laplace", "dppro", "dpmix"):
        for eps in (1.0, 10.0):
            svm, lr, chance = _accuracy(name, train, test, trials, epsilon=eps)
            print(f"adult {name} eps={eps:g}: svm={svm:.3f} logreg={lr:.3f} majority={chance:.3f}",
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
    dct = {"pca_source": "dct"}
    for kw, eps in ((dct, 0.5), (dct, 1.0), (dct, 2.0), ({}, 1.0)):
        t0 = time.time()
        svm, lr, ps = [], [], set()
        for t in range(trials):
            rel = _mech("pca-gauss", epsilon=eps, random_state=t, **kw).release(train)
            r = evaluate_release(rel, test.X, test.y, "classification", bounds=train.bounds,
                                 settings=EvalSettings(random_state=t))
            svm.append(r["svm_accuracy"])
            lr.append(r["logreg_accuracy"])
            ps.add(rel.details["n_components"])
        print(f"mnist-10k pca-gauss {kw} eps={eps:g} (p = {sorted(ps)}): svm={_interval(svm)} "
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
    args = ap.parse_args(argv)
    for part in args.only:
        {"adult": adult, "mnist": mnist, "mnist-dct": mnist_dct, "null": null}[part](args.trials)


if __name__ == "__main__":
    main()
