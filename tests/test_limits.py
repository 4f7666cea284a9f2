"""Resource limits before allocation, no non-finite release, strict parsing (issue 17).

The corpus cases (``tests/data/bad``) and the hostile parameters of ``test_bad_inputs.py`` run
these through the library, the CLI and the app; this file checks the limits themselves: the
memory estimate is an upper bound of what a release really allocates, the limits are configurable,
non-finite noise scales and cells are refused centrally, special files are refused at once.
"""

from __future__ import annotations

import json
import os
import re
import tracemalloc
import warnings

import numpy as np
import pytest

from dpcore import limits
from dpcore.calibration import analytic_gaussian_sigma, classic_gaussian_sigma, laplace_scale
from dpcore.cli import escape_controls, main
from dpcore.data import load_bounds_file, read_table
from dpcore.exceptions import DataValidationError, NonFiniteNoiseError
from dpcore.mechanisms import MECHANISMS, DPMix, LocalGaussian, PCAGauss
from dpcore.mechanisms.base import check_finite_release
from dpcore.preprocessing import _index_of, prepare_input
from dpcore.release import Guarantee, NoiseRecord, Release
from dpcore.schema import validate_params

SHAPES = [(3000, 40, "classification"), (300, 150, "classification"), (2000, 30, "unsupervised"),
          (1500, 20, "regression")]


def _mechanism(name: str, task: str, n_features: int) -> tuple[object, str]:
    cls = MECHANISMS[name]
    task = task if task in cls.tasks else cls.tasks[0]
    kw: dict = {"bounds": (0, 1), "task": task}
    if task == "classification":
        kw["classes"] = np.arange(5)
    if task == "regression":
        kw["label_bounds"] = (0, 5)
    if "public_data" in cls.extra_args:  # a separate public table (never rows of the private one)
        kw["public_data"] = np.random.default_rng(9).uniform(0, 1, (100, n_features))
    mech = cls(**kw)
    if name == "dpmix":
        mech.set_params(ell=4)
    return mech, task


