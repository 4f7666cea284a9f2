"""Input checks shared by the library, the CLI and the app: one place per kind of value.

Each function takes the value and returns it converted (a float, an int, an array, a
``Generator``), or raises a ``ValueError`` that names the parameter and says what was expected
(scikit-learn's ``utils.validation`` plays the same role there). This module imports only NumPy
and :mod:`dpcore.exceptions`, so every other module of :mod:`dpcore` can use it.

What is here

* privacy parameters: :func:`check_epsilon`, :func:`check_delta`;
* numbers: :func:`check_integer`, :func:`check_positive_array`, :func:`check_n_components`;
* randomness: :func:`check_random_state`;
* public facts of a table: :func:`normalize_bounds` (feature bounds as an array),
  :func:`bound_pair` (one column's ``(lo, hi)``, strictly), :func:`check_bound_magnitude`, :data:`TASKS`,
  :func:`check_task`, :func:`resolve_task`, :data:`MISSING_POLICIES`, :func:`check_missing`;
* public lists (a label's classes, a column's categories, the columns named by bounds):
  :func:`check_value_list`, :func:`class_list`, :func:`parse_value_list`, :func:`check_column_keys`;
* the :class:`~dpcore.exceptions.PrivacyLeakWarning` for bounds or a class list taken from the
  private data (:func:`data_bounds_message`, :func:`warn_data_bounds`, :func:`warn_data_classes`),
  written once for the library and the app.
"""

from __future__ import annotations

import math
import numbers
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpcore.exceptions import DataValidationError, PrivacyLeakWarning

__all__ = [
    "MAX_ABS_BOUND",
    "MISSING_POLICIES",
    "TASKS",
    "bound_pair",
    "check_bound_magnitude",
    "check_column_keys",
    "check_delta",
    "check_epsilon",
    "check_integer",
    "check_missing",
    "check_n_components",
    "check_positive_array",
    "check_random_state",
    "check_task",
    "check_value_list",
    "class_list",
    "data_bounds_message",
    "default_delta",
    "delta_or_default",
    "normalize_bounds",
    "parse_value_list",
    "resolve_task",
    "warn_data_bounds",
    "warn_data_classes",
]

#: The learning tasks a table can be released for.
TASKS = ("unsupervised", "classification", "regression")
#: Largest magnitude accepted for a feature bound: beyond it the sensitivities (squared widths
#: summed over columns and rows) overflow float64 and the noise calibration breaks down.
MAX_ABS_BOUND = 1e100
#: What to do with rows holding missing or infinite feature values (:func:`dpcore.data.load_dataset`).
MISSING_POLICIES = ("error", "impute", "drop")


# ------------------------------------------------------------------------------ privacy parameters
def default_delta(n_rows: int) -> float:
    """The default delta for ``n`` records: ``min(1e-5, n^(-3/2))``, well below ``1/n``.

    ``delta`` is the probability with which an (epsilon, delta)-DP mechanism may fail outright;
    ``delta ~ 1/n`` is "very dangerous" (Dwork & Roth 2014, section 2.3: a mechanism that publishes
    each record with probability delta satisfies it and, at ``delta = 1/n``, publishes one record in
    full on average). A function of the public ``n`` only.
    """
    if n_rows < 1:
        raise ValueError(f"n_rows must be >= 1, got {n_rows}")
    return min(1e-5, float(n_rows) ** -1.5)


def delta_or_default(delta: float | None, n_rows: int) -> float:
    """``delta`` as given by the user, or (empty) :func:`default_delta` of the public ``n_rows``."""
    return default_delta(n_rows) if delta is None else delta


