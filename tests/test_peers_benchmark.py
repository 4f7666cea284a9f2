"""The peers' benchmark (``benchmarks/peers.py``) hands the peers public facts only and the right norm.

These check the parts that run in the project's environment (the peers themselves live in
``benchmarks/.peers-venv`` and are not installed here): MST's domain comes from the public category
lists and bounds whatever the rows hold, the discretised rows decode to within half a bin, and
diffprivlib's ``data_norm`` bounds every encoded row and is reached by one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import file_utility  # noqa: E402
import peers  # noqa: E402

from dpcore.evaluation.fidelity import encode_file  # noqa: E402


@pytest.fixture(scope="module")
def default_sim():
    return file_utility.simulated("default-sim")


def test_domain_is_public(default_sim):
    columns = peers.public_columns(default_sim, bins=16)
    _, sizes = peers.discretise(default_sim.train, columns, 16)
    assert sizes == [2, 16, 16, 2]  # student (No/Yes), balance, income, default (No/Yes)
    # rows that hold one category only and numbers in one corner: the same domain
    narrow = default_sim.train[default_sim.train["student"] == "No"].head(50).copy()
    narrow["balance"] = 0.0
    codes, narrow_sizes = peers.discretise(narrow, columns, 16)
    assert narrow_sizes == sizes
    assert codes.min() >= 0 and (codes < np.array(sizes)).all()


def test_discretised_rows_decode_within_half_a_bin(default_sim):
    bins = 32
    columns = peers.public_columns(default_sim, bins)
    codes, _ = peers.discretise(default_sim.train, columns, bins)
    back = peers.undiscretise(codes, columns, bins)
    for name, kind, facts in columns:
        if kind == "category":
            assert (back[name].astype(str) == default_sim.train[name].astype(str)).all()
        else:
            lo, hi = facts
            assert np.abs(back[name] - default_sim.train[name]).max() <= (hi - lo) / bins / 2 + 1e-9


def test_value_outside_the_public_list_is_refused(default_sim):
    columns = peers.public_columns(default_sim, 8)
    frame = default_sim.train.head(5).copy()
    frame.loc[0, "student"] = "Maybe"
    with pytest.raises(ValueError, match="student.*Maybe"):
        peers.discretise(frame, columns, 8)


def test_row_norm_bound_holds_and_is_reached(default_sim):
    ref = file_utility.reference(default_sim)
    bound = peers.row_norm_bound(ref.schema)
    assert bound == pytest.approx(np.sqrt(3))  # two numbers and one group
    for X in (ref.X_priv, ref.X_test):
        assert np.linalg.norm(X, axis=1).max() <= bound + 1e-12
    # a row with every number at its upper bound reaches it
    top = pd.DataFrame({"student": ["Yes"], "balance": [3000.0], "income": [80_000.0], "default": ["No"]})
    X_top, _ = encode_file(top, ref.schema)
    assert np.linalg.norm(X_top) == pytest.approx(bound)


def test_regression_label_is_binned_by_its_public_bounds():
    wage = file_utility.simulated("wage-sim")
    columns = peers.public_columns(wage, 10)
    assert columns[-1] == ("wage", "number", (0.0, 400.0))
    codes, sizes = peers.discretise(wage.train, columns, 10)
    assert sizes == [10, 10, 10]
    wage_values, left = wage.train["wage"].to_numpy(), codes[:, -1] * 40.0
    assert ((left <= wage_values + 1e-9) & (wage_values < left + 40 + 1e-9)).all()
