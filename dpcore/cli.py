"""The ``dpcore`` command line.

::

    dpcore datasets
    dpcore ledger show ledger.sqlite        # the persistent budgets per dataset (dpcore.ledger_cli)
    dpcore describe ron-gauss
    dpcore describe my.csv --label y      # check a data file: shape, task, bounds source
    dpcore release local-gaussian digits -o out.csv --epsilon 1 --delta 1e-6
    dpcore epsilon dpmix --sigma-x 8 --sigma-y 8 --ell 16 --n 60000 --n-mixtures 60000 --d-x 784 --d-y 10 \
        --delta 1e-5
    dpcore calibrate dpmix --epsilon 10 --ell 16 --n 60000 --n-mixtures 60000 --d-x 784 --d-y 10 --delta 1e-5
    dpcore calibrate ron-gauss adult --epsilon 1 --delta 1e-6   # noise per statistic, public facts only
    dpcore epsilon pca-gauss adult --statistic 1 --scale 3 --delta 1e-6

Bad input exits with status 2 and a one-line message on stderr, never a traceback, and writes
nothing (warnings are printed only when the command succeeds; the files of a half-finished release
are removed). An unexpected internal error exits with status 1 and one line (``DPCORE_DEBUG=1``
shows the traceback). The CLI refuses NOT PRIVATE settings (epsilon = inf), never takes a seed, and
refuses data-derived bounds unless ``--data-bounds`` is given (then the card records
``bounds_source: "data"``).

Outputs never destroy anything: an ``-o`` whose files would land on the input, a bounds or
categories file, the ledger or its lock, any ledger or lock file, a folder, a non-regular file
(device, FIFO, socket) or a file another release in flight is writing (:func:`dpcore.release.output_lock`)
is refused before any work. With ``--ledger`` the release is checked against the budget under the
ledger's lock, recorded, and only then renamed into place (:func:`dpcore.ledger.ledger_transaction`).
SIGINT and SIGTERM remove the temporary files of an unfinished release and end with one line
(exit 130 for Ctrl-C, 143 for SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import re
import signal
import stat
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dpcore._interrupt  # noqa: F401 - first: Ctrl-C during the imports below ends with one line
from dpcore.data import (
    Dataset,
    bundled_datasets,
    load_bounds_file,
    load_dataset,
    read_regular_file,
    read_table,
    sample_data_dir,
)
from dpcore.decode import OUTPUT_SPACES, PublicSchema, with_output_space
from dpcore.dp_bounds import compose_release
from dpcore.exceptions import DataValidationError, NotPrivateError, PrivacyLeakWarning
from dpcore.io import check_load_memory, table_shape
from dpcore.ledger import Ledger, LedgerEntry, lock_path
from dpcore.ledger_cli import add_ledger_parser, budget_type, run_ledger_command
from dpcore.ledger_store import dataset_key, is_store_path, open_ledger_transaction, precheck_ledger
from dpcore.limits import check_memory, max_input_bytes
from dpcore.mechanisms import MECHANISMS, get_mechanism
from dpcore.mechanisms.base import _check_n_samples
from dpcore.release import Release, output_lock, release_paths
from dpcore.schema import EPSILON, Param, validate_params
from dpcore.threads import blas_limit
from dpcore.validation import MISSING_POLICIES, TASKS, parse_value_list

__all__ = [
    "CLIError",
    "Interrupted",
    "PROG",
    "build_parser",
    "cli_wording",
    "escape_controls",
    "main",
]

PROG = "dpcore"
#: ``dpcore release auto``: the recommended mechanism (dpcore.calibration.recommended_mechanism)
AUTO = "auto"
AUTO_PARAMS = (
    EPSILON,
    Param("delta", "float", None, "Failure probability of (epsilon, delta)-DP, in (0, 1): given, the rule "
          "chooses the Gaussian variants (far less noise than Laplace for the same epsilon); empty = "
          "pure epsilon-DP.", low=0.0, high=1.0, low_open=True, high_open=True, log=True, privacy=True,
          optional=True),
)


class CLIError(Exception):
    """An error reported as one line with exit status 2."""


class ReleaseNotice(UserWarning):
    """A warning the release's card carries (``details["warnings"]``), printed on stderr too."""


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that reports errors as :class:`CLIError` and never accepts an
    abbreviated option (``--eps`` for ``--epsilon``): a typo must not silently pick a parameter."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        raise CLIError(message)


def escape_controls(text: str, keep: str = "") -> str:
    """``text`` with every control, format and separator character (terminal escape codes,
    bidirectional overrides, NUL, line breaks not in ``keep``) shown as a Python escape
    (``\\x1b``, ``\\u202e``), so user-supplied names cannot drive the terminal or fake lines."""
    if text.isprintable() and not keep:
        return text
    return "".join(ch if ch.isprintable() or ch in keep or ch == " "
                   else ch.encode("unicode_escape").decode("ascii") for ch in text)


