"""Distances page."""

from __future__ import annotations

import streamlit as st

from app.notices import not_built

st.title("Distances")
not_built("distance recovery for the random-projection mechanisms (JL-Laplace, DPPro).", "distances")
