"""Shared fixtures: small real tables every mechanism can release quickly."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dpcore.data import Dataset, load_dataset


@pytest.fixture(scope="session")
def small_digits() -> Dataset:
    """160 rows of the digits training split (public bounds and classes from the bundled metadata)."""
    train, _ = load_dataset("digits").split(0.25, random_state=0)
    return train.subset(np.arange(160))


@pytest.fixture(scope="session")
def narrow_digits(small_digits: Dataset) -> Dataset:
    """``small_digits`` with its 16 middle pixels (rows 2-3 of the image): cheap for every mechanism."""
    cols = np.arange(16, 32)
    return replace(small_digits, X=small_digits.X[:, cols], bounds=small_digits.bounds[cols],
                   feature_names=[small_digits.feature_names[c] for c in cols], image_shape=None,
                   column_bounds_source=None)


@pytest.fixture(autouse=True)
def _private_ledger_store(tmp_path_factory, monkeypatch):
    """Every test's app sessions charge a ledger store of their own (app.ledger reads
    ``$DP_EXPLORER_LEDGER``), never the user's ``~/.local/share/dp-explorer/ledger.sqlite``."""
    folder = tmp_path_factory.mktemp("ledger-store")
    monkeypatch.setenv("DP_EXPLORER_LEDGER", str(folder / "ledger.sqlite"))