class _EscapingStream:
    """Wraps ``sys.stdout`` / ``sys.stderr`` for the duration of a command: everything the CLI
    prints goes through :func:`escape_controls` (line breaks kept)."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def write(self, text: str) -> int:
        return self._raw.write(escape_controls(text, keep="\n"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


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
    elif p.optional:
        kwargs["help"] += " (default: automatic, as described)"
    parser.add_argument(p.cli_flag, **kwargs)


_budget_type = budget_type  # an argparse type for budgets (dpcore.ledger_cli)


def _add_data_options(parser: argparse.ArgumentParser) -> None:
    """Options that say how to read an input table (``release`` and ``describe FILE``)."""
    parser.add_argument("--label", default=None, help="label column ('' for none)")
    parser.add_argument("--task", choices=list(TASKS))
    parser.add_argument("--bounds", help="public bounds file: JSON {col: [lo, hi]} or CSV column,lo,hi")
    parser.add_argument("--label-bounds", type=float, nargs=2, metavar=("LO", "HI"))
    parser.add_argument("--categories", help="JSON file {column: [public categories]} for one-hot")
    parser.add_argument("--classes", help="public class list of a classification label: "
                        "comma-separated values (e.g. 0,1) or a JSON file holding a list")
    parser.add_argument("--missing", choices=list(MISSING_POLICIES), default=None,
                        help="rows with missing/infinite features: refuse (default), impute the "
                        "midpoint of the public bounds (n stays public); 'drop' is refused by "
                        "`release` (n would depend on the data: clean the file first)")
    parser.add_argument("--drop-nonfinite", action="store_true", help="same as --missing drop")


def _option_text(p: Param) -> str:
    """``--flag`` with its value form and default, for the ``release --help`` overview."""
    if p.kind == "bool":
        return f"--[no-]{p.cli_flag[2:]} [{'automatic' if p.default is None else p.default}]"
    if p.kind == "choice":
        value = " {" + ",".join(str(c) for c in p.choices or ()) + "}"
    elif p.kind == "fraction_split":
        value = " " + " ".join(n.upper() for n in p.split_names or ("F1", "F2"))
    else:
        value = " " + p.name.upper()
    default = "automatic" if p.default is None else p.default
    if isinstance(default, tuple):
        default = " ".join(f"{v:g}" for v in default)
    return f"{p.cli_flag}{value} [{default}]"


def _release_epilog() -> str:
    """Every mechanism's options (``dpcore release --help``), grouped by mechanism."""
    import textwrap

    lines = ["options of every mechanism:",
             "  -o/--output OUT.csv (required), --label COL, --task TASK, --classes A,B, --bounds FILE,",
             "  --label-bounds LO HI, --categories FILE, --missing {error,impute,drop}, --data-bounds,",
             "  --data-classes, --public-data FILE (pca-gauss, pca-identity), --n-samples N,",
             "  --drop-nonfinite (= --missing drop), --ledger FILE, --budget EPS, --delta-budget DELTA,",
             "  --output-space {original,released}, --no-clip, --integer-columns A,B,",
             "  --dp-bounds EPS, --dp-bounds-range LO HI",
             "  large tables: --engine {memory,dask}, --scheduler ADDRESS, --blocksize BYTES, --n N,",
             "  --format {parquet,csv}, --progress, --no-progress", "", "mechanism options [default]:"]
    for name, cls in MECHANISMS.items():
        text = ", ".join(_option_text(p) for p in cls.params)
        lines += textwrap.wrap(f"{name}: {text}", width=100, initial_indent="  ",
                               subsequent_indent="      ", break_on_hyphens=False)
    lines += ["", f"'{PROG} release MECHANISM --help' explains each option; "
              f"'{PROG} describe MECHANISM' gives the guarantee."]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Differentially private data release.")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("datasets", help="list the bundled datasets")
    add_ledger_parser(sub)
    tpl = sub.add_parser("bounds-template", help="write a bounds file of a table's columns with empty "
                         "values, to fill in from documentation (never the data's min/max)")
    tpl.add_argument("input", metavar="INPUT", help="CSV/Parquet/.npz file or bundled dataset")
    tpl.add_argument("-o", "--output", required=True, help="bounds file to write: .json (null values) or "
                     ".csv (column,lo,hi with empty cells); must not exist")
    tpl.add_argument("--label", default=None, help="label column, left out ('' for none)")
    tpl.add_argument("--categories", help="JSON file {column: [categories]}: those columns are left out "
                     "(one-hot columns get [0, 1])")

    desc = sub.add_parser("describe", help="parameters and guarantee of a mechanism, or check a data file")
    desc.add_argument("mechanism", metavar="TARGET",
                      help=f"a mechanism ({', '.join(sorted(MECHANISMS))}), or a data file or "
                           "bundled dataset to check")
    desc.add_argument("--json", action="store_true", help="print JSON")
    _add_data_options(desc)

    rel = sub.add_parser("release", help="draw a release and write OUT.csv + OUT.card.json",
                         usage=f"{PROG} release MECHANISM INPUT -o OUT.csv [options]",
                         description="Draw a release from OS entropy and write OUT.csv, OUT.card.json "
                                     "(and OUT.transform.npz for projected releases).",
                         epilog=_release_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    mech_sub = rel.add_subparsers(dest="mechanism", required=True, metavar="MECHANISM")
    choices: list[tuple[str, str, str, tuple[Param, ...], tuple[str, ...]]] = [
        (AUTO, "the recommended mechanism for the table's public facts",
         "The mechanism and settings dpcore.calibration.recommended_mechanism names for the table's "
         "public facts (task, n, d, classes, image shape, epsilon, delta), each of its other "
         "parameters at its automatic default; the choice and its reason are printed and put on the card.",
         AUTO_PARAMS, ("public_data",))]
    choices += [(name, cls.title, f"{cls.title}: {cls.summary} Source: {cls.citation}", cls.params,
                 cls.extra_args) for name, cls in MECHANISMS.items()]
    for name, title, description, params_of, extra_args in choices:
        mp = mech_sub.add_parser(name, help=title, prog=f"{PROG} release {name}", description=description)
        mp.add_argument("input", metavar="INPUT", help="CSV/Parquet/.npz file or bundled dataset name")
        mp.add_argument("-o", "--output", required=True, help="output CSV path")
        _add_data_options(mp.add_argument_group("input data"))
        _add_data_fact_flags(mp, "the guarantee then does NOT hold")
        if "public_data" in extra_args:
            mp.add_argument("--public-data", metavar="FILE",
                            help="a separate table of PUBLIC rows with the input's columns (read with "
                                 "the same options; never a part of the private input)")
        mp.add_argument("--n-samples", type=int, default=None, help="number of released rows")
        mp.add_argument("--dp-bounds", type=_budget_type("--dp-bounds epsilon"), metavar="EPS", default=None,
                        help="spend EPS (part of --epsilon) on DP estimates of the low and high bound of "
                             "every column without public bounds (exponential mechanism over public "
                             "candidates, dpcore.dp_bounds); the release gets --epsilon minus EPS")
        mp.add_argument("--dp-bounds-range", type=float, nargs=2, metavar=("LO", "HI"), default=None,
                        help="the PUBLIC range the DP bounds are searched in (default -1e6 1e6; a narrower "
                             "public range gives tighter bounds at the same cost)")
        mp.add_argument("--output-space", choices=OUTPUT_SPACES, default=None,
                        help="original: your columns, categories and units (post-processing; default "
                             "where the mechanism allows it); released: the mechanism's own space")
        mp.add_argument("--no-clip", action="store_true",
                        help="original space: do not clip values to the public bounds")
        mp.add_argument("--integer-columns", metavar="A,B", default="",
                        help="original space: columns the schema declares integer (rounded, written as ints)")
        mp.add_argument("--ledger", help="ledger to check and append to: a JSON file (locked while in use), "
                        "or a ledger store (.sqlite/.sqlite3/.db: one budget per dataset, shared with the "
                        "app; see `dpcore ledger`)")
        mp.add_argument("--budget", type=_budget_type("epsilon budget"),
                        help="epsilon budget of the ledger, per neighbouring relation (default: the "
                             "budget stored in the ledger; a store takes it once, to register the dataset)")
        mp.add_argument("--delta-budget", type=_budget_type("delta budget", allow_zero=True, upper=1.0),
                        help="delta budget of the ledger, per neighbouring relation (0: pure DP only)")
        _add_engine_options(mp.add_argument_group("large tables (Dask engine)"))
        params = mp.add_argument_group(f"{name} parameters (omitted = the default shown)")
        for p in params_of:
            _add_param_option(params, p)

    for verb, helptext in (("epsilon", "privacy accounting: epsilon of given noise"),
                           ("calibrate", "privacy accounting: noise for a target epsilon")):
        vp = sub.add_parser(verb, help=helptext)
        vsub = vp.add_subparsers(dest="mechanism", required=True)
        dp = vsub.add_parser("dpmix", help="DPMix Renyi-DP accountant (Lee et al. 2019, Thm 1; "
                              "Wang, Balle & Kasiviswanathan 2019; Canonne, Kamath & Steinke 2020)")
        if verb == "epsilon":
            dp.add_argument("--sigma-x", type=float, required=True)
            dp.add_argument("--sigma-y", type=float, required=True)
        else:
            dp.add_argument("--epsilon", type=float, required=True)
            dp.add_argument("--sigma-ratio", "--ratio", dest="sigma_ratio", type=float, default=1.0,
                            help="sigma_y / sigma_x (--ratio is an older spelling)")
        dp.add_argument("--ell", type=int, required=True, help="mixture degree")
        dp.add_argument("--n", type=int, required=True, help="number of private rows")
        dp.add_argument("--n-mixtures", "--T", dest="n_mixtures", type=int, required=True,
                        help="number of mixtures T (--T is the paper's name)")
        dp.add_argument("--d-x", type=int, required=True)
        dp.add_argument("--d-y", type=int, required=True)
        dp.add_argument("--delta", type=float, required=True)
        dp.add_argument("--bound", choices=["tight", "paper"], default="tight")
        for name, cls in MECHANISMS.items():
            if name != "dpmix":
                _add_plan_parser(vsub, verb, name, cls)
    return parser


def _add_data_fact_flags(parser: argparse.ArgumentParser, consequence: str) -> None:
    """``--data-bounds`` / ``--data-classes``: accept facts read from the private data (``consequence``)."""
    parser.add_argument("--data-bounds", action="store_true",
                        help=f"accept bounds computed from the data ({consequence})")
    parser.add_argument("--data-classes", action="store_true",
                        help=f"accept a class list read from the data ({consequence})")


def _add_plan_parser(vsub: Any, verb: str, name: str, cls: Any) -> None:
    """``dpcore calibrate MECH`` / ``dpcore epsilon MECH`` from public facts (:mod:`dpcore.planning`)."""
    what = ("the noise per statistic at --epsilon" if verb == "calibrate" else
            "the epsilon at which --statistic gets noise of --scale")
    mp = vsub.add_parser(name, help=f"{cls.title}: {what}", prog=f"{PROG} {verb} {name}",
                         usage=f"{PROG} {verb} {name} [INPUT | --n N --features D] [options]",
                         description=f"{cls.title}: {what}, from public facts only: those of INPUT "
                                     "(its columns, n, public bounds, categories, class list; no value "
                                     "of it) or --n/--features/--task/--n-classes with bounds [0, 1]. "
                                     "Nothing is written. Source: dpcore.planning.")
    mp.add_argument("input", metavar="INPUT", nargs="?", default=None,
                    help="a data file or bundled dataset whose PUBLIC facts to use (optional)")
    facts = mp.add_argument_group("public facts without INPUT")
    facts.add_argument("--n", type=int, default=None, help="number of private rows (public)")
    facts.add_argument("--features", type=int, default=None,
                       help="number of features after one-hot encoding (public bounds [0, 1])")
    facts.add_argument("--n-classes", type=int, default=2, help="classification: number of public classes")
    _add_data_options(mp.add_argument_group("input data (with INPUT; --task also without it)"))
    _add_data_fact_flags(mp, "the plan is then not a public fact")
    if "public_data" in cls.extra_args:
        mp.add_argument("--public-data", metavar="FILE",
                        help="the separate table of PUBLIC rows the release would use (needs INPUT)")
    if verb == "epsilon":
        mp.add_argument("--statistic", required=True,
                        help="the noisy statistic: its number in `calibrate`'s table (1, 2, ...) or its name")
        mp.add_argument("--scale", type=float, required=True,
                        help="the noise scale wanted for it (Laplace b or Gaussian sigma)")
    params = mp.add_argument_group(f"{name} parameters (omitted = the default shown)")
    for p in cls.params:
        if not (verb == "epsilon" and p.name == "epsilon"):
            _add_param_option(params, p)


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
        raw = json.loads(read_regular_file(path, "categories file").decode("utf-8"))
    except DataValidationError as exc:
        raise CLIError(str(exc).replace("categories file not found", "cannot read the categories "
                                        "file (not found)")) from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
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


def _check_input_memory(args: argparse.Namespace, source: str,
                        check: Callable[[int, int, int], None]) -> None:
    """Refuse, before ``source`` is read, work that would need more than ``DPCORE_MAX_MEMORY``,
    estimated from the input's shape alone (:func:`dpcore.io.table_shape`: the Parquet footer, the
    ``.npz`` headers, a CSV's lines and header fields, a gzip CSV counted in pieces): reading it
    (:func:`dpcore.io.check_load_memory`), then ``check(n, d, n_classes)`` (a mechanism's
    :meth:`~dpcore.mechanisms.base.Mechanism.check_peak_memory`) with ``d`` the columns less the label
    plus the one-hot columns of ``--categories`` and ``n_classes`` the size of ``--classes``. Bundled
    datasets, ``.npz`` archives (whose reader checks their member headers first, and whose arrays
    are at most ``DPCORE_MAX_INPUT_BYTES``) and files that cannot be inspected are left to the reader."""
    if not Path(source).is_file() or source.lower().endswith(".npz") or \
            os.path.getsize(source) > max_input_bytes():  # the reader refuses it by its size first
        return
    shape = table_shape(source)
    if shape is None:
        return
    rows, columns = shape
    check_load_memory(rows, columns, Path(source).name)
    categories = _load_categories(args.categories) or {}
    classes = _load_classes(args.classes) or []
    d = max(1, columns - (1 if args.label else 0) + sum(max(0, len(v) - 1) for v in categories.values()))
    check(rows, d, len(classes))


def _cheapest_release(n: int, d: int, n_classes: int) -> None:
    """Refuse a table no in-memory release could hold: ``describe`` checks a table as ``release``
    would, and the smallest memory estimate over every mechanism (default parameters) is over
    ``DPCORE_MAX_MEMORY`` (a table that large is released by ``--engine dask``)."""
    peaks = {cls.name: cls.peak_bytes(n, d, {p.name: p.default for p in cls.params}, n_classes=n_classes)
             for cls in MECHANISMS.values()}
    name = min(peaks, key=peaks.__getitem__)
    check_memory(f"the cheapest in-memory release ({name}) of {n:,} rows x {d:,} features (a CSV or Parquet "
                 "table that large is released by --engine dask)", peaks[name])


def _load_classes(value: str | None) -> list[Any] | None:
    """``--classes``: comma-separated values (numbers if every entry is a number, else texts:
    :func:`dpcore.validation.parse_value_list`), or a JSON file holding a list (or {"classes":
    [...]}) whose JSON types say which (``["01", "1"]``: two texts)."""
    if not value:
        return None
    path = Path(value)
    if value.lower().endswith(".json") or path.exists():
        try:  # a regular file only: a FIFO or device named here must not hang or fill the memory
            raw = json.loads(read_regular_file(path, "classes file").decode("utf-8"))
        except DataValidationError as exc:
            raise CLIError(f"cannot read the classes file {value}: {exc}") from None
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise CLIError(f"the classes file {value} is not valid JSON ({exc}); expected a list "
                           "such as [0, 1] or [\"no\", \"yes\"]") from None
        raw = raw.get("classes") if isinstance(raw, dict) else raw
        if not isinstance(raw, list) or len(raw) < 2:
            raise CLIError(f"the classes file {value} must hold a list of at least two classes")
        return raw
    items = parse_value_list(value, "--classes")  # numbers if every entry is one, else texts
    if len(items) < 2:
        raise CLIError(f"--classes needs at least two comma-separated classes, got {value!r}")
    return items


def _describe_data(args: argparse.Namespace) -> None:
    """``dpcore describe FILE``: load and validate a table exactly as ``release`` would; print its
    shape, task, classes, the public bounds of every column with their source (runs of columns
    with equal bounds grouped) and the one-hot category groups."""
    target = args.mechanism
    if target not in bundled_datasets() and not Path(target).exists():
        raise CLIError(f"{target!r} is not a mechanism ({', '.join(sorted(MECHANISMS))}), a bundled "
                       "dataset or an existing file")
    _check_input_memory(args, target, _cheapest_release)
    ds = _load_input(args, target)
    groups = _category_groups(ds.feature_names)
    public = [(c, (float(lo), float(hi)), src) for c, (lo, hi), src
              in zip(ds.feature_names, ds.bounds, ds.bounds_sources, strict=True) if src != "data"]
    data_cols = ds.data_bound_columns()
    info = {
        "name": ds.name, "n_rows": ds.n_samples, "n_features": ds.n_features, "task": ds.task,
        "label": ds.label_name, "n_classes": None if ds.classes is None else int(len(ds.classes)),
        "classes": None if ds.classes is None else [_plain(c) for c in ds.classes],
        "bounds_source": ds.bounds_source, "data_bound_columns": data_cols,
        "n_dropped": ds.n_dropped, "features": ds.feature_names,
        # only public bounds can be passed to --bounds; the data's range is kept apart, in a form
        # no bounds file takes (it is not a public fact: issue "private bounds laundered")
        "public_bounds": {c: list(b) for c, b, _ in public},
        "public_bounds_sources": {c: src for c, _, src in public},
        "columns_without_public_bounds": data_cols,
        "private_data_range": {
            "note": "the private data's minimum and maximum: NOT public bounds, never a --bounds file",
            "columns": {c: {"min": float(lo), "max": float(hi)} for c, (lo, hi), src
                        in zip(ds.feature_names, ds.bounds, ds.bounds_sources, strict=True)
                        if src == "data"}},
        "label_bounds": None if ds.label_bounds is None or ds.label_bounds_source == "data"
        else [float(v) for v in ds.label_bounds],
        "categories": groups,
    }
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return
    esc = escape_controls  # names come from the file: a newline or escape code must not show raw
    print(f"{esc(ds.name)}: {ds.n_samples} rows x {ds.n_features} features, task {ds.task}, "
          f"label {esc(ds.label_name or '(none)')}"
          + (f" ({len(ds.classes)} classes)" if ds.classes is not None else ""))
    print(f"  features: {', '.join(map(esc, ds.feature_names[:10]))}"
          f"{', ...' if ds.n_features > 10 else ''}")
    if ds.classes is not None:
        shown = ", ".join(str(_plain(c)) for c in ds.classes[:20])
        print(f"  classes: {shown}{', ...' if len(ds.classes) > 20 else ''}")
    n_data = len(data_cols)
    print(f"  bounds source: {ds.bounds_source}"
          + (f" ({n_data} column(s) have no public bounds: a release would need --bounds, --dp-bounds "
             "EPS or --data-bounds)" if n_data else ""))
    print("  public bounds (lo, hi, source):" if len(public) else "  public bounds: none")
    for first, last, count, (lo, hi), source in _bound_runs(ds):
        if source == "data":
            continue
        cols = first if count == 1 else f"{first} .. {last} ({count} columns)"
        print(f"    {cols}: [{lo:.10g}, {hi:.10g}]  {source}")
    if ds.label_bounds is not None and ds.label_bounds_source != "data":
        print(f"    {ds.label_name} (label): [{ds.label_bounds[0]:.10g}, {ds.label_bounds[1]:.10g}]  "
              f"{ds.label_bounds_source or ds.bounds_source}")
    if n_data or ds.label_bounds_source == "data":
        print("  no public bounds (the private data's range, shown for checking only: NOT a bound to "
              "pass to --bounds):")
        for first, last, count, (lo, hi), source in _bound_runs(ds):
            if source == "data":
                cols = first if count == 1 else f"{first} .. {last} ({count} columns)"
                print(f"    {cols}: data min {lo:.10g}, data max {hi:.10g}")
        if ds.label_bounds is not None and ds.label_bounds_source == "data":
            print(f"    {ds.label_name} (label): data min {ds.label_bounds[0]:.10g}, "
                  f"data max {ds.label_bounds[1]:.10g}")
        label = f" --label {esc(args.label)}" if args.label else ""
        print(f"  write the columns' public bounds from documentation: {PROG} bounds-template "
              f"{esc(target)}{label} -o bounds.json (empty values to fill in)")
    if groups:
        print("  categories (one-hot encoded columns):")
        for column, cats in groups.items():
            print(f"    {column}: {', '.join(cats)}")
    if ds.n_dropped:
        print(f"  rows dropped for missing/infinite values: {ds.n_dropped}")


def _cmd_bounds_template(args: argparse.Namespace) -> None:
    """``dpcore bounds-template INPUT -o bounds.json``: the table's columns (less the label and the
    categorical ones) with empty values; only the header is used, never a value."""
    from dpcore.bounds import template

    out = Path(args.output)
    suffix = out.suffix.lower()
    fmt = {".json": "json", ".csv": "csv"}.get(suffix)
    if fmt is None:
        raise CLIError(f"--output {out}: a bounds file ends in .json or .csv")
    if out.exists() or out.is_symlink():
        raise CLIError(f"--output {out} exists; choose a new file (a template never overwrites)")
    if not out.parent.is_dir():
        raise CLIError(f"the output folder {out.parent} does not exist; create it first")
    meta = bundled_datasets().get(args.input)
    frame = read_table(sample_data_dir() / meta["file"]) if meta else read_table(args.input)
    label = (meta or {}).get("label") if args.label is None else (args.label or None)
    skip = {label} | set(_load_categories(args.categories) or {})
    columns = [str(c) for c in frame.columns if c not in skip]
    out.write_text(template(columns, fmt), encoding="utf-8")
    print(f"wrote {out}: {len(columns)} column(s) with empty bounds; fill in each [lo, hi] from public "
          "documentation (a pattern such as \"f*\": [0, 640] covers many columns; null = none)")


def _plain(value: Any) -> Any:
    """A numpy scalar as the plain Python value (for printing and JSON)."""
    return value.item() if hasattr(value, "item") else value


def _bound_runs(ds: Dataset) -> list[tuple[str, str, int, tuple[float, float], str]]:
    """Runs of consecutive columns with equal bounds and source: (first, last, count, (lo, hi), source)."""
    runs: list[tuple[str, str, int, tuple[float, float], str]] = []
    for name, (lo, hi), source in zip(ds.feature_names, ds.bounds, ds.bounds_sources, strict=True):
        key = ((float(lo), float(hi)), source)
        if runs and (runs[-1][3], runs[-1][4]) == key:
            first, _, count, bounds, src = runs[-1]
            runs[-1] = (first, name, count + 1, bounds, src)
        else:
            runs.append((name, name, 1, *key))
    return runs


def _category_groups(columns: list[str]) -> dict[str, list[str]]:
    """One-hot groups ``column=value`` (two or more columns sharing ``column``): {column: values}."""
    groups: dict[str, list[str]] = {}
    for c in columns:
        if "=" in c:
            column, value = c.split("=", 1)
            groups.setdefault(column, []).append(value)
    return {c: v for c, v in groups.items() if len(v) >= 2}


def _same_file(a: Path, b: Path) -> bool:
    """True if ``a`` and ``b`` name the same file (after links), existing or not."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links
    except OSError:
        return False


def _check_output(args: argparse.Namespace, *, folder: bool = False) -> None:
    """Refuse, before any work, an output that cannot be written or would destroy another file.

    Each file the release writes (``release_paths``: CSV, card, transform; with ``folder``, the
    Dask engine's folder of parts) must not be the input file, the bounds or categories file, the
    ledger or its lock file (existing or not: a ledger is created by the release), a folder (the
    Dask engine's: a folder that is not empty) or an existing non-regular file (character device
    such as /dev/null, FIFO, socket).
    """
    output = args.output
    if not Path(output).name:
        raise CLIError(f"--output {output!r} names no file; give the path of the CSV to write")
    targets = {"folder": Path(output)} if folder else release_paths(output)
    protected: list[tuple[str, Path]] = [
        (what, Path(p)) for what, p in (("input file", args.input), ("bounds file", args.bounds),
                                         ("categories file", args.categories),
                                         ("classes file", getattr(args, "classes", None)),
                                         ("public data file", getattr(args, "public_data", None)))
        if p and Path(p).exists()]
    if args.ledger:
        protected += [("ledger", Path(args.ledger)), ("ledger's lock file", lock_path(args.ledger))]
    for role, target in targets.items():
        for what, p in protected:
            if _same_file(target, p):
                raise CLIError(f"--output {output} would overwrite the {what} {p} (with the release's "
                               f"{role}); choose another output path")
        if target.exists() and (lock_path(target).exists() or target.name.endswith(".lock")):
            raise CLIError(f"--output {output}: {target} is a lock file or a ledger (its lock file "
                           f"{lock_path(target).name} is beside it); choose another output path")
        if folder:
            if target.exists() and not (target.is_dir() and not any(target.iterdir())):
                raise CLIError(f"--output {output}: with --engine dask the output is a new (or empty) folder")
            continue
        if target.is_dir():
            hint = f", e.g. {target / 'release.csv'}" if role == "csv" else ""
            raise CLIError(f"--output {output}: {target} is a folder; give the path of the CSV to "
                           f"write{hint}")
        try:
            mode = os.stat(target).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            raise CLIError(f"--output {output}: {target} exists and is not a regular file (a device, "
                           "FIFO or socket); choose a path for a new or regular file")
    parent = Path(output).parent
    if not parent.is_dir():
        raise CLIError(f"the output folder {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise CLIError(f"the output folder {parent} is not writable")


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back while a release is committed and published, so that a ledger
    entry and the files it records come as a pair; a held signal arrives right after."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    done = False
    try:
        yield
        done = True
    finally:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        except KeyboardInterrupt as exc:
            if done:
                exc.add_note("the release had already been written and recorded")
            raise


def _opted_in_unbounded(args: argparse.Namespace) -> bool:
    """The flags by which a user asks for a release with no finite row-level epsilon:
    ``--data-bounds``, ``--data-classes``, ``--label-privacy within-class``."""
    return bool(getattr(args, "data_bounds", False) or getattr(args, "data_classes", False)
                or getattr(args, "label_privacy", "protected") == "within-class")


def _ledger_key(args: argparse.Namespace) -> str:
    """The dataset key of ``args.input`` in a ledger store (``""`` for a JSON ledger, which has one
    ledger per file): :func:`dpcore.ledger_store.dataset_key`."""
    return dataset_key(args.input) if args.ledger and is_store_path(args.ledger) else ""


def _precheck_ledger(args: argparse.Namespace) -> str:
    """Refuse a bad ``--ledger`` before any work; returns the input's dataset key (stores)."""
    if not args.ledger:
        if args.budget is not None or args.delta_budget is not None:
            raise CLIError("--budget and --delta-budget need --ledger FILE")
        return ""
    key = _ledger_key(args)
    precheck_ledger(args.ledger, key, budget=args.budget, delta_budget=args.delta_budget)
    return key


def _save_recorded(release: Release, output: str, ledger_file: str, dataset: str,
                   budget: float | None, delta_budget: float | None, *, key: str = "",
                   allow_unbounded: bool = False) -> tuple[dict[str, Path], Ledger]:
    """Check, write, record and publish ``release`` under the ledger's lock (reserve, write the
    temporaries, commit, rename into place); on any failure nothing new is left and the ledger is
    as before. ``key``: the dataset's key in a ledger store. ``allow_unbounded``: the user opted in
    to a release booked as epsilon = inf. Returns the files written and the ledger after the commit."""
    with open_ledger_transaction(ledger_file, key, label=dataset, budget=budget,
                                 delta_budget=delta_budget) as tx:
        tx.check(LedgerEntry.from_release(release, dataset), allow_unbounded=allow_unbounded)
        with release.stage(output) as staged:  # temporaries, removed on any failure
            # the ledger records the card exactly as written (same sha256 and time)
            card = json.loads(staged.temps["card"].read_text(encoding="utf-8"))
            with _signals_deferred():
                tx.commit(LedgerEntry.from_card(card, dataset))
                try:
                    written = staged.publish()
                except BaseException:
                    try:
                        tx.revert()  # not published: take the entry back (if that fails, it over-counts)
                    except OSError:
                        pass
                    raise
    return written, tx.ledger


# ---------------------------------------------------------------- large tables (dpcore.dask_engine)
def _add_engine_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--engine", choices=["memory", "dask"], default=None,
                       help="'dask': read INPUT (a Parquet/CSV file, a glob such as 'data/*.parquet', a "
                            "folder) partition by partition; OUTPUT is then a folder of parts + card.json. "
                            "Default: dask for a glob, a folder or a file whose table (rows x columns x 8 "
                            "bytes) is over a quarter of the memory limit")
    group.add_argument("--scheduler", metavar="ADDRESS", help="a running distributed scheduler "
                       "(tcp://host:8786); default: Dask's local threaded scheduler")
    group.add_argument("--blocksize", metavar="BYTES", help="decoded bytes per Parquet partition, bytes of "
                       "text per CSV partition (128MiB)")
    group.add_argument("--n", type=int, default=None, help="the public number of rows (checked against the "
                       "data; default: the Parquet footers, or the row count)")
    group.add_argument("--format", choices=["parquet", "csv"], default="parquet", help="format of the parts")
    group.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="--engine dask: progress bars on stderr (default: only when stderr is a "
                            "terminal, so that a log file gets no carriage-return lines)")


