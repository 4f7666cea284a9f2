"""Checks of the real datasets bundled in ``sample_data/`` (built by sample_data/build.py).

Only documented facts are hard-coded: the published shapes of the datasets and the MNIST
training-set class counts. Everything else is checked against the files themselves, the
metadata, or (when present) the original sources in ``../shared/datasets``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data"
SHARED = REPO.parent / "shared" / "datasets"
MAX_BYTES = 5_000_000

# Documented shapes: (rows, features); None where the width is derived (Adult one-hot).
DOCUMENTED_SHAPES = {
    "digits": (1797, 64),
    "breast-cancer": (569, 30),
    "diabetes": (442, 10),
    "mnist-10k": (10_000, 784),
    "adult": (32_561, None),  # adult.names: train=32561
}
DATASETS = list(DOCUMENTED_SHAPES)
META_KEYS = {
    "name", "title", "file", "format", "task", "label", "image_shape", "n_rows", "n_features",
    "bounds", "label_bounds", "bounds_origin", "classes", "source", "license", "citation",
    "description",
}
# Published MNIST training-set class counts for digits 0..9 (60,000 images).
MNIST_TRAIN_COUNTS = np.array([5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949])
ADULT_NUMERIC = [
    "age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week",
]
ADULT_CATEGORICAL = [
    "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
    "native-country",
]


@cache
def meta(name: str) -> dict:
    return json.loads((SAMPLE / f"{name}.meta.json").read_text())


@cache
def load(name: str) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(X, feature column names as stored in the file, y) of one bundled dataset."""
    m = meta(name)
    path = SAMPLE / m["file"]
    if m["format"] == "npz":
        with np.load(path, allow_pickle=False) as z:
            return z["X"], [str(f) for f in z["feature_names"]], z["y"]
    frame = pd.read_csv(path)
    columns = list(frame.columns)
    assert columns[-1] == m["label"], "label must be the last CSV column"
    return frame[columns[:-1]].to_numpy(), columns[:-1], frame[m["label"]].to_numpy()


