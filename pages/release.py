"""Release page: draw a release from OS entropy, read its card, download it; the dataset's ledger.

Every draw whose rows this page shows is charged, at the moment it is shown (downloaded or not),
to the dataset's ledger in the server's persistent ledger store (:mod:`app.ledger`): one budget per
dataset, shared by every session and by the CLI, set once by whoever registers the dataset first
and raised only by an explicit, logged action. A draw that would take a relation's total past the
budget is refused unseen. A release whose guarantee does not hold (or that has no row-level
guarantee) is drawn only after an explicit opt-in; it is then marked NOT differentially private
and booked as unbounded (epsilon = inf). Every charged release stays in the session's history,
downloadable, until the user discards it. The JSON ledger (the CLI's file) is the export/import
format.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace

import pandas as pd
import streamlit as st

from app import ledger as app_ledger
from app import state
from app.card_text import card_in_words, card_rules, equivalent_command, python_snippet, report_html
from app.controls import initial, mechanism_controls
from app.explain import HOW, intro
from app.figures.common import noise_table
from app.markdown import md_code, md_escape
from app.runner import draw_release
from dpcore.decode import PublicSchema, original_space_note, with_output_space
from dpcore.exceptions import DataValidationError
from dpcore.ledger import BudgetExceededError, LedgerEntry
from dpcore.mechanisms import get_mechanism
from dpcore.release import Release

ds = state.dataset()
name = st.session_state.mechanism
mech = get_mechanism(name)
key = st.session_state.dataset_key
try:
    store = app_ledger.store()
    record = store.dataset(key)
    ledger = store.ledger(key)
except (ValueError, OSError) as exc:  # a bad $DP_EXPLORER_LEDGER, an unreadable store
    st.error(f"The ledger store cannot be used: {md_escape(str(exc))}. No release can be drawn.",
             icon=":material/block:")
    st.stop()
st.session_state.ledger = ledger  # this dataset's ledger as stored (every session, the CLI)
history: list[app_ledger.HistoryItem] = st.session_state.setdefault("release_history", [])

st.title("Release")
intro("release")
st.caption(
    f"A release of **all {ds.n_samples:,} rows** of *{md_escape(st.session_state.dataset_label)}* with "
    f"**{mech.title}**, drawn from fresh OS entropy (no seed exists that could regenerate the noise). "
    "**Every release whose rows are shown here is charged** to this dataset's ledger, downloaded or "
    "not, and stays in this session's history until you discard it; a release that would go past the "
    "budget is refused before anyone sees it."
)

with st.expander("Parameters (shared with the Explore page)", expanded=False):
    params = mechanism_controls(mech, ds)

c1, c2, c3 = st.columns([1, 1, 2])
if record is None:
    budget = c1.number_input(
        "ε budget of this dataset (set once)", min_value=0.01, step=0.5, key="p:budget",
        help="Total epsilon this dataset may spend, per neighbouring relation (basic composition). "
             "The first release registers the dataset with it; afterwards it can only be raised, "
             "by an explicit action that is logged.",
        **initial("p:budget", "value", 10.0))
    delta_budget = c2.number_input(
        "δ budget (empty: none)", min_value=0.0, max_value=1.0, format="%.1e", key="p:delta_budget",
        help="Total delta per neighbouring relation; 0 allows pure-DP releases only",
        **initial("p:delta_budget", "value", None))
    ledger.set_budgets(budget, delta_budget)
else:
    budget, delta_budget = record.budget, record.delta_budget
    c1.metric("ε budget of this dataset", f"{budget:g}",
              help=f"Set {record.registered_utc} by {record.registered_by}; raised only by the logged "
                   "action below")
    c2.metric("δ budget", "none" if delta_budget is None else f"{delta_budget:.2g}")
spent = c3.container()  # filled below, once this run's draw is charged

if ds.meta.get("dp_bounds"):
    dpb = ds.meta["dp_bounds"]
    st.info(f"The bounds of {len(dpb['columns'])} column(s) are DP estimates: ε = {dpb['epsilon']:g} "
            f"({dpb['sides_estimated']} quantiles of {dpb['epsilon_per_side']:.3g}), already charged to this "
            "dataset's ledger as its own entry. A release now spends its own ε on top (basic composition: "
            "the ledger's total is the sum).", icon=":material/insights:")
reasons = app_ledger.unbounded_reasons(ds, params)
opted_in = False
if reasons:
    st.error("With these settings the release is **NOT differentially private**: "
             + md_escape("; ".join(reasons)) + ". It is not drawn unless you opt in below; it is then "
             "marked NOT differentially private (file name, card, report) and booked in the ledger as "
             "unbounded (ε = ∞), which spends this dataset's whole budget.", icon=":material/report:")
    opted_in = st.checkbox("I publish it anyway: mark it NOT differentially private and book it as ε = ∞",
                           key="optin_unbounded")
budget_spent = ledger.spent("replace-one")
if budget_spent:
    st.warning(f"This dataset's budget (ε = {budget:g}) is spent: no further release can be drawn. "
               "Raise the budget below (an explicit, logged action) to continue.",
               icon=":material/block:")


def output_view(rel: Release, space: str | None, clip: bool, integers: list[str]) -> dict:
    """The file in the chosen output space (post-processing of the drawn release: nothing is
    charged again) with its CSV bytes and card, memoised per release and choice."""
    def build() -> dict:
        view = with_output_space(rel, PublicSchema.from_dataset(ds, integers), space, clip=clip)
        csv_bytes = view.to_csv_bytes()
        return {"release": view, "csv": csv_bytes, "card": view.card_json(csv_bytes)}
    return state.memo(("release-view", id(rel), rel.created_utc, space, clip, tuple(integers)), build)


def _fidelity_section(rel: Release, csv_bytes: bytes) -> object | None:
    """The custodian's fidelity report of the file (NOT differentially private): computed on demand
    from the downloaded CSV's bytes and the private rows, memoised per file; returns it (or None)."""
    import io

    key = ("fidelity", hashlib.sha256(csv_bytes).hexdigest())
    with st.expander("How faithful is this file to your data? (fidelity report: NOT differentially "
                     "private)", expanded=state.memo_get(key) is not None):
        st.caption("Computed on your private rows, for you to decide whether to publish: per-column "
                   "distances, correlations, the label, and a standard model trained on the file beside "
                   "the majority (or mean) baseline and the same model trained on your data. None of it "
                   "goes into the CSV, the card or the transform; the HTML report adds it as a section "
                   "headed NOT differentially private.")
        if state.memo_get(key) is None and not st.button("Compute the fidelity report", key="fidelity_go"):
            return None

        def build() -> object:
            from dpcore.evaluation.fidelity import fidelity_report, private_frame

            schema = PublicSchema.from_dataset(ds)
            file = pd.read_csv(io.BytesIO(csv_bytes), keep_default_na=False, na_values=[""])
            return fidelity_report(file, private_frame(ds, schema), schema)

        with st.spinner("Comparing the file with your data..."):
            report = state.memo(key, build)
        st.error(f"**{report.notice}**", icon=":material/lock_open:")
        if summary := report.summary():
            st.markdown(md_escape(summary))
        if report.model:
            m = report.model
            c1, c2, c3 = st.columns(3)
            c1.metric(f"{m['model']}, trained on the file", f"{m['file']:.3g}")
            c2.metric(m["baseline_name"], f"{m['baseline']:.3g}")
            c3.metric("trained on your data", f"{m['private']:.3g}")
            st.caption(f"{m['metric']}, scored on {m['scored_on']}.")
        st.dataframe(report.columns, hide_index=True)
        if len(report.correlation_private.columns) > 1:
            from app.figures.fidelity import correlation_figure

            st.plotly_chart(correlation_figure(report.correlation_private, report.correlation_file),
                            key="fidelity_corr")
        return report


