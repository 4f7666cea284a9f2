"""The ``dpcore`` command line.

::

    dpcore datasets
    dpcore describe ron-gauss
    dpcore describe my.csv --label y      # check a data file: shape, task, bounds source
    dpcore release local-gaussian digits -o out.csv --epsilon 1 --delta 1e-6
    dpcore epsilon dpmix --sigma-x 8 --sigma-y 8 --ell 16 --n 60000 --T 60000 --d-x 784 --d-y 10 \
        --delta 1e-5
    dpcore calibrate dpmix --epsilon 10 --ell 16 --n 60000 --T 60000 --d-x 784 --d-y 10 --delta 1e-5

Bad input exits with status 2 and a one-line message on stderr, never a traceback, and writes
nothing (warnings are printed only when the command succeeds; the files of a half-finished release
are removed). An unexpected internal error exits with status 1 and one line (``DPCORE_DEBUG=1``
shows the traceback). The CLI refuses NOT PRIVATE settings (epsilon = inf), never takes a seed, and
refuses data-derived bounds unless ``--data-bounds`` is given (then the card records
``bounds_source: "data"``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from dpcore.data import Dataset, bundled_datasets, load_bounds_file, load_dataset, read_table
from dpcore.exceptions import NotPrivateError
from dpcore.ledger import Ledger, LedgerEntry
from dpcore.mechanisms import MECHANISMS, get_mechanism
from dpcore.release import release_paths
from dpcore.schema import Param

PROG = "dpcore"


class CLIError(Exception):
    """An error reported as one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise CLIError(message)


def _add_param_option(parser: argparse.ArgumentParser, p: Param) -> None:
    kwargs: dict[str, Any] = {"help": p.help, "dest": p.name, "default": argparse.SUPPRESS}
    if p.kind == "bool":
        kwargs["action"] = argparse.BooleanOptionalAction
    elif p.kind == "choice":
        kwargs["choices"] = list(p.choices or ())
        kwargs["type"] = type(p.choices[0]) if p.choices else str
    elif p.kind == "fraction_split":
        kwargs["type"] = float
        kwargs["nargs"] = len(p.split_names) or "+"
        kwargs["metavar"] = tuple(n.upper() for n in p.split_names) or None
    elif p.kind == "int":
        kwargs["type"] = int
    else:
        kwargs["type"] = float
    if p.default is not None and p.kind != "bool":
        kwargs["help"] += f" (default: {p.default})"
    parser.add_argument(p.cli_flag, **kwargs)


