"""dpcore: non-interactive differentially private data release.

Mechanisms (:mod:`dpcore.mechanisms`), privacy accounting (:mod:`dpcore.accounting`),
utility evaluation (:mod:`dpcore.evaluation`), data loading (:mod:`dpcore.data`), the
release card (:mod:`dpcore.release`) and releases in the original schema and units
(:mod:`dpcore.decode`). This package never imports Streamlit.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