def _charge(rel: Release) -> None:
    """Charge a drawn release to the dataset's ledger and add it to the history (or refuse it,
    unseen, with nothing charged)."""
    if ds.meta.get("dp_bounds"):  # the card records the DP bounds' source and cost (charged before)
        rel = replace(rel, details={**rel.details, "dp_bounds": ds.meta["dp_bounds"]})
    first = output_view(rel, None, True, [])  # the default file (original space where possible)
    card = json.loads(first["card"])
    entry = LedgerEntry.from_card(card, app_ledger.store_label(key, ds.name))
    if entry.unbounded and not opted_in:
        st.error("Refused: this release has no finite row-level ε (NOT differentially private); tick the "
                 "opt-in above to draw it. It was discarded before anyone saw it; nothing was charged.",
                 icon=":material/block:")
        return
    try:
        store.charge(key, entry, allow_unbounded=opted_in, budget=None if record else budget,
                     delta_budget=None if record else delta_budget,
                     label=app_ledger.store_label(key, st.session_state.dataset_label),
                     by=app_ledger.session_actor())
    except BudgetExceededError as exc:
        reason = str(exc).removeprefix("refused: ").removesuffix("; nothing was written")
        st.error(f"Refused: {md_escape(reason)}. The release was discarded before anyone saw it; nothing "
                 "was charged.", icon=":material/block:")
        return
    except (DataValidationError, ValueError, OSError) as exc:  # a budget set meanwhile, a busy store
        st.error(f"Not charged, not shown: {md_escape(str(exc))}", icon=":material/block:")
        return
    number = max((h.number for h in history), default=0) + 1
    stem = app_ledger.file_stem(ds.name, rel.mechanism, rel.differentially_private)
    item = app_ledger.HistoryItem(
        number=number, drawn=rel, dataset_key=key, dataset_label=st.session_state.dataset_label,
        fingerprint=ds.fingerprint, stem=stem, csv=first["csv"], card=first["card"],
        report=report_html(card, dataset=ds.name), epsilon=entry.epsilon,
        npz=rel.transform_npz_bytes() if rel.transform_arrays else None)
    item.extra = {"release": rel, "drawn": rel, "csv": first["csv"], "card": first["card"], "npz": item.npz}
    history.append(item)
    st.session_state.selected_release = number