def _add_data_options(parser: argparse.ArgumentParser) -> None:
    """Options that say how to read an input table (``release`` and ``describe FILE``)."""
    parser.add_argument("--label", default=None, help="label column ('' for none)")
    parser.add_argument("--task", choices=["unsupervised", "classification", "regression"])
    parser.add_argument("--bounds", help="public bounds file: JSON {col: [lo, hi]} or CSV column,lo,hi")
    parser.add_argument("--label-bounds", type=float, nargs=2, metavar=("LO", "HI"))
    parser.add_argument("--categories", help="JSON file {column: [public categories]} for one-hot")
    parser.add_argument("--classes", help="public class list of a classification label: "
                        "comma-separated values (e.g. 0,1) or a JSON file holding a list")
    parser.add_argument("--missing", choices=["error", "impute", "drop"], default=None,
                        help="rows with missing/infinite features: refuse (default), impute the "
                        "midpoint of the public bounds (n stays public), or drop them (the "
                        "guarantee then covers the cleaned table)")
    parser.add_argument("--drop-nonfinite", action="store_true", help="same as --missing drop")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Differentially private data release.")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("datasets", help="list the bundled datasets")

    desc = sub.add_parser("describe", help="parameters and guarantee of a mechanism, or check a data file")
    desc.add_argument("mechanism", metavar="TARGET",
                      help=f"a mechanism ({', '.join(sorted(MECHANISMS))}), or a data file or "
                           "bundled dataset to check")
    desc.add_argument("--json", action="store_true", help="print JSON")
    _add_data_options(desc)

    rel = sub.add_parser("release", help="draw a release and write OUT.csv + OUT.card.json")
    mech_sub = rel.add_subparsers(dest="mechanism", required=True, metavar="MECHANISM")
    for name, cls in MECHANISMS.items():
        mp = mech_sub.add_parser(name, help=cls.title, description=cls.summary)
        mp.add_argument("input", metavar="INPUT", help="CSV/Parquet/.npz file or bundled dataset name")
        mp.add_argument("-o", "--output", required=True, help="output CSV path")
        _add_data_options(mp)
        mp.add_argument("--data-bounds", action="store_true",
                        help="accept bounds computed from the data (the guarantee then does NOT hold)")
        mp.add_argument("--data-classes", action="store_true",
                        help="accept a class list read from the data (the guarantee then does NOT hold)")
        if "public_data" in cls.extra_args:
            mp.add_argument("--public-data", metavar="FILE",
                            help="a separate table of PUBLIC rows with the input's columns (read with "
                                 "the same options; never a part of the private input)")
        mp.add_argument("--n-samples", type=int, default=None, help="number of released rows")
        mp.add_argument("--ledger", help="ledger JSON file to check and append to")
        mp.add_argument("--budget", type=float, help="total epsilon budget for the ledger")
        for p in cls.params:
            _add_param_option(mp, p)

    for verb, helptext in (("epsilon", "privacy accounting: epsilon of given noise"),
                           ("calibrate", "privacy accounting: noise for a target epsilon")):
        vp = sub.add_parser(verb, help=helptext)
        vsub = vp.add_subparsers(dest="mechanism", required=True)
        dp = vsub.add_parser("dpmix", help="DPMix Renyi-DP accountant (SPEC 6.1)")
        if verb == "epsilon":
            dp.add_argument("--sigma-x", type=float, required=True)
            dp.add_argument("--sigma-y", type=float, required=True)
        else:
            dp.add_argument("--epsilon", type=float, required=True)
            dp.add_argument("--ratio", type=float, default=1.0, help="sigma_y / sigma_x")
        dp.add_argument("--ell", type=int, required=True, help="mixture degree")
        dp.add_argument("--n", type=int, required=True, help="number of private rows")
        dp.add_argument("--T", "--n-mixtures", dest="T", type=int, required=True,
                        help="number of mixtures")
        dp.add_argument("--d-x", type=int, required=True)
        dp.add_argument("--d-y", type=int, required=True)
        dp.add_argument("--delta", type=float, required=True)
        dp.add_argument("--bound", choices=["tight", "paper"], default="tight")
    return parser


def _cmd_datasets() -> None:
    for name, meta in bundled_datasets().items():
        shape = f"{meta['n_rows']} x {meta['n_features']}"
        print(f"{name:15s} {shape:>13s}  {meta['task']:15s} {meta['title']}")


def _cmd_describe(args: argparse.Namespace) -> None:
    if args.mechanism not in MECHANISMS:
        _describe_data(args)
        return
    info = get_mechanism(args.mechanism).describe()
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return
    print(f"{info['name']}: {info['title']}\n  {info['summary']}")
    print(f"  neighbouring relation: {info['neighbouring']}; guarantee kind: {info['guarantee_kind']}")
    print(f"  tasks: {', '.join(info['tasks'])}\n  source: {info['citation']}\n  parameters:")
    for p in info["parameters"]:
        print(f"    --{p['name'].replace('_', '-'):18s} default {p['default']!s:10s} {p['help']}")


def _load_categories(path: str | None) -> dict[str, list[Any]] | None:
    """The ``--categories`` JSON file: ``{column: [public categories]}``."""
    if not path:
        return None
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CLIError(f"cannot read the categories file {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CLIError(f"the categories file {path} is not valid JSON ({exc}); expected "
                       '{"column": ["cat1", "cat2", ...]}') from None
    if not isinstance(raw, dict) or not all(isinstance(v, list) and v for v in raw.values()):
        raise CLIError(f"the categories file {path} must map each column to a non-empty list: "
                       '{"column": ["cat1", "cat2", ...]}')
    return raw


def _load_input(args: argparse.Namespace, source: str) -> Dataset:
    """The dataset ``source`` read with the data options of ``args``."""
    bounds = load_bounds_file(args.bounds) if args.bounds else None
    missing = args.missing or ("drop" if args.drop_nonfinite else "error")
    return load_dataset(source, label=args.label, task=args.task, bounds=bounds,
                        label_bounds=args.label_bounds, categories=_load_categories(args.categories),
                        classes=_load_classes(args.classes), missing=missing)