def check_epsilon(epsilon: float, *, allow_inf: bool = True, name: str = "epsilon") -> float:
    """Validate a privacy budget: a float > 0 (``inf`` allowed for NOT PRIVATE explore runs).

    Raises
    ------
    ValueError
        If ``epsilon`` is not a number, is NaN, is <= 0, or is infinite while ``allow_inf`` is False.
    """
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {epsilon!r}") from None
    if math.isnan(eps) or eps <= 0:
        raise ValueError(f"{name} must be > 0, got {epsilon!r}")
    if math.isinf(eps) and not allow_inf:
        raise ValueError(f"{name} must be finite here, got {epsilon!r}")
    return eps


def check_delta(delta: float, *, allow_zero: bool = False, name: str = "delta") -> float:
    """Validate delta: in (0, 1) (or [0, 1) when ``allow_zero``). Raises ValueError otherwise."""
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {delta!r}") from None
    low_ok = d >= 0 if allow_zero else d > 0
    if math.isnan(d) or not low_ok or d >= 1:
        interval = "[0, 1)" if allow_zero else "(0, 1)"
        raise ValueError(f"{name} must lie in {interval}, got {delta!r}")
    return d


# ---------------------------------------------------------------------------------------- numbers
def check_integer(name: str, value: Any, minimum: int) -> int:
    """``value`` as an ``int >= minimum``; integral floats (``1e6``) are accepted, booleans are not.

    Raises
    ------
    ValueError
        ``"{name} must be an integer"`` or ``"{name} must be >= {minimum}"``.
    """
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, (numbers.Integral, np.integer)):
        iv = int(value)
    elif isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        iv = int(value)
    else:
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if iv < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return iv