draw_disabled = bool(reasons and not opted_in) or budget_spent
if st.button("Draw release", type="primary", disabled=draw_disabled):
    with st.spinner("Drawing the release..."):
        result = draw_release(name, params, ds, seed=None)
    if result.error:
        st.error(md_escape(result.error))
    elif not result.release.downloadable:
        st.session_state.not_private_release = result.release
    else:
        st.session_state.pop("not_private_release", None)
        _charge(result.release)
    ledger = store.ledger(key)
    st.session_state.ledger = ledger
    record = store.dataset(key) or record

for relation, t in (ledger.totals() or {mech.neighbouring: None}).items():
    shown_budget = budget if record is None else record.budget
    spent.metric(f"Spent so far, {relation} (basic composition)",
                 f"ε = {'∞' if t and t.epsilon == float('inf') else f'{t.epsilon if t else 0:.4g}'} "
                 f"of {shown_budget:g}")
    spent.caption(f"δ = {t.delta if t else 0:.2g}"
                  + (f" of {delta_budget:.2g}" if delta_budget is not None else " (no δ budget)"))

over = [rel for rel in ledger.totals() if ledger.refusal(LedgerEntry("", 0.0, 0.0, rel))]
if over and not budget_spent:
    st.warning(f"The ledger is already past its budget for {md_escape(', '.join(over))} (imported "
               "releases): no further release under that relation can be drawn.",
               icon=":material/warning:")


def _discard(number: int) -> None:
    kept = [h for h in history if h.number != number]
    history[:] = kept
    if st.session_state.get("selected_release") == number:
        st.session_state.selected_release = kept[-1].number if kept else None


if history:
    st.subheader("Releases of this session")
    st.caption("Each stays here, downloadable as first drawn, until you discard it (discarding does not "
               "refund its budget: it was charged when shown).")
    for item in reversed(history):
        with st.container(border=True):
            st.markdown(("**▶ shown below:** " if st.session_state.get("selected_release") == item.number
                         else "") + md_escape(item.title))
            h1, h2, h3, h4 = st.columns(4)
            h1.download_button(f"CSV of release {item.number}", item.csv, f"{item.stem}.csv", "text/csv",
                               key=f"hist_csv_{item.number}", width="stretch")
            h2.download_button(f"Card of release {item.number}", item.card, f"{item.stem}.card.json",
                               "application/json", key=f"hist_card_{item.number}", width="stretch")
            h3.button(f"Show release {item.number}", key=f"hist_show_{item.number}", width="stretch",
                      disabled=item.fingerprint != ds.fingerprint,
                      on_click=lambda n=item.number: st.session_state.update(selected_release=n),
                      help="Its card and output-space choices (with the dataset and bounds in use now)")
            h4.button(f"Discard release {item.number}", key=f"hist_discard_{item.number}",
                      on_click=_discard, args=(item.number,), width="stretch")

