"""Tests of dpcore.data: bundled datasets, file formats, validation errors, bounds and splits."""

from __future__ import annotations

import io
import json
import warnings

import numpy as np
import pandas as pd
import pytest

from dpcore.data import Dataset, bundled_datasets, load_bounds_file, load_dataset, read_table
from dpcore.exceptions import DataValidationError, PrivacyLeakWarning

BUNDLED = ["digits", "breast-cancer", "diabetes", "mnist-10k", "adult"]


def _frame(n: int = 30, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "a": rng.uniform(0, 1, n).round(3),
        "b": rng.uniform(-5, 5, n).round(3),
        "y": rng.integers(0, 3, n),
    })


def _csv_bytes(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode()


# the task and the class list of ``_frame``'s label are public facts, given by the caller (issue 12)
CLS = {"task": "classification", "classes": [0, 1, 2]}


# ------------------------------------------------------------------------- bundled datasets
def test_bundled_list_is_complete():
    assert set(BUNDLED) <= set(bundled_datasets())


@pytest.mark.parametrize("name", BUNDLED)
def test_load_bundled_dataset(name):
    meta = bundled_datasets()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # public metadata bounds: no leak warning
        ds = load_dataset(name)
    assert ds.X.shape == (meta["n_rows"], meta["n_features"])
    assert ds.X.dtype == np.float64
    assert ds.task == meta["task"]
    assert ds.bounds_source == "metadata"
    assert ds.name == name
    assert ds.label_name == meta["label"]
    assert ds.y is not None and ds.y.shape == (meta["n_rows"],)
    expected_shape = tuple(meta["image_shape"]) if meta["image_shape"] else None
    assert ds.image_shape == expected_shape
    if expected_shape is not None:
        assert int(np.prod(expected_shape)) == ds.n_features
    # bounds are the metadata's, column by column, and the data lie inside them
    assert set(ds.feature_names) == set(meta["bounds"])
    expected = np.array([meta["bounds"][c] for c in ds.feature_names], dtype=float)
    np.testing.assert_array_equal(ds.bounds, expected)
    assert np.all(ds.X >= ds.bounds[:, 0]) and np.all(ds.X <= ds.bounds[:, 1])
    if ds.task == "classification":
        np.testing.assert_array_equal(ds.classes, np.asarray(meta["classes"]))
        assert set(np.unique(ds.y)) <= set(np.asarray(meta["classes"]).tolist())
    else:
        assert ds.label_bounds == tuple(float(v) for v in meta["label_bounds"])


def test_unknown_name_lists_bundled_datasets():
    with pytest.raises(DataValidationError, match="neither a file nor a bundled dataset") as info:
        load_dataset("no-such-dataset")
    for name in BUNDLED:
        assert name in str(info.value)


def test_missing_file_is_reported(tmp_path):
    with pytest.raises(DataValidationError, match="not found"):
        load_dataset(tmp_path / "missing.csv")


# ------------------------------------------------------------------------- formats
def _check_same(ds: Dataset, frame: pd.DataFrame) -> None:
    np.testing.assert_allclose(ds.X, frame[["a", "b"]].to_numpy(dtype=float))
    np.testing.assert_array_equal(ds.y, frame["y"].to_numpy())
    assert ds.feature_names == ["a", "b"]
    assert ds.task == "classification"
    assert ds.bounds_source == "user"
    assert ds.classes_source == "user"
    np.testing.assert_array_equal(ds.classes, CLS["classes"])


def test_csv_from_bytes_and_path(tmp_path):
    frame = _frame()
    bounds = {"a": (0, 1), "b": (-5, 5)}
    _check_same(load_dataset(_csv_bytes(frame), filename="t.csv", label="y", bounds=bounds, **CLS), frame)
    path = tmp_path / "t.csv"
    path.write_bytes(_csv_bytes(frame))
    ds = load_dataset(path, label="y", bounds=bounds, **CLS)
    _check_same(ds, frame)
    assert ds.name == "t"
    _check_same(load_dataset(str(path), label="y", bounds=bounds, **CLS), frame)


def test_csv_semicolon_delimiter_is_detected():
    ds = load_dataset(b"a;b\n1;2\n3;4\n5;6\n", filename="s.csv", bounds=(0, 10))
    np.testing.assert_array_equal(ds.X, [[1, 2], [3, 4], [5, 6]])


def test_parquet_from_bytes_and_path(tmp_path):
    pytest.importorskip("pyarrow")
    frame = _frame(seed=1)
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    bounds = {"a": (0, 1), "b": (-5, 5)}
    _check_same(load_dataset(path, label="y", bounds=bounds, **CLS), frame)
    _check_same(load_dataset(path.read_bytes(), filename="upload.parquet", label="y", bounds=bounds, **CLS),
                frame)


def test_npz_images_from_bytes_and_path(tmp_path):
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, size=(12, 4, 5)).astype(float)
    y = np.arange(12) % 3
    path = tmp_path / "imgs.npz"
    np.savez(path, X=images, y=y)
    for source, kw in ((path, {}), (path.read_bytes(), {"filename": "imgs.npz"})):
        ds = load_dataset(source, label="label", bounds=(0, 255), **CLS, **kw)
        assert ds.X.shape == (12, 20)
        np.testing.assert_array_equal(ds.X, images.reshape(12, -1))
        np.testing.assert_array_equal(ds.y, y)
        assert ds.feature_names == [f"x{j}" for j in range(20)]
        assert ds.task == "classification"