def check_positive_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a non-empty float array of finite numbers > 0 (a scalar gives a 0-d array).

    Raises
    ------
    ValueError
        Not numeric, empty, NaN/inf or an entry <= 0 (naming ``name``).
    """
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number or array of them") from None
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return arr


def check_n_components(n_components: int | None, n_features: int,
                       default: Callable[[int], int] | None = None) -> int:
    """The projected dimension ``p``: ``1 <= p < n_features`` (a projection reduces the dimension).

    ``n_components=None`` takes ``default(n_features)`` (each mechanism's own rule).

    Raises
    ------
    ValueError
        Naming ``n_components``: fewer than 2 features, ``None`` without a default, or ``p``
        outside ``[1, n_features)``.
    """
    if n_features < 2:
        raise ValueError("n_components: the data need at least 2 features to be projected")
    if n_components is None:
        if default is None:
            raise ValueError("n_components is required")
        p = int(default(n_features))
    else:
        p = int(n_components)
    if not (1 <= p < n_features):
        raise ValueError(
            f"n_components must satisfy 1 <= n_components < n_features = {n_features}, got {p}"
        )
    return p


# ------------------------------------------------------------------------------------- randomness
def check_random_state(random_state: None | int | np.random.Generator) -> np.random.Generator:
    """Turn ``random_state`` into a ``numpy.random.Generator``.

    ``None`` draws fresh OS entropy (the only acceptable source for a release that is published);
    an ``int`` seeds a generator for reproducible exploration previews; a ``Generator`` is used as is.
    """
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return np.random.default_rng(int(random_state))
    raise ValueError(f"random_state must be None, an int or a numpy Generator, got {random_state!r}")


# ------------------------------------------------------------------------------ public table facts
def normalize_bounds(bounds: Any, n_features: int, *, name: str = "bounds") -> np.ndarray:
    """Return bounds as an ``(n_features, 2)`` array from ``(lo, hi)`` scalars/arrays or ``(d, 2)``.

    Raises
    ------
    ValueError
        Wrong shape, non-finite values, or ``lo > hi`` (naming the column index).
    """
    arr = np.asarray(bounds, dtype=float)
    if arr.shape == (2,):
        arr = np.tile(arr, (n_features, 1))
    elif arr.shape == (2, n_features) and n_features != 2:
        arr = arr.T
    if arr.shape != (n_features, 2):
        raise ValueError(
            f"{name} must be (lo, hi) or have shape ({n_features}, 2), got shape {arr.shape}"
        )
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite (a public, finite range per column)")
    bad = np.flatnonzero(arr[:, 0] > arr[:, 1])
    if bad.size:
        raise ValueError(f"{name}: lower bound above upper bound for column(s) {bad[:5].tolist()}")
    return arr


def bound_pair(
    column: Any, value: Any, origin: str = "bounds", *, strict: bool = True,
) -> tuple[float, float]:
    """``value`` as public bounds ``(lo, hi)`` of ``column``: exactly two real, finite numbers
    (bool, strings and complex refused) with ``lo < hi`` (``lo <= hi`` if not ``strict``).

    Raises
    ------
    DataValidationError
        Naming the column and what is wrong.
    """
    where = f"{origin}: bounds for column {column!r}"
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__"):
        raise DataValidationError(f"{where} must be a pair [lo, hi] of numbers, got {value!r:.60}")
    items = list(value)
    if len(items) != 2:
        raise DataValidationError(
            f"{where} must be exactly two numbers [lo, hi], got {len(items)} value(s): {items!r:.60}"
        )
    for v in items:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            what = ("a boolean" if isinstance(v, (bool, np.bool_)) else
                    "a complex number" if isinstance(v, numbers.Complex) else
                    f"a {type(v).__name__}")
            raise DataValidationError(f"{where} must be numbers, got {what} ({v!r:.40})")
    lo, hi = float(items[0]), float(items[1])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise DataValidationError(f"{where} must be finite numbers, got [{lo:g}, {hi:g}]")
    if lo > hi or (strict and lo == hi):
        raise DataValidationError(
            f"{where} must have lo {'<' if strict else '<='} hi, got [{lo:g}, {hi:g}]"
        )
    return lo, hi



def check_bound_magnitude(bounds: np.ndarray, names: Sequence[str]) -> None:
    """Refuse bounds (shape ``(d, 2)``) so large that the noise calibration would overflow.

    Raises
    ------
    DataValidationError
        Naming the first column with a bound above :data:`MAX_ABS_BOUND` in magnitude.
    """
    big = np.flatnonzero(np.abs(bounds).max(axis=1) > MAX_ABS_BOUND) if bounds.size else []
    if len(big):
        j = int(big[0])
        raise DataValidationError(
            f"column {names[j]!r} has bounds of magnitude {np.abs(bounds[j]).max():.3g}, above "
            f"{MAX_ABS_BOUND:.0e}: the noise calibration would overflow. Rescale the column (change "
            "its units) or declare narrower public bounds"
        )


def check_task(task: Any, error: type[ValueError] = ValueError) -> str:
    """``task`` if it is one of :data:`TASKS`, else ``error`` (a ``ValueError`` subclass)."""
    if task not in TASKS:
        raise error(f"task must be one of {TASKS}, got {task!r}")
    return task


def resolve_task(task: str | None, y: Any, classes: Any, label_bounds: Any) -> str:
    """The task from what the caller gave, never from the label values (issue 12, row 4).

    No labels: unsupervised. With labels: the given task, else classification if a class list was
    given, regression if label bounds were given; otherwise a ``ValueError``.
    """
    if task is None:
        if y is None:
            task = "unsupervised"
        elif classes is not None:
            task = "classification"
        elif label_bounds is not None:
            task = "regression"
        else:
            raise ValueError(
                "task must be given with labels y ('classification' or 'regression'), or a public "
                "class list (classes=...) or label bounds (label_bounds=...) that imply it: it is "
                "never guessed from the private labels"
            )
    check_task(task)
    if task != "unsupervised" and y is None:
        raise ValueError(f"task {task!r} needs labels y")
    return task


def check_missing(missing: Any, error: type[ValueError] = ValueError) -> str:
    """``missing`` if it is one of :data:`MISSING_POLICIES`, else ``error``."""
    if missing not in MISSING_POLICIES:
        raise error(f"missing must be 'error', 'impute' or 'drop', got {missing!r}")
    return missing


# ------------------------------------------------------------------------------ public lists
#: What a value of a public list is: a number (int or float, finite) or a text; booleans are text.
LIST_KINDS = ("number", "text")


def check_value_list(values: Any, what: str, *, least: int = 1,
                     as_text: bool = False) -> tuple[list[Any], str]:
    """``values`` (a public list: the classes of a label, the categories of a column) as a list of
    plain scalars and its kind, ``"number"`` or ``"text"``.

    Every value is a finite number or a text (a boolean counts as the text ``"True"`` /
    ``"False"``, as a label column of booleans is compared); a list holds one kind only. Two
    values that are equal once compared are refused: as numbers ``1``, ``1.0`` and ``1e0`` are one
    value; with ``as_text`` (category lists, compared with the table's cells as text) ``1`` and
    ``"1"`` are.

    Raises
    ------
    DataValidationError
        Not a list, fewer than ``least`` values, a missing value (``None``/``null``, NaN), a
        nested list or object, another type, numbers mixed with texts, a repeated value; the
        message names ``what`` and the value.
    """
    if isinstance(values, (str, bytes, dict, set, frozenset)) or not hasattr(values, "__iter__"):
        raise DataValidationError(f"{what} must be a list of values, got {_short(values)}")
    items = values.tolist() if isinstance(values, np.ndarray) else list(values)
    if len(items) < least:
        raise DataValidationError(f"{what} needs at least {least} value(s), got {len(items)}")
    kinds, out = set(), []
    for v in items:
        if isinstance(v, np.generic):
            v = v.item()
        if v is None or (isinstance(v, float) and math.isnan(v)) or type(v).__name__ in ("NAType", "NaTType"):
            raise DataValidationError(f"{what} holds a missing value ({_short(v)}); list only the values "
                                      "a cell can take")
        if isinstance(v, (list, tuple, dict, set, frozenset, np.ndarray)):
            raise DataValidationError(f"{what} holds a nested value {_short(v)}; list plain values (numbers "
                                      "or texts), one per entry")
        if isinstance(v, bool):
            v = str(v)
        if isinstance(v, numbers.Real):
            if not math.isfinite(v):
                raise DataValidationError(f"{what} holds the non-finite number {v!r}")
            kinds.add("number")
        elif isinstance(v, str):
            kinds.add("text")
        else:
            raise DataValidationError(f"{what} holds {_short(v)} of type {type(v).__name__}; list numbers "
                                      "or texts")
        out.append(v)
    if len(kinds) > 1 and not as_text:
        num = next(v for v in out if not isinstance(v, str))
        txt = next(v for v in out if isinstance(v, str))
        raise DataValidationError(f"{what} mixes numbers ({num!r}) and texts ({txt!r}): give every value "
                                  "as a number or every value as a text")
    kind = "text" if as_text or kinds == {"text"} else "number"
    seen: dict[Any, Any] = {}
    for v in out:
        key = str(v) if kind == "text" else float(v)
        if key in seen:
            same = f"{seen[key]!r} and {v!r} are the same {'text' if kind == 'text' else 'number'}" \
                if repr(seen[key]) != repr(v) else f"{v!r} is listed twice"
            raise DataValidationError(f"{what} repeats a value: {same}; list each value once")
        seen[key] = v
    return out, kind


def class_list(classes: Any, label: Any = None) -> np.ndarray:
    """A public class list as an array: checked by :func:`check_value_list` (at least two
    classes); numbers as ``int64`` (all integral) or ``float64``, texts as strings.

    Raises
    ------
    DataValidationError
        As :func:`check_value_list`, naming the label.
    """
    whose = "the class list" if label is None else f"the class list of {label!r}"
    values, kind = check_value_list(classes, whose, least=2)
    if kind == "text":
        return np.asarray(values, dtype=str)
    if all(isinstance(v, numbers.Integral) or float(v).is_integer() for v in values) and \
            all(abs(v) < 2**62 for v in values):
        return np.asarray([int(v) for v in values], dtype=np.int64)
    return np.asarray(values, dtype=float)


_NUMBER_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def parse_value_list(text: str, what: str) -> list[Any]:
    """A comma-separated list typed by a user (the CLI's ``--classes 0,1``, the app's text fields):
    numbers where every entry is a plain decimal number, else texts. Two entries that are one
    number (``1`` and ``01``, ``1`` and ``1.0``) are refused, naming both as written: the list's
    kind decides whether labels are numbers or texts, and ``01`` and ``1`` would otherwise be one
    class, silently. Codes such as ``01`` stay texts in a JSON list of strings.

    Raises
    ------
    DataValidationError
        Two entries that are one number (or one text).
    """
    items = [v.strip() for v in text.split(",") if v.strip()]
    if not items or not all(_NUMBER_TEXT.fullmatch(v) for v in items):
        check_value_list(items, what, least=0)
        return items
    seen: dict[float, str] = {}
    out: list[Any] = []
    for v in items:
        number = float(v)
        if number in seen:
            raise DataValidationError(
                f"{what} repeats a value: {seen[number]!r} and {v!r} are the same number {number:g}; list "
                "each value once (codes such as 01 and 1 that are different classes: give the list as a "
                "JSON file of strings, [\"01\", \"1\"], and they are compared as texts)")
        seen[number] = v
        out.append(int(v) if re.fullmatch(r"[-+]?\d+", v) else number)
    check_value_list(out, what, least=0)
    return out


def check_column_keys(keys: Any, what: str) -> list[str]:
    """The column names a public mapping is keyed by (bounds, category lists): texts only.

    Raises
    ------
    DataValidationError
        A key that is not a text (``None``, a number, a tuple), naming it.
    """
    bad = [k for k in keys if not isinstance(k, str)]
    if bad:
        raise DataValidationError(f"{what} must be keyed by column names (texts), got {_short(bad[0])} of "
                                  f"type {type(bad[0]).__name__}")
    return list(keys)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ----------------------------------------------------------------------- bounds from private data
def data_bounds_message(what: str | Sequence[str]) -> str:
    """The sentence every "bounds were taken from the private data" warning uses.

    ``what``: the columns concerned (a list of names: ``"no public bounds for 2 column(s) (a, b)"``)
    or a phrase (``"the regression label 'y'"``, ``"the features"``).
    """
    if not isinstance(what, str):
        names = [str(c) for c in what]
        what = (f"{len(names)} column(s) ({', '.join(names[:5])}"
                f"{', ...' if len(names) > 5 else ''})")
    return (f"no public bounds for {what}: they were computed from the private data. The "
            "differential-privacy guarantee does NOT hold; give public bounds instead.")


def warn_data_bounds(what: str | Sequence[str], *, stacklevel: int = 2) -> None:
    """Raise the :class:`~dpcore.exceptions.PrivacyLeakWarning` of :func:`data_bounds_message`
    (SPEC section 8; diffprivlib raises the same warning whenever bounds come from the data).

    ``stacklevel`` counts from the caller of this function (2 = the caller's caller).
    """
    warnings.warn(data_bounds_message(what), PrivacyLeakWarning, stacklevel=stacklevel + 1)


def warn_data_classes(label: Any = None, *, stacklevel: int = 2) -> None:
    """The :class:`~dpcore.exceptions.PrivacyLeakWarning` for a class list read from the private
    labels (one record with a rare class would put that class into the release)."""
    whose = "the labels" if label is None else f"label {label!r}"
    warnings.warn(
        f"no public class list for {whose}: it was read from the private data. One record with a "
        "rare class would change the release, so the differential-privacy guarantee does NOT hold; "
        "give the class list (classes=[...], CLI --classes).",
        PrivacyLeakWarning, stacklevel=stacklevel + 1,
    )
