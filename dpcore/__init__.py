"""dpcore: non-interactive differentially private data release.

Mechanisms (:mod:`dpcore.mechanisms`), privacy accounting (:mod:`dpcore.accounting`),
utility metrics (:mod:`dpcore.utility`), data loading (:mod:`dpcore.data`) and the
release card (:mod:`dpcore.release`). This package never imports Streamlit.
"""

__version__ = "0.1.0"
