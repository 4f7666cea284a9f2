"""Plotly figures used by several pages (no Streamlit import)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go


def release_scatter_figure(real_2d: np.ndarray | None, released_2d: np.ndarray,
                           real_labels: np.ndarray | None = None,
                           released_labels: np.ndarray | None = None,
                           axis_text: str = "") -> go.Figure:
    """Scatter of the release over the real data in the same 2-D view.

    Real points are grey (or coloured by class, hollow), released points solid; hover shows the
    class.
    """
    fig = go.Figure()
    if real_2d is not None:
        fig.add_trace(go.Scattergl(
            x=real_2d[:, 0], y=real_2d[:, 1], mode="markers", name="real (held-out)",
            marker={"size": 5, "color": "rgba(120,120,120,0.35)"},
            text=None if real_labels is None else [str(v) for v in real_labels[: len(real_2d)]],
        ))
    color = None
    if released_labels is not None:
        lab = np.asarray(released_labels)[: len(released_2d)]
        if lab.dtype.kind in "iub" or (lab.dtype.kind == "f" and np.all(np.mod(lab, 1) == 0)):
            color = lab.astype(int)
    fig.add_trace(go.Scattergl(
        x=released_2d[:, 0], y=released_2d[:, 1], mode="markers", name="released",
        marker={"size": 5, "color": color if color is not None else "#d62728",
                "colorscale": "Turbo" if color is not None else None, "opacity": 0.7},
        text=None if released_labels is None else [str(v) for v in released_labels[: len(released_2d)]],
    ))
    fig.update_layout(
        height=420, margin={"l": 10, "r": 10, "t": 30, "b": 10},
        title={"text": axis_text, "font": {"size": 12}},
        legend={"orientation": "h", "y": -0.1},
    )
    return fig


def log_ticks(lo: float, hi: float, steps: tuple[float, ...] = (1, 2, 5)) -> dict:
    """Plotly axis settings for readable log ticks: ``steps`` per decade written out in full.

    Plotly's default log labels read "0.1 2 5 1 2 5 10"; these read "0.1 0.2 0.5 1 2 5 10".
    ``lo``, ``hi`` (> 0) are the data range; only ticks inside it (with one step of margin) are
    kept, thinned to 1 and 10 steps when more than 12 would show.
    """
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo <= 0 or hi <= 0:
        return {}
    decades = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
    values = [s * 10.0**e for e in decades for s in steps]
    values = [v for v in values if lo / 2.5 <= v <= hi * 2.5]
    if len(values) > 12:
        values = [v for v in values if np.isclose(np.log10(v) % 1, 0) or np.isclose(np.log10(v) % 1, 1)]
    return {"tickvals": values, "ticktext": [f"{v:g}" for v in values]}


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
