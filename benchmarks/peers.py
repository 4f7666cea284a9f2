"""Peers of the downloaded-file benchmark, measured on the same splits, public facts and scoring.

The project's file protocol (:mod:`benchmarks.file_utility`, ``docs/benchmarks/utility.md``) scores a
released file by what a user does with it: encode it as the real rows are (one-hot over the public
categories, numbers to ``[0, 1]`` by their public bounds), train ``LogisticRegression(max_iter=5000)``
(or ``LinearRegression``) on it and score it on the real held-out rows. Two peers, run on exactly the
tables, splits, encodings and scoring of :mod:`benchmarks.file_utility` (imported, not copied):

- **MST with i.i.d. sampling** (McKenna, Miklau & Sheldon, "Winning the NIST Contest: A scalable and
  general approach to differentially private synthetic data", J. Privacy and Confidentiality 2021),
  as smartnoise-synth's ``MSTSynthesizer`` (Private-PGM's ``mbi`` for the estimation): a synthetic
  table of the training table's size, then the file protocol. MST works on discrete data: each
  numeric column (and a regression label) is cut into ``--bins`` equal-width bins of its **public
  bounds** and a synthetic bin is read back as its midpoint; categorical columns and the class label
  take their public lists. The domain handed to MST is built from those public facts only (no
  category or bound is read from the data).
- **diffprivlib's LogisticRegression** (IBM; Chaudhuri, Monteleoni & Sarwate's objective
  perturbation): a DP *model*, not a release, trained on the private training rows encoded exactly as
  the file protocol encodes them, with ``data_norm`` the public bound of the rows' norm
  (``sqrt(numeric columns + categorical groups)``: each number lies in ``[0, 1]``, each one-hot group
  has one 1); scored on the same held-out rows. Classification tables only.

Every cell: epsilon = 0.1, 1, 10 (MST with delta = 1e-6; diffprivlib is pure epsilon-DP), ``--releases``
runs, mean ± sd, beside the majority (or training-mean) baseline and the non-private model of
:func:`benchmarks.file_utility.reference`.

The peers are not dependencies of dp-explorer: they live in their own virtual environment,
``benchmarks/.peers-venv`` (pinned in ``benchmarks/peers-requirements.txt``), and run there in a
subprocess (``--worker``) that sees only integer codes or encoded arrays and hands back synthetic
codes or model coefficients; decoding and scoring run here, with the project's code.

Usage::

    python benchmarks/peers.py --setup                      # once: builds benchmarks/.peers-venv
    python benchmarks/peers.py [--tables adult default-sim wage-sim] [--peers mst diffprivlib]
        [--epsilons 0.1 1 10] [--releases 3] [--bins 32] [--json results.json] [--ours ours.json]

``--ours`` takes the JSON rows of ``python benchmarks/file_utility.py --json ours.json`` on the same
tables and epsilons and prints dp-explorer's file beside the peers.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
VENV = HERE / ".peers-venv"
REQUIREMENTS = HERE / "peers-requirements.txt"
#: installed after REQUIREMENTS without its dependencies (opacus, pac-synth: its other synthesizers)
NO_DEPS = ["smartnoise-synth==1.0.8"]
PEER_PACKAGES = ["smartnoise-synth", "mbi", "jax", "diffprivlib", "scikit-learn", "opendp", "numpy"]
DELTA = 1e-6
EPSILONS = [0.1, 1.0, 10.0]


# --- the peers' environment ----------------------------------------------------------------------

def venv_python() -> Path:
    return VENV / "bin" / "python"


def setup() -> None:
    """Create ``benchmarks/.peers-venv`` with the pinned peers (idempotent)."""
    import venv

    if not venv_python().exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    pip = [str(venv_python()), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True)
    subprocess.run([*pip, "--no-deps", *NO_DEPS], check=True)
    done = subprocess.run([str(venv_python()), __file__, "--versions"], capture_output=True, text=True,
                          check=True)
    print(f"{VENV}: {done.stdout.strip()}")


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in PEER_PACKAGES}


# --- the worker: runs in the peers' environment, sees codes or encoded arrays only ------------------

def worker(request_path: str, result_path: str) -> None:
    """Run one peer on a request (``.npz``: ``spec`` JSON and arrays) and write its outputs."""
    import warnings

    warnings.simplefilter("ignore")
    request = np.load(request_path, allow_pickle=False)
    spec = json.loads(str(request["spec"]))
    out: dict[str, np.ndarray] = {}
    seconds = []
    runs = [(eps, r) for eps in spec["epsilons"] for r in range(spec["releases"])]
    for i, (eps, r) in enumerate(runs):
        t0 = time.perf_counter()
        if spec["peer"] == "mst":
            out[f"codes_{i}"] = _mst_release(request["codes"], spec["sizes"], eps, spec["delta"])
        else:
            from diffprivlib.models import LogisticRegression

            model = LogisticRegression(epsilon=eps, data_norm=spec["data_norm"])
            model.fit(request["X"], request["y"])
            out[f"coef_{i}"], out[f"intercept_{i}"] = model.coef_, model.intercept_
            out[f"classes_{i}"] = model.classes_
        seconds.append(time.perf_counter() - t0)
        print(f"  {spec['peer']} epsilon={eps:g} run {r + 1}/{spec['releases']}: {seconds[-1]:.1f} s",
              file=sys.stderr, flush=True)
    out["seconds"] = np.array(seconds)
    out["versions"] = np.array(json.dumps(versions()))
    np.savez(result_path, **out)


def _mst_release(codes: np.ndarray, sizes: list[int], epsilon: float, delta: float) -> np.ndarray:
    """An MST synthetic table of ``len(codes)`` rows over the public domain ``sizes`` (integer codes
    ``0..size-1`` per column). The table transformer is fitted on a public frame that holds every
    code, so the domain is the public one (fitting it on the data would read the categories present)."""
    import pandas as pd
    from snsynth.mst import MSTSynthesizer
    from snsynth.transform.label import LabelTransformer
    from snsynth.transform.table import TableTransformer

    domain = public_domain_frame(sizes)
    columns = list(domain.columns)
    transformer = TableTransformer([LabelTransformer(nullable=False) for _ in columns])
    transformer.fit(domain)
    assert transformer.cardinality == list(sizes)
    synth = MSTSynthesizer(epsilon=epsilon, delta=delta)
    synth.fit(pd.DataFrame(codes, columns=columns), transformer=transformer)
    return np.asarray(synth.sample(len(codes)), dtype=np.int64)


def public_domain_frame(sizes: list[int]):
    """A frame ``(max(sizes), len(sizes))`` whose column ``c{j}`` holds every code ``0..sizes[j]-1``
    (the last repeated): what MST's transformer is fitted on, so its domain is the public one. Built
    from the domain sizes alone, never from rows."""
    import pandas as pd

    every = np.arange(max(sizes))
    return pd.DataFrame({f"c{j}": np.minimum(every, k - 1) for j, k in enumerate(sizes)})


def call_worker(spec: dict, **arrays: np.ndarray) -> dict[str, np.ndarray]:
    with tempfile.TemporaryDirectory() as tmp:
        request, result = Path(tmp) / "request.npz", Path(tmp) / "result.npz"
        np.savez(request, spec=np.array(json.dumps(spec)), **arrays)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        # the worker's progress and errors go to this process's stderr as they come
        done = subprocess.run([str(venv_python()), __file__, "--worker", str(request), str(result)], env=env)
        if done.returncode:
            raise RuntimeError(f"the peers' worker failed (exit {done.returncode}; its error is above)")
        with np.load(result, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}


# --- here (the project's environment): public domains, decoding, scoring ---------------------------

def public_columns(table, bins: int) -> list[tuple[str, str, object]]:
    """The original columns as MST sees them, from the public facts only: ``(name, "category",
    values)`` for a public category list or the class list, ``(name, "number", (lo, hi))`` for a
    number cut into ``bins`` equal-width bins of its public bounds."""
    cols = []
    for name in table.train.columns:
        if name == table.label:
            if table.task == "classification":
                cols.append((name, "category", list(table.classes)))
            else:
                cols.append((name, "number", tuple(table.label_bounds)))
        elif name in table.categories:
            cols.append((name, "category", list(table.categories[name])))
        else:
            cols.append((name, "number", tuple(table.bounds[name])))
    return cols


def discretise(frame, columns: list, bins: int) -> tuple[np.ndarray, list[int]]:
    """Integer codes ``(n_rows, n_columns)`` and the public domain sizes. A number goes to its bin of
    ``[lo, hi]`` (clipped to the end bins); a category to its position in the public list."""
    import pandas as pd

    codes, sizes = [], []
    for name, kind, facts in columns:
        if kind == "category":
            position = {str(v): i for i, v in enumerate(facts)}
            text = frame[name].astype(str)
            unknown = sorted(set(text) - set(position))
            if unknown:
                raise ValueError(f"column {name!r} holds values outside its public list: {unknown[:5]}")
            codes.append(text.map(position).to_numpy())
            sizes.append(len(facts))
        else:
            lo, hi = facts
            v = pd.to_numeric(frame[name]).to_numpy(dtype=float)
            codes.append(np.clip(np.floor((v - lo) / (hi - lo) * bins), 0, bins - 1))
            sizes.append(bins)
    return np.column_stack(codes).astype(np.int64), sizes


def undiscretise(codes: np.ndarray, columns: list, bins: int):
    """The synthetic codes as a table in the original schema: a bin's midpoint, a category's value."""
    import pandas as pd

    out = {}
    for j, (name, kind, facts) in enumerate(columns):
        if kind == "category":
            out[name] = np.asarray(facts, dtype=object)[codes[:, j]]
        else:
            lo, hi = facts
            out[name] = lo + (codes[:, j] + 0.5) * (hi - lo) / bins
    return pd.DataFrame(out)


def row_norm_bound(schema) -> float:
    """The public bound of an encoded row's L2 norm: every number lies in ``[0, 1]`` and every one-hot
    group holds at most one 1, so ``||x||^2 <= numbers + groups``."""
    one_hot = sum(len(schema.encoded(c)) for c in schema.categories)
    numbers = len(schema.feature_names) - one_hot
    return math.sqrt(numbers + len(schema.categories))


def _cell(values: list[float]) -> list[float]:
    return [float(np.mean(values)), float(np.std(values))]


def run_mst(table, ref, epsilons: list[float], releases: int, bins: int) -> list[dict]:
    from file_utility import _auc, encode_file, file_model_score

    columns = public_columns(table, bins)
    codes, sizes = discretise(table.train, columns, bins)
    result = call_worker({"peer": "mst", "epsilons": epsilons, "releases": releases, "delta": DELTA,
                          "sizes": sizes}, codes=codes)
    classification = table.task == "classification"
    binary = classification and len(table.classes) == 2
    rows = []
    for e, eps in enumerate(epsilons):
        scores, aucs, rates, runs = [], [], [], range(e * releases, (e + 1) * releases)
        for i in runs:
            frame = undiscretise(result[f"codes_{i}"], columns, bins)
            X_file, y_file = encode_file(frame, ref.schema)
            scores.append(file_model_score(X_file, y_file, ref.X_test, ref.y_test, table.task))
            if classification:
                rates.append(float(np.mean(y_file == len(table.classes) - 1)))
            if binary:
                aucs.append(_auc(X_file, y_file, ref.X_test, ref.y_test))
        rows.append(_row(table, ref, "MST (i.i.d. sampling)", eps, DELTA, scores, aucs, rates,
                         result["seconds"][list(runs)], result, bins=bins))
    return rows


def run_diffprivlib(table, ref, epsilons: list[float], releases: int) -> list[dict]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    data_norm = row_norm_bound(ref.schema)
    result = call_worker({"peer": "diffprivlib", "epsilons": epsilons, "releases": releases,
                          "data_norm": data_norm}, X=ref.X_priv, y=ref.y_priv)
    binary = len(table.classes) == 2
    rows = []
    for e, eps in enumerate(epsilons):
        scores, aucs, rates, runs = [], [], [], range(e * releases, (e + 1) * releases)
        for i in runs:
            model = LogisticRegression()  # diffprivlib's coefficients, predicted and scored by scikit-learn
            model.coef_, model.intercept_ = result[f"coef_{i}"], result[f"intercept_{i}"]
            model.classes_ = result[f"classes_{i}"]
            scores.append(float(model.score(ref.X_test, ref.y_test)))
            rates.append(float(np.mean(model.predict(ref.X_test) == len(table.classes) - 1)))
            if binary:
                aucs.append(float(roc_auc_score(ref.y_test, model.decision_function(ref.X_test))))
        rows.append(_row(table, ref, "diffprivlib LogisticRegression (a model)", eps, None, scores, aucs,
                         rates, result["seconds"][list(runs)], result, data_norm=data_norm))
    return rows


def _row(table, ref, peer: str, eps: float, delta: float | None, scores, aucs, rates, seconds, result,
         **facts) -> dict:
    row = {"table": table.name, "peer": peer, "epsilon": eps, "delta": delta,
           "metric": "accuracy" if table.task == "classification" else "RMSE",
           "score": _cell(scores), "score_all": scores, "auc": _cell(aucs) if aucs else None,
           "label_rate": float(np.mean(rates)) if rates else None,
           "baseline": ref.baseline, "nonprivate": ref.nonprivate, "nonprivate_auc": ref.nonprivate_auc,
           "seconds": float(np.median(seconds)), "runs": len(scores),
           "versions": json.loads(str(result["versions"])), **facts}
    print(json.dumps({k: v for k, v in row.items() if k != "versions"}), file=sys.stderr, flush=True)
    return row


def markdown(rows: list[dict]) -> str:
    out = ["| table | metric | ε | peer | score (mean ± sd) | AUC (non-private) | positives | baseline | "
           "non-private | s / run |", "|---" * 10 + "|"]
    for r in rows:
        auc = f"{r['auc'][0]:.3f} ± {r['auc'][1]:.3f} ({r['nonprivate_auc']:.3f})" if r["auc"] else "—"
        rate = f"{r['label_rate']:.3f}" if r["label_rate"] is not None else "—"
        base = "majority" if r["metric"] == "accuracy" else "train mean"
        out.append(f"| {r['table']} | {r['metric']} | {r['epsilon']:g} | {r['peer']} | "
                   f"**{r['score'][0]:.3f} ± {r['score'][1]:.3f}** | {auc} | {rate} | "
                   f"{r['baseline']:.3f} ({base}) | {r['nonprivate']:.3f} | {r['seconds']:.1f} |")
    return "\n".join(out)


def _score(cell, auc=None, digits: int = 3) -> str:
    text = f"{cell[0]:.{digits}f} ± {cell[1]:.{digits}f}"
    return text + (f" (AUC {auc[0]:.2f} ± {auc[1]:.2f})" if auc else "")


def comparison(rows: list[dict], ours: list[dict]) -> str:
    """One line per (table, epsilon): dp-explorer's file (rows of ``benchmarks/file_utility.py
    --json``) beside each peer, the baseline and the non-private model."""
    out = ["| table (metric) | ε | dp-explorer file | MST file | diffprivlib model | baseline | "
           "non-private |", "|---" * 7 + "|"]
    for o in ours:
        peer = {r["peer"].split()[0]: r for r in rows
                if r["table"] == o["table"] and math.isclose(r["epsilon"], o["epsilon"])}
        digits = 3 if o["metric"] == "accuracy" else 1
        cells = [_score(o["file"], o.get("auc"), digits)]
        cells += [_score(peer[k]["score"], peer[k]["auc"], digits) if k in peer else "—"
                  for k in ("MST", "diffprivlib")]
        base = "majority" if o["metric"] == "accuracy" else "train mean"
        out.append(f"| {o['table']} ({o['metric']}) | {o['epsilon']:g} | " + " | ".join(cells) +
                   f" | {o['baseline']:.{digits}f} ({base}) | {o['nonprivate']:.{digits}f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--setup", action="store_true", help="create benchmarks/.peers-venv and exit")
    ap.add_argument("--worker", nargs=2, metavar=("REQUEST", "RESULT"), help=argparse.SUPPRESS)
    ap.add_argument("--versions", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tables", nargs="+", default=None,
                    help="tables of benchmarks/file_utility.py (default: every one but the image table)")
    ap.add_argument("--peers", nargs="+", choices=("mst", "diffprivlib"), default=["mst", "diffprivlib"])
    ap.add_argument("--epsilons", type=float, nargs="+", default=EPSILONS)
    ap.add_argument("--releases", type=int, default=3)
    ap.add_argument("--bins", type=int, default=32, help="equal-width bins of each number's public bounds")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    ap.add_argument("--ours", metavar="JSON",
                    help="rows of `benchmarks/file_utility.py --json` for the same cells: also print them "
                         "beside the peers")
    args = ap.parse_args(argv)
    if args.worker:
        return worker(*args.worker)
    if args.versions:  # in the peers' environment: both peers import, then their versions
        import diffprivlib.models  # noqa: F401
        import snsynth.mst  # noqa: F401

        return print(json.dumps(versions()))
    if args.setup:
        return setup()
    if args.releases < 1 or args.bins < 2 or any(not eps > 0 for eps in args.epsilons):
        ap.exit(2, "error: --releases must be >= 1, --bins >= 2 and every epsilon > 0\n")
    if not venv_python().exists():
        ap.exit(2, f"error: the peers' environment {VENV} is missing: run `python benchmarks/peers.py "
                   "--setup` first\n")
    sys.path.insert(0, str(HERE))
    from file_utility import TABLES, reference

    tables = args.tables or [name for name in TABLES if name != "digits"]
    unknown = sorted(set(tables) - set(TABLES) | {"digits"} & set(tables))
    if unknown:
        ap.exit(2, f"error: unknown or image table(s) {unknown}: choose from "
                   f"{sorted(set(TABLES) - {'digits'})}\n")
    rows = []
    for name in tables:
        table = TABLES[name]()
        if table is None:
            print(f"{name}: skipped (../shared/datasets absent: set DPCORE_SHARED_DATASETS)", file=sys.stderr)
            continue
        ref = reference(table)
        for peer in args.peers:
            if peer == "diffprivlib" and table.task != "classification":
                continue
            try:  # a peer that fails is reported and the other still runs
                rows += (run_mst(table, ref, args.epsilons, args.releases, args.bins) if peer == "mst"
                         else run_diffprivlib(table, ref, args.epsilons, args.releases))
            except RuntimeError as error:
                print(f"{name}: {peer} not measured: {error}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    print(markdown(rows))
    if args.ours:
        print("\n" + comparison(rows, json.loads(Path(args.ours).read_text())))
    if rows:
        print("\n" + "; ".join(f"{k} {v}" for k, v in rows[0]["versions"].items()))


if __name__ == "__main__":
    main()
