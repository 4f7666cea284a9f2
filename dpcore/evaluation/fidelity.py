"""How faithful a downloaded file is to the private table: the custodian's fidelity report.

NOT differentially private. Every figure here is computed on the private rows (the table the
release was drawn from, and real held-out rows): it is for the data custodian who decides whether
to publish, never part of a release (no file, card or transform written by :mod:`dpcore.release`
contains it; ``tests/test_fidelity.py`` checks that). :data:`NOT_DP_NOTICE` labels it.

What it measures is what a user does with the file (the protocol of the project's benchmarks):

- :func:`encode_file` encodes a table in the original schema exactly as the real rows are encoded:
  one-hot over the public category lists, numbers mapped to ``[0, 1]`` by their public bounds;
- :func:`fidelity_report` compares the file with the private table column by column (total
  variation distance of each categorical column's rates, Wasserstein-1 distance of each numeric
  column in its own units, scipy.stats), the correlation matrices of the numeric-and-indicator
  encodings side by side, the label rate (or mean), and a standard model trained on the file and
  tested on real held-out rows (``LogisticRegression(max_iter=5000)`` or ``LinearRegression``),
  beside the majority (or training-mean) baseline and the same model trained on the private rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from dpcore.evaluation.metrics import NOT_DP_NOTICE

__all__ = [
    "FidelityReport",
    "encode_file",
    "encoded_real",
    "fidelity_report",
    "file_model_score",
    "private_frame",
]


def encode_file(frame: pd.DataFrame, schema: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """A table in the original schema, encoded as the real rows are: ``(X, y)``.

    Parameters
    ----------
    frame : DataFrame
        The file's table (original columns and units, the label column if any), e.g. read back
        from the downloaded CSV.
    schema : dpcore.decode.PublicSchema
        The public schema of the private table.

    Returns
    -------
    X : ndarray of shape (n_rows, n_features)
        One column per encoded feature of ``schema.feature_names``: a number mapped to ``[0, 1]``
        by its public bounds (clipped), a one-hot column ``column=value`` as 0/1.
    y : ndarray of shape (n_rows,) or None
        Classification: the index of each row's class in the public class list (-1 for a value
        outside it); regression: the label as float; ``None`` without a label column.

    Raises
    ------
    ValueError
        A column of the schema is missing from ``frame``.
    """
    member = {f"{c}={v}": (c, str(v)) for c, vals in schema.categories.items() for v in vals}
    missing = sorted({member.get(n, (n,))[0] for n in schema.feature_names} - set(map(str, frame.columns)))
    if missing:
        raise ValueError(f"the file has no column(s) {missing[:5]}: it is not in the schema's original "
                         "columns")
    cols = []  # in the schema's units: a number as written, a one-hot column as 0/1 (bounds [0, 1])
    text = {c: frame[c].astype(str).to_numpy() for c in schema.categories}
    for name in schema.feature_names:
        if name in member:
            c, v = member[name]
            cols.append((text[c] == v).astype(float))
        else:
            cols.append(pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float))
    X = encoded_real(np.column_stack(cols), schema.bounds) if cols else np.zeros((len(frame), 0))
    y = None
    if schema.label_name and schema.label_name in frame.columns:
        lab = frame[schema.label_name]
        if schema.task == "classification" and schema.classes is not None:
            position = {str(v): i for i, v in enumerate(np.asarray(schema.classes).tolist())}
            y = np.array([position.get(str(v), -1) for v in lab.tolist()], dtype=np.int64)
        else:
            y = pd.to_numeric(lab, errors="coerce").to_numpy(dtype=float)
    return X, y


def private_frame(ds: Any, schema: Any) -> pd.DataFrame:
    """A :class:`~dpcore.data.Dataset`'s rows in the original schema (one column per one-hot group,
    holding its category, empty where the group is all zero; the label last, as its class or value),
    to compare a file with."""
    from dpcore.decode import decode_features

    X = np.asarray(ds.X, dtype=float)
    frame = decode_features(X, schema, clip=False)
    for column in schema.categories:  # a row whose group is all zero has no category (a missing value)
        none = X[:, [schema.feature_names.index(n) for n in schema.encoded(column)]].max(axis=1) <= 0
        if none.any():
            frame[column] = frame[column].astype(object).where(~none, "")
    if ds.y is not None and ds.label_name:
        y = np.asarray(ds.y)
        frame[ds.label_name] = (np.asarray(ds.classes)[y] if ds.task == "classification"
                                and ds.classes is not None and y.dtype.kind in "iu" else y)
    return frame


def encoded_real(X: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Encoded rows (a :class:`~dpcore.data.Dataset`'s ``X``, or a file's columns in their units,
    one-hot columns 0/1) mapped to ``[0, 1]`` by the public bounds, clipped; a column whose bounds
    are equal maps to 0. The one mapping :func:`encode_file` and the real rows share."""
    lo, hi = bounds[:, 0], bounds[:, 1]
    width = np.where(hi > lo, hi - lo, 1.0)
    return np.where(hi > lo, np.clip((np.asarray(X, dtype=float) - lo) / width, 0.0, 1.0), 0.0)


