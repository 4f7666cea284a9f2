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
import os
import re
import signal
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dpcore._interrupt  # noqa: F401 - first: Ctrl-C during the imports below ends with one line
from dpcore.cli_data import (
    _check_input_memory,
    _cmd_bounds_template,
    _cmd_datasets,
    _cmd_describe,
    _load_input,
)
from dpcore.cli_parser import PROG, CLIError, _EscapingStream, build_parser, escape_controls
from dpcore.cli_release import _check_output, _cmd_release, _public_rows, _require_public_facts, _use_dask
from dpcore.exceptions import NotPrivateError
from dpcore.ledger_cli import run_ledger_command
from dpcore.mechanisms import MECHANISMS, get_mechanism
from dpcore.release import output_lock
from dpcore.schema import validate_params
from dpcore.threads import blas_limit

__all__ = [
    "CLIError",
    "Interrupted",
    "PROG",
    "build_parser",
    "cli_wording",
    "escape_controls",
    "main",
]


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