def _load_classes(value: str | None) -> list[Any] | None:
    """``--classes``: comma-separated values, or a JSON file holding a list (or {"classes": [...]})."""
    if not value:
        return None
    path = Path(value)
    if value.lower().endswith(".json") or path.is_file():
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise CLIError(f"cannot read the classes file {value}: {exc.strerror or exc}") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CLIError(f"the classes file {value} is not valid JSON ({exc}); expected a list "
                           "such as [0, 1] or [\"no\", \"yes\"]") from None
        raw = raw.get("classes") if isinstance(raw, dict) else raw
        if not isinstance(raw, list) or len(raw) < 2:
            raise CLIError(f"the classes file {value} must hold a list of at least two classes")
        return raw
    items = [v.strip() for v in value.split(",") if v.strip()]
    if len(items) < 2:
        raise CLIError(f"--classes needs at least two comma-separated classes, got {value!r}")
    return items


def _describe_data(args: argparse.Namespace) -> None:
    """``dpcore describe FILE``: load and validate a table exactly as ``release`` would."""
    target = args.mechanism
    if target not in bundled_datasets() and not Path(target).exists():
        raise CLIError(f"{target!r} is not a mechanism ({', '.join(sorted(MECHANISMS))}), a bundled "
                       "dataset or an existing file")
    ds = _load_input(args, target)
    info = {
        "name": ds.name, "n_rows": ds.n_samples, "n_features": ds.n_features, "task": ds.task,
        "label": ds.label_name, "n_classes": None if ds.classes is None else int(len(ds.classes)),
        "bounds_source": ds.bounds_source, "data_bound_columns": ds.data_bound_columns(),
        "n_dropped": ds.n_dropped, "features": ds.feature_names,
    }
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return
    print(f"{ds.name}: {ds.n_samples} rows x {ds.n_features} features, task {ds.task}, "
          f"label {ds.label_name or '(none)'}"
          + (f" ({len(ds.classes)} classes)" if ds.classes is not None else ""))
    print(f"  features: {', '.join(ds.feature_names[:10])}{', ...' if ds.n_features > 10 else ''}")
    n_data = len(info["data_bound_columns"])
    print(f"  bounds source: {ds.bounds_source}"
          + (f" ({n_data} column(s) from the data: the guarantee would NOT hold)" if n_data else ""))
    if ds.n_dropped:
        print(f"  rows dropped for missing/infinite values: {ds.n_dropped}")


