"""An uploaded table prepared step by step before it is used (the Data page; no Streamlit here).

The Data page builds the table from the file and the user's public choices (label, task, classes,
categories, missing values) and keeps the public bounds declared for it as a list of operations
(:class:`BoundsOp`) replayed on every build, so a bound typed before a label is changed is still
there after (by column name), and a DP estimate is applied again only to the columns it estimated.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpcore.data import Dataset

__all__ = [
    "BoundsOp",
    "diff_op",
    "replay",
]


@dataclass(frozen=True)
class BoundsOp:
    """Public bounds declared for some columns of a table being prepared.

    ``"user"``: ``columns = {name: (lo, hi, lo declared, hi declared)}`` (a side not declared keeps
    its source, e.g. the data's); ``"dp"``: a DP estimate (:class:`dpcore.dp_bounds.BoundsEstimate`,
    already charged) and the card's ``details["dp_bounds"]``.
    """

    kind: str
    columns: dict[str, tuple[float, float, bool, bool]] = field(default_factory=dict)
    estimate: Any = None
    details: dict[str, Any] | None = None


def diff_op(old: Dataset, new: Dataset) -> BoundsOp | None:
    """The user declaration that turns ``old``'s bounds into ``new``'s (same columns): every column
    whose bounds or public sides changed, with the sides ``new`` holds as public. None if none."""
    if list(old.feature_names) != list(new.feature_names):
        raise ValueError("the tables have other columns")
    was, now = old.data_side_mask(), new.data_side_mask()
    cols = {}
    for j, name in enumerate(new.feature_names):
        if np.any(old.bounds[j] != new.bounds[j]) or np.any(was[j] != now[j]):
            lo, hi = (float(v) for v in new.bounds[j])
            cols[name] = (lo, hi, not bool(now[j, 0]), not bool(now[j, 1]))
    return BoundsOp("user", cols) if cols else None


def replay(ds: Dataset, ops: list[BoundsOp]) -> tuple[Dataset, list[str]]:
    """``ds`` with ``ops`` applied in order; columns it does not have are left out. Returns the table
    and a note for each operation that no longer applies (a DP estimate of columns that are gone)."""
    from dpcore.dp_bounds import apply_estimate

    notes = []
    names = set(ds.feature_names)
    for op in ops:
        if op.kind == "dp":
            if not set(op.estimate.bounds) <= names:
                notes.append("The DP bounds estimated earlier were for other columns; they are not used "
                             "(their cost stays in the dataset's ledger).")
                continue
            new = apply_estimate(ds, op.estimate)
            ds = dataclasses.replace(new, meta={**new.meta, "dp_bounds": op.details})
            continue
        cols = {c: v for c, v in op.columns.items() if c in names}
        if not cols:
            continue
        arr = np.array(ds.bounds, dtype=float)
        sides = np.zeros((ds.n_features, 2), dtype=bool)
        index = {c: j for j, c in enumerate(ds.feature_names)}
        for c, (lo, hi, lo_set, hi_set) in cols.items():
            j = index[c]
            arr[j] = (lo if lo_set else arr[j, 0], hi if hi_set else arr[j, 1])
            sides[j] = (lo_set, hi_set)
        try:
            ds = ds.with_bounds(arr, "user", columns=list(cols), sides=sides)
        except ValueError as exc:  # e.g. a lower bound above the new table's own upper one
            notes.append(f"Bounds set earlier for {', '.join(cols)} no longer apply: {exc}")
    return ds, notes