def test_npz_feature_names_and_missing_x(tmp_path):
    buf = io.BytesIO()
    np.savez(buf, X=np.eye(3), feature_names=np.array(["p", "q", "r"]))
    assert list(read_table(buf.getvalue(), "f.npz").columns) == ["p", "q", "r"]
    buf = io.BytesIO()
    np.savez(buf, data=np.eye(3))
    with pytest.raises(DataValidationError, match="'X'"):
        read_table(buf.getvalue(), "f.npz")


# ------------------------------------------------------------------------- validation errors
@pytest.mark.parametrize("raw", [b"", b"   \n\n"])
def test_empty_file(raw):
    with pytest.raises(DataValidationError, match="empty"):
        load_dataset(raw, filename="e.csv")


def test_header_only():
    with pytest.raises(DataValidationError, match="header but no data rows"):
        load_dataset(b"a,b,c\n", filename="h.csv")


def test_single_row():
    with pytest.raises(DataValidationError, match="1 usable row"):
        load_dataset(b"a,b\n1,2\n", filename="one.csv", bounds=(0, 5))


def test_missing_label_column_lists_columns():
    with pytest.raises(DataValidationError, match="label column 'target' not found") as info:
        load_dataset(_csv_bytes(_frame()), filename="t.csv", label="target")
    for col in ("a", "b", "y"):
        assert f"'{col}'" in str(info.value)


def test_label_with_one_class():
    # a class list read from the data needs two classes present; a public one does not (whether
    # anything is released must not depend on one record: tests/test_guarantee_edges.py)
    with pytest.raises(DataValidationError, match="single class"), pytest.warns(PrivacyLeakWarning):
        load_dataset(b"a,y\n1,0\n2,0\n3,0\n", filename="c.csv", label="y", bounds=(0, 5),
                     task="classification")
    ds = load_dataset(b"a,y\n1,0\n2,0\n3,0\n", filename="c.csv", label="y", bounds=(0, 5),
                      task="classification", classes=[0, 1])
    assert ds.classes.tolist() == [0, 1] and ds.classes_source == "user"


def test_duplicate_column_names_in_csv():
    with pytest.raises(DataValidationError, match=r"duplicate column names \['a'\]"):
        load_dataset(b"a,b,a\n1,2,3\n4,5,6\n", filename="d.csv")


def test_undecodable_bytes():
    with pytest.raises(DataValidationError, match="not UTF-8") as info:
        load_dataset(b"a,b\n\xff\xfe,1\n", filename="u.csv")
    assert "0xff" in str(info.value)


def test_non_numeric_column_without_categories_names_it():
    raw = b"a,city\n1,Paris\n2,Rome\n3,Oslo\n"
    with pytest.raises(DataValidationError, match="not numeric") as info:
        load_dataset(raw, filename="n.csv", bounds=(0, 5))
    assert "city" in str(info.value)
    assert "'a'" not in str(info.value)


def test_categories_are_one_hot_encoded():
    raw = b"a,city,y\n1,Paris,0\n2,Rome,1\n3,Paris,1\n4,Rome,0\n"
    cats = ["Paris", "Rome", "Oslo"]
    ds = load_dataset(raw, filename="c.csv", label="y", categories={"city": cats}, bounds=(0, 5),
                      task="classification", classes=[0, 1])
    assert ds.feature_names == ["a", "city=Paris", "city=Rome", "city=Oslo"]
    expected_city = ["Paris", "Rome", "Paris", "Rome"]
    for j, cat in enumerate(cats, start=1):
        np.testing.assert_array_equal(ds.X[:, j], [float(v == cat) for v in expected_city])
    np.testing.assert_array_equal(ds.X[:, 0], [1, 2, 3, 4])


