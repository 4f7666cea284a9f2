"""Utility page: train on the release, test on real held-out rows, across a grid of epsilon or p."""

from __future__ import annotations

import streamlit as st

from app import state
from app.controls import initial, mechanism_controls
from app.explain import HOW, intro
from app.figures.utility import METRIC_LABELS, utility_curve_figure
from app.markdown import md_escape
from dpcore.evaluation import (
    NOT_DP_NOTICE,
    evaluation_problem,
    exploration_csv,
    exploration_filename,
    null_verdict,
    utility_sweep,
)
from dpcore.mechanisms import get_mechanism

st.title("Utility")
ds = state.dataset()
name = st.session_state.mechanism
mech = get_mechanism(name)
metric_text = {
    "classification": "SVM and logistic-regression accuracy on real held-out rows",
    "regression": "kernel ridge RMSE on real held-out rows (with the random-guess RMSE)",
    "unsupervised": "clustering: silhouette of the release (the papers' metric), silhouette of the "
                    "real rows under the release's K-means, and ARI against K-means on real data, "
                    "next to the ARI of isotropic noise of the release's scale (the null: a release "
                    "with no structure; only an ARI clearly above it means the release kept clusters)",
}[ds.task]
intro("utility")
st.caption(f"**{mech.title}** on *{md_escape(st.session_state.dataset_label)}*. These utility numbers are "
           f"{NOT_DP_NOTICE}: they guide the custodian's choice of settings and are not to be published.")
with st.expander(HOW):
    st.markdown(f"The metric: {metric_text}. Each point is the mean over trials with a 95% interval "
                "(bootstrap over trials; for accuracies also the Wilson interval of the test "
                "predictions); hollow points are not distinguishable from the chance level (dotted); the "
                "dashed line is the same model trained on the real training rows (non-private).")
problem = evaluation_problem(mech, ds.task)
if problem:
    st.warning(md_escape(f"{name} cannot be evaluated here: {problem}."))
    st.stop()

with st.expander("Mechanism parameters (shared with Explore)"):
    params = mechanism_controls(mech, ds)

axes = ["epsilon"] + [a for a in ("n_components", "ell") if any(p.name == a for p in mech.params)]
c1, c2, c3 = st.columns(3)
axis = c1.radio("Sweep", axes, horizontal=True, key="p:utility_axis", **initial("p:utility_axis"))
trials = c2.slider("Trials per point", 1, 10, key="p:utility_trials", **initial("p:utility_trials",
                                                                                  "value", 3))
if axis == "epsilon":
    grid = c3.multiselect("ε grid", [0.01, 0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 50.0, 100.0], wrap=True,
                          key="p:utility_eps", **initial("p:utility_eps", "default",
                                                         [0.1, 0.5, 1.0, 2.0, 5.0, 10.0]))
elif axis == "ell":
    grid = c3.multiselect("ℓ grid (mixture degree)", [1, 2, 4, 8, 16, 32, 64, 128, 256], wrap=True,
                          key="p:utility_ell", **initial("p:utility_ell", "default", [1, 4, 16, 64]))
else:
    top = max(1, ds.n_features - 1)
    default = sorted({v for v in (1, 2, 5, 10, 20, 40) if v <= top})
    grid = c3.multiselect("p grid", list(range(1, top + 1)), key="p:utility_p", wrap=True,
                          **initial("p:utility_p", "default", default))
grid = sorted(grid)
fixed = {k: v for k, v in params.items() if k != axis}

key = ("utility", ds.fingerprint, name, repr(sorted(fixed.items())), axis, tuple(grid), trials,
       st.session_state["p:test_size"])
cache = st.session_state.setdefault("_utility_results", {})
if st.button("Run sweep", type="primary", disabled=not grid):
    bar = st.progress(0.0, "non-private baseline")

    def progress(done: int, total: int, message: str) -> None:
        bar.progress(done / total, message)

    try:
        cache[key] = utility_sweep(
            lambda v: mech(**{**fixed, axis: v}), state.split(), grid, param=axis, trials=trials,
            random_state=0, progress=progress,
        )
    except ValueError as exc:
        st.error(md_escape(exc))
    bar.empty()

df = cache.get(key)
if df is None:
    st.info("Choose a grid and press **Run sweep** (results are kept for this session).")
else:
    metrics = [m for m in dict.fromkeys(df["metric"]) if m not in ("k", "ari_null")]
    cols = st.columns(min(2, len(metrics)))
    for i, metric in enumerate(metrics):
        shown = [metric, "ari_null"] if metric == "ari_real" and "ari_null" in set(df["metric"]) else metric
        cols[i % len(cols)].plotly_chart(
            utility_curve_figure(df, shown, title=METRIC_LABELS.get(metric, metric)
                                 + (" against the null (isotropic noise)" if shown != metric else ""),
                                 subtitle=NOT_DP_NOTICE),
            key=f"utility_{metric}")
    if "ari_null" in set(df["metric"]):
        st.markdown(md_escape(null_verdict(df)))
    st.warning(f"The table and its download are **{NOT_DP_NOTICE}**.",
               icon=":material/science:")
    with st.container(key="wide-utility-numbers"):  # every number: a grid to scroll sideways
        st.dataframe(df, hide_index=True)
    st.download_button("Download the numbers (CSV, NOT differentially private)",
                       exploration_csv(df, f"dp-explorer Utility of {name}"),
                       exploration_filename(f"utility-{name}"), "text/csv")
