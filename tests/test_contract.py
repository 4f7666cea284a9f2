"""The contract every registered mechanism keeps (in the spirit of scikit-learn's
``parametrize_with_checks``): construction only stores, parameters round-trip, seeds reproduce, OS
entropy differs, the card has the SPEC section 9 keys, epsilon = infinity is refused for saving,
``n_samples`` is honoured or refused by name, the public transform has the release's shape and loads
back from the saved files, and exploration facts never sit on the release.

A new mechanism is checked by registering it: every test here runs over ``MECHANISMS``.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from dpcore.exceptions import NotPrivateError
from dpcore.mechanisms import MECHANISMS, get_mechanism
from dpcore.release import Exploration, Release
from dpcore.transform import load_transform

NAMES = sorted(MECHANISMS)
#: a public reference table for pca-identity: 16 pixels in [0, 16] (not rows of the private table)
PUBLIC_ROWS = np.random.default_rng(0).integers(0, 17, size=(60, 16)).astype(float)
#: SPEC section 9: keys every card has at least
CARD_KEYS = {"mechanism", "parameters", "guarantee", "noise", "calibration", "bounds_source", "n_rows",
             "dpcore_version", "created_utc", "sha256"}
GUARANTEE_KEYS = {"epsilon", "delta", "neighbouring", "kind", "beta"}
NOISE_KEYS = {"statistic", "sensitivity", "scale", "distribution"}
#: mechanisms releasing one row per input row (``n_samples`` other than n is refused)
ONE_ROW_PER_INPUT = {"jl-laplace", "dppro", "identity-laplace", "pca-identity", "rp-gaussian",
                     "local-gaussian"}


def _small(name: str) -> dict:
    """Cheap settings for a 160 x 16 table (defaults otherwise)."""
    cls = get_mechanism(name)
    names = {p.name for p in cls.params}
    kw: dict = {"epsilon": 2.0}
    if "n_components" in names:
        kw["n_components"] = 3
    if "n_mixtures" in names:
        kw["n_mixtures"] = 40
    if name == "pca-identity":  # its basis comes from a separate PUBLIC table
        kw["public_data"] = PUBLIC_ROWS
    return kw


def _data(name: str, narrow_digits):
    cls = get_mechanism(name)
    if "classification" in cls.tasks:
        return narrow_digits
    return dataclasses.replace(narrow_digits, y=None, task="unsupervised", classes=None,
                               label_name=None)


def _release(name: str, data, random_state=0, **extra) -> Release:
    return get_mechanism(name)(**{**_small(name), **extra}, random_state=random_state).release(data)


@pytest.mark.parametrize("name", NAMES)
def test_init_only_stores_and_params_round_trip(name):
    cls = get_mechanism(name)
    given = _small(name)
    mech = cls(**given, random_state=7)
    params = mech.get_params()
    for key, value in given.items():
        assert params[key] is value  # stored as given, not validated or converted in __init__
    assert params["random_state"] == 7
    assert cls(**params).get_params() == params
    assert mech.set_params(epsilon=3.0) is mech and mech.get_params()["epsilon"] == 3.0
    with pytest.raises(ValueError, match="no parameter"):
        mech.set_params(no_such_parameter=1)
    with pytest.raises(TypeError, match="unexpected"):
        cls(no_such_parameter=1)
    # invalid values are refused by name when the release is drawn, not when constructed
    bad = cls(**{**given, "epsilon": -1.0})
    with pytest.raises(ValueError, match="epsilon"):
        bad.release(np.zeros((4, 3)))


@pytest.mark.parametrize("name", NAMES)
def test_seed_reproduces_and_os_entropy_differs(name, narrow_digits):
    data = _data(name, narrow_digits)
    a, b = _release(name, data, 3), _release(name, data, 3)
    np.testing.assert_array_equal(a.data, b.data)
    assert a.seeded and b.seeded and not a.downloadable
    c, d = _release(name, data, None), _release(name, data, None)
    assert not c.seeded and c.downloadable
    assert not np.array_equal(c.data, d.data)


@pytest.mark.parametrize("name", NAMES)
def test_card_has_the_interface_keys_and_no_seed(name, narrow_digits, tmp_path):
    rel = _release(name, _data(name, narrow_digits), None)
    files = rel.save(tmp_path / "out.csv")
    card = json.loads(files["card"].read_text())
    assert CARD_KEYS <= set(card), CARD_KEYS - set(card)
    assert GUARANTEE_KEYS <= set(card["guarantee"])
    assert card["noise"] and all(NOISE_KEYS <= set(rec) for rec in card["noise"])
    assert "random_state" not in card["parameters"]
    assert card["mechanism"] == name


@pytest.mark.parametrize("name", NAMES)
def test_infinite_epsilon_is_refused_for_saving(name, narrow_digits, tmp_path):
    rel = _release(name, _data(name, narrow_digits), None, epsilon=math.inf)
    assert not rel.is_private and not rel.downloadable
    with pytest.raises(NotPrivateError):
        rel.save(tmp_path / "out.csv")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("name", NAMES)
def test_n_samples_is_honoured_or_refused_by_name(name, narrow_digits):
    data = _data(name, narrow_digits)
    mech = get_mechanism(name)(**_small(name), random_state=0)
    if name in ONE_ROW_PER_INPUT:
        with pytest.raises(ValueError, match="n_samples"):
            mech.release(data, n_samples=data.n_samples + 5)
        assert mech.release(data, n_samples=data.n_samples).data.shape[0] == data.n_samples
    elif name == "dpmix":  # releases n_mixtures rows; n_samples has no meaning for it
        rel = mech.release(data)
        assert rel.data.shape[0] == _small(name)["n_mixtures"]
    else:
        assert mech.release(data, n_samples=37).data.shape[0] == 37


@pytest.mark.parametrize("name", NAMES)
def test_transform_has_the_release_shape_and_loads_back_from_the_files(name, narrow_digits, tmp_path):
    data = _data(name, narrow_digits)
    rel = _release(name, data, None)
    X = data.X[:25]
    cls = get_mechanism(name)
    if not cls.public_transform:
        with pytest.raises(ValueError, match="no public transform"):
            rel.transform(X)
        return
    Z = rel.transform(X)
    assert Z.shape == (25, len(rel.columns))
    files = rel.save(tmp_path / "out.csv")
    if "transform" not in files:  # a release in the input's feature space: rows map to themselves
        assert rel.space == "features"
        np.testing.assert_array_equal(Z, X)
        with pytest.raises(FileNotFoundError):
            load_transform(tmp_path / "out.csv")
        return
    for path in (files["csv"], files["card"], files["transform"]):
        loaded = load_transform(path)
        assert loaded.mechanism == name
        np.testing.assert_array_equal(loaded(X), Z)


@pytest.mark.parametrize("name", NAMES)
def test_exploration_facts_never_sit_on_the_release(name, narrow_digits, tmp_path):
    data = _data(name, narrow_digits)
    mech = get_mechanism(name)(**_small(name), random_state=5)
    explored = mech.explore(data)
    assert isinstance(explored, Exploration)
    rel, diagnostics = explored
    assert "n_clipped_entries" in diagnostics
    np.testing.assert_array_equal(rel.data, mech.release(data).data)  # the same draw
    assert not hasattr(rel, "diagnostics") and not hasattr(explored, "save")
    with pytest.raises(dataclasses.FrozenInstanceError):
        rel.seeded = False  # type: ignore[misc]
    fresh = get_mechanism(name)(**_small(name), random_state=None).explore(data)
    files = fresh.release.save(tmp_path / "out.csv")
    written = "".join(p.read_bytes().decode("latin-1") for p in files.values() if p.suffix != ".npz")
    exact = {k: v for k, v in fresh.diagnostics.items() if not k.endswith("_dp")}  # *_dp: DP values
    for key, value in exact.items():
        for number in _fractional_values(value):  # exact statistics of the private rows: never written
            assert repr(number) not in written and f"{number:.8f}" not in written, (key, number)
    if "transform" in files:
        with np.load(files["transform"], allow_pickle=False) as z:
            assert set(z.files) == set(fresh.release.transform_arrays)


def _fractional_values(value, limit: int = 50) -> list[float]:
    """Up to ``limit`` floats with at least 6 decimals held by a diagnostics value (arrays, dicts,
    lists): values too specific to appear in a saved file by coincidence."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in _fractional_values(v, limit)][:limit]
    if isinstance(value, list | tuple):
        return [x for v in value for x in _fractional_values(v, limit)][:limit]
    arr = np.asarray(value)
    if arr.dtype.kind != "f":
        return []
    flat = arr.ravel()[:limit]
    return [float(x) for x in flat if np.isfinite(x) and x != np.round(x, 5)]


