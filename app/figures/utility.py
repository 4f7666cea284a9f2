"""Plotly figures for utility sweeps and synthetic images (no Streamlit import).

``utility_curve_figure`` plots the tidy frame of :func:`dpcore.evaluation.utility_sweep`;
``image_grid_figure`` shows released rows as images (RON-Gauss paper, Fig. 3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.figures.common import log_ticks

__all__ = ["image_grid_figure", "utility_curve_figure"]

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")

METRIC_LABELS = {
    "svm_accuracy": "SVM accuracy",
    "logreg_accuracy": "logistic regression accuracy",
    "krr_rmse": "kernel ridge RMSE",
    "silhouette_release": "silhouette (release)",
    "silhouette_real": "silhouette (real rows)",
    "ari_real": "ARI vs real clustering",
    "ari_null": "ARI of isotropic noise (null)",
    "k": "clusters chosen",
}


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i: i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def utility_curve_figure(
    df: pd.DataFrame,
    metric: str | Sequence[str] | None = None,
    *,
    series: str | None = None,
    log_x: bool | None = None,
    x_label: str | None = None,
    y_label: str | None = None,
    title: str | None = None,
    subtitle: str | None = None,
    show_chance: bool = True,
) -> go.Figure:
    """Utility against the swept parameter: mean line, 95% band, dashed non-private baseline.

    Parameters
    ----------
    df : DataFrame
        Output of :func:`dpcore.evaluation.utility_sweep` (columns ``param, x, metric, mean, lo, hi,
        baseline`` and optionally ``chance``); several sweeps can be concatenated with a column
        named by ``series`` (e.g. ``"mechanism"``) to compare them.
    metric : str or list of str, optional
        Metric(s) to show (default: all in ``df`` except ``k``).
    series : str, optional
        Column distinguishing several curves per metric.
    log_x : bool, optional
        Default: log axis when the swept parameter is ``epsilon``. Infinite x values (NOT PRIVATE
        runs) are not plotted on the curve.
    subtitle : str, optional
        Second title line, e.g. :data:`dpcore.evaluation.NOT_DP_NOTICE`.
    show_chance : bool
        Dotted line at the chance level (majority class / random-guess RMSE) when available.
        Points whose interval contains it (``vs_chance`` "not distinguishable ...") are drawn
        hollow and say so on hover.

    Returns
    -------
    plotly.graph_objects.Figure
    """
    if df.empty:
        raise ValueError("the utility frame is empty")
    metrics = ([metric] if isinstance(metric, str) else list(metric)) if metric is not None \
        else [m for m in dict.fromkeys(df["metric"]) if m != "k"]
    param = str(df["param"].iloc[0]) if "param" in df else "x"
    if log_x is None:
        log_x = param == "epsilon"
    data = df[df["metric"].isin(metrics)].copy()
    data["x"] = pd.to_numeric(data["x"], errors="coerce")
    data = data[np.isfinite(data["x"])]
    groups = [(None, data)] if series is None else list(data.groupby(series, sort=False))
    fig = go.Figure()
    i = 0
    for m in metrics:
        for key, part in groups:
            rows = part[part["metric"] == m].sort_values("x")
            if rows.empty:
                continue
            color = PALETTE[i % len(PALETTE)]
            i += 1
            name = METRIC_LABELS.get(m, m) + ("" if key is None else f" — {key}")
            band = rows.dropna(subset=["lo", "hi"])
            if not band.empty:
                fig.add_trace(go.Scatter(
                    x=np.concatenate([band["x"].to_numpy(), band["x"].to_numpy()[::-1]]),
                    y=np.concatenate([band["hi"].to_numpy(), band["lo"].to_numpy()[::-1]]),
                    mode="lines", fill="toself", fillcolor=_rgba(color, 0.18), line={"width": 0},
                    hoverinfo="skip", showlegend=False, name=name + " 95% interval",
                ))
            verdict = (rows["vs_chance"].fillna("") if "vs_chance" in rows
                       else pd.Series("", index=rows.index))
            at_chance = verdict.str.startswith("not distinguishable").to_numpy()
            fig.add_trace(go.Scatter(
                x=rows["x"], y=rows["mean"], mode="lines+markers", name=name,
                line={"color": color, "width": 2},
                marker={"size": 8, "symbol": np.where(at_chance, "circle-open", "circle").tolist(),
                        "line": {"width": 2, "color": color}},
                customdata=np.column_stack([rows["lo"], rows["hi"], verdict]),
                hovertemplate=f"{_axis_title(param)} = %{{x}}<br>mean %{{y:.4g}}<br>95% interval: "
                              "[%{customdata[0]:.4g}, %{customdata[1]:.4g}]<br>%{customdata[2]}"
                              "<extra>" + name + "</extra>",
            ))
        base = data.loc[data["metric"] == m, "baseline"].dropna()
        xs = [data["x"].min(), data["x"].max()]
        if not base.empty:
            fig.add_trace(go.Scatter(
                x=xs, y=[float(base.iloc[0])] * 2, mode="lines",
                name=f"{METRIC_LABELS.get(m, m)} — non-private",
                line={"color": "black", "dash": "dash", "width": 1.5},
            ))
        if show_chance and "chance" in data:
            chance = data.loc[data["metric"] == m, "chance"].dropna()
            if not chance.empty:
                fig.add_trace(go.Scatter(
                    x=xs, y=[float(chance.iloc[0])] * 2, mode="lines",
                    name="chance" if m != "krr_rmse" else "random guess",
                    line={"color": "grey", "dash": "dot", "width": 1},
                ))
    heading = {"text": title or "", "subtitle": {"text": subtitle or ""}}
    fig.update_layout(
        title=heading, height=440,
        margin={"l": 10, "r": 10, "t": 30 + 25 * bool(title) + 20 * bool(subtitle), "b": 10},
        xaxis_title=x_label or _axis_title(param),
        yaxis_title=y_label or (_metric_axis_title(metrics[0]) if len(metrics) == 1 else "utility"),
        legend={"orientation": "h", "y": -0.22},
    )
    if all(m in FRACTION_METRICS for m in metrics):
        fig.update_yaxes(range=[0, 1.02], tickformat=".0%")
    if log_x:
        fig.update_xaxes(type="log", **log_ticks(data["x"].min(), data["x"].max()))
    return fig


#: Metrics that are proportions (plotted on a fixed 0-100 % axis).
FRACTION_METRICS = ("svm_accuracy", "logreg_accuracy")
_AXIS_TITLES = {"epsilon": "privacy budget ε (log scale)", "n_components": "dimensions p",
                "ell": "mixture degree ℓ (rows per mixture)"}


def _axis_title(param: str) -> str:
    return _AXIS_TITLES.get(param, param.replace("_", " "))


def _metric_axis_title(metric: str) -> str:
    """The y axis of one metric's chart: what is measured and its unit (the chart's title names the
    model; with it, "logistic regression accuracy on real held-out rows (%)" was taller than a
    440 px chart and ran over its title)."""
    if metric in FRACTION_METRICS:
        return "accuracy on held-out rows (%)"
    if metric == "krr_rmse":
        return "RMSE on held-out rows (label units)"
    return METRIC_LABELS.get(metric, metric)


def image_grid_figure(
    images: np.ndarray,
    shape: Sequence[int],
    titles: Sequence[str] | None = None,
    *,
    n_cols: int = 10,
    normalize: bool = True,
    title: str | None = None,
    colorscale: str = "gray",
) -> go.Figure:
    """A grid of images (rows of ``images`` reshaped to ``shape``) as one heatmap mosaic.

    Parameters
    ----------
    images : array (m, h*w)
        E.g. reconstructed RON-Gauss rows (``reconstruct=True``) or real rows for comparison.
    shape : (h, w)
    titles : list of str, optional
        One caption per image (e.g. the class label), drawn above it.
    n_cols : int
        Images per row.
    normalize : bool
        Min-max scale each image to [0, 1] (released images have arbitrary units and may be
        negative; RON-Gauss reconstructions live in the normalised space).
    colorscale : str
        Plotly colourscale (``"gray"``: dark = low).

    Raises
    ------
    ValueError
        If a row does not have ``h * w`` values.
    """
    h, w = (int(v) for v in shape)
    imgs = np.asarray(images, dtype=float)
    if imgs.ndim == 1:
        imgs = imgs[None, :]
    if imgs.shape[1] != h * w:
        raise ValueError(f"each image needs {h * w} values for shape {(h, w)}, got {imgs.shape[1]}")
    m = imgs.shape[0]
    imgs = imgs.reshape(m, h, w)
    if normalize:
        lo = imgs.min(axis=(1, 2), keepdims=True)
        span = imgs.max(axis=(1, 2), keepdims=True) - lo
        imgs = (imgs - lo) / np.where(span > 0, span, 1.0)
    cols = max(1, min(n_cols, m))
    rows = math.ceil(m / cols)
    gap = max(1, h // 8)
    mosaic = np.full((rows * (h + gap) - gap, cols * (w + gap) - gap), np.nan)
    for k in range(m):
        r, c = divmod(k, cols)
        mosaic[r * (h + gap): r * (h + gap) + h, c * (w + gap): c * (w + gap) + w] = imgs[k]
    fig = go.Figure(go.Heatmap(z=mosaic, colorscale=colorscale, showscale=False, hoverinfo="skip"))
    if titles is not None:
        for k, text in enumerate(list(titles)[:m]):
            r, c = divmod(k, cols)
            fig.add_annotation(x=c * (w + gap) + (w - 1) / 2, y=r * (h + gap) - 0.6, text=str(text),
                               showarrow=False, font={"size": 10}, yanchor="bottom")
    fig.update_xaxes(visible=False, constrain="domain")
    fig.update_yaxes(visible=False, autorange="reversed", scaleanchor="x")
    fig.update_layout(
        title=title, height=max(160, 90 * rows + 40), plot_bgcolor="white",
        margin={"l": 5, "r": 5, "t": 40 if title else 20, "b": 5},
    )
    return fig
