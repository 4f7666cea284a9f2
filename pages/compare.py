"""Compare page."""

from __future__ import annotations

import streamlit as st

from app.notices import not_built

st.title("Compare")
not_built("privacy-utility frontiers across mechanisms.", None)
