"""Data page: a bundled table, or an uploaded one prepared step by step (file, label and task, public
facts, use); then the table in use, its public bounds, a public reference table and the split.

An upload goes through four steps, each shown (opened) when it is the first one still missing:
1. the file (its first rows; how to treat missing values), 2. the label and the task, 3. the public
facts (classes, categories, bounds: import a file, a rule for many columns, DP estimates or typed),
4. use. Until the table is used, nothing of the previous table is shown on this page; the bounds
declared for it are kept as operations replayed whenever a choice above them changes
(:mod:`app.upload`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from app import state
from app.controls import initial
from app.explain import intro
from app.figures.images import image_grid_pixels
from app.markdown import md_escape
from app.upload import BoundsOp, diff_op, replay
from dpcore.data import Dataset, load_dataset, read_table
from dpcore.exceptions import DataValidationError, PrivacyLeakWarning
from dpcore.release import spreadsheet_safe
from dpcore.validation import TASKS, parse_value_list

ss = st.session_state
#: ``apply(new table, message, estimate=None)``: declare the new table's bounds (an estimate: a DP
#: estimate just charged, with the card's details)
Apply = Callable[..., None]
STEPS = ("Table", "Label and task", "Public facts", "Use")


def _import_classes() -> None:
    """Fill the class list from an uploaded classes file (the CLI's ``--classes FILE`` format)."""
    upload = ss.get("classes_file")
    if upload is None:
        return
    try:
        classes = state.parse_classes_upload(upload.getvalue(), upload.name)
    except ValueError as exc:
        ss.import_message = ("error", str(exc))
        return
    ss.upload_classes = ", ".join(str(c) for c in classes)
    ss.upload_classes_list = classes
    ss.import_message = ("success", f"{len(classes)} classes read from {upload.name}.")


def _import_categories(columns: list[str], nonnumeric: list[str]) -> None:
    """Fill the category lists from an uploaded categories file (the CLI's ``--categories``)."""
    upload = ss.get("categories_file")
    if upload is None:
        return
    try:
        cats = state.parse_categories_upload(upload.getvalue(), upload.name, columns)
    except ValueError as exc:
        ss.import_message = ("error", str(exc))
        return
    for c, values in cats.items():
        if c in nonnumeric:
            ss[f"cats:{c}"] = ", ".join(values)
    ss.upload_extra_categories = {c: v for c, v in cats.items() if c not in nonnumeric}
    ss.import_message = ("success", f"categories of {len(cats)} column(s) read from {upload.name}.")


# ------------------------------------------------------------------------- public bounds tools
def bounds_table(ds: Dataset, apply: Apply) -> None:
    """The bounds editor (a grid: spreadsheet paste) and its "Apply these bounds as public"."""
    origin = ds.meta.get("bounds_origin", {}) if ds.meta else {}
    table = pd.DataFrame({
        "column": ds.feature_names, "lo": ds.bounds[:, 0], "hi": ds.bounds[:, 1],
        "origin": [src if src != "metadata" else origin.get(c, src)
                   for c, src in zip(ds.feature_names, ds.bounds_sources, strict=True)],
    })
    edited = st.data_editor(table, disabled=["column", "origin"], hide_index=True, height=240,
                            key=f"bounds_editor:{ds.fingerprint[:12]}")
    st.caption("The table takes a block pasted from a spreadsheet: click the first `lo` cell to fill "
               "and press Ctrl+V (⌘V); two columns (lo, hi) fill as many rows as you paste.")
    if st.button("Apply these bounds as public"):
        new_ds, problem = state.apply_bounds_edit(ds, edited[["lo", "hi"]].to_numpy(dtype=float))
        if problem and new_ds is None:
            st.error(md_escape(problem))
        elif new_ds is not None:
            if problem:
                ss.data_bounds_note = problem
            apply(new_ds, "Public bounds applied from the table.")


def bounds_tools(ds: Dataset, apply: Apply) -> None:
    """A bounds file, or one [lo, hi] for many columns: the "Import a bounds file" expander."""
    bounds_file = st.file_uploader(
        "Public bounds file: JSON `{\"column\": [lo, hi]}` or CSV rows `column,lo,hi` (the format "
        "of `dpcore release --bounds`)", type=["json", "csv", "txt"],
        key=f"bounds_file:{ds.fingerprint[:12]}")
    if bounds_file is not None and st.button("Apply the bounds file", key="apply_bounds_file"):
        new_ds, message = state.apply_bounds_file(ds, bounds_file.getvalue(), bounds_file.name)
        if new_ds is None:
            st.error(md_escape(message))
        else:
            apply(new_ds, message)
    st.markdown("**Set these columns to [lo, hi]** (a rule for many columns)")
    bulk_key = f"bulk_cols:{ds.fingerprint[:12]}"
    data_cols = ds.data_bound_columns()
    if data_cols:
        st.button(f"Pick the {len(data_cols)} column(s) whose bounds come from the data",
                  on_click=lambda: ss.update({bulk_key: data_cols}), key="pick_data_cols")
    chosen_cols = st.multiselect("Columns", ds.feature_names, key=bulk_key, wrap=True)
    b1, b2, b3 = st.columns([2, 2, 1], vertical_alignment="bottom")
    bulk_lo = b1.number_input("lo", value=0.0, format="%g", key="bulk_lo")
    bulk_hi = b2.number_input("hi", value=1.0, format="%g", key="bulk_hi")
    if b3.button("Set", key="bulk_set", disabled=not chosen_cols):
        new_ds, message = state.set_column_bounds(
            ds, {c: (float(bulk_lo), float(bulk_hi)) for c in chosen_cols})
        if new_ds is None:
            st.error(md_escape(message))
        else:
            apply(new_ds, message)


def dp_bounds_tools(ds: Dataset, apply: Apply, key: str, label: str) -> None:
    """Spend a stated epsilon on DP estimates of the missing bounds (:mod:`dpcore.dp_bounds`),
    charged to the ledger of the dataset ``key`` before they are shown."""
    from app import ledger as app_ledger  # here: the first page imports neither module (latency)
    from dpcore.dp_bounds import apply_estimate, estimate_bounds
    from dpcore.ledger import LedgerEntry

    label_side = ds.task == "regression" and ds.label_bounds_source == "data"
    sides = int(ds.data_side_mask().sum()) + 2 * label_side
    st.markdown(
        f"{sides} bound side(s) have no public value. Instead of the private minimum and maximum, spend "
        "part of this dataset's budget on **differentially private estimates** of a low and a high "
        "quantile of each (5 % and 95 %, further in when the ε per side is small): the exponential "
        "mechanism over public candidates in the range below "
        "(a narrower public range gives tighter bounds). The ε is split evenly over the sides and "
        "charged now, as its own release in the dataset's ledger; each release afterwards spends its own ε "
        "on top (basic composition), and its card records the bounds' source and cost.")
    e1, e2, e3 = st.columns(3)
    eps = e1.number_input("ε for the bounds", min_value=0.001, value=0.5, step=0.1, format="%g",
                          key="dpb_eps")
    lo = e2.number_input("public candidate range: lo", value=-1e6, format="%g", key="dpb_lo")
    hi = e3.number_input("public candidate range: hi", value=1e6, format="%g", key="dpb_hi")
    try:
        store = app_ledger.store()
        record = store.dataset(key)
    except (ValueError, OSError) as exc:
        st.error(f"The ledger store cannot be used: {md_escape(str(exc))}")
        return
    if record is None:
        budget = st.number_input("ε budget of this dataset (set once: this charge registers it)",
                                 min_value=0.01, step=0.5, key="p:budget",
                                 **initial("p:budget", "value", 10.0))
    else:
        budget = None
        st.caption(f"Charged to the dataset's ledger: budget ε = {record.budget:g}, spent "
                   f"{store.ledger(key).total('replace-one').epsilon:.4g}.")
    if st.button(f"Estimate the bounds with DP (ε = {eps:g})", key="dpb_go"):
        try:
            est = estimate_bounds(ds, float(eps), candidate_range=(float(lo), float(hi)))
            new = apply_estimate(ds, est)
            details = {**est.details(), "charged": "as its own release in the dataset's ledger"}
            digest = hashlib.sha256(json.dumps(details, sort_keys=True).encode()).hexdigest()
            entry = LedgerEntry("dp-bounds", est.epsilon, 0.0, "replace-one",
                                app_ledger.store_label(key, ds.name), sha256=digest)
            store.charge(key, entry, budget=budget, by=app_ledger.session_actor(),
                         label=app_ledger.store_label(key, label))
        except (ValueError, OSError) as exc:  # BudgetExceededError, DataValidationError, a busy store
            st.error(f"Not estimated, nothing charged: {md_escape(str(exc))}", icon=":material/block:")
            return
        apply(dataclasses.replace(new, meta={**new.meta, "dp_bounds": details}),
              f"DP bounds estimated for {est.n_sides} side(s) with ε = {est.epsilon:g} "
              f"({est.epsilon_per_side:.3g} each), charged to the dataset's ledger.",
              estimate=(est, details))


def bounds_section(ds: Dataset, apply: Apply, *, key: str, label: str, in_use: bool = True) -> None:
    """The public bounds of ``ds`` and every way to declare them: typed in the editor, a bounds file
    or a rule for many columns, or DP estimates (spends budget, charged to dataset ``key``).
    ``in_use``: ``ds`` is the table in use (bounds from the data are then an error, not a to-do)."""
    st.markdown(
        "Every mechanism clips the data to these bounds and derives its noise from them. They must be "
        "**public** (from documentation or domain knowledge): bounds read off the private data leak "
        "information, and then no guarantee holds."
    )
    if ds.bounds_source == "data" and in_use:
        st.error("Some bounds below were computed from the private data: the release card will say "
                 "`bounds_source: data` and that the guarantee does NOT hold. Enter public bounds.",
                 icon=":material/report:")
    elif ds.bounds_source == "data":
        st.warning(f"{len(ds.data_bound_columns())} column(s) below still have the private data's minimum "
                   "and maximum as bounds: declare public ones (used like this, the release card would say "
                   "that the guarantee does NOT hold).", icon=":material/edit_note:")
    else:
        st.success(f"Bounds source: **{ds.bounds_source}**.")
    if note := ss.pop("data_bounds_note", None):
        st.warning(md_escape(note))
    ranges = np.unique(ds.bounds, axis=0)
    st.caption(f"All {ds.n_features} columns: [{ranges[0, 0]:g}, {ranges[0, 1]:g}]." if len(ranges) == 1
               else f"{len(ranges)} different [lo, hi] ranges over {ds.n_features} columns.")
    # lazy expanders (on_change="rerun": their widgets are built only while open), the editor open
    # at once unless every bound comes from the dataset's own metadata
    editor = st.expander("See and edit the bounds of every column", expanded=ds.bounds_source != "metadata",
                         key=f"bounds_table:{ds.fingerprint[:12]}", on_change="rerun")
    if editor.open:
        with editor:
            bounds_table(ds, apply)
    if ss.get("bounds_message"):
        st.success(md_escape(ss.pop("bounds_message")), icon=":material/check_circle:")
    if ds.bounds_source == "data":
        dp_tools = st.expander("Estimate the missing bounds with differential privacy (spends budget)",
                               key=f"dp_bounds:{ds.fingerprint[:12]}", on_change="rerun")
        if dp_tools.open:
            with dp_tools:
                dp_bounds_tools(ds, apply, key, label)
    if ds.meta.get("dp_bounds"):
        info = ds.meta["dp_bounds"]
        st.info(f"Bounds of {len(info['columns'])} column(s) are DP estimates (ε = {info['epsilon']:g}, "
                f"{info['sides_estimated']} side(s), charged to the dataset's ledger); the card of every "
                "release records them with their source and cost.", icon=":material/insights:")
    tools = st.expander("Import a bounds file, or set many columns at once",
                        expanded=ds.bounds_source == "data", key=f"bounds_tools:{ds.fingerprint[:12]}",
                        on_change="rerun")
    if tools.open:
        with tools:
            bounds_tools(ds, apply)


# ------------------------------------------------------------------------------ the table in use
def table_in_use(ds: Dataset, *, preview: bool) -> None:
    """What the table in use is: its size, task, classes, rows (images or the first 50 rows)."""
    flagged = ds.bounds_source == "data" or ds.classes_source == "data"
    for msg in ss.get("data_warnings", []) if flagged else []:
        st.warning(md_escape(msg), icon=":material/warning:")
    st.subheader("Preview")
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("rows", f"{ds.n_samples:,}")
    c2.metric("features", ds.n_features)
    c3.metric("task", ds.task)
    c4.metric("label", md_escape(ds.label_name) if ds.label_name else "—")
    if ds.classes is not None:
        st.caption(f"Classes ({ds.classes_source}): "
                   + md_escape(", ".join(str(c) for c in ds.classes.tolist()[:30]))
                   + (" ..." if len(ds.classes) > 30 else ""))
    if ds.image_shape:
        # a still picture: the first page then needs none of Plotly's JavaScript (seconds to load)
        st.image(image_grid_pixels(ds.X[:24], ds.image_shape, ncols=12), output_format="PNG",
                 caption="The first 24 rows as images")
    if preview:
        # the grids (preview, bounds editor) are lazy expanders (on_change="rerun": built only while
        # open): their JavaScript was about a third of the first page's work in the browser. The
        # preview starts open unless the rows are shown as images above.
        grid = st.expander("Table preview (first 50 rows)", expanded=not ds.image_shape,
                           key=f"preview:{ds.fingerprint[:12]}", on_change="rerun")
        if grid.open:
            with grid:
                with st.container(key="wide-table-preview"):  # every column: a grid to scroll sideways
                    st.dataframe(ds.to_frame().head(50), height=240)


def public_table_and_split(ds: Dataset) -> None:
    """The public reference table (PubPCA, pca-identity) and the held-out split."""
    st.subheader("Public reference table (optional)")
    st.markdown(
        "PCA-Gauss with `pca_source = public` and the pca-identity baseline compute their basis from "
        "**public** rows: a separate table with the same columns, e.g. a published sample or last "
        "year's released data. It is never a part of the private table; the card records its SHA-256.")
    public_upload = st.file_uploader("Public table (CSV, Parquet or .npz)", key="public_upload",
                                     type=["csv", "gz", "parquet", "pq", "npz", "txt", "tsv"])
    if public_upload is not None:
        def read_public() -> state.PublicTable:  # refused before the memo keeps it if it does not fit
            table = state.load_public_table(public_upload.getvalue(), public_upload.name, ds)
            state.check_fits_session(state.approx_nbytes(table), f"{public_upload.name} as read")
            return table

        try:
            ss.public_table = state.memo(("public", public_upload.file_id, ds.fingerprint), read_public)
        except ValueError as exc:
            st.error(md_escape(str(exc).strip().splitlines()[0] if str(exc).strip() else "bad file"))
    current_public = state.public_table(ds)
    if current_public is not None:
        st.caption(f"Public rows: {current_public.X.shape[0]:,} from "
                   f"{md_escape(current_public.name)} (sha256 {current_public.sha256[:16]}...)")

    st.subheader("Held-out split")
    st.slider("Fraction of rows held out as real test data (utility evaluation only)", 0.1, 0.5,
              key="p:test_size", step=0.05, **initial("p:test_size"))
    n_train, n_test = state.split_sizes()  # the counts only: no scikit-learn on the first page
    st.caption(f"Explore and Utility release from {n_train:,} training rows and evaluate on "
               f"{n_test:,} real held-out rows; the Release page uses all rows.")


def use_bounds(new_ds: Dataset, message: str, estimate: Any = None) -> None:
    """Declare ``new_ds``'s bounds on the table in use (a bundled one)."""
    state.set_dataset(new_ds, ss.dataset_label)
    ss.data_warnings = state.data_bounds_warning(new_ds)
    ss.bounds_message = message
    st.rerun()


# ------------------------------------------------------------------------------- the two flows
def bundled_flow() -> None:
    catalogue = state.bundled_catalogue()
    names = list(catalogue)
    current = ss.dataset.name
    # an uploaded table stays in use until a bundled one is chosen (no silent switch to names[0])
    choice = st.selectbox("Dataset", names, index=names.index(current) if current in names else None,
                          placeholder="Choose a bundled dataset",
                          format_func=lambda n: f"{n} — {catalogue[n]['title']}")
    if choice is None:
        st.info(f"Your uploaded table **{md_escape(current)}** stays in use until you choose a bundled "
                "dataset.", icon=":material/info:")
    else:
        if choice != current:
            state.set_dataset(state.load_bundled(choice), f"bundled: {choice}", key=f"bundled:{choice}")
            st.rerun()
        meta = catalogue[choice]
        st.markdown(meta.get("description", ""))
        st.caption(f"Source: {meta.get('source', '')} · Licence: {meta.get('license', '')}")
    in_use_sections(state.dataset())


def in_use_sections(ds: Dataset) -> None:
    """The table in use, its public bounds, a public reference table and the split."""
    table_in_use(ds, preview=True)
    st.subheader("Public bounds")
    bounds_section(ds, use_bounds, key=ss.dataset_key, label=ss.dataset_label)
    public_table_and_split(ds)


def _read(upload: Any) -> pd.DataFrame:
    limit = state.upload_limit_bytes()
    if upload.size > limit:  # the server refuses these too; defence in depth
        raise DataValidationError(
            f"{upload.name} is {upload.size / 2**20:.1f} MB, over the upload limit of "
            f"{state.upload_limit_mb():g} MB: use a smaller file or the dpcore command line")

    def read_upload() -> pd.DataFrame:  # refused before the memo keeps it if it does not fit
        table = read_table(upload.getvalue(), upload.name, max_bytes=limit)
        state.check_fits_session(state.approx_nbytes(table), f"{upload.name} as read")
        return table

    return state.memo(("upload", upload.file_id), read_upload)


def _build(upload: Any, frame: pd.DataFrame, settings: dict[str, Any]) -> tuple[Dataset, list[str]]:
    """The uploaded table with these public choices (data bounds), read again from the file: the
    category columns and a text class list's label as text, as the CLI reads them (the preview
    inferred their types). Raises ``ValueError`` naming the problem."""
    def build() -> tuple[Dataset, list[str]]:
        categories = settings["categories"]
        # the table once encoded (one-hot columns), before it is built
        width = frame.shape[1] + sum(len(v) - 1 for v in categories.values())
        state.check_fits_session(8.0 * frame.shape[0] * width, f"{upload.name} as a table")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PrivacyLeakWarning)
            ds = load_dataset(upload.getvalue(), filename=upload.name, label=settings["label"],
                              task=settings["task"], categories=categories, classes=settings["classes"],
                              missing=settings["missing"])
        return (dataclasses.replace(ds, name=upload.name),  # Dataset is frozen
                list(dict.fromkeys(str(w.message) for w in caught)))
    return state.memo(("prepared", upload.file_id, repr(sorted(settings.items()))), build)


