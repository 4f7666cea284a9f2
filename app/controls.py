"""Widgets rendered from a mechanism's parameter schema (:class:`dpcore.schema.Param`).

Adding a mechanism never needs a page edit: every parameter gets a control here from its kind,
range, default and help text.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import streamlit as st

from app.state import WIDGET_PREFIX
from dpcore.data import Dataset
from dpcore.mechanisms.base import Mechanism
from dpcore.schema import Param

__all__ = [
    "DELTA_GRID",
    "EPSILON_GRID",
    "initial",
    "mechanism_controls",
    "param_control",
    "public_args",
    "split_from_first",
    "stored_params",
]

EPSILON_GRID = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, math.inf]
#: key suffix of the "automatic" checkbox of an optional budget split (its slider keeps the plain key)
AUTOMATIC_SUFFIX = ":automatic"
DELTA_GRID = [1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2]


def _fmt(v: float) -> str:
    return "∞ (NOT PRIVATE)" if math.isinf(v) else f"{v:g}"


def _log_grid(p: Param, default: float) -> list[float]:
    lo = p.low if p.low and p.low > 0 else default / 1000
    hi = p.high if p.high and math.isfinite(p.high) else default * 1000
    grid = sorted({float(f"{v:.3g}") for v in np.geomspace(lo, hi, 25)} | {float(default)})
    return [v for v in grid if (p.low is None or v > p.low or not p.low_open)]


def _int_high(p: Param, ds: Dataset) -> int:
    if p.high is not None and math.isfinite(p.high):
        return int(p.high)
    if p.name == "n_components":
        return max(1, ds.n_features - 1)
    if p.name == "ell":
        return max(1, min(ds.n_samples, 1024))
    return max(int(p.default or 1) * 10, 100)


def initial(key: str, name: str | None = None, value: Any = None) -> dict[str, Any]:
    """Keyword arguments for a parameter widget whose value must outlive page switches.

    Always ``persist_state="session"``: Streamlit keeps the value of a keyed widget while its page
    is not shown, so a parameter set on one page is still there on another (the Release page uses
    the Explore page's settings). Plus ``{name: value}`` (the widget's default) on its first
    appearance only: once its key is in the session state, passing a default as well makes
    Streamlit warn.
    """
    kw: dict[str, Any] = {"persist_state": "session"}
    if name is not None and key not in st.session_state:
        kw[name] = value
    return kw


def param_control(mech: type[Mechanism], p: Param, ds: Dataset, *, disabled: bool = False) -> Any:
    """Render one widget; returns its value in the parameter's own type.

    Optional parameters (``None`` = derived by the mechanism, e.g. a default bound) get an empty
    number box meaning "automatic".
    """
    key = f"{WIDGET_PREFIX}{mech.name}:{p.name}"
    label = p.name.replace("_", " ") + (" :material/lock:" if p.privacy else "")
    common = {"key": key, "help": p.help, "disabled": disabled}
    if p.name == "epsilon":
        default = float(p.default)
        eps_grid = sorted({*EPSILON_GRID, default})  # the schema default is always a choice
        return st.select_slider("ε (epsilon) :material/lock:", eps_grid, format_func=_fmt,
                                **initial(key, "value", default), **common)
    if p.name == "delta" or (p.kind == "float" and p.log and p.high == 1.0):
        # the schema default and a value set for this session (the recommended delta) are choices
        chosen = [v for v in (p.default, st.session_state.get(key)) if v is not None]
        values = sorted({*DELTA_GRID, *(float(v) for v in chosen)})
        grid: list[float | None] = [None, *values] if p.optional else values
        default = p.default
        return st.select_slider("δ (delta) :material/lock:" if p.name == "delta" else label, grid,
                                # None: the mechanism's default_delta(n) = min(1e-5, n^-1.5), never 1/n
                                format_func=lambda v: "automatic" if v is None else f"{v:.0e}",
                                **initial(key, "value", default), **common)
    if p.kind == "bool" and p.optional:  # empty = automatic, as in the CLI without the option
        options = [None, True, False]
        return st.selectbox(label, options,
                            format_func=lambda v: {None: "automatic", True: "on"}.get(v, "off"),
                            **initial(key, "index", options.index(p.default)), **common)
    if p.kind == "bool":
        return st.checkbox(label, **initial(key, "value", bool(p.default)), **common)
    if p.kind == "choice":
        choices: list[Any] = ([None] if p.optional else []) + list(p.choices or ())
        return st.selectbox(label, choices, format_func=lambda v: "automatic" if v is None else str(v),
                            **initial(key, "index", choices.index(p.default)), **common)
    if p.kind == "fraction_split":
        names = p.split_names or ("first", "second")
        if p.optional:  # an untouched control stays automatic; unticking reveals the slider
            auto_key = key + AUTOMATIC_SUFFIX
            if st.checkbox(f"{label}: automatic", key=auto_key, help=p.help, disabled=disabled,
                           **initial(auto_key, "value", p.default is None)):
                return None
        start = 1 / len(names) if p.default is None else float(p.default[0])
        first = st.slider(f"{label}: share of {names[0]}", 0.05, 0.95, step=0.05,
                          **initial(key, "value", round(start * 20) / 20), **common)
        parts = split_from_first(p, first)
        st.caption(" · ".join(f"{n} {v:.2f}" for n, v in zip(names, parts, strict=False)))
        return parts
    if p.optional:  # before the int and log widgets: an untouched control must stay automatic
        return _optional_number(p, ds, label, key, common)
    if p.kind == "int":
        low, high = _int_range(p, ds)
        default = int(min(max(p.default, low), high))
        _clamp_stored(key, low, high)
        if high == low:  # e.g. n_components on a 2-feature table: a slider needs min < max
            st.caption(f"{label}: {low} (the only value possible on this table)")
            return low
        if high - low <= 512:
            return st.slider(label, low, high, **initial(key, "value", default), **common)
        return int(st.number_input(label, low, high, step=1, **initial(key, "value", default),
                                   **common))
    if p.log:
        default = float(p.default)
        grid = _log_grid(p, default)
        return st.select_slider(label, grid, format_func=lambda v: f"{v:g}",
                                **initial(key, "value", min(grid, key=lambda v: abs(v - default))),
                                **common)
    low = float(p.low) if p.low is not None else None
    high = float(p.high) if p.high is not None and math.isfinite(p.high) else None
    default = float(p.default) if p.default is not None else (low or 0.0)
    if low is not None and high is not None:
        # an open end is not a value the slider may reach (histogram_fraction = 0 is refused)
        step = 0.01
        low, high = low + (step if p.low_open else 0.0), high - (step if p.high_open else 0.0)
        return st.slider(label, low, high, step=step, **initial(key, "value", min(max(default, low), high)),
                         **common)
    return st.number_input(label, min_value=low, max_value=high, format="%g",
                           **initial(key, "value", default), **common)


def _int_range(p: Param, ds: Dataset) -> tuple[int, int]:
    low = int(p.low if p.low is not None else 1)
    return low, max(low, _int_high(p, ds))


def _clamp_stored(key: str, low: float, high: float) -> None:
    """Pull a stored value into ``[low, high]`` (the range shrinks on a smaller dataset)."""
    value = st.session_state.get(key)
    if value is not None:
        clamped = type(value)(min(max(value, low), high))
        if clamped != value:  # assign only on change: no value push per run
            st.session_state[key] = clamped


def _optional_number(p: Param, ds: Dataset, label: str, key: str, common: dict[str, Any]) -> Any:
    """A number box whose empty state is ``None``: the mechanism's documented automatic rule.

    The box starts at the schema default (``None`` for every optional parameter so far), so a
    release with untouched controls has exactly the parameters of ``dpcore release`` without
    options and of the Python API without arguments.
    """
    if p.kind == "int":
        low, high = _int_range(p, ds)
        _clamp_stored(key, low, high)
        value = st.number_input(label + " (empty = automatic)", min_value=low, max_value=high,
                                step=1, placeholder="automatic",
                                **initial(key, "value", p.default), **common)
        return None if value is None else int(value)
    low = float(p.low) if p.low is not None else None
    high = float(p.high) if p.high is not None and math.isfinite(p.high) else None
    if low is not None and p.low_open and low == 0.0:
        low = None  # Streamlit has no open bound; validation names the parameter if 0 is typed
    return st.number_input(label + " (empty = automatic)", min_value=low, max_value=high,
                           format="%g", placeholder="automatic", **initial(key, "value", p.default),
                           **common)


def split_from_first(p: Param, first: float) -> tuple[float, ...]:
    """The budget split whose first share is ``first``; the rest shared equally.

    Rounded to 12 decimals so that the schema default comes back exactly (``1 - 0.9`` is
    ``0.09999999999999998`` in floating point, and the card must equal the CLI's).
    """
    if len(p.split_names) > 2 and first == p.default[0]:
        return tuple(p.default)
    n_rest = max(1, len(p.split_names) - 1)
    first = round(float(first), 12)
    return (first, *([round((1 - first) / n_rest, 12)] * n_rest))


def mechanism_controls(mech: type[Mechanism], ds: Dataset) -> dict[str, Any]:
    """All schema controls of ``mech``, under the legend of their lock icon (``Param.privacy``);
    returns the keyword arguments for its constructor."""
    from app.explain import LOCK_LEGEND

    if any(p.privacy for p in mech.params):
        st.caption(LOCK_LEGEND)
    return {**{p.name: param_control(mech, p, ds) for p in mech.params}, **public_args(mech)}


def stored_params(mech: type[Mechanism]) -> dict[str, Any]:
    """The parameters last set for ``mech`` on any page (defaults where never touched).

    Reads the widget values kept in the session state, so pages that do not render a mechanism's
    controls (Compare) still use the user's choices.
    """
    out: dict[str, Any] = {}
    for p in mech.params:
        key = f"{WIDGET_PREFIX}{mech.name}:{p.name}"
        value = st.session_state.get(key, p.default)
        if p.kind == "fraction_split" and p.optional and st.session_state.get(
                key + AUTOMATIC_SUFFIX, p.default is None):
            value = None
        elif p.kind == "fraction_split" and value is not None and not isinstance(value, (tuple, list)):
            value = split_from_first(p, float(value))
        out[p.name] = value
    return {**out, **public_args(mech)}


def public_args(mech: type[Mechanism]) -> dict[str, Any]:
    """``public_data`` for mechanisms that take it, from the Data page's public table (if any)."""
    if "public_data" not in mech.extra_args:
        return {}
    from app.state import public_table  # deferred: app.state's users import this module

    table = public_table()
    return {} if table is None else {"public_data": table}
