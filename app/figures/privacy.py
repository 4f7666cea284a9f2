"""DPMix privacy figures built from :mod:`dpcore.accounting` (no Streamlit import).

- :func:`epsilon_vs_sigma_figure` — epsilon as a function of the noise ``sigma`` for several mixture
  degrees ``ell`` (the DPMix paper's Fig. 3), the paper's bound (Theorem 1, dashed) next to the tight
  one (solid), with the current setting marked.
- :func:`epsilon_at_order_figure` — the RDP-to-DP objective at each integer order ``alpha``:
  ``T eps'(alpha)`` (composed RDP) plus the conversion term, whose minimum is the reported epsilon
  at ``alpha*``; the paper's and the tight bound side by side.

Both call the accountant vectorised over a modest grid of sigmas or orders, so a page redraws well
under a second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from app.figures.common import readable_log_axes
from dpcore import accounting

__all__ = [
    "BOUND_LABELS",
    "conversion_term",
    "epsilon_at_order_figure",
    "epsilon_vs_sigma_figure",
]

BOUND_LABELS = {
    "paper": "paper (Theorem 1)",
    "tight": "tight (Wang et al. 2019; Canonne et al. 2020)",
}
_DASH = {"tight": "solid", "paper": "dash"}


def conversion_term(alpha: np.ndarray, delta: float, bound: str) -> np.ndarray:
    """The RDP -> (epsilon, delta) conversion added to ``T eps'(alpha)`` (SPEC 6.1), per order.

    ``"paper"``: ``log(1/delta)/(alpha - 1)`` (Mironov 2017, Prop. 3, the paper's eq. 3);
    ``"tight"``: ``log1p(-1/alpha) - log(delta alpha)/(alpha - 1)`` (Canonne, Kamath, Steinke 2020,
    Prop. 12). Evaluated by the accountant's own :func:`dpcore.accounting.rdp_conversion_term`,
    so the figure and the reported epsilon cannot disagree.
    """
    if bound not in BOUND_LABELS:
        raise ValueError(f"bound must be 'tight' or 'paper', got {bound!r}")
    return accounting.rdp_conversion_term(alpha, delta, "improved" if bound == "tight" else "classic")


def epsilon_vs_sigma_figure(
    *,
    n: int,
    n_mixtures: int,
    d_x: int,
    d_y: int,
    delta: float,
    ells: Sequence[int] = (1, 4, 16, 64, 256),
    sigma_range: tuple[float, float] = (0.1, 100.0),
    n_points: int = 32,
    sigma_ratio: float = 1.0,
    bounds: Sequence[str] = ("tight", "paper"),
    current: dict | None = None,
    target_epsilon: float | None = None,
) -> go.Figure:
    """Epsilon vs ``sigma_x`` (``sigma_y = sigma_ratio sigma_x``) for several ``ell`` (paper Fig. 3).

    Parameters
    ----------
    n, n_mixtures, d_x, d_y, delta
        As in :func:`dpcore.accounting.dpmix_epsilon` (``d_y = 0``: unsupervised).
    ells : sequence of int
        Mixture degrees to draw (values above ``n`` are skipped).
    sigma_range, n_points
        Log-spaced sigma grid.
    bounds : sequence of {"tight", "paper"}
        Solid lines for tight, dashed for the paper's Theorem 1.
    current : dict, optional
        ``{"sigma": ..., "epsilon": ..., "ell": ...}``: the release being configured, marked
        with a star.
    target_epsilon : float, optional
        Horizontal line at the target.

    Returns
    -------
    plotly.graph_objects.Figure
        Log-log axes; hover shows ell, sigma and epsilon.
    """
    sigmas = np.geomspace(sigma_range[0], sigma_range[1], n_points)
    ell_arr = np.array([int(e) for e in ells if 1 <= e <= n])
    # one vectorised accountant call per bound: (n_ells, n_points) settings
    grids = {bound: np.asarray(accounting.dpmix_epsilon(
        sigma_x=sigmas[None, :], sigma_y=(sigma_ratio * sigmas if d_y else None), ell=ell_arr[:, None],
        n=n, n_mixtures=n_mixtures, d_x=d_x, d_y=d_y, delta=delta, bound=bound).epsilon, dtype=float)
        for bound in bounds}
    fig = go.Figure()
    colors = qualitative.Plotly
    for k, ell in enumerate(ell_arr):
        for bound in bounds:
            eps = np.broadcast_to(grids[bound], (ell_arr.size, sigmas.size))[k]
            keep = np.isfinite(eps) & (eps > 0)
            fig.add_trace(go.Scatter(
                x=sigmas[keep], y=eps[keep], mode="lines",
                name=f"ℓ = {ell}" + (f", {bound}" if len(bounds) > 1 else ""),
                legendgroup=f"ell{ell}",
                line={"color": colors[k % len(colors)], "dash": _DASH.get(bound, "solid")},
                hovertemplate=f"ℓ = {ell} ({bound})<br>σ = %{{x:.4g}}<br>ε = %{{y:.4g}}<extra></extra>",
            ))
    if target_epsilon is not None and math.isfinite(target_epsilon):
        fig.add_hline(y=target_epsilon, line={"color": "gray", "dash": "dot", "width": 1},
                      annotation_text=f"target ε = {target_epsilon:g}")
    if current and current.get("sigma") and math.isfinite(current.get("epsilon", math.inf)):
        fig.add_trace(go.Scatter(
            x=[current["sigma"]], y=[current["epsilon"]], mode="markers", name="this release",
            marker={"symbol": "star", "size": 14, "color": "black"},
            hovertemplate=(f"this release: ℓ = {current.get('ell', '?')}<br>σ = %{{x:.4g}}"
                           "<br>ε = %{y:.4g}<extra></extra>"),
        ))
    fig.update_xaxes(type="log", title="σ_X (noise std, features in [0, 1] units)")
    fig.update_yaxes(type="log", title=f"ε (at δ = {delta:.3g})")
    fig.update_layout(
        height=420, margin={"l": 10, "r": 10, "t": 40, "b": 10},
        title={"text": f"ε vs σ (n = {n:,}, T = {n_mixtures:,}, d_X = {d_x}, d_Y = {d_y}, "
                       f"σ_Y = {sigma_ratio:g} σ_X)", "font": {"size": 13}},
        legend={"font": {"size": 11}},
    )
    return readable_log_axes(fig)


def _order_grid(alpha_star: float, max_order: int | None, n_points: int) -> np.ndarray:
    top = max_order or int(min(max(4 * alpha_star, 64), 200_000))
    grid = np.unique(np.round(np.geomspace(2, top, n_points)).astype(np.int64))
    return np.unique(np.append(grid, int(alpha_star)))


def epsilon_at_order_figure(
    *,
    sigma_x: float,
    sigma_y: float,
    ell: int,
    n: int,
    n_mixtures: int,
    d_x: int,
    d_y: int,
    delta: float,
    bounds: Sequence[str] = ("paper", "tight"),
    max_order: int | None = None,
    n_points: int = 300,
) -> go.Figure:
    """The objective ``T eps'(alpha) + conversion(alpha)`` vs the order, one panel per bound.

    Each panel shows the composed RDP ``T eps'(alpha)`` (rising), the conversion term (falling) and
    their sum, whose minimum over integer orders is the epsilon reported by the accountant; the
    minimiser ``alpha*`` is marked. Orders are an integer log-grid from 2 to ``max_order`` (default
    ``4 alpha*``) plus ``alpha*`` itself; the accountant scans every integer order.

    Returns
    -------
    plotly.graph_objects.Figure
        Log x-axis (order), log y-axis (epsilon), panels side by side.
    """
    fig = make_subplots(rows=1, cols=len(bounds), shared_yaxes=True,
                        subplot_titles=[BOUND_LABELS.get(b, b) for b in bounds])
    common = dict(sigma_x=sigma_x, sigma_y=sigma_y if d_y else None, ell=ell, n=n, d_x=d_x, d_y=d_y)
    for col, bound in enumerate(bounds, start=1):
        best = accounting.dpmix_epsilon(n_mixtures=n_mixtures, delta=delta, bound=bound, **common)
        eps_star = float(np.asarray(best.epsilon))
        a_star = float(np.asarray(best.alpha))
        alphas = _order_grid(a_star, max_order, n_points)
        rdp = n_mixtures * np.asarray(accounting.dpmix_rdp(alphas, bound=bound, **common), dtype=float)
        conv = conversion_term(alphas, delta, bound)
        total = rdp + conv
        show = col == 1
        for y, name, style in ((rdp, "T·ε′(α): composed RDP", {"color": "#1f77b4"}),
                               (conv, "conversion term", {"color": "#2ca02c", "dash": "dot"}),
                               (total, "ε(α) = sum", {"color": "#d62728", "width": 3})):
            ok = np.isfinite(y) & (y > 0)
            fig.add_trace(go.Scatter(
                x=alphas[ok], y=y[ok], mode="lines", name=name, line=style, legendgroup=name,
                showlegend=show, hovertemplate="α = %{x}<br>%{y:.4g}<extra>" + name + "</extra>",
            ), row=1, col=col)
        # the label reads away from the nearer end of the order axis, so it stays inside the chart
        left_half = math.log(a_star) <= (math.log(alphas.min()) + math.log(alphas.max())) / 2
        fig.add_trace(go.Scatter(
            x=[a_star], y=[eps_star], mode="markers+text", text=[f"α* = {a_star:.0f}, ε = {eps_star:.4g}"],
            textposition="top right" if left_half else "top left",
            marker={"size": 11, "color": "black", "symbol": "x"},
            name="minimum", legendgroup="min", showlegend=show,
            hovertemplate="α* = %{x}<br>ε = %{y:.4g}<extra></extra>",
        ), row=1, col=col)
        fig.update_xaxes(type="log", title="order α", row=1, col=col)
    fig.update_yaxes(type="log", title="ε (privacy loss)", row=1, col=1)
    fig.update_layout(
        height=420, margin={"l": 10, "r": 10, "t": 50, "b": 10},
        legend={"orientation": "h", "y": -0.2, "font": {"size": 11}},
    )
    return readable_log_axes(fig)