def _step(number: int, done: bool, current: int, summary: str) -> Any:
    """Step ``number``'s box, its title saying whether it is done; the first step still missing is
    the one marked "now" (the steps after it are not shown until it is done, except Use)."""
    box = st.container(border=True, key=f"data-step-{number}")
    icon = ":material/check_circle:" if done else (":material/arrow_forward:" if number == current
                                                    else ":material/pending:")
    box.markdown(f"{icon} **{number} · {STEPS[number - 1]}**: {summary}"
                 + ("" if done else " — **now**" if number == current else ""))
    return box


def upload_flow() -> None:
    limit_mb = state.upload_limit_mb()
    upload = st.file_uploader(
        f"CSV, Parquet or .npz (X, y, feature_names), up to {limit_mb:g} MB",
        type=["csv", "parquet", "pq", "npz", "gz"], key="upload", max_upload_size=int(limit_mb),
        help=f"Files over {limit_mb:g} MB are refused by the server: use the command line "
             "(`dpcore release MECHANISM FILE -o out.csv ...`), which has no size limit.")
    if upload is None:
        st.markdown(" → ".join(f"**{i}** {name}" for i, name in enumerate(STEPS, start=1)))
        st.info(f"Choose a file to start. The table in use, **{md_escape(ss.dataset_label)}**, stays in use "
                "until you use another one.", icon=":material/info:")
        if ss.dataset_label.startswith("upload: "):  # an upload in use (the box empties on other pages)
            in_use_sections(state.dataset())
        return
    try:
        frame = _read(upload)
    except ValueError as exc:  # DataValidationError and any other value problem
        st.error(md_escape(str(exc).strip().splitlines()[0] if str(exc).strip() else "bad file"))
        return
    except Exception as exc:  # noqa: BLE001 - never a traceback for an uploaded file
        st.error(md_escape(f"{upload.name} could not be read ({type(exc).__name__}); check that "
                           "it is a CSV, Parquet or .npz table"))
        return
    if ss.get("bounds_ops_file") != upload.file_id:  # another file: its own public facts
        ss.bounds_ops, ss.bounds_ops_file = [], upload.file_id
    cols = list(frame.columns)
    chosen_label = ss.get("upload_label", "(choose)")  # an explicit choice: "(none)" is unsupervised
    chosen_label = chosen_label if chosen_label in ("(none)", *cols) else "(choose)"
    label = None if chosen_label in ("(choose)", "(none)") else chosen_label
    task = ss.get("upload_task", "(choose)")
    task = None if task in (None, "(choose)") else task
    nonnumeric = [c for c in cols if c != label and not pd.api.types.is_numeric_dtype(frame[c])]
    categories = {c: list(v) for c, v in ss.get("upload_extra_categories", {}).items()
                  if c in cols and c != label}
    for c in nonnumeric:
        text = ss.get(f"cats:{c}", "") or ""
        if text.strip():
            categories[c] = [v.strip() for v in text.split(",") if v.strip()]
    classes_text = (ss.get("upload_classes") or "") if label is not None and task == "classification" else ""
    from_file = ss.get("upload_classes_list")
    try:  # typed: numbers if every entry is a number, else texts (01 and 1: refused as one number; a
        # classes file of JSON strings keeps them as two texts)
        classes = (from_file if from_file is not None and classes_text == ", ".join(str(c) for c in from_file)
                   else parse_value_list(classes_text, "the class list") or None)
        class_problem = None
    except ValueError as exc:
        classes, class_problem = None, str(exc)
    missing = "error" if ss.get("upload_missing", "refuse") == "refuse" else "impute"
    settings = {"label": label, "task": task, "categories": categories, "classes": classes,
                "missing": missing}

    # what is done: the file is read; a label needs a task; the public facts are complete when the
    # table builds with every bound public, a public class list and categories for every text column
    step2 = chosen_label == "(none)" or (label is not None and task is not None)
    prepared, problem, notes = None, class_problem, []
    if step2 and problem is None:
        try:
            built, warned = _build(upload, frame, settings)
            prepared, notes = replay(built, ss.bounds_ops)
            ss.prepared_warnings = warned
        except ValueError as exc:
            problem = str(exc)
        except Exception as exc:  # noqa: BLE001 - never a traceback for an uploaded table
            problem = (f"{upload.name} could not be used ({type(exc).__name__}: "
                       f"{str(exc).splitlines()[0][:200] if str(exc) else 'no detail'})")
    missing_facts = [] if prepared is None else (
        ([f"{len(prepared.data_bound_columns())} column(s) still take their bounds from the data"]
         if prepared.data_bound_columns() else [])
        + (["the class list is read from the data"] if prepared.classes_source == "data" else [])
        + (["the label's range is read from the data"] if prepared.task == "regression"
           and prepared.label_bounds_source == "data" else []))
    key = state.memo(("upload-key", upload.file_id), lambda: _dataset_key(upload.getvalue()))
    used = ss.get("used_upload")
    in_use = (prepared is not None and ss.dataset_key == key and used is not None
              and used == (upload.file_id, repr(sorted(settings.items())), len(ss.bounds_ops)))
    done = [True, step2, prepared is not None and not missing_facts, in_use]
    current = next((i + 1 for i, d in enumerate(done) if not d), 4)

    st.markdown(" → ".join(  # the progress: done, now (bold), to do
        f":material/check_circle: {i} {name}" if d else (f"**{i} {name}**" if i == current else f"{i} {name}")
        for i, (name, d) in enumerate(zip(STEPS, done, strict=True), start=1)))

    size = f"{frame.shape[0]:,} rows × {frame.shape[1]} columns"
    with _step(1, True, current, f"{md_escape(upload.name)}, {size}"):
        rows = st.expander("The file's first 20 rows", expanded=True, key=f"upload_rows:{upload.file_id}",
                           on_change="rerun")  # lazy: a closed one builds no grid
        if rows.open:
            with rows:
                with st.container(key="wide-upload-preview"):  # every column: a grid to scroll sideways
                    st.dataframe(spreadsheet_safe(frame.head(20)), height=220, key="upload_preview")
        st.radio(  # no "drop": n would depend on the data (clean the file first)
            "Rows with missing or infinite values", ["refuse", "impute"], key="upload_missing",
            horizontal=True, **initial("upload_missing"),
            format_func={"refuse": "refuse the table (remove those rows from the file first: its "
                         "row count is then public)", "impute": "impute the midpoint of the public "
                         "bounds (n stays public)"}.get)

    with _step(2, step2, current, {"(choose)": "which column is the label?",
                                   "(none)": "no label (unsupervised)"}.get(
            chosen_label, f"label {md_escape(label)}, " + (f"task {task}" if task else "task not chosen"))):
        l1, l2 = st.columns(2)
        l1.selectbox("Label column", ["(choose)", "(none)", *cols], key="upload_label",
                     format_func=lambda c: {"(none)": "no label (unsupervised)"}.get(c, c),
                     **initial("upload_label"),
                     help="The column a model should predict, or no label at all (clustering).")
        l2.selectbox("Task", ["(choose)", *TASKS], key="upload_task", **initial("upload_task"),
                     help="A public choice: it is never guessed from the private labels.")
        if chosen_label == "(choose)":
            st.info("Choose the label column, or *no label*.", icon=":material/arrow_upward:")
        elif label is not None and task is None:
            st.info("Choose the task of this label (classification or regression): a public choice, "
                    "never guessed from the labels.", icon=":material/arrow_upward:")

    if step2:
        with _step(3, done[2], current, "complete" if done[2] else md_escape("; ".join(missing_facts)
                                                                              or "to declare")):
            public_facts(upload, cols, label, task, nonnumeric, prepared, problem, notes, key, in_use)
    else:
        st.markdown(":material/pending: **3 · Public facts**: after the label and the task")

    if not step2:
        st.markdown(":material/pending: **4 · Use**: after the public facts")
        return
    with _step(4, in_use, current, "in use" if in_use else "the rest of the app keeps "
               + md_escape(ss.dataset_label) + " until you press **Use this table**"):
        use_step(upload, frame, settings, chosen_label, label, task, prepared, problem, missing_facts,
                 key, in_use)
    if in_use:
        table_in_use(state.dataset(), preview=False)  # its rows: the file's preview, step 1
        public_table_and_split(state.dataset())


