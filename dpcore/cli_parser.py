"""The ``dpcore`` command line's parser (every mechanism's options from its schema, the data and
engine options, the plan commands) and the stream everything the CLI prints goes through (control
characters escaped: :func:`escape_controls`). :mod:`dpcore.cli` runs the commands.
"""

from __future__ import annotations

import argparse
from typing import Any

from dpcore.decode import OUTPUT_SPACES
from dpcore.ledger_cli import add_ledger_parser, budget_type
from dpcore.mechanisms import MECHANISMS
from dpcore.schema import EPSILON, Param
from dpcore.validation import MISSING_POLICIES, TASKS

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
