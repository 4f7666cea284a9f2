"""dpcore.validation: one home for input checks; the data layer's module structure (issue 15)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from dpcore import validation
from dpcore.data import load_dataset
from dpcore.exceptions import DataValidationError, PrivacyLeakWarning

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("value", "expected"), [(3, 3), (np.int64(7), 7), (1e6, 1_000_000), (2.0, 2)])
def test_check_integer_accepts_integral_values(value, expected):
    got = validation.check_integer("n", value, 1)
    assert got == expected and type(got) is int


@pytest.mark.parametrize("value", [True, 2.5, float("nan"), float("inf"), "3", None, [3]])
def test_check_integer_refuses_non_integers_by_name(value):
    with pytest.raises(ValueError, match=r"^n_mixtures must be an integer"):
        validation.check_integer("n_mixtures", value, 1)


def test_check_integer_minimum():
    assert validation.check_integer("d_y", 0, 0) == 0
    with pytest.raises(ValueError, match=r"d_x must be >= 1, got 0"):
        validation.check_integer("d_x", 0, 1)


def test_check_n_components_range_and_default():
    assert validation.check_n_components(3, 10) == 3
    assert validation.check_n_components(None, 10, default=lambda d: d // 2) == 5
    for bad in (0, 10, 11):
        with pytest.raises(ValueError, match="n_components must satisfy 1 <= n_components < n_features = 10"):
            validation.check_n_components(bad, 10)
    with pytest.raises(ValueError, match="n_components"):
        validation.check_n_components(1, 1)
    with pytest.raises(ValueError, match="n_components is required"):
        validation.check_n_components(None, 10)


def test_check_positive_array():
    np.testing.assert_array_equal(validation.check_positive_array("sigma_x", [1.0, 2.0]), [1.0, 2.0])
    for bad in (0.0, -1.0, [1.0, np.nan], [], "x"):
        with pytest.raises(ValueError, match="sigma_x"):
            validation.check_positive_array("sigma_x", bad)


def test_task_and_missing_checks_raise_the_requested_error_class():
    assert validation.check_task("regression") == "regression"
    with pytest.raises(DataValidationError, match="task must be one of"):
        validation.check_task("clustering", DataValidationError)
    assert validation.check_missing("impute") == "impute"
    with pytest.raises(DataValidationError, match="missing must be"):
        validation.check_missing("ignore", DataValidationError)


def test_resolve_task_is_never_guessed_from_labels():
    y = np.array([0, 1, 1])
    assert validation.resolve_task(None, None, None, None) == "unsupervised"
    assert validation.resolve_task(None, y, [0, 1], None) == "classification"
    assert validation.resolve_task(None, y, None, (0, 1)) == "regression"
    with pytest.raises(ValueError, match="never guessed"):
        validation.resolve_task(None, y, None, None)
    with pytest.raises(ValueError, match="needs labels"):
        validation.resolve_task("classification", None, None, None)


def test_bound_checks():
    np.testing.assert_array_equal(validation.normalize_bounds((0, 2), 3), [[0, 2]] * 3)
    with pytest.raises(ValueError, match="lower bound above upper"):
        validation.normalize_bounds([[0, 1], [3, 2]], 2)
    assert validation.bound_pair("a", [0, 1]) == (0.0, 1.0)
    with pytest.raises(DataValidationError, match="'a'"):
        validation.bound_pair("a", [1, 1])
    assert validation.bound_pair("a", [1, 1], strict=False) == (1.0, 1.0)
    with pytest.raises(DataValidationError, match="'big'.*rescale|'big'.*Rescale"):
        validation.check_bound_magnitude(np.array([[0.0, 1.0], [0.0, 1e101]]), ["a", "big"])


def test_one_sentence_for_bounds_from_the_data():
    many = [f"c{j}" for j in range(7)]
    text = validation.data_bounds_message(many)
    assert text.startswith("no public bounds for 7 column(s) (c0, c1, c2, c3, c4, ...)")
    assert "computed from the private data" in text and "does NOT hold" in text
    with pytest.warns(PrivacyLeakWarning, match="regression label 'y'"):
        validation.warn_data_bounds("the regression label 'y'")
    with pytest.warns(PrivacyLeakWarning, match="class list for label 'y'"):
        validation.warn_data_classes("y")


def test_the_library_and_the_app_word_the_data_bounds_warning_alike():
    app_state = pytest.importorskip("app.state")
    X = np.column_stack([np.linspace(0, 1, 20), np.linspace(5, 9, 20)])
    import pandas as pd

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PrivacyLeakWarning)
        ds = load_dataset(pd.DataFrame(X, columns=["a", "b"]), bounds={"a": (0, 1)})
    library = [str(w.message) for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    assert library == app_state.data_bounds_warning(ds) == [validation.data_bounds_message(["b"])]


@pytest.mark.slow
def test_data_does_not_import_preprocessing():
    """The data <-> preprocessing cycle is gone: the data layer loads without the mechanism input
    layer (preprocessing imports data, never the other way round)."""
    code = "import sys, dpcore.data; print('dpcore.preprocessing' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_dataset_is_frozen_and_with_bounds_returns_a_new_one():
    import pandas as pd

    frame = pd.DataFrame({"a": np.linspace(0, 1, 10), "b": np.linspace(2, 3, 10)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        ds = load_dataset(frame, bounds={"a": (0, 1)})
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.bounds = np.zeros((2, 2))  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.name = "renamed"  # type: ignore[misc]
    before = ds.bounds.copy()
    new = ds.with_bounds([[0, 1], [1.5, 3.5]], "user", columns=["b"])
    assert new is not ds and new.bounds_source == "user" and ds.bounds_source == "data"
    np.testing.assert_array_equal(ds.bounds, before)
    assert ds.fingerprint != new.fingerprint  # each object has its own cached fingerprint
    renamed = dataclasses.replace(ds, name="renamed")
    assert renamed.name == "renamed" and ds.name == "uploaded"
