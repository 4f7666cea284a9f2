"""Data page: choose a bundled dataset or upload a table, set label, task, public bounds, split."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings

import numpy as np
import pandas as pd
import streamlit as st

from app import state
from app.controls import initial
from app.figures.images import image_grid_pixels
from app.markdown import md_escape
from dpcore.data import Dataset, load_dataset, read_table
from dpcore.exceptions import DataValidationError, PrivacyLeakWarning
from dpcore.release import spreadsheet_safe
from dpcore.validation import TASKS, parse_value_list


def _import_classes() -> None:
    """Fill the class list from an uploaded classes file (the CLI's ``--classes FILE`` format)."""
    upload = st.session_state.get("classes_file")
    if upload is None:
        return
    try:
        classes = state.parse_classes_upload(upload.getvalue(), upload.name)
    except ValueError as exc:
        st.session_state.import_message = ("error", str(exc))
        return
    st.session_state.upload_classes = ", ".join(str(c) for c in classes)
    st.session_state.upload_classes_list = classes
    st.session_state.import_message = ("success", f"{len(classes)} classes read from {upload.name}.")


def _import_categories(columns: list[str], nonnumeric: list[str]) -> None:
    """Fill the category lists from an uploaded categories file (the CLI's ``--categories``)."""
    upload = st.session_state.get("categories_file")
    if upload is None:
        return
    try:
        cats = state.parse_categories_upload(upload.getvalue(), upload.name, columns)
    except ValueError as exc:
        st.session_state.import_message = ("error", str(exc))
        return
    for c, values in cats.items():
        if c in nonnumeric:
            st.session_state[f"cats:{c}"] = ", ".join(values)
    st.session_state.upload_extra_categories = {c: v for c, v in cats.items() if c not in nonnumeric}
    st.session_state.import_message = ("success", f"categories of {len(cats)} column(s) read from "
                                       f"{upload.name}.")


st.title("Data")
st.caption("Everything you upload stays in this browser session's memory: it is never written to "
           "disk and never shared with other users.")

catalogue = state.bundled_catalogue()
source = st.radio("Source", ["Bundled real dataset", "Upload a file"], horizontal=True,
                  key="p:data_source", **initial("p:data_source"))

if source == "Bundled real dataset":
    names = list(catalogue)
    current = st.session_state.dataset.name
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
else:
    limit_mb = state.upload_limit_mb()
    upload = st.file_uploader(
        f"CSV, Parquet or .npz (X, y, feature_names), up to {limit_mb:g} MB",
        type=["csv", "parquet", "pq", "npz", "gz"], key="upload", max_upload_size=int(limit_mb),
        help=f"Files over {limit_mb:g} MB are refused by the server: use the command line "
             "(`dpcore release MECHANISM FILE -o out.csv ...`), which has no size limit.")
    if upload is not None:
        limit = state.upload_limit_bytes()
        try:
            if upload.size > limit:  # the server refuses these too; defence in depth
                raise DataValidationError(
                    f"{upload.name} is {upload.size / 2**20:.1f} MB, over the upload limit of "
                    f"{state.upload_limit_mb():g} MB: use a smaller file or the dpcore command line"
                )
            def read_upload() -> pd.DataFrame:  # refused before the memo keeps it if it does not fit
                table = read_table(upload.getvalue(), upload.name, max_bytes=limit)
                state.check_fits_session(state.approx_nbytes(table), f"{upload.name} as read")
                return table

            frame = state.memo(("upload", upload.file_id), read_upload)
        except ValueError as exc:  # DataValidationError and any other value problem
            st.error(md_escape(str(exc).strip().splitlines()[0] if str(exc).strip() else "bad file"))
            st.stop()
        except Exception as exc:  # never a traceback for an uploaded file
            st.error(md_escape(f"{upload.name} could not be read ({type(exc).__name__}); check that "
                               "it is a CSV, Parquet or .npz table"))
            st.stop()
        st.write(f"**{md_escape(upload.name)}**: {frame.shape[0]:,} rows × {frame.shape[1]} columns")
        st.caption("The file as read (first 20 rows). It is used once you press **Use this table** "
                   "below; until then the rest of the app keeps the current dataset.")
        st.dataframe(spreadsheet_safe(frame.head(20)), height=220, key="upload_preview")
        cols = list(frame.columns)
        label = st.selectbox("Label column", ["(none)", *cols], key="upload_label")
        label = None if label == "(none)" else label
        task = st.selectbox("Task", ["(choose)", *TASKS],
                            key="upload_task",
                            help="A public choice: it is never guessed from the private labels.")
        classes_text = ""
        if label is not None and task == "classification":
            k1, k2 = st.columns([3, 2], vertical_alignment="bottom")
            classes_text = k1.text_input(
                "Public class list (comma-separated)", key="upload_classes",
                help="The classes the label can take, from public documentation. Left empty, the "
                     "list is read from the data: one record with a rare class would change the "
                     "release, so the card will say the guarantee does NOT hold.")
            k2.file_uploader("…or a classes file (JSON list, as `--classes FILE`)", type=["json"],
                             key="classes_file", on_change=_import_classes)
        nonnumeric = [c for c in cols if c != label and not pd.api.types.is_numeric_dtype(frame[c])]
        st.file_uploader(
            "Public categories file: JSON `{\"column\": [\"cat1\", \"cat2\"]}` (the format of "
            "`dpcore release --categories`); listed columns are one-hot encoded", type=["json"],
            key="categories_file", on_change=_import_categories, args=(cols, nonnumeric))
        if message := st.session_state.pop("import_message", None):
            (st.error if message[0] == "error" else st.success)(md_escape(message[1]))
        categories = {c: list(v) for c, v in st.session_state.get("upload_extra_categories", {}).items()
                      if c in cols and c != label}
        if categories:
            st.caption("Numeric columns one-hot encoded from the categories file: "
                       + md_escape(", ".join(categories)))
        if nonnumeric:
            st.markdown("**Non-numeric columns** need a *public* list of categories to be one-hot "
                        "encoded (a list read off the data would leak which values occur).")
            for c in nonnumeric:
                text = st.text_input(f"Categories of {md_escape(c)} (comma-separated)", key=f"cats:{c}")
                if text.strip():
                    categories[c] = [v.strip() for v in text.split(",") if v.strip()]
        missing = st.radio(  # no "drop": n would depend on the data (clean the file first)
            "Rows with missing or infinite values",
            ["refuse", "impute"], key="upload_missing", horizontal=True,
            format_func={"refuse": "refuse the table (remove those rows from the file first: its "
                         "row count is then public)", "impute": "impute the midpoint of the public "
                         "bounds (n stays public)"}.get)
        if st.button("Use this table", type="primary"):
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", PrivacyLeakWarning)
                    from_file = st.session_state.get("upload_classes_list")
                    # typed: numbers if every entry is a number, else texts (01 and 1: refused as one
                    # number; a classes file of JSON strings keeps them as two texts)
                    classes = (from_file if from_file is not None and classes_text ==
                               ", ".join(str(c) for c in from_file)
                               else parse_value_list(classes_text, "the class list") or None)
                    # the table once encoded (one-hot columns), before it is built
                    width = frame.shape[1] + sum(len(v) - 1 for v in categories.values())
                    state.check_fits_session(8.0 * frame.shape[0] * width, f"{upload.name} as a table")
                    # read again from the file: the category columns and a text class list's label
                    # as text, as the CLI reads them (the preview above inferred their types)
                    ds = load_dataset(upload.getvalue(), filename=upload.name, label=label,
                                      task=None if task == "(choose)" else task,
                                      categories=categories, classes=classes,
                                      missing="error" if missing == "refuse" else missing)
                ds = dataclasses.replace(ds, name=upload.name)  # Dataset is frozen
                from dpcore.ledger_store import dataset_key

                state.set_dataset(ds, f"upload: {upload.name}",  # the ledger's key: the file's bytes
                                  key=state.memo(("upload-key", upload.file_id),
                                                 lambda: dataset_key(upload.getvalue())))
                st.session_state.data_warnings = list(dict.fromkeys(str(w.message) for w in caught))
                st.rerun()
            except ValueError as exc:  # DataValidationError and any other value problem
                st.error(md_escape(str(exc)))
            except Exception as exc:  # noqa: BLE001 - never a traceback for an uploaded table
                st.error(md_escape(f"{upload.name} could not be used ({type(exc).__name__}: "
                                   f"{str(exc).splitlines()[0][:200] if str(exc) else 'no detail'}); "
                                   "the current dataset is kept"))

ds = state.dataset()
flagged = ds.bounds_source == "data" or ds.classes_source == "data"
for msg in st.session_state.get("data_warnings", []) if flagged else []:
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
# the grids (preview, bounds editor) are lazy expanders (on_change="rerun": built only while open):
# their JavaScript was about a third of the first page's work in the browser. The preview starts
# open unless the rows are shown as images above.
preview = st.expander("Table preview (first 50 rows)", expanded=not ds.image_shape,
                      key=f"preview:{ds.fingerprint[:12]}", on_change="rerun")
if preview.open:
    with preview:
        st.dataframe(ds.to_frame().head(50), height=240)

st.subheader("Public bounds")
st.markdown(
    "Every mechanism clips the data to these bounds and derives its noise from them. They must be "
    "**public** (from documentation or domain knowledge): bounds read off the private data leak "
    "information, and then no guarantee holds."
)
if ds.bounds_source == "data":
    st.error("Some bounds below were computed from the private data: the release card will say "
             "`bounds_source: data` and that the guarantee does NOT hold. Enter public bounds.",
             icon=":material/report:")
else:
    st.success(f"Bounds source: **{ds.bounds_source}**.")
bounds_note = st.session_state.pop("data_bounds_note", None)
if bounds_note:
    st.warning(md_escape(bounds_note))


def use_bounds(new_ds: Dataset, message: str) -> None:
    state.set_dataset(new_ds, st.session_state.dataset_label)
    st.session_state.data_warnings = state.data_bounds_warning(new_ds)
    st.session_state.bounds_message = message
    st.rerun()


def bounds_table(ds: Dataset) -> None:
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
                st.session_state.data_bounds_note = problem
            use_bounds(new_ds, "Public bounds applied from the table.")


ranges = np.unique(ds.bounds, axis=0)
st.caption(f"All {ds.n_features} columns: [{ranges[0, 0]:g}, {ranges[0, 1]:g}]." if len(ranges) == 1
           else f"{len(ranges)} different [lo, hi] ranges over {ds.n_features} columns.")
# open at once unless every bound comes from the dataset's own metadata
editor = st.expander("See and edit the bounds of every column", expanded=ds.bounds_source != "metadata",
                     key=f"bounds_table:{ds.fingerprint[:12]}", on_change="rerun")
if editor.open:
    with editor:
        bounds_table(ds)
if st.session_state.get("bounds_message"):
    st.success(md_escape(st.session_state.pop("bounds_message")), icon=":material/check_circle:")


def bounds_tools(ds: Dataset) -> None:
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
            use_bounds(new_ds, message)
    st.markdown("**Set these columns to [lo, hi]**")
    bulk_key = f"bulk_cols:{ds.fingerprint[:12]}"
    data_cols = ds.data_bound_columns()
    if data_cols:
        st.button(f"Pick the {len(data_cols)} column(s) whose bounds come from the data",
                  on_click=lambda: st.session_state.update({bulk_key: data_cols}), key="pick_data_cols")
    chosen_cols = st.multiselect("Columns", ds.feature_names, key=bulk_key)
    b1, b2, b3 = st.columns([2, 2, 1], vertical_alignment="bottom")
    bulk_lo = b1.number_input("lo", value=0.0, format="%g", key="bulk_lo")
    bulk_hi = b2.number_input("hi", value=1.0, format="%g", key="bulk_hi")
    if b3.button("Set", key="bulk_set", disabled=not chosen_cols):
        new_ds, message = state.set_column_bounds(
            ds, {c: (float(bulk_lo), float(bulk_hi)) for c in chosen_cols})
        if new_ds is None:
            st.error(md_escape(message))
        else:
            use_bounds(new_ds, message)


def dp_bounds_tools(ds: Dataset) -> None:
    """Spend a stated epsilon on DP estimates of the missing bounds (:mod:`dpcore.dp_bounds`),
    charged to the dataset's ledger before they are shown."""
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
        record = store.dataset(st.session_state.dataset_key)
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
                   f"{store.ledger(st.session_state.dataset_key).total('replace-one').epsilon:.4g}.")
    if st.button(f"Estimate the bounds with DP (ε = {eps:g})", key="dpb_go"):
        try:
            est = estimate_bounds(ds, float(eps), candidate_range=(float(lo), float(hi)))
            new = apply_estimate(ds, est)
            details = {**est.details(), "charged": "as its own release in the dataset's ledger"}
            digest = hashlib.sha256(json.dumps(details, sort_keys=True).encode()).hexdigest()
            key = st.session_state.dataset_key
            entry = LedgerEntry("dp-bounds", est.epsilon, 0.0, "replace-one",
                                app_ledger.store_label(key, ds.name), sha256=digest)
            store.charge(key, entry, budget=budget, by=app_ledger.session_actor(),
                         label=app_ledger.store_label(key, st.session_state.dataset_label))
        except (ValueError, OSError) as exc:  # BudgetExceededError, DataValidationError, a busy store
            st.error(f"Not estimated, nothing charged: {md_escape(str(exc))}", icon=":material/block:")
            return
        use_bounds(dataclasses.replace(new, meta={**new.meta, "dp_bounds": details}),
                   f"DP bounds estimated for {est.n_sides} side(s) with ε = {est.epsilon:g} "
                   f"({est.epsilon_per_side:.3g} each), charged to the dataset's ledger.")