def _check_output(output: str) -> None:
    """Refuse an output path that cannot be written, before any work is done."""
    path = Path(output)
    if path.is_dir():
        raise CLIError(f"--output {output} is a folder; give the path of the CSV to write, e.g. "
                       f"{path / 'release.csv'}")
    parent = path.parent
    if not parent.is_dir():
        raise CLIError(f"the output folder {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise CLIError(f"the output folder {parent} is not writable")


def _cmd_release(args: argparse.Namespace) -> None:
    cls = get_mechanism(args.mechanism)
    params = {p.name: getattr(args, p.name) for p in cls.params if hasattr(args, p.name)}
    if "epsilon" in params and math.isinf(params["epsilon"]):
        raise CLIError("epsilon = inf is NOT PRIVATE: the CLI refuses it (use the app's explore mode)")
    _check_output(args.output)
    ds = _load_input(args, args.input)
    if ds.bounds_source == "data" and not args.data_bounds:
        raise CLIError(
            "no public bounds for some columns of the input: pass --bounds FILE (or "
            "--label-bounds), or --data-bounds to accept bounds from the data (the privacy "
            "guarantee then does NOT hold and the card says so)"
        )
    if ds.classes_source == "data" and not args.data_classes:
        raise CLIError(
            "no public class list for the label: pass --classes (e.g. --classes 0,1 or a JSON "
            "file), or --data-classes to accept the list read from the data (the privacy "
            "guarantee then does NOT hold and the card says so)"
        )
    ledger = Ledger.load(args.ledger) if args.ledger else None
    if args.budget is not None and ledger is None:
        raise CLIError("--budget needs --ledger FILE")
    if getattr(args, "public_data", None):
        frame = read_table(args.public_data)
        frame = frame.drop(columns=[c for c in (ds.label_name, args.label) if c and c in frame.columns])
        same = list(frame.columns) == ds.feature_names
        bounds = dict(zip(ds.feature_names, ds.bounds.tolist(), strict=True)) if same else None
        public = load_dataset(frame, label="", bounds=bounds,
                              categories=_load_categories(args.categories))
        if public.feature_names != ds.feature_names:
            raise CLIError(f"--public-data {args.public_data} must have the input's feature columns "
                           f"{ds.feature_names[:5]}{' ...' if ds.n_features > 5 else ''}")
        params["public_data"] = public
    mech = cls(**params)
    release = mech.release(ds, n_samples=args.n_samples)
    release.check_downloadable()
    if ledger is not None and ledger.would_exceed(release.guarantee.epsilon, args.budget):
        raise CLIError(
            f"refused: this release (epsilon = {release.guarantee.epsilon:.4g}) would bring the "
            f"ledger total to {ledger.total_epsilon + release.guarantee.epsilon:.4g}, over the "
            f"budget {args.budget:g}; nothing was written"
        )
    targets = release_paths(args.output).values()
    existed = {t for t in targets if t.exists()}
    try:
        written = release.save(args.output)  # all files or none
        if ledger is not None:  # the ledger records the card exactly as written (same sha256)
            card = json.loads(written["card"].read_text(encoding="utf-8"))
            ledger.add(LedgerEntry.from_card(card, ds.name))
            ledger.save(args.ledger)
    except BaseException:
        for t in targets:  # the ledger could not be written: remove the release this run made
            if t not in existed and t.exists():
                t.unlink()
        raise
    g = release.guarantee
    print(f"wrote {', '.join(str(p) for p in written.values())}")
    print(f"guarantee: {g.kind} epsilon = {g.epsilon:.6g}, delta = {g.delta:.3g}, "
          f"neighbouring = {g.neighbouring}" + (f", beta = {g.beta:.3g}" if g.beta else "")
          + ("" if g.holds else "  (does NOT hold: a public fact was taken from the data)"))
    if ledger is not None:
        print(f"ledger: {ledger.summary()}")


def _cmd_accounting(args: argparse.Namespace) -> None:
    from dpcore import accounting

    common = dict(ell=args.ell, n=args.n, n_mixtures=args.T, d_x=args.d_x, d_y=args.d_y,
                  delta=args.delta, bound=args.bound)
    if args.command == "epsilon":
        res = accounting.dpmix_epsilon(sigma_x=args.sigma_x, sigma_y=args.sigma_y, **common)
        print(f"epsilon = {float(res.epsilon):.6g}  (alpha* = {int(res.alpha)}, delta = {args.delta:g}, "
              f"bound = {args.bound})")
    else:
        sigma = accounting.dpmix_calibrate_sigma(epsilon=args.epsilon, ratio=args.ratio, **common)
        print(f"sigma_x = {sigma:.6g}  sigma_y = {sigma * args.ratio:.6g}  (epsilon = {args.epsilon:g}, "
              f"delta = {args.delta:g}, bound = {args.bound})")


#: Library-internal notices that say nothing about the user's data or parameters.
_QUIET_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)


def _one_line(exc: BaseException | str) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


def _run(args: argparse.Namespace) -> None:
    if args.command == "datasets":
        _cmd_datasets()
    elif args.command == "describe":
        _cmd_describe(args)
    elif args.command == "release":
        _cmd_release(args)
    else:
        _cmd_accounting(args)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dpcore`` console script; returns the exit status.

    0 on success (warnings, if any, follow as ``dpcore: warning: ...`` lines on stderr); 2 with
    exactly one ``dpcore: error: ...`` line on stderr for bad input or parameters; 1 with one
    line for an unexpected internal error.
    """
    parser = build_parser()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            _run(parser.parse_args(argv))
        except (CLIError, NotPrivateError, ValueError, OSError, KeyError, ArithmeticError) as exc:
            print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
            return 2
        except Exception as exc:
            if os.environ.get("DPCORE_DEBUG"):
                raise
            print(f"{PROG}: internal error ({type(exc).__name__}): {_one_line(exc)} "
                  "(DPCORE_DEBUG=1 shows the traceback)", file=sys.stderr)
            return 1
    seen: set[str] = set()
    for w in caught:
        msg = _one_line(str(w.message))
        if msg not in seen and not issubclass(w.category, _QUIET_WARNINGS):
            seen.add(msg)
            print(f"{PROG}: warning: {msg}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
