"""The app's public reference table (issue 12, row 6): a separate upload, never the private rows."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest

ENTRY = str(Path(__file__).resolve().parents[1] / "app" / "streamlit_app.py")


def _public_csv(n: int = 80) -> tuple[bytes, np.ndarray]:
    from dpcore.data import load_dataset

    ds = load_dataset("digits")
    X = np.random.default_rng(5).integers(0, 17, (n, ds.n_features)).astype(float)
    frame = pd.DataFrame(X, columns=ds.feature_names)
    return frame.to_csv(index=False).encode(), X


@pytest.mark.slow
def test_pca_identity_needs_and_uses_the_uploaded_public_table():
    at = AppTest.from_file(ENTRY, default_timeout=120)
    at.run()
    at.sidebar.selectbox(key="mechanism").select("pca-identity").run()
    at.switch_page("../pages/release.py").run()
    next(b for b in at.button if b.label == "Draw release").click().run()
    assert not at.exception
    assert any("public\\_data" in e.value for e in at.error), [e.value for e in at.error]
    assert "pending_release" not in at.session_state or at.session_state.pending_release.get("csv") is None

    at.switch_page("../pages/data.py").run()
    raw, X = _public_csv()
    at.get("file_uploader")[-1].set_value(("public.csv", raw, "text/csv")).run()
    assert not at.exception
    assert any("Public rows: 80" in c.value for c in at.caption), [c.value for c in at.caption]
    at.switch_page("../pages/release.py").run()
    next(b for b in at.button if b.label == "Draw release").click().run()
    assert not at.exception, [e.value for e in at.exception]
    pending = at.session_state.pending_release
    card = json.loads(pending["card"])
    assert card["details"]["public_data_sha256"] == hashlib.sha256(
        np.ascontiguousarray(X).tobytes()).hexdigest()
    assert card["details"]["n_public_rows"] == 80
    released = pd.read_csv(io.BytesIO(pending["csv"]))
    assert len(released) == at.session_state.dataset.n_samples  # every private row, none used as public
