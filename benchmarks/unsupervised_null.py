"""Unsupervised releases at epsilon = 1 against the isotropic null (issue 13, item 6).

For each bundled table (labels dropped: ``task="unsupervised"``) and each mechanism, ``TRIALS``
releases at epsilon = 1 (delta = 1e-6 where the mechanism takes one), each evaluated as the Utility
page does (:func:`dpcore.utility.evaluate_release`): ``ari_real`` is the adjusted Rand index between
K-means fitted on the release (k by silhouette analysis) applied to real held-out rows mapped by the
release's public transform, and K-means fitted on those real rows; ``ari_null`` is the same for
isotropic Gaussian noise of the release's mean and average variance, clustered with the same k.
Both use the same real rows and reference partition in a trial, so the per-trial difference
``ari_real - ari_null`` is a paired comparison: the release "beats the null" when the lower end of
the difference's 95% Student-t interval is above 0.

Settings:

* ``defaults``: the mechanism's own defaults (epsilon = 1, delta = 1e-6 where it has one);
* ``rule, delta = 1e-6`` / ``rule, pure``: RON-Gauss with the parameters of the public rule
  :func:`dpcore.unsupervised.recommended_unsupervised` (n, d, epsilon, delta only) -- the default
  unsupervised release (:func:`dpcore.calibration.recommended_mechanism`).

Mechanisms whose release has no public map of real rows (JL-Laplace: ``P`` is secret; PCA-Gauss
Alg. 1: ``W`` is the private PCA basis) have no ``ari_real``; they are listed as such.

Every number is computed on the private data (exploration, NOT differentially private). 75/25
split, seed 0.

Usage::

    python benchmarks/unsupervised_null.py [--datasets digits ...] [--trials 5] [--markdown]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpcore.data import load_dataset  # noqa: E402
from dpcore.exceptions import PrivacyLeakWarning  # noqa: E402
from dpcore.mechanisms import get_mechanism  # noqa: E402
from dpcore.unsupervised import recommended_unsupervised  # noqa: E402
from dpcore.utility import EvalSettings, evaluate_release, mean_interval, real_reference  # noqa: E402

DATASETS = ("digits", "breast-cancer", "diabetes", "adult", "mnist-10k")
EPSILON = 1.0
DELTA = 1e-6
TRIALS = 5


@dataclass(frozen=True)
class NullComparison:
    """``TRIALS`` paired ``(ari_real, ari_null)`` of one setting on one table."""

    dataset: str
    mechanism: str
    setting: str
    parameters: dict[str, Any]
    ari_real: np.ndarray
    ari_null: np.ndarray
    seconds: float
    #: the p the releases used (their ``details["n_components"]``; None: the mechanism has no p)
    n_components: int | None = None

    @property
    def p_text(self) -> str:
        """The p column: the releases' p, marked ``(automatic)`` when the setting left it empty (the
        public rule chose it: the card's ``details["recommended"]``)."""
        if self.n_components is None:
            return "—"
        return f"{self.n_components}" + ("" if "n_components" in self.parameters else " (automatic)")

    @property
    def measurable(self) -> bool:
        return bool(np.all(np.isfinite(self.ari_real)))

    def interval(self, values: np.ndarray) -> tuple[float, float, float]:
        return mean_interval(values)

    @property
    def difference(self) -> tuple[float, float, float]:
        return mean_interval(self.ari_real - self.ari_null)

    @property
    def beats_null(self) -> bool:
        return self.measurable and self.difference[1] > 0


def unsupervised_split(name: str, random_state: int = 0):
    """The 75/25 split of a bundled table with its labels dropped."""
    ds = load_dataset(name)
    train, test = ds.split(test_size=0.25, random_state=random_state)
    return tuple(replace(part, task="unsupervised", y=None) for part in (train, test))


def settings_for(name: str, n: int, d: int) -> list[tuple[str, str, dict[str, Any]]]:
    """``(mechanism, setting, parameters)`` compared on a table of ``n`` training rows and ``d``
    features (public facts only)."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    for mech in ("ron-gauss", "pca-gauss", "jl-laplace", "dppro", "dpmix"):
        cls = get_mechanism(mech)
        kw: dict[str, Any] = {"epsilon": EPSILON}
        if any(p.name == "delta" for p in cls.params):
            kw["delta"] = DELTA
        out.append((mech, "defaults", kw))
    for label, delta in (("rule, delta = 1e-6", DELTA), ("rule, pure", None)):
        rule = recommended_unsupervised(n, d, epsilon=EPSILON, delta=delta)
        out.append((rule["mechanism"], label, {"epsilon": EPSILON, **rule["parameters"]}))
    return out


def compare(dataset: str, mechanism: str, setting: str, params: dict[str, Any], split, reference,
            trials: int = TRIALS, random_state: int = 0) -> NullComparison:
    """``trials`` seeded releases of ``mechanism(**params)`` on the training part, each evaluated
    against the null on the test part (the same ``reference`` partition for all)."""
    train, test = split
    start = time.perf_counter()
    real, null, p = [], [], None
    seeds = np.random.SeedSequence([random_state, 13]).generate_state(trials)
    for t in range(trials):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            rel = get_mechanism(mechanism)(**params, random_state=int(seeds[t])).release(train)
        r = evaluate_release(rel, test.X, None, "unsupervised", bounds=train.bounds, reference=reference,
                             settings=EvalSettings(random_state=int(seeds[t]) % (2**31 - 1)))
        p = rel.details.get("n_components")  # a public rule of n, d, epsilon: the same every trial
        real.append(r["ari_real"])
        null.append(r["ari_null"])
    return NullComparison(dataset, mechanism, setting, dict(params), np.asarray(real), np.asarray(null),
                          time.perf_counter() - start, None if p is None else int(p))


def _fmt(mean: float, lo: float, hi: float) -> str:
    if not math.isfinite(mean):
        return "n/a"
    return f"{mean:.3f} [{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) else f"{mean:.3f}"


def markdown_table(rows: list[NullComparison]) -> str:
    lines = ["| table | mechanism (setting) | p / k | ARI of the release | ARI of the null | "
             "difference (paired) | verdict |", "|" + "---|" * 7]
    for r in rows:
        if not r.measurable:
            verdict = "no public map of real rows: not measurable"
        else:
            verdict = "**beats the null**" if r.beats_null else "not distinguishable / loses"
        lines.append(f"| {r.dataset} | {r.mechanism} ({r.setting}) | {r.p_text} | "
                     f"{_fmt(*r.interval(r.ari_real))} | {_fmt(*r.interval(r.ari_null))} | "
                     f"{_fmt(*r.difference)} | {verdict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    ap.add_argument("--mechanisms", nargs="+", default=None, help="only these mechanisms")
    ap.add_argument("--trials", type=int, default=TRIALS)
    args = ap.parse_args(argv)
    rows = []
    for name in args.datasets:
        split = unsupervised_split(name)
        settings = EvalSettings(random_state=0)
        reference = real_reference(split[1].X, split[0].bounds, settings)
        n, d = split[0].X.shape
        for mech, label, params in settings_for(name, n, d):
            if args.mechanisms and mech not in args.mechanisms:
                continue
            r = compare(name, mech, label, params, split, reference, args.trials)
            rows.append(r)
            print(f"{name} {mech} ({label}) {params}, p = {r.p_text}: ari {np.round(r.ari_real, 3)} null "
                  f"{np.round(r.ari_null, 3)} {r.seconds:.0f} s", file=sys.stderr, flush=True)
    print(markdown_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
