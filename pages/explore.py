"""Explore page: move the parameters and watch a seeded preview release follow."""

from __future__ import annotations

import hashlib
import math
from functools import partial

import numpy as np
import streamlit as st

from app import state
from app.card_text import automatic_choices, noise_savings
from app.controls import initial, mechanism_controls
from app.explain import guarantee_row, intro, noise_block
from app.figures.common import release_scatter_chart
from app.figures.images import image_grid_pixels
from app.markdown import md_escape
from app.runner import (
    IMAGE_ROWS,
    displayed_rows,
    draw_release,
    fit_view,
    kmeans_agreement,
    preview_rows,
    real_in_release_space,
    rows_at,
    two_d_view,
)
from dpcore.evaluation import release_class_labels
from dpcore.mechanisms import get_mechanism

ds = state.dataset()
name = st.session_state.mechanism
mech = get_mechanism(name)

st.title(f"Explore · {mech.title}")
intro("explore")


def _memo_view(basis: np.ndarray, real_rows: bool = False) -> object:
    """:func:`app.runner.fit_view` memoised in this session by the basis rows' digest: the real
    rows in the release space are the same for every epsilon, so the axes are fitted once.
    ``real_rows``: the basis is the held-out rows themselves (a release in the feature space with
    no map), known by the dataset and split without hashing it (25 MB on mnist-10k, 30 ms)."""
    digest = ((ds.fingerprint, st.session_state["p:test_size"]) if real_rows
              else hashlib.blake2b(basis, digest_size=16).hexdigest())  # basis: C-contiguous
    return state.memo(("view", digest, basis.shape), lambda: fit_view(basis))


