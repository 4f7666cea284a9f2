"""Issue 7 item 7: how each mechanism's cost grows with n (and d, and DPMix's ell).

The mechanism's own work (``_release`` on a prepared input, or ``_fit`` and the draw of the rows
for RON-Gauss and PCA-Gauss, so the shared input preparation is left out) is timed in process CPU
seconds (the work done on every thread, insensitive to other processes on a shared machine;
wall-clock medians are kept in the JSON), median of a few runs, for n from 1e4 to 1e6 rows
(d = 100), for d from 25 to 400 (n = 1e5), and for DPMix's ell. The slope of log(time) against
log(n) is fitted on the three largest sizes (where fixed costs no longer dominate) and printed:
1 means linear cost. The
figure is a log-log Plotly chart written to ``benchmarks/results/scaling.html``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_common import Row, time_repeat

RESULTS = Path(__file__).resolve().parent / "results"


def _mechanisms() -> dict[str, tuple[type, dict[str, Any]]]:
    from dpcore import mechanisms

    out: dict[str, tuple[type, dict[str, Any]]] = {
        "RON-Gauss (p=10)": (mechanisms.RONGauss, {"n_components": 10}),
        "PCA-Gauss (p=10)": (mechanisms.PCAGauss, {"n_components": 10}),
        "JL-Laplace (k=20)": (mechanisms.JLLaplace, {"n_components": 20}),
        "DPPro (k=20)": (mechanisms.DPPro, {"n_components": 20}),
    }
    if hasattr(mechanisms, "DPMix"):
        out["DPMix (ell=16, T=n)"] = (mechanisms.DPMix, {"ell": 16, "sigma_x": 1.0})
    return out


def _own_time(cls: type, kwargs: dict[str, Any], X: np.ndarray, repeats: int
              ) -> tuple[float, float]:
    """Median CPU and wall seconds of the mechanism's own work on the prepared ``X``
    (:func:`bench_mechanisms._callables`: ``_release``, or ``_fit`` and the draw of ``n`` rows for
    the generative mechanisms)."""
    from bench_mechanisms import _callables

    _, own = _callables(cls, X, bounds=(0, 1), **kwargs)
    t = time_repeat(own, repeats)
    return t.cpu_median, t.wall_median


def _slope(x: list[float], y: list[float], tail: int = 3) -> float:
    """Least-squares slope of log y on log x over the last ``tail`` points."""
    lx, ly = np.log(np.asarray(x[-tail:], float)), np.log(np.asarray(y[-tail:], float))
    return float(np.polyfit(lx, ly, 1)[0])


def run(ns: list[int], ds: list[int], ells: list[int], n_for_d: int, n_for_ell: int,
        repeats: int, log: Callable[[str], None], dpmix_max_n: int = 300_000
        ) -> tuple[list[Row], dict[str, Any]]:
    """Time every mechanism for each n in ``ns`` (DPMix up to ``dpmix_max_n``: its cost is
    ``T ell d`` with ``T = n``), each d in ``ds`` and each DPMix ``ell``; fit the slopes."""
    rng = np.random.default_rng(0)
    mechs = _mechanisms()
    series: dict[str, dict[str, Any]] = {"n": {}, "d": {}, "ell": {}}
    X_big = rng.random((max(ns), 100))
    for label, (cls, kw) in mechs.items():
        log(f"  {label} vs n ...")
        sizes = [n for n in ns if n <= dpmix_max_n] if label.startswith("DPMix") else ns
        cpu, wall = zip(*[_own_time(cls, kw, X_big[:n], repeats) for n in sizes], strict=True)
        series["n"][label] = {"x": list(sizes), "t": list(cpu), "wall": list(wall),
                              "slope": _slope(sizes, list(cpu))}
    del X_big
    for label, (cls, kw) in mechs.items():
        if label.startswith("DPMix"):
            continue
        log(f"  {label} vs d ...")
        cpu, wall = zip(*[_own_time(cls, kw, rng.random((n_for_d, d)), repeats) for d in ds],
                        strict=True)
        series["d"][label] = {"x": list(ds), "t": list(cpu), "wall": list(wall),
                              "slope": _slope(ds, list(cpu))}
    dpmix = next((v for k, v in mechs.items() if k.startswith("DPMix")), None)
    if dpmix is not None:
        log("  DPMix vs ell ...")
        X = rng.random((n_for_ell, 100))
        cpu, wall = zip(*[_own_time(dpmix[0], {**dpmix[1], "ell": e}, X, repeats) for e in ells],
                        strict=True)
        series["ell"]["DPMix (T=n)"] = {"x": list(ells), "t": list(cpu), "wall": list(wall),
                                        "slope": _slope(ells, list(cpu))}

    rows = []
    for axis, what in (("n", "rows n (d=100)"), ("d", f"features d (n={n_for_d:,})"),
                       ("ell", f"ell (n=T={n_for_ell:,}, d=100)")):
        for label, s in series[axis].items():
            rows.append(Row("scaling", f"scaling: {label} vs {what}", "", None, s["t"][-1], None,
                            None, "slope ~1" if axis == "n" else "",
                            f"log-log slope {s['slope']:.2f} (last 3 points); CPU times "
                            + ", ".join(f"{t:.3g}" for t in s["t"]) + " s",
                            {"slope": s["slope"], "x": s["x"], "t": s["t"]}))
    path = _plot(series, n_for_d, n_for_ell)
    if path:
        log(f"  figure: {path}")
    return rows, series


def _plot(series: dict[str, dict[str, Any]], n_for_d: int, n_for_ell: int) -> Path | None:
    try:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots
    except ImportError:
        return None
    fig = make_subplots(rows=1, cols=3, subplot_titles=(
        "time vs n (d = 100)", f"time vs d (n = {n_for_d:,})", f"DPMix time vs ell (n = T = {n_for_ell:,})"))
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    names = list(series["n"])
    for col, axis in enumerate(("n", "d", "ell"), start=1):
        for label, s in series[axis].items():
            colour = colours[names.index(label) % len(colours)] if label in names else colours[4]
            fig.add_trace(go.Scatter(
                x=s["x"], y=s["t"], mode="lines+markers", line={"color": colour},
                name=f"{label} (slope {s['slope']:.2f})", legendgroup=label,
                showlegend=True), row=1, col=col)
        if series[axis]:  # a slope-1 guide through the first series' last point
            first = next(iter(series[axis].values()))
            x = np.asarray(first["x"], float)
            fig.add_trace(go.Scatter(
                x=x, y=first["t"][-1] * x / x[-1], mode="lines", name="slope 1 (linear)",
                line={"dash": "dot", "color": "grey"}, showlegend=col == 1), row=1, col=col)
        fig.update_xaxes(type="log", title_text=axis, row=1, col=col)
        fig.update_yaxes(type="log", title_text="CPU seconds" if col == 1 else None, row=1, col=col)
    fig.update_layout(title="dp-explorer mechanisms: cost scaling (mechanism only, CPU seconds, "
                      "median of runs, one BLAS thread)",
                      width=1500, height=520)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "scaling.html"
    fig.write_html(path, include_plotlyjs=True)  # self-contained, viewable offline
    return path