@pytest.mark.parametrize("name", ["pca-gauss", "ron-gauss", "dpmix"])
def test_loaded_transform_keeps_the_public_one_hot_groups(name, tmp_path):
    # Adult's schema has one-hot groups; PCA-Gauss maps them sparsely (their row-norm bound): the
    # loaded transform must rebuild that map from the saved arrays alone.
    from dpcore.data import load_dataset

    ds = load_dataset("adult").subset(np.arange(400))
    assert ds.onehot_groups
    rel = get_mechanism(name)(**_small(name), random_state=None).release(ds)
    rel.save(tmp_path / "out.csv")
    X = ds.X[:30]
    np.testing.assert_array_equal(load_transform(tmp_path / "out.csv")(X), rel.transform(X))


GENERATIVE = sorted(n for n, cls in MECHANISMS.items() if hasattr(cls, "sample_release"))


def test_the_generative_mechanisms_have_fit_and_sample():
    assert {"ron-gauss", "pca-gauss", "modips"} <= set(GENERATIVE)


@pytest.mark.parametrize("name", GENERATIVE)
def test_fit_stores_learned_attributes_and_sample_has_the_release_shape(name, narrow_digits):
    from sklearn.exceptions import NotFittedError

    data = _data(name, narrow_digits)
    mech = get_mechanism(name)(**_small(name), random_state=4)
    assert not [a for a in vars(mech) if a.endswith("_")]  # __init__ stores only
    with pytest.raises(NotFittedError, match="fit"):
        mech.sample(5)
    assert mech.fit(data) is mech
    assert all(hasattr(mech, a) for a in mech.LEARNED_ATTRIBUTES)
    X_new, y_new = mech.sample(37, random_state=2)
    rel = mech.release(data)
    assert X_new.shape == (37, len(rel.columns)) and (y_new is None) == (rel.labels is None)
    np.testing.assert_array_equal(mech.sample(37, random_state=2)[0], X_new)  # the draw's seed reproduces
    assert mech.sample_release(37).guarantee == rel.guarantee
