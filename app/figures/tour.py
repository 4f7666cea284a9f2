"""Figures of the guided tour (no Streamlit import), one per step, from ``app.tour.step_data``.

Trace names are what ``tests/tour_checks.py`` reads back to check the step's sentences.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures.common import readable_log_axes

__all__ = [
    "HEIGHT",
    "LAYOUT",
    "attack_figure",
    "bounds_figure",
    "budget_figure",
    "choose_figure",
    "noise_figure",
    "odds_figure",
    "step_figure",
    "tradeoff_figure",
]

HEIGHT = 400
LAYOUT = {"height": HEIGHT, "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
          "legend": {"orientation": "h", "y": -0.22, "x": 0}}
GREEN, RED, BLUE, GREY = "#2ca02c", "#d62728", "#1f77b4", "#7f7f7f"


def odds_figure(d: dict[str, Any]) -> go.Figure:
    e = d["epsilon"]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=d["prior"], y=d["prior"], name="no release", mode="lines",
                             line={"color": "black", "dash": "dash"}))
    fig.add_trace(go.Scatter(x=d["prior"], y=d["posterior"], name=f"ε = {e:g}", mode="lines",
                             line={"color": RED, "width": 3}))
    fig.update_layout(title="The most an attacker can believe after one release",
                      xaxis={"title": "belief before the release", "tickformat": ".0%"},
                      yaxis={"title": "largest belief after it", "tickformat": ".0%"}, **LAYOUT)
    return fig


def noise_figure(d: dict[str, Any]) -> go.Figure:
    lo, hi = float(d["bounds"][:, 0].min()), float(d["bounds"][:, 1].max())
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=d["grid"], y=d["scales"], name="noise scale", mode="lines",
                             line={"color": BLUE, "width": 3}))
    fig.add_trace(go.Scatter(x=[d["grid"][0], d["grid"][-1]], y=[hi - lo, hi - lo], mode="lines",
                             name=f"a pixel's range ({lo:g} to {hi:g})", line={"color": GREY, "dash": "dot"}))
    fig.add_trace(go.Scatter(x=[d["epsilon"]], y=[d["scale"]], mode="markers", name="this ε",
                             marker={"color": RED, "size": 12}))
    fig.update_layout(title="Noise on each pixel's average",
                      xaxis={"title": "ε", "type": "log"}, yaxis={"title": "Laplace scale", "type": "log"},
                      **LAYOUT)
    return readable_log_axes(fig)


def tradeoff_figure(d: dict[str, Any]) -> go.Figure:
    a = d["all"]
    x = a["epsilon"]
    i = int(np.argmin(np.abs(x - float(d["value"]))))
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=np.r_[x, x[::-1]], y=np.r_[a["hi"], a["lo"][::-1]], fill="toself",
                             mode="lines", line={"width": 0}, fillcolor="rgba(31,119,180,0.15)",
                             name="95% interval", hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=x, y=a["accuracy"], name="trained on the release", mode="lines+markers",
                             line={"color": BLUE, "width": 3}))
    fig.add_trace(go.Scatter(x=[x[0], x[-1]], y=[a["baseline"]] * 2, name="trained on the real rows",
                             mode="lines", line={"color": "black", "dash": "dash"}))
    fig.add_trace(go.Scatter(x=[x[0], x[-1]], y=[a["chance"]] * 2, name="guessing", mode="lines",
                             line={"color": GREY, "dash": "dot"}))
    fig.add_trace(go.Scatter(x=[x[i]], y=[a["accuracy"][i]], mode="markers", name="this ε",
                             marker={"color": RED, "size": 13}))
    fig.update_layout(title=f"Accuracy on real held-out digits ({a['mechanism']})",
                      xaxis={"title": "ε", "type": "log"},
                      yaxis={"title": "accuracy", "tickformat": ".0%", "range": [0, 1.02]}, **LAYOUT)
    return readable_log_axes(fig)


def _laplace_density(centre: float, scale: float, grid: np.ndarray) -> np.ndarray:
    return np.exp(-np.abs(grid - centre) / scale) / (2 * scale)


def bounds_figure(d: dict[str, Any]) -> go.Figure:
    leak = d["leak"]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=("bounds read from the data",
                                        f"public bounds {d['public'][0]:g} to {d['public'][1]:g}"))
    widest = max(c["scale"] for side in leak.values() for c in side.values())
    centres = [c["centre"] for side in leak.values() for c in side.values()]
    lo, hi = min(centres) - 6 * widest, max(centres) + 6 * widest
    for col, (source, colour) in enumerate((("data", BLUE), ("public", GREEN)), start=1):
        for case, dash in (("without", "solid"), ("with", "dash")):
            c = leak[source][case]
            grid = np.unique(np.r_[np.linspace(lo, hi, 401), c["centre"]])  # the peak is drawn exactly
            fig.add_trace(go.Scatter(
                x=grid, y=_laplace_density(c["centre"], c["scale"], grid), mode="lines",
                name=f"{source} bounds, {case} the new patient", line={"color": colour, "dash": dash},
                legendgroup=source), row=1, col=col)
        fig.update_xaxes(title="released average age (years)", row=1, col=col)
    fig.update_yaxes(title="probability density", row=1, col=1)
    fig.update_layout(**{**LAYOUT, "margin": {"l": 10, "r": 10, "t": 50, "b": 10}})
    return fig


def budget_figure(d: dict[str, Any]) -> go.Figure:
    n = d["release"]
    refused = d["refused"]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=n[~refused], y=np.full(int((~refused).sum()), d["epsilon"]), name="spent",
                         marker={"color": BLUE}))
    fig.add_trace(go.Bar(x=n[refused], y=np.full(int(refused.sum()), d["epsilon"]), name="refused",
                         marker={"color": "rgba(214,39,40,0.35)", "line": {"color": RED, "width": 1}}))
    fig.add_trace(go.Scatter(x=n, y=d["total"], name="total spent", mode="lines+markers",
                             line={"color": "black", "width": 3}))
    fig.add_trace(go.Scatter(x=[0.5, max(8, int(n[-1])) + 0.5], y=[d["budget"]] * 2, name="budget",
                             mode="lines", line={"color": RED, "dash": "dash"}))
    fig.update_layout(title="The ledger: ε spent, release by release",
                      xaxis={"title": "release", "dtick": 1, "range": [0.5, max(8, int(n[-1])) + 0.5]},
                      yaxis={"title": "ε", "range": [0, d["budget"] * 1.3]}, barmode="overlay", **LAYOUT)
    return fig


def attack_figure(d: dict[str, Any]) -> go.Figure:
    from app.figures.attack import roc_figure

    res = d["all"][float(d["value"])]
    fig = roc_figure(res)
    fig.update_layout(title=f"The attack at ε = {res.claimed_epsilon:g}",
                      xaxis_title="false alarms (says IN when OUT)", yaxis_title="hits (says IN when IN)",
                      **{**LAYOUT, "legend": {"orientation": "v", "y": 0.02, "x": 0.98, "xanchor": "right",
                                              "yanchor": "bottom", "font": {"size": 11}}})
    return fig


def choose_figure(d: dict[str, Any]) -> go.Figure:
    a = d["all"]
    i = int(np.argmin(np.abs(a["epsilon"] - float(d["value"]))))
    names = sorted(a["names"], key=lambda n: a["accuracy"][n][i])
    acc = [float(a["accuracy"][n][i]) for n in names]
    colours = [RED if n == a["recommended"] else BLUE for n in names]
    fig = go.Figure()
    fig.add_trace(go.Bar(y=names, x=acc, orientation="h", name="accuracy at this ε",
                         marker={"color": colours}, text=[f"{v:.0%}" for v in acc], textposition="outside",
                         cliponaxis=False))
    fig.add_trace(go.Scatter(x=[a["chance"]] * 2, y=[names[0], names[-1]], mode="lines", name="guessing",
                             line={"color": GREY, "dash": "dot"}))
    fig.update_layout(title=f"SVM accuracy at ε = {a['epsilon'][i]:g} (red: recommended)",
                      xaxis={"title": "accuracy on real held-out digits", "tickformat": ".0%",
                             "range": [0, 1.1]}, **LAYOUT)
    return fig


_FIGURES = {"odds": odds_figure, "noise": noise_figure, "tradeoff": tradeoff_figure, "bounds": bounds_figure,
            "budget": budget_figure, "attack": attack_figure, "choose": choose_figure}


def step_figure(key: str, d: dict[str, Any]) -> go.Figure:
    """The figure of step ``key`` from its data (``app.tour.step_data``)."""
    return _FIGURES[key](d)