if st.session_state.get("not_private_release") is not None:
    st.error("This release is **NOT PRIVATE** (epsilon = ∞ or zero noise) and cannot be "
             "downloaded. Choose a finite ε.", icon=":material/block:")
selected = next((h for h in history if h.number == st.session_state.get("selected_release")
                 and h.fingerprint == ds.fingerprint), None)
if selected is not None:
    st.session_state.pending_release = selected.extra
else:
    st.session_state.pop("pending_release", None)
pending = st.session_state.get("pending_release")
if pending:
    rel = pending["release"]
    g = rel.guarantee
    if not rel.downloadable:
        st.error("This release is **NOT PRIVATE** (epsilon = ∞ or zero noise) and cannot be "
                 "downloaded. Choose a finite ε.", icon=":material/block:")
    else:
        if not g.holds:
            st.error("**NOT differentially private**: a public fact was taken from the private data, so "
                     "the guarantee does NOT hold. The file name, the card and the report say so; the "
                     "ledger booked it as unbounded (ε = ∞).", icon=":material/report:")
        else:
            st.success(g.plain_language(), icon=":material/verified_user:")
        row = rel.row_level_card()  # the one unit releases are compared in (card key row_level)
        if not row["same_as_guarantee"]:
            show = st.warning if row["epsilon"] == "inf" else st.info
            show("**Row level** (one row, label included, replaced by any row of the public domain): "
                 + md_escape(row["text"]), icon=":material/rule:")
        booked = LedgerEntry.from_release(rel)
        cost = ("ε = ∞ (unbounded)" if booked.unbounded
                else f"ε = {booked.epsilon:.4g}, δ = {booked.delta:.2g}")
        st.caption(f"Charged to the dataset's ledger when shown, at the row level: {cost}. Downloading it, "
                   "in either output space, costs nothing more.")
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
        # an uploaded file's name without its extension: people.csv -> people-local-gaussian
        stem = app_ledger.file_stem(ds.name, rel.mechanism, rel.differentially_private)
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
        for warning in rel.details.get("warnings", []):  # noise-to-range, label rates: where users look
            st.warning(md_escape(warning), icon=":material/warning:")
        fidelity = _fidelity_section(rel, pending["csv"])
        b1, b2, b3, b4 = st.columns(4)
        b1.download_button("Download CSV", pending["csv"], f"{stem}.csv", "text/csv",
                           type="primary", key="dl_csv")
        b2.download_button("Download release card", card, f"{stem}.card.json",
                           "application/json", key="dl_card")
        b3.download_button("Download report (HTML)",
                           report_html(card_dict, dataset=ds.name, command=command, snippet=snippet,
                                       fidelity=fidelity),
                           f"{stem}.report.html", "text/html", key="dl_report")
        if pending["npz"] is not None:
            b4.download_button("Download transform (.npz)", pending["npz"],
                               f"{stem}.transform.npz", "application/octet-stream",
                               key="dl_npz")
        st.caption("The report is the card in plain words, in one HTML page to keep beside the file: "
                   "the guarantee, what is assumed public, the noise per statistic, the file's units "
                   "and how to reproduce the settings. Once computed, the fidelity report is added as a "
                   "section headed NOT differentially private: that copy is for you, not for publication.")
        st.subheader("Release card")
        st.markdown(card_in_words(card_dict, rules=False))
        with st.expander(HOW):  # the rules and the full noise table, as in the HTML report
            for paragraph in card_rules(card_dict):
                st.markdown(paragraph)
            st.table(noise_table(rel.noise), hide_index=True)
        st.markdown("**The same settings from the command line** (each run draws fresh noise "
                    "from OS entropy; there is no seed to give):")
        st.code(command, language="bash", wrap_lines=True)
        st.markdown("**The same settings in Python** (no `random_state`: fresh OS entropy):")
        st.code(snippet, language="python", wrap_lines=True)
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
        with st.expander("The release card as JSON (the .card.json file)"):
            st.json(card, expanded=True)
        # the escaped table: Streamlit's own CSV export of this preview must not carry formulas
        with st.container(key="wide-release-preview"):  # every column: a grid to scroll sideways
            st.dataframe(rel.to_csv_frame().head(20), height=240)


