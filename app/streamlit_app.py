"""dp-explorer: the Streamlit entry point (``streamlit run app/streamlit_app.py``).

Builds the navigation, initialises the session and renders the sidebar widgets shared by every
page (dataset summary and mechanism choice). Pages in ``pages/`` are thin: they call ``dpcore``
and the figure helpers in ``app/figures``.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = [
    "PAGES",
    "ROOT",
    "ds",
    "nav",
    "pages",
]

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app import state  # noqa: E402
from app.markdown import md_escape  # noqa: E402
from dpcore.calibration import default_delta  # noqa: E402
from dpcore.mechanisms import MECHANISMS  # noqa: E402

PAGES = ROOT / "pages"

st.set_page_config(page_title="dp-explorer", page_icon=":material/lock:", layout="wide")
state.tune_process()
state.init_state()

pages = [  # the tour first: a teacher's way in (the app still opens on Data)
    st.Page(PAGES / "tour.py", title="Guided tour", icon=":material/school:"),
    st.Page(PAGES / "data.py", title="Data", icon=":material/table:", default=True),
    st.Page(PAGES / "explore.py", title="Explore", icon=":material/explore:"),
    st.Page(PAGES / "privacy.py", title="Privacy", icon=":material/verified_user:"),
    st.Page(PAGES / "distances.py", title="Distances", icon=":material/straighten:"),
    st.Page(PAGES / "utility.py", title="Utility", icon=":material/monitoring:"),
    st.Page(PAGES / "compare.py", title="Compare", icon=":material/compare_arrows:"),
    st.Page(PAGES / "attack.py", title="Attack", icon=":material/security:"),
    st.Page(PAGES / "release.py", title="Release", icon=":material/publish:"),
]
nav = st.navigation(pages)

ds = state.dataset()
with st.sidebar:
    st.markdown(f"**Dataset:** {md_escape(st.session_state.dataset_label)}")
    st.caption(f"{ds.n_samples:,} rows × {ds.n_features} features · task: {ds.task}")
    if ds.bounds_source == "data":
        st.warning("Bounds come from the data: no privacy guarantee holds.", icon=":material/warning:")
    names = state.mechanism_names(ds.task)
    rec = state.apply_recommendation(ds)  # the default mechanism and its settings: the public rule's
    if st.session_state.mechanism not in names:
        st.session_state.mechanism = names[0]
    st.selectbox(  # names only: the box is narrow at 1280 px; the title is said below
        "Mechanism", names, key="mechanism",
        format_func=lambda n: n + (" (recommended)" if n == rec["mechanism"] else ""),
        on_change=lambda: st.session_state.update(mechanism_chosen=True),
        help="The release mechanism used on the Explore, Privacy, Distances and Release pages. It starts "
             "at the recommended one for this table's public facts.",
    )
    chosen = MECHANISMS[st.session_state.mechanism]
    st.caption(f"**{chosen.title}.** {chosen.summary}")
    shown = dict(rec["parameters"])
    if shown.get("noise") == "gaussian" and "delta" not in shown:  # the mechanism's automatic delta
        shown["delta"] = f"automatic, {default_delta(ds.n_samples):.2g}"
    setting = ", ".join(f"{k} = {v:.3g}" if isinstance(v, float) else f"{k} = {v}" for k, v in shown.items())
    st.caption(f"**Recommended for this task and data shape:** {rec['mechanism']} ({md_escape(setting)})",
               help=md_escape(rec["reason"]) + " (dpcore.calibration.recommended_mechanism: public facts "
               "only)")

try:
    nav.run()
finally:  # also after st.stop() / st.rerun(): the session stays within its memory budget
    state.enforce_session_budget()
