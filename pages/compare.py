"""Compare page: privacy-utility frontiers of several mechanisms on the same data and split."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app import state
from app.controls import initial, stored_params
from app.explain import HOW, intro
from app.figures.utility import METRIC_LABELS, utility_curve_figure
from app.markdown import md_escape
from dpcore.evaluation import (
    NOT_DP_NOTICE,
    best_per_value,
    evaluate_non_private,
    evaluation_problem,
    exploration_csv,
    exploration_filename,
    utility_sweep,
)
from dpcore.mechanisms import MECHANISMS, get_mechanism
from dpcore.release import KIND_TEXT, NEIGHBOURING_TEXT

st.title("Compare mechanisms")
ds = state.dataset()
names = state.mechanism_names(ds.task)
intro("compare")
with st.expander(HOW):
    st.markdown(
        f"Utility against ε for several mechanisms on *{md_escape(st.session_state.dataset_label)}* "
        f"(task: {ds.task}), trained on the release and tested on the same real held-out rows. Each "
        "mechanism uses the parameters last set for it on the Explore page (defaults otherwise).")

problems = {n: evaluation_problem(MECHANISMS[n], ds.task) for n in names}
recommended = state.recommendation(ds)["mechanism"]
# the recommended mechanism first (with its recommended settings), then the others
evaluable = sorted((n for n in names if problems[n] is None), key=lambda n: n != recommended)
c1, c2, c3 = st.columns([2, 2, 1])
chosen = c1.multiselect("Mechanisms", names, key="p:compare_mechs", wrap=True,
                        **initial("p:compare_mechs", "default", evaluable[: min(4, len(evaluable))]))
grid = sorted(c2.multiselect("ε grid", [0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0],
                             key="p:compare_eps", wrap=True,
                             **initial("p:compare_eps", "default", [0.1, 0.5, 1.0, 5.0, 10.0])))
trials = c3.number_input("Trials", 1, 20, key="p:compare_trials",
                         **initial("p:compare_trials", "value", 3),
                         help="Releases per ε and mechanism. The 95% intervals are bootstrap "
                              "percentile intervals over trials, widened for accuracies to the "
                              "Wilson interval of the test predictions: they stay inside [0, 1].")
for n in [n for n in names if problems[n]]:
    st.caption(f"Not in the default selection: **{n}**: {problems[n]}.")

settings_key = (ds.fingerprint, st.session_state["p:test_size"], tuple(grid), int(trials))
results: dict = st.session_state.setdefault("_compare_results", {})


def result_key(name: str) -> tuple:
    return (*settings_key, name, repr(sorted(stored_params(get_mechanism(name)).items())))


errors: dict = st.session_state.setdefault("_compare_errors", {})
for n in chosen:
    if problems.get(n) and result_key(n) not in results:  # never run a sweep that must fail
        results[result_key(n)] = pd.DataFrame()
        errors[result_key(n)] = problems[n]
todo = [n for n in chosen if result_key(n) not in results]
b1, b2 = st.columns([1, 5])
run = b1.button("Run sweep", type="primary", disabled=not (chosen and grid))
status = b2.empty()  # the "To compute" caption and the Stop button live here, only until done
if todo and not run:
    status.caption(f"To compute: {', '.join(todo)}. Finished mechanisms are kept, so pressing any "
                   "other control interrupts a sweep without losing them.")
if run and todo:
    with status.container():
        st.caption(f"Computing: {', '.join(todo)}. Finished mechanisms are kept.")
        st.button("Stop")
    train_test = state.split()
    bar = st.progress(0.0, "non-private baseline")
    base_key = ("compare-baseline", *settings_key[:2])
    baseline = state.memo(base_key, lambda: evaluate_non_private(
        *train_test, ds.task, bounds=train_test[0].bounds, label_bounds=train_test[0].label_bounds))
    for i, name in enumerate(todo):
        mech = get_mechanism(name)
        params = {k: v for k, v in stored_params(mech).items() if k != "epsilon"}

        def progress(done: int, total: int, message: str, i: int = i, name: str = name) -> None:
            bar.progress((i + done / total) / len(todo), f"{name}: {message}")

        try:
            df = utility_sweep(lambda eps, mech=mech, params=params: mech(epsilon=eps, **params),
                               train_test, grid, trials=int(trials), random_state=0,
                               progress=progress, baseline=baseline)
            results[result_key(name)] = df.assign(mechanism=name)
        except ValueError as exc:
            errors[result_key(name)] = str(exc)
            results[result_key(name)] = pd.DataFrame()
    bar.empty()
    st.rerun()  # redraw without the progress bar, the caption and the Stop button

for n in chosen:
    if result_key(n) in errors:
        st.warning(md_escape(f"{n} was not evaluated: {errors[result_key(n)]}"))

frames = [results[result_key(n)] for n in chosen if result_key(n) in results]
frames = [f for f in frames if not f.empty]
if not frames:
    st.info("Pick mechanisms and an ε grid, then press **Run sweep**.")
else:
    df = pd.concat(frames, ignore_index=True)
    # one unit: every curve is drawn at its row-level epsilon (replace-one, label included)
    # (a difference below 1e-6 relative is the rounding-down of budget splits, not another unit)
    nominal = df["x"].astype(float)
    other_unit = (df["epsilon_row"] - nominal).abs() > 1e-6 * nominal
    moved = sorted(df.loc[other_unit, "mechanism"].unique())
    none = sorted(df.loc[~np.isfinite(df["epsilon_row"]) & np.isfinite(nominal), "mechanism"].unique())
    df = df.assign(epsilon_nominal=nominal, x=np.where(other_unit, df["epsilon_row"], nominal))
    if moved:
        st.caption(md_escape(
            "Drawn at their row-level ε (replace-one, label included, for the drawn projection), not "
            f"at the ε they were asked for: {', '.join(moved)} (their settings use another "
            "neighbouring relation; the table keeps the asked-for value as epsilon_nominal)."))
    if none:
        st.warning(md_escape(f"No row-level guarantee, so not drawn: {', '.join(none)} (class sizes and "
                             "labels are public in that mode)."), icon=":material/warning:")
    metrics = [m for m in dict.fromkeys(df["metric"]) if m != "k"]
    metric = st.selectbox("Metric", metrics, format_func=lambda m: METRIC_LABELS.get(m, m),
                          key="p:compare_metric", **initial("p:compare_metric"))
    shown = st.multiselect("Show", sorted(df["mechanism"].unique()), wrap=True,
                           default=sorted(df["mechanism"].unique()), key="compare_shown")
    part = df[(df["metric"] == metric) & df["mechanism"].isin(shown)]
    st.warning(f"Everything below is **{NOT_DP_NOTICE}**: an exploration aid for the data "
               "custodian, not something to publish.", icon=":material/science:")
    if not part.empty:
        st.plotly_chart(utility_curve_figure(part, metric, series="mechanism",
                                             title=METRIC_LABELS.get(metric, metric),
                                             subtitle=NOT_DP_NOTICE),
                        key="frontier")
        st.markdown("**Best per ε** (only results whose interval is clear of the chance level)")
        best = best_per_value(part, series="mechanism").rename(columns={"x": "epsilon"})
        st.dataframe(best, hide_index=True)
    with st.container(key="wide-compare-numbers"):  # every number: a grid to scroll sideways
        st.dataframe(df, hide_index=True)
    st.download_button("Download all numbers (CSV, NOT differentially private)",
                       exploration_csv(df, "dp-explorer Compare"), exploration_filename("compare"),
                       "text/csv")

st.subheader("What each ε means")
st.dataframe(pd.DataFrame([
    {"mechanism": n, "guarantee": KIND_TEXT[MECHANISMS[n].guarantee_kind],
     "neighbouring relation": MECHANISMS[n].neighbouring, "baseline": MECHANISMS[n].baseline}
    for n in chosen or names
]), hide_index=True)
st.caption(
    "The curves are drawn at each release's row-level ε (replace-one, label included), which every "
    "release card states; the papers' element and row-l2 epsilons are converted for the drawn "
    "projection. Epsilons under different neighbouring relations or guarantee kinds are not directly "
    "comparable: "
    + " ".join(f"**{k}**: {v}." for k, v in NEIGHBOURING_TEXT.items())
    + " A probabilistic guarantee holds only for all but a fraction β of projection draws."
)
