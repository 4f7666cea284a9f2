"""Data layer: load CSV / Parquet / NumPy ``.npz`` or a bundled dataset into a :class:`Dataset`.

Validation errors are specific (which column, which rows, what to do) and raised as
:class:`~dpcore.exceptions.DataValidationError` (a ``ValueError``). Public bounds come from the
bundled metadata or from the user; bounds computed from the data raise a
:class:`~dpcore.exceptions.PrivacyLeakWarning` and set ``bounds_source = "data"``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import warnings
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpcore.exceptions import DataValidationError, PrivacyLeakWarning

__all__ = [
    "Dataset",
    "bundled_datasets",
    "load_bounds_file",
    "load_dataset",
    "read_table",
    "sample_data_dir",
]

SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq", ".npz", ".txt", ".tsv")


def sample_data_dir() -> Path:
    """Folder holding the bundled datasets (the repository's ``sample_data/``)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_sample_data", here.parent / "sample_data"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("the bundled sample_data folder was not found next to dpcore")


def bundled_datasets() -> dict[str, dict[str, Any]]:
    """Metadata of every bundled dataset, by name (``digits``, ``mnist-10k``, ...)."""
    out: dict[str, dict[str, Any]] = {}
    try:
        folder = sample_data_dir()
    except FileNotFoundError:
        return out
    for meta_path in sorted(folder.glob("*.meta.json")):
        meta = json.loads(meta_path.read_text())
        out[meta["name"]] = meta
    return out


@dataclass
class Dataset:
    """A table ready for a mechanism.

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
        Rows dropped for NaN/inf when ``drop_nonfinite=True``.
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

    def with_bounds(self, bounds: np.ndarray, source: str = "user") -> Dataset:
        """A copy with new per-feature bounds (validated) and their source."""
        from dpcore.preprocessing import normalize_bounds

        return replace(self, bounds=normalize_bounds(bounds, self.n_features), bounds_source=source)

    def subset(self, rows: np.ndarray) -> Dataset:
        return replace(self, X=self.X[rows], y=None if self.y is None else self.y[rows])

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


# ---------------------------------------------------------------------------------------- reading
def read_table(source: str | Path | bytes | io.IOBase, filename: str | None = None) -> pd.DataFrame:
    """Read a CSV, Parquet or ``.npz`` file (path or bytes) into a DataFrame.

    ``.npz`` files hold ``X`` (2-D, or 3-D images which are flattened), optional ``y`` and
    optional ``feature_names``; the label column is then called ``label``.

    Raises
    ------
    DataValidationError
        Empty file, undecodable bytes, duplicate column names, unknown format, unreadable file.
    """
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.exists():
            raise DataValidationError(f"file not found: {path}")
        filename = filename or path.name
        raw = path.read_bytes()
    elif isinstance(source, (bytes, bytearray)):
        raw = bytes(source)
    else:
        raw = source.read()
    filename = (filename or "upload.csv").lower()
    if not raw.strip():
        raise DataValidationError(f"{filename} is empty")
    if filename.endswith(".npz"):
        return _read_npz(raw, filename)
    if filename.endswith((".parquet", ".pq")):
        try:
            frame = pd.read_parquet(io.BytesIO(raw))
        except Exception as exc:  # pyarrow raises many types
            raise DataValidationError(f"{filename} is not a readable Parquet file: {exc}") from None
        _check_duplicate_names(list(map(str, frame.columns)), filename)
        return frame
    if filename.endswith(".gz"):
        import gzip

        try:
            raw = gzip.decompress(raw)
        except OSError as exc:
            raise DataValidationError(f"{filename} is not valid gzip: {exc}") from None
    return _read_csv(raw, filename)


def _read_csv(raw: bytes, filename: str) -> pd.DataFrame:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataValidationError(
            f"{filename} is not UTF-8 text: undecodable byte 0x{raw[exc.start]:02x} at byte "
            f"{exc.start}. Re-save the file as UTF-8 CSV."
        ) from None
    if not text.strip():
        raise DataValidationError(f"{filename} is empty")
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
        sep = dialect.delimiter
    except csv.Error:
        sep = ","
    header = next(csv.reader(io.StringIO(text), delimiter=sep))
    _check_duplicate_names([h.strip() for h in header], filename)
    try:
        frame = pd.read_csv(io.StringIO(text), sep=sep, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise DataValidationError(f"{filename} has no data") from None
    except pd.errors.ParserError as exc:
        raise DataValidationError(f"{filename} is not a valid CSV table: {exc}") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if frame.shape[0] == 0:
        raise DataValidationError(f"{filename} has a header but no data rows")
    return frame


def _read_npz(raw: bytes, filename: str) -> pd.DataFrame:
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except Exception as exc:
        raise DataValidationError(f"{filename} is not a readable .npz file: {exc}") from None
    if "X" not in arrays:
        raise DataValidationError(
            f"{filename} must contain an array named 'X' (and optionally 'y', 'feature_names'); "
            f"found {sorted(arrays)}"
        )
    X = arrays["X"]
    if X.ndim > 2:
        X = X.reshape(X.shape[0], -1)
    if X.ndim != 2:
        raise DataValidationError(f"{filename}: X must be 2-D (rows x features), got {X.shape}")
    names = (
        [str(s) for s in arrays["feature_names"]] if "feature_names" in arrays
        else [f"x{j}" for j in range(X.shape[1])]
    )
    _check_duplicate_names(names, filename)
    if len(names) != X.shape[1]:
        raise DataValidationError(f"{filename}: {len(names)} feature_names for {X.shape[1]} columns")
    frame = pd.DataFrame(X, columns=names)
    if "y" in arrays:
        if arrays["y"].shape[0] != X.shape[0]:
            raise DataValidationError(f"{filename}: y has {arrays['y'].shape[0]} rows, X {X.shape[0]}")
        frame["label"] = arrays["y"]
    return frame


def _check_duplicate_names(names: list[str], filename: str) -> None:
    seen: set[str] = set()
    dups = sorted({n for n in names if n in seen or seen.add(n)})  # type: ignore[func-returns-value]
    if dups:
        raise DataValidationError(
            f"{filename} has duplicate column names {dups}; rename them so each column is unique"
        )


# ---------------------------------------------------------------------------------------- bounds
def load_bounds_file(path: str | Path) -> dict[str, tuple[float, float]]:
    """Read public bounds from JSON (``{"col": [lo, hi], ...}``) or CSV (``column,lo,hi``).

    Raises
    ------
    DataValidationError
        Unreadable file or malformed entries.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise DataValidationError(f"cannot read bounds file {path}: {exc}") from None
    try:
        if path.suffix.lower() == ".json":
            raw = json.loads(text)
            raw = raw.get("bounds", raw) if isinstance(raw, dict) else raw
            items = raw.items()
        else:
            rows = [r for r in csv.reader(io.StringIO(text)) if r]
            if rows and rows[0][0].strip().lower() in {"column", "name", "feature"}:
                rows = rows[1:]
            items = ((r[0].strip(), (r[1], r[2])) for r in rows)
        return {str(k): (float(v[0]), float(v[1])) for k, v in items}
    except (ValueError, IndexError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise DataValidationError(
            f"bounds file {path} must map each column to [lo, hi] (JSON) or hold rows "
            f"'column,lo,hi' (CSV): {exc}"
        ) from None


def _resolve_bounds(
    frame: pd.DataFrame, bounds: Any, meta_bounds: dict[str, Any] | None,
    onehot: set[str] | None = None,
) -> tuple[np.ndarray, str]:
    """Per-column bounds: the user's, else the metadata's, else [0, 1] for one-hot columns
    (public by construction), else from the data (PrivacyLeakWarning, source "data")."""
    cols = list(frame.columns)
    d = len(cols)
    if bounds is not None and not isinstance(bounds, dict):
        from dpcore.preprocessing import normalize_bounds

        return normalize_bounds(bounds, d), "user"
    user = dict(bounds or {})
    unknown = sorted(set(user) - set(cols))
    if unknown:
        raise DataValidationError(f"bounds given for unknown column(s) {unknown[:10]}")
    given: dict[str, Any] = {c: (0.0, 1.0) for c in (onehot or set())}
    given.update(meta_bounds or {})
    given.update(user)
    source = "user" if user else "metadata"
    out = np.empty((d, 2))
    missing = []
    for j, c in enumerate(cols):
        if c in given:
            lo, hi = (float(v) for v in given[c])
            if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
                raise DataValidationError(f"bounds for column {c!r} must be finite with lo <= hi")
            out[j] = lo, hi
        else:
            missing.append(j)
    if missing:
        names = [cols[j] for j in missing]
        warnings.warn(
            f"no public bounds for {len(names)} column(s) ({', '.join(names[:5])}"
            f"{', ...' if len(names) > 5 else ''}): they were computed from the private data. "
            "The differential-privacy guarantee does NOT hold; give public bounds instead.",
            PrivacyLeakWarning,
            stacklevel=3,
        )
        vals = frame.iloc[:, missing].to_numpy(dtype=float)
        out[missing, 0] = vals.min(axis=0)
        out[missing, 1] = vals.max(axis=0)
        source = "data"
    return out, source


# ---------------------------------------------------------------------------------------- loading
def load_dataset(
    source: str | Path | bytes | pd.DataFrame,
    *,
    filename: str | None = None,
    label: str | None = None,
    task: str | None = None,
    bounds: Any = None,
    label_bounds: tuple[float, float] | None = None,
    categories: dict[str, list[Any]] | None = None,
    drop_nonfinite: bool = False,
) -> Dataset:
    """Load a bundled dataset (by name), a file (path or bytes + ``filename``) or a DataFrame.

    Parameters
    ----------
    source : str, Path, bytes or DataFrame
        A bundled name (``digits``, ``breast-cancer``, ``diabetes``, ``mnist-10k``, ``adult``),
        a path to ``.csv``/``.parquet``/``.npz``, raw bytes (give ``filename`` for the format),
        or a DataFrame.
    label : str, optional
        Label column (bundled datasets default to their own; ``""`` means none).
    task : {"unsupervised", "classification", "regression"}, optional
        Default: the bundled metadata's, else guessed from the label (integer with <= 50 values
        -> classification), ``unsupervised`` without a label.
    bounds : dict {column: (lo, hi)}, (lo, hi) or array (n_features, 2), optional
        Public feature bounds. Columns without one get data bounds plus a PrivacyLeakWarning.
    label_bounds : (lo, hi), optional
        Public bounds of a regression label.
    categories : dict {column: list of categories}, optional
        Public category lists: those non-numeric columns are one-hot encoded (``col=value``).
    drop_nonfinite : bool
        Drop rows with NaN/inf instead of raising (the count is kept in ``n_dropped``).

    Raises
    ------
    DataValidationError
        Missing label column, non-numeric columns without categories, NaN/inf (with counts per
        column), fewer than two rows, a classification label with one class, bad bounds.
    """
    meta: dict[str, Any] = {}
    name = "uploaded"
    if isinstance(source, pd.DataFrame):
        frame = source.copy()
        frame.columns = [str(c) for c in frame.columns]
        _check_duplicate_names(list(frame.columns), "the table")
    elif isinstance(source, str) and source in bundled_datasets():
        meta = bundled_datasets()[source]
        name = source
        frame = read_table(sample_data_dir() / meta["file"])
    else:
        if isinstance(source, (str, Path)):
            path = Path(source)
            if not path.exists() and not str(source).lower().endswith(SUFFIXES):
                raise DataValidationError(
                    f"{source!r} is neither a file nor a bundled dataset; bundled: "
                    f"{sorted(bundled_datasets())}"
                )
            name = path.stem
        frame = read_table(source, filename)
        name = Path(filename).stem if filename else name

    if label is None:
        label = meta.get("label") or None
    if label == "":
        label = None
    if label is not None and label not in frame.columns:
        raise DataValidationError(
            f"label column {label!r} not found; columns are {list(frame.columns)[:20]}"
        )
    if task is None:
        task = meta.get("task") if label == meta.get("label") else None
    y_series = frame.pop(label) if label is not None else None
    if task is None:
        task = "unsupervised" if y_series is None else None
    categories = dict(categories or {})
    frame = _encode_categoricals(frame, categories)

    values = frame.to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    bad_rows = bad.any(axis=1)
    if y_series is not None:
        y_bad = y_series.isna().to_numpy().copy()
        if y_series.dtype.kind in "fc":
            y_bad |= ~np.isfinite(y_series.to_numpy(dtype=float))
        bad_rows |= y_bad
    n_dropped = 0
    if bad_rows.any():
        per_col = {c: int(k) for c, k in zip(frame.columns, bad.sum(axis=0), strict=True) if k}
        if y_series is not None and y_bad.any():
            per_col[f"{label} (label)"] = int(y_bad.sum())
        if not drop_nonfinite:
            rows = np.flatnonzero(bad_rows)
            raise DataValidationError(
                f"{int(bad_rows.sum())} rows contain missing or infinite values (by column: "
                f"{dict(list(per_col.items())[:8])}; first rows: {rows[:5].tolist()}). Clean them, "
                "or drop those rows explicitly (drop_nonfinite=True / 'Drop rows with missing "
                "values' in the app)."
            )
        n_dropped = int(bad_rows.sum())
        keep = ~bad_rows
        frame, values = frame.loc[keep].reset_index(drop=True), values[keep]
        y_series = y_series.loc[keep].reset_index(drop=True) if y_series is not None else None
    if values.shape[0] < 2:
        raise DataValidationError(
            f"the table has {values.shape[0]} usable row(s); differentially private release needs "
            "at least 2 (and, to be useful, many more)"
        )
    if values.shape[1] == 0:
        raise DataValidationError("the table has no feature columns besides the label")

    y = None
    classes = None
    lb = None
    lb_from_data = False
    if y_series is not None:
        from dpcore.preprocessing import _guess_task

        y = y_series.to_numpy()
        task = task or _guess_task(y)
        if task == "classification":
            if "classes" in meta and meta.get("classes") is not None:
                classes = np.asarray(meta["classes"])
            else:
                classes = np.unique(y)
            if np.unique(y).size < 2:
                raise DataValidationError(
                    f"label {label!r} has a single class ({y[0]!r}); classification needs at "
                    "least two. Choose another label or task 'unsupervised'."
                )
        elif task == "regression":
            try:
                y = y.astype(float)
            except (TypeError, ValueError):
                raise DataValidationError(
                    f"label {label!r} is not numeric; a regression label must be a number"
                ) from None
            lb = label_bounds or (tuple(meta["label_bounds"]) if meta.get("label_bounds") else None)
            if lb is None:
                warnings.warn(
                    f"no public bounds for the regression label {label!r}: computed from the data "
                    "(the privacy guarantee does NOT hold).", PrivacyLeakWarning, stacklevel=2,
                )
                lb = (float(np.min(y)), float(np.max(y)))
                lb_from_data = True
            else:
                lb = (float(lb[0]), float(lb[1]))
                lb_from_data = False
    if task not in ("unsupervised", "classification", "regression"):
        raise DataValidationError(f"task must be unsupervised, classification or regression: {task!r}")
    if task != "unsupervised" and y is None:
        raise DataValidationError(f"task {task!r} needs a label column")
    meta_bounds = meta.get("bounds") if bounds is None or isinstance(bounds, dict) else None
    onehot = {c for c in frame.columns if "=" in c and c.split("=", 1)[0] in categories}
    b, bsource = _resolve_bounds(frame, bounds, meta_bounds, onehot)
    if task == "regression" and lb_from_data:
        bsource = "data"
    image_shape = tuple(meta["image_shape"]) if meta.get("image_shape") else None
    return Dataset(
        X=values, y=y, feature_names=list(frame.columns), label_name=label, task=task,
        bounds=b, bounds_source=bsource, label_bounds=lb, classes=classes,
        image_shape=image_shape, name=name, description=meta.get("description", ""), meta=meta,
        n_dropped=n_dropped,
        label_bounds_source=("data" if lb_from_data else "user") if lb is not None else None,
    )


def _encode_categoricals(frame: pd.DataFrame, categories: dict[str, list[Any]]) -> pd.DataFrame:
    unknown = sorted(set(categories) - set(frame.columns))
    if unknown:
        raise DataValidationError(f"categories given for unknown column(s) {unknown}")
    # booleans count as numeric in pandas; everything else non-numeric needs a public category list
    nonnumeric = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    missing = [c for c in nonnumeric if c not in categories]
    if missing:
        raise DataValidationError(
            f"column(s) {missing[:10]} are not numeric. Give a public category list for each "
            "(categories={column: [...]}, or the app's category editor) to one-hot encode them, "
            "or drop them. Category lists taken from the data itself would leak which values occur."
        )
    if not categories:
        return frame.astype(float)
    parts = []
    for c in frame.columns:
        if c in categories:
            cats = list(categories[c])
            col = frame[c]
            present = col.dropna()
            outside = sorted(set(present.astype(str)) - {str(v) for v in cats})
            if outside:
                raise DataValidationError(
                    f"column {c!r} has values outside its public category list: {outside[:5]}"
                )
            onehot = pd.DataFrame(
                {f"{c}={v}": (col.astype(str) == str(v)).astype(float) for v in cats},
                index=frame.index,
            )
            onehot[col.isna()] = np.nan
            parts.append(onehot)
        else:
            parts.append(frame[[c]].astype(float))
    return pd.concat(parts, axis=1) if parts else frame
