"""Release page: draw a release from OS entropy, read its card, download it; the session ledger."""

from __future__ import annotations

import json
from dataclasses import asdict

import pandas as pd
import streamlit as st

from app import state
from app.card_text import card_in_words, equivalent_command
from app.controls import initial, mechanism_controls
from app.markdown import md_escape
from app.runner import draw_release
from dpcore.ledger import LedgerEntry
from dpcore.mechanisms import get_mechanism

ds = state.dataset()
name = st.session_state.mechanism
mech = get_mechanism(name)
ledger = st.session_state.ledger

st.title("Release")
st.markdown(
    f"Draw a release of **all {ds.n_samples:,} rows** of *{md_escape(st.session_state.dataset_label)}* with "
    f"**{mech.title}**. Releases are drawn from fresh OS entropy (no seed exists that could "
    "regenerate the noise). Each download is recorded in this session's ledger."
)

with st.expander("Parameters (shared with the Explore page)", expanded=False):
    params = mechanism_controls(mech, ds)

c1, c2 = st.columns(2)
budget = c1.number_input("Total ε budget for this dataset", min_value=0.0, step=0.5, key="p:budget",
                         **initial("p:budget", "value", 10.0))
c2.metric("Spent so far (basic composition)", f"ε = {ledger.total_epsilon:.4g}",
          f"δ = {ledger.total_delta:.2g}", delta_color="off")

if st.button("Draw release", type="primary"):
    with st.spinner("Drawing the release..."):
        result = draw_release(name, params, ds, seed=None)
    if result.error:
        st.error(result.error)
        st.session_state.pop("pending_release", None)
    else:
        rel = result.release
        csv_bytes = rel.to_csv_bytes() if rel.downloadable else b""
        st.session_state.pending_release = {
            "release": rel, "csv": csv_bytes,
            "card": rel.card_json(csv_bytes) if rel.downloadable else "",
            "npz": rel.transform_npz_bytes() if rel.downloadable and rel.transform_arrays else None,
        }

pending = st.session_state.get("pending_release")
if pending:
    rel = pending["release"]
    g = rel.guarantee
    if not rel.downloadable:
        st.error("This release is **NOT PRIVATE** (epsilon = ∞ or zero noise) and cannot be "
                 "downloaded. Choose a finite ε.", icon=":material/block:")
    else:
        if not g.holds:
            st.error("Bounds come from the private data: the card records that the guarantee "
                     "does NOT hold.", icon=":material/report:")
        st.success(g.plain_language(), icon=":material/verified_user:")
        if ledger.would_exceed(g.epsilon, budget):
            st.warning(f"Downloading this release brings the total to ε = "
                       f"{ledger.total_epsilon + g.epsilon:.4g}, over your budget of {budget:g}.",
                       icon=":material/warning:")
        stem = f"{ds.name}-{rel.mechanism}"
        card = pending["card"]

        def record() -> None:
            entry = LedgerEntry.from_card(json.loads(card), ds.name)
            if all(e.sha256 != entry.sha256 for e in ledger.entries):
                ledger.add(entry)

        b1, b2, b3 = st.columns(3)
        b1.download_button("Download CSV", pending["csv"], f"{stem}.csv", "text/csv",
                           on_click=record, type="primary", key="dl_csv")
        b2.download_button("Download release card", card, f"{stem}.card.json",
                           "application/json", on_click=record, key="dl_card")
        if pending["npz"] is not None:
            b3.download_button("Download transform (.npz)", pending["npz"],
                               f"{stem}.transform.npz", "application/octet-stream",
                               on_click=record, key="dl_npz")
        st.subheader("Release card")
        card_dict = json.loads(card)
        st.markdown(card_in_words(card_dict))
        bundled = st.session_state.dataset_label.startswith("bundled:")
        sources = set(ds.bounds_sources)
        st.markdown("**The same settings from the command line** (each run draws fresh noise "
                    "from OS entropy; there is no seed to give):")
        st.code(equivalent_command(card_dict, ds.name, bundled=bundled, label=ds.label_name,
                                   has_user_bounds="user" in sources, data_bounds="data" in sources,
                                   classes=None if ds.classes is None or ds.classes_source == "data"
                                   else ds.classes.tolist(), data_classes=ds.classes_source == "data",
                                   missing=ds.missing, output=f"{stem}.csv"), language="bash")
        if not bundled and "user" in sources:
            public = {c: [float(lo), float(hi)] for c, (lo, hi), src in
                      zip(ds.feature_names, ds.bounds, ds.bounds_sources, strict=True) if src != "data"}
            st.download_button("Download bounds.json (the public bounds, for --bounds)",
                               json.dumps(public, indent=1), "bounds.json", "application/json",
                               key="dl_bounds")
        st.json(card, expanded=False)
        # the escaped table: Streamlit's own CSV export of this preview must not carry formulas
        st.dataframe(rel.to_csv_frame().head(20), height=240)

st.subheader("Ledger of this session")
if ledger.entries:
    st.caption(ledger.summary())
    st.dataframe(pd.DataFrame([asdict(e) for e in ledger.entries]), hide_index=True)
else:
    st.caption("Nothing downloaded yet.")
