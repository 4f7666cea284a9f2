"""``dpcore release``: the output checked before any work, the release drawn in memory or on the
Dask engine, DP bounds composed with it, the ledger's budget checked and recorded, the files written
all or none (signals deferred while they are renamed into place).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import signal
import stat
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dpcore.cli_data import _check_input_memory, _load_categories, _load_classes, _load_input
from dpcore.cli_parser import AUTO, AUTO_PARAMS, PROG, CLIError, ReleaseNotice
from dpcore.data import (
    Dataset,
    load_bounds_file,
    load_dataset,
    read_table,
)
from dpcore.decode import PublicSchema, with_output_space
from dpcore.dp_bounds import compose_release
from dpcore.exceptions import PrivacyLeakWarning
from dpcore.ledger import Ledger, LedgerEntry, lock_path
from dpcore.ledger_store import dataset_key, is_store_path, open_ledger_transaction, precheck_ledger
from dpcore.mechanisms import get_mechanism
from dpcore.mechanisms.base import _check_n_samples
from dpcore.release import Release, release_paths
from dpcore.schema import EPSILON, validate_params


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
