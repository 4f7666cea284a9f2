"""The custodian's fidelity report (dpcore.evaluation.fidelity) and the label-rate correction of
row-wise releases (dpcore.decode.corrected_labels).

The report is computed on the private rows: it must be labelled NOT differentially private and none
of its figures may reach a release's CSV, card or transform, nor the CLI's files.
"""

from __future__ import annotations

import io
import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from dpcore.cli import main
from dpcore.data import load_dataset
from dpcore.decode import PublicSchema, corrected_labels, with_output_space
from dpcore.evaluation.fidelity import (
    encode_file,
    encoded_real,
    fidelity_report,
    file_model_score,
    private_frame,
)
from dpcore.evaluation.metrics import NOT_DP_NOTICE
from dpcore.marginals import rr_class_rates
from dpcore.mechanisms import PCAGauss, get_mechanism
from tests.test_app import goto, new_app
from tests.test_app_ux import download, served  # noqa: F401  (served: a fixture)


@pytest.fixture(scope="module")
def adult():
    return load_dataset("adult").subset(np.arange(4000))


def test_a_file_encodes_exactly_as_the_real_rows(adult):
    schema = PublicSchema.from_dataset(adult)
    frame = private_frame(adult, schema)
    X, y = encode_file(frame, schema)
    # real rows: one-hot columns 0/1, numbers to [0, 1] by the public bounds, as encoded_real does
    # (a row whose group is all zero, a missing '?', is read back as the group's first category)
    known = np.all([adult.X[:, [adult.feature_names.index(f"{c}={v}") for v in vals]].sum(axis=1) == 1
                    for c, vals in schema.categories.items()], axis=0)
    np.testing.assert_allclose(X[known], encoded_real(adult.X, adult.bounds)[known], atol=1e-12)
    assert np.array_equal(y, adult.y)
    with pytest.raises(ValueError, match="no column"):
        encode_file(frame.drop(columns=["age"]), schema)


def test_the_report_of_the_data_itself_has_no_distance(adult):
    schema = PublicSchema.from_dataset(adult)
    frame = private_frame(adult, schema)
    report = fidelity_report(frame, frame, schema)
    assert report.notice == NOT_DP_NOTICE and "NOT differentially private" in report.notice
    assert np.allclose(report.columns["distance"], 0.0)
    pd.testing.assert_frame_equal(report.correlation_private, report.correlation_file)
    m = report.model
    # the same rows: the model trained on the "file" scores as the private one, above the majority rate
    assert m["metric"] == "accuracy" and m["file"] > m["baseline"] > 0.5
    assert abs(m["file"] - m["private"]) < 0.02 and "cross-validation" in m["scored_on"]


def test_the_report_sees_a_bad_file(adult):
    schema = PublicSchema.from_dataset(adult)
    frame = private_frame(adult, schema)
    bad = frame.copy()
    bad["age"] = 90  # every age at the top bound
    bad["sex"] = "Female"
    bad["salary"] = np.random.default_rng(0).permutation(bad["salary"].to_numpy())  # no signal
    report = fidelity_report(bad, frame, schema)
    rows = report.columns.set_index("column")
    assert rows.loc["age", "distance"] == pytest.approx(90 - frame["age"].mean(), rel=1e-6)
    assert rows.loc["sex", "distance"] == pytest.approx((frame["sex"] == "Male").mean())
    assert rows.loc["workclass", "distance"] == 0.0
    assert report.model["file"] < report.model["private"] - 0.05
    assert "age" in report.summary() or "sex" in report.summary()


def test_no_figure_of_the_report_reaches_the_release_files(adult, tmp_path):
    rel = PCAGauss(epsilon=1.0).release(adult)
    schema = PublicSchema.from_dataset(adult)
    view = with_output_space(rel, schema, None)
    paths = view.save(tmp_path / "out.csv")
    before = {k: p.read_bytes() for k, p in paths.items()}
    report = fidelity_report(pd.read_csv(paths["csv"]), private_frame(adult, schema), schema)
    # the report is a separate object: saving the release again writes the same card and CSV
    again = view.save(tmp_path / "again.csv")
    assert again["csv"].read_bytes() == before["csv"]
    card = json.loads(before["card"])
    card_again = json.loads(again["card"].read_text())
    assert {k: v for k, v in card.items() if k != "created_utc"} == \
        {k: v for k, v in card_again.items() if k != "created_utc"}
    blob = before["card"].decode() + before["csv"].decode()
    assert "fidelity" not in blob.lower() and NOT_DP_NOTICE not in blob
    # no figure of the report, at full precision, is in the card or the CSV
    for figure in (report.model["file"], report.model["private"], report.model["baseline"],
                   *report.columns["distance"]):
        text = repr(float(figure))
        if np.isfinite(figure) and len(text) >= 12:  # short decimals occur in any table of numbers
            assert text not in blob, figure
    npz = np.load(paths["transform"])
    assert set(npz.files) <= {"W", "bounds", "centre", "factor", "onehot_group", "norm_bound", "offset"}