def test_category_values_outside_public_list_are_an_error():
    raw = b"a,city\n1,Paris\n2,Rome\n3,Lima\n"
    with pytest.raises(DataValidationError, match="outside its public category list") as info:
        load_dataset(raw, filename="c.csv", categories={"city": ["Paris", "Rome"]}, bounds=(0, 5))
    assert "Lima" in str(info.value) and "city" in str(info.value)
    with pytest.raises(DataValidationError, match="unknown column"):
        load_dataset(raw, filename="c.csv", categories={"town": ["Paris"]}, bounds=(0, 5))


def test_nonfinite_values_are_reported_with_counts():
    raw = b"a,b\n1,2\n,3\n4,inf\n5,6\nnan,-inf\n"
    with pytest.raises(DataValidationError, match="3 rows contain missing or infinite values") as info:
        load_dataset(raw, filename="nan.csv", bounds=(-10, 10))
    msg = str(info.value)
    assert "'a': 2" in msg and "'b': 2" in msg
    assert "[1, 2, 4]" in msg  # first bad rows
    assert "missing='impute'" in msg and "remove those rows from the file" in msg
    assert "missing='drop'" not in msg  # no front end offers it any more (n would depend on the data)


def test_drop_nonfinite_drops_and_counts():
    raw = b"a,b\n1,2\n,3\n4,inf\n5,6\nnan,-inf\n7,8\n"
    ds = load_dataset(raw, filename="nan.csv", bounds=(-10, 10), drop_nonfinite=True)
    assert ds.n_dropped == 3
    assert ds.missing == "drop"  # the old spelling still means missing="drop"
    np.testing.assert_array_equal(ds.X, [[1, 2], [5, 6], [7, 8]])


@pytest.mark.parametrize(
    "raw",
    [b"a,t\n0.1,1.5\n0.2,2.5\n0.3,3.25\n",  # float regression label
     b"a,t\n0.1,1\n0.2,\n0.3,0\n0.4,1\n"],  # a missing label makes the column float
)
def test_float_label_loads_or_gives_a_specific_error(raw):
    try:
        ds = load_dataset(raw, filename="f.csv", label="t", task="regression", bounds=(0, 1),
                          label_bounds=(0, 5))
    except DataValidationError as exc:
        assert "t (label)" in str(exc)  # the NaN-count message names the label
    else:
        assert ds.y.dtype.kind == "f"


# ------------------------------------------------------------------------- bounds
def test_bounds_as_dict_tuple_and_array():
    raw = _csv_bytes(_frame())
    ds = load_dataset(raw, filename="t.csv", label="y", bounds={"a": (0, 1), "b": (-5, 5)}, **CLS)
    np.testing.assert_array_equal(ds.bounds, [[0, 1], [-5, 5]])
    assert ds.bounds_source == "user"
    ds = load_dataset(raw, filename="t.csv", label="y", bounds=(-5, 5), **CLS)
    np.testing.assert_array_equal(ds.bounds, [[-5, 5], [-5, 5]])
    assert ds.bounds_source == "user"
    three = _frame().assign(c=1.0)
    ds = load_dataset(_csv_bytes(three), filename="t.csv", label="y", bounds=[[0, 1], [-6, 6], [0, 2]],
                      **CLS)
    np.testing.assert_array_equal(ds.bounds, [[0, 1], [-6, 6], [0, 2]])
    assert ds.bounds_source == "user"


def test_bounds_as_numpy_array():
    raw = _csv_bytes(_frame().assign(c=1.0))  # 3 features: no (2, 2) ambiguity
    bounds = np.array([[-1, 1], [-6, 6], [0, 2]])
    ds = load_dataset(raw, filename="t.csv", label="y", bounds=bounds, **CLS)
    np.testing.assert_array_equal(ds.bounds, bounds)
    assert ds.bounds_source == "user"


def test_bounds_files_json_and_csv(tmp_path):
    raw = _csv_bytes(_frame())
    (tmp_path / "b.json").write_text(json.dumps({"a": [0, 1], "b": [-5, 5]}))
    (tmp_path / "wrapped.json").write_text(json.dumps({"bounds": {"a": [0, 1], "b": [-5, 5]}}))
    (tmp_path / "b.csv").write_text("column,lo,hi\na,0,1\nb,-5,5\n")
    (tmp_path / "nohead.csv").write_text("a,0,1\nb,-5,5\n")
    for name in ("b.json", "wrapped.json", "b.csv", "nohead.csv"):
        bounds = load_bounds_file(tmp_path / name)
        assert bounds == {"a": (0.0, 1.0), "b": (-5.0, 5.0)}
        ds = load_dataset(raw, filename="t.csv", label="y", bounds=bounds, **CLS)
        assert ds.bounds_source == "user"
        np.testing.assert_array_equal(ds.bounds, [[0, 1], [-5, 5]])