def _use_dask(args: argparse.Namespace) -> bool:
    from dpcore import dask_engine

    if args.engine is not None:
        return args.engine == "dask"
    source = args.input
    if any(ch in source for ch in "*?[") or os.path.isdir(source):
        return True
    return os.path.isfile(source) and source.lower().endswith((".parquet", ".pq", ".csv")) \
        and not dask_engine.fits_in_memory(source)


def _release_dask(args: argparse.Namespace, cls: type | None, params: dict[str, Any]) -> None:
    """``dpcore release ... --engine dask``: the table is read partition by partition."""
    from dpcore import dask_engine

    if args.dp_bounds is not None:
        raise CLIError("--dp-bounds is not available with --engine dask: estimate the bounds on the table in "
                       "memory, or write them in a --bounds file")
    decoding = [flag for flag, given in (("--output-space original", args.output_space == "original"),
                                          ("--no-clip", args.no_clip),
                                          ("--integer-columns", bool(args.integer_columns.strip())))
                if given]
    if decoding:
        raise CLIError(f"{', '.join(decoding)}: not available with --engine dask, whose parts are written in "
                       "the mechanism's released space (the card's output_space says so); release the "
                       "table in memory (--engine memory) for the original columns and units")
    _check_output(args, folder=True)  # before any work, as the in-memory engine's
    key = _precheck_ledger(args)  # a bad path or file is refused before any work
    # the bars are drawn on the process's stderr (dask_engine._progress): by default only on a terminal
    terminal = bool(sys.__stderr__ and sys.__stderr__.isatty())
    progress = args.progress if args.progress is not None else terminal
    with dask_engine.connect(args.scheduler):
        table = dask_engine.open_table(
            args.input, label=args.label, task=args.task, bounds=load_bounds_file(args.bounds) if args.bounds
            else None, label_bounds=args.label_bounds, classes=_load_classes(args.classes),
            categories=_load_categories(args.categories), n=args.n, blocksize=args.blocksize,
            missing=args.missing or "error")
        if table.head.bounds_source == "data" and not args.data_bounds:
            raise CLIError("no public bounds for some columns of the input: pass --bounds FILE, or "
                           "--data-bounds to accept bounds from the data (the guarantee then does NOT hold)")
        print(f"{table.n:,} rows in {table.n_partitions:,} partitions (n: {table.n_source})", file=sys.stderr)
        if cls is None:  # dpcore release auto: the rule sees the table's public facts
            head = table.head
            cls, params, _ = _auto_choice(args, head.task, table.n, head.n_features, head.classes,
                                          head.image_shape)
        if getattr(args, "public_data", None):  # public rows, in memory (small by nature)
            params = {**params, "public_data": _public_rows(args, table.head)}
        if not args.ledger:
            release, written = dask_engine.release_table(cls(**params), table, args.output, fmt=args.format,
                                                         n_samples=args.n_samples, progress=progress)
        else:  # the row guarantee checked, the folder written, recorded, then renamed into place
            release, _ = dask_engine.release_table(cls(**params), table, None, n_samples=args.n_samples,
                                                   progress=progress)
            dataset = Path(table.sources[0]).stem if len(table.sources) == 1 else args.input
            with open_ledger_transaction(args.ledger, key, label=dataset, budget=args.budget,
                                         delta_budget=args.delta_budget) as tx:
                tx.check(LedgerEntry.from_release(release, dataset),
                         allow_unbounded=_opted_in_unbounded(args))

                def record(card: dict[str, Any]) -> Any:
                    tx.commit(LedgerEntry.from_card(card, dataset))
                    return tx.revert

                written = dask_engine.write_release(release, args.output, fmt=args.format, progress=progress,
                                                    commit=record, part_rows=table.part_rows)
            print(f"ledger: {tx.ledger.summary()}")
    g = release.guarantee
    print(f"wrote {args.output}: {len(written) - 1 - ('transform' in written)} part(s), card.json")
    print(f"guarantee: {g.kind} epsilon = {g.epsilon:.6g}, delta = {g.delta:.3g}, "
          f"neighbouring = {g.neighbouring}")


