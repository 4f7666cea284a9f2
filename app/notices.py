"""Plain notices for pages whose content depends on what a mechanism supports."""

from __future__ import annotations

import streamlit as st

from dpcore.mechanisms import MECHANISMS


def supported_by(capability: str | None) -> list[str]:
    """Registered mechanisms with ``capability`` (all when None)."""
    return [n for n, cls in MECHANISMS.items() if capability is None or capability in cls.capabilities]


def not_built(what: str, capability: str | None = None) -> None:
    """Say plainly that a page is not built yet and which mechanisms will support it."""
    st.info(f"**Not built yet:** {what}", icon=":material/construction:")
    names = supported_by(capability)
    if capability is not None:
        st.caption("Mechanisms that support this page: " + (", ".join(names) if names else "none yet"))
