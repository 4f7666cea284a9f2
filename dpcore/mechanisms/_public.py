"""Public reference data: a table the custodian supplies as public, never part of the private input.

PCA-Gauss's PubPCA and the pca-identity baseline derive their basis from *public* data (PCA-Gauss
section VIII-B4). A random part of the private input is not public data: computing ``W`` and a
centre from it without noise and publishing them is not differentially private (issue 12, row 6:
an event of probability ~0.1 under one neighbour has probability 0 under the other). So the public
rows are a separate input, recorded on the card by their SHA-256, and they receive no protection:
the custodian asserts they are public.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

__all__ = ["PublicRows", "public_rows"]


class PublicRows:
    """Public rows clipped to the private data's public bounds.

    Attributes
    ----------
    X : ndarray of shape (n_public, n_features)
    sha256 : str
        Hash of the rows as given (float64 bytes), for the card.
    """

    def __init__(self, X: np.ndarray, sha256: str) -> None:
        self.X = X
        self.sha256 = sha256

    def card(self) -> dict[str, Any]:
        return {"n_public_rows": int(self.X.shape[0]), "public_data_sha256": self.sha256}


def public_rows(public_data: Any, bounds: np.ndarray, *, mechanism: str, min_rows: int = 2) -> PublicRows:
    """Validate ``public_data`` (array-like ``(n_public, n_features)`` or a ``Dataset``) and clip it.

    Raises
    ------
    ValueError
        ``public_data`` missing (naming the mechanism and what to pass), not 2-D numeric with the
        private data's number of features, NaN/inf, or fewer than ``min_rows`` rows.
    """
    if public_data is None:
        raise ValueError(
            f"{mechanism} needs public_data: a separate table of PUBLIC rows with the same columns "
            "(CLI --public-data FILE). A random part of the private input is not public data"
        )
    X = getattr(public_data, "X", public_data)
    try:
        arr = np.asarray(X, dtype=float)
    except (TypeError, ValueError):
        raise ValueError("public_data must be numeric, shape (n_public, n_features)") from None
    d = bounds.shape[0]
    if arr.ndim != 2 or arr.shape[1] != d:
        raise ValueError(f"public_data must have shape (n_public, {d}), got {arr.shape}")
    if arr.shape[0] < min_rows:
        raise ValueError(f"public_data needs at least {min_rows} rows, got {arr.shape[0]}")
    if not np.isfinite(arr).all():
        raise ValueError("public_data has NaN/inf values")
    digest = hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()
    return PublicRows(np.clip(arr, bounds[:, 0], bounds[:, 1]), digest)