def _import_ledger() -> None:
    """Add an uploaded JSON ledger's releases (the CLI's ``--ledger`` file, an export) to this
    dataset's ledger. The dataset keeps its registered budget; an unregistered one takes the
    file's (or the budget box's when the file has none)."""
    upload = st.session_state.get("ledger_upload")
    if upload is None:
        return
    try:
        other = state.read_ledger_upload(upload.getvalue(), upload.name)
        if record is None and other.budget is None:
            other.set_budgets(budget, delta_budget)
        added = store.import_ledger(key, other, by=app_ledger.session_actor(),
                                    label=app_ledger.store_label(key, st.session_state.dataset_label))
    except (ValueError, OSError) as exc:
        st.session_state.ledger_message = ("error", str(exc))
        return
    st.session_state.ledger_message = ("success", f"Imported the ledger {upload.name}: {added} "
                                       f"release(s) added. {store.ledger(key).summary()}")


def _raise_budget() -> None:
    ss = st.session_state
    try:
        store.raise_budget(key, ss.get("raise_eps"), ss.get("raise_delta"), reason=ss.get("raise_reason", ""),
                           by=app_ledger.session_actor())
    except (ValueError, OSError) as exc:
        ss.ledger_message = ("error", str(exc))
        return
    ss.ledger_message = ("success", "Budget raised (logged).")


st.subheader("Ledger of this dataset")
if ledger.entries:
    st.caption(md_escape(ledger.summary()))
    # the columns that tell releases apart, narrow enough for a 1280 px window (the dataset is this
    # one; the full hashes are in the JSON ledger below)
    st.dataframe(pd.DataFrame([{"release": e.mechanism, "ε": "inf" if e.unbounded else e.epsilon,
                                "δ": e.delta, "relation": e.neighbouring, "when (UTC)": e.created_utc,
                                "CSV sha256": e.sha256[:12] + ("…" if len(e.sha256) > 12 else "")}
                               for e in ledger.entries]), hide_index=True)
else:
    st.caption("Nothing released yet.")
st.caption(f"The ledger is kept on the server ({md_code(store.path)}; key {md_code(key[:24])}), "
           "shared by every session and by the command line (`dpcore release ... --ledger` with this "
           "file). It survives reloads, new tabs and server restarts. Download it as a JSON ledger "
           "(the CLI's format), or add the releases of one.")
l1, l2 = st.columns(2)
l1.download_button("Download ledger (JSON)", json.dumps(store.export_dict(key), indent=2, allow_nan=False),
                   "dp-ledger.json", "application/json", key="dl_ledger")
l2.file_uploader("Add the releases of a ledger (JSON)", type=["json"], key="ledger_upload",
                 on_change=_import_ledger)
if record is not None:
    with st.expander("Raise the budget (explicit, logged)"):
        r1, r2 = st.columns(2)
        r1.number_input("New ε budget", min_value=float(record.budget), value=float(record.budget),
                        key="raise_eps")
        if record.delta_budget is not None:
            r2.number_input("New δ budget", min_value=float(record.delta_budget), max_value=1.0,
                            value=float(record.delta_budget), format="%.1e", key="raise_delta")
        st.text_input("Reason (kept in the budget log)", key="raise_reason")
        st.button("Raise the budget", key="raise_budget", on_click=_raise_budget)
        log = store.budget_log(key)
        st.dataframe(pd.DataFrame([asdict(c) for c in log]), hide_index=True)
if message := st.session_state.pop("ledger_message", None):
    (st.error if message[0] == "error" else st.success)(md_escape(message[1]))
