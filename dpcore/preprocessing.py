"""Input preparation shared by every mechanism: validation, public bounds, clipping, labels.

SPEC section 8: public bounds are required; bounds computed from the private data raise a
:class:`~dpcore.exceptions.PrivacyLeakWarning` and are recorded (``bounds_source = "data"``).
Data are clipped to the bounds before any sensitivity-based step.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpcore.data import Dataset, fill_imputed
from dpcore.limits import check_n_classes
from dpcore.table import BLOCK_BYTES, IN_MEMORY, TableEngine, row_blocks  # row_blocks: re-exported
from dpcore.threads import cpu_count
from dpcore.validation import (  # TASKS and normalize_bounds: re-exported (their old home)
    TASKS,
    class_list,
    normalize_bounds,
    resolve_task,
    warn_data_bounds,
    warn_data_classes,
)

__all__ = [
    "BLOCK_BYTES",
    "PreparedInput",
    "RowNormBound",
    "as_2d_float",
    "clip_to_bounds",
    "column_range",
    "data_bounds",
    "group_indices",
    "map_row_blocks",
    "n_threads",
    "prepare_input",
    "row_blocks",
    "row_norm_bound",
    "scale_to_unit",
]


@dataclass
class PreparedInput:
    """Validated, clipped input handed to a mechanism's ``_release``.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features), float64, clipped to ``bounds``
        Read-only. When the input already lies inside ``bounds`` (and is float64) this is a view
        of the caller's array, not a copy: mechanisms must never write into it.
    y : ndarray of shape (n_samples,) or None
        Classification: integer class indices into ``classes``; regression: floats clipped to
        ``label_bounds``.
    bounds : ndarray of shape (n_features, 2)
    label_bounds : tuple(float, float) or None
    classes : ndarray or None
        Public class list (classification).
    task : str
    bounds_source : {"metadata", "user", "data"}
    feature_names, label_name
    image_shape : tuple or None
    diagnostics : dict
        Clipping counts (exploration only, never on the card).
    classes_source : {"metadata", "user", "data"} or None
        Where the class list came from; ``"data"`` voids the guarantee.
    public_facts : dict
        What the release assumes public (n, task, bounds per side with their sources, class
        list), for the release card's ``public_facts``.
    engine : dpcore.table.TableEngine
        The engine of ``X`` and ``y`` (in memory, or the Dask engine's lazy arrays).
    onehot_groups : tuple of int ndarrays
        Public schema: the column indices of each one-hot group (a categorical attribute encoded
        over its public category list; at most one column of a group is at its upper bound).
        From the dataset's metadata or its public category lists only, never from the values.
        Empty when unknown. See :func:`row_norm_bound`.
    """

    X: np.ndarray
    y: np.ndarray | None
    bounds: np.ndarray
    label_bounds: tuple[float, float] | None
    classes: np.ndarray | None
    task: str
    bounds_source: str
    feature_names: list[str]
    label_name: str | None = None
    image_shape: tuple[int, ...] | None = None
    warnings: list[str] = field(default_factory=list)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    classes_source: str | None = None
    public_facts: dict[str, Any] = field(default_factory=dict)
    onehot_groups: tuple[np.ndarray, ...] = ()
    #: how rows with missing values were handled (``"drop"``: n depends on the data)
    missing: str = "error"
    #: the engine the rows live on, chosen where the input was opened (:mod:`dpcore.engines`):
    #: what the mechanism asks of ``X`` and ``y`` (:class:`dpcore.table.TableEngine`)
    engine: TableEngine = IN_MEMORY

    @property
    def row_norm_bound(self) -> RowNormBound:
        """The public bounds on a row after the sparsity-preserving box map (:func:`row_norm_bound`)."""
        return row_norm_bound(self.bounds, self.onehot_groups)

    @property
    def holds(self) -> bool:
        """False when a fact that shapes the release (bounds, label bounds, class list) came
        from the private data, or rows with missing values were dropped (``n`` and the released
        row count then depend on the data: one changed row changes them): the calibration is
        then not a guarantee."""
        return self.bounds_source != "data" and self.classes_source != "data" and self.missing != "drop"

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def y_classes(self) -> np.ndarray | None:
        """Labels as class values (not indices), for classification."""
        if self.y is None or self.classes is None:
            return self.y
        return self.classes[self.y]


@dataclass(frozen=True)
class RowNormBound:
    """Public bounds on a row ``z`` of the sparsity-preserving box map (:func:`row_norm_bound`).

    Attributes
    ----------
    l2, l1 : float
        ``max ||z||_2`` and ``max ||z||_1`` over every row the map can output.
    l2_diameter, l1_diameter : float
        ``max ||z - z'||_2`` and ``max ||z - z'||_1`` over two such rows (replace-one).
    l4_power4 : float
        ``max ||z||_4^4`` (``<= l2^2``: every entry has ``|z_l| <= 1``).
    max_pair_l1 : float
        ``max sum_l max(|z_l|, |z'_l|)`` over two rows (two one-hot vectors of a group: 2).
    n_numeric, n_groups : int
        Non-constant numeric columns and one-hot groups with a non-constant column.
    box_l2 : float
        The bound the plain box map onto ``[-1, 1]^d`` gives, ``sqrt(k)`` for ``k`` non-constant
        columns (what the bound saves: ``box_l2^2 / l2^2`` in noise variance).
    """

    l2: float
    l1: float
    l2_diameter: float
    l1_diameter: float
    l4_power4: float
    max_pair_l1: float
    n_numeric: int
    n_groups: int
    box_l2: float

    def card(self) -> dict[str, Any]:
        """The card's ``row_norm_bound`` entry."""
        return {
            "l2": self.l2, "l1": self.l1, "l2_diameter": self.l2_diameter,
            "numeric_columns": self.n_numeric, "onehot_groups": self.n_groups,
            "box_l2": self.box_l2,
            "noise_variance_saved_vs_box": (self.box_l2 / self.l2) ** 2 if self.l2 > 0 else 1.0,
            "rule": "||z||_2^2 <= (numeric columns, each in [-1, 1]) + (one-hot groups, each in [0, 1] "
                    "with its L1 norm capped at 1); from the public bounds and one-hot groups only",
        }


def row_norm_bound(bounds: np.ndarray, groups: tuple[np.ndarray, ...] = ()) -> RowNormBound:
    """The tightest row-norm bound the public schema gives, for the sparsity-preserving box map.

    The map (:class:`dpcore.mechanisms._box.BoxMap`) sends a numeric column from its public
    ``[lo, hi]`` affinely onto ``[-1, 1]`` (centre to 0) and a column of a one-hot group onto
    ``[0, 1]`` (``lo -> 0``, so a zero stays a zero: the map preserves sparsity), then scales each
    group's sub-vector ``g`` by ``1/max(1, ||g||_1)``. A constant column (``lo == hi``) maps to 0.

    Proof of the bounds (``m`` non-constant numeric columns, ``G`` groups with a non-constant
    column; a group with one non-constant column is counted like a group). After the map every
    numeric entry has ``|z_l| <= 1`` and every group ``g`` has entries in ``[0, 1]`` with
    ``||g||_1 <= 1``, so ``||g||_2^2 = sum g_l^2 <= sum g_l <= 1`` and ``||g||_4^4 <= ||g||_2^2``:

    * ``||z||_2^2 <= m + G`` and ``||z||_1 <= m + G``;
    * ``||z - z'||_2^2 <= 4m + 2G``: a numeric entry moves by at most 2; for a group,
      ``||g - g'||^2 = ||g||^2 + ||g'||^2 - 2 g.g' <= 2`` since ``g.g' >= 0`` (``<= 1`` for a group
      with one non-constant column);
    * ``||z - z'||_1 <= 2m + 2G`` (``||g - g'||_1 <= ||g||_1 + ||g'||_1 <= 2``; 1 for one column);
    * ``sum_l max(|z_l|, |z'_l|) <= m + 2G`` (``<= ||g||_1 + ||g'||_1`` per group);
    * ``||z||_4^4 <= m + G``.

    A row the schema allows (one-hot groups with at most one 1) is unchanged by the L1 cap, so the
    cap only matters for rows that break the schema (e.g. imputed midpoints); the bounds hold for
    every row either way. Without groups the bounds are the box's: ``l2 = sqrt(k)``. An Adult row
    (6 numerics, 8 categorical groups, 105 columns): ``l2 = sqrt(14)`` instead of ``sqrt(105)``.
    """
    b = np.asarray(bounds, dtype=float)
    varying = b[:, 1] > b[:, 0]
    in_group = np.zeros(b.shape[0], dtype=bool)
    n_groups = singles = 0
    for g in groups:
        idx = np.asarray(g, dtype=np.intp)
        in_group[idx] = True
        live = int(np.count_nonzero(varying[idx]))
        n_groups += live > 0
        singles += live == 1
    m = int(np.count_nonzero(varying & ~in_group))
    G = int(n_groups)
    return RowNormBound(
        l2=math.sqrt(m + G), l1=float(m + G), l2_diameter=math.sqrt(4 * m + 2 * G - singles),
        l1_diameter=float(2 * m + 2 * G - singles), l4_power4=float(m + G),
        max_pair_l1=float(m + 2 * G - singles), n_numeric=m, n_groups=G,
        box_l2=math.sqrt(int(np.count_nonzero(varying))),
    )


def group_indices(feature_names: list[str], groups: dict[str, Any] | None) -> tuple[np.ndarray, ...]:
    """Column indices of the public one-hot ``groups`` ({attribute: [column names]}) among
    ``feature_names``; names that are not columns are skipped (a group with fewer columns still
    has at most one active), a column in two groups is an error."""
    if not groups:
        return ()
    index = {name: j for j, name in enumerate(feature_names)}
    out, seen = [], set()
    for attr, cols in groups.items():
        idx = [index[c] for c in cols if c in index]
        if set(idx) & seen:
            raise ValueError(f"one-hot group {attr!r} shares a column with another group")
        seen.update(idx)
        if idx:
            out.append(np.array(sorted(idx), dtype=np.intp))
    return tuple(out)


def as_2d_float(X: Any, *, name: str = "X", min_rows: int = 2) -> np.ndarray:
    """Convert to a float64 array of shape ``(n_samples, n_features)`` (no finiteness check).

    No copy when ``X`` already is a float64 array.

    Raises
    ------
    ValueError
        Not numeric, not 2-D, fewer than ``min_rows`` rows or no columns.
    """
    kinds = {dt.kind for dt in (getattr(X, "dtypes", None) if hasattr(X, "dtypes") else
                                [getattr(X, "dtype", np.dtype(float))])}
    if kinds & set("Mm"):
        raise ValueError(f"{name} holds dates/times or durations, not numbers: convert them to "
                         "floats (a timestamp, a duration in seconds) first")
    try:
        with warnings.catch_warnings():  # complex -> float would drop the imaginary part silently
            warnings.simplefilter("error", np.exceptions.ComplexWarning)
            arr = np.asarray(X, dtype=float)
    except np.exceptions.ComplexWarning:
        raise ValueError(f"{name} holds complex numbers; give real numbers only") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}") from None
    if arr.ndim != 2:
        raise ValueError(f"{name} must have shape (n_samples, n_features), got shape {arr.shape}")
    if arr.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows, got {arr.shape[0]}")
    if arr.shape[1] < 1:
        raise ValueError(f"{name} has no columns")
    return arr


def n_threads(n_jobs: int | None) -> int:
    """Threads for a parallel NumPy section, scikit-learn style: ``n_jobs`` (``-1``: all CPUs this
    process may use, :func:`dpcore.threads.cpu_count`), default (``None``) all of them up to 4.

    Raises
    ------
    ValueError
        ``n_jobs`` is 0 or below -1.
    """
    cpus = cpu_count()
    if n_jobs is None:
        return min(4, cpus)
    if n_jobs == -1:
        return cpus
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be a positive int or -1, got {n_jobs}")
    return int(n_jobs)


def map_row_blocks(fn: Callable[[slice], Any], n_rows: int, n_features: int, *, itemsize: int = 8,
                   n_jobs: int | None = None) -> list[Any]:
    """``[fn(sl) for sl in row_blocks(...)]``, run on threads when the array is large.

    For streaming passes whose per-block work is NumPy code that releases the GIL (reductions,
    elementwise arithmetic): two cores read memory faster than one. ``n_jobs`` threads (default:
    see :func:`n_threads`) are used when there are at least 8 blocks; results come back
    in block order, so anything computed from them is the same whatever the thread count.
    """
    blocks = list(row_blocks(n_rows, n_features, itemsize=itemsize))
    workers = n_threads(n_jobs)
    if workers == 1 or len(blocks) < 8:
        return [fn(sl) for sl in blocks]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, blocks))


