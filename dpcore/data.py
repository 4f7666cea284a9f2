"""Data layer: a :class:`Dataset` (a table with its public facts) and :func:`load_dataset`.

``load_dataset`` reads a bundled dataset, a file or a DataFrame (readers in :mod:`dpcore.io`) in
named stages: read, resolve the label and task, encode categorical columns, handle missing values,
resolve the label's public facts (class list or bounds), resolve the feature bounds, build the
frozen :class:`Dataset`. Validation errors are specific (which column, which rows, what to do) and
raised as :class:`~dpcore.exceptions.DataValidationError` (a ``ValueError``). Public bounds come
from the bundled metadata or from the user; bounds computed from the data raise a
:class:`~dpcore.exceptions.PrivacyLeakWarning` and set ``bounds_source = "data"`` (per column in
``Dataset.column_bounds_source``). The readers (``read_table``, ``load_bounds_file``, ...) are
re-exported here from :mod:`dpcore.io`, their home.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpcore import limits
from dpcore.bounds import resolve_bound_rules
from dpcore.dataset import Dataset, ImputedCells, fill_imputed  # re-exported (old home)
from dpcore.exceptions import DataValidationError
from dpcore.io import (  # re-exported: their old home was this module
    NPZ_LABEL,
    SUFFIXES,
    bundled_datasets,
    check_column_names,
    load_bounds_file,
    parse_bounds,
    read_regular_file,
    read_table,
    refuse_complex_columns,
    sample_data_dir,
)
from dpcore.validation import (  # bound_pair and MAX_ABS_BOUND: re-exported (old home)
    MAX_ABS_BOUND,
    bound_pair,
    check_bound_magnitude,
    check_column_keys,
    check_missing,
    check_task,
    check_value_list,
    class_list,
    normalize_bounds,
    warn_data_bounds,
    warn_data_classes,
)

__all__ = [
    "MAX_ABS_BOUND",
    "NPZ_LABEL",
    "SUFFIXES",
    "Dataset",
    "bound_pair",
    "bundled_datasets",
    "load_bounds_file",
    "load_dataset",
    "parse_bounds",
    "read_regular_file",
    "read_table",
    "sample_data_dir",
]


def _resolve_bounds(
    cols: list[str], X: np.ndarray, bounds: Any, meta_bounds: dict[str, Any] | None,
    onehot: set[str] | None = None,
) -> tuple[np.ndarray, str, tuple[str, ...]]:
    """Stage 6 of :func:`load_dataset`: per-column bounds of the features ``X`` (columns ``cols``):
    the user's, else the metadata's, else [0, 1] for one-hot columns (public by construction),
    else from the data (PrivacyLeakWarning, source "data").

    Returns the bounds, the overall source and the source of each column.
    """
    d = len(cols)
    if bounds is not None and not isinstance(bounds, dict):
        try:
            arr = normalize_bounds(bounds, d)
        except ValueError as exc:
            raise DataValidationError(str(exc)) from None
        check_bound_magnitude(arr, cols)
        return arr, "user", ("user",) * d
    rules = dict(bounds or {})
    check_column_keys(rules, "bounds")
    user = resolve_bound_rules(rules, cols)  # patterns ("f*"), nulls, unknown names
    given: dict[str, Any] = {c: (0.0, 1.0) for c in (onehot or set())}
    given.update(meta_bounds or {})
    given.update(user)
    source = "user" if user else "metadata"
    out = np.empty((d, 2))
    per_col = [source] * d
    missing = []
    for j, c in enumerate(cols):
        if c in given:
            out[j] = bound_pair(c, given[c], "bounds", strict=c in user)
            per_col[j] = "user" if c in user else ("metadata" if c in (meta_bounds or {}) else source)
        else:
            missing.append(j)
    if missing:
        warn_data_bounds([cols[j] for j in missing], stacklevel=3)
        # NaN left out; an all-NaN column (missing="impute") or no rows (a part of a table) gives
        # NaN bounds. fmin/fmax over every column (no copy of the columns), not nanmin (whose
        # all-NaN warning would need catch_warnings, which is not thread-safe: the Dask engine loads
        # partitions on worker threads)
        out[missing, 0] = np.fmin.reduce(X, axis=0)[missing] if len(X) else np.nan
        out[missing, 1] = np.fmax.reduce(X, axis=0)[missing] if len(X) else np.nan
        for j in missing:
            per_col[j] = "data"
        source = "data"
    check_bound_magnitude(out, cols)
    return out, source, tuple(per_col)


# ---------------------------------------------------------------------------------------- loading
def load_dataset(
    source: str | Path | bytes | pd.DataFrame,
    *,
    filename: str | None = None,
    label: str | None = None,
    task: str | None = None,
    bounds: Any = None,
    label_bounds: tuple[float, float] | None = None,
    categories: dict[str, list[Any]] | None = None,
    classes: Any = None,
    missing: str = "error",
    drop_nonfinite: bool = False,
    part_of_table: bool = False,
) -> Dataset:
    """Load a bundled dataset (by name), a file (path or bytes + ``filename``) or a DataFrame.

    Everything that shapes a release besides the noisy values (the task, the class list, ``n``,
    the bounds) must be a public fact: it comes from the bundled metadata or from the caller,
    never silently from the private rows (issue 12). Where the caller leaves a fact to the data
    (bounds, class list), a :class:`~dpcore.exceptions.PrivacyLeakWarning` is raised and the
    dataset records the source ``"data"``, which makes every release's card say ``holds: false``.

    Parameters
    ----------
    source : str, Path, bytes or DataFrame
        A bundled name (``digits``, ``breast-cancer``, ``diabetes``, ``mnist-10k``, ``adult``),
        a path to ``.csv``/``.parquet``/``.npz``, raw bytes (give ``filename`` for the format),
        or a DataFrame.
    label : str, optional
        Label column (bundled datasets default to their own; ``""`` means none).
    task : {"unsupervised", "classification", "regression"}, optional
        Required with a label, except for a bundled dataset's own label (its metadata's task).
        It is never guessed from the labels: the guess would depend on the private values (a
        51st distinct value would flip it), so one record could change the release's format.
    bounds : dict {column: (lo, hi)}, (lo, hi) or array (n_features, 2), optional
        Public feature bounds. A dict's keys may be glob patterns (``"f*"``) and its values
        ``None`` (no public bound): :func:`dpcore.bounds.resolve_bound_rules`. Columns without
        one get data bounds plus a PrivacyLeakWarning.
    label_bounds : (lo, hi), optional
        Public bounds of a regression label.
    categories : dict {column: list of categories}, optional
        Public category lists: those non-numeric columns are one-hot encoded (``col=value``).
    classes : sequence, optional
        Public class list of a classification label (default: the bundled metadata's). Without
        one the list is read from the data with a PrivacyLeakWarning (``classes_source="data"``).
    missing : {"error", "impute", "drop"}, default "error"
        Rows with NaN/inf features: ``"error"`` refuses them; ``"impute"`` replaces each missing
        or infinite feature value by the midpoint of the column's public bounds, so ``n`` stays
        the public row count (missing labels are still an error); ``"drop"`` removes those rows:
        ``n`` then depends on the data (one changed row changes it), so every release's card says
        ``holds: false`` (NOT differentially private; the CLI and the app refuse it: clean the
        file first, whose row count is then public).
    drop_nonfinite : bool
        Old spelling of ``missing="drop"``.
    part_of_table : bool, default False
        ``source`` is one part of a larger table (a partition read by :mod:`dpcore.dask_engine`):
        every check of a row runs, but not the two that concern the whole table (at least two
        rows; at least two classes present), so a part may hold one row, or the rows of one class
        (a table sorted by its label). The caller checks the whole table's row count.

    Raises
    ------
    DataValidationError
        Missing label column, no task for a label, non-numeric columns without categories,
        NaN/inf under ``missing="error"`` (with counts per column), a missing label, fewer than
        two rows or a classification label with one class (unless ``part_of_table``), labels
        outside ``classes``,
        bad bounds.
    """
    if drop_nonfinite:
        missing = "drop"
    check_missing(missing, DataValidationError)
    categories = category_lists(categories)  # public lists checked before anything is read
    class_kind = None if classes is None else _class_kind(classes, label)
    # CSV columns read as text: those with a category list, and a classification label unless its
    # public class list is numeric (codes such as 01 and 1 stay two texts, not the number 1)
    text_label = bool(label) and task == "classification" and class_kind != "number"
    text = set(categories) | ({label} if text_label else set())
    frame, meta, name = _read_source(source, filename, text)  # 1. read
    label = _resolve_label(frame, label, meta)  # 2. label and task
    task = _resolve_table_task(task, label, meta)
    # where the label sits among the file's columns (public schema): the released file keeps it there
    label_position = list(frame.columns).index(label) if label is not None else None
    y_series = frame.pop(label) if label is not None else None
    index = frame.index  # the rows' numbers (in their file, for a part of a file), for messages
    names, X = _encode_features(frame, categories)  # 3. categorical columns
    del frame
    X, y_series, n_dropped = _handle_missing(X, names, index, y_series, label, missing)  # 4. missing values
    least = 0 if part_of_table else 2  # rows, and classes present
    _check_shape(X, least)
    labels = _resolve_labels(y_series, task, label, classes, label_bounds, meta, least)  # 5. label facts
    b, bsource, per_col = _resolve_bounds(  # 6. feature bounds
        names, X, bounds, meta.get("bounds") if bounds is None or isinstance(bounds, dict) else None,
        {c for c in names if "=" in c and c.split("=", 1)[0] in categories})
    imputed = None
    if missing == "impute":
        X, imputed = _impute_midpoints(X, b)
    return Dataset(  # 7. build
        X=X, y=labels.y, feature_names=names, label_name=label, task=task,
        bounds=b, bounds_source="data" if labels.bounds_source == "data" else bsource,
        label_bounds=labels.bounds, classes=labels.classes,
        image_shape=tuple(meta["image_shape"]) if meta.get("image_shape") else None, name=name,
        description=meta.get("description", ""), meta=meta, n_dropped=n_dropped,
        label_bounds_source=labels.bounds_source, column_bounds_source=per_col,
        classes_source=labels.classes_source, missing=missing, categories=categories or None,
        onehot_groups=_onehot_groups(names, categories, meta), imputed=imputed,
        label_position=label_position,
    )


def _class_kind(classes: Any, label: str | None) -> str:
    """``"number"`` or ``"text"``: the kind of a public class list (checked, its size first)."""
    if hasattr(classes, "__len__"):
        limits.check_n_classes(len(classes), label)
    return check_value_list(classes, "the class list" if label is None else f"the class list of {label!r}",
                            least=2)[1]


def category_lists(categories: Any) -> dict[str, list[Any]]:
    """Public category lists ``{column: [values]}`` checked before any cell is read: column names
    are texts, each list holds at most :func:`dpcore.limits.max_categories` distinct values (no
    missing, nested or repeated value, ``1`` and ``"1"`` being one category: they are compared with
    the cells as text).

    Raises
    ------
    DataValidationError
        Naming the column and the value (:class:`~dpcore.limits.ResourceLimitError` over the cap).
    """
    if categories is None:
        return {}
    if not isinstance(categories, dict):
        raise DataValidationError("categories must map each column to its list of public categories, "
                                  f"got a {type(categories).__name__}")
    check_column_keys(categories, "categories")
    out = {}
    for column, values in categories.items():
        if hasattr(values, "__len__") and not isinstance(values, (str, bytes)):
            limits.check_n_categories(len(values), column)
        out[column] = check_value_list(values, f"the category list of column {column!r}", as_text=True)[0]
    return out


def _check_shape(X: np.ndarray, min_rows: int) -> None:
    """End of stage 4 of :func:`load_dataset`: at least ``min_rows`` rows (2 for a table, 0 for a
    part of one) and one feature column."""
    if X.shape[0] < min_rows:
        raise DataValidationError(
            f"the table has {X.shape[0]} usable row(s); differentially private release needs "
            "at least 2 (and, to be useful, many more)"
        )
    if X.shape[1] == 0:
        raise DataValidationError("the table has no feature columns besides the label")


@dataclass(frozen=True)
class _Labels:
    """Stage 5 of :func:`load_dataset`: the label values and their public facts."""

    y: np.ndarray | None = None
    classes: np.ndarray | None = None
    classes_source: str | None = None
    bounds: tuple[float, float] | None = None
    bounds_source: str | None = None


def _resolve_labels(
    y_series: pd.Series | None, task: str, label: str | None, classes: Any,
    label_bounds: tuple[float, float] | None, meta: dict[str, Any], min_classes: int,
) -> _Labels:
    """The labels and what is public about them: the class list (classification, from
    :func:`_resolve_classes`) or the label bounds (regression: the caller's, else the bundled
    metadata's, else the data's range with a PrivacyLeakWarning, ``bounds_source="data"``).
    ``min_classes``: classes that must be present (2 for a table, 0 for a part of one)."""
    if y_series is None:
        if task != "unsupervised":
            raise DataValidationError(f"task {task!r} needs a label column")
        return _Labels()
    y = y_series.to_numpy()
    if task == "classification":
        meta_classes = meta.get("classes") if label == meta.get("label") else None
        y, cls, cls_source = _resolve_classes(y, label, classes, meta_classes, min_classes,
                                              rows=np.asarray(y_series.index))
        return _Labels(y=y, classes=cls, classes_source=cls_source)
    if task != "regression":
        return _Labels(y=y)
    try:
        y = y.astype(float)
    except (TypeError, ValueError):
        text = pd.to_numeric(y_series, errors="coerce").isna().to_numpy()
        rows = np.asarray(y_series.index)[text][:5].tolist()
        raise DataValidationError(
            f"label {label!r} is not numeric; a regression label must be a number (e.g. "
            f"{[str(v)[:40] for v in y[text][:3]]}; first rows: {rows})"
        ) from None
    lb = label_bounds or (tuple(meta["label_bounds"]) if meta.get("label_bounds") else None)
    source = "user"
    if lb is None:
        warn_data_bounds(f"the regression label {label!r}", stacklevel=3)
        lb, source = (float(np.min(y)), float(np.max(y))) if y.size else (np.nan, np.nan), "data"
    else:
        lb = (float(lb[0]), float(lb[1]))
        if not (np.isfinite(lb[0]) and np.isfinite(lb[1])) or lb[0] > lb[1]:
            raise DataValidationError(
                f"label bounds must be finite with lo <= hi, got [{lb[0]:g}, {lb[1]:g}]"
            )
        if lb[0] == lb[1]:  # public bounds: as feature bounds, lo < hi (zero noise otherwise)
            raise DataValidationError(
                f"label bounds must have lo < hi, got [{lb[0]:g}, {lb[1]:g}]: equal bounds leave the label "
                "no range, so its noise would be zero and nothing could be released; give the label's "
                "public range")
    check_bound_magnitude(np.asarray([lb], dtype=float), [f"{label} (label)"])
    return _Labels(y=y, bounds=lb, bounds_source=source)


def _onehot_groups(columns: list[str], categories: dict[str, list[Any]], meta: dict[str, Any]
                   ) -> dict[str, list[str]]:
    """The public one-hot groups: from the categories encoded here (``col=value``), then the
    bundled metadata's ``onehot_groups``; only columns of the table are kept."""
    present = set(columns)
    groups = {str(a): [c for c in cols if c in present]
              for a, cols in (meta.get("onehot_groups") or {}).items()}
    for attr, cats in categories.items():
        groups[str(attr)] = [f"{attr}={v}" for v in cats if f"{attr}={v}" in present]
    return {a: cols for a, cols in groups.items() if cols}


def _read_source(
    source: str | Path | bytes | pd.DataFrame, filename: str | None, text_columns: Any = ()
) -> tuple[pd.DataFrame, dict[str, Any], str]:
    """Stage 1 of :func:`load_dataset`: the raw table, the bundled metadata (or ``{}``) and a name
    (``text_columns``: CSV columns read as text, :func:`dpcore.io.read_table`)."""
    meta: dict[str, Any] = {}
    name = "uploaded"
    if isinstance(source, pd.DataFrame):
        frame = source.copy()
        frame.columns = [str(c) for c in frame.columns]
        check_column_names(list(frame.columns), "the table")
    elif isinstance(source, str) and source in bundled_datasets():
        meta = bundled_datasets()[source]
        name = source
        frame = read_table(sample_data_dir() / meta["file"])
    else:
        if isinstance(source, (str, Path)):
            path = Path(source)
            if not path.exists() and not str(source).lower().endswith(SUFFIXES):
                raise DataValidationError(
                    f"{source!r} is neither a file nor a bundled dataset; bundled: "
                    f"{sorted(bundled_datasets())}"
                )
            name = path.stem
        frame = read_table(source, filename, text_columns=text_columns)
        name = Path(filename).stem if filename else name
    return frame, meta, name


def _resolve_label(frame: pd.DataFrame, label: str | None, meta: dict[str, Any]) -> str | None:
    """Stage 2 of :func:`load_dataset`: the label column (the bundled dataset's own by default;
    ``""`` means none), which must exist."""
    if label is None:
        label = meta.get("label") or None
    if label == "":
        label = None
    if label is not None and label not in frame.columns:
        raise DataValidationError(
            f"label column {label!r} not found; columns are {list(frame.columns)[:20]}"
        )
    return label


def _resolve_table_task(task: str | None, label: str | None, meta: dict[str, Any]) -> str:
    """Stage 2 of :func:`load_dataset`: the task, given, the bundled metadata's for its own label,
    or unsupervised without a label. Never guessed from the label values (issue 12, row 4).

    Stricter than :func:`dpcore.validation.resolve_task` (arrays handed to a mechanism), which
    also takes the task implied by a public class list or label bounds: a table's task is chosen
    explicitly (CLI ``--task``, the app's Task box)."""
    if task is None:
        if label is None:
            task = "unsupervised"
        elif label == meta.get("label") and meta.get("task"):
            task = meta["task"]
        else:
            raise DataValidationError(
                f"choose the task for label {label!r}: 'classification' or 'regression' (CLI "
                "--task, app: Task). It is a public choice; guessing it from the private labels "
                "would let one record change the release's format"
            )
    return check_task(task, DataValidationError)


def _handle_missing(
    X: np.ndarray, names: list[str], index: pd.Index, y_series: pd.Series | None, label: str | None,
    missing: str,
) -> tuple[np.ndarray, pd.Series | None, int]:
    """Stage 4 of :func:`load_dataset`: refuse, keep (for imputation) or drop rows of ``X`` with
    NaN/inf (``index``: the rows' numbers, for the message).

    With ``"impute"`` non-finite feature values become NaN here (in place) and are filled once the
    public bounds are known (:func:`_impute_midpoints`)."""
    finite = np.isfinite(X)
    bad_rows = ~finite.all(axis=1)
    y_bad = np.zeros(len(X), dtype=bool)
    if y_series is not None:
        y_bad = y_series.isna().to_numpy().copy()
        if y_series.dtype.kind in "fc":
            y_bad |= ~np.isfinite(y_series.to_numpy(dtype=float))
    if not (bad_rows.any() or y_bad.any()):
        return X, y_series, 0
    n_bad = len(X) - np.count_nonzero(finite, axis=0)
    per_col = {c: int(k) for c, k in zip(names, n_bad, strict=True) if k}
    if y_bad.any():
        per_col[f"{label} (label)"] = int(y_bad.sum())
    all_bad = bad_rows | y_bad
    if missing == "error" or (missing == "impute" and y_bad.any()):
        # the rows' labels (for a file, its row numbers from 0; for a part of a file read in
        # batches, its rows' numbers in the file), as the non-numeric check reports them
        rows = np.asarray(index[np.flatnonzero(y_bad if missing == "impute" else all_bad)])
        what = ("labels are missing (labels are never imputed)" if missing == "impute"
                else "rows contain missing or infinite values")
        raise DataValidationError(
            f"{rows.size} {what} (by column: {dict(list(per_col.items())[:8])}; first rows: "
            f"{rows[:5].tolist()}). Clean them, impute features with a public value "
            "(missing='impute' / --missing impute: the midpoint of each column's public bounds, "
            "which keeps n public), or remove those rows from the file before loading it (a "
            "cleaned file's row count is public; rows dropped here would make n depend on the "
            "data, and the guarantee would NOT hold)."
        )
    if missing == "impute":
        if not X.flags.writeable:
            X = X.copy()
        X[~finite] = np.nan
        return X, y_series, 0
    keep = ~all_bad
    y_series = y_series.loc[keep].reset_index(drop=True) if y_series is not None else None
    return X[keep], y_series, int(all_bad.sum())


def _impute_midpoints(values: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, ImputedCells | None]:
    """NaN entries replaced by the midpoint of their column's bounds, and where they were (filled
    again from the release's public bounds: :class:`ImputedCells`)."""
    nan = np.isnan(values)
    rows = np.flatnonzero(nan.any(axis=1))
    if not rows.size:
        return values, None
    mask = nan[rows]
    values = fill_imputed(values, (rows, mask), bounds)
    return values, ImputedCells(rows, mask, values)


def _resolve_classes(
    y: np.ndarray, label: str | None, classes: Any, meta_classes: Any, min_classes: int,
    rows: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, str]:
    """The public class list of a classification label and its source.

    Given (``"user"``) or from the bundled metadata (``"metadata"``), checked by
    :func:`dpcore.validation.class_list` (no missing, nested or repeated value, numbers or texts);
    otherwise read from the data with a :class:`PrivacyLeakWarning` (``"data"``: the guarantee does
    not hold, since one record with a rare class would put that class into the release). The list's
    kind decides the labels': a numeric list compares them as numbers, a text list as texts (a CSV
    label is then read as text, so codes such as ``01`` and ``1`` stay two classes). With a list read
    from the data at least ``min_classes`` classes must be present; with a public list none need
    be (that check would make whether anything is released depend on one record). ``rows``: the
    labels' row numbers (in their file), named when labels outside the list are refused."""
    if classes is not None or meta_classes is not None:
        source = "user" if classes is not None else "metadata"
        cls = class_list(classes if classes is not None else meta_classes, label)
        given = y
        y, unknown = _labels_of_kind(y, cls)
        if unknown.any():
            shown = [v.item() if isinstance(v, np.generic) else v for v in given[unknown][:3]]
            shown = [v[:40] if isinstance(v, str) else v for v in shown]
            where = "" if rows is None or len(rows) != len(y) else \
                f"; first rows: {rows[unknown][:5].tolist()}"  # for a part of a file: its rows there
            raise DataValidationError(
                f"{int(unknown.sum())} values of label {label!r} are not in its public class list "
                f"{cls.tolist()[:10]} (e.g. {shown}{where})"
            )
    else:
        warn_data_classes(label, stacklevel=3)
        source = "data"
        cls = np.unique(y)
    # Presence is checked only for a class list read from the data: with a public list, whether
    # a table is released must not depend on which classes occur (a table whose labels are all one
    # class and its neighbour with one other label are released alike).
    if source == "data" and np.unique(y).size < min_classes:
        only = y[0].item() if isinstance(y[0], np.generic) else y[0]
        raise DataValidationError(
            f"label {label!r} has a single class ({only!r}); classification needs at "
            "least two. Choose another label or task 'unsupervised'."
        )
    return y, cls, source


def _labels_of_kind(y: np.ndarray, cls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The labels as the class list's kind (numbers, or texts as written), and which are not in it."""
    if cls.dtype.kind == "U":
        text = y if y.dtype.kind == "U" else np.asarray(y).astype(str)
        return text, ~np.isin(text, cls)
    if y.dtype.kind in "iuf":
        return y, ~np.isin(y, cls)
    numbers = pd.to_numeric(pd.Series(y, dtype=object), errors="coerce").to_numpy(dtype=float)
    unknown = np.isnan(numbers) | ~np.isin(numbers, cls)
    return numbers, unknown


def _encode_features(frame: pd.DataFrame, categories: dict[str, list[Any]]) -> tuple[list[str], np.ndarray]:
    """Stage 3 of :func:`load_dataset`: the feature names and values ``(n, d)`` (float64, one
    allocation): numeric columns as they are, one-hot columns ``col=value`` over each public
    category list (from the factorised column: no text is copied per row); any other non-numeric
    column is refused with the reason (dates, text in numbers...). Column types are looked at once
    per distinct dtype, never column by column (a table of 100,000 columns)."""
    cols = list(frame.columns)
    present = set(cols)
    unknown = sorted(c for c in categories if c not in present)
    if unknown:
        raise DataValidationError(f"categories given for unknown column(s) {unknown[:10]}")
    dtypes = list(frame.dtypes)
    numeric = {id(dt): pd.api.types.is_numeric_dtype(dt) for dt in dtypes}
    refuse_complex_columns(frame, "the table")
    # booleans count as numeric in pandas; everything else non-numeric needs a public category list
    nonnumeric = [c for c, dt in zip(cols, dtypes, strict=True) if not numeric[id(dt)]]
    missing = [c for c in nonnumeric if c not in categories]
    for c in missing[:10]:
        _explain_non_numeric_type(frame[c], c)
        _explain_text_in_numeric(frame[c], c)
    if missing:
        raise DataValidationError(
            f"column(s) {missing[:10]} are not numeric. Give a public category list for each "
            "(categories={column: [...]}, or the app's category editor) to one-hot encode them, "
            "or drop them. Category lists taken from the data itself would leak which values occur."
        )
    if not categories:
        return cols, frame.to_numpy(dtype=float, na_value=np.nan)
    names = [name for c in cols for name in ([f"{c}={v}" for v in categories[c]] if c in categories else [c])]
    _check_onehot_collisions(names, cols, categories)
    limits.check_cells(len(frame), len(names), "the table once its categories are one-hot encoded")
    X = np.empty((len(frame), len(names)))
    plain = [c for c in cols if c not in categories]
    at = dict(zip(names, range(len(names)), strict=True))
    if plain:
        X[:, [at[c] for c in plain]] = frame[plain].to_numpy(dtype=float, na_value=np.nan)
    rows = np.arange(len(frame))
    for c, cats in categories.items():
        start = at[f"{c}={cats[0]}"]
        block = X[:, start:start + len(cats)]
        block[:] = 0.0
        codes = _category_codes(frame[c], cats, c)
        known = codes >= 0
        block[rows[known], codes[known]] = 1.0
        block[~known] = np.nan  # a missing value: handled by the missing-value policy
    return names, X


def _category_codes(col: pd.Series, cats: list[Any], name: str) -> np.ndarray:
    """The position of each row's value in the public list ``cats`` (compared as text), ``-1`` for a
    missing value. Each distinct value is compared once (``pd.factorize``).

    Raises
    ------
    DataValidationError
        Values outside the list, named (each shown shortened).
    """
    codes, uniques = pd.factorize(col, use_na_sentinel=True)
    where = {str(v): k for k, v in enumerate(cats)}
    texts = [str(u) for u in uniques]
    position = np.array([where.get(t, -1) for t in texts], dtype=np.int64)
    outside = sorted(t for t, k in zip(texts, position, strict=True) if k < 0)
    if outside:
        shown = [t if len(t) <= 40 else t[:37] + "..." for t in outside[:5]]
        raise DataValidationError(f"column {name!r} has {len(outside):,} value(s) outside its public "
                                  f"category list: {shown}")
    return np.where(codes >= 0, position[np.maximum(codes, 0)] if len(position) else -1, -1)


def _check_onehot_collisions(names: list[str], original: list[str], categories: dict[str, Any]) -> None:
    """A one-hot name ``col=value`` equal to another column (or to another one-hot name) would
    give two columns of the same name, with the wrong bounds for one of them."""
    seen: dict[str, str] = {}
    for c in original:
        made = [(f"{c}={v}", f"the one-hot column {f'{c}={v}'!r} (from {c!r})") for v in categories[c]] \
            if c in categories else [(c, f"the column {c!r}")]
        for name, desc in made:
            if name in seen:
                raise DataValidationError(
                    f"{seen[name]} and {desc} have the same name {name!r}: rename one of them"
                    + (" (or remove the duplicated category)" if seen[name] == desc else "")
                )
            seen[name] = desc
    if len(set(names)) != len(names):  # pragma: no cover - the loop above finds every duplicate
        raise DataValidationError("one-hot encoding produced duplicate column names")


def _explain_non_numeric_type(col: pd.Series, name: str) -> None:
    """Dates, times, durations, decimals and other typed values named as such (not as 'text')."""
    kind = col.dtype.kind
    what = None
    if kind == "M" or isinstance(col.dtype, pd.DatetimeTZDtype):
        what = f"dates/times ({col.dtype})"
    elif kind == "m":
        what = f"durations ({col.dtype})"
    elif isinstance(col.dtype, pd.PeriodDtype):
        what = f"periods ({col.dtype})"
    elif kind == "O":
        # a categorical column: its categories (iterating its rows expands each to its value)
        categorical = isinstance(col.dtype, pd.CategoricalDtype)
        present = pd.Series(col.cat.categories) if categorical else col.dropna()
        types = {type(v) for v in present.iloc[:1000]}
        if types and not types <= {str}:
            import datetime
            import decimal

            names = sorted({t.__name__ for t in types if t is not str})
            if types & {decimal.Decimal}:
                what = "decimal.Decimal values"
            elif any(issubclass(t, (datetime.date, datetime.time, datetime.timedelta)) for t in types):
                what = f"dates/times ({', '.join(names)})"
            elif any(issubclass(t, complex) for t in types):
                what = "complex numbers (store real numbers only)"
            elif any(issubclass(t, (bytes, bytearray)) for t in types):
                what = "binary values (bytes)"
            elif all(issubclass(t, (int, float, np.number)) and not issubclass(t, (bool, np.bool_))
                     for t in types - {str}):
                # numbers and text (also beyond the first rows: pandas reads a large CSV in chunks,
                # and a column with text in a later chunk holds numbers above it): the text check
                # names the text cells
                if pd.api.types.infer_dtype(present, skipna=True) in ("floating", "integer",
                                                                       "mixed-integer-float"):
                    raise DataValidationError(
                        f"column {name!r} holds numbers as Python objects (dtype object, e.g. "
                        f"{present.iloc[0]!r}): convert it to a numeric column first "
                        "(pd.to_numeric, or astype(float))"
                    )
            else:
                what = f"values of type {', '.join(names)}"
    if what is not None:
        raise DataValidationError(
            f"column {name!r} holds {what}, not numbers: convert it to floats (a date to a "
            "timestamp, a duration to seconds) or drop it"
        )


def _explain_text_in_numeric(col: pd.Series, name: str) -> None:
    """A mostly numeric column with a few text entries: name them (rows and values). Each
    distinct value is looked at once (``pd.factorize``): a column of one long text repeated on
    every row costs one text, not one copy per row."""
    codes, uniques = pd.factorize(col, use_na_sentinel=True)
    known = codes >= 0
    if not known.any():
        return
    counts = np.bincount(codes[known], minlength=len(uniques))
    text = [str(u).strip() for u in uniques]
    first = text[int(codes[known][0])]
    comma = np.array([bool(re.fullmatch(r"[-+]?\d*,\d+", t)) for t in text])
    if counts[comma].sum() > 0.5 * counts.sum():
        raise DataValidationError(
            f"column {name!r} uses decimal commas (e.g. {first[:40]!r}); write numbers with a "
            "decimal point (1234.5): export the CSV with '.' as the decimal separator"
        )
    number = pd.to_numeric(pd.Series(np.asarray(uniques, dtype=object)), errors="coerce").notna().to_numpy()
    bad_rows = known & ~number[np.maximum(codes, 0)]
    n_bad = int(np.count_nonzero(bad_rows))
    if not n_bad:
        raise DataValidationError(
            f"column {name!r} holds only numbers, but stored as text (e.g. {first[:40]!r}); "
            "store it as a numeric column (a float or integer type)"
        )
    if n_bad > 0.5 * int(np.count_nonzero(known)):
        return
    where = np.flatnonzero(bad_rows)
    examples = ", ".join(f"{str(uniques[codes[i]])[:40]!r} (row {col.index[i]})" for i in where[:3])
    hint = (" (decimal commas or thousands separators? write 1234.5)"
            if any("," in str(uniques[codes[i]]) for i in where[:20]) else "")
    raise DataValidationError(
        f"column {name!r} is numeric except for {n_bad} value(s) that are not numbers: "
        f"{examples}{hint}. Fix or remove those values, or drop the rows"
    )
