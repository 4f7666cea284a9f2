"""Releases in the original schema and units (dpcore.decode): columns, categories, bounds, types,
the inverse maps, and that post-processing changes neither the guarantee nor reads private rows."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from dpcore.data import load_dataset
from dpcore.decode import (
    NOT_DECODABLE,
    NotDecodableError,
    PublicSchema,
    can_decode,
    decode_features,
    in_released_space,
    one_hot_groups,
    to_original,
    with_output_space,
)
from dpcore.mechanisms import MECHANISMS, DPMix, LocalGaussian, PCAGauss
from dpcore.mechanisms._box import scale_to_box
from dpcore.mechanisms.dpmix import scale_to_unit

BOUNDS = {"age": (18, 90), "income": (0, 200_000), "hours": (0.5, 99.5)}
COLOURS = ["red", "green", "blue", "violet"]  # violet never occurs in the data: public list only


def _mixed(seed: int = 0, n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 91, n), "colour": rng.choice(COLOURS[:3], n),
                         "income": rng.integers(0, 200_001, n).astype(float),
                         "hours": rng.uniform(1, 99, n), "y": rng.choice(["no", "yes"], n)})


def _dataset(frame: pd.DataFrame | None = None):
    return load_dataset(_mixed() if frame is None else frame, label="y", task="classification",
                        classes=["no", "yes"], bounds=BOUNDS, categories={"colour": COLOURS})


def _check_original(frame: pd.DataFrame, n: int) -> None:
    assert list(frame.columns) == ["age", "colour", "income", "hours", "y"]
    assert len(frame) == n
    assert set(frame["colour"]) <= set(COLOURS)
    assert set(frame["y"]) <= {"no", "yes"}
    for col, (lo, hi) in BOUNDS.items():
        assert frame[col].between(lo, hi).all(), col


def test_local_gaussian_release_in_original_schema_keeps_the_guarantee():
    ds = _dataset()
    rel = LocalGaussian(epsilon=1.0, delta=1e-6).release(ds)
    schema = PublicSchema.from_dataset(ds, integer_columns=["age"])
    out = to_original(rel, schema)
    # the file as a user opens it
    frame = pd.read_csv(io.BytesIO(out.to_csv_bytes()))
    _check_original(frame, ds.n_samples)
    assert frame["age"].dtype.kind == "i" and frame["income"].dtype.kind == "f"
    card, before = out.card(), rel.card()
    assert card["guarantee"] == before["guarantee"] and card["noise"] == before["noise"]
    assert card["output_space"] == "original" and card["columns"] == list(frame.columns)
    assert card["details"]["output"]["clipped"] is True
    assert "guarantee is unchanged" in card["output_note"]
    assert rel.to_frame().shape[1] == 8  # the mechanism's own output is untouched
    assert before["output_space"] == "released"


def test_every_decodable_mechanism_returns_the_original_columns():
    ds = _dataset()
    schema = PublicSchema.from_dataset(ds, integer_columns=["age"])
    for name, cls in MECHANISMS.items():
        kwargs = {"public_data": ds} if name == "pca-identity" else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rel = cls(epsilon=4.0, random_state=1, **kwargs).release(ds)
        out = with_output_space(rel, schema, None)
        if name in NOT_DECODABLE:
            assert out.output_space == "released" and NOT_DECODABLE[name] in out.output_note
            with pytest.raises(NotDecodableError):
                to_original(rel, schema)
            continue
        assert can_decode(rel), name
        assert out.output_space == "original", name
        _check_original(pd.read_csv(io.BytesIO(out.to_csv_bytes())), rel.data.shape[0])


@pytest.mark.parametrize("order", [["y", "age", "colour", "income", "hours"],
                                   ["age", "colour", "y", "income", "hours"]])
def test_the_label_keeps_its_place_among_the_columns(order, tmp_path):
    """The file of a table whose label is not its last column had the label moved to the end."""
    ds = _dataset(_mixed()[order])
    assert ds.label_position == order.index("y")
    schema = PublicSchema.from_dataset(ds)
    for mech in (LocalGaussian(epsilon=1.0, random_state=0), PCAGauss(epsilon=1.0, random_state=0)):
        out = to_original(mech.release(ds), schema)
        frame = pd.read_csv(io.BytesIO(out.to_csv_bytes()))
        assert list(frame.columns) == order and out.card()["columns"] == order
        assert set(frame["y"]) <= {"no", "yes"} and set(frame["colour"]) <= set(COLOURS)
    src, out_csv = tmp_path / "mixed.csv", tmp_path / "out.csv"  # the CLI writes the same file
    _mixed()[order].to_csv(src, index=False)
    (tmp_path / "b.json").write_text(json.dumps(BOUNDS))
    (tmp_path / "c.json").write_text(json.dumps({"colour": COLOURS}))
    from dpcore.cli import main

    assert main(["release", "local-gaussian", str(src), "-o", str(out_csv), "--label", "y", "--task",
                 "classification", "--classes", "no,yes", "--bounds", str(tmp_path / "b.json"),
                 "--categories", str(tmp_path / "c.json")]) == 0
    assert list(pd.read_csv(out_csv).columns) == order


def test_decoding_reads_only_public_facts():
    """Two tables with different private rows but the same public schema decode a release alike."""
    ds1, ds2 = _dataset(_mixed(0)), _dataset(_mixed(7, n=50))
    s1, s2 = PublicSchema.from_dataset(ds1), PublicSchema.from_dataset(ds2)
    rel = LocalGaussian(epsilon=1.0, random_state=3).release(ds1)
    pd.testing.assert_frame_equal(to_original(rel, s1).to_frame(), to_original(rel, s2).to_frame())
    assert not any(isinstance(v, np.ndarray) and v.shape[0] == ds1.n_samples
                   for v in s1.__dict__.values())


def test_no_clip_leaves_noise_outside_the_bounds():
    ds = _dataset()
    rel = LocalGaussian(epsilon=1.0, random_state=0).release(ds)
    schema = PublicSchema.from_dataset(ds)
    loose = to_original(rel, schema, clip=False).to_frame()
    assert not loose["age"].between(*BOUNDS["age"]).all()
    assert to_original(rel, schema, clip=True).to_frame()["age"].between(*BOUNDS["age"]).all()


def test_argmax_decoding_and_integer_rounding():
    ds = _dataset()
    schema = PublicSchema.from_dataset(ds, integer_columns=["age"])
    X = np.array([[30.4, -5.0, 0.2, 0.1, 0.3, 1e6, 0.2],
                  [95.0, 0.1, 0.0, 0.0, -1.0, -3.0, 2.0]])  # age, colour=* (4), income, hours
    frame = decode_features(X, schema)
    assert frame["colour"].tolist() == ["violet", "red"]  # a public category absent from the data
    assert frame["age"].tolist() == [30, 90] and frame["age"].dtype == np.int64
    assert frame["income"].tolist() == [200_000.0, 0.0] and frame["hours"].tolist() == [0.5, 2.0]
    # an integer column whose bounds are not whole numbers stays within the integers inside them
    s = PublicSchema.from_dataset(ds, integer_columns=["hours"])
    assert decode_features(np.array([[20, 1, 0, 0, 0, 0, 200.0]]), s)["hours"].tolist() == [99]


def test_integer_columns_must_be_numeric_columns():
    with pytest.raises(ValueError, match="colour"):
        PublicSchema.from_dataset(_dataset(), integer_columns=["colour"])


def test_one_hot_groups_from_public_names():
    names = ["age", "workclass=Private", "workclass=State-gov", "odd=1", "x=a", "x=b"]
    bounds = np.array([[17, 90], [0, 1], [0, 1], [0, 1], [0, 1], [0, 5]], dtype=float)
    assert one_hot_groups(names, bounds) == {"workclass": ("Private", "State-gov")}


def test_pca_gauss_inverse_is_the_rank_p_reconstruction():
    ds = load_dataset("diabetes")
    rel = PCAGauss(epsilon=2.0, n_components=3, random_state=0).release(ds)
    W = rel.transform_arrays["W"]
    real = ds.X[:40]
    z = rel.transform(real)  # real rows in the release's space
    probe = type(rel)(**{**rel.__dict__, "data": z, "labels": None, "label_columns": []})
    got = to_original(probe, PublicSchema.from_dataset(ds), clip=False, marginals=False)
    got = got.to_frame().to_numpy(float)
    s = scale_to_box(real, ds.bounds)
    lo, hi = ds.bounds[:, 0], ds.bounds[:, 1]
    # the rank-p reconstruction, centred in the left-out directions on the DP mean's part there
    want = lo + (s @ W @ W.T + rel.transform_arrays["offset"] + 1) / 2 * (hi - lo)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-8)


def test_dpmix_inverse_undoes_the_unit_scaling():
    ds = load_dataset("diabetes")
    rel = DPMix(epsilon=4.0, random_state=0).release(ds)
    probe = type(rel)(**{**rel.__dict__, "data": scale_to_unit(ds.X[: rel.data.shape[0]], ds.bounds)})
    got = to_original(probe, PublicSchema.from_dataset(ds), clip=False).to_frame()
    np.testing.assert_allclose(got[ds.feature_names].to_numpy(float), ds.X[: rel.data.shape[0]],
                               rtol=1e-12, atol=1e-9)
    lo, hi = ds.label_bounds  # the regression label is back in its units too (0..400, mean ~152)
    assert lo < got["target"].mean() < hi and got["target"].max() > 1
    clipped = to_original(probe, PublicSchema.from_dataset(ds)).to_frame()
    assert clipped["target"].between(lo, hi).all()


def test_released_space_says_what_it_is():
    ds = _dataset()
    rel = DPMix(epsilon=4.0, random_state=0).release(ds)
    released = in_released_space(rel)
    cols = list(released.to_frame().columns)
    assert cols[0] == "age [0-1 scaled]" and "[0, 1]" in released.output_note
    assert released.card()["columns"] == cols and released.card()["output_space"] == "released"


@pytest.mark.slow
@pytest.mark.parametrize(("space", "n_cols", "ok"), [(None, 5, True), ("released", 8, True),
                                                      ("original", 5, True)])
def test_cli_output_space(tmp_path, space, n_cols, ok):
    src = tmp_path / "mixed.csv"
    _mixed().to_csv(src, index=False)
    (tmp_path / "b.json").write_text(json.dumps(BOUNDS))
    (tmp_path / "c.json").write_text(json.dumps({"colour": COLOURS}))
    out = tmp_path / "out.csv"
    cmd = [sys.executable, "-m", "dpcore.cli", "release", "local-gaussian", str(src), "-o", str(out),
           "--label", "y", "--task", "classification", "--classes", "no,yes", "--bounds",
           str(tmp_path / "b.json"), "--categories", str(tmp_path / "c.json"),
           "--integer-columns", "age"] + (["--output-space", space] if space else [])
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    frame = pd.read_csv(out)
    assert frame.shape == (300, n_cols)
    card = json.loads((tmp_path / "out.card.json").read_text())
    if n_cols == 5:
        _check_original(frame, 300)
        assert frame["age"].dtype.kind == "i"
    assert card["guarantee"]["epsilon"] == 1.0


@pytest.mark.slow
def test_cli_refuses_original_space_it_cannot_reach(tmp_path):
    out = tmp_path / "r.csv"
    res = subprocess.run([sys.executable, "-m", "dpcore.cli", "release", "ron-gauss", "digits", "-o",
                          str(out), "--output-space", "original"], capture_output=True, text=True,
                         check=False)
    assert res.returncode == 2 and "row lengths" in res.stderr and not out.exists()
    assert math.isfinite(1.0)


def test_pca_gauss_inverse_undoes_the_one_hot_map_and_the_row_norm_bound():
    # one-hot groups map onto [0, 1] (centre lo, factor 1/width) and rows are divided by
    # B = sqrt(#numerics + #groups), not sqrt(d): the decoder must use the published map
    from dpcore.mechanisms._box import BoxMap
    from dpcore.preprocessing import prepare_input

    ds = load_dataset("adult").subset(np.arange(3000))
    rel = PCAGauss(epsilon=2.0, delta=1e-6, marginals="off", random_state=0).release(ds)
    arrays = rel.transform_arrays
    assert float(arrays["norm_bound"]) == pytest.approx(np.sqrt(14))
    real = ds.X[:50]
    probe = type(rel)(**{**rel.__dict__, "data": rel.transform(real), "labels": None, "label_columns": []})
    got = to_original(probe, PublicSchema.from_dataset(ds), clip=False, marginals=False)
    bmap = BoxMap.of(prepare_input(ds))
    W = arrays["W"]
    z = bmap.apply(real) @ W @ W.T
    active = bmap.factor > 0
    want = np.tile(ds.bounds[:, 0], (50, 1))
    want[:, active] = bmap.centre[active] + z[:, active] / bmap.factor[active]
    numeric = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
    idx = [ds.feature_names.index(c) for c in numeric]
    np.testing.assert_allclose(got.to_frame()[numeric].to_numpy(float), want[:, idx], rtol=1e-9, atol=1e-6)