def use_step(upload: Any, frame: pd.DataFrame, settings: dict[str, Any], chosen_label: str,
             label: str | None, task: str | None, prepared: Dataset | None, problem: str | None,
             missing_facts: list[str], key: str, in_use: bool) -> None:
    """Step 4: use the prepared table (what is still missing is said first)."""
    if in_use:
        st.success(f"**{md_escape(upload.name)}** is the table in use.", icon=":material/check_circle:")
    else:
        if missing_facts:
            st.warning("You can use it now, but " + md_escape("; ".join(missing_facts)) + ": the release "
                       "card will say that the guarantee does NOT hold.", icon=":material/warning:")
        if st.button("Use this table", type="primary"):
            try:
                if chosen_label == "(choose)":
                    raise ValueError("choose the label column, or no label (step 2)")
                if label is not None and task is None:  # the loader's message: choose the task
                    _build(upload, frame, settings)
                if problem is not None:
                    raise ValueError(problem)
                if prepared is None:
                    raise ValueError("the table could not be prepared")
                state.set_dataset(prepared, f"upload: {upload.name}", key=key)  # the ledger's key: the bytes
                ss.data_warnings = list(ss.get("prepared_warnings", []))
                ss.used_upload = (upload.file_id, repr(sorted(settings.items())), len(ss.bounds_ops))
                st.rerun()
            except ValueError as exc:  # DataValidationError and any other value problem
                st.error(md_escape(str(exc)))


