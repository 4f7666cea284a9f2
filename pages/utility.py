"""Utility page."""

from __future__ import annotations

import streamlit as st

from app.notices import not_built

st.title("Utility")
not_built("utility vs epsilon and vs p (train on the release, test on real held-out rows).", None)
