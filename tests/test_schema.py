"""Tests of dpcore.schema: Param.validate for every kind and validate_params."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcore.schema import DELTA, EPSILON, Param, validate_params

FLOAT = Param("sigma", "float", 1.0, "noise", low=0.0, high=10.0)
OPEN = Param("rate", "float", 0.5, "a rate", low=0.0, high=1.0, low_open=True, high_open=True)
INT = Param("n_components", "int", 2, "p", low=1, high=64)
CHOICE = Param("calibration", "choice", "sound", "calib", choices=("sound", "published"))
BOOL = Param("reconstruct", "bool", False, "map back")
SPLIT = Param("epsilon_split", "fraction_split", (0.3, 0.7), "split", split_names=("mean", "covariance"))
OPTIONAL = Param("n_components_opt", "int", None, "p or derive", low=1, optional=True)


# ------------------------------------------------------------------------- float
@pytest.mark.parametrize("value", [0.0, 0.5, 10.0, 3, "2.5", np.float32(1.5), np.int64(4)])
def test_float_accepts_values_in_closed_range(value):
    out = FLOAT.validate(value)
    assert isinstance(out, float)
    assert out == float(value)


@pytest.mark.parametrize("value", [-1e-9, 10.000001, math.inf, -math.inf, math.nan, "abc", None, True, [1.0]])
def test_float_rejects_and_names_parameter(value):
    with pytest.raises(ValueError, match="sigma"):
        FLOAT.validate(value)


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_open_ends_are_excluded(value):
    with pytest.raises(ValueError, match="rate"):
        OPEN.validate(value)


@pytest.mark.parametrize("value", [1e-300, 0.5, 1 - 1e-16])
def test_open_range_interior_is_accepted(value):
    assert OPEN.validate(value) == value


def test_open_and_closed_messages_use_the_right_operator():
    with pytest.raises(ValueError, match=r"rate must be > 0"):
        OPEN.validate(0.0)
    with pytest.raises(ValueError, match=r"rate must be < 1"):
        OPEN.validate(1.0)
    with pytest.raises(ValueError, match=r"sigma must be >= 0"):
        FLOAT.validate(-1)
    with pytest.raises(ValueError, match=r"sigma must be <= 10"):
        FLOAT.validate(11)


# ------------------------------------------------------------------------- inf only where allowed
def test_epsilon_allows_positive_inf_only():
    assert EPSILON.validate(math.inf) == math.inf
    assert EPSILON.validate("inf") == math.inf
    for bad in (-math.inf, 0, -1, math.nan):
        with pytest.raises(ValueError, match="epsilon"):
            EPSILON.validate(bad)


def test_delta_is_open_unit_interval_and_finite():
    assert DELTA.validate(1e-12) == 1e-12
    for bad in (0, 1, 1.5, math.inf, -1e-5):
        with pytest.raises(ValueError, match="delta"):
            DELTA.validate(bad)


def test_inf_rejected_without_allow_inf():
    with pytest.raises(ValueError, match="sigma must be finite"):
        FLOAT.validate(math.inf)
    no_high = Param("scale", "float", 1.0, "s", low=0.0)
    with pytest.raises(ValueError, match="scale"):
        no_high.validate(math.inf)


def test_int_param_with_allow_inf_does_not_crash():
    p = Param("n_mixtures", "int", 10, "T", low=1, allow_inf=True)
    try:
        out = p.validate(math.inf)
    except ValueError as exc:
        assert "n_mixtures" in str(exc)
    else:
        assert out == math.inf


# ------------------------------------------------------------------------- int
@pytest.mark.parametrize("value", [1, 64, 3.0, "7", np.int32(5)])
def test_int_accepts_whole_numbers(value):
    out = INT.validate(value)
    assert isinstance(out, int) and not isinstance(out, bool)
    assert out == int(float(value))


@pytest.mark.parametrize("value", [2.5, "3.5", 0, 65, True, math.nan, math.inf, "two"])
def test_int_rejects_and_names_parameter(value):
    with pytest.raises(ValueError, match="n_components"):
        INT.validate(value)


def test_int_message_says_whole_number():
    with pytest.raises(ValueError, match="whole number"):
        INT.validate(2.5)


# ------------------------------------------------------------------------- choice / bool / optional
def test_choice():
    assert CHOICE.validate("published") == "published"
    with pytest.raises(ValueError, match=r"calibration must be one of \['sound', 'published'\]"):
        CHOICE.validate("tight")
    with pytest.raises(ValueError, match="calibration"):
        CHOICE.validate(None)


def test_bool():
    assert BOOL.validate(True) is True
    assert BOOL.validate(False) is False
    for bad in (1, 0, "yes", "True"):
        with pytest.raises(ValueError, match="reconstruct"):
            BOOL.validate(bad)


def test_none_only_when_optional():
    assert OPTIONAL.validate(None) is None
    assert OPTIONAL.validate(3) == 3
    with pytest.raises(ValueError, match="n_components is required"):
        INT.validate(None)


# ------------------------------------------------------------------------- fraction_split
@pytest.mark.parametrize("value", [(0.3, 0.7), [0.5, 0.5], (0.1 + 0.2, 0.7), np.array([0.25, 0.75])])
def test_split_accepts_fractions_summing_to_one(value):
    out = SPLIT.validate(value)
    assert isinstance(out, tuple) and len(out) == 2
    assert math.isclose(sum(out), 1.0, abs_tol=1e-6)


@pytest.mark.parametrize(
    ("value", "pattern"),
    [
        ((0.3, 0.6), "sum to 1"),
        ((0.3, 0.8), "sum to 1"),
        ((0.0, 1.0), r"\(0, 1\)"),
        ((-0.5, 1.5), r"\(0, 1\)"),
        ((math.nan, 0.5), r"\(0, 1\)"),
        ((0.2, 0.3, 0.5), "needs 2 fractions"),
        ((1.0,), "needs 2 fractions"),
        ("ab", "sequence of fractions"),
        (0.5, "sequence of fractions"),
    ],
)
def test_split_rejects_and_names_parameter(value, pattern):
    with pytest.raises(ValueError, match=pattern) as info:
        SPLIT.validate(value)
    assert "epsilon_split" in str(info.value)


def test_split_single_nan_part_is_rejected():
    p = Param("split", "fraction_split", (1.0,), "one part")
    assert p.validate([1.0]) == (1.0,)
    with pytest.raises(ValueError, match="split"):
        p.validate([math.nan])


# ------------------------------------------------------------------------- validate_params
def test_validate_params_fills_defaults_and_converts():
    params = (EPSILON, DELTA, INT, CHOICE)
    out = validate_params(params, {"epsilon": "2", "n_components": 3.0})
    assert out == {"epsilon": 2.0, "delta": DELTA.default, "n_components": 3, "calibration": "sound"}
    assert isinstance(out["n_components"], int)


def test_validate_params_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown parameter") as info:
        validate_params((EPSILON, DELTA), {"epsilon": 1.0, "epsilom": 2.0})
    assert "epsilom" in str(info.value)
    assert "epsilon" in str(info.value).split("known")[-1]  # lists the known names


def test_validate_params_error_names_the_bad_parameter():
    with pytest.raises(ValueError, match="delta"):
        validate_params((EPSILON, DELTA), {"epsilon": 1.0, "delta": 2.0})
    with pytest.raises(ValueError, match="epsilon"):
        validate_params((EPSILON, DELTA), {"epsilon": -1.0})


def test_cli_flag_and_describe():
    assert SPLIT.cli_flag == "--epsilon-split"
    desc = SPLIT.describe()
    assert desc["name"] == "epsilon_split" and desc["kind"] == "fraction_split"
    assert desc["parts"] == ["mean", "covariance"]
    assert INT.describe()["range"] == [1, 64]
    assert CHOICE.describe()["choices"] == ["sound", "published"]
    assert EPSILON.describe()["privacy"] is True
