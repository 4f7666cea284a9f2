"""Figures used by several pages (no Streamlit import): Plotly figures, and the Explore scatter as a
Vega-Lite chart (:func:`release_scatter_chart`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = [
    "CLASS_COLOURS",
    "LEGEND",
    "MAX_LEGEND_CLASSES",
    "REAL_ROWS",
    "RELEASED_ROWS",
    "SCATTER_CLASS",
    "SCATTER_HEIGHT",
    "SCATTER_ROWS",
    "SCATTER_X",
    "SCATTER_Y",
    "log_ticks",
    "noise_table",
    "readable_log_axes",
    "release_scatter_chart",
]

#: Class colours of the Explore scatter (qualitative, 24 distinct colours).
CLASS_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
                 "#17becf", "#bcbd22", "#7f7f7f", "#393b79", "#637939", "#8c6d31", "#843c39",
                 "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#fd8d3c",
                 "#74c476", "#9e9ac8", "#969696")
MAX_LEGEND_CLASSES = len(CLASS_COLOURS)


#: Height in pixels of the Explore scatter's plotting area: with its title, axes and legend (about
#: 120 px more) the chart fits a 1280 x 720 window under the page's title.
SCATTER_HEIGHT = 250
#: The scatter's legend: one row under the plot (a column of ten classes beside it was taller than
#: the chart and cut its title and last classes)
LEGEND = {"orient": "bottom", "direction": "horizontal", "columns": 12}
#: Column names of the Explore scatter's table (:func:`release_scatter_chart`).
SCATTER_X, SCATTER_Y, SCATTER_CLASS, SCATTER_ROWS = "axis 1", "axis 2", "class", "rows"
REAL_ROWS, RELEASED_ROWS = "real (held-out)", "released"


def release_scatter_chart(real_2d: np.ndarray | None, released_2d: np.ndarray,
                          real_labels: np.ndarray | None = None,
                          released_labels: np.ndarray | None = None,
                          axis_text: str = "",
                          axis_titles: tuple[str, str] = ("axis 1", "axis 2"),
                          classes: Sequence[object] | None = None,
                          height: int = SCATTER_HEIGHT) -> tuple[pd.DataFrame, dict]:
    """Scatter of the release over the real data in the same 2-D view, as a Vega-Lite chart.

    Returns ``(data, spec)`` for ``st.vega_lite_chart(data, spec)``: ``data`` has one row per
    plotted point (columns :data:`SCATTER_X`, :data:`SCATTER_Y`, :data:`SCATTER_ROWS` =
    "real (held-out)" / "released", :data:`SCATTER_CLASS` the label as text or "" without one);
    ``spec`` says how to draw them. With class labels (at most :data:`MAX_LEGEND_CLASSES`
    classes) every class has its colour and a legend entry: released points filled, real points
    hollow in the same colour. Without labels real points are grey and released points red.
    ``axis_text`` is the subtitle (what the axes are), ``axis_titles`` the axis titles (with
    their units). ``classes``: the public class list, which fixes the colours and the legend for
    every epsilon (default: the classes found in the labels). ``height``: of the plotting area in
    pixels (:data:`SCATTER_HEIGHT`).

    The spec depends only on the titles, the classes and which sets are drawn, never on the
    points: Streamlit then keeps the chart and Vega replaces its data in place when only the
    points change (an epsilon move), where a Plotly chart is rebuilt from scratch. Drawn on a
    canvas (no DOM node per point); drag to pan, scroll to zoom, hover for a point's set and
    class.
    """
    rel_lab = None if released_labels is None else _label_text(released_labels)[: len(released_2d)]
    real_lab = None if real_labels is None or real_2d is None else \
        _label_text(real_labels)[: len(real_2d)]
    found = _legend_classes(rel_lab, real_lab)
    if found is not None and classes is not None:
        public = _legend_classes(_label_text(np.asarray(classes)), None)
        found = public if public is not None and set(found) <= set(public) else found
    parts = [(released_2d, RELEASED_ROWS, rel_lab)]
    if real_2d is not None:
        parts.insert(0, (real_2d, REAL_ROWS, real_lab))
    data = pd.DataFrame({
        SCATTER_X: np.concatenate([np.asarray(xy, dtype=float)[:, 0] for xy, _, _ in parts]),
        SCATTER_Y: np.concatenate([np.asarray(xy, dtype=float)[:, 1] for xy, _, _ in parts]),
        SCATTER_ROWS: np.concatenate([np.full(len(xy), name) for xy, name, _ in parts]),
        SCATTER_CLASS: np.concatenate([lab if lab is not None and found is not None
                                       else np.full(len(xy), "") for xy, _, lab in parts]),
    })
    if found is not None:
        colour = {"field": SCATTER_CLASS, "type": "nominal", "sort": found,
                  "scale": {"domain": found, "range": list(CLASS_COLOURS[: len(found)])},
                  "legend": {"title": "class", **LEGEND}}
    else:
        colour = {"field": SCATTER_ROWS, "type": "nominal",
                  "scale": {"domain": [REAL_ROWS, RELEASED_ROWS], "range": ["#787878", "#d62728"]},
                  "legend": {"title": None, **LEGEND}}
    encoding = {
        "x": {"field": SCATTER_X, "type": "quantitative", "title": axis_titles[0],
              "scale": {"zero": False}},
        "y": {"field": SCATTER_Y, "type": "quantitative", "title": axis_titles[1],
              "scale": {"zero": False}},
        "color": colour,
        "tooltip": [{"field": SCATTER_ROWS, "title": "rows"}]
        + ([{"field": SCATTER_CLASS, "title": "class"}] if found is not None else []),
    }

    def layer(name: str, mark: dict) -> dict:
        return {"transform": [{"filter": {"field": SCATTER_ROWS, "equal": name}}],
                "mark": {"type": "point", **mark}, "encoding": encoding}

    layers = [layer(RELEASED_ROWS, {"filled": True, "size": 22, "opacity": 0.8})]
    if real_2d is not None:  # under the released points; pan and zoom bound to its scales
        layers.insert(0, {**layer(REAL_ROWS, {"filled": False, "size": 32, "opacity": 0.5}),
                          "params": [{"name": "zoom", "select": "interval", "bind": "scales"}]})
    else:
        layers[0]["params"] = [{"name": "zoom", "select": "interval", "bind": "scales"}]
    title = ("Released rows (filled) over real held-out rows (hollow)"
             if found is not None and real_2d is not None else "Released rows")
    spec = {
        # the plotting area's height, title, axes and legend laid out around it, the whole as wide as
        # the column ("fit-x": Streamlit's default "fit" squeezed them into the height given and cut
        # the title off at the top)
        "height": int(height),
        "autosize": {"type": "fit-x", "contains": "padding"},
        "title": {"text": title, "subtitle": axis_text, "anchor": "start"},
        "layer": layers,
        # a canvas, not an SVG node per point; no ARIA node per point either
        "usermeta": {"embedOptions": {"renderer": "canvas"}},
        "config": {"mark": {"aria": False}},
    }
    return data, spec


def _label_text(labels: np.ndarray) -> np.ndarray:
    """Labels as text; whole-number floats (decoded classes) written as integers ("3", not "3.0")."""
    arr = np.asarray(labels)
    if arr.ndim == 1 and arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr % 1 == 0):
        arr = arr.astype(np.int64)
    return arr.astype(str)


def _legend_classes(released: np.ndarray | None, real: np.ndarray | None) -> list[str] | None:
    """The sorted class names of the labels (as text), or None when there are none or too many."""
    if released is None or released.ndim != 1:
        return None
    values = [released] + ([real] if real is not None and real.ndim == 1 else [])
    found = np.unique(np.concatenate(values))
    if found.size > MAX_LEGEND_CLASSES:
        return None
    try:
        return sorted(found.tolist(), key=float)
    except ValueError:
        return sorted(found.tolist())


def _tick_text(v: float) -> str:
    exp = int(np.floor(np.log10(v) + 1e-9))
    if -3 <= exp <= 4:
        return f"{v:g}"
    mant = v / 10.0**exp
    return f"10<sup>{exp}</sup>" if np.isclose(mant, 1) else f"{mant:g}×10<sup>{exp}</sup>"


def log_ticks(lo: float, hi: float, steps: tuple[float, ...] = (1, 2, 5)) -> dict:
    """Plotly axis settings for readable log ticks: ``steps`` per decade written out in full.

    Plotly's default log labels read "0.1 2 5 1 2 5 10"; these read "0.1 0.2 0.5 1 2 5 10"
    (``10<sup>6</sup>`` beyond 10^4 or below 10^-3). ``lo``, ``hi`` (> 0) are the data range; only
    ticks inside it (with some margin) are kept, thinned to whole decades (and then every second,
    third... decade) when more than 12 would show. Empty dict for an empty or non-positive range.
    """
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo <= 0 or hi <= 0:
        return {}
    first, last = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    values = [s * 10.0**e for e in range(first, last + 1) for s in steps]
    values = [v for v in values if lo / 2.5 <= v <= hi * 2.5]
    if len(values) > 12:
        every = max(1, int(np.ceil((last - first + 1) / 12)))
        values = [10.0**e for e in range(first, last + 1) if (e - first) % every == 0]
    return {"tickvals": values, "ticktext": [_tick_text(v) for v in values]}


def readable_log_axes(fig: go.Figure) -> go.Figure:
    """Apply :func:`log_ticks` to every log axis of ``fig``, from the data plotted on it."""
    ranges: dict[str, tuple[float, float]] = {}
    for trace in fig.data:
        for letter in ("x", "y"):
            values = getattr(trace, letter, None)
            if values is None:
                continue
            try:
                arr = np.asarray(values, dtype=float).ravel()
            except (TypeError, ValueError):
                continue
            arr = arr[np.isfinite(arr) & (arr > 0)]
            if arr.size == 0:
                continue
            ref = getattr(trace, f"{letter}axis", None) or letter
            name = f"{letter}axis{ref[1:]}"
            lo, hi = ranges.get(name, (np.inf, -np.inf))
            ranges[name] = (min(lo, float(arr.min())), max(hi, float(arr.max())))
    for name, (lo, hi) in ranges.items():
        axis = fig.layout[name]
        if axis is not None and axis.type == "log":
            axis.update(**log_ticks(lo, hi))
    return fig


def noise_table(noise_records: list) -> list[dict]:
    """Rows for a table of noisy statistics (sensitivity, scale, distribution, source)."""
    return [
        {
            "statistic": r.statistic,
            "sensitivity": f"{r.sensitivity:.4g} ({r.norm})",
            "noise scale": f"{r.scale:.4g}",
            "distribution": r.distribution,
            "ε part": "" if r.epsilon is None else f"{r.epsilon:.4g}",
            "formula": r.formula,
            "source": r.source,
        }
        for r in noise_records
    ]