def _public_rows(args: argparse.Namespace, ds: Any) -> Any:
    """The ``--public-data`` rows, loaded with the private input's feature columns and bounds
    (``ds``: the input's Dataset, or the first rows of a Dask table)."""
    frame = read_table(args.public_data)
    frame = frame.drop(columns=[c for c in (ds.label_name, args.label) if c and c in frame.columns])
    same = list(frame.columns) == ds.feature_names
    bounds = dict(zip(ds.feature_names, ds.bounds.tolist(), strict=True)) if same else None
    public = load_dataset(frame, label="", bounds=bounds, categories=_load_categories(args.categories))
    if public.feature_names != ds.feature_names:
        raise CLIError(f"--public-data {args.public_data} must have the input's feature columns "
                       f"{ds.feature_names[:5]}{' ...' if ds.n_features > 5 else ''}")
    return public


def _require_public_facts(args: argparse.Namespace, ds: Dataset) -> None:
    """Refuse bounds or a class list taken from the data unless --data-bounds / --data-classes."""
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


def _auto_choice(args: argparse.Namespace, task: str, n: int, d: int, classes: Any,
                 image_shape: Any) -> tuple[type, dict[str, Any], dict[str, Any]]:
    """``dpcore release auto``: the mechanism class, its parameters and the rule's record, from the
    table's public facts (:func:`dpcore.calibration.recommended_mechanism`); printed on stderr."""
    from dpcore.calibration import recommended_mechanism

    epsilon, delta = getattr(args, "epsilon", EPSILON.default), getattr(args, "delta", None)
    rec = recommended_mechanism(task, n, d, epsilon=epsilon, delta=delta,
                                n_classes=0 if classes is None else len(classes), image_shape=image_shape)
    cls = get_mechanism(rec["mechanism"])
    params = {**rec["parameters"], "epsilon": epsilon}
    if delta is not None and any(p.name == "delta" for p in cls.params):
        params["delta"] = delta
    shown = ", ".join(f"{k} = {v}" for k, v in params.items())
    print(f"{PROG}: auto: {rec['mechanism']} ({shown}): {rec['reason']}", file=sys.stderr)
    return cls, params, {"rule": "dpcore.calibration.recommended_mechanism (public facts only)",
                         "mechanism": rec["mechanism"], "parameters": params, "reason": rec["reason"]}


