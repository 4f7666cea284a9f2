"""The downloaded file's utility: what a user takes away, trained the way a user would.

Protocol (``docs/SPEC.md`` section 11). Each table is split into private training rows and real
held-out rows. A release is drawn from the training rows with the public facts only (bounds,
category lists, class list, task) and epsilon (and delta), everything else at its default: the
mechanism and its settings are what :func:`dpcore.calibration.recommended_mechanism` names, as an
untouched ``dpcore release auto`` does. Two protocols per release:

- **file** (what a user does): the release's CSV in the original schema (read back from its bytes),
  encoded exactly as the real rows are (one-hot over the public categories, numbers mapped to
  ``[0, 1]`` by their public bounds), a ``LogisticRegression(max_iter=5000)`` (or
  ``LinearRegression``) trained on it and scored on the real held-out rows;
- **released** (a diagnostic): the same model trained on the release's own space and scored on the
  held-out rows mapped through the release's public transform.

Beside them: the majority rate (or the RMSE of predicting the training mean) and the same model
trained on the private training rows. Every cell is the mean ± sd over ``--releases`` releases
(OS entropy: these are real releases, as a user draws them), with the wall time per release.

Tables: ``adult`` (UCI Adult train/test files with '?' rows dropped, 30,162 / 15,060 rows, categories
from ``adult.names``, documented numeric bounds; needs ``../shared/datasets/adult``), and the bundled
``breast-cancer``, ``diabetes`` (regression) and ``digits`` (images) with a stratified 70/30 split.

Usage::

    python benchmarks/file_utility.py [--tables adult diabetes] [--epsilons 0.1 1 10] [--releases 3]
        [--via api|cli] [--markdown]

``--via cli`` runs ``dpcore release auto`` in a subprocess for each release (the user's exact path;
slower by the interpreter's start-up).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpcore.calibration import recommended_mechanism  # noqa: E402
from dpcore.data import load_dataset  # noqa: E402
from dpcore.decode import PublicSchema, with_output_space  # noqa: E402
from dpcore.evaluation.fidelity import encode_file, encoded_real, file_model_score  # noqa: E402
from dpcore.mechanisms import get_mechanism  # noqa: E402

#: ``../shared/datasets`` beside the checkout (or ``DPCORE_SHARED_DATASETS``)
SHARED = Path(os.environ.get("DPCORE_SHARED_DATASETS", ROOT.parent / "shared" / "datasets"))
DELTA = 1e-6
ADULT_BOUNDS = {"age": [17, 90], "fnlwgt": [1, 2000000], "education_num": [1, 16],
                "capital_gain": [0, 99999], "capital_loss": [0, 99999], "hours_per_week": [1, 99]}


class Table:
    """A private training table and real held-out rows, with the public facts a user passes."""

    def __init__(self, name: str, train: pd.DataFrame, test: pd.DataFrame, *, label: str, task: str,
                 bounds: dict, categories: dict | None = None, classes: list | None = None,
                 label_bounds: tuple[float, float] | None = None, image_shape=None) -> None:
        self.name, self.train, self.test, self.label, self.task = name, train, test, label, task
        self.bounds, self.categories, self.classes = bounds, categories or {}, classes
        self.label_bounds, self.image_shape = label_bounds, image_shape

    def dataset(self, frame: pd.DataFrame):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = load_dataset(frame, label=self.label, task=self.task, bounds=self.bounds,
                              categories=self.categories or None, classes=self.classes,
                              label_bounds=self.label_bounds)
        if self.image_shape is not None:  # the bundled metadata's public image shape
            ds = dataclasses.replace(ds, image_shape=tuple(self.image_shape))
        return ds


def adult() -> Table | None:
    folder = SHARED / "adult"
    if not (folder / "adult.data.gz").exists():
        return None
    cats = {}
    for line in (folder / "adult.names").read_text().splitlines():
        m = re.match(r"^([a-z-]+): (.*)\.$", line)
        if m and m.group(2) != "continuous":
            cats[m.group(1).replace("-", "_")] = [v.strip() for v in m.group(2).split(",")]

    def read(name: str) -> pd.DataFrame:
        frame = pd.read_csv(folder / name, skipinitialspace=True, na_values="?").dropna()
        frame["ltgt50k"] = frame["ltgt50k"].str.rstrip(".")
        return frame.reset_index(drop=True)

    return Table("adult", read("adult.data.gz"), read("adult.test.gz"), label="ltgt50k",
                 task="classification", bounds=ADULT_BOUNDS, categories=cats, classes=["<=50K", ">50K"])


def bundled(name: str) -> Table:
    from sklearn.model_selection import train_test_split

    meta = json.loads((ROOT / "sample_data" / f"{name}.meta.json").read_text())
    frame = pd.read_csv(ROOT / "sample_data" / meta["file"])
    label = meta["label"]
    strat = frame[label] if meta["task"] == "classification" else None
    train, test = train_test_split(frame, test_size=0.3, random_state=0, stratify=strat)
    bounds = {k: v for k, v in meta["bounds"].items() if k != label}
    return Table(name, train.reset_index(drop=True), test.reset_index(drop=True), label=label,
                 task=meta["task"], bounds=bounds, classes=meta.get("classes"),
                 label_bounds=tuple(meta["label_bounds"]) if meta.get("label_bounds") else None,
                 image_shape=meta.get("image_shape"))


def simulated(name: str) -> Table:
    """Simulated stand-ins for tables the project has never seen, built from their published
    summary statistics (not the tables themselves): ``wage-sim`` (3,000 rows: year, age -> wage,
    regression, as ISLR's Wage: mean age 42.4, mean wage 111.7), ``default-sim`` (10,000 rows:
    student, balance, income -> default, 3.3% positives, about 5% zero balances, as ISLR's Default),
    ``insurance-sim`` (5,822 rows: 85 columns of codes 0-9 from five latent factors -> purchase,
    about 6% positives, as ISLR's Caravan).
    Their rows are drawn with a fixed seed; the split is 70/30."""
    rng = np.random.default_rng(20261128)
    if name == "wage-sim":
        n = 3000
        year = rng.integers(2003, 2010, n)
        age = np.clip(np.rint(rng.normal(42.4, 11.5, n)), 18, 80)
        wage = 111.7 + 1.1 * (age - 42.4) - 0.05 * (age - 42.4) ** 2 + 1.0 * (year - 2006)
        wage = np.clip(wage + rng.lognormal(0, 0.35, n) * 35 - 37, 20, 318)
        frame = pd.DataFrame({"year": year, "age": age, "wage": np.round(wage, 2)})
        bounds, kw = {"year": [2003, 2009], "age": [16, 90]}, {"label_bounds": (0.0, 400.0)}
        label, task = "wage", "regression"
    elif name == "insurance-sim":
        n, d = 5822, 85
        z = rng.normal(size=(n, 5))
        loadings = rng.normal(0, 0.8, size=(5, d)) * (rng.random((5, d)) < 0.4)
        codes = np.clip(np.rint(2.5 + z @ loadings + rng.normal(0, 1.0, (n, d))), 0, 9).astype(int)
        frame = pd.DataFrame(codes, columns=[f"f{j:02d}" for j in range(d)])
        logit = -3.4 + 0.9 * z[:, 0] + 0.6 * z[:, 1]
        frame["purchase"] = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
        bounds = {f"f{j:02d}": [0, 9] for j in range(d)}
        kw = {"classes": ["no", "yes"]}
        label, task = "purchase", "classification"
    else:
        n = 10_000
        student = rng.random(n) < 0.29
        income = np.clip(np.where(student, rng.normal(17_900, 4_700, n), rng.normal(40_000, 10_000, n)),
                         700, 75_000)
        balance = np.clip(rng.normal(np.where(student, 990, 770), 470, n), 0, 2_650)
        balance[rng.random(n) < 0.05] = 0.0
        logit = -10.7 + 0.0057 * balance - 0.65 * student
        default = rng.random(n) < 1 / (1 + np.exp(-logit))
        frame = pd.DataFrame({"student": np.where(student, "Yes", "No"), "balance": np.round(balance, 2),
                              "income": np.round(income, 2), "default": np.where(default, "Yes", "No")})
        bounds = {"balance": [0, 3000], "income": [0, 80_000]}
        kw = {"categories": {"student": ["No", "Yes"]}, "classes": ["No", "Yes"]}
        label, task = "default", "classification"
    from sklearn.model_selection import train_test_split

    strat = frame[label] if task == "classification" else None
    train, test = train_test_split(frame, test_size=0.3, random_state=0, stratify=strat)
    return Table(name, train.reset_index(drop=True), test.reset_index(drop=True), label=label, task=task,
                 bounds=bounds, **kw)


TABLES = {"adult": adult, "wage-sim": lambda: simulated("wage-sim"),
          "default-sim": lambda: simulated("default-sim"),
          "insurance-sim": lambda: simulated("insurance-sim"),
          "breast-cancer": lambda: bundled("breast-cancer"),
          "diabetes": lambda: bundled("diabetes"), "digits": lambda: bundled("digits")}


#: extra mechanism parameters from ``--set`` (a study of one setting; empty: the user's defaults)
EXTRA: dict = {}


def recommended(table: Table, ds, epsilon: float) -> tuple[str, dict]:
    rec = recommended_mechanism(table.task, ds.n_samples, ds.n_features, epsilon=epsilon, delta=DELTA,
                                n_classes=0 if ds.classes is None else len(ds.classes),
                                image_shape=ds.image_shape)
    return rec["mechanism"], {**rec["parameters"], "epsilon": epsilon, "delta": DELTA, **EXTRA}


def release_api(table: Table, ds, epsilon: float):
    name, params = recommended(table, ds, epsilon)
    rel = get_mechanism(name)(**params).release(ds)
    view = with_output_space(rel, PublicSchema.from_dataset(ds), None)
    return name, rel, pd.read_csv(io.BytesIO(view.to_csv_bytes()))


def release_cli(table: Table, ds, epsilon: float):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        table.train.to_csv(tmp / "train.csv", index=False)
        (tmp / "bounds.json").write_text(json.dumps(table.bounds))
        cmd = [sys.executable, "-m", "dpcore.cli", "release", "auto", str(tmp / "train.csv"),
               "-o", str(tmp / "out.csv"), "--label", table.label, "--task", table.task,
               "--bounds", str(tmp / "bounds.json"), "--epsilon", str(epsilon), "--delta", str(DELTA)]
        if table.categories:
            (tmp / "categories.json").write_text(json.dumps(table.categories))
            cmd += ["--categories", str(tmp / "categories.json")]
        if table.classes is not None:
            (tmp / "classes.json").write_text(json.dumps(table.classes))
            cmd += ["--classes", str(tmp / "classes.json")]
        if table.label_bounds is not None:
            cmd += ["--label-bounds", *map(str, table.label_bounds)]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if done.returncode:
            raise RuntimeError(done.stderr.strip())
        card = json.loads((tmp / "out.card.json").read_text())
        return card["mechanism"], None, pd.read_csv(tmp / "out.csv")


@dataclasses.dataclass
class Reference:
    """What every file of a table is scored against: the public schema, the real held-out rows
    encoded as a file is (``X_test``, ``y_test``), the private training rows encoded the same way
    (``X_priv``, ``y_priv``), the majority rate (or training-mean RMSE) and the same model trained
    on the private rows (accuracy or RMSE; ROC AUC for two classes, else ``None``)."""

    schema: PublicSchema
    ds_train: object
    ds_test: object
    X_test: np.ndarray
    y_test: np.ndarray
    X_priv: np.ndarray
    y_priv: np.ndarray
    baseline: float
    nonprivate: float
    nonprivate_auc: float | None


def reference(table: Table) -> Reference:
    ds_train, ds_test = table.dataset(table.train), table.dataset(table.test)
    schema = PublicSchema.from_dataset(ds_train)
    X_test = encoded_real(ds_test.X, ds_train.bounds)
    _, y_test = encode_file(table.test, schema)
    X_priv, y_priv = encode_file(table.train, schema)
    if table.task == "classification":
        baseline = float(np.mean(y_test == np.bincount(y_priv).argmax()))
    else:
        baseline = float(math.sqrt(np.mean((y_test - y_priv.mean()) ** 2)))
    binary = table.task == "classification" and len(table.classes or []) == 2
    return Reference(schema, ds_train, ds_test, X_test, y_test, X_priv, y_priv, baseline,
                     file_model_score(X_priv, y_priv, X_test, y_test, table.task),
                     _auc(X_priv, y_priv, X_test, y_test) if binary else None)


def run_table(table: Table, epsilons: list[float], releases: int, via: str) -> list[dict]:
    ref = reference(table)
    ds_train, ds_test, schema = ref.ds_train, ref.ds_test, ref.schema
    X_test, y_test, y_priv = ref.X_test, ref.y_test, ref.y_priv
    baseline, nonprivate, nonprivate_auc = ref.baseline, ref.nonprivate, ref.nonprivate_auc
    classification = table.task == "classification"
    binary = classification and len(table.classes or []) == 2
    rows = []
    for eps in epsilons:
        file_scores, released_scores, seconds, names, rates, aucs = [], [], [], set(), [], []
        for _ in range(releases):
            t0 = time.perf_counter()
            name, rel, frame = (release_cli if via == "cli" else release_api)(table, ds_train, eps)
            seconds.append(time.perf_counter() - t0)
            names.add(name)
            X_file, y_file = encode_file(frame, schema)
            file_scores.append(file_model_score(X_file, y_file, X_test, y_test, table.task))
            if classification:
                rates.append(float(np.mean(y_file == y_priv.max())))
                if binary:
                    aucs.append(_auc(X_file, y_file, X_test, y_test))
            if rel is not None and rel.transform_fn is not None:
                X_rel = np.asarray(rel.data, dtype=float)
                y_rel = np.asarray(rel.labels)
                if classification:
                    position = {v: i for i, v in enumerate(np.asarray(ds_train.classes).tolist())}
                    y_rel = np.array([position[v] for v in y_rel.tolist()])
                released_scores.append(file_model_score(X_rel, y_rel, rel.transform(ds_test.X), y_test,
                                                        table.task))
        rows.append({"table": table.name, "epsilon": eps, "mechanism": "/".join(sorted(names)),
                     "metric": "accuracy" if classification else "RMSE",
                     "file": (float(np.mean(file_scores)), float(np.std(file_scores))),
                     "file_all": file_scores,
                     "released": (float(np.mean(released_scores)), float(np.std(released_scores)))
                     if released_scores else None,
                     "baseline": baseline, "nonprivate": nonprivate,
                     "label_rate": float(np.mean(rates)) if rates else None,
                     "auc": (float(np.mean(aucs)), float(np.std(aucs))) if aucs else None,
                     "nonprivate_auc": nonprivate_auc,
                     "seconds": float(np.median(seconds)), "releases": releases})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def _auc(X_train, y_train, X_test, y_test) -> float:
    """ROC AUC of the logistic regression trained on ``(X_train, y_train)`` (0.5 with one class):
    the measure for a rare class, where accuracy sits at the majority rate."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    if np.unique(y_train).size < 2:
        return 0.5
    model = LogisticRegression(max_iter=5000).fit(X_train, y_train)
    return float(roc_auc_score(y_test, model.predict_proba(X_test)[:, 1]))


def markdown(rows: list[dict]) -> str:
    out = ["| table | metric | ε | mechanism | file (mean ± sd) | released space | baseline | "
           "non-private | file AUC (non-private) | s / release |", "|---" * 10 + "|"]
    for r in rows:
        rel = f"{r['released'][0]:.3f} ± {r['released'][1]:.3f}" if r["released"] else "—"
        base = "majority" if r["metric"] == "accuracy" else "train mean"
        auc = (f"{r['auc'][0]:.3f} ± {r['auc'][1]:.3f} ({r['nonprivate_auc']:.3f})" if r.get("auc") else "—")
        out.append(f"| {r['table']} | {r['metric']} | {r['epsilon']:g} | {r['mechanism']} | "
                   f"**{r['file'][0]:.3f} ± {r['file'][1]:.3f}** | {rel} | {r['baseline']:.3f} ({base}) | "
                   f"{r['nonprivate']:.3f} | {auc} | {r['seconds']:.1f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    ap.add_argument("--releases", type=int, default=3)
    ap.add_argument("--via", choices=("api", "cli"), default="api")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    ap.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE",
                    help="extra mechanism parameters (--via api), e.g. marginal_fraction=0.2")
    args = ap.parse_args(argv)
    for item in args.set:
        name, value = item.split("=", 1)
        EXTRA[name] = json.loads(value) if value[:1] in "0123456789-[{\"" else value
    rows = []
    for name in args.tables:
        table = TABLES[name]()
        if table is None:
            print(f"{name}: skipped (../shared/datasets absent)", file=sys.stderr)
            continue
        rows += run_table(table, args.epsilons, args.releases, args.via)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    print(markdown(rows))


if __name__ == "__main__":
    main()
