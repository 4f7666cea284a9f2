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


def _with_rows(table, train):
    return file_utility.Table(table.name, train, table.test, label=table.label, task=table.task,
                              bounds=table.bounds, categories=table.categories, classes=table.classes,
                              label_bounds=table.label_bounds)


def test_domain_is_public(default_sim):
    columns = peers.public_columns(default_sim, bins=16)
    _, sizes = peers.discretise(default_sim.train, columns, 16)
    assert sizes == [2, 16, 16, 2]  # student (No/Yes), balance, income, default (No/Yes)
    # other private rows: one category only, every balance at one value, one income changed to
    # its bound: the columns, the domain sizes and the frame MST's transformer is fitted on are the same
    narrow = default_sim.train[default_sim.train["student"] == "No"].head(50).copy()
    narrow["balance"] = 0.0
    narrow.loc[narrow.index[0], "income"] = 80_000.0
    other = _with_rows(default_sim, narrow)
    assert peers.public_columns(other, bins=16) == columns
    codes, narrow_sizes = peers.discretise(narrow, columns, 16)
    assert narrow_sizes == sizes
    assert codes.min() >= 0 and (codes < np.array(sizes)).all()
    assert codes[0, 2] == 15  # the upper bound falls in the last bin
    pd.testing.assert_frame_equal(peers.public_domain_frame(narrow_sizes), peers.public_domain_frame(sizes))


def test_domain_changes_with_the_public_facts(default_sim):
    """The domain follows the public facts: a wider category list or other bounds change it."""
    wider = file_utility.Table("x", default_sim.train, default_sim.test, label="default",
                               task="classification", bounds={"balance": [0, 6000], "income": [0, 80_000]},
                               categories={"student": ["No", "Yes", "Unknown"]}, classes=["No", "Yes"])
    columns = peers.public_columns(wider, bins=8)
    assert columns[0] == ("student", "category", ["No", "Yes", "Unknown"])
    assert columns[1] == ("balance", "number", (0, 6000))
    _, sizes = peers.discretise(default_sim.train, columns, 8)
    assert sizes == [3, 8, 8, 2]


def test_public_domain_frame_holds_every_code():
    frame = peers.public_domain_frame([2, 5, 3])
    assert frame.shape == (5, 3)
    for j, k in enumerate([2, 5, 3]):
        assert sorted(set(frame[f"c{j}"])) == list(range(k))


def test_bin_codes_decode_to_midpoints():
    columns = [("x", "number", (10.0, 30.0)), ("c", "category", ["a", "b", "c"])]
    codes = np.array([[0, 2], [3, 0], [1, 1]])
    frame = peers.undiscretise(codes, columns, bins=4)  # bins of width 5 over [10, 30]
    np.testing.assert_allclose(frame["x"], [12.5, 27.5, 17.5])
    assert frame["c"].tolist() == ["c", "a", "b"]
    # and back: a midpoint lies in its own bin
    again, _ = peers.discretise(frame, columns, 4)
    np.testing.assert_array_equal(again, codes)


def test_decoded_file_is_encoded_as_file_utility_encodes(default_sim):
    """MST's decoded rows go through file_utility's own encoding: the same features in the same order
    as the real rows, category one-hots and labels identical, numbers within half a bin."""
    bins = 32
    ref = file_utility.reference(default_sim)
    columns = peers.public_columns(default_sim, bins)
    codes, _ = peers.discretise(default_sim.train, columns, bins)
    X_file, y_file = encode_file(peers.undiscretise(codes, columns, bins), ref.schema)
    assert X_file.shape == ref.X_priv.shape == (len(default_sim.train), ref.X_test.shape[1])
    np.testing.assert_array_equal(y_file, ref.y_priv)
    numeric = [i for i, name in enumerate(ref.schema.feature_names) if name in ("balance", "income")]
    one_hot = [i for i in range(X_file.shape[1]) if i not in numeric]
    assert len(numeric) == 2 and one_hot
    np.testing.assert_array_equal(X_file[:, one_hot], ref.X_priv[:, one_hot])
    assert np.abs(X_file[:, numeric] - ref.X_priv[:, numeric]).max() <= 0.5 / bins + 1e-12


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