def _cmd_release(args: argparse.Namespace, *, dask: bool) -> None:
    """``dpcore release``; ``dask``: the table goes to the Dask engine (:func:`_use_dask`)."""
    auto = args.mechanism == AUTO
    cls = None if auto else get_mechanism(args.mechanism)
    params = {p.name: getattr(args, p.name) for p in (AUTO_PARAMS if auto else cls.params)
              if hasattr(args, p.name)}
    if "epsilon" in params and math.isinf(params["epsilon"]):
        raise CLIError("epsilon = inf is NOT PRIVATE: the CLI refuses it (use the app's explore mode)")
    if args.missing == "drop" or args.drop_nonfinite:
        raise CLIError("--missing drop is refused: n (and the released row count) would depend on the "
                       "data, so no guarantee would hold; use --missing impute (the midpoint of each "
                       "column's public bounds) or remove those rows from the file first (its row count "
                       "is then public)")
    if dask:
        return _release_dask(args, cls, params)
    key = _precheck_ledger(args)  # a bad path or file is refused before any work
    n_released = None if args.n_samples is None else _check_n_samples(args.n_samples)
    # auto: the mechanism is chosen from the table's facts after reading; before, each candidate of
    # the rule (PCA-Gauss with labels, RON-Gauss without) at its defaults must fit
    for candidate in ([get_mechanism(m) for m in ("pca-gauss", "ron-gauss")] if auto else [cls]):
        given = candidate(**params)  # the parameters as given (--dp-bounds takes its share of epsilon below)
        values = validate_params(candidate.params, {p.name: getattr(given, p.name) for p in candidate.params})
        _check_input_memory(args, args.input, lambda n, d, k, c=candidate, v=values: c.check_peak_memory(
            n, d, k, v, n_released=n_released))
    with warnings.catch_warnings():
        if args.dp_bounds is not None:  # the data's range is replaced by DP estimates before any use
            warnings.filterwarnings("ignore", message=".*[Bb]ounds.*", category=PrivacyLeakWarning)
        ds = _load_input(args, args.input)
    if args.n is not None and args.n != ds.n_samples:  # as open_table(n=...) on the Dask engine
        raise CLIError(f"--n {args.n:,} was given but the input holds {ds.n_samples:,} rows; a mismatch is "
                       "refused, never a silent change of n")
    chosen = None
    if auto:  # the rule sees the table's public facts (its shape, task, classes, image shape)
        cls, params, chosen = _auto_choice(args, ds.task, ds.n_samples, ds.n_features, ds.classes,
                                           ds.image_shape)
    assert cls is not None
    estimate = None
    if args.dp_bounds is not None:
        ds, estimate = _estimate_dp_bounds(args, cls, params, ds)
    _require_public_facts(args, ds)
    if getattr(args, "public_data", None):
        params["public_data"] = _public_rows(args, ds)
    if args.output_space == "released" and any(p.name == "marginals" for p in cls.params):
        params["marginals"] = "off"  # no file in the original columns: no budget for their marginals
    mech = cls(**params)
    release = mech.release(ds, n_samples=args.n_samples)
    if estimate is not None:  # the bounds' epsilon composed into the card's guarantee
        release = compose_release(release, estimate)
    if chosen is not None:
        release = dataclasses.replace(release, details={**release.details, "chosen_by": chosen})
    release.check_downloadable()
    for note in release.details.get("warnings", []):  # noise-to-range, label rates: on stderr
        warnings.warn(note, ReleaseNotice, stacklevel=1)
    ints = [c.strip() for c in args.integer_columns.split(",") if c.strip()]
    release = with_output_space(release, PublicSchema.from_dataset(ds, ints), args.output_space,
                                clip=not args.no_clip)
    ledger = None
    if args.ledger:
        written, ledger = _save_recorded(release, args.output, args.ledger, ds.name, args.budget,
                                         args.delta_budget, key=key,
                                         allow_unbounded=_opted_in_unbounded(args))
    else:
        written = release.save(args.output)  # all files or none
    g = release.guarantee
    print(f"wrote {', '.join(str(p) for p in written.values())}")
    print(f"guarantee: {g.kind} epsilon = {g.epsilon:.6g}, delta = {g.delta:.3g}, "
          f"neighbouring = {g.neighbouring}" + (f", beta = {g.beta:.3g}" if g.beta else "")
          + ("" if g.holds else "  (does NOT hold: a public fact was taken from the data; the release "
                               "is NOT differentially private)"))
    print(f"output: {release.output_note}")
    if ledger is not None:
        print(f"ledger: {ledger.summary()}")


