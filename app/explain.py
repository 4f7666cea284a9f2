"""Plain words first, formulas on demand: the blocks every page shares.

- :data:`INTROS` / :func:`intro`: the one sentence each page opens with (what it shows, what to try);
- :data:`LOCK_LEGEND`: what the lock icon on a parameter means (``Param.privacy``);
- :func:`noise_block`: the noise of a release as one plain sentence per part of the model
  (:func:`app.card_text.noise_parts`), with the full table, its formulas and sources behind
  "How is this computed?".
"""

from __future__ import annotations

import math
from typing import Any

import streamlit as st

from app.card_text import noise_parts
from app.figures.common import noise_table
from app.markdown import md_escape
from dpcore.release import KIND_TEXT, Guarantee

__all__ = [
    "HOW",
    "INTROS",
    "LOCK_LEGEND",
    "guarantee_row",
    "intro",
    "noise_block",
]

#: What each page shows and what to try, in one or two short sentences (shown under its title).
INTROS: dict[str, str] = {
    "data": "Choose the table to protect and say what is public about it: its bounds, categories and "
            "classes. **Try:** keep the bundled digits, or upload a CSV and follow the steps.",
    "explore": "A preview release of the training rows with the sidebar's mechanism, drawn again as you "
               "move a setting: released rows (filled) over real held-out rows (hollow). **Try:** "
               "ε = 0.1, then ε = 10.",
    "privacy": "Where the ε comes from: the noise each part of the release gets and how the budget is "
               "shared. **Try:** a smaller ε, and watch the noise grow.",
    "distances": "How well a random-projection release keeps the distances between rows, and which "
                 "projected dimension k keeps them best. **Try:** a larger ε, then read the best k.",
    "utility": "How well models trained on releases do on real held-out rows, across a grid of ε (or "
               "of a size setting). **Try:** press **Run sweep**.",
    "compare": "Several mechanisms side by side: accuracy against ε on the same data and split. "
               "**Try:** press **Run sweep** with the mechanisms chosen for you.",
    "attack": "An attacker sees one release and guesses whether a target row was in the table; the "
              "empirical ε is what it proves. **Try:** press **Run attack**, then again at a larger ε.",
    "release": "Draw the release itself (fresh noise, charged to this dataset's budget as soon as it is "
               "shown), read its card and download it. **Try:** check the parameters, then press "
               "**Draw release**.",
}

LOCK_LEGEND = (":material/lock: marks a setting that changes the privacy guarantee or how its budget "
               "is spent; the others change only what the release looks like.")
#: the label of every expander that holds the formulas and sources behind a plain summary
HOW = "How is this computed?"


def intro(page: str) -> None:
    """The sentence page ``page`` opens with (:data:`INTROS`)."""
    st.markdown(INTROS[page])


def guarantee_row(g: Guarantee, note: str = "") -> None:
    """The guarantee in one row that fits a 1280 px window: epsilon and delta as metrics, the kind
    and the neighbouring relation as a caption (their long names cut metric values short)."""
    c1, c2, c3 = st.columns([1, 1, 3], vertical_alignment="bottom")
    c1.metric("guaranteed ε", "∞" if math.isinf(g.epsilon) else f"{g.epsilon:.4g}")
    c2.metric("δ", f"{g.delta:.2g}" if g.delta else "0")
    c3.caption(f"{KIND_TEXT[g.kind]}, {g.neighbouring} neighbours. {note}".strip())


def noise_block(records: list[Any]) -> Any:
    """The noise of a release in plain words, one line per part of the model, and the full table
    (sensitivity, scale, distribution, epsilon part, formula, source) behind :data:`HOW`.

    Returns the expander, for a page to add more of its formulas to it.
    """
    st.markdown("**Noise added.** Each part of the model gets noise sized from the most one row can "
                "change it, which the public bounds (the data's range) set:")
    st.markdown("\n".join(f"- {md_escape(line)}" for line in noise_parts(records)) or "- none")
    how = st.expander(HOW)
    with how:
        st.markdown("Every noisy statistic with its **sensitivity** (the most one row can change it, in "
                    "the norm given), the **noise scale** calibrated from it (a Laplace scale or a "
                    "Gaussian standard deviation), its share of ε, the formula and the paper it comes "
                    "from.")
        st.table(noise_table(records), hide_index=True)
    return how
