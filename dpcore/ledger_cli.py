"""``dpcore ledger``: the persistent ledger store (:mod:`dpcore.ledger_store`) from the command line.

::

    dpcore ledger show STORE                      # every dataset: budget, spent, releases
    dpcore ledger show STORE DATASET              # one dataset: releases and budget log
    dpcore ledger register STORE DATASET --budget 1 [--delta-budget 1e-5]
    dpcore ledger raise-budget STORE DATASET --budget 2 --reason "board decision 2025-03"
    dpcore ledger export STORE DATASET -o L.json  # the JSON ledger format (+ dataset_key, budget_log)
    dpcore ledger import STORE DATASET L.json     # add a JSON ledger's releases

``DATASET`` is a data file (its bytes' SHA-256), a folder or glob of files, a bundled dataset's
name, or a key as ``show`` prints it (``sha256:...``, ``bundled:...``, ``files:...``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from dpcore.ledger import Ledger, check_budget
from dpcore.ledger_store import LedgerStore, dataset_key, is_store_path

__all__ = ["add_ledger_parser", "budget_type", "run_ledger_command"]


def budget_type(name: str, **limits: Any):
    """An argparse ``type`` for a budget: :func:`dpcore.ledger.check_budget` on the number."""
    def parse(text: str) -> float:
        try:
            return check_budget(float(text), name, **limits)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def add_ledger_parser(sub: Any) -> None:
    """Add ``ledger`` and its sub-commands to the CLI's sub-parsers ``sub``."""
    lp = sub.add_parser("ledger", help="the persistent ledger store: budgets per dataset (show, register, "
                        "raise-budget, export, import)",
                        description="A ledger store (.sqlite) keeps one budget and the releases of each "
                                    "dataset, shared by the app and by `release --ledger STORE`.")
    verbs = lp.add_subparsers(dest="ledger_command", required=True, metavar="COMMAND")
    dataset_help = ("a data file, a folder or glob of files, a bundled dataset, or a key as `show` prints "
                    "it (sha256:..., bundled:..., files:...)")
    show = verbs.add_parser("show", help="datasets, budgets and totals; with DATASET its releases and "
                            "budget log")
    show.add_argument("store", metavar="STORE")
    show.add_argument("dataset", metavar="DATASET", nargs="?", help=dataset_help)
    show.add_argument("--json", action="store_true", help="print JSON")
    reg = verbs.add_parser("register", help="set a dataset's budget (once)")
    raise_ = verbs.add_parser("raise-budget", help="raise a registered dataset's budget (logged, with a "
                              "reason)")
    for p in (reg, raise_):
        p.add_argument("store", metavar="STORE")
        p.add_argument("dataset", metavar="DATASET", help=dataset_help)
        p.add_argument("--budget", type=budget_type("epsilon budget"), required=p is reg,
                       help="epsilon budget per neighbouring relation")
        p.add_argument("--delta-budget", type=budget_type("delta budget", allow_zero=True, upper=1.0),
                       help="delta budget per neighbouring relation (default: none)")
    reg.add_argument("--label", default="", help="a name for people (default: DATASET)")
    raise_.add_argument("--reason", required=True, help="why (kept in the budget log)")
    exp = verbs.add_parser("export", help="write a dataset's ledger as a JSON ledger file")
    exp.add_argument("store", metavar="STORE")
    exp.add_argument("dataset", metavar="DATASET", help=dataset_help)
    exp.add_argument("-o", "--output", required=True, help="the JSON file to write (must not exist)")
    imp = verbs.add_parser("import", help="add the releases of a JSON ledger file to a dataset")
    imp.add_argument("store", metavar="STORE")
    imp.add_argument("dataset", metavar="DATASET", help=dataset_help)
    imp.add_argument("ledger", metavar="LEDGER.json")


def _store(path: str, *, must_exist: bool = True) -> LedgerStore:
    if not is_store_path(path):
        raise ValueError(f"{path} is not a ledger store: its name must end in .sqlite, .sqlite3 or .db")
    if must_exist and not Path(path).exists():
        raise ValueError(f"the ledger store {path} does not exist")
    return LedgerStore(path)


