"""The ``dpcore`` commands about data: ``datasets``, ``describe`` (a mechanism, or a data file's
shape, task and public facts), ``bounds-template``, and the input loading the release commands share
(categories, class lists, the memory a reading needs, checked before it).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dpcore.cli_parser import PROG, CLIError, escape_controls
from dpcore.data import (
    Dataset,
    bundled_datasets,
    load_bounds_file,
    load_dataset,
    read_regular_file,
    read_table,
    sample_data_dir,
)
from dpcore.exceptions import DataValidationError
from dpcore.io import check_load_memory, table_shape
from dpcore.limits import check_memory, max_input_bytes
from dpcore.mechanisms import MECHANISMS, get_mechanism
from dpcore.validation import parse_value_list


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