def _model(task: str) -> Any:
    from sklearn.linear_model import LinearRegression, LogisticRegression

    return LogisticRegression(max_iter=5000) if task == "classification" else LinearRegression()


def file_model_score(X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray,
                     task: str) -> float:
    """Accuracy (classification) or RMSE (regression) on ``(X_test, y_test)`` of the standard model
    trained on ``(X_train, y_train)``; a training set with one class predicts it."""
    if task == "classification":
        keep = y_train >= 0
        X_train, y_train = X_train[keep], y_train[keep]
        if np.unique(y_train).size < 2:
            return float(np.mean(y_test == (y_train[0] if y_train.size else -1)))
        return float(_model(task).fit(X_train, y_train).score(X_test, y_test))
    keep = np.isfinite(y_train)
    pred = _model(task).fit(X_train[keep], y_train[keep]).predict(X_test)
    return float(math.sqrt(np.mean((pred - y_test) ** 2)))


@dataclass
class FidelityReport:
    """The fidelity of a file to the private table (NOT differentially private).

    Attributes
    ----------
    columns : DataFrame
        One row per original column: ``kind``, ``distance`` (total variation for categories, in
        ``[0, 1]``; Wasserstein-1 in the column's units for numbers), ``private`` / ``file`` (mean or
        the most frequent category's rate).
    correlation_private, correlation_file : DataFrame
        Pearson correlations of the numeric columns and the label (classification: its indicator of
        the last class), on the private table and on the file.
    label : dict
        Classification: each class's rate in both; regression: the means.
    model : dict
        ``metric`` (accuracy or RMSE), ``file`` (the model trained on the file), ``baseline``
        (majority rate or training-mean RMSE), ``private`` (the same model trained on the private
        rows), all scored on the real held-out rows; empty without held-out rows or a label.
    notice : str
        :data:`~dpcore.evaluation.metrics.NOT_DP_NOTICE`.
    """

    columns: pd.DataFrame
    correlation_private: pd.DataFrame
    correlation_file: pd.DataFrame
    label: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    notice: str = NOT_DP_NOTICE

    def summary(self) -> str:
        """One sentence a custodian reads first."""
        worst = self.columns.sort_values("distance", ascending=False).head(1)
        parts = []
        if self.model:
            m = self.model
            unit = "accuracy" if m["metric"] == "accuracy" else "RMSE"
            where = "real held-out rows" if m.get("scored_on") == "real held-out rows" else "your rows"
            parts.append(f"A {m['model']} trained on the file scores {unit} {m['file']:.3g} on {where} "
                         f"({m['baseline_name']} {m['baseline']:.3g}; trained on your data "
                         f"{m['private']:.3g})")
        if len(worst):
            row = worst.iloc[0]
            parts.append(f"the column furthest from your data is {row['column']} "
                         f"({row['measure']} {row['distance']:.3g})")
        text = "; ".join(parts)
        return text[:1].upper() + text[1:] + "." if text else ""


def _numeric_frame(frame: pd.DataFrame, schema: Any) -> pd.DataFrame:
    out = {c: pd.to_numeric(frame[c], errors="coerce") for c in schema.numeric_columns()}
    if schema.label_name and schema.label_name in frame.columns:
        lab = frame[schema.label_name]
        if schema.task == "classification" and schema.classes is not None:
            last = str(np.asarray(schema.classes)[-1])
            out[f"{schema.label_name} = {last}"] = (lab.astype(str) == last).astype(float)
        else:
            out[schema.label_name] = pd.to_numeric(lab, errors="coerce")
    return pd.DataFrame(out)


