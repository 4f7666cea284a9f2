"""Tests of the release path shared by every mechanism: preprocessing (bounds, clipping), the
Mechanism base class (arguments, validation) and the Release object / card (SPEC sections 8 and 9).

LocalGaussian is used as the concrete mechanism; nothing here depends on its noise formula.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import warnings
from datetime import datetime

import numpy as np
import pandas as pd
import pytest

import dpcore
from dpcore.data import load_dataset
from dpcore.exceptions import NotPrivateError, PrivacyLeakWarning
from dpcore.mechanisms import LocalGaussian

SEED = 987654321
CARD_KEYS = {"mechanism", "parameters", "guarantee", "noise", "calibration", "bounds_source", "n_rows",
             "dpcore_version", "created_utc", "sha256"}


def _data(n: int = 40, d: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-0.5, 1.5, size=(n, d))  # partly outside [0, 1]


def _strict_json(text: str):
    def refuse(token: str):
        raise ValueError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=refuse)


def _private_release(**kw):
    return LocalGaussian(epsilon=1.0, delta=1e-5, bounds=(0, 1), **kw).release(_data())


# ------------------------------------------------------------------------- clipping
def test_mechanism_sees_data_clipped_to_public_bounds():
    X = _data()
    bounds = np.array([[0.0, 1.0], [0.2, 0.8], [-1.0, 2.0]])
    rel, rel_diag = LocalGaussian(epsilon=math.inf, bounds=bounds, random_state=1).explore(X)
    expected = np.clip(X, bounds[:, 0], bounds[:, 1])
    np.testing.assert_array_equal(rel.data, expected)
    assert rel_diag["n_clipped_entries"] == int(np.count_nonzero(expected != X))
    assert rel_diag["n_clipped_entries"] > 0


def test_dataset_bounds_are_used_for_clipping():
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"a": rng.uniform(-2, 2, 30), "b": rng.uniform(-2, 2, 30),
                          "c": rng.uniform(-2, 2, 30), "y": np.arange(30) % 2})
    ds = load_dataset(frame, label="y", task="classification", classes=[0, 1],
                      bounds={"a": (-1, 1), "b": (0, 0.5), "c": (-3, 3)})
    rel = LocalGaussian(epsilon=math.inf, random_state=0).release(ds)
    np.testing.assert_array_equal(rel.data, np.clip(ds.X, [-1, 0, -3], [1, 0.5, 3]))
    np.testing.assert_array_equal(rel.labels, ds.y)
    assert rel.bounds_source == "user"


def test_regression_labels_are_clipped_to_label_bounds():
    X = _data()
    y = np.linspace(-3, 3, X.shape[0])
    rel = LocalGaussian(epsilon=math.inf, bounds=(0, 1), label_bounds=(-1, 2), task="regression",
                        random_state=0).release(X, y)
    np.testing.assert_array_equal(rel.labels, np.clip(y, -1, 2))


@pytest.mark.parametrize("via", ["mechanism", "dataset"])
def test_two_feature_bounds_are_not_transposed(via):
    X = _data(d=2) * 4
    bounds = [[0.0, 5.0], [1.0, 6.0]]
    if via == "mechanism":
        rel = LocalGaussian(epsilon=math.inf, bounds=bounds, random_state=0).release(X)
    else:
        ds = load_dataset(pd.DataFrame(X, columns=["a", "b"]), bounds={"a": (0, 5), "b": (1, 6)})
        np.testing.assert_array_equal(ds.bounds, bounds)  # load_dataset itself is right
        rel = LocalGaussian(epsilon=math.inf, random_state=0).release(ds)
    np.testing.assert_array_equal(rel.data, np.clip(X, [0.0, 1.0], [5.0, 6.0]))


def test_missing_bounds_warn_and_void_the_guarantee():
    with pytest.warns(PrivacyLeakWarning, match="does NOT hold"):
        rel = LocalGaussian(epsilon=1.0).release(_data())
    assert rel.bounds_source == "data"
    assert rel.guarantee.holds is False


# ------------------------------------------------------------------------- arguments
def test_unknown_constructor_argument_is_a_type_error():
    with pytest.raises(TypeError, match="epsilom"):
        LocalGaussian(epsilom=1.0)
    with pytest.raises(TypeError, match="n_components"):
        LocalGaussian(n_components=2)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"epsilon": 0}, "epsilon"), ({"epsilon": -1}, "epsilon"), ({"epsilon": "abc"}, "epsilon"),
     ({"epsilon": math.nan}, "epsilon"), ({"delta": 0}, "delta"), ({"delta": 1.0}, "delta"),
     ({"delta": 1.5}, "delta"), ({"calibration": "exact"}, "calibration")],
)
def test_bad_parameters_raise_value_error_naming_them(kwargs, name):
    mech = LocalGaussian(bounds=(0, 1), **kwargs)  # __init__ only stores
    with pytest.raises(ValueError, match=name):
        mech.release(_data())


def test_get_and_set_params():
    mech = LocalGaussian(epsilon=2.0, bounds=(0, 1))
    params = mech.get_params()
    assert params["epsilon"] == 2.0 and params["delta"] == LocalGaussian.param("delta").default
    assert params["bounds"] == (0, 1) and params["random_state"] is None
    mech.set_params(epsilon=3.0)
    assert mech.epsilon == 3.0
    with pytest.raises(ValueError, match="sigma"):
        mech.set_params(sigma=1.0)


@pytest.mark.parametrize("n_samples", [0, -3, 2.5, True, math.inf, math.nan, 10**9])
def test_n_samples_validation(n_samples):
    with pytest.raises(ValueError, match="n_samples"):
        _private_release_with_n(n_samples)


def _private_release_with_n(n_samples):
    return LocalGaussian(epsilon=1.0, bounds=(0, 1)).release(_data(), n_samples=n_samples)


@pytest.mark.parametrize("n_samples", ["many", [5]])
def test_non_numeric_n_samples_error_names_it(n_samples):
    with pytest.raises(ValueError, match="n_samples"):
        _private_release_with_n(n_samples)


def test_bad_input_shapes_and_values():
    mech = LocalGaussian(epsilon=1.0, bounds=(0, 1))
    with pytest.raises(ValueError, match="shape"):
        mech.release(np.zeros(5))
    with pytest.raises(ValueError, match="at least 2 rows"):
        mech.release(np.zeros((1, 3)))
    X = _data()
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN/inf"):
        mech.release(X)
    with pytest.raises(ValueError, match="labels for"):
        LocalGaussian(epsilon=1.0, bounds=(0, 1), task="classification").release(_data(), np.arange(3))


# ------------------------------------------------------------------------- the card
def test_card_has_every_spec_key_and_hashes_the_written_csv(tmp_path):
    X = _data()
    rel = LocalGaussian(epsilon=0.7, delta=1e-6, bounds=(0, 1)).release(X)
    written = rel.save(tmp_path / "out.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.card.json", "out.csv"]
    assert written["csv"] == tmp_path / "out.csv" and written["card"] == tmp_path / "out.card.json"
    card = _strict_json((tmp_path / "out.card.json").read_text())
    assert CARD_KEYS <= set(card)
    assert card["mechanism"] == "local-gaussian"
    assert card["parameters"]["epsilon"] == 0.7 and card["parameters"]["delta"] == 1e-6
    g = card["guarantee"]
    assert {"epsilon", "delta", "neighbouring", "kind", "beta"} <= set(g)
    assert (g["epsilon"], g["delta"], g["neighbouring"], g["kind"]) == (0.7, 1e-6, "replace-one", "approx")
    assert g["holds"] is True
    assert isinstance(card["noise"], list) and card["noise"]
    for rec in card["noise"]:
        assert {"statistic", "sensitivity", "scale", "distribution"} <= set(rec)
        assert rec["scale"] > 0 and rec["sensitivity"] > 0
    assert card["calibration"] == "analytic"
    assert card["bounds_source"] == "user"
    assert card["n_rows"] == X.shape[0]
    assert card["dpcore_version"] == dpcore.__version__
    created = datetime.fromisoformat(card["created_utc"])
    assert created.utcoffset() is not None and created.utcoffset().total_seconds() == 0
    csv_bytes = (tmp_path / "out.csv").read_bytes()
    assert card["sha256"] == hashlib.sha256(csv_bytes).hexdigest()
    # the CSV is the released table
    back = pd.read_csv(io.BytesIO(csv_bytes))
    assert list(back.columns) == rel.columns
    np.testing.assert_allclose(back.to_numpy(), rel.data, rtol=1e-9)


def test_card_and_csv_never_contain_the_seed_or_clip_counts():
    rel = LocalGaussian(epsilon=1.0, bounds=(0, 1), random_state=SEED).release(_data())
    assert rel.seeded
    text = rel.card_json() + rel.to_csv_bytes().decode()
    assert str(SEED) not in text
    assert "random_state" not in text
    assert "n_clipped" not in text  # exploration diagnostics stay off the card
    assert "random_state" not in rel.parameters


@pytest.mark.parametrize(
    "make",
    [lambda: LocalGaussian(epsilon=math.inf, bounds=(0, 1)).release(_data()),
     lambda: LocalGaussian(epsilon=1.0, bounds=(0, 1), random_state=SEED).release(_data()),
     lambda: LocalGaussian(epsilon=1.0, bounds=(0, 1),
                           random_state=np.random.default_rng(SEED)).release(_data())],
    ids=["not-private", "seeded-int", "seeded-generator"],
)
def test_save_refuses_not_private_and_seeded_releases_and_writes_nothing(tmp_path, make):
    rel = make()
    assert not rel.downloadable
    with pytest.raises(NotPrivateError):
        rel.save(tmp_path / "out.csv")
    with pytest.raises(NotPrivateError):
        rel.check_downloadable()
    assert list(tmp_path.iterdir()) == []


def test_not_private_card_is_marked_and_strict_json():
    rel = LocalGaussian(epsilon=math.inf, bounds=(0, 1)).release(_data())
    assert not rel.is_private
    card = _strict_json(rel.card_json())
    assert card["private"] is False
    assert card["guarantee"]["epsilon"] == "inf"
    assert "NOT PRIVATE" in card["guarantee_text"]


def test_two_unseeded_releases_differ():
    a, b = _private_release(), _private_release()
    assert a.downloadable and b.downloadable
    assert not np.allclose(a.data, b.data)
    assert a.to_csv_bytes() != b.to_csv_bytes()


def test_same_seed_same_preview():
    a = _private_release(random_state=5)
    b = _private_release(random_state=5)
    np.testing.assert_array_equal(a.data, b.data)


def test_data_bounds_are_flagged_on_the_card():
    with pytest.warns(PrivacyLeakWarning):
        rel = LocalGaussian(epsilon=1.0).release(_data())
    card = _strict_json(rel.card_json())
    assert card["bounds_source"] == "data"
    assert card["guarantee"]["holds"] is False
    assert any("bounds" in w and "NOT hold" in w for w in card["warnings"])
    assert "does NOT hold" in card["guarantee_text"]


def test_data_derived_label_bounds_are_not_laundered_by_mechanism_bounds():
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"a": rng.uniform(0, 1, 60), "t": rng.integers(0, 1000, 60)})
    with pytest.warns(PrivacyLeakWarning):
        ds = load_dataset(frame, label="t", task="regression", bounds={"a": (0, 1)})
    assert ds.bounds_source == "data"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        rel = LocalGaussian(epsilon=1.0, bounds=(0, 1)).release(ds)
    assert rel.bounds_source == "data"
    assert rel.guarantee.holds is False


def test_save_with_dots_in_the_name(tmp_path):
    rel = _private_release()
    written = rel.save(tmp_path / "release.2024-01.v1.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["release.2024-01.v1.card.json",
                                                          "release.2024-01.v1.csv"]
    assert set(written) == {"csv", "card"}


def test_release_is_features_space_and_transform_is_identity():
    rel = _private_release()
    assert rel.space == "features"
    X = _data(seed=9)
    np.testing.assert_array_equal(rel.transform(X), X)
    assert rel.n_rows == 40 and rel.data.shape == (40, 3)


def test_save_is_all_or_nothing_when_a_write_fails(tmp_path, monkeypatch):
    """A failure while writing (disk full) or renaming leaves no file, no temporary, no half set."""
    import dpcore.staging as release_mod  # where Release.save writes its files

    rel = _private_release()
    real_write = release_mod._write_temp
    calls = []

    def failing_second_write(target, payload):
        calls.append(target.name)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_write(target, payload)

    monkeypatch.setattr(release_mod, "_write_temp", failing_second_write)
    with pytest.raises(OSError, match="No space"):
        rel.save(tmp_path / "out.csv")
    assert calls == ["out.csv", "out.card.json"]
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(release_mod, "_write_temp", real_write)

    # the card's target is a folder: the CSV was already renamed into place and is removed again
    (tmp_path / "out.card.json").mkdir()
    with pytest.raises(OSError):
        rel.save(tmp_path / "out.csv")
    assert [p.name for p in tmp_path.iterdir()] == ["out.card.json"]
    (tmp_path / "out.card.json").rmdir()

    written = rel.save(tmp_path / "out.csv")  # and a normal save still works, no temporaries left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.card.json", "out.csv"]
    assert written["csv"].read_bytes() == rel.to_csv_bytes()
    reference = tmp_path / "reference"
    reference.write_bytes(b"")  # a file created the usual way (umask)
    assert written["csv"].stat().st_mode & 0o777 == reference.stat().st_mode & 0o777
