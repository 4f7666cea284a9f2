"""Privacy page: where the epsilon comes from — budget parts, and the DPMix Rényi-DP accountant."""

from __future__ import annotations

import math

import streamlit as st

from app import state
from app.card_text import budget_shares
from app.controls import mechanism_controls
from app.explain import HOW, guarantee_row, intro, noise_block
from app.figures.privacy import epsilon_at_order_figure, epsilon_vs_sigma_figure
from app.markdown import md_escape
from app.notices import supported_by
from dpcore import accounting
from dpcore.calibration import default_delta
from dpcore.mechanisms import get_mechanism

st.title("Privacy")
intro("privacy")
ds = state.dataset()
name = st.session_state.mechanism
mech = get_mechanism(name)

if "rdp" not in mech.capabilities:
    left, right = st.columns([1, 2], gap="large")
    with left:
        params = mechanism_controls(mech, ds)
    train, _ = state.split()
    from app.runner import draw_release

    key = ("privacy", ds.fingerprint, name, repr(sorted(params.items())))
    res = state.memo(key, lambda: draw_release(name, params, train, 0))
    with right:
        if res.error:
            st.error(md_escape(res.error))
            st.stop()
        g = res.release.guarantee
        guarantee_row(g)
        st.markdown(f"**{mech.title}** is calibrated directly (no Rényi-DP accounting): its guarantee "
                    "composes the budget parts of its noisy statistics. "
                    + md_escape(budget_shares(res.release.details) or ""))
        st.info(g.plain_language(), icon=":material/verified_user:")
        noise_block(res.release.noise)
        st.caption("Live Rényi-DP curves are drawn for: " + ", ".join(supported_by("rdp")))
    st.stop()

# ---------------------------------------------------------------- DPMix: the accountant, live
left, right = st.columns([1, 2], gap="large")
with left:
    params = mechanism_controls(mech, ds)
n = ds.n_samples
d_x = ds.n_features
d_y = 0 if ds.task == "unsupervised" else (1 if ds.task == "regression" else len(ds.classes))
T = int(params.get("n_mixtures") or n)
ell = int(params["ell"])
delta = params.get("delta") or default_delta(n)  # the mechanism's default
ratio = float(params.get("sigma_ratio") or 1.0)
common = dict(ell=ell, n=n, n_mixtures=T, d_x=d_x, d_y=d_y, delta=delta)
try:  # the mechanism's own rule: given sigmas, or calibrated from epsilon
    noise = accounting.dpmix_noise(epsilon=params["epsilon"], sigma_x=params.get("sigma_x"),
                                   sigma_y=params.get("sigma_y"), sigma_ratio=ratio,
                                   bound=params["bound"], **common)
    sigma_x = noise.sigma_x
    sigma_y = noise.sigma_y if d_y else None
    results = {} if math.isinf(noise.epsilon) else {
        b: accounting.dpmix_epsilon(sigma_x=sigma_x, sigma_y=sigma_y, bound=b, **common)
        for b in ("tight", "paper")
    }
except ValueError as exc:
    right.error(md_escape(exc))
    st.stop()

with right:
    if not results:
        st.error("**NOT PRIVATE**: zero noise (σ = 0 or ε = ∞).", icon=":material/block:")
    else:
        shown = float(results[params["bound"]].epsilon)
        st.markdown(
            f"Each of the {T:,} released mixtures averages ℓ = {ell} rows and gets Gaussian noise of "
            f"standard deviation {sigma_x:.3g} on its features (in [0, 1] units)"
            + (f" and {sigma_y:.3g} on its labels" if sigma_y else "")
            + f". Averaging several rows is what lets this noise prove **ε = {shown:.3g}** (δ = "
            f"{delta:.2g}, the {params['bound']} bound). **Try:** other values of ℓ, and compare "
            + ("the noise each needs for this ε." if params.get("sigma_x") is None
               else "the ε each proves with this noise."))
        c1, c2, c3, c4 = st.columns(4)
        c1.metric("σ_X", f"{sigma_x:.4g}")
        c2.metric("ε (tight)", f"{float(results['tight'].epsilon):.4g}",
                  f"α* = {int(results['tight'].alpha)}", delta_color="off")
        c3.metric("ε (paper, Thm 1)", f"{float(results['paper'].epsilon):.4g}",
                  f"α* = {int(results['paper'].alpha)}", delta_color="off")
        c4.metric("δ", f"{delta:.2g}")
        st.caption(f"n = {n:,} rows, T = {T:,} mixtures of ℓ = {ell} rows, d_X = {d_x}, d_Y = {d_y}; "
                   "replace-one neighbours; features and labels in public [0, 1] bounds.")
        st.plotly_chart(epsilon_vs_sigma_figure(
            n=n, n_mixtures=T, d_x=d_x, d_y=d_y, delta=delta, sigma_ratio=ratio,
            current={"sigma": sigma_x, "ell": ell, "epsilon": float(results[params["bound"]].epsilon)},
        ), key="eps_sigma")
if results:
    st.plotly_chart(epsilon_at_order_figure(sigma_x=sigma_x, sigma_y=sigma_y, **common),
                    key="eps_order")
    with st.expander(HOW):
        st.caption("The accountant scans every integer order α; the reported ε is the minimum of "
                   "T·ε'(α) + conversion(α). Tight: Wang–Balle–Kasiviswanathan 2019 per-term bound and "
                   "the Canonne–Kamath–Steinke conversion; paper: Theorem 1 as published.")