@pytest.mark.parametrize(("n", "d", "task"), SHAPES, ids=[f"{n}x{d}-{t}" for n, d, t in SHAPES])
@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_peak_estimate_bounds_what_a_release_allocates(name, n, d, task):
    """``peak_bytes`` (public shapes and parameters only) is at least the peak traced by
    tracemalloc (numpy reports its buffers to it) during the release."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (n, d))
    y = rng.integers(0, 5, n)
    mech, task = _mechanism(name, task, d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mech.release(X[:50], None if task == "unsupervised" else y[:50])  # lazy imports, caches
        tracemalloc.start()
        try:
            mech.release(X, None if task == "unsupervised" else y)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    cls = type(mech)
    params = validate_params(cls.params, {p.name: getattr(mech, p.name) for p in cls.params})
    estimate = cls.peak_bytes(n, d, params, n_classes=5 if task == "classification" else 0)
    assert peak <= estimate, f"{name}: traced {peak / 2**20:.2f} MiB > estimate {estimate / 2**20:.2f} MiB"


def test_peak_estimate_grows_with_the_parameters_that_drive_it():
    from dpcore.mechanisms.base import NOISE_FIXED_BYTES

    base = DPMix.peak_bytes(1000, 10, {"n_mixtures": 1000}) - NOISE_FIXED_BYTES
    assert DPMix.peak_bytes(1000, 10, {"n_mixtures": 100_000}) - NOISE_FIXED_BYTES > 5 * base
    assert PCAGauss.peak_bytes(10, 10_000, {}) > 4 * 8 * 10_000**2  # four d x d matrices
    assert LocalGaussian.peak_bytes(10, 10_000, {}) < 8 * 10_000**2  # no d x d matrix at all


def test_dpmix_with_a_billion_mixtures_is_refused_before_allocation():
    X = np.random.default_rng(1).uniform(0, 1, (30, 3))
    with pytest.raises(limits.ResourceLimitError) as info:
        DPMix(ell=4, n_mixtures=10**9, bounds=(0, 1)).release(X)
    msg = str(info.value)
    assert "n_mixtures = 1,000,000,000" in msg and "GiB" in msg and "DPCORE_MAX_MEMORY" in msg
    expected = DPMix.peak_bytes(30, 3, {"n_mixtures": 10**9})
    assert limits.format_bytes(expected) in msg


def test_pca_on_many_columns_is_refused_by_its_d_by_d_estimate():
    X = np.random.default_rng(2).uniform(0, 1, (20, 40_000))
    with pytest.raises(limits.ResourceLimitError, match="pca-gauss on 20 rows x 40,000 features"):
        PCAGauss(n_components=2, bounds=(0, 1)).release(X)
    LocalGaussian(bounds=(0, 1)).release(X)  # a row-wise mechanism on the same data is fine


def test_memory_limit_is_configurable(monkeypatch):
    X = np.random.default_rng(3).uniform(0, 1, (200, 5))
    LocalGaussian(bounds=(0, 1)).release(X)
    monkeypatch.setenv("DPCORE_MAX_MEMORY", "4K")
    with pytest.raises(limits.ResourceLimitError, match="over the limit of 4 KiB"):
        LocalGaussian(bounds=(0, 1)).release(X)
    monkeypatch.setenv("DPCORE_MAX_MEMORY", "lots")
    with pytest.raises(ValueError, match="DPCORE_MAX_MEMORY='lots' is not a positive size"):
        LocalGaussian(bounds=(0, 1)).release(X)


@pytest.mark.parametrize(("raw", "expected"), [("512", 512), ("8G", 8 << 30), ("1.5MiB", 3 << 19),
                                               ("2k", 2048), (" 16M ", 16 << 20)])
def test_byte_sizes_in_environment_variables(monkeypatch, raw, expected):
    monkeypatch.setenv("DPCORE_MAX_INPUT_BYTES", raw)
    assert limits.max_input_bytes() == expected


def test_class_limit_and_linear_label_encoding(monkeypatch):
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (60, 2))
    y = np.array([f"c{i % 3}" for i in range(60)], dtype=object)
    monkeypatch.setenv("DPCORE_MAX_CLASSES", "2")
    with pytest.raises(limits.ResourceLimitError, match="3 classes, over the limit of 2"):
        prepare_input(X, y, bounds=(0, 1), task="classification")
    monkeypatch.delenv("DPCORE_MAX_CLASSES")
    # an unsorted public class list: labels encoded by one hash pass, as the searchsorted path would
    classes = np.array(["c2", "c0", "c1"], dtype=object)
    prepared = prepare_input(X, y, bounds=(0, 1), task="classification", classes=classes)
    assert (classes[prepared.y] == y).all()
    big = np.array([f"id{i}" for i in range(50_000)], dtype=object)[::-1]
    labels = big[rng.integers(0, big.size, 200_000)]
    assert (big[_index_of(big, labels)] == labels).all()


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_no_mechanism_publishes_a_non_finite_release(name):
    """epsilon = 1e-310 once gave NaN/inf tables with exit 0 for 6 of 9 mechanisms."""
    mech, task = _mechanism(name, "classification", 6)
    if not any(p.name == "epsilon" for p in type(mech).params):
        pytest.skip("no epsilon parameter")
    rng = np.random.default_rng(5)
    X, y = rng.uniform(0, 1, (60, 6)), rng.integers(0, 5, 60)
    for eps in (1e-310, 1e-320):
        mech.set_params(epsilon=eps)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rel = mech.release(X, y)
        except ValueError as exc:
            assert f"epsilon = {eps:g}" in str(exc) and ("infinite" in str(exc) or "sigma_x" in str(exc))
            continue
        # a Gaussian mechanism with delta > 0 has a finite noise scale even as epsilon -> 0
        assert all(np.isfinite(r.scale) for r in rel.noise)
        assert np.isfinite(np.asarray(rel.data, dtype=float)).all()


def _release(data: np.ndarray, scale: float = 1.0) -> Release:
    return Release(data=data, columns=["a"], mechanism="x", parameters={},
                   guarantee=Guarantee(epsilon=1.0, delta=0.0, neighbouring="replace-one", kind="pure"),
                   noise=[NoiseRecord("mean", 1.0, scale, "laplace")], calibration="", bounds_source="user",
                   n_rows=2)


def test_central_finite_check_names_the_parameter():
    check_finite_release(_release(np.zeros((2, 1))), {"epsilon": 1.0})
    with pytest.raises(NonFiniteNoiseError, match="epsilon = 0.5 gives a released table with 1 NaN/inf"):
        check_finite_release(_release(np.array([[0.0], [np.inf]])), {"epsilon": 0.5})
    with pytest.raises(NonFiniteNoiseError, match="epsilon = 1e-310 gives an infinite noise scale for mean"):
        check_finite_release(_release(np.zeros((2, 1)), scale=np.inf), {"epsilon": 1e-310})


def test_calibration_helpers_refuse_infinite_scales():
    with pytest.raises(NonFiniteNoiseError, match="epsilon = 1e-310 gives an infinite noise scale"):
        laplace_scale(1.0, 1e-310)
    with pytest.raises(NonFiniteNoiseError, match="epsilon = 1e-310"):
        classic_gaussian_sigma(1.0, 1e-310, 1e-5)
    assert np.isfinite(analytic_gaussian_sigma(1.0, 1e-310, 1e-5))  # finite: delta > 0
    assert laplace_scale(1.0, 1e-300) == pytest.approx(1e300)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe.csv"
    os.mkfifo(path)  # nothing ever writes to it: opening it would block forever
    return path


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_special_files_are_refused_without_opening_them(kind, fifo, tmp_path, capsys):
    path = fifo if kind == "fifo" else "/dev/zero"
    what = "a FIFO (named pipe)" if kind == "fifo" else "a character device"
    with pytest.raises(DataValidationError, match=re.escape(f"is {what}, not a regular file")):
        read_table(path)
    with pytest.raises(DataValidationError, match=f"bounds file .* is {re.escape(what)}"):
        load_bounds_file(path)
    good = tmp_path / "good.csv"
    good.write_text("a,b,y\n" + "".join(f"{i % 7},{i % 5},{i % 2}\n" for i in range(20)))
    out = tmp_path / "out"
    out.mkdir()
    for role, argv in (("input", [str(path)]),
                       ("bounds", [str(good), "--bounds", str(path)]),
                       ("categories", [str(good), "--categories", str(path)]),
                       ("classes", [str(good), "--classes", str(path)])):
        capsys.readouterr()
        code = main(["release", "local-gaussian", *argv, "-o", str(out / "r.csv"), "--label", "y",
                     "--task", "classification", "--data-bounds"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and f"is {what}, not a regular file" in err[0], (role, err)
        assert not list(out.iterdir())


def test_escape_controls():
    assert escape_controls("plain name é 温度") == "plain name é 温度"
    assert escape_controls("a\x1b[31mred\x07") == "a\\x1b[31mred\\x07"
    assert escape_controls("first\nsecond\ttab\u202e") == "first\\nsecond\\ttab\\u202e"
    assert escape_controls("keep\nlines", keep="\n") == "keep\nlines"


def test_cli_messages_never_print_raw_control_characters(tmp_path, capsys):
    bounds = tmp_path / "bounds.json"
    bounds.write_text(json.dumps({"a\x1b]0;pwned\x07": [0, 1]}))
    good = tmp_path / "good.csv"
    good.write_text("a,b,y\n" + "".join(f"{i % 7},{i % 5},{i % 2}\n" for i in range(20)))
    code = main(["describe", str(good), "--label", "y", "--task", "classification", "--bounds", str(bounds)])
    err = capsys.readouterr().err
    assert code == 2 and "\x1b" not in err and "\\x1b]0;pwned\\x07" in err, err


@pytest.mark.parametrize(("X", "fragment"), [
    (np.ones((4, 2)) * (1 + 2j), "holds complex numbers"),
    (np.arange(8).reshape(4, 2).astype("datetime64[s]"), "holds dates/times"),
])
def test_api_refuses_complex_and_datetime_arrays(X, fragment):
    with pytest.raises(ValueError, match=fragment):
        LocalGaussian(bounds=(0, 10)).release(X)


@pytest.mark.slow
def test_the_load_tests_hostile_uploads_are_refused_under_the_app_cap():
    """``benchmarks/load_test.py --hostile-uploads`` sends these; the app's per-session cap (its
    upload limit, counted after decompression) refuses each before the table is allocated."""
    from benchmarks.load_test import hostile_payloads

    cap = 50 << 20
    for name, _, data in hostile_payloads():
        assert len(data) < 2 << 20  # small uploads...
        tracemalloc.start()
        try:
            with pytest.raises(limits.ResourceLimitError, match="expands to more than 50 MB"):
                read_table(data, name, max_bytes=cap)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 2 * cap, f"{name}: {peak / 2**20:.0f} MiB traced"  # ...that stay small


def test_deeply_nested_json_and_overflowing_parameters_exit_2_with_a_sentence(tmp_path, capsys):
    """JSON nested past Python's recursion limit (bounds, categories, classes files) and
    parameters that overflow a computation are user errors: exit 2, one line that says so."""
    good = tmp_path / "good.csv"
    good.write_text("a,b,y\n" + "".join(f"{i % 7},{i % 5},{i % 2}\n" for i in range(20)))
    nested = tmp_path / "nested.json"
    nested.write_text("[" * 100_000)
    for flag in ("--bounds", "--categories", "--classes"):
        capsys.readouterr()
        code = main(["release", "local-gaussian", str(good), "--label", "y", "--task", "classification",
                     flag, str(nested), "-o", str(tmp_path / "r.csv")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "is not valid JSON" in err[0] and "recursion" in err[0], \
            (flag, err)
    capsys.readouterr()
    code = main(["calibrate", "dpmix", "--epsilon", "1e300", "--ell", "2", "--n", "10", "--T", "10",
                 "--d-x", "2", "--d-y", "2", "--delta", "1e-5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["dpcore: error: an input or parameter is out of the range that can be "
                                 "computed (Numerical result out of range)"], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.csv", "nested.json"]


def test_ron_gauss_counts_its_projection_basis(monkeypatch):
    """RON-Gauss on 4 rows x 100,000 columns with public bounds passed the memory estimate (40 MiB),
    then failed with 'internal error (MemoryError): Unable to allocate 74.5 GiB for an array with
    shape (100000, 99999)': the Haar basis d x p (p automatic: up to d - 1) was not counted."""
    from dpcore.mechanisms import RONGauss

    X = np.random.default_rng(5).uniform(0, 1, (4, 3_000))
    monkeypatch.setenv("DPCORE_MAX_MEMORY", "64M")  # the basis: 2 x 3,000 x 2,999 x 8 bytes = 144 MB
    with pytest.raises(limits.ResourceLimitError, match="ron-gauss on 4 rows x 3,000 features"):
        RONGauss(bounds=(0, 1)).release(X)
    RONGauss(bounds=(0, 1), n_components=2).release(X)  # a given p: its own, small, basis
