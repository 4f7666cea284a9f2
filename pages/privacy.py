"""Privacy page."""

from __future__ import annotations

import streamlit as st

from app.notices import not_built

st.title("Privacy")
not_built("the DPMix Rényi-DP accountant curves (epsilon vs sigma, epsilon at each order alpha).", "rdp")