# lazy (on_change="rerun"): its widgets are built only while it is open, not on every first page
if ds.bounds_source == "data":  # lazy, as the bounds tools below
    dp_tools = st.expander("Estimate the missing bounds with differential privacy (spends budget)",
                           key=f"dp_bounds:{ds.fingerprint[:12]}", on_change="rerun")
    if dp_tools.open:
        with dp_tools:
            dp_bounds_tools(ds)
if ds.meta.get("dp_bounds"):
    info = ds.meta["dp_bounds"]
    st.info(f"Bounds of {len(info['columns'])} column(s) are DP estimates (ε = {info['epsilon']:g}, "
            f"{info['sides_estimated']} side(s), charged to the dataset's ledger); the card of every release "
            "records them with their source and cost.", icon=":material/insights:")
tools = st.expander("Import a bounds file, or set many columns at once",
                    expanded=ds.bounds_source == "data", key=f"bounds_tools:{ds.fingerprint[:12]}",
                    on_change="rerun")
if tools.open:
    with tools:
        bounds_tools(ds)

st.subheader("Public reference table (optional)")
st.markdown(
    "PCA-Gauss with `pca_source = public` and the pca-identity baseline compute their basis from "
    "**public** rows: a separate table with the same columns, e.g. a published sample or last "
    "year's released data. It is never a part of the private table; the card records its SHA-256.")
public_upload = st.file_uploader("Public table (CSV, Parquet or .npz)", key="public_upload",
                                 type=["csv", "gz", "parquet", "pq", "npz", "txt", "tsv"])
if public_upload is not None:
    try:
        st.session_state.public_table = state.memo(
            ("public", public_upload.file_id, ds.fingerprint),
            lambda: state.load_public_table(public_upload.getvalue(), public_upload.name, ds))
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
