"""Figures for distance recovery from noisy projections (JL-Laplace, DPPro). No Streamlit import.

* :func:`recovery_histogram_figure` - recovered minus true squared distance, with the theoretical
  normal approximation and the mean (JL paper Fig. 3).
* :func:`l2_error_vs_k_figure` - DPPro eq. 12 L2 error against the projected dimension, ``k_opt``
  marked (DPPro Fig. 3).
* :func:`variance_vs_k_figure` - ``Var D`` against ``k`` and its three terms (DPPro Thm 3 /
  SPEC section 4), ``k_opt`` marked.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.figures.common import readable_log_axes
from dpcore.distances import distance_variance, jl_claim7_variance

__all__ = [
    "LAYOUT",
    "best_k_text",
    "l2_error_vs_k_figure",
    "normal_mixture_density",
    "recovery_histogram_figure",
    "variance_vs_k_figure",
]

LAYOUT = {"height": 380, "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
          "legend": {"orientation": "h", "y": -0.2}}


def normal_mixture_density(grid: np.ndarray, variances: np.ndarray, mean: float = 0.0) -> np.ndarray:
    """Average of the ``N(mean, v)`` densities over ``variances``, on ``grid``.

    The theoretical distribution of ``recovered - true`` over pairs with different distances (each
    pair approximately normal with its own variance, JL paper Fig. 3). Zero variances are skipped.
    """
    v = np.asarray(variances, dtype=float).ravel()
    v = v[v > 0]
    if v.size == 0:
        return np.zeros_like(np.asarray(grid, dtype=float))
    g = np.asarray(grid, dtype=float)[:, None]
    dens = np.exp(-0.5 * (g - mean) ** 2 / v) / np.sqrt(2 * np.pi * v)
    return dens.mean(axis=1)


def recovery_histogram_figure(differences: np.ndarray, variances: np.ndarray | None = None, *,
                              title: str = "Recovered minus true squared distance",
                              nbins: int = 60) -> go.Figure:
    """Histogram (density) of ``recovered - true`` squared distances with the normal approximation.

    Parameters
    ----------
    differences : ndarray (m,)
        ``D(z_i, z_j) - ||x_i - x_j||^2`` per pair (:class:`dpcore.distances.DistanceExperiment`).
    variances : ndarray (m,), optional
        Theoretical ``Var D`` per pair; the curve is the average of ``N(0, Var_p)`` densities.
    """
    diff = np.asarray(differences, dtype=float).ravel()
    fig = go.Figure()
    fig.add_trace(go.Histogram(x=diff, histnorm="probability density", nbinsx=nbins,
                               name="recovered - true", marker={"color": "rgba(31,119,180,0.6)"}))
    if variances is not None and diff.size:
        spread = max(np.ptp(diff), 6 * float(np.sqrt(np.mean(variances))))
        grid = np.linspace(diff.mean() - spread, diff.mean() + spread, 400)
        fig.add_trace(go.Scatter(x=grid, y=normal_mixture_density(grid, np.asarray(variances)),
                                 mode="lines", name="theory: N(0, Var D) averaged over pairs",
                                 line={"color": "#d62728"}))
    mean = float(diff.mean()) if diff.size else 0.0
    # zero is the axis tick's: an annotation of its own sat on the mean's whenever the mean is near 0
    fig.add_vline(x=0.0, line={"color": "black", "dash": "dot"})
    fig.add_vline(x=mean, line={"color": "#2ca02c"}, annotation_text=f"mean {mean:.3g}",
                  annotation_position="top left")
    fig.update_layout(title=title, xaxis_title="recovered − true squared distance (feature units²)",
                      yaxis_title="density", bargap=0.02, **LAYOUT)
    return fig


def l2_error_vs_k_figure(ks: np.ndarray, l2_errors: np.ndarray, *, predicted: np.ndarray | None = None,
                         k_opt: float | None = None, title: str = "L2 error (DPPro eq. 12) vs k"
                         ) -> go.Figure:
    """Measured L2 error per ``k`` (and the expected one from the variance formula), ``k_opt`` marked.

    ``l2_errors`` may be ``(len(ks),)`` or ``(n_trials, len(ks))`` (then mean and min-max band).
    """
    ks = np.asarray(ks, dtype=float)
    err = np.atleast_2d(np.asarray(l2_errors, dtype=float))
    fig = go.Figure()
    if err.shape[0] > 1:
        fig.add_trace(go.Scatter(x=np.concatenate([ks, ks[::-1]]),
                                 y=np.concatenate([err.max(0), err.min(0)[::-1]]), fill="toself",
                                 mode="lines", line={"width": 0}, fillcolor="rgba(31,119,180,0.2)",
                                 name="range over trials", hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=ks, y=err.mean(0), mode="lines+markers", name="measured",
                             line={"color": "#1f77b4"}))
    if predicted is not None:
        fig.add_trace(go.Scatter(x=ks, y=np.asarray(predicted, dtype=float), mode="lines",
                                 name="expected (ΣVar D / Σρ⁴)",
                                 line={"color": "#d62728", "dash": "dash"}))
    _mark_k_opt(fig, k_opt, ks)
    fig.update_layout(title=title, xaxis_title="projected dimension k",
                      yaxis_title="L2 error ‖Ũ² − U²‖² / ‖U²‖² (no unit)",
                      yaxis_type="log", **LAYOUT)
    return readable_log_axes(fig)


def variance_vs_k_figure(ks: np.ndarray, rho2: float, noise_variance: float | np.ndarray,
                         noise: str = "gaussian", *, k_opt: float | None = None,
                         show_claim7: bool = False, title: str | None = None) -> go.Figure:
    """``Var D`` of a recovered squared distance ``rho^2`` against ``k``, with its three terms.

    ``noise_variance`` is a scalar (DPPro: sigma does not depend on k) or one value per ``k``
    (JL-Laplace: ``2 b^2`` grows with ``k``). ``show_claim7`` adds the JL paper's (wrong) Claim 7.
    """
    ks = np.asarray(ks, dtype=float)
    s2 = np.broadcast_to(np.asarray(noise_variance, dtype=float), ks.shape)
    total = distance_variance(rho2, ks, s2, noise)  # type: ignore[arg-type]
    c4 = 8.0 if noise == "gaussian" else 14.0
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=ks, y=total, mode="lines", name="Var D", line={"color": "#1f77b4",
                                                                            "width": 3}))
    for y, label in ((2 * rho2**2 / ks, "2ρ⁴/k (projection)"),
                     (8 * s2 * rho2, "8σ²ρ² (cross term)"),
                     (c4 * ks * s2**2, f"{c4:g}kσ⁴ (noise)")):
        fig.add_trace(go.Scatter(x=ks, y=y, mode="lines", name=label, line={"dash": "dot"}))
    if show_claim7:
        fig.add_trace(go.Scatter(x=ks, y=jl_claim7_variance(rho2, ks, s2), mode="lines",
                                 name="JL paper Claim 7 (wrong)", line={"color": "grey", "dash": "dash"}))
    _mark_k_opt(fig, k_opt, ks)
    heading = title or f"Variance at the median ρ² = {rho2:.3g}"
    fig.update_layout(title=heading, xaxis_title="projected dimension k",
                      yaxis_title="variance (squared-distance units²)", yaxis_type="log", **LAYOUT)
    return readable_log_axes(fig)


def best_k_text(k_opt: float | None, ks: np.ndarray | None = None) -> str | None:
    """``k_opt`` in words: a whole number of dimensions in the range shown, or why there is none.

    The formula (DPPro Lemma 5) gives a real number; a projection has a whole number k >= 1 of
    dimensions, so "k_opt = 0.10" is shown as "best k = 1 (the noise dominates at every k)".
    """
    if k_opt is None or not np.isfinite(k_opt):
        return None
    if k_opt < 1:
        return f"best k = 1 (formula: {k_opt:.2g} < 1, the noise dominates at every k)"
    top = None if ks is None or not len(ks) else float(np.max(ks))
    if top is not None and k_opt > top:
        return f"best k > {top:g} (formula: {k_opt:.3g})"
    return f"best k ≈ {round(float(k_opt))}"


def _mark_k_opt(fig: go.Figure, k_opt: float | None, ks: np.ndarray | None = None) -> None:
    text = best_k_text(k_opt, ks)
    if text is None:
        return
    top = None if ks is None or not len(ks) else float(np.max(ks))
    x = min(max(float(k_opt), 1.0), top) if top is not None else max(float(k_opt), 1.0)
    # the short form on the chart (the reason, if any, is the page's caption): a long label ran out
    # of a half-width chart and over its title at 1280 px
    right = top is None or x <= top / 2  # the label reads into the chart (a linear k axis)
    fig.add_vline(x=x, line={"color": "#2ca02c", "dash": "dash"}, annotation_text=text.split(" (")[0],
                  annotation_position="top right" if right else "top left")