@st.fragment
def explore_body() -> None:
    """Parameters, preview and plots. A fragment (``st.fragment``): moving one of its widgets
    reruns only this function, not the sidebar and the navigation, and the browser redraws only
    these elements."""
    left, right = st.columns([1, 2], gap="large")
    with left:
        params = mechanism_controls(mech, ds)
        seed = st.number_input("Preview seed", 0, 2**31 - 1, key="p:preview_seed",
                               **initial("p:preview_seed", "value", 0),
                               help="Previews are seeded so they are reproducible while you explore; "
                                    "they are labelled as previews and cannot be downloaded. The "
                                    "Release page draws a fresh release from OS entropy.")

    train, test = state.split()
    key = ("explore", ds.fingerprint, name, repr(sorted(params.items())), seed,
           st.session_state["p:test_size"])
    # a row-wise mechanism (each released row depends on its input row only) draws the rows this
    # page shows, not all n: on mnist-10k the full draw was 85% of a slider move's server time.
    # Not when a metric over all rows is shown (K-means agreement, "distances" mechanisms).
    drawn = (displayed_rows(train.n_samples) if mech.row_wise and "distances" not in mech.capabilities
             else None)
    with st.spinner("Drawing the preview release..."):
        result = state.memo(key, lambda: draw_release(name, params, train, int(seed), rows=drawn))

    with right:
        if result.error:
            st.error(md_escape(result.error))
            return
        release = result.release
        g = release.guarantee
        if not release.is_private:
            st.error("**NOT PRIVATE** — epsilon is infinite or the noise is zero. This setting is for "
                     "exploration only and cannot be downloaded.", icon=":material/block:")
        elif not g.holds:
            st.error("Bounds come from the private data: the guarantee below does **not** hold.",
                     icon=":material/report:")
        nominal = release.parameters.get("epsilon")
        if nominal is not None and math.isfinite(g.epsilon) and g.epsilon > float(nominal) * (1 + 1e-9):
            st.warning(f"The nominal ε = {nominal:g} is **not** what this calibration guarantees: "
                       f"the actual guarantee is ε = {g.epsilon:.4g}.")
        for w in release.details.get("warnings", []):
            st.warning(md_escape(w))
        real_mapped = real_in_release_space(release, test.X)
        n_released = release.data.shape[0] if result.rows is None else release.n_rows  # the full release's
        plotted = rows_at(result.rows, preview_rows(n_released))
        fit = partial(_memo_view, real_rows=release.transform_fn is None and release.space == "features")
        real2, rel2, axis = two_d_view(real_mapped, np.asarray(release.data, dtype=float), fit=fit,
                                       plotted=plotted)
        labels = test.y if ds.task == "classification" else None
        rel_labels = release_class_labels(release) if ds.task == "classification" else None
        if rel_labels is not None:  # the labels of the plotted rows, in the plotted order
            rel_labels = np.asarray(rel_labels)[plotted]
        unit = "units of the released columns"
        titles = ((f"released column 1 ({unit})", f"released column 2 ({unit})")
                  if axis == "released coordinates"
                  else (f"principal axis 1 ({unit})", f"principal axis 2 ({unit})"))
        # Vega-Lite on a canvas: the spec stays the same across epsilon moves, so the browser keeps
        # the chart and swaps its points (a Plotly chart was rebuilt, an SVG node per point)
        data, spec = release_scatter_chart(real2, rel2, labels, rel_labels, axis, axis_titles=titles,
                                           classes=ds.classes)
        st.vega_lite_chart(data, spec, key="scatter")
        if real_mapped is None:
            st.caption("This release has no public map for real rows (its projection is secret), so only "
                       "the release is shown.")
        guarantee_row(g, "In words below. A seeded preview of the training rows: never a release.")

    st.info(f"**The guarantee of this preview, in words.** {g.plain_language()}",
            icon=":material/verified_user:")
    chosen = automatic_choices(release.parameters, release.details)
    how = noise_block(release.noise)
    with how:
        if chosen:
            st.caption(chosen)  # what the empty (automatic) fields became and the rule, as on the card
        if saved := noise_savings(release.details):
            st.caption(saved)  # how much noise the Gaussian variant saves against the papers' Laplace
        if result.rows is not None:
            st.caption(f"This preview draws the {len(result.rows):,} released rows shown above, of "
                       f"{release.n_rows:,}: each row's noise depends on that row only, so they are drawn "
                       "as in the full release. The Release page draws every row.")
        clipped = result.diagnostics.get("n_clipped_entries", 0)
        if clipped:
            st.caption(f"Exploration only (never on the card): {clipped:,} entries were clipped to the "
                       "public bounds.")
        st.caption(f"{mech.summary} Source: {mech.citation}")

    if "distances" in mech.capabilities and release.data.shape[0] == train.n_samples:
        k = len(ds.classes) if ds.task == "classification" and ds.classes is not None else 2
        agree = state.memo(key + ("kmeans",), lambda: kmeans_agreement(
            np.asarray(release.data, dtype=float), train.X, k))
        st.metric(f"K-means (k = {k}) on the release vs on the real rows (ARI)", f"{agree['ari']:.3f}",
                  help="Adjusted Rand index between K-means clusterings of the same rows: 1 = the "
                       "projection with noise keeps the cluster structure, 0 = chance.")

    if ds.image_shape and release.data.shape[1] == int(np.prod(ds.image_shape)):
        st.subheader("Released rows as images")
        k = IMAGE_ROWS
        c1, c2 = st.columns(2)
        c1.caption("real (held-out)")
        # still pictures, not Plotly heatmaps: redrawing two 24-image heatmaps on every epsilon move
        # was most of the browser's work per move (no hover values on these grids)
        real_images = state.memo(("real_images", ds.fingerprint, st.session_state["p:test_size"], k),
                                 lambda: image_grid_pixels(test.X[:k], ds.image_shape, ncols=8))
        c1.image(real_images, output_format="PNG")  # no parameter changes it: built once
        c2.caption("released")
        first = rows_at(result.rows, np.arange(min(k, n_released)))
        released_images = image_grid_pixels(np.asarray(release.data)[first], ds.image_shape, ncols=8)
        c2.image(released_images, output_format="PNG")


explore_body()