def _estimate_dp_bounds(args: argparse.Namespace, cls: type, params: dict[str, Any], ds: Dataset
                        ) -> tuple[Dataset, Any]:
    """``--dp-bounds EPS``: DP estimates of the bound sides that have no public value
    (:mod:`dpcore.dp_bounds`); ``params["epsilon"]`` becomes the rest of the total (``--epsilon``)."""
    from dpcore.dp_bounds import apply_estimate, estimate_bounds

    total = params.get("epsilon", next((p.default for p in cls.params if p.name == "epsilon"), None))
    if total is None:
        raise CLIError(f"--dp-bounds: {cls.name} has no --epsilon to take the bounds' share from")
    if args.dp_bounds >= total:
        raise CLIError(f"--dp-bounds {args.dp_bounds:g} must be less than --epsilon {total:g} (the total: "
                       "the release gets what remains)")
    estimate = estimate_bounds(ds, args.dp_bounds, candidate_range=args.dp_bounds_range)
    params["epsilon"] = total - args.dp_bounds
    print(f"dp bounds: epsilon {args.dp_bounds:g} for {estimate.n_sides} bound side(s) of "
          f"{len(estimate.bounds) + (estimate.label_bounds is not None)} column(s) "
          f"({estimate.epsilon_per_side:.4g} each, quantiles {estimate.quantiles[0]:.3g} and "
          f"{estimate.quantiles[1]:.3g}); the {cls.name} release gets epsilon "
          f"{total - args.dp_bounds:g}; total {total:g}")
    return apply_estimate(ds, estimate), estimate