@pytest.mark.slow
def test_app_report_is_headed_not_dp_and_files_are_unchanged(served):  # noqa: F811

    at = new_app()
    goto(at, "release")
    next(b for b in at.button if b.label == "Draw release").click().run()
    assert not at.exception
    before = at.session_state.pending_release["csv"], at.session_state.pending_release["card"]
    next(b for b in at.button if b.label == "Compute the fidelity report").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("NOT differentially private" in e.value for e in at.error)
    labels = [m.label for m in at.metric]
    assert any("trained on the file" in x for x in labels) and "majority rate" in labels
    after = at.session_state.pending_release["csv"], at.session_state.pending_release["card"]
    assert after == before  # the file and the card do not change
    html = download(at, served, "Download report (HTML)")[0].decode()
    assert "Fidelity of the file to your data (NOT differentially private)" in html
    card = json.loads(before[1])
    assert "fidelity" not in json.dumps(card).lower()


# ------------------------------------------------------------------------------------ label rates
def test_randomized_response_rates_are_inverted_without_bias():
    rng = np.random.default_rng(0)
    k, flip, n = 3, 0.4, 200_000
    truth = np.array([0.05, 0.25, 0.70])
    y = rng.choice(k, n, p=truth)
    flipped = rng.random(n) < flip
    other = (y + rng.integers(1, k, n)) % k
    reported = np.where(flipped, other, y)
    observed = np.bincount(reported, minlength=k) / n
    assert observed[0] > 0.15  # pulled towards 1/3
    assert np.allclose(rr_class_rates(np.bincount(reported, minlength=k), flip), truth, atol=0.01)
    assert np.allclose(rr_class_rates(np.array([10, 10]), 0.5), [0.5, 0.5])  # nothing to invert


@pytest.mark.parametrize("name", ["local-gaussian", "dppro", "dpmix", "jl-laplace"])
def test_row_wise_files_get_their_class_rates_from_the_release(name):
    # a rare class (about 10%): uncorrected the files reported 30-45%
    ds = load_dataset("adult").subset(np.arange(6000))
    rel = get_mechanism(name)(epsilon=2.0).release(ds)
    schema = PublicSchema.from_dataset(ds)
    labels, how = corrected_labels(rel, schema)
    assert labels is not None and how
    frame = with_output_space(rel, schema, None).to_frame()
    rate = float(np.mean(frame.iloc[:, -1].to_numpy().astype(int) == 1))
    assert rate == pytest.approx(np.mean(ds.y == 1), abs=0.08), rate
    assert "class rates follow" in with_output_space(rel, schema, None).output_note


def test_cli_prints_the_release_warnings_on_stderr(tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["release", "local-gaussian", "breast-cancer", "-o", str(tmp_path / "o.csv")])
    err = capsys.readouterr().err
    assert code == 0
    assert re.search(r"dpcore: warning: the noise is larger than the data", err)
    assert "randomized response" in err


def test_file_accuracy_on_the_recommended_default_beats_majority(adult):
    # the untouched default (Gaussian noise, marginals) on 4,000 Adult rows, scored as a user would
    test = load_dataset("adult").subset(np.arange(20_000, 26_000))
    schema = PublicSchema.from_dataset(adult)
    X_test = encoded_real(test.X, adult.bounds)
    majority = max(np.mean(test.y), 1 - np.mean(test.y))
    rel = PCAGauss(epsilon=1.0).release(adult)
    raw = with_output_space(rel, schema, None).to_csv_bytes()
    X, y = encode_file(pd.read_csv(io.BytesIO(raw)), schema)
    assert file_model_score(X, y, X_test, test.y, "classification") > majority + 0.02
