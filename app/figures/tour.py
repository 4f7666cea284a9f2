"""Figures of the teaching tour (no Streamlit import)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.figures.common import readable_log_axes

__all__ = [
    "LAYOUT",
    "dpmix_figure",
    "odds_figure",
    "qq_figure",
    "snr_figure",
]

LAYOUT = {"height": 380, "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
          "legend": {"orientation": "h", "y": -0.2}}


def snr_figure(res: dict[str, np.ndarray], epsilon: float) -> go.Figure:
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=res["p"], y=res["signal"], name="signal ‖Σ<sub>p</sub>‖<sub>F</sub>",
                             mode="lines+markers"))
    fig.add_trace(go.Scatter(x=res["p"], y=res["noise"], name="noise (expected ‖N‖<sub>F</sub>)",
                             mode="lines+markers"))
    fig.add_trace(go.Scatter(x=res["p"], y=res["snr"], name="SNR", mode="lines+markers", yaxis="y2",
                             line={"dash": "dot", "width": 3}))
    fig.update_layout(title=f"RON-Gauss covariance at ε = {epsilon:g}: signal vs noise as p grows",
                      xaxis_title="projection dimension p", yaxis={"title": "Frobenius norm",
                                                                  "type": "log"},
                      yaxis2={"title": "SNR (signal / noise)", "overlaying": "y", "side": "right",
                              "type": "log", "showgrid": False},
                      **LAYOUT)
    fig.update_layout(margin={"l": 10, "r": 60, "t": 40, "b": 10})
    return readable_log_axes(fig)


def qq_figure(series: dict[str, tuple[np.ndarray, np.ndarray]]) -> go.Figure:
    fig = go.Figure()
    lim = 0.0
    for name, (theory, sample) in series.items():
        fig.add_trace(go.Scatter(x=theory, y=sample, mode="markers", name=name, marker={"size": 4}))
        lim = max(lim, float(np.max(np.abs(theory))))
    fig.add_trace(go.Scatter(x=[-lim, lim], y=[-lim, lim], mode="lines", name="normal",
                             line={"color": "black", "dash": "dash"}))
    fig.update_layout(title="Normal Q-Q plot: a random projection looks Gaussian, a raw feature does not",
                      xaxis_title="standard normal quantile", yaxis_title="standardised sample quantile",
                      **LAYOUT)
    return fig


def dpmix_figure(res: dict[str, np.ndarray], epsilon: float) -> go.Figure:
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=res["ell"], y=res["sigma"], name="σ needed", mode="lines+markers"))
    fig.add_trace(go.Scatter(x=res["ell"], y=res["sensitivity"], name="sensitivity of one mixture",
                             mode="lines+markers", line={"dash": "dot"}))
    fig.update_layout(title=f"DPMix at ε = {epsilon:g}: mixing more rows needs less noise",
                      xaxis={"title": "mixture degree ℓ", "type": "log"},
                      yaxis={"title": "per-coordinate scale (features in [0, 1] units)", "type": "log"},
                      **LAYOUT)
    return readable_log_axes(fig)


def odds_figure(prior: np.ndarray, curves: dict[float, np.ndarray]) -> go.Figure:
    fig = go.Figure()
    for eps, post in curves.items():
        fig.add_trace(go.Scatter(x=prior, y=post, name=f"ε = {eps:g}", mode="lines"))
    fig.add_trace(go.Scatter(x=prior, y=prior, name="no release", mode="lines",
                             line={"color": "black", "dash": "dash"}))
    fig.update_layout(title="The most an attacker can believe about you after the release",
                      xaxis_title="attacker's belief before (prior)",
                      yaxis_title="largest possible belief after (posterior)", **LAYOUT)
    return fig
