"""The :class:`Dataset`: a table with its public facts (feature names, bounds and where each came
from, task, label, class list, image shape, one-hot groups, imputed cells), frozen, and the imputation
of missing cells from the public bounds (:func:`fill_imputed`). Built by
:func:`dpcore.data.load_dataset`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from dpcore import limits
from dpcore.exceptions import DataValidationError
from dpcore.validation import (
    check_bound_magnitude,
    normalize_bounds,
)

__all__ = ["Dataset", "ImputedCells", "fill_imputed"]


@dataclass(frozen=True)
class ImputedCells:
    """Where ``missing="impute"`` filled a missing feature value, so that the fill is always the
    midpoint of the *public* bounds a release uses (:func:`fill_imputed`): ``rows`` (sorted row
    indices, ``(k,)``) and ``mask`` (``(k, n_features)``, True where the value was missing) of the
    array ``X`` they were recorded for. A :class:`Dataset` whose ``X`` is another array (a copy
    with changed rows) does not use them (:meth:`Dataset.imputed_cells`)."""

    rows: np.ndarray
    mask: np.ndarray
    X: np.ndarray

    def for_rows(self, rows: np.ndarray, X: np.ndarray) -> ImputedCells | None:
        """The cells of the rows ``rows`` (positions into the old ``X``) of ``X = old X[rows]``."""
        rows = np.asarray(rows)
        rows = np.flatnonzero(rows) if rows.dtype == bool else rows  # a mask, or positions
        where = np.full(self.X.shape[0], -1, dtype=np.intp)
        where[self.rows] = np.arange(self.rows.size)
        picked = where[rows]
        new = np.flatnonzero(picked >= 0)
        return ImputedCells(new, self.mask[picked[new]], X) if new.size else None


def fill_imputed(values: np.ndarray, cells: tuple[np.ndarray, np.ndarray], bounds: np.ndarray, *,
                 copy: bool = True) -> np.ndarray:
    """``values`` with the imputed cells ``(rows, mask)`` set to the midpoints of ``bounds``
    (``(n_features, 2)``, the public bounds of the release): a copy unless ``copy=False``.

    The fill of a missing value is a public value only if it comes from public bounds: filled
    from bounds read from the data (or from one partition's data), one changed row would move the
    values of every row with a missing entry in that column."""
    rows, mask = cells
    out = values.copy() if copy else values
    mid = (bounds[:, 0] + bounds[:, 1]) / 2
    block = out[rows]
    block[mask] = np.broadcast_to(mid, block.shape)[mask]
    out[rows] = block
    return out


@dataclass(frozen=True)
class Dataset:
    """A table ready for a mechanism (frozen: ``with_bounds``, ``subset`` and
    ``dataclasses.replace`` return new datasets; the arrays themselves are not copied).

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,) or None
    feature_names : list[str]
    label_name : str or None
    task : {"unsupervised", "classification", "regression"}
    bounds : ndarray of shape (n_features, 2)
        Per-feature ``[lo, hi]``; public unless ``bounds_source == "data"``.
    bounds_source : {"metadata", "user", "data"}
    label_bounds : (lo, hi) or None
        Public range of a regression label.
    classes : ndarray or None
        Class list of a classification label (public if it came from metadata).
    image_shape : tuple or None
        E.g. ``(8, 8)`` when each row is an image.
    name, description : str
    meta : dict
        The bundled metadata (origin of each bound, source, licence), if any.
    n_dropped : int
        Rows dropped for NaN/inf with ``missing="drop"`` (private: exploration only; the
        guarantee then does NOT hold, see :func:`load_dataset`).
    label_bounds_source : {"user", "data"} or None
        Where ``label_bounds`` came from.
    column_bounds_source : tuple of str or None
        Source of each feature's bounds (``"metadata"``, ``"user"`` or ``"data"``); ``None``
        means every column has ``bounds_source``. ``bounds_source`` is ``"data"`` as soon as one
        column's bounds came from the data.
    classes_source : {"metadata", "user", "data"} or None
        Where the class list came from (classification). ``"data"`` voids the guarantee.
    missing : {"error", "impute", "drop"}
        How missing values were handled (:func:`load_dataset`).
    data_sides : ndarray of bool, shape (n_features, 2), or None
        Which sides (``lo``, ``hi``) of each feature's bounds were computed from the private data;
        a column's source is ``"data"`` while either side is.
    categories : dict {column: list} or None
        The public category lists given to :func:`load_dataset` (one-hot groups ``column=value``).
    onehot_groups : dict {attribute: list of column names}
        Public schema: the one-hot columns of each categorical attribute (at most one of them is
        1 in a row). From the bundled metadata's ``onehot_groups`` or the public ``categories``
        given to :func:`load_dataset`, never from the values. Mechanisms use it for the row-norm
        bound (:func:`dpcore.preprocessing.row_norm_bound`).
    imputed : ImputedCells or None
        The cells ``missing="impute"`` filled: they hold the midpoints of ``bounds`` and are
        filled again with the midpoints of any other bounds given later (:meth:`with_bounds`,
        :func:`dpcore.preprocessing.prepare_input` with a mechanism's ``bounds``), so the fill is
        always a public value.
    label_position : int or None
        Where the label column was among the source table's columns (0 = first; public schema). A
        release in the original schema puts the label back there (:mod:`dpcore.decode`); None puts
        it last.
    """

    X: np.ndarray
    y: np.ndarray | None
    feature_names: list[str]
    label_name: str | None
    task: str
    bounds: np.ndarray
    bounds_source: str
    label_bounds: tuple[float, float] | None = None
    classes: np.ndarray | None = None
    image_shape: tuple[int, ...] | None = None
    name: str = "uploaded"
    description: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    n_dropped: int = 0
    label_bounds_source: str | None = None
    column_bounds_source: tuple[str, ...] | None = None
    classes_source: str | None = None
    missing: str = "error"
    data_sides: np.ndarray | None = field(default=None, repr=False)
    categories: dict[str, list[Any]] | None = None
    onehot_groups: dict[str, list[str]] = field(default_factory=dict)
    imputed: ImputedCells | None = field(default=None, repr=False, compare=False)
    label_position: int | None = None

    def __post_init__(self) -> None:
        if self.classes is not None:  # before any per-class work (issue 17: 100k-class labels)
            limits.check_n_classes(len(self.classes), self.label_name)

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @cached_property
    def fingerprint(self) -> str:
        """sha256 of the data, bounds and labels (a cache key; never shown on a release)."""
        h = hashlib.sha256()
        h.update(np.ascontiguousarray(self.X).tobytes())
        h.update(np.ascontiguousarray(self.bounds).tobytes())
        if self.y is not None:
            h.update(np.asarray(self.y).astype(str).astype("U").tobytes())
        h.update(repr((self.task, self.label_bounds, self.feature_names)).encode())
        return h.hexdigest()

    def to_frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.X, columns=self.feature_names)
        if self.y is not None:
            frame[self.label_name or "label"] = self.y
        return frame

    @property
    def bounds_sources(self) -> list[str]:
        """The source of each feature's bounds, in column order."""
        if self.column_bounds_source is not None and len(self.column_bounds_source) == self.n_features:
            return list(self.column_bounds_source)
        return [self.bounds_source] * self.n_features

    def with_bounds(self, bounds: Any, source: str = "user", columns: Any = None,
                    sides: np.ndarray | None = None) -> Dataset:
        """A copy with new per-feature bounds (validated) and their source.

        ``columns`` (indices or names): only those columns take ``source``; the others keep the
        source they had (so unedited data-derived bounds stay ``"data"`` and the guarantee stays
        flagged). Default: every column. ``sides``: boolean ``(n_features, 2)``, the sides
        (``lo``, ``hi``) this call declares; default both sides of the chosen columns. A bound is
        public per side: a column declared on one side only keeps its other side's source, and
        stays ``"data"`` while that side came from the private data (issue 12, row 9).

        Raises
        ------
        DataValidationError
            Non-finite bounds, ``lo > hi``, a wrong shape or bounds too large to calibrate noise.
        """
        try:
            arr = normalize_bounds(bounds, self.n_features)
        except ValueError as exc:
            raise DataValidationError(str(exc)) from None
        check_bound_magnitude(arr, self.feature_names)
        sources = self.bounds_sources
        if columns is None:
            picked = list(range(self.n_features))
        else:
            index = {n: j for j, n in enumerate(self.feature_names)}
            picked = [index[c] if isinstance(c, str) else int(c) for c in columns]
        declared = np.zeros((self.n_features, 2), dtype=bool)
        declared[picked] = True
        if sides is not None:
            declared &= np.asarray(sides, dtype=bool)
        data_sides = self.data_side_mask()
        data_sides[declared] = source == "data"
        for j in picked:
            sources[j] = "data" if data_sides[j].any() else source
        label_flag = ["data"] if self.label_bounds_source == "data" else []
        X, imputed, cells = self.X, self.imputed, self.imputed_cells()
        if cells is not None:  # the missing values take the new bounds' midpoints
            X = fill_imputed(self.X, cells, arr)
            imputed = ImputedCells(*cells, X)
        return replace(self, X=X, imputed=imputed, bounds=arr,
                       bounds_source=_overall_source(sources + label_flag),
                       column_bounds_source=tuple(sources), data_sides=data_sides)

    def data_side_mask(self) -> np.ndarray:
        """Boolean ``(n_features, 2)``: which bound sides (lo, hi) came from the private data."""
        if self.data_sides is not None and self.data_sides.shape == (self.n_features, 2):
            return self.data_sides.copy()
        data_cols = np.array([s == "data" for s in self.bounds_sources], dtype=bool)
        return np.repeat(data_cols[:, None], 2, axis=1)

    def bound_side_sources(self) -> list[tuple[str, str]]:
        """``(source of lo, source of hi)`` per feature, for the release card."""
        sides = self.data_side_mask()
        return [("data" if sides[j, 0] else (src if src != "data" else "user"),
                 "data" if sides[j, 1] else (src if src != "data" else "user"))
                for j, src in enumerate(self.bounds_sources)]

    def data_bound_columns(self) -> list[str]:
        """Names of the features whose bounds were computed from the private data."""
        return [c for c, s in zip(self.feature_names, self.bounds_sources, strict=True) if s == "data"]

    def imputed_cells(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(rows, mask)`` of the cells ``missing="impute"`` filled (:class:`ImputedCells`), or
        ``None``: none, or ``X`` is not the array they were recorded for."""
        cells = self.imputed
        return None if cells is None or cells.X is not self.X else (cells.rows, cells.mask)

    def subset(self, rows: np.ndarray) -> Dataset:
        X = self.X[rows]
        imputed = None if self.imputed_cells() is None else self.imputed.for_rows(rows, X)
        return replace(self, X=X, y=None if self.y is None else self.y[rows], imputed=imputed)

    def split(self, test_size: float = 0.25, random_state: int | None = 0) -> tuple[Dataset, Dataset]:
        """Train/test split (stratified for classification), for utility evaluation.

        The test part plays the role of real held-out data: mechanisms release from the train part
        only. Raises ``ValueError`` if ``test_size`` is not in (0, 1).
        """
        from sklearn.model_selection import train_test_split

        if not (0 < test_size < 1):
            raise ValueError(f"test_size must lie in (0, 1), got {test_size}")
        idx = np.arange(self.n_samples)
        strat = self.y if self.task == "classification" else None
        try:
            tr, te = train_test_split(idx, test_size=test_size, random_state=random_state,
                                      stratify=strat)
        except ValueError:
            tr, te = train_test_split(idx, test_size=test_size, random_state=random_state)
        return self.subset(np.sort(tr)), self.subset(np.sort(te))


def _overall_source(sources: list[str]) -> str:
    """The dataset-level bounds source: ``data`` if any column's bounds came from the data, else
    ``dp`` if any was estimated with DP (:mod:`dpcore.dp_bounds`), ``user``, ``metadata``."""
    for source in ("data", "dp", "user"):
        if source in sources:
            return source
    return "metadata"