def fidelity_report(file: pd.DataFrame, private: pd.DataFrame, schema: Any, *,
                    test: pd.DataFrame | None = None, folds: int = 5) -> FidelityReport:
    """Compare a release's file with the private table it was drawn from (NOT differentially private).

    Parameters
    ----------
    file : DataFrame
        The release's table in the original schema (the downloaded CSV's content).
    private : DataFrame
        The private table in the original schema (the rows the release was drawn from).
    schema : dpcore.decode.PublicSchema
    test : DataFrame, optional
        Real held-out rows in the original schema for the model comparison (``private`` is then
        the training rows). Without them (a release of every row, as the app's Release page
        draws), the model trained on the file is scored on the private rows and the same model
        trained on the private rows by ``folds``-fold cross-validation on them (scikit-learn).
    folds : int, default 5

    Returns
    -------
    FidelityReport
    """
    rows = []
    for col in schema.original_columns():
        if col in schema.categories:
            cats = [str(v) for v in schema.categories[col]]
            a = private[col].astype(str).value_counts(normalize=True).reindex(cats, fill_value=0.0)
            b = file[col].astype(str).value_counts(normalize=True).reindex(cats, fill_value=0.0)
            top = a.idxmax()
            rows.append({"column": col, "kind": "categorical", "measure": "total variation",
                         "distance": float(0.5 * np.abs(a - b).sum()),
                         "private": f"{top}: {a[top]:.3f}", "file": f"{top}: {b[top]:.3f}"})
        else:
            a = pd.to_numeric(private[col], errors="coerce").dropna().to_numpy(dtype=float)
            b = pd.to_numeric(file[col], errors="coerce").dropna().to_numpy(dtype=float)
            dist = float(stats.wasserstein_distance(a, b)) if a.size and b.size else float("nan")
            rows.append({"column": col, "kind": "numeric", "measure": "Wasserstein-1",
                         "distance": dist, "private": f"mean {a.mean():.4g}, sd {a.std():.4g}",
                         "file": f"mean {b.mean():.4g}, sd {b.std():.4g}" if b.size else "empty"})
    columns = pd.DataFrame(rows)
    corr_private = _numeric_frame(private, schema).corr()
    corr_file = _numeric_frame(file, schema).corr()
    label: dict[str, Any] = {}
    name = schema.label_name
    if name and name in file.columns and name in private.columns:
        if schema.task == "classification" and schema.classes is not None:
            cls = [str(v) for v in np.asarray(schema.classes).tolist()]
            label = {"kind": "class rates",
                     "private": private[name].astype(str).value_counts(normalize=True)
                     .reindex(cls, fill_value=0.0).round(6).to_dict(),
                     "file": file[name].astype(str).value_counts(normalize=True)
                     .reindex(cls, fill_value=0.0).round(6).to_dict()}
        else:
            label = {"kind": "mean", "private": float(pd.to_numeric(private[name]).mean()),
                     "file": float(pd.to_numeric(file[name], errors="coerce").mean())}
    model: dict[str, Any] = {}
    if name and name in file.columns and name in private.columns and \
            schema.task in ("classification", "regression"):
        model = _model_comparison(file, private, schema, test, folds)
    return FidelityReport(columns, corr_private, corr_file, label, model)


def _model_comparison(file: pd.DataFrame, private: pd.DataFrame, schema: Any, test: pd.DataFrame | None,
                      folds: int) -> dict[str, Any]:
    """The standard model trained on the file and on the private rows, scored on real rows."""
    X_file, y_file = encode_file(file, schema)
    X_priv, y_priv = encode_file(private, schema)
    assert y_file is not None and y_priv is not None
    held_out = test is not None
    if held_out:
        X_test, y_test = encode_file(test, schema)
        assert y_test is not None
    else:
        X_test, y_test = X_priv, y_priv
    classification = schema.task == "classification"
    if classification:
        known = y_priv[y_priv >= 0]
        majority = np.bincount(known).argmax() if known.size else -1
        baseline, baseline_name = float(np.mean(y_test == majority)), "majority rate"
    else:
        baseline = float(math.sqrt(np.mean((y_test - np.nanmean(y_priv)) ** 2)))
        baseline_name = "predicting the training mean"
    if held_out:
        private_score = file_model_score(X_priv, y_priv, X_test, y_test, schema.task)
    else:
        private_score = _cross_validated(X_priv, y_priv, schema.task, folds)
    return {"metric": "accuracy" if classification else "rmse",
            "model": "LogisticRegression" if classification else "LinearRegression",
            "file": file_model_score(X_file, y_file, X_test, y_test, schema.task),
            "private": private_score, "baseline": baseline, "baseline_name": baseline_name,
            "n_test": int(len(y_test)),
            "scored_on": ("real held-out rows" if held_out else
                          f"the private rows (the model trained on them: {folds}-fold cross-validation)")}


def _cross_validated(X: np.ndarray, y: np.ndarray, task: str, folds: int) -> float:
    """The standard model's ``folds``-fold cross-validated accuracy (or RMSE) on ``(X, y)``."""
    from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score

    keep = (y >= 0) if task == "classification" else np.isfinite(y)
    X, y = X[keep], y[keep]
    if task == "classification":
        if np.unique(y).size < 2:
            return 1.0
        smallest = int(np.bincount(y).min(initial=0)) if y.size else 0
        splitter = StratifiedKFold(max(2, min(folds, smallest)), shuffle=True, random_state=0)
        return float(np.mean(cross_val_score(_model(task), X, y, cv=splitter)))
    splitter = KFold(max(2, min(folds, y.size)), shuffle=True, random_state=0)
    scores = cross_val_score(_model(task), X, y, cv=splitter, scoring="neg_root_mean_squared_error")
    return float(-np.mean(scores))
