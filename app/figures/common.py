"""Plotly figures used by several pages (no Streamlit import)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

__all__ = [
    "CLASS_COLOURS",
    "MAX_LEGEND_CLASSES",
    "log_ticks",
    "noise_table",
    "readable_log_axes",
    "release_scatter_figure",
]

#: Class colours of the Explore scatter (qualitative, 24 distinct colours).
CLASS_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
                 "#17becf", "#bcbd22", "#7f7f7f", "#393b79", "#637939", "#8c6d31", "#843c39",
                 "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#fd8d3c",
                 "#74c476", "#9e9ac8", "#969696")
MAX_LEGEND_CLASSES = len(CLASS_COLOURS)


def release_scatter_figure(real_2d: np.ndarray | None, released_2d: np.ndarray,
                           real_labels: np.ndarray | None = None,
                           released_labels: np.ndarray | None = None,
                           axis_text: str = "",
                           axis_titles: tuple[str, str] = ("axis 1", "axis 2")) -> go.Figure:
    """Scatter of the release over the real data in the same 2-D view.

    With class labels (at most :data:`MAX_LEGEND_CLASSES` classes) every class has its colour and
    a legend entry: released points solid, real points hollow in the same colour. Without labels
    real points are grey and released points red. ``axis_text`` is the subtitle (what the axes
    are), ``axis_titles`` the axis titles (with their units).
    """
    rel_lab = None if released_labels is None else _label_text(released_labels)[: len(released_2d)]
    real_lab = None if real_labels is None or real_2d is None else \
        _label_text(real_labels)[: len(real_2d)]
    classes = _legend_classes(rel_lab, real_lab)
    # traces and layout as plain dicts, validated once by go.Figure (not once per add_trace and
    # again by update_layout): a third of the build time, on every Explore move
    traces: list[dict] = []
    if classes is None:
        if real_2d is not None:
            traces.append({
                "type": "scatter", "x": real_2d[:, 0], "y": real_2d[:, 1], "mode": "markers",
                "name": "real (held-out)", "marker": {"size": 5, "color": "rgba(120,120,120,0.35)"},
                "text": None if real_lab is None else [str(v) for v in real_lab]})
        traces.append({
            "type": "scatter", "x": released_2d[:, 0], "y": released_2d[:, 1], "mode": "markers",
            "name": "released", "marker": {"size": 5, "color": "#d62728", "opacity": 0.7},
            "text": None if rel_lab is None else [str(v) for v in rel_lab]})
    else:
        for i, cls in enumerate(classes):
            colour = CLASS_COLOURS[i % len(CLASS_COLOURS)]
            if real_2d is not None and real_lab is not None:
                mask = real_lab == cls
                traces.append({
                    "type": "scatter", "x": real_2d[mask, 0], "y": real_2d[mask, 1],
                    "mode": "markers", "legendgroup": cls, "name": f"{cls} real", "showlegend": False,
                    "marker": {"size": 6, "symbol": "circle-open", "color": colour, "opacity": 0.5},
                    "hovertemplate": f"real, class {cls}<extra></extra>"})
            mask = rel_lab == cls if rel_lab is not None else np.zeros(0, bool)
            traces.append({
                "type": "scatter", "x": released_2d[mask, 0], "y": released_2d[mask, 1],
                "mode": "markers", "legendgroup": cls, "name": cls,
                "marker": {"size": 5, "color": colour, "opacity": 0.8},
                "hovertemplate": f"released, class {cls}<extra></extra>"})
    layout = {
        "height": 460, "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
        "title": {"text": "Released rows (filled) over real held-out rows (hollow)"
                  if classes is not None and real_2d is not None else "Released rows",
                  "subtitle": {"text": axis_text}, "font": {"size": 14}},
        "xaxis": {"title": {"text": axis_titles[0]}}, "yaxis": {"title": {"text": axis_titles[1]}},
        "legend": {"title": {"text": "class" if classes is not None else ""}},
    }
    fig = go.Figure(data=traces, layout=layout)
    return fig


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
