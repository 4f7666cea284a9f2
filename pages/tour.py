"""Guided tour: seven steps, each one idea and one control on a bundled table, with Next and Back.

The steps, their data and their sentences are in ``app/tour.py``; their figures in
``app/figures/tour.py``. Every sentence that states a result is computed from the data the step
plots.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import streamlit as st

from app import tour
from app.controls import initial
from app.figures.images import image_grid_pixels
from app.figures.tour import step_figure

DATA_PAGE = Path(__file__).resolve().parent / "data.py"
ATTACK_PAGE = Path(__file__).resolve().parent / "attack.py"
ss = st.session_state
steps = tour.STEPS
index = min(max(int(ss.get("tour_step", 0)), 0), len(steps) - 1)
step = steps[index]


def go(to: int) -> None:
    ss.tour_step = min(max(to, 0), len(steps) - 1)
    if to > 0:  # the visitor is under way: compute the slow steps' data in the background
        tour.start_precomputing()


st.title("Guided tour")
st.caption("Seven steps on bundled public tables, one idea and one control each: read the idea, move "
           "the control, read what the figure shows, then press **Next**.")
p1, p2, p3 = st.columns([5, 1, 1.3], vertical_alignment="bottom")
p1.progress((index + 1) / len(steps), text=f"Step {index + 1} of {len(steps)} · **{step.title}**")
p2.button("Back", key="tour_back", on_click=go, args=(index - 1,), disabled=index == 0,
          icon=":material/arrow_back:", width="stretch")
if index < len(steps) - 1:
    p3.button("Next", key="tour_next", on_click=go, args=(index + 1,), type="primary",
              icon=":material/arrow_forward:", width="stretch")
elif p3.button("Your data", key="tour_done", type="primary", icon=":material/table:", width="stretch",
               help="The Data page: choose a table and its public facts"):
    st.switch_page(DATA_PAGE)
st.markdown(step.idea)

left, right = st.columns([2, 3], gap="large")
with left:
    key = f"tour:{step.key}"
    fmt = step.unit.format
    if len(step.options) <= 3:
        value = st.segmented_control(step.control, step.options, format_func=fmt, key=key, required=True,
                                     **initial(key, "default", step.default))
    else:
        value = st.select_slider(step.control, step.options, format_func=fmt, key=key,
                                 **initial(key, "value", step.default))
    if not tour.heavy_ready(step.key):
        with st.spinner("Computing this step once for every visitor of this server (a few seconds)..."):
            data = tour.step_data(step.key, value)
    else:
        data = tour.step_data(step.key, value)
    with st.container(key="tour-claims"):
        st.markdown("\n\n".join(tour.step_claims(step.key, data)))
    if step.key == "noise":  # the picture itself, beside the numbers
        shape = data["image_shape"]
        lo, hi = float(data["bounds"][:, 0].min()), float(data["bounds"][:, 1].max())
        i1, i2 = st.columns(2)
        for col, values, caption in ((i1, data["mean"], "the real average"),
                                     (i2, data["noisy"], f"released at ε = {data['epsilon']:g}")):
            col.image(image_grid_pixels(np.asarray(values)[None, :], shape, ncols=1, zmin=lo, zmax=hi,
                                        tile_px=96), caption=caption, output_format="PNG")
    with st.expander("How is this computed?"):
        st.markdown(step.how)
        if step.key == "choose":
            st.caption("Why this recommendation: " + data["all"]["reason"])
    if step.key == "attack":
        st.page_link(ATTACK_PAGE, label="Play the attack yourself on the Attack page",
                     icon=":material/security:")
with right:
    st.plotly_chart(step_figure(step.key, data), key=f"tour_figure_{step.key}")
