"""Release page: draw a release from OS entropy, read its card, download it; the session ledger.

Every draw whose rows this page shows is charged to the session ledger at the moment it is shown
(downloaded or not); a draw that would take a relation's total past the budget is refused unseen.
The ledger is the CLI's JSON file: download it to keep it, upload one to continue its totals.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import pandas as pd
import streamlit as st

from app import state
from app.card_text import card_in_words, equivalent_command, python_snippet, report_html
from app.controls import initial, mechanism_controls
from app.markdown import md_escape
from app.runner import draw_release
from dpcore.decode import PublicSchema, original_space_note, with_output_space
from dpcore.ledger import LedgerEntry
from dpcore.mechanisms import get_mechanism
from dpcore.release import Release

ds = state.dataset()
name = st.session_state.mechanism
mech = get_mechanism(name)
ledger = st.session_state.ledger

st.title("Release")
st.markdown(
    f"Draw a release of **all {ds.n_samples:,} rows** of *{md_escape(st.session_state.dataset_label)}* with "
    f"**{mech.title}**. Releases are drawn from fresh OS entropy (no seed exists that could "
    "regenerate the noise). **Every release whose rows are shown here is charged** to this "
    "session's ledger, downloaded or not; a release that would go past the budget is refused "
    "before anyone sees it."
)

with st.expander("Parameters (shared with the Explore page)", expanded=False):
    params = mechanism_controls(mech, ds)

c1, c2, c3 = st.columns([1, 1, 2])
budget = c1.number_input(
    "ε budget per neighbouring relation", min_value=0.01, step=0.5, key="p:budget",
    help="Total epsilon this dataset may spend, per neighbouring relation (basic composition)",
    **initial("p:budget", "value", 10.0))
delta_budget = c2.number_input(
    "δ budget (empty: none)", min_value=0.0, max_value=1.0, format="%.1e", key="p:delta_budget",
    help="Total delta per neighbouring relation; 0 allows pure-DP releases only",
    **initial("p:delta_budget", "value", None))
ledger.set_budgets(budget, delta_budget)
spent = c3.container()  # filled below, once this run's draw is charged


def output_view(rel: Release, space: str | None, clip: bool, integers: list[str]) -> dict:
    """The file in the chosen output space (post-processing of the drawn release: nothing is
    charged again) with its CSV bytes and card, memoised per release and choice."""
    def build() -> dict:
        view = with_output_space(rel, PublicSchema.from_dataset(ds, integers), space, clip=clip)
        csv_bytes = view.to_csv_bytes()
        return {"release": view, "csv": csv_bytes, "card": view.card_json(csv_bytes)}
    return state.memo(("release-view", id(rel), rel.created_utc, space, clip, tuple(integers)), build)


if st.button("Draw release", type="primary"):
    st.session_state.pop("pending_release", None)
    with st.spinner("Drawing the release..."):
        result = draw_release(name, params, ds, seed=None)
    if result.error:
        st.error(md_escape(result.error))
    elif not result.release.downloadable:
        st.session_state.pending_release = {"release": result.release}
    else:
        rel = result.release
        first = output_view(rel, None, True, [])  # the default file (original space where possible)
        entry = LedgerEntry.from_card(json.loads(first["card"]), ds.name)
        refusal = ledger.refusal(entry)
        if refusal:
            st.error(f"Refused: {md_escape(refusal)}. The release was discarded before anyone saw it; "
                     "nothing was charged.", icon=":material/block:")
        else:
            ledger.add(entry)  # charged now: its rows are shown below
            st.session_state.pending_release = {
                "release": rel, "drawn": rel, "csv": first["csv"], "card": first["card"],
                "npz": rel.transform_npz_bytes() if rel.transform_arrays else None,
            }

for relation, t in (ledger.totals() or {mech.neighbouring: None}).items():
    spent.metric(f"Spent so far, {relation} (basic composition)",
                 f"ε = {t.epsilon if t else 0:.4g} of {budget:g}")
    spent.caption(f"δ = {t.delta if t else 0:.2g}"
                  + (f" of {delta_budget:.2g}" if delta_budget is not None else " (no δ budget)"))

over = [rel for rel in ledger.totals() if ledger.refusal(LedgerEntry("", 0.0, 0.0, rel))]
if over:
    st.warning(f"The ledger is already past its budget for {md_escape(', '.join(over))} (an uploaded "
               "ledger added its releases): no further release under that relation can be drawn.",
               icon=":material/warning:")

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
        row = rel.row_level_card()  # the one unit releases are compared in (card key row_level)
        if not row["same_as_guarantee"]:
            show = st.warning if row["epsilon"] == "inf" else st.info
            show("**Row level** (one row, label included, replaced by any row of the public domain): "
                 + md_escape(row["text"]), icon=":material/rule:")
        st.caption(f"Charged to the session ledger when shown: ε = {g.epsilon:.4g}, δ = {g.delta:.2g} "
                   f"({g.neighbouring}). Downloading it, in either output space, costs nothing more.")
        drawn = pending["drawn"]
        st.subheader("The file")
        why_not = original_space_note(drawn)
        spaces = ["original", "released"] if why_not is None else ["released"]
        o1, o2 = st.columns([3, 2])
        space = o1.radio(
            "Output space", spaces, key=f"output_space:{len(spaces)}", horizontal=True,
            format_func={"original": "your columns, categories and units",
                         "released": "the mechanism's released space"}.get,
            help="Post-processing of the same release: the guarantee and the ledger do not change.")
        clip = o2.checkbox("Clip values to the public bounds", value=True, key="output_clip",
                           disabled=space != "original",
                           help="Noise can push values outside the bounds you declared; clipping "
                                "moves them to the nearest bound (post-processing).")
        numeric = PublicSchema.from_dataset(ds).numeric_columns() if space == "original" else []
        integers = st.multiselect(
            "Integer columns (public schema: whole numbers by definition, e.g. counts or ages in years)",
            numeric, key=f"output_integers:{ds.fingerprint[:12]}", disabled=space != "original",
            help="Rounded to whole numbers and written as integers. Declare what the columns ARE "
                 "(documentation), not what the private values happen to look like.")
        if why_not:
            st.info("This release stays in the mechanism's space: " + md_escape(why_not),
                    icon=":material/info:")
        view = output_view(drawn, space, clip, integers)
        pending.update(release=view["release"], csv=view["csv"], card=view["card"])
        rel = view["release"]
        base = ds.name  # an uploaded file's name without its extension: people.csv -> people-...
        for suffix in (".gz", ".csv", ".tsv", ".txt", ".parquet", ".pq", ".npz"):
            base = base.removesuffix(suffix)
        stem = f"{base or 'release'}-{rel.mechanism}"
        card = pending["card"]
        card_dict = json.loads(card)
        bundled = st.session_state.dataset_label.startswith("bundled:")
        sources = set(ds.bounds_sources)
        settings = {
            "bundled": bundled, "label": ds.label_name,
            "classes": None if ds.classes is None or ds.classes_source == "data" else ds.classes.tolist(),
            "missing": ds.missing, "has_user_bounds": "user" in sources,
            "has_categories": bool(ds.categories) and not bundled,
            "output_space": None if space == spaces[0] else space, "clip": clip,
            "integer_columns": integers, "output": f"{stem}.csv",
        }
        command = equivalent_command(card_dict, ds.name, data_bounds="data" in sources,
                                     data_classes=ds.classes_source == "data", **settings)
        snippet = python_snippet(card_dict, ds.name, **settings)
        b1, b2, b3, b4 = st.columns(4)
        b1.download_button("Download CSV", pending["csv"], f"{stem}.csv", "text/csv",
                           type="primary", key="dl_csv")
        b2.download_button("Download release card", card, f"{stem}.card.json",
                           "application/json", key="dl_card")
        b3.download_button("Download report (HTML)",
                           report_html(card_dict, dataset=ds.name, command=command, snippet=snippet),
                           f"{stem}.report.html", "text/html", key="dl_report")
        if pending["npz"] is not None:
            b4.download_button("Download transform (.npz)", pending["npz"],
                               f"{stem}.transform.npz", "application/octet-stream",
                               key="dl_npz")
        st.caption("The report is the card in plain words, in one HTML page to keep beside the file: "
                   "the guarantee, what is assumed public, the noise per statistic, the file's units "
                   "and how to reproduce the settings.")
        st.subheader("Release card")
        st.markdown(card_in_words(card_dict))
        st.markdown("**The same settings from the command line** (each run draws fresh noise "
                    "from OS entropy; there is no seed to give):")
        st.code(command, language="bash")
        st.markdown("**The same settings in Python** (no `random_state`: fresh OS entropy):")
        st.code(snippet, language="python")
        if not bundled and "user" in sources:
            public = {c: [float(lo), float(hi)] for c, (lo, hi), src in
                      zip(ds.feature_names, ds.bounds, ds.bounds_sources, strict=True) if src != "data"}
            st.download_button("Download bounds.json (the public bounds, for --bounds)",
                               json.dumps(public, indent=1), "bounds.json", "application/json",
                               key="dl_bounds")
        if settings["has_categories"]:
            st.download_button("Download categories.json (the public categories, for --categories)",
                               json.dumps(ds.categories, indent=1, default=str), "categories.json",
                               "application/json", key="dl_categories")
        st.json(card, expanded=False)
        # the escaped table: Streamlit's own CSV export of this preview must not carry formulas
        st.dataframe(rel.to_csv_frame().head(20), height=240)



def _continue_ledger() -> None:
    """Merge an uploaded ledger (the CLI's ``--ledger`` file or an earlier session's download)."""
    upload = st.session_state.get("ledger_upload")
    if upload is None:
        return
    try:
        other = state.read_ledger_upload(upload.getvalue(), upload.name)
    except ValueError as exc:
        st.session_state.ledger_message = ("error", str(exc))
        return
    added = ledger.merge(other)
    if other.budget is not None:  # the file's budget (a merge never loosens it)
        st.session_state["p:budget"] = ledger.budget
    if other.delta_budget is not None:
        st.session_state["p:delta_budget"] = ledger.delta_budget
    st.session_state.ledger_message = ("success", f"Continued the ledger {upload.name}: {added} "
                                       f"release(s) added. {ledger.summary()}")


st.subheader("Ledger of this session")
if ledger.entries:
    st.caption(md_escape(ledger.summary()))
    st.dataframe(pd.DataFrame([asdict(e) for e in ledger.entries]), hide_index=True)
else:
    st.caption("Nothing released yet.")
st.caption("The ledger lives only in this session: download it to keep it, and upload it (or the "
           "file of the CLI's `--ledger`, the same format) to continue its totals.")
l1, l2 = st.columns(2)
l1.download_button("Download ledger (JSON)", ledger.to_json(), "dp-ledger.json", "application/json",
                   key="dl_ledger")
l2.file_uploader("Continue a ledger (JSON)", type=["json"], key="ledger_upload",
                 on_change=_continue_ledger)
if message := st.session_state.pop("ledger_message", None):
    (st.error if message[0] == "error" else st.success)(md_escape(message[1]))