def _print_plan(plan: Any) -> None:
    g = plan.guarantee
    print(f"guarantee: {g.kind} epsilon = {g.epsilon:.6g}, delta = {g.delta:.3g}, "
          f"neighbouring = {g.neighbouring}")
    print(f"{'#':>3}  {'distribution':19s} {'norm':4s} {'sensitivity':>12s} {'scale':>12s}  statistic")
    for i, r in enumerate(plan.noise, 1):
        mark = "*" if r.statistic in plan.varies else " "
        print(f"{i:>3}  {r.distribution:19s} {r.norm[:4]:4s} {r.sensitivity:12.6g} {r.scale:12.6g}{mark} "
              f"{r.statistic}")
    if plan.varies:
        print("  * depends on the public random matrix drawn with each release (one draw shown)")


def _cmd_plan(args: argparse.Namespace) -> None:
    """``dpcore calibrate|epsilon MECH`` for every mechanism but DPMix (:mod:`dpcore.planning`)."""
    from dpcore import planning

    cls = get_mechanism(args.mechanism)
    params = {p.name: getattr(args, p.name) for p in cls.params if hasattr(args, p.name)}
    facts: dict[str, Any]
    if args.input:
        values = validate_params(cls.params, {p.name: getattr(cls(**params), p.name) for p in cls.params})
        # the plan releases a placeholder of the input's shape (dpcore.planning)
        _check_input_memory(args, args.input, lambda n, d, k: cls.check_peak_memory(n, d, k, values))
        ds = _load_input(args, args.input)
        _require_public_facts(args, ds)
        facts = {"like": ds}
        if getattr(args, "public_data", None):
            params["public_data"] = _public_rows(args, ds)
    elif args.n is None or args.features is None:
        raise CLIError("give INPUT (a data file or bundled dataset) or both --n and --features")
    else:
        facts = dict(n=args.n, n_features=args.features, task=args.task or "unsupervised",
                     n_classes=args.n_classes)
    try:
        if args.command == "calibrate":
            _print_plan(planning.noise_plan(args.mechanism, params, **facts))
            return
        names = [r.statistic for r in planning.noise_plan(args.mechanism, params, **facts).noise]
        stat = args.statistic
        if stat.isdigit():
            if not 1 <= int(stat) <= len(names):
                raise CLIError(f"--statistic {stat}: this plan has statistics 1 to {len(names)}")
            stat = names[int(stat) - 1]
        eps, plan = planning.epsilon_for_scale(args.mechanism, params, stat, args.scale, **facts)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    print(f"epsilon = {eps:.6g}  ({stat!r} gets scale {args.scale:g})")
    _print_plan(plan)