def column_range(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column ``(min, max)`` of a 2-D array in one streaming pass over blocks of rows.

    NaN propagates into the result and an infinite entry shows as an infinite min or max, so
    finite results prove every entry finite. No temporary larger than one block; large arrays
    are read by several threads (:func:`map_row_blocks`).
    """
    n, d = arr.shape
    parts = map_row_blocks(lambda sl: (arr[sl].min(axis=0), arr[sl].max(axis=0)), n, d,
                           itemsize=arr.itemsize)
    if not parts:
        return np.full(d, np.inf), np.full(d, -np.inf)
    # np.minimum/maximum (not fmin/fmax) propagate NaN
    lo = np.minimum.reduce([p[0] for p in parts])
    hi = np.maximum.reduce([p[1] for p in parts])
    return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)


def _raise_non_finite(arr: np.ndarray, name: str) -> None:
    bad = ~np.isfinite(arr)
    rows = np.flatnonzero(bad.any(axis=1))
    raise ValueError(
        f"{name} has {int(bad.sum())} NaN/inf entries in {rows.size} rows "
        f"(first rows: {rows[:5].tolist()}); drop or impute them first"
    )


def clip_to_bounds(
    arr: np.ndarray, bounds: np.ndarray, col_range: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, int]:
    """``arr`` clipped to ``bounds`` (shape ``(n_features, 2)``) and the number of entries changed.

    When every column's range (``col_range``, from :func:`column_range`; computed if not given)
    already lies inside its bounds, nothing is copied: a read-only view of ``arr`` is returned
    with count 0. Otherwise a clipped copy, with the exact count of changed entries.
    """
    lo, hi = bounds[:, 0], bounds[:, 1]
    cmin, cmax = column_range(arr) if col_range is None else col_range
    if bool(np.all(cmin >= lo) and np.all(cmax <= hi)):
        view = arr.view()
        view.flags.writeable = False
        return view, 0
    out = np.clip(arr, lo, hi)
    return out, int(np.count_nonzero(out != arr))


def scale_to_unit(X: Any, bounds: np.ndarray) -> np.ndarray:
    """Clip to the public ``bounds`` (shape ``(d, 2)``) and scale each feature to ``[0, 1]``:
    ``(x - lo) / (hi - lo)``; a constant column (``hi == lo``) maps to 0.

    Post-processing of public facts only (no privacy cost). Returns a new float64 array of
    ``X``'s shape ``(m, d)``.
    """
    lo, hi = bounds[:, 0], bounds[:, 1]
    width = hi - lo
    out = np.clip(np.asarray(X, dtype=float), lo, hi)  # the one new array, then in place
    out -= lo  # a constant column is now 0 and stays so
    return np.divide(out, width, out=out, where=width > 0)


def data_bounds(X: np.ndarray, what: str = "feature",
                col_range: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Bounds taken from the data, with a :class:`PrivacyLeakWarning` (SPEC section 8).

    ``col_range``: the per-column ``(min, max)`` if already computed (:func:`column_range`).
    """
    warn_data_bounds(f"the {what}s" if what == "feature" else f"the {what}", stacklevel=3)
    lo, hi = column_range(X) if col_range is None else col_range
    return np.column_stack([lo, hi])


def prepare_input(
    X: Any,
    y: Any = None,
    *,
    bounds: Any = None,
    label_bounds: Any = None,
    classes: Any = None,
    task: str | None = None,
    supported_tasks: tuple[str, ...] = TASKS,
) -> PreparedInput:
    """Validate, bound and clip the input of a mechanism.

    ``X`` may be a :class:`dpcore.data.Dataset` (then ``y``, bounds, classes and task come from it
    unless given here) or an array-like ``(n_samples, n_features)``.

    Raises
    ------
    ValueError
        Bad shapes, NaN/inf, ``len(y) != n``, a task the mechanism does not support, a
        classification label with a single class.
    """
    source = "user"
    label_from_data = False
    imputed: tuple[Any, Any] = (None, None)  # (cells missing="impute" filled, the bounds it used)
    feature_names: list[str] | None = None
    label_name = None
    image_shape = None
    classes_source = None if classes is None else "user"
    side_sources: list[tuple[str, str]] | None = None
    row_policy = "error"
    named_groups: dict[str, Any] | None = None
    if isinstance(X, Dataset):
        ds: Dataset = X
        y = ds.y if y is None else y
        if bounds is None:
            bounds, source = ds.bounds, ds.bounds_source
            side_sources = ds.bound_side_sources()
        if label_bounds is None:
            label_bounds = ds.label_bounds
            label_from_data = ds.label_bounds_source == "data"
        if classes is None and ds.classes is not None:
            classes, classes_source = ds.classes, ds.classes_source or "user"
        task = task or ds.task
        feature_names, label_name, image_shape = list(ds.feature_names), ds.label_name, ds.image_shape
        row_policy = ds.missing
        named_groups = ds.onehot_groups
        imputed = ds.imputed_cells(), ds.bounds
        X = ds.X
    arr = as_2d_float(X)
    n, d = arr.shape
    # one streaming pass: finiteness, data bounds if needed, and whether clipping changes anything
    col_range = column_range(arr)
    if not (np.isfinite(col_range[0]).all() and np.isfinite(col_range[1]).all()):
        _raise_non_finite(arr, "X")
    feature_names = feature_names or [f"x{j}" for j in range(d)]
    notes: list[str] = []
    if bounds is None:
        b = data_bounds(arr, col_range=col_range)
        source = "data"
    else:
        b = normalize_bounds(bounds, d)
    if imputed[0] is not None and not np.array_equal(b, imputed[1]):
        arr = fill_imputed(arr, imputed[0], b)  # missing values: the midpoints of the bounds used
    if side_sources is None:
        side_sources = [(source, source)] * d
    task = resolve_task(task, y, classes, label_bounds)
    if task not in supported_tasks:
        raise ValueError(f"this mechanism supports tasks {supported_tasks}, not {task!r}")
    clipped, n_clipped = clip_to_bounds(arr, b, col_range)
    diagnostics = {"n_clipped_entries": n_clipped}

    y_out = None
    lb = None
    cls = None
    if task == "classification":
        y_arr = np.asarray(y).ravel()
        if y_arr.shape[0] != n:
            raise ValueError(f"y has {y_arr.shape[0]} labels for {n} rows")
        if classes is None:
            warn_data_classes(label_name, stacklevel=3)
            cls = np.unique(y_arr)
            classes_source = "data"
            notes.append("the class list was read from the private data: the guarantee does NOT hold")
        else:
            if hasattr(classes, "__len__"):
                check_n_classes(len(classes), label_name)
            cls = class_list(classes, label_name)  # no missing, nested or repeated class
        check_n_classes(len(cls), label_name)
        if classes is not None:
            unknown = ~np.isin(y_arr, cls)
            if unknown.any():
                raise ValueError(
                    f"{int(unknown.sum())} labels are not in the public class list "
                    f"{cls.tolist()[:10]} (e.g. {y_arr[unknown][:3].tolist()})"
                )
        if cls.size < 2:
            raise ValueError("classification needs a class list of at least two classes")
        y_out = np.searchsorted(cls, y_arr) if _sorted(cls) else _index_of(cls, y_arr)
    elif task == "regression":
        try:
            y_arr = np.asarray(y, dtype=float).ravel()
        except (TypeError, ValueError):
            raise ValueError("a regression label must be numeric") from None
        if y_arr.shape[0] != n:
            raise ValueError(f"y has {y_arr.shape[0]} labels for {n} rows")
        if not np.isfinite(y_arr).all():
            raise ValueError(f"y has {int((~np.isfinite(y_arr)).sum())} NaN/inf values")
        if label_bounds is None:
            lbarr = data_bounds(y_arr[:, None], "label")[0]
            source = "data"
        else:
            lbarr = normalize_bounds(label_bounds, 1, name="label_bounds")[0]
            if label_from_data:
                source = "data"
            elif lbarr[0] == lbarr[1]:
                raise ValueError(_EQUAL_LABEL_BOUNDS.format(lo=lbarr[0], hi=lbarr[1]))
        lb = (float(lbarr[0]), float(lbarr[1]))
        y_out = np.clip(y_arr, lb[0], lb[1])
        diagnostics["n_clipped_labels"] = int(np.count_nonzero(y_out != y_arr))
    if row_policy == "drop":
        notes.append("rows with missing values were dropped before the release: the number of rows "
                     "depends on the data (one changed row changes it), so the guarantee does NOT hold")
    facts = _public_facts(n, task, feature_names, b, side_sources, cls, classes_source, lb,
                          "data" if (label_from_data or (task == "regression" and label_bounds is None))
                          else "user", row_policy)
    groups = group_indices(feature_names, named_groups)
    if groups:
        facts["onehot_groups"] = {attr: [c for c in cols if c in feature_names]
                                  for attr, cols in (named_groups or {}).items()}
        facts["onehot_groups_source"] = "metadata (public category lists)"
    return PreparedInput(
        X=clipped, y=y_out, bounds=b, label_bounds=lb, classes=cls, task=task,
        bounds_source=source, feature_names=feature_names, label_name=label_name,
        image_shape=tuple(image_shape) if image_shape else None, warnings=notes,
        diagnostics=diagnostics, classes_source=classes_source, public_facts=facts,
        onehot_groups=groups, missing=row_policy,
    )


def _public_facts(
    n: int, task: str, names: list[str], bounds: np.ndarray, sides: list[tuple[str, str]],
    classes: np.ndarray | None, classes_source: str | None, label_bounds: tuple[float, float] | None,
    label_bounds_source: str, row_policy: str,
) -> dict[str, Any]:
    """The public facts a release relies on, for the card (every bound with the source of each
    side, the class list and its source, n, the task)."""
    facts: dict[str, Any] = {
        "n": int(n),
        "n_source": "cleaned table (rows with missing values dropped)" if row_policy == "drop"
        else "the input's row count (public)",
        "task": task,
        "bounds": {
            str(name): {"lo": float(lo), "hi": float(hi), "lo_source": s_lo, "hi_source": s_hi}
            for name, (lo, hi), (s_lo, s_hi) in zip(names, bounds.tolist(), sides, strict=True)
        },
        "missing_values": row_policy,
    }
    if classes is not None:
        facts["classes"] = [c.item() if isinstance(c, np.generic) else c for c in classes.tolist()]
        facts["classes_source"] = classes_source
    if label_bounds is not None:
        facts["label_bounds"] = list(label_bounds)
        facts["label_bounds_source"] = label_bounds_source
    return facts


#: The refusal of public label bounds with ``lo == hi`` (the data's own range may be a point).
_EQUAL_LABEL_BOUNDS = ("label_bounds must have lo < hi, got [{lo:g}, {hi:g}]: equal bounds leave the label "
                       "no range, so its noise would be zero and nothing could be released; give the "
                       "label's public range")


def _sorted(values: np.ndarray) -> bool:
    try:
        return bool(np.all(values[:-1] < values[1:]))
    except TypeError:
        return False


def _index_of(classes: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Index of each label in ``classes`` (every label is in it): one hash pass, linear time."""
    import pandas as pd

    return pd.Index(classes).get_indexer(y).astype(int)