def _dataset_key(data: bytes) -> str:
    from dpcore.ledger_store import dataset_key

    return dataset_key(data)


def public_facts(upload: Any, cols: list[str], label: str | None, task: str | None, nonnumeric: list[str],
                 prepared: Dataset | None, problem: str | None, notes: list[str], key: str,
                 in_use: bool) -> None:
    """Step 3: the class list, the categories of text columns, then the public bounds."""
    if label is not None and task == "classification":
        k1, k2 = st.columns([3, 2], vertical_alignment="bottom")
        k1.text_input(
            "Public class list (comma-separated)", key="upload_classes", **initial("upload_classes"),
            help="The classes the label can take, from public documentation. Left empty, the "
                 "list is read from the data: one record with a rare class would change the "
                 "release, so the card will say the guarantee does NOT hold.")
        k2.file_uploader("…or a classes file (JSON list, as `--classes FILE`)", type=["json"],
                         key="classes_file", on_change=_import_classes)
    st.file_uploader(
        "Public categories file: JSON `{\"column\": [\"cat1\", \"cat2\"]}` (the format of "
        "`dpcore release --categories`); listed columns are one-hot encoded", type=["json"],
        key="categories_file", on_change=_import_categories, args=(cols, nonnumeric))
    if message := ss.pop("import_message", None):
        (st.error if message[0] == "error" else st.success)(md_escape(message[1]))
    extra = [c for c in ss.get("upload_extra_categories", {}) if c in cols and c != label]
    if extra:
        st.caption("Numeric columns one-hot encoded from the categories file: " + md_escape(", ".join(extra)))
    if nonnumeric:
        st.markdown("**Non-numeric columns** need a *public* list of categories to be one-hot "
                    "encoded (a list read off the data would leak which values occur).")
        for c in nonnumeric:
            st.text_input(f"Categories of {md_escape(c)} (comma-separated)", key=f"cats:{c}",
                          **initial(f"cats:{c}"))
    if problem is not None:
        waiting = [c for c in nonnumeric if not str(ss.get(f"cats:{c}", "")).strip()]
        if waiting:  # the step not done yet, not an error: nothing has been typed
            st.info("Next: the public categories of " + md_escape(", ".join(waiting))
                    + " (above); then the bounds.", icon=":material/arrow_upward:")
        else:
            st.error(md_escape(problem))
        return
    if prepared is None:
        st.info("The public bounds come after the label and the task (step 2).")
        return
    for note in notes:
        st.warning(md_escape(note))
    st.markdown("**Public bounds**")

    def apply(new_ds: Dataset, message: str, estimate: Any = None) -> None:
        op = (BoundsOp("dp", estimate=estimate[0], details=estimate[1]) if estimate
              else diff_op(prepared, new_ds))
        if op is not None:
            ss.bounds_ops = [*ss.bounds_ops, op]
        if in_use:  # the table in use takes the new bounds at once, as a bundled table does
            state.set_dataset(new_ds, ss.dataset_label)
            ss.data_warnings = state.data_bounds_warning(new_ds)
            file_id, settings, _ = ss.used_upload
            ss.used_upload = (file_id, settings, len(ss.bounds_ops))
        ss.bounds_message = message
        st.rerun()

    bounds_section(prepared, apply, key=key, label=f"upload: {upload.name}", in_use=in_use)


# ------------------------------------------------------------------------------------- the page
st.title("Data")
intro("data")
st.caption("Everything you upload stays in this browser session's memory: it is never written to "
           "disk and never shared with other users.")
source = st.radio("Source", ["Bundled real dataset", "Upload a file"], horizontal=True,
                  key="p:data_source", **initial("p:data_source"))
if source == "Bundled real dataset":
    bundled_flow()
else:
    upload_flow()