def _cmd_accounting(args: argparse.Namespace) -> None:
    from dpcore import accounting

    if args.mechanism != "dpmix":
        return _cmd_plan(args)
    common = dict(ell=args.ell, n=args.n, n_mixtures=args.n_mixtures, d_x=args.d_x, d_y=args.d_y,
                  delta=args.delta, bound=args.bound)
    if args.command == "epsilon":
        res = accounting.dpmix_epsilon(sigma_x=args.sigma_x, sigma_y=args.sigma_y, **common)
        print(f"epsilon = {float(res.epsilon):.6g}  (alpha* = {int(res.alpha)}, delta = {args.delta:g}, "
              f"bound = {args.bound})")
    else:
        sigma = accounting.dpmix_calibrate_sigma(epsilon=args.epsilon, sigma_ratio=args.sigma_ratio, **common)
        sigma_y = sigma * args.sigma_ratio
        print(f"sigma_x = {sigma:.6g}  sigma_y = {sigma_y:.6g}  (epsilon = {args.epsilon:g}, "
              f"delta = {args.delta:g}, bound = {args.bound})")


#: Library-internal notices that say nothing about the user's data or parameters.
_QUIET_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)


def _message(exc: BaseException | str) -> str:
    """A user-facing error or warning as one line: every line break and control character of
    the message (which may quote column or file names) escaped by :func:`escape_controls`.
    Arithmetic overflows and JSON nested past Python's recursion limit get a sentence around
    their bare text (``(34, 'Numerical result out of range')``)."""
    if isinstance(exc, ArithmeticError | RecursionError):
        what = "nested too deeply" if isinstance(exc, RecursionError) else \
            "out of the range that can be computed"
        exc = f"an input or parameter is {what} ({exc.args[-1] if exc.args else type(exc).__name__})"
    text = str(exc).strip()
    return escape_controls(text) if text else type(exc).__name__


def _one_line(exc: BaseException | str) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


#: Library wording (Python keyword syntax) and the command-line flags that say the same.
_LIBRARY_TO_CLI = (
    (re.compile(r"\(categories=\{column: \[\.\.\.\]\}, or the app's category editor\)"),
     '(--categories FILE, a JSON file {"column": ["cat1", "cat2", ...]})'),
    (re.compile(r"drop_nonfinite=True / 'Drop rows with missing values' in the app"), "--drop-nonfinite"),
    (re.compile(r"\b\w+='[\w-]+' / (--[\w-]+(?: [\w-]+)?)"), r"\1"),  # "missing='drop' / --missing drop"
    (re.compile(r"random_state=None"), "no seed (the CLI never takes one)"),
)
#: Keyword names that have a flag: every schema parameter plus the data options.
_FLAG_NAMES = sorted({p.name for cls in MECHANISMS.values() for p in cls.params}
                     | {"n_samples", "label_bounds"}, key=len, reverse=True)
_NAME_AS_WORD = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, _FLAG_NAMES))
                           + r")(?=(=| must| is required| needs| and | <| >| \())")


def cli_wording(message: str) -> str:
    """A library message in command-line terms: ``categories={...}`` -> ``--categories FILE``,
    ``n_components must ...`` -> ``--n-components must ...``."""
    for pattern, replacement in _LIBRARY_TO_CLI:
        message = pattern.sub(replacement, message)
    return _NAME_AS_WORD.sub(lambda m: "--" + m.group(1).replace("_", "-"), message)


def _run(args: argparse.Namespace) -> None:
    if args.command == "datasets":
        _cmd_datasets()
    elif args.command == "describe":
        _cmd_describe(args)
    elif args.command == "ledger":
        run_ledger_command(args)
    elif args.command == "bounds-template":
        _cmd_bounds_template(args)
    elif args.command == "release":
        if _use_dask(args):  # writes a folder of parts through a temporary folder (dpcore.dask_engine)
            _cmd_release(args, dask=True)
            return
        _check_output(args)
        with output_lock(args.output):  # refuses, before any work, an output another run is writing
            _cmd_release(args, dask=False)
    else:
        _cmd_accounting(args)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: raised so that every ``except BaseException`` cleanup runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _on_signal(signum: int, frame: object) -> None:
    for s in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut the cleanup short
        signal.signal(s, signal.SIG_IGN)
    raise Interrupted(signum)


@contextmanager
def _interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`Interrupted` (main thread only; handlers restored after)."""
    try:
        old = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: leave the handlers alone
        old = {}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dpcore`` console script; returns the exit status.

    0 on success (warnings, if any, follow as ``dpcore: warning: ...`` lines on stderr); 2 with
    exactly one ``dpcore: error: ...`` line on stderr for bad input or parameters (also for a
    ``MemoryError`` the memory estimates did not foresee: the work is too large); 1 with one
    line for an unexpected internal error; 128 + the signal number (130 for Ctrl-C, 143 for
    SIGTERM) with one line when interrupted, the files of the unfinished release removed.
    """
    with contextlib.redirect_stdout(_EscapingStream(sys.stdout)), \
            contextlib.redirect_stderr(_EscapingStream(sys.stderr)):
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    with warnings.catch_warnings(record=True) as caught, _interruptible():
        warnings.simplefilter("always")
        try:
            with blas_limit():  # every release's linear algebra at dpcore's thread rule
                _run(parser.parse_args(argv))
        except KeyboardInterrupt as exc:
            signum = getattr(exc, "signum", signal.SIGINT)
            status = (getattr(exc, "__notes__", None) or ["nothing was written"])[0]
            print(f"{PROG}: interrupted by {signal.Signals(signum).name}; {status}", file=sys.stderr)
            return 128 + signum
        except (CLIError, NotPrivateError, ValueError, OSError, KeyError, ArithmeticError,
                RecursionError) as exc:
            print(f"{PROG}: error: {cli_wording(_message(exc))}", file=sys.stderr)
            return 2
        except MemoryError as exc:  # an estimate missed it (Arrow's ArrowMemoryError is one too)
            if os.environ.get("DPCORE_DEBUG"):
                raise
            print(f"{PROG}: error: out of memory ({_one_line(exc) if str(exc) else 'MemoryError'}), although "
                  "the memory estimates let this run start: use fewer rows or columns, or lower "
                  "DPCORE_MAX_MEMORY to what this machine has (and report the case)", file=sys.stderr)
            return 2
        except Exception as exc:
            if os.environ.get("DPCORE_DEBUG"):
                raise
            print(f"{PROG}: internal error ({type(exc).__name__}): {_one_line(exc)} "
                  "(DPCORE_DEBUG=1 shows the traceback)", file=sys.stderr)
            return 1
    seen: set[str] = set()
    for w in caught:
        msg = _message(str(w.message))
        if msg not in seen and not issubclass(w.category, _QUIET_WARNINGS):
            seen.add(msg)
            print(f"{PROG}: warning: {msg}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