def _eps(value: float) -> str:
    return "inf" if value == float("inf") else f"{value:.6g}"


def run_ledger_command(args: argparse.Namespace) -> None:
    """Run ``dpcore ledger COMMAND`` (errors raise ``ValueError`` / ``OSError``: exit 2)."""
    verb = args.ledger_command
    store = _store(args.store, must_exist=verb not in ("register", "import"))
    key = dataset_key(args.dataset) if getattr(args, "dataset", None) else None
    if verb == "register":
        rec = store.register(key, args.budget, args.delta_budget, label=args.label or args.dataset)
        print(f"{rec.key}: budget epsilon = {rec.budget:g}"
              + (f", delta = {rec.delta_budget:g}" if rec.delta_budget is not None else "")
              + f" (registered {rec.registered_utc} by {rec.registered_by})")
    elif verb == "raise-budget":
        rec = store.raise_budget(key, args.budget, args.delta_budget, reason=args.reason)
        print(f"{rec.key}: budget raised to epsilon = {rec.budget:g}"
              + (f", delta = {rec.delta_budget:g}" if rec.delta_budget is not None else "")
              + " (logged)")
    elif verb == "export":
        out = Path(args.output)
        if out.exists():
            raise ValueError(f"{out} exists; choose a new file")
        if store.dataset(key) is None:
            raise ValueError(f"the dataset {key} is not registered in {args.store}")
        out.write_text(json.dumps(store.export_dict(key), indent=2, allow_nan=False))
        print(f"wrote {out}")
    elif verb == "import":
        from dpcore.ledger import check_ledger_path

        other = Ledger.load(check_ledger_path(args.ledger))
        if not Path(args.ledger).exists():
            raise ValueError(f"the ledger file {args.ledger} does not exist")
        added = store.import_ledger(key, other, label=args.dataset)
        print(f"{key}: {added} release(s) added; {store.ledger(key).summary()}")
    elif key is None:
        _show_all(store, args.json)
    else:
        _show_one(store, key, args.json)


def _show_all(store: LedgerStore, as_json: bool) -> None:
    rows = []
    for rec in store.datasets():
        ledger = store.ledger(rec.key)
        rows.append({"key": rec.key, "label": rec.label, "budget": rec.budget,
                     "delta_budget": rec.delta_budget, "releases": len(ledger.entries),
                     "spent": {rel: _eps(t.epsilon) for rel, t in ledger.totals().items()}})
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    if not rows:
        print(f"{store.path}: no dataset registered")
    for r in rows:
        spent = ", ".join(f"{rel} {eps}" for rel, eps in r["spent"].items()) or "nothing"
        print(f"{r['key']}  {r['label']}: budget epsilon {r['budget']:g}"
              + (f", delta {r['delta_budget']:g}" if r["delta_budget"] is not None else "")
              + f"; spent {spent}; {r['releases']} release(s)")


def _show_one(store: LedgerStore, key: str, as_json: bool) -> None:
    rec = store.dataset(key)
    if rec is None:
        raise ValueError(f"the dataset {key} is not registered in {store.path}")
    if as_json:
        print(json.dumps(store.export_dict(key), indent=2, allow_nan=False))
        return
    ledger = store.ledger(key)
    print(f"{rec.key}  {rec.label}\n  {ledger.summary()}")
    for e in ledger.entries:
        print(f"  {e.created_utc}  {e.mechanism:16s} epsilon {_eps(e.epsilon):>8s}  delta {e.delta:.3g}  "
              f"{e.neighbouring}  sha256 {e.sha256[:16]}")
    print("  budget log:")
    for c in store.budget_log(key):
        was = "" if c.previous_budget is None else f" (was {c.previous_budget:g})"
        print(f"    {c.time_utc}  {c.action}: epsilon {c.budget:g}{was}"
              + (f", delta {c.delta_budget:g}" if c.delta_budget is not None else "")
              + f"  by {c.by}" + (f": {c.reason}" if c.reason else ""))