@pytest.mark.slow
@pytest.mark.skipif(not peers.venv_python().exists(),
                    reason="the peers' environment is absent (python benchmarks/peers.py --setup)")
def test_worker_end_to_end(default_sim):
    """Both peers through the worker on 400 rows: MST's codes stay in the public domain and keep the
    row count; diffprivlib hands back one coefficient per encoded feature."""
    small = _with_rows(default_sim, default_sim.train.head(400))
    ref = file_utility.reference(small)
    rows = peers.run_mst(small, ref, [1.0], 1, bins=8)
    rows += peers.run_diffprivlib(small, ref, [1.0], 1)
    assert [r["peer"].split()[0] for r in rows] == ["MST", "diffprivlib"]
    for r in rows:
        assert 0.0 <= r["score"][0] <= 1.0 and r["runs"] == 1
    columns = peers.public_columns(small, 8)
    codes, sizes = peers.discretise(small.train, columns, 8)
    result = peers.call_worker({"peer": "mst", "epsilons": [1.0], "releases": 1, "delta": peers.DELTA,
                                "sizes": sizes}, codes=codes)
    assert result["codes_0"].shape == codes.shape
    assert (result["codes_0"] >= 0).all() and (result["codes_0"] < np.array(sizes)).all()


def test_comparison_puts_each_peer_beside_our_cell():
    ours = [{"table": "t", "metric": "accuracy", "epsilon": 1.0, "file": [0.8, 0.01], "auc": [0.9, 0.0],
             "baseline": 0.75, "nonprivate": 0.85},
            {"table": "t", "metric": "accuracy", "epsilon": 0.1, "file": [0.7, 0.02], "auc": None,
             "baseline": 0.75, "nonprivate": 0.85}]
    rows = [{"table": "t", "peer": "MST (i.i.d. sampling)", "epsilon": 1.0, "score": [0.79, 0.0],
             "auc": None},
            {"table": "t", "peer": "diffprivlib LogisticRegression (a model)", "epsilon": 0.1,
             "score": [0.6, 0.1], "auc": [0.5, 0.1]},
            {"table": "u", "peer": "MST (i.i.d. sampling)", "epsilon": 1.0, "score": [0.1, 0.0], "auc": None}]
    lines = peers.comparison(rows, ours).splitlines()
    assert len(lines) == 4
    assert lines[2] == ("| t (accuracy) | 1 | 0.800 ± 0.010 (AUC 0.90 ± 0.00) | 0.790 ± 0.000 | — | "
                        "0.750 (majority) | 0.850 |")
    assert lines[3] == ("| t (accuracy) | 0.1 | 0.700 ± 0.020 | — | 0.600 ± 0.100 (AUC 0.50 ± 0.10) | "
                        "0.750 (majority) | 0.850 |")


def test_bad_arguments_and_a_missing_environment_exit_2(monkeypatch, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        peers.main(["--releases", "0"])
    assert exit_.value.code == 2 and "--releases must be >= 1" in capsys.readouterr().err
    monkeypatch.setattr(peers, "VENV", tmp_path / "absent")
    with pytest.raises(SystemExit) as exit_:
        peers.main(["--tables", "wage-sim"])
    assert exit_.value.code == 2 and "--setup" in capsys.readouterr().err


def test_a_peer_that_fails_is_reported_and_the_run_goes_on(monkeypatch, tmp_path, capsys):
    """A worker that cannot run (here: a stand-in interpreter that fails as a missing package would)
    is named with its error on stderr; the table is still printed, without that peer's rows."""
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'snsynth'\" >&2\nexit 1\n")
    python.chmod(0o755)
    monkeypatch.setattr(peers, "VENV", tmp_path / "venv")
    peers.main(["--tables", "wage-sim", "--epsilons", "1", "--releases", "1"])
    out, err = capsys.readouterr()
    assert "wage-sim: mst not measured: the peers' worker failed (exit 1" in err
    assert out.startswith("| table | metric |") and "MST" not in out
