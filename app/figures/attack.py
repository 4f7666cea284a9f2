"""Figures of the Attack page: the attack's ROC curve against what (epsilon, delta)-DP allows
(no Streamlit import)."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from dpcore.attacks import AttackResult, dp_tradeoff_curve

__all__ = [
    "LAYOUT",
    "roc_figure",
    "score_histogram_figure",
]

LAYOUT = {"height": 440, "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
          "legend": {"orientation": "h", "y": -0.18}}


def roc_figure(res: AttackResult, grid: int = 401) -> go.Figure:
    """The attack's ROC curve (TPR against FPR), the best curve any attack can reach against the
    claimed (epsilon, delta) — ``TPR <= min(e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR))`` — and
    the same curve at the empirical epsilon, plus the coin-flip diagonal. Linear axes."""
    fpr = np.linspace(0.0, 1.0, grid)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="coin flip",
                             line={"color": "black", "dash": "dot", "width": 1}))
    claim = res.claimed_epsilon
    if math.isfinite(claim):
        fig.add_trace(go.Scatter(
            x=fpr, y=dp_tradeoff_curve(fpr, claim, res.delta), mode="lines",
            name=f"most any attack can reach at the claimed ε = {claim:.3g}"
                 + (f", δ = {res.delta:.0e}" if res.delta else ""),
            line={"color": "#2ca02c", "width": 3}, fill="tonexty", fillcolor="rgba(44,160,44,0.08)"))
    lb = res.lower_bound.epsilon
    fig.add_trace(go.Scatter(
        x=fpr, y=dp_tradeoff_curve(fpr, lb, res.delta), mode="lines",
        name=f"curve of the empirical ε ≥ {lb:.2f} (95%)", line={"color": "#ff7f0e", "dash": "dash"}))
    fig.add_trace(go.Scatter(
        x=res.fpr, y=res.tpr, mode="lines", name=f"this attack (AUC {res.auc:.2f})",
        line={"color": "#d62728", "width": 3, "shape": "hv"}))
    fig.update_layout(
        title=f"Attack ROC ({res.trials} releases per world) against what ε allows",
        xaxis={"title": "false-positive rate (says IN when the target is OUT)", "range": [0, 1]},
        yaxis={"title": "true-positive rate (says IN when it is IN)", "range": [0, 1.02]},
        **LAYOUT)
    return fig


def score_histogram_figure(res: AttackResult) -> go.Figure:
    """Histograms of the attack score in the two worlds, with the chosen threshold."""
    fig = go.Figure()
    both = np.concatenate([res.scores_out, res.scores_in])
    finite = both[np.isfinite(both)]
    for scores, name, color in ((res.scores_out, "target OUT", "#1f77b4"),
                                (res.scores_in, "target IN", "#d62728")):
        fig.add_trace(go.Histogram(x=np.clip(scores, finite.min(), finite.max()) if finite.size else scores,
                                   name=name, opacity=0.55, marker={"color": color}, nbinsx=40))
    fig.add_vline(x=res.lower_bound.threshold, line={"dash": "dash", "color": "black"},
                  annotation_text="best threshold")
    # scores are often of order 1e-4: powers of ten, not SI prefixes ("500μ" read as a unit); the
    # legend sits below the axis title (the shorter figure needs a lower legend than LAYOUT's)
    fig.update_layout(barmode="overlay", title="Attack score in the two worlds",
                      xaxis={"title": f"attack score ({res.statistic}; larger: says IN)",
                             "exponentformat": "power"},
                      yaxis_title="releases",
                      **{**LAYOUT, "height": 340, "legend": {**LAYOUT["legend"], "y": -0.32}})
    return fig