@pytest.mark.parametrize(("name", "text"), [("bad.json", "{not json"), ("bad.json", '{"a": 3}'),
                                            ("bad.csv", "a,0\n"), ("bad.csv", "a,zero,1\n")])
def test_malformed_bounds_file(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    with pytest.raises(DataValidationError, match="bounds file"):
        load_bounds_file(tmp_path / name)


def test_partial_bounds_warn_and_are_marked_data():
    frame = _frame()
    with pytest.warns(PrivacyLeakWarning, match="b") as record:
        ds = load_dataset(_csv_bytes(frame), filename="t.csv", label="y", bounds={"a": (0, 1)}, **CLS)
    assert any("NOT hold" in str(w.message) for w in record)
    assert ds.bounds_source == "data"
    np.testing.assert_array_equal(ds.bounds[0], [0, 1])
    np.testing.assert_array_equal(ds.bounds[1], [frame["b"].min(), frame["b"].max()])


def test_no_bounds_at_all_warn_and_are_marked_data():
    with pytest.warns(PrivacyLeakWarning):
        ds = load_dataset(_csv_bytes(_frame()), filename="t.csv", label="y", **CLS)
    assert ds.bounds_source == "data"


def test_bad_bounds_are_rejected():
    raw = _csv_bytes(_frame())
    with pytest.raises(DataValidationError, match="unknown column"):
        load_dataset(raw, filename="t.csv", label="y", bounds={"a": (0, 1), "zzz": (0, 1)}, **CLS)
    with pytest.raises(DataValidationError, match="'a'"):
        load_dataset(raw, filename="t.csv", label="y", bounds={"a": (1, 0), "b": (-5, 5)}, **CLS)
    with pytest.raises(ValueError, match="lower bound above upper"):
        load_dataset(raw, filename="t.csv", label="y", bounds=(1, 0), **CLS)


def _regression_csv(n: int = 80) -> bytes:
    rng = np.random.default_rng(5)
    # an integer label with many distinct values (float labels hit the bug above)
    frame = pd.DataFrame({"a": rng.uniform(0, 1, n).round(3), "t": rng.integers(100, 900, n)})
    return _csv_bytes(frame)


def test_regression_label_without_bounds_warns_and_marks_data():
    raw = _regression_csv()
    with pytest.warns(PrivacyLeakWarning, match="regression label 't'"):
        ds = load_dataset(raw, filename="r.csv", label="t", task="regression", bounds={"a": (0, 1)})
    assert ds.task == "regression"
    assert ds.bounds_source == "data"
    assert ds.label_bounds == (float(ds.y.min()), float(ds.y.max()))


def test_regression_label_with_public_bounds_is_user():
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        ds = load_dataset(_regression_csv(), filename="r.csv", label="t", task="regression",
                          bounds={"a": (0, 1)}, label_bounds=(0, 1000))
    assert ds.task == "regression"
    assert ds.bounds_source == "user"
    assert ds.label_bounds == (0.0, 1000.0)


# ------------------------------------------------------------------------- split
def test_split_is_stratified_disjoint_and_complete():
    n = 200
    y = np.repeat([0, 1, 2], [120, 60, 20])
    frame = pd.DataFrame({"id": np.arange(n), "v": np.linspace(0, 1, n), "y": y})
    ds = load_dataset(frame, label="y", bounds={"id": (0, n), "v": (0, 1)}, **CLS)
    train, test = ds.split(test_size=0.25, random_state=1)
    ids_tr, ids_te = train.X[:, 0].astype(int), test.X[:, 0].astype(int)
    assert set(ids_tr).isdisjoint(ids_te)
    assert sorted(np.concatenate([ids_tr, ids_te]).tolist()) == list(range(n))
    assert test.n_samples == 50
    for c, count in zip([0, 1, 2], [120, 60, 20], strict=True):
        assert abs(np.sum(test.y == c) - 0.25 * count) <= 1
    # labels travel with their rows
    np.testing.assert_array_equal(train.y, y[ids_tr])
    np.testing.assert_array_equal(test.y, y[ids_te])
    # bounds and metadata are kept
    np.testing.assert_array_equal(train.bounds, ds.bounds)
    assert train.bounds_source == test.bounds_source == "user"


def test_split_rejects_bad_test_size():
    ds = load_dataset(_frame(), label="y", bounds=(-5, 5), **CLS)
    for bad in (0, 1, 1.5, -0.1):
        with pytest.raises(ValueError, match="test_size"):
            ds.split(test_size=bad)
