"""Only public facts shape a release (issue 12, rows 1, 4, 5, 8 and 9).

Each test here failed on the code before the fix: the class list and the task were read from the
private labels, the zero-norm threshold of RON-Gauss depended on the largest row, dropping rows
changed n silently, and editing one side of a data-derived bound declared both sides public.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from dpcore.cli import main as cli_main
from dpcore.data import load_dataset
from dpcore.exceptions import DataValidationError, PrivacyLeakWarning
from dpcore.mechanisms import DPMix, LocalGaussian, RONGauss
from dpcore.mechanisms.ron_gauss import ZERO_NORM, mean_sensitivity, normalize_rows


def _table(n: int = 60, rare: bool = False, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.uniform(0, 10, (n, 3)), columns=["a", "b", "c"])
    frame["y"] = np.arange(n) % 2
    if rare:
        frame.loc[0, "y"] = 7  # one record with a rare class
    return frame


BOUNDS = {"a": (0, 10), "b": (0, 10), "c": (0, 10)}


# ---------------------------------------------------------------------------------- row 1: classes
def test_class_list_from_the_data_warns_and_voids_the_guarantee():
    with pytest.warns(PrivacyLeakWarning, match="class list"):
        ds = load_dataset(_table(), label="y", task="classification", bounds=BOUNDS)
    assert ds.classes_source == "data"
    card = LocalGaussian(epsilon=1.0, delta=1e-6, random_state=0).release(ds).card()
    assert card["guarantee"]["holds"] is False
    assert card["classes_source"] == "data" and card["public_facts"]["classes_source"] == "data"
    assert any("class list" in w for w in card["warnings"])


def test_public_class_list_holds_and_a_rare_class_is_refused_not_released():
    ds = load_dataset(_table(), label="y", task="classification", bounds=BOUNDS, classes=[0, 1])
    card = LocalGaussian(epsilon=1.0, delta=1e-6, random_state=0).release(ds).card()
    assert card["guarantee"]["holds"] is True and card["public_facts"]["classes"] == [0, 1]
    with pytest.raises(DataValidationError, match="not in its public class list"):
        load_dataset(_table(rare=True), label="y", task="classification", bounds=BOUNDS,
                     classes=[0, 1])


def test_dpmix_columns_do_not_depend_on_the_labels_present():
    """Before: a rare class in one record added a ``label=RARE`` column to the DPMix CSV."""
    cols = []
    for frame in (_table(), _table(rare=True)):  # neighbours: one record's label is the rare class
        ds = load_dataset(frame, label="y", task="classification", bounds=BOUNDS, classes=[0, 1, 7])
        rel = DPMix(epsilon=5.0, ell=2, n_mixtures=10, random_state=0).release(ds)
        cols.append(list(rel.to_frame().columns))
    assert cols[0] == cols[1] and "y=7" in cols[0]


def test_cli_refuses_a_class_list_from_the_data(tmp_path, capsys):
    path = tmp_path / "t.csv"
    _table().to_csv(path, index=False)
    bounds = tmp_path / "b.json"
    bounds.write_text(json.dumps(BOUNDS))
    out = tmp_path / "r.csv"
    base = ["release", "local-gaussian", str(path), "-o", str(out), "--label", "y", "--bounds",
            str(bounds), "--epsilon", "1", "--delta", "1e-6", "--task", "classification"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        assert cli_main(base) == 2
    assert "--classes" in capsys.readouterr().err and not out.exists()
    assert cli_main([*base, "--classes", "0,1"]) == 0
    assert json.loads((tmp_path / "r.card.json").read_text())["guarantee"]["holds"] is True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        assert cli_main([*base, "--data-classes"]) == 0
    card = json.loads((tmp_path / "r.card.json").read_text())
    assert card["guarantee"]["holds"] is False and card["classes_source"] == "data"


# ---------------------------------------------------------------------------------- row 4: task
def test_the_task_is_never_guessed_from_the_labels(tmp_path, capsys):
    frame = _table()
    with pytest.raises(DataValidationError, match="choose the task"):
        load_dataset(frame, label="y", bounds=BOUNDS)
    X, y = frame[["a", "b", "c"]].to_numpy(), frame["y"].to_numpy()
    with pytest.raises(ValueError, match="task must be given"):
        LocalGaussian(epsilon=1.0, delta=1e-6, bounds=(0, 10)).release(X, y)
    # a public class list or label bounds imply the task; nothing is read off the values
    rel = LocalGaussian(epsilon=1.0, delta=1e-6, bounds=(0, 10), classes=[0, 1],
                        random_state=0).release(X, y)
    assert rel.parameters["task"] == "classification"
    rel = LocalGaussian(epsilon=1.0, delta=1e-6, bounds=(0, 10), label_bounds=(0, 1),
                        random_state=0).release(X, y.astype(float))
    assert rel.parameters["task"] == "regression"
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    assert cli_main(["release", "local-gaussian", str(path), "-o", str(tmp_path / "r.csv"),
                     "--label", "y", "--data-bounds", "--data-classes"]) == 2
    assert "choose the task" in capsys.readouterr().err
    assert not (tmp_path / "r.csv").exists()


def test_fifty_one_distinct_labels_do_not_change_the_output_format():
    """Before: an integer label with <= 50 values was classification, 51 regression."""
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (200, 2))
    shapes = []
    for k in (50, 51):
        y = np.arange(200) % k
        rel = LocalGaussian(epsilon=1.0, delta=1e-6, bounds=(0, 1), task="regression",
                            label_bounds=(0, 60), random_state=0).release(X, y.astype(float))
        shapes.append((rel.parameters["task"], rel.to_frame().shape))
    assert shapes[0] == shapes[1]


# ---------------------------------------------------------------------------------- row 5: zero norm
def test_zero_norm_threshold_is_a_public_constant():
    X = np.array([[1e-11, 0.0], [0.0, 5e-13], [100.0, 0.0]])
    _, zero_big = normalize_rows(X)
    X2 = X.copy()
    X2[2] = (0.5, 0.5)  # replace the largest row: the other rows must not change status
    _, zero_small = normalize_rows(X2)
    assert zero_big == zero_small == 1  # only the 5e-13 row is below ZERO_NORM
    assert 5e-13 <= ZERO_NORM < 1e-11


def test_ron_gauss_mean_moves_at_most_its_sensitivity_when_the_largest_row_is_replaced():
    """Before: replacing the largest row flipped every near-zero row between 'zero' and 'unit
    vector', moving the mean 9x (n = 20) its sensitivity. At epsilon = inf the release's mu_DP is
    the exact mean of the unit rows."""
    n, d = 20, 3
    X = np.full((n, d), 0.0)
    X[:, 0] = 2e-12 * (1 + np.arange(n) % 3)  # near-zero rows, above ZERO_NORM
    X[-1] = (100.0, 100.0, 100.0)  # the old threshold was 1e-12 x the largest norm: 1.7e-10 here
    X2 = X.copy()
    X2[-1] = (0.0, 0.0, 1e-6)
    mus = []
    for data in (X, X2):
        rel, rel_diag = RONGauss(epsilon=np.inf, n_components=1, feature_scaling="none", bounds=(0, 100),
                       random_state=0).explore(data)
        mus.append(rel_diag["mu_dp"])
    assert np.abs(mus[0] - mus[1]).sum() <= mean_sensitivity(d, n) * (1 + 1e-9)


# ---------------------------------------------------------------------------------- row 8: n
def test_imputation_keeps_n_public_and_dropping_says_so():
    frame = _table()
    frame.loc[[3, 8], "a"] = np.nan
    frame.loc[5, "b"] = np.inf
    ds = load_dataset(frame, label="y", task="classification", bounds=BOUNDS, classes=[0, 1],
                      missing="impute")
    assert ds.n_samples == len(frame) and ds.n_dropped == 0
    assert ds.X[3, 0] == ds.X[8, 0] == 5.0 and ds.X[5, 1] == 5.0  # midpoints of [0, 10]
    card = LocalGaussian(epsilon=1.0, delta=1e-6, random_state=0).release(ds).card()
    assert card["public_facts"]["n"] == len(frame) and card["public_facts"]["missing_values"] == "impute"
    dropped = load_dataset(frame, label="y", task="classification", bounds=BOUNDS, classes=[0, 1],
                           missing="drop")
    assert dropped.n_samples == len(frame) - 3
    card = LocalGaussian(epsilon=1.0, delta=1e-6, random_state=0).release(dropped).card()
    assert "cleaned table" in card["public_facts"]["n_source"]
    assert card["guarantee"]["holds"] is False and card["differentially_private"] is False
    assert any("does NOT hold" in w for w in card["warnings"])
    with pytest.raises(DataValidationError, match="missing='impute'"):
        load_dataset(frame, label="y", task="classification", bounds=BOUNDS, classes=[0, 1])


def _imputed_neighbours():
    """Two neighbouring tables (the last row differs) with a missing value in row 3, loaded with
    missing="impute" and no bounds: the loader fills it from the data's range."""
    rng = np.random.default_rng(4)
    frames = []
    for last in (0.5, 9.0):
        frame = pd.DataFrame({"a": rng.uniform(0.4, 0.6, 60), "b": rng.uniform(0.0, 1.0, 60)})
        frame.loc[3, "a"] = np.nan
        frame.loc[59, "a"] = last
        frames.append(frame)
        rng = np.random.default_rng(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return frames, [load_dataset(f, missing="impute") for f in frames]


def test_imputed_values_are_the_midpoints_of_the_bounds_the_release_uses():
    """A value imputed before the public bounds were known (bounds read from the data at load
    time) is filled again from the public bounds given later: to the mechanism, or declared on the
    dataset (the app's bounds editor). Otherwise one changed row (the last) would move the value
    of another row (row 3) while the card says the guarantee holds."""
    from dpcore.preprocessing import prepare_input

    _, (ds, ds2) = _imputed_neighbours()
    assert ds.X[3, 0] != ds2.X[3, 0]  # the data's midpoints: the neighbours differ
    for data in (ds, ds2):
        prepared = prepare_input(data, bounds=[(0.0, 2.0), (0.0, 1.0)])
        assert prepared.X[3, 0] == 1.0 and prepared.holds
        assert data.X[3, 0] != 1.0  # the dataset itself is not changed
        declared = data.with_bounds([(0.0, 4.0), (0.0, 1.0)])
        assert declared.X[3, 0] == 2.0 and prepared.X[4, 0] == data.X[4, 0]
        assert prepare_input(declared).X[3, 0] == 2.0
        part = declared.subset(np.array([7, 3, 3, 10]))  # the record follows the rows
        assert part.X[1, 0] == part.X[2, 0] == 2.0
        masked = declared.subset(np.arange(60) >= 2)  # a boolean mask: row 3 is now row 1
        assert prepare_input(masked, bounds=[(0.0, 6.0), (0.0, 1.0)]).X[1, 0] == 3.0
        assert prepare_input(part, bounds=[(0.0, 6.0), (0.0, 1.0)]).X[1:3, 0].tolist() == [3.0, 3.0]
        assert prepare_input(part, bounds=[(0.0, 6.0), (0.0, 1.0)]).X[[0, 3], 0].tolist() == \
            part.X[[0, 3], 0].tolist()
    rel = LocalGaussian(epsilon=1.0, delta=1e-6, bounds=[(0.0, 2.0), (0.0, 1.0)], random_state=0)
    assert rel.release(ds).card()["guarantee"]["holds"]
    changed = ds.X.copy()  # a copy with changed rows is not filled again (its cells are unknown)
    from dataclasses import replace
    assert replace(ds, X=changed).imputed_cells() is None


def test_dask_partitions_impute_from_the_public_bounds(tmp_path):
    """On Dask each batch was filled from its own rows' range: the imputed value depended on the
    batch's other rows and on where the batches were cut. It is the public bounds' midpoint, as
    in memory."""
    from dpcore import dask_engine
    from dpcore.preprocessing import prepare_input

    frames, datasets = _imputed_neighbours()
    bounds = [(0.0, 2.0), (0.0, 1.0)]
    for i, (frame, ds) in enumerate(zip(frames, datasets, strict=True)):
        path = tmp_path / f"t{i}.parquet"
        frame.to_parquet(path, row_group_size=20)
        table = dask_engine.open_table(str(path), missing="impute", blocksize=8 * 2 * 20)
        data = dask_engine.prepare_input(table, bounds=bounds, mechanism="local-gaussian",
                                         supported_tasks=("unsupervised",))
        X = np.asarray(data.X.compute())
        assert X[3, 0] == 1.0 and data.holds
        np.testing.assert_array_equal(X, prepare_input(ds, bounds=bounds).X)


def test_missing_labels_are_never_imputed():
    frame = _table().astype({"y": float})
    frame.loc[4, "y"] = np.nan
    with pytest.raises(DataValidationError, match="labels are never imputed"):
        load_dataset(frame, label="y", task="classification", bounds=BOUNDS, classes=[0, 1],
                     missing="impute")


# ---------------------------------------------------------------------------------- row 9: sides
def test_a_bound_is_public_per_side_and_the_card_lists_every_bound():
    frame = _table()
    with pytest.warns(PrivacyLeakWarning):
        ds = load_dataset(frame, label="y", task="classification", classes=[0, 1])
    new = ds.bounds.copy()
    new[0, 1] = 10.0  # only hi of "a" replaced: lo is still the private minimum
    half = ds.with_bounds(new, "user", columns=[0], sides=new != ds.bounds)
    assert half.bounds_sources[0] == "data" and half.bound_side_sources()[0] == ("data", "user")
    card = LocalGaussian(epsilon=1.0, delta=1e-6, random_state=0).release(half).card()
    assert card["guarantee"]["holds"] is False
    facts = card["public_facts"]["bounds"]
    assert set(facts) == {"a", "b", "c"}
    assert facts["a"] == {"lo": float(ds.bounds[0, 0]), "hi": 10.0, "lo_source": "data",
                          "hi_source": "user"}
    full = half.with_bounds(np.tile([0.0, 10.0], (3, 1)), "user")
    card = LocalGaussian(epsilon=1.0, delta=1e-6, random_state=0).release(full).card()
    assert card["guarantee"]["holds"] is True
    assert {v["lo_source"] for v in card["public_facts"]["bounds"].values()} == {"user"}
