"""Distances page: how well the random-projection releases preserve pairwise distances."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import state
from app.controls import initial, mechanism_controls
from app.explain import HOW, intro
from app.figures.distances import (
    l2_error_vs_k_figure,
    recovery_histogram_figure,
    variance_vs_k_figure,
)
from app.markdown import md_escape
from app.notices import supported_by
from app.runner import distance_sweep, draw_release
from dpcore.distances import distance_experiment, distance_variance, optimal_k
from dpcore.mechanisms import get_mechanism

st.title("Distances")
intro("distances")

names = supported_by("distances")
if not names:
    st.info("No distance-capable mechanism is registered.")
    st.stop()
current = st.session_state.mechanism
if current in names:
    name = current
else:
    st.caption(f"The sidebar mechanism ({current}) releases no noisy projections; pick one here.")
    name = st.selectbox("Projection mechanism", names, key="p:distances_mechanism",
                        **initial("p:distances_mechanism"))
mech = get_mechanism(name)
ds = state.dataset()
train, _ = state.split()

left, right = st.columns([1, 2], gap="large")
with left:
    params = mechanism_controls(mech, ds)
    n_pairs = st.select_slider("Sampled pairs", [200, 500, 1000, 2000, 5000], key="p:n_pairs",
                               **initial("p:n_pairs", "value", 1000))
    seed = st.number_input("Preview seed", 0, 2**31 - 1, key="p:preview_seed",
                           **initial("p:preview_seed", "value", 0))

key = ("distances", ds.fingerprint, name, repr(sorted(params.items())), seed, n_pairs)
res = state.memo(key, lambda: draw_release(name, params, train, int(seed)))
if res.error:
    right.error(md_escape(res.error))
    st.stop()
exp = state.memo(key + ("exp",), lambda: distance_experiment(res.release, train.X, n_pairs, int(seed)))
summary = exp.summary()
with right:
    st.plotly_chart(recovery_histogram_figure(exp.difference, exp.variance), key="hist")
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("mean error", f"{summary['mean_difference']:.3g}",
              help="Mean of recovered minus true squared distance: unbiased, so near 0 relative to the "
                   "spread.")
    c2.metric("spread (sd)", f"{summary['sd_difference']:.3g}", help="Measured standard deviation.")
    c3.metric("predicted sd", f"{summary['predicted_sd']:.3g}",
              help="sqrt of the average over pairs of 2ρ⁴/k + 8σ²ρ² + c·kσ⁴.")
    c4.metric("L2 error", f"{summary['l2_error']:.3g}", help="DPPro eq. 12: ‖Ũ² − U²‖² / ‖U²‖².")
    st.caption(f"L2 error expected from the variance formula: {summary['expected_l2_error']:.3g}.")
    with st.expander(HOW):
        st.markdown(
            "Random-projection releases keep pairwise distances on average: the recovered squared "
            "distance ‖z_i − z_j‖² − 2kσ² is unbiased. Its spread has three parts: the projection "
            "(2ρ⁴/k), a cross term (8σ²ρ²) and the noise (8kσ⁴ Gaussian, 14kσ⁴ Laplace — the JL "
            "paper's Claim 7 is wrong).")

st.subheader("Choosing k")
d = ds.n_features
ks = sorted({int(k) for k in np.unique(np.geomspace(1, max(2, d - 1), 12).round())})
with st.spinner("Releasing once per k..."):
    sweep = state.memo(key + ("sweep",), lambda: distance_sweep(name, params, train, ks, int(seed)))
if sweep["k"].size:
    s2 = float(np.median(sweep["noise_variance"]))
    rho2 = float(np.median(sweep["true_sq"]))
    # what each chart shows is what it marks: the lowest measured error, the lowest plotted variance
    k_measured = float(sweep["k"][int(np.argmin(sweep["l2_error"]))])
    variance = distance_variance(rho2, sweep["k"], sweep["noise_variance"], exp.noise)  # type: ignore[arg-type]
    k_variance = float(sweep["k"][int(np.argmin(variance))])
    c1, c2 = st.columns(2)
    c1.plotly_chart(l2_error_vs_k_figure(sweep["k"], sweep["l2_error"], predicted=sweep["expected"],
                                         k_opt=k_measured), key="l2k")
    c2.plotly_chart(variance_vs_k_figure(sweep["k"], rho2, sweep["noise_variance"], exp.noise,
                                         k_opt=k_variance, show_claim7=exp.noise == "laplace"), key="vark")
    formula = optimal_k(rho2, s2, exp.noise)  # type: ignore[arg-type]
    st.markdown(f"The distances come out best at **k = {k_measured:g}** (lowest measured L2 error); the "
                f"spread of one recovered distance is smallest at k = {k_variance:g}.")
    with st.expander(HOW):
        st.caption(
            f"The variance is taken at the median squared distance ρ² = {rho2:.3g} ({exp.noise} noise). "
            f"For a fixed noise level DPPro's Lemma 5 gives k_opt = ρ²/(2σ²) = {formula:.3g}"
            + (": for JL-Laplace the noise itself grows with k, so the measured optimum sits lower."
               if exp.noise == "laplace" else "."))
