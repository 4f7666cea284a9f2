"""Teaching tour: four guided scenarios, each with a control to move, one figure and a plain
explanation, on the dataset chosen on the Data page (so a class can use its own example); and a
link to the Attack page at epsilon = 0.1, 1, 10."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import streamlit as st

from app import state
from app.controls import initial
from app.figures.tour import dpmix_figure, odds_figure, qq_figure, snr_figure
from app.markdown import md_escape
from dpcore import teaching

ATTACK_PAGE = Path(__file__).resolve().parent / "attack.py"
ATTACK_EPSILONS = (0.1, 1.0, 10.0)

st.title("Teaching tour")
ds = state.dataset()
label = md_escape(st.session_state.dataset_label)
st.caption(f"Short guided scenarios on the chosen dataset (*{label}*; change it on the Data page). "
           "Each runs in about a second.")

SCENARIOS = {
    "What ε means": "odds",
    "Why reducing dimension lowers the noise": "snr",
    "Why RON-Gauss's Gaussian model helps": "dfm",
    "How mixing lowers the noise DPMix needs": "mix",
}
choice = st.radio("Scenario", list(SCENARIOS), key="p:tour", horizontal=True, **initial("p:tour"))
scenario = SCENARIOS[choice]


def open_attack(epsilon: float) -> None:
    """Set the sidebar mechanism's ε and start the Attack page's game on arrival."""
    name = st.session_state.mechanism
    st.session_state[f"{state.WIDGET_PREFIX}{name}:epsilon"] = epsilon
    st.session_state["_attack_autorun"] = True


if scenario == "odds":
    eps = st.select_slider("ε", [0.1, 0.5, 1.0, 2.0, 5.0, 10.0], key="p:tour_eps",
                           **initial("p:tour_eps", "value", 1.0))
    prior = np.linspace(0, 1, 201)
    curves = {e: teaching.posterior_bound(prior, e) for e in sorted({0.1, 1.0, eps, 5.0})}
    st.plotly_chart(odds_figure(prior, curves), key="tour_odds")
    p50 = float(teaching.posterior_bound(np.array([0.5]), eps)[0])
    p01 = float(teaching.posterior_bound(np.array([0.01]), eps)[0])
    st.markdown(
        f"Differential privacy bounds how much **anyone**, whatever they knew before, can learn "
        f"about one person. At ε = {eps:g} an attacker who thought something about you was a coin "
        f"flip (50%) can end up at most **{p50:.0%}** sure; one who thought it was a 1-in-100 "
        f"chance at most **{p01:.1%}**. The odds move by a factor of at most e^ε = "
        f"{np.exp(eps):.3g}. Larger ε: weaker protection, more accurate data."
    )
elif scenario == "snr":
    eps = st.select_slider("ε", [0.1, 0.5, 1.0, 2.0, 5.0, 10.0], key="p:tour_snr_eps",
                           **initial("p:tour_snr_eps", "value", 1.0))
    top = max(1, min(ds.n_features - 1, 100))
    ps = np.array(sorted({p for p in (1, 2, 3, 5, 8, 12, 20, 32, 48, 64, 100) if p <= top} | {top}))
    res = state.memo(("tour-snr", ds.fingerprint, eps), lambda: teaching.ron_snr_vs_p(
        ds.X, ds.bounds, ps, eps, np.random.default_rng(0)))
    st.plotly_chart(snr_figure(res, eps), key="tour_snr")
    best = int(res["p"][np.argmax(res["snr"])])
    st.markdown(
        "RON-Gauss adds Laplace noise to a p×p covariance. The noise on each entry is proportional "
        "to p+1 and there are p² entries, so its total grows like p², while the signal (how much "
        f"structure the covariance holds) saturates. On this dataset ({ds.n_samples:,} rows) at "
        f"ε = {eps:g} the SNR is highest at p ≈ {best}: project to a few dimensions first, then add "
        "noise. Move ε: more budget lowers the noise curve, and the best p grows."
    )
elif scenario == "dfm":
    c1, c2 = st.columns(2)
    draw = c1.slider("Random projection (draw another)", 0, 20, key="p:tour_dfm_draw",
                     **initial("p:tour_dfm_draw", "value", 0))
    spread = state.memo(("tour-dfm-spread", ds.fingerprint), lambda: int(np.argmax(
        teaching.unit_rows(ds.X[:5000], ds.bounds).std(axis=0))))
    fkey = f"p:tour_dfm_feature:{ds.fingerprint[:12]}"
    feature = ds.feature_names.index(c2.selectbox(
        "Raw feature to compare", ds.feature_names, key=fkey, help="Default: the most spread one.",
        **initial(fkey, "index", spread)))
    res = state.memo(("tour-dfm", ds.fingerprint, draw, feature), lambda: teaching.dfm_projection(
        ds.X, ds.bounds, np.random.default_rng(draw), feature))
    name = ds.feature_names[res["feature_index"]]
    series = {"random projection of the rows": res["projection"],
              f"a single feature ({name})": res["feature"]}
    st.plotly_chart(qq_figure(series), key="tour_qq")
    k_proj, k_raw = res["kurtosis"]
    st.markdown(
        "The Diaconis–Freedman–Meckes (DFM) effect: a random low-dimensional projection of "
        "high-dimensional data is close to Gaussian. A single raw feature is often far from normal "
        f"(here {name}: excess kurtosis {k_raw:+.2f}), but a random projection of the rows lies "
        f"nearer the normal line (excess kurtosis {k_proj:+.2f}; 0 for a normal sample). That is why "
        "RON-Gauss can summarise projected data by a Gaussian (a mean and a covariance) and lose "
        f"little. Draw other projections: with {ds.n_features} features the effect is "
        + ("strong." if ds.n_features >= 50 else "weaker (it needs many dimensions).")
    )
else:
    eps = st.select_slider("ε", [1.0, 2.0, 5.0, 10.0, 20.0], key="p:tour_mix_eps",
                           **initial("p:tour_mix_eps", "value", 10.0))
    n = state.split()[0].n_samples
    d_y = 0 if ds.task == "unsupervised" else (1 if ds.task == "regression" else len(ds.classes))
    ells = np.array([v for v in (1, 2, 4, 8, 16, 32, 64, 128, 256) if v <= n])
    res = state.memo(("tour-mix", n, ds.n_features, d_y, eps), lambda: teaching.dpmix_sigma_vs_ell(
        ells, epsilon=eps, n=n, d_x=ds.n_features, d_y=d_y))
    st.plotly_chart(dpmix_figure(res, eps), key="tour_mix")
    st.markdown(
        f"DPMix releases averages of ℓ random rows plus Gaussian noise. Averaging divides what one "
        f"person can change by ℓ, and picking the ℓ rows at random hides who was picked "
        f"(amplification by sampling). For this training split (n = {n:,}, {ds.n_features} features"
        f"{f' + {d_y} label columns' if d_y else ''}) at ε = {eps:g}, the noise needed falls from "
        f"σ = {res['sigma'][0]:.3g} at ℓ = 1 to {res['sigma'][-1]:.3g} at ℓ = {int(ells[-1])}. The "
        "price: each released row blurs ℓ people together, so utility peaks at a moderate ℓ (the "
        "paper's sweet spot)."
    )

st.divider()
st.subheader("What an attacker can learn at ε = 0.1, 1, 10")
st.markdown(
    f"The Attack page plays a membership-inference game against **{st.session_state.mechanism}** on "
    "this dataset: releases with and without one target row, an attacker who guesses which, and the "
    "ε its success proves next to the ε the release claims. Pick an ε to run it:"
)
cols = st.columns(len(ATTACK_EPSILONS))
for col, e in zip(cols, ATTACK_EPSILONS, strict=True):
    if col.button(f"Attack at ε = {e:g}", key=f"tour_attack_{e:g}", on_click=open_attack, args=(e,)):
        st.switch_page(ATTACK_PAGE)
st.page_link(ATTACK_PAGE, label="Open the Attack page", icon=":material/security:")