def require_shared(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared dataset {path} is absent; cannot compare with the source")
    return path


@pytest.mark.parametrize("name", DATASETS)
def test_files_exist_and_are_small(name):
    m = meta(name)
    data = SAMPLE / m["file"]
    assert data.is_file()
    assert data.stat().st_size < MAX_BYTES
    assert (SAMPLE / f"{name}.meta.json").stat().st_size < MAX_BYTES


def test_folder_is_small():
    total = sum(p.stat().st_size for p in SAMPLE.rglob("*") if p.is_file())
    assert total < MAX_BYTES


@pytest.mark.parametrize("name", DATASETS)
def test_metadata_schema(name):
    m = meta(name)
    assert set(m) - {"onehot_groups"} == META_KEYS
    for attr, cols in (m.get("onehot_groups") or {}).items():  # public schema: real [0, 1] columns
        assert cols and all(c.startswith(f"{attr}=") and m["bounds"][c] == [0, 1] for c in cols)
    assert m["name"] == name
    assert m["format"] in {"csv", "npz"}
    assert m["file"].startswith(name)
    assert (".npz" if m["format"] == "npz" else ".csv") in m["file"]
    assert m["task"] in {"classification", "regression", "unsupervised"}
    assert (m["classes"] is None) == (m["task"] != "classification")
    if m["image_shape"] is not None:
        assert int(np.prod(m["image_shape"])) == m["n_features"]
    for key in ("title", "source", "license", "citation", "description"):
        assert isinstance(m[key], str) and m[key].strip()


@pytest.mark.parametrize("name", DATASETS)
def test_shapes_match_metadata_and_documentation(name):
    X, columns, y = load(name)
    m = meta(name)
    assert X.shape == (m["n_rows"], m["n_features"])
    assert y.shape == (m["n_rows"],)
    rows, width = DOCUMENTED_SHAPES[name]
    assert m["n_rows"] == rows
    if width is not None:
        assert m["n_features"] == width


@pytest.mark.parametrize("name", DATASETS)
def test_every_column_has_a_bound_and_an_origin(name):
    _, columns, _ = load(name)
    m = meta(name)
    assert columns == list(m["bounds"]), "bounds must list the file's columns in order"
    assert set(m["bounds_origin"]) - {"_label"} == set(columns)
    for col in columns:
        lo, hi = m["bounds"][col]
        assert lo < hi, col
        assert isinstance(m["bounds_origin"][col], str) and m["bounds_origin"][col].strip()


@pytest.mark.parametrize("name", DATASETS)
def test_data_within_bounds(name):
    X, columns, _ = load(name)
    bounds = np.array([meta(name)["bounds"][c] for c in columns], dtype=float)
    values = X.astype(float)
    assert np.isfinite(values).all()
    below = columns_where(values.min(axis=0) < bounds[:, 0], columns)
    above = columns_where(values.max(axis=0) > bounds[:, 1], columns)
    assert not below and not above, f"below: {below}, above: {above}"


def columns_where(mask: np.ndarray, columns: list[str]) -> list[str]:
    return [columns[j] for j in np.flatnonzero(mask)]


@pytest.mark.parametrize("name", DATASETS)
def test_labels_within_label_bounds_and_classes(name):
    _, _, y = load(name)
    m = meta(name)
    lo, hi = m["label_bounds"]
    assert lo <= y.min() and y.max() <= hi
    if m["classes"] is not None:
        assert set(np.unique(y).tolist()) == set(m["classes"])


@pytest.mark.parametrize("name", ["digits", "mnist-10k"])
def test_pixel_columns(name):
    _, columns, _ = load(name)
    assert columns == [f"px_{i}" for i in range(meta(name)["n_features"])]


def test_mnist_arrays_and_dtypes():
    with np.load(SAMPLE / "mnist-10k.npz", allow_pickle=False) as z:
        assert set(z.files) == {"X", "y", "feature_names", "source_index"}
        assert z["X"].dtype == np.uint8 and z["X"].shape == (10_000, 784)
        assert z["y"].dtype == np.uint8 and z["y"].shape == (10_000,)
        index = z["source_index"]
    assert index.shape == (10_000,)
    assert len(np.unique(index)) == 10_000
    assert index.min() >= 0 and index.max() < MNIST_TRAIN_COUNTS.sum()


def test_mnist_is_stratified():
    _, _, y = load("mnist-10k")
    counts = np.bincount(y, minlength=10)
    expected = MNIST_TRAIN_COUNTS / MNIST_TRAIN_COUNTS.sum() * 10_000
    assert np.all(np.abs(counts - expected) <= 0.01 * expected), (counts, expected.round(1))


def test_mnist_source_rows_match_training_set():
    path = require_shared("mnist", "mnist.npz")
    X, _, y = load("mnist-10k")
    with np.load(SAMPLE / "mnist-10k.npz") as z:
        index = z["source_index"]
    with np.load(path) as source:
        x_train, y_train = source["x_train"], source["y_train"]
    np.testing.assert_array_equal(np.bincount(y_train, minlength=10), MNIST_TRAIN_COUNTS)
    np.testing.assert_array_equal(x_train[index].reshape(len(index), -1), X)
    np.testing.assert_array_equal(y_train[index], y)


def adult_groups(columns: list[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for col in columns:
        if "=" in col:
            attr, _ = col.split("=", 1)
            groups.setdefault(attr, []).append(col)
    return groups


def test_adult_columns():
    _, columns, _ = load("adult")
    assert meta("adult")["label"] == "salary"
    assert columns[: len(ADULT_NUMERIC)] == ADULT_NUMERIC
    groups = adult_groups(columns)
    assert list(groups) == ADULT_CATEGORICAL
    assert len(ADULT_NUMERIC) + sum(map(len, groups.values())) == len(columns)


def test_adult_onehot_groups_sum_to_at_most_one():
    X, columns, _ = load("adult")
    for attr, group in adult_groups(columns).items():
        block = X[:, [columns.index(c) for c in group]]
        assert set(np.unique(block).tolist()) <= {0, 1}, attr
        assert block.sum(axis=1).max() <= 1, attr
    # attributes documented without missing values are always set
    for attr in ("education", "marital-status", "relationship", "race", "sex"):
        group = adult_groups(columns)[attr]
        assert (X[:, [columns.index(c) for c in group]].sum(axis=1) == 1).all(), attr


def test_adult_categories_are_the_published_ones():
    names = require_shared("adult", "adult.names")
    build = load_build_module()
    published = {a: c for a, c in build.parse_adult_names(names).items() if c is not None}
    _, columns, _ = load("adult")
    groups = adult_groups(columns)
    assert {a: [c.split("=", 1)[1] for c in g] for a, g in groups.items()} == published


def test_adult_matches_source_rows():
    path = require_shared("adult", "adult.data.gz")
    raw = pd.read_csv(path, skipinitialspace=True)
    X, columns, y = load("adult")
    np.testing.assert_array_equal(X[:, 0], raw["age"].to_numpy())
    np.testing.assert_array_equal(y, (raw.iloc[:, -1].str.strip() == ">50K").to_numpy())
    missing = (raw["workclass"] == "?").to_numpy()
    group = [columns.index(c) for c in adult_groups(columns)["workclass"]]
    np.testing.assert_array_equal(X[:, group].sum(axis=1) == 0, missing)


@cache
def load_build_module():
    """Import sample_data/build.py (not a package) without touching sys.path."""
    name = "sample_data_build"
    spec = importlib.util.spec_from_file_location(name, SAMPLE / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_build_rejects_a_bound_the_data_violate():
    build = load_build_module()
    ds = build.build_diabetes()
    build.validate(ds)  # the real bounds pass
    ds.bounds = {**ds.bounds, "age": (0, 50)}  # the data contain patients older than 50
    with pytest.raises(build.BoundsError, match="age"):
        build.validate(ds)
