"""The malformed / hostile input corpus (``tests/data/bad/``, issue 8 "Bad input").

Every file listed in ``tests/data/bad/MANIFEST.json`` goes through the three entry points:

- the library (``read_table`` / ``load_dataset``): a ``DataValidationError`` carrying the expected
  message fragment, never a raw pandas/numpy/zipfile/gzip exception type; "ok" inputs load;
- the CLI (``dpcore describe FILE`` and ``dpcore release ...``): exit 2 with exactly one stderr line
  and nothing in the output folder; "ok" inputs exit 0 and write a release;
- the Streamlit app (Data page upload, ``AppTest``): an ``st.error`` with the fragment, no
  exception, and the session keeps its dataset and stays usable.

Plus the over-the-upload-limit file (generated in ``tmp_path``, never committed), a decompression
bomb, hostile parameters (API, CLI, app widget ranges) and the bounds editor's per-column sources.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import re
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcore import io as dpio
from dpcore import io_csv
from dpcore.cli import main
from dpcore.data import Dataset, load_bounds_file, load_dataset, read_table
from dpcore.exceptions import DataValidationError, PrivacyLeakWarning
from dpcore.limits import ResourceLimitError
from dpcore.mechanisms import DPMix, DPPro, JLLaplace, LocalGaussian, PCAGauss, RONGauss

ROOT = Path(__file__).resolve().parents[1]
BAD = ROOT / "tests" / "data" / "bad"
CLASS_ARGS = ("--task", "classification", "--classes", "0,1")
MANIFEST = json.loads((BAD / "MANIFEST.json").read_text(encoding="utf-8"))
ENTRIES: list[dict[str, Any]] = MANIFEST["entries"]
NOT_CORPUS = {"MANIFEST.json", "README.md", "make_corpus.py", "__pycache__"}
#: committed test inputs (not helpers, not generated)
CORPUS = [e for e in ENTRIES if e["expect"] != "aux" and not e.get("generated")]
TABLES = [e for e in CORPUS if e.get("stage") != "bounds"]
OVER_LIMIT = next(e for e in ENTRIES if e.get("generated"))
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")  # written out, not imported: an independent check


def _ids(entry: dict[str, Any]) -> str:
    return entry["file"]


def upload_limit_mb() -> float:
    """``server.maxUploadSize`` of the repository's Streamlit configuration."""
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    return float(cfg["server"]["maxUploadSize"])


def _bounds_for(entry: dict[str, Any]) -> Any:
    if "bounds" in entry:
        return entry["bounds"]
    if "bounds_file" in entry:
        return load_bounds_file(BAD / entry["bounds_file"])
    return None


def _env(entry: dict[str, Any], monkeypatch) -> None:
    """Lower the resource limits as the entry asks (``"env"``), for this test only."""
    for key, value in entry.get("env", {}).items():
        monkeypatch.setenv(key, value)


def _one_line(message: str) -> None:
    assert "\n" not in message.strip() and "Traceback" not in message, message


# ------------------------------------------------------------------------------------- manifest
def test_manifest_lists_at_least_30_cases_and_every_file():
    assert len(CORPUS) >= 30, f"only {len(CORPUS)} corpus entries"
    listed = [e["file"] for e in ENTRIES]
    assert len(listed) == len(set(listed)), "a file is listed twice"
    on_disk = {p.name for p in BAD.iterdir()} - NOT_CORPUS
    unlisted = sorted(on_disk - set(listed))
    assert not unlisted, f"files in tests/data/bad missing from MANIFEST.json: {unlisted}"
    missing = sorted(e["file"] for e in ENTRIES if not e.get("generated") and e["file"] not in on_disk)
    assert not missing, f"listed but not committed: {missing}"
    assert OVER_LIMIT["file"] not in on_disk, "the over-the-limit file must be generated, not committed"
    for e in ENTRIES:
        assert e["expect"] in {"error", "ok", "ok-with-warning", "aux"}, e
        assert e.get("tests"), f"{e['file']}: say what it tests"
        if e["expect"] == "error":
            assert e.get("fragment") and e.get("stage") in {"read", "load", "bounds"}, e
        if e["expect"] == "ok-with-warning":
            assert e.get("warning"), e
        if e["expect"] == "aux":
            assert e.get("used_by") in listed, e


def test_corpus_files_are_small():
    sizes = {p.name: p.stat().st_size for p in BAD.iterdir() if p.is_file()}
    big = {k: v for k, v in sizes.items() if v > 300_000}
    assert not big, big


@pytest.mark.slow
def test_generator_rebuilds_the_committed_files():
    """``make_corpus.py`` documents every file: it rebuilds them byte for byte (Parquet aside,
    whose footer names the pyarrow version)."""
    sys.path.insert(0, str(BAD))
    try:
        import make_corpus
    finally:
        sys.path.remove(str(BAD))
    built = make_corpus.build()
    assert set(built) == {e["file"] for e in CORPUS + [x for x in ENTRIES if x["expect"] == "aux"]}
    differ = [k for k, v in built.items()
              if not k.endswith(".parquet") and (BAD / k).read_bytes() != v]
    assert not differ, differ


# -------------------------------------------------------------------------------------- library
def _load(entry: dict[str, Any], source: Any = None, **kw: Any) -> Dataset:
    return load_dataset(BAD / entry["file"] if source is None else source,
                        label=entry.get("label") or "", task=entry.get("task"),
                        classes=entry.get("classes"), categories=entry.get("categories"), **kw)


@pytest.mark.parametrize("entry", [e for e in CORPUS if e["expect"] == "error"], ids=_ids)
def test_library_raises_a_clear_validation_error(entry, monkeypatch):
    _env(entry, monkeypatch)
    if entry["stage"] == "bounds":
        data = {"file": entry["data"], "label": entry["label"], "task": entry.get("task"),
                "classes": entry.get("classes")}
        with pytest.raises(DataValidationError) as info:
            _load(data, bounds=load_bounds_file(BAD / entry["file"]))
    else:
        path = BAD / entry["file"]
        if entry["stage"] == "read":
            with pytest.raises(DataValidationError) as info:
                read_table(path)
        else:
            frame = read_table(path)  # the file itself is readable; the table is not usable
            assert isinstance(frame, pd.DataFrame) and frame.shape[0] >= 1
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PrivacyLeakWarning)
                with pytest.raises(DataValidationError) as info:
                    _load(entry)
        # the same through the bytes path the app uses
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            with pytest.raises(DataValidationError) as info_bytes:
                _load(entry, source=read_table(path.read_bytes(), entry["file"]))
        assert entry["fragment"] in str(info_bytes.value)
    message = str(info.value)
    assert entry["fragment"] in message, message
    _one_line(message)
    # not a raw pandas/numpy/zipfile error: the loader's own (RaggedLineError, ResourceLimitError)
    assert type(info.value).__module__.startswith("dpcore."), type(info.value)


@pytest.mark.parametrize("entry", [e for e in CORPUS if e["expect"].startswith("ok")], ids=_ids)
def test_library_loads_the_usable_inputs(entry, monkeypatch):
    _env(entry, monkeypatch)
    bounds = _bounds_for(entry)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = _load(entry, bounds=bounds)
    leaks = [str(w.message) for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    if entry["expect"] == "ok":
        assert not leaks, leaks
        assert ds.bounds_source == "user" and set(ds.bounds_sources) == {"user"}
    else:
        assert any(entry["warning"] in m for m in leaks), leaks
        assert ds.bounds_source == "data"
    assert np.isfinite(ds.X).all() and ds.n_samples >= 2
    if "columns" in entry:
        assert ds.feature_names == entry["columns"]
    if "n_features" in entry:
        assert ds.n_features == entry["n_features"]
    if entry.get("clipped"):
        from dpcore.preprocessing import prepare_input

        prepared = prepare_input(ds)
        lo, hi = ds.bounds[:, 0], ds.bounds[:, 1]
        assert (ds.X < lo).any() or (ds.X > hi).any(), "the file should hold values outside the bounds"
        assert (prepared.X >= lo).all() and (prepared.X <= hi).all()


def test_constant_columns_get_zero_width_bounds_and_still_release():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        ds = load_dataset(BAD / "constant_columns.csv", label="y", task="classification", classes=[0, 1])
        rel = LocalGaussian(epsilon=1.0, delta=1e-5).release(ds)
    const = [ds.feature_names.index(c) for c in ("const5", "const0")]
    assert (ds.bounds[const, 0] == ds.bounds[const, 1]).all()
    assert np.isfinite(np.asarray(rel.data, dtype=float)).all()


def test_nan_inf_rows_can_be_dropped_explicitly():
    ds = load_dataset(BAD / "nan_inf.csv", label="y", task="classification", classes=[0, 1],
                      drop_nonfinite=True,
                      bounds={"a": (0, 10), "b": (0, 10), "c": (0, 10)})
    assert ds.n_dropped == 3 and ds.n_samples == 17


def test_decompression_bomb_is_refused(monkeypatch):
    monkeypatch.setattr(dpio, "MAX_DECOMPRESSED_BYTES", 1 << 20)
    bomb = gzip.compress(b"a,b\n" + b"0,0\n" * (1 << 19), mtime=0)  # 2 MB of text in ~4 KB
    assert len(bomb) < 10_000
    with pytest.raises(DataValidationError, match="expands to more than 1 MB"):
        read_table(bomb, "bomb.csv.gz")


def test_a_folder_or_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(DataValidationError, match="is a folder"):
        read_table(tmp_path)
    with pytest.raises(DataValidationError, match="file not found"):
        read_table(tmp_path / "nope.csv")


# ------------------------------------------------------------------------------ over the limit
@pytest.fixture(scope="module")
def over_limit_file(tmp_path_factory) -> Path:
    """A sparse file one byte over the upload limit (all zero bytes, no disk blocks used)."""
    path = tmp_path_factory.mktemp("big") / OVER_LIMIT["file"]
    with open(path, "wb") as fh:
        fh.truncate(int(upload_limit_mb() * 2**20) + 1)
    return path


def test_over_limit_file_library(over_limit_file):
    limit = int(upload_limit_mb() * 2**20)
    assert over_limit_file.stat().st_size == limit + 1
    with pytest.raises(DataValidationError) as info:
        read_table(over_limit_file, max_bytes=limit)
    assert OVER_LIMIT["fragment"] in str(info.value)
    with pytest.raises(DataValidationError, match=re.escape(OVER_LIMIT["cli_fragment"])):
        read_table(over_limit_file)  # no limit: refused for what it is (binary zeros)


def test_over_limit_file_cli(over_limit_file, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    code, err = _cli(capsys, "release", "local-gaussian", str(over_limit_file), "-o",
                     str(out / "rel.csv"), "--data-bounds", "--label", "")
    _assert_cli_error(code, err, OVER_LIMIT["cli_fragment"])
    assert not list(out.iterdir())


# ------------------------------------------------------------------------------------------ CLI
def _cli_full(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``dpcore`` in-process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:  # pragma: no cover - main never lets argparse exit
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code, _, err = _cli_full(capsys, *argv)
    return code, err


def _assert_cli_error(code: int, err: str, fragment: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith("dpcore: error:") and "Traceback" not in err
    assert fragment in lines[0], lines[0]


def _data_args(entry: dict[str, Any], tmp_path: Path) -> list[str]:
    args = ["--label", entry.get("label") or ""]
    if entry.get("task"):
        args += ["--task", entry["task"]]
    if entry.get("classes"):
        args += ["--classes=" + ",".join(str(c) for c in entry["classes"])]
    if entry.get("stage") == "bounds":
        args += ["--bounds", str(BAD / entry["file"])]
    elif "bounds_file" in entry:
        args += ["--bounds", str(BAD / entry["bounds_file"])]
    elif "bounds" in entry:
        path = tmp_path / "bounds.json"
        path.write_text(json.dumps(entry["bounds"]))
        args += ["--bounds", str(path)]
    if "categories" in entry:
        path = tmp_path / "categories.json"
        path.write_text(json.dumps(entry["categories"]))
        args += ["--categories", str(path)]
    return args


def _assert_escaped(entry: dict[str, Any], *outputs: str) -> None:
    """No control or format character of a hostile name reaches the terminal raw."""
    text = "".join(outputs)
    raw = [ch for ch in text if not ch.isprintable() and ch not in "\n "]
    assert not raw, raw
    if entry.get("escaped"):
        assert "\\x1b" in text and "\\u202e" in text, text


def _input(entry: dict[str, Any]) -> str:
    return str(BAD / (entry["data"] if entry.get("stage") == "bounds" else entry["file"]))


@pytest.mark.parametrize("entry", CORPUS, ids=_ids)
def test_cli_describe_file(entry, tmp_path, capsys, monkeypatch):
    _env(entry, monkeypatch)
    code, out, err = _cli_full(capsys, "describe", _input(entry), *_data_args(entry, tmp_path))
    _assert_escaped(entry, out, err)
    if entry["expect"] == "error":
        _assert_cli_error(code, err, entry["fragment"])
    else:
        assert code == 0, err
        assert all(line.startswith("dpcore: warning:") for line in err.strip().splitlines())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            ds = _load(entry, bounds=_bounds_for(entry))
        assert f"{ds.n_samples} rows x {ds.n_features} features" in out
        for name in ds.feature_names:  # every name is listed, control characters escaped
            shown = "".join(ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode()
                            for ch in name)
            assert ds.n_features > 10 or shown in out, (shown, out)
        assert f"bounds source: {'user' if entry['expect'] == 'ok' else 'data'}" in out


def test_cli_describe_bundled_dataset_and_unknown_target(capsys):
    code = main(["describe", "digits"])
    out, err = capsys.readouterr()
    assert code == 0 and "1797 rows x 64 features" in out and "bounds source: metadata" in out
    code, err = _cli(capsys, "describe", "no-such-thing")
    _assert_cli_error(code, err, "is not a mechanism")


def test_cli_internal_error_is_one_line_with_status_1(monkeypatch, capsys, tmp_path):
    def boom(self, *args, **kwargs):
        raise RuntimeError("unexpected\nsecond line")

    monkeypatch.setattr(LocalGaussian, "release", boom)
    monkeypatch.delenv("DPCORE_DEBUG", raising=False)
    code, err = _cli(capsys, "release", "local-gaussian", str(BAD / "bom.csv"), "-o",
                     str(tmp_path / "r.csv"), "--data-bounds", "--label", "y",
                     *CLASS_ARGS)
    assert code == 1 and err.strip().splitlines() == [
        "dpcore: internal error (RuntimeError): unexpected (DPCORE_DEBUG=1 shows the traceback)"]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("entry", CORPUS, ids=_ids)
def test_cli_release_writes_all_or_nothing(entry, tmp_path, capsys, monkeypatch):
    _env(entry, monkeypatch)
    out = tmp_path / "out"
    out.mkdir()
    target = out / "release.csv"
    args = _data_args(entry, tmp_path)
    if entry["expect"] != "ok":  # so that only the input itself can make the command fail
        args.append("--data-bounds")
    code, err = _cli(capsys, "release", "local-gaussian", _input(entry), "-o", str(target),
                     "--epsilon", "1", "--delta", "1e-5", *args)
    _assert_escaped(entry, err)
    if entry["expect"] == "error":
        _assert_cli_error(code, err, entry["fragment"])
        assert not list(out.iterdir()), "a failed release wrote files"
        return
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["release.card.json", "release.csv"]
    card = json.loads((out / "release.card.json").read_text())
    assert card["bounds_source"] == ("user" if entry["expect"] == "ok" else "data")
    assert card["guarantee"]["holds"] is (entry["expect"] == "ok")
    released = pd.read_csv(target, dtype=str, keep_default_na=False)
    assert released.shape[0] >= 2
    if entry.get("formula"):  # user strings never reach a spreadsheet as formulas
        cells = [*released.columns, *released.to_numpy().ravel()]
        texts = [c for c in cells if isinstance(c, str) and not _is_number(c)]
        assert texts and not [c for c in texts if c.startswith(FORMULA_START)]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_cli_refuses_an_output_folder_that_does_not_exist(tmp_path, capsys):
    code, err = _cli(capsys, "release", "local-gaussian", str(BAD / "bom.csv"), "-o",
                     str(tmp_path / "missing" / "r.csv"), "--data-bounds", "--label", "y",
                     *CLASS_ARGS)
    _assert_cli_error(code, err, "does not exist")
    assert not (tmp_path / "missing").exists()


def test_cli_removes_a_half_written_release(tmp_path, capsys, monkeypatch):
    """If writing fails after the CSV (disk full, card path unwritable), the CSV goes too."""
    from dpcore import staging as release_mod  # where Release.save writes its files

    real = release_mod._write_temp  # the one place Release.save writes bytes

    def flaky(target: Path, payload: bytes) -> Path:
        if target.name.endswith(".card.json"):
            raise OSError(28, "No space left on device")
        return real(target, payload)

    monkeypatch.setattr(release_mod, "_write_temp", flaky)
    out = tmp_path / "out"
    out.mkdir()
    code, err = _cli(capsys, "release", "local-gaussian", str(BAD / "bom.csv"), "-o",
                     str(out / "r.csv"), "--data-bounds", "--label", "y",
                     *CLASS_ARGS)
    _assert_cli_error(code, err, "No space left on device")
    assert not list(out.iterdir())


@pytest.mark.slow
def test_cli_subprocess_bad_file_one_line(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("DPCORE_DEBUG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "dpcore.cli", "release", "dpmix", str(BAD / "zip.csv"), "-o",
         str(out / "r.csv"), "--data-bounds"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpcore: error: zip.csv"), proc.stderr
    assert _entry("zip.csv")["fragment"] in lines[0] and "Traceback" not in proc.stderr
    assert proc.stdout == "" and not list(out.iterdir())


def _entry(name: str) -> dict[str, Any]:
    return next(e for e in ENTRIES if e["file"] == name)


# ----------------------------------------------------------------------------- hostile parameters
@pytest.fixture(scope="module")
def small() -> Dataset:
    """30 rows x 3 features with public bounds (the far-outside file, clipped)."""
    return load_dataset(BAD / "far_outside_bounds.csv", label="y", task="classification", classes=[0, 1],
                        bounds=load_bounds_file(BAD / "far_outside_bounds.bounds.json"))


HOSTILE_API = [
    (LocalGaussian, {"epsilon": 0}, "epsilon"),
    (LocalGaussian, {"epsilon": -1}, "epsilon"),
    (LocalGaussian, {"epsilon": math.nan}, "epsilon"),
    (LocalGaussian, {"epsilon": "abc"}, "epsilon"),
    (LocalGaussian, {"delta": 0}, "delta"),
    (LocalGaussian, {"delta": 1}, "delta"),
    (LocalGaussian, {"delta": 1.5}, "delta"),
    (LocalGaussian, {"delta": -0.1}, "delta"),
    (LocalGaussian, {"delta": math.nan}, "delta"),
    (PCAGauss, {"delta": 1.5}, "delta"),
    (DPPro, {"delta": 0}, "delta"),
    (RONGauss, {"n_components": 3}, "n_components"),
    (PCAGauss, {"n_components": 4}, "n_components"),
    (JLLaplace, {"n_components": 3}, "n_components"),
    (DPPro, {"n_components": 30}, "n_components"),
    (DPMix, {"ell": 31}, "ell"),
    (DPMix, {"ell": 10**9}, "ell"),
    (DPMix, {"n_mixtures": 0}, "n_mixtures"),
    (DPMix, {"n_mixtures": -5}, "n_mixtures"),
    (RONGauss, {"epsilon": math.nan}, "epsilon"),
    # issue 17: no non-finite noise scale or cell is ever published; memory estimated before work
    (JLLaplace, {"epsilon": 1e-310}, "epsilon = 1e-310 gives an infinite noise scale"),
    (RONGauss, {"epsilon": 1e-320, "noise": "laplace"},
     "epsilon = 9.99989e-321 gives an infinite noise scale"),
    (RONGauss, {"epsilon": 1e-320}, "epsilon = 9.99989e-321 .* is too small for a finite noise scale"),
    (PCAGauss, {"epsilon": 1e-310}, "epsilon = 1e-310"),
    (DPMix, {"epsilon": 1e-310}, "too small for a finite noise scale"),
    (DPMix, {"n_mixtures": 10**9, "ell": 4}, "n_mixtures = 1,000,000,000 needs about"),
]


@pytest.mark.parametrize(("cls", "kwargs", "name"), HOSTILE_API,
                         ids=[f"{c.name}-{k}" for c, k, _ in HOSTILE_API])
def test_api_rejects_hostile_parameters_by_name(small, cls, kwargs, name):
    with pytest.raises(ValueError, match=name):
        cls(**kwargs).release(small)


@pytest.mark.parametrize("n_samples", [0, -1, 10**12, 2.5])
@pytest.mark.parametrize("cls", [LocalGaussian, RONGauss, DPMix])
def test_api_rejects_hostile_n_samples(small, cls, n_samples):
    with pytest.raises(ValueError, match="n_samples"):
        cls().release(small, n_samples=n_samples)


HOSTILE_CLI = [
    ("local-gaussian", ["--epsilon", "0"], "epsilon"),
    ("local-gaussian", ["--epsilon", "-1"], "epsilon"),
    ("local-gaussian", ["--epsilon", "nan"], "epsilon"),
    ("local-gaussian", ["--epsilon", "abc"], "epsilon"),
    ("local-gaussian", ["--epsilon", "inf"], "NOT PRIVATE"),
    ("local-gaussian", ["--delta", "0"], "delta"),
    ("local-gaussian", ["--delta", "1"], "delta"),
    ("local-gaussian", ["--delta", "1.5"], "delta"),
    ("local-gaussian", ["--delta", "-0.1"], "delta"),
    ("pca-gauss", ["--n-components", "4"], "--n-components"),  # p > d (p = d is the identity basis)
    ("pca-gauss", ["--n-components", "3", "--pca-source", "lap"], "--n-components"),  # p = d, a DP basis
    ("ron-gauss", ["--n-components", "7"], "--n-components"),
    ("dpmix", ["--ell", "31"], "ell"),
    ("dpmix", ["--n-mixtures", "0"], "--n-mixtures"),
    ("local-gaussian", ["--n-samples", "0"], "--n-samples"),
    ("ron-gauss", ["--n-samples", str(10**12)], "--n-samples"),
    ("local-gaussian", ["--n-samples", "1.5"], "n-samples"),
    # issue 17
    ("jl-laplace", ["--epsilon", "1e-310"], "epsilon = 1e-310 gives an infinite noise scale"),
    ("identity-laplace", ["--epsilon", "1e-310"], "epsilon = 1e-310 gives an infinite noise scale"),
    ("modips", ["--epsilon", "1e-310", "--noise", "laplace"],
     "epsilon = 1e-310 gives an infinite noise scale"),
    ("modips", ["--epsilon", "1e-310"],
     "epsilon = 1e-310 (delta = 1e-05) is too small for a finite noise scale"),
    ("dpmix", ["--epsilon", "1e-320"], "is too small for a finite noise scale"),
    ("dpmix", ["--ell", "4", "--n-mixtures", "1000000000"], "n_mixtures = 1,000,000,000 needs about"),
    ("local-gaussian", ["--eps", "1"], "unrecognized arguments: --eps"),
    ("local-gaussian", ["--del", "1e-5"], "unrecognized arguments: --del"),
    ("pca-gauss", ["--n-comp", "2"], "unrecognized arguments: --n-comp"),
]


@pytest.mark.parametrize(("mech", "extra", "fragment"), HOSTILE_CLI,
                         ids=[f"{m}{''.join(x)}" for m, x, _ in HOSTILE_CLI])
def test_cli_rejects_hostile_parameters(mech, extra, fragment, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    code, err = _cli(capsys, "release", mech, str(BAD / "far_outside_bounds.csv"), "-o",
                     str(out / "r.csv"), "--label", "y", *CLASS_ARGS,
                     "--bounds",
                     str(BAD / "far_outside_bounds.bounds.json"), *extra)
    _assert_cli_error(code, err, fragment)
    assert not list(out.iterdir())


def test_cli_hostile_parameter_baseline_succeeds(tmp_path, capsys):
    """The same command with sane values works, so the refusals above are about the values."""
    out = tmp_path / "out"
    out.mkdir()
    code, err = _cli(capsys, "release", "dpmix", str(BAD / "far_outside_bounds.csv"), "-o",
                     str(out / "r.csv"), "--label", "y", *CLASS_ARGS,
                     "--bounds",
                     str(BAD / "far_outside_bounds.bounds.json"), "--ell", "4", "--n-mixtures", "50")
    assert code == 0, err
    assert (out / "r.csv").exists() and (out / "r.card.json").exists()


@pytest.mark.parametrize(("name", "content", "fragment"), [
    ("cats.json", "{not json", "not valid JSON"),
    ("cats.json", '["a", "b"]', "must map each column"),
    ("missing.json", None, "cannot read the categories file"),
])
def test_cli_bad_categories_file(name, content, fragment, tmp_path, capsys):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    out = tmp_path / "out"
    out.mkdir()
    code, err = _cli(capsys, "release", "local-gaussian", str(BAD / "only_text.csv"), "-o",
                     str(out / "r.csv"), "--categories", str(path), "--data-bounds")
    _assert_cli_error(code, err, fragment)
    assert not list(out.iterdir())


# ------------------------------------------------------------------------------ bounds editor
def _data_bounds_dataset() -> Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return load_dataset(BAD / "all_zero_rows.csv", label="y", task="classification", classes=[0, 1])


def test_partial_bounds_edit_keeps_unedited_data_columns_flagged():
    from app.state import apply_bounds_edit, data_bounds_warning

    ds = _data_bounds_dataset()
    assert ds.bounds_sources == ["data"] * 3
    new = ds.bounds.copy()
    new[0] = (-1.0, 10.0)  # the user declares column "a" only (both sides replaced)
    edited, problem = apply_bounds_edit(ds, new)
    assert problem is None and edited is not None
    assert edited.bounds_sources == ["user", "data", "data"]
    assert edited.bounds_source == "data" and edited.data_bound_columns() == ["b", "c"]
    assert "(b, c)" in data_bounds_warning(edited)[0]
    rel = LocalGaussian(epsilon=1.0, delta=1e-5).release(edited)
    card = rel.card()
    assert card["bounds_source"] == "data" and card["guarantee"]["holds"] is False
    # declaring the remaining two makes everything public
    new2 = edited.bounds.copy()
    new2[1:] = (-1.0, 10.0)  # both sides replaced (a side left at the data minimum stays "data")
    final, problem = apply_bounds_edit(edited, new2)
    assert problem is None and final is not None
    assert final.bounds_sources == ["user"] * 3 and final.bounds_source == "user"
    assert not data_bounds_warning(final)
    card = LocalGaussian(epsilon=1.0, delta=1e-5).release(final).card()
    assert card["bounds_source"] == "user" and card["guarantee"]["holds"] is True


@pytest.mark.parametrize(("row", "fragment"), [
    ((5.0, 1.0), "finite lo <= hi"),
    ((math.nan, 1.0), "finite lo <= hi"),
    ((-1e300, 1e300), "overflow"),
])
def test_bounds_edit_rejects_hostile_values(row, fragment):
    from app.state import apply_bounds_edit

    ds = _data_bounds_dataset()
    new = ds.bounds.copy()
    new[0] = row
    edited, problem = apply_bounds_edit(ds, new)
    assert edited is None and problem and fragment in problem


def test_unchanged_data_bounds_cannot_be_declared_public():
    from app.state import apply_bounds_edit

    ds = _data_bounds_dataset()
    edited, problem = apply_bounds_edit(ds, ds.bounds.copy())
    assert edited is None and "still the minimum and maximum" in problem


# ------------------------------------------------------------------- strict lines (round three)
SHORT_LINE = "y,a,b,c\n" + "0,1,2,3\n" * 5 + "1,2\n" + "1,4,5,6\n" * 5  # line 7: c is missing
SHORT_BOUNDS = {"a": (0, 10), "b": (0, 10), "c": (0, 10)}


@pytest.mark.parametrize("missing", ["error", "impute", "drop"])
def test_a_short_line_is_refused_whatever_the_missing_value_policy(missing, tmp_path):
    """pandas pads a short line with missing values: with missing='impute' the absent field was
    filled as if it were an empty cell (exit 0), with 'drop' the row went. A line with another
    number of fields than the header is an error naming the line, in every policy."""
    path = tmp_path / "short.csv"
    path.write_text(SHORT_LINE)
    with pytest.raises(DataValidationError, match="line 7 has 2 fields but the header has 4"):
        load_dataset(path, label="y", task="classification", classes=[0, 1], missing=missing,
                     bounds=SHORT_BOUNDS)


@pytest.mark.parametrize("text", [
    'a,b\n1,"x,\ny"\n3,4\n',  # a quoted line break: one record over two lines
    'a,b\n1,x"y\n3,4\n',  # a quote inside an unquoted value is a literal character
    "a,b\n1,2\n\n   \n3,4\n",  # blank lines are skipped
    "a,b\r1,2\r3,4\r",  # old Mac line ends
    'a,b\n1, "x,y"\n3,4\n',  # a space before a quoted value
])
def test_the_strict_reader_accepts_what_pandas_reads_without_guessing(text):
    frame = read_table(text.encode(), "ok.csv")
    assert frame.shape == (2, 2) and list(frame.columns) == ["a", "b"]


def test_the_field_count_scan_crosses_its_pieces(monkeypatch):
    """The scan works piece by piece: a record, a quoted value or a CR LF cut by a piece's end."""
    monkeypatch.setattr(io_csv, "_SCAN_BYTES", 3)  # the CSV reader's module
    text = 'a,b,c\r\n1,"x,\r\ny",3\r\n\r\n4,5,6\r\n7,8\r\n9,10,11\r\n'
    with pytest.raises(dpio.RaggedLineError) as info:
        dpio.check_field_counts(text.encode(), ",", "t.csv")
    assert (info.value.line, info.value.fields, info.value.expected) == (6, 2, 3)
    dpio.check_field_counts(text.replace("7,8", "7,8,0").encode(), ",", "t.csv")


@pytest.mark.parametrize("missing", ["error", "impute"])
def test_dask_blocks_name_the_ragged_line_by_its_number_in_the_file(missing, tmp_path, capsys):
    """A CSV read in blocks refuses a short line deep in the file with the line's number in the
    file (not in its block), whatever the missing-value policy; nothing is written."""
    lines = ["y,a,b"] + [f"{i % 2},{i % 7},{i % 5}" for i in range(20_000)]
    lines[15_001] = "1,2"  # line 15,002 of the file
    path = tmp_path / "big.csv"
    path.write_text("\n".join(lines) + "\n")
    bounds = tmp_path / "b.json"
    bounds.write_text('{"a": [0, 10], "b": [0, 10]}')
    out = tmp_path / "out"
    code, err = _cli(capsys, "release", "local-gaussian", str(path), "-o", str(out), "--engine", "dask",
                     "--blocksize", "16KiB", "--label", "y", *CLASS_ARGS, "--bounds", str(bounds),
                     "--missing", missing)
    _assert_cli_error(code, err, "line 15002 has 2 fields but the header has 3")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["b.json", "big.csv"]


# ---------------------------------------------------------- public lists (round three)
@pytest.mark.parametrize(("classes", "fragment"), [
    ("0,1.0,1", "'1.0' and '1' are the same number 1"),
    ("1,01,2", "'1' and '01' are the same number 1"),
    ("01,1", "'01' and '1' are the same number 1"),
    ("1,2,2.0", "'2' and '2.0' are the same number 2"),
    ("[0, null]", "holds a missing value (None)"),
    ("[[0, 1], [2]]", "holds a nested value [0, 1]"),
    ('[1, "a"]', "mixes numbers (1) and texts ('a')"),
    ('["a", "b", "a"]', "'a' is listed twice"),
])
def test_class_lists_are_checked_value_by_value(classes, fragment, tmp_path, capsys):
    """Class lists whose values collide once converted to numbers gave 'internal error
    (InvalidIndexError)' (or '[1, 1]'); null and nested lists a TypeError. Each is refused naming
    the value, before the table is read."""
    if classes.startswith("["):
        path = tmp_path / "classes.json"
        path.write_text(classes)
        classes = str(path)
    out = tmp_path / "out"
    out.mkdir()
    code, err = _cli(capsys, "release", "local-gaussian", str(BAD / "far_outside_bounds.csv"), "-o",
                     str(out / "r.csv"), "--label", "y", "--task", "classification", "--classes", classes,
                     "--bounds", str(BAD / "far_outside_bounds.bounds.json"))
    _assert_cli_error(code, err, fragment)
    assert not list(out.iterdir())


def _codes_table(tmp_path: Path) -> Path:
    path = tmp_path / "codes.csv"
    path.write_text("a,y\n" + "".join(f"{i % 7},{['01', '1', '2'][i % 3]}\n" for i in range(60)))
    return path


def test_a_text_class_list_keeps_codes_such_as_01_and_1_apart(tmp_path):
    """The public class list decides whether labels are numbers or texts: a list of JSON strings
    reads a CSV label as text, so the codes 01 and 1 are two classes (they were the number 1:
    'single class (1)', or one class of three), in memory and on the Dask engine."""
    path = _codes_table(tmp_path)
    ds = load_dataset(path, label="y", task="classification", classes=["01", "1", "2"], bounds={"a": (0, 10)})
    assert ds.classes.tolist() == ["01", "1", "2"]
    assert sorted(np.unique(ds.y, return_counts=True)[1].tolist()) == [20, 20, 20]
    from dpcore import dask_engine

    table = dask_engine.open_table(str(path), label="y", task="classification", classes=["01", "1", "2"],
                                   bounds={"a": (0, 10)}, blocksize=256)
    labels = table.frame["label"].compute()
    assert sorted(labels.value_counts().tolist()) == [20, 20, 20] and set(labels) == {"01", "1", "2"}
    # a numeric list compares them as numbers: 01 is the number 1
    ds = load_dataset(path, label="y", task="classification", classes=[1, 2], bounds={"a": (0, 10)})
    assert ds.classes.tolist() == [1, 2] and int(np.count_nonzero(ds.y == 1)) == 40


@pytest.mark.parametrize(("categories", "fragment"), [
    ({"c": ["k1", None]}, "holds a missing value"),
    ({"c": ["k1", ["k2"]]}, "holds a nested value"),
    ({"c": [1, "1"]}, "1 and '1' are the same text"),
    ({"c": [f"k{i}" for i in range(1_001)]}, "1,001 values, over the limit of 1,000 (DPCORE_MAX_CATEGORIES)"),
])
def test_category_lists_are_checked_before_the_table_is_encoded(categories, fragment, tmp_path, capsys):
    """A 200,003-category list on 100 rows ran for minutes (one pandas comparison per category);
    lists are capped (DPCORE_MAX_CATEGORIES) and checked value by value before any one-hot
    column is made."""
    table = tmp_path / "cats.csv"
    table.write_text("a,c,y\n" + "".join(f"{i % 7},k{i % 5},{i % 2}\n" for i in range(100)))
    path = tmp_path / "categories.json"
    path.write_text(json.dumps(categories))
    code, err = _cli(capsys, "describe", str(table), "--label", "y", *CLASS_ARGS, "--categories", str(path))
    _assert_cli_error(code, err, fragment)


@pytest.mark.parametrize("bounds", [{0: (0, 1), None: (0, 1)}, {("a",): (0, 1)}])
def test_bounds_keys_must_be_column_names(bounds):
    frame = pd.DataFrame({"a": [0.1, 0.5, 0.9], "b": [1.0, 2.0, 3.0]})
    with pytest.raises(DataValidationError, match="bounds must be keyed by column names"):
        load_dataset(frame, bounds=bounds)


def test_mechanism_class_lists_are_checked_too(small):
    """A class list given to a mechanism (not to the table) with two classes equal as numbers
    gave InvalidIndexError from pandas' indexer."""
    with pytest.raises(ValueError, match="1.0 and 1 are the same number"):
        LocalGaussian(classes=[0, 1.0, 1], task="classification").release(small)


# ------------------------------------------------ limits before allocation (round three)
def test_a_dictionary_text_column_is_never_expanded_row_by_row():
    """A categorical column of one 1 MiB text on 200 rows (200 MiB if each row got its own copy,
    as astype(str) made: the app's server reached 5.85 GB) is refused as not numeric from its
    distinct values."""
    import tracemalloc

    frame = pd.DataFrame({"a": np.arange(200.0), "s": pd.Categorical(["x" * (1 << 20)] * 200)})
    tracemalloc.start()
    try:
        with pytest.raises(DataValidationError, match=r"column\(s\) \['s'\] are not numeric"):
            load_dataset(frame, bounds={"a": (0, 200)})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 30 * 2**20, f"{peak / 2**20:.0f} MiB"


def _wide_gzip(tmp_path: Path, rows: int = 20_000, columns: int = 1_000) -> Path:
    path = tmp_path / "wide.csv.gz"
    text = ",".join(f"x{j}" for j in range(columns)) + "\n" + (",".join(["0"] * columns) + "\n") * rows
    path.write_bytes(gzip.compress(text.encode(), mtime=0))
    return path


@pytest.mark.parametrize(("command", "fragment"), [
    (["describe"], "the cheapest in-memory release"),
    (["release", "local-gaussian"], "local-gaussian on 20,000 rows x 1,000 features needs about"),
])
def test_memory_estimates_come_from_the_shape_before_the_table_is_read(command, fragment, tmp_path, capsys,
                                                                       monkeypatch):
    """A 1,000-column gzip CSV under the cell limit reached 6.1 GB before the release's estimate
    refused it (the estimate came after the read), and describe loaded it whole: both are now
    refused from the file's shape (its lines, counted as the text is decompressed in pieces, and
    its header's fields) before anything is allocated."""
    import tracemalloc

    path = _wide_gzip(tmp_path)
    monkeypatch.setenv("DPCORE_MAX_MEMORY", "640M")  # 20,000 x 1,000 cells: at least 64 bytes a cell
    args = [*command, str(path), "--label", ""]
    if command[0] == "release":
        args += ["-o", str(tmp_path / "r.csv"), "--data-bounds"]
    tracemalloc.start()
    try:
        code, err = _cli(capsys, *args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    _assert_cli_error(code, err, fragment)
    assert peak < 40 * 2**20, f"{peak / 2**20:.1f} MiB allocated before the refusal"  # the table: 160 MB
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wide.csv.gz"]


@pytest.mark.parametrize(("facts", "fragment"), [
    ({"n": 10, "n_features": 5, "task": "classification", "n_classes": 10**7}, "10,000,000 classes"),
    ({"n": 10, "n_features": 10**6}, "10,000,000 cells"),
])
@pytest.mark.parametrize("mechanism", ["jl-laplace", "dppro", "ron-gauss", "pca-gauss"])
def test_noise_plans_check_their_placeholder_before_building_it(mechanism, facts, fragment, monkeypatch):
    """calibrate MECH --n 10 --features 100000000 allocated 6.5 GB, then MemoryError; --n-classes
    1000000000 MemoryError: the placeholder table's classes, cells and memory are checked first."""
    import tracemalloc

    from dpcore import planning

    monkeypatch.setenv("DPCORE_MAX_CELLS", "1000000")
    tracemalloc.start()
    try:
        with pytest.raises(ResourceLimitError, match=fragment):
            planning.noise_plan(mechanism, {}, **facts)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20, f"{peak / 2**20:.1f} MiB"


def test_calibrate_refuses_absurd_shapes_with_exit_2(capsys):
    for args in (["--n", "10", "--features", "100000000"],
                 ["--n", "10", "--features", "5", "--task", "classification", "--n-classes", "1000000000"]):
        code, err = _cli(capsys, "calibrate", "ron-gauss", *args)
        _assert_cli_error(code, err, "over the limit of")


def test_the_app_refuses_a_parquet_text_bomb_under_its_upload_limit():
    """1.6 KB of Parquet decoding to 400 MB (a dictionary of one 1 MiB text, 400 rows) was
    accepted by the app, whose 50 MB limit counted the footer's encoded sizes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    texts = pa.array(["x" * (1 << 20)] * 400).dictionary_encode()
    pq.write_table(pa.table({"a": np.arange(400.0), "s": texts}), buf, compression="zstd")
    data = buf.getvalue()
    assert len(data) < 10_000
    at = _new_upload_app()
    _upload(at, "bomb.parquet", data)
    assert any("expands to more than 50 MB when decoded" in e for e in _errors(at)), _errors(at)
    assert not [b for b in at.button if b.label == "Use this table"]


class _CountedName(str):
    """A column name that counts its equality tests (a membership test in a list makes them)."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        type(self).compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_column_handling_is_linear_in_the_number_of_columns():
    """100,000-column releases were killed at 120 s: PublicSchema.original_columns tested each
    name against a list (quadratic), the loader and the CSV writer went through pandas column by
    column. Counted, not timed: equality tests of the names, pandas column lookups."""
    from dpcore.decode import PublicSchema

    d = 2_000
    names = tuple(_CountedName(f"x{j}") for j in range(d))
    schema = PublicSchema(feature_names=names, bounds=np.tile([0.0, 1.0], (d, 1)), categories={})
    _CountedName.compared = 0
    assert schema.original_columns() == list(names)
    assert _CountedName.compared < 10 * d, _CountedName.compared
    frame = pd.DataFrame(np.random.default_rng(0).uniform(0, 1, (4, d)), columns=[f"x{j}" for j in range(d)])
    calls = {"getitem": 0, "iloc": 0}
    real_getitem, real_iloc = pd.DataFrame.__getitem__, pd.core.indexing._iLocIndexer.__getitem__

    def getitem(self, key):
        calls["getitem"] += 1
        return real_getitem(self, key)

    def iloc(self, key):
        calls["iloc"] += 1
        return real_iloc(self, key)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pd.DataFrame, "__getitem__", getitem)
        mp.setattr(pd.core.indexing._iLocIndexer, "__getitem__", iloc)
        ds = load_dataset(frame, bounds=(0, 1))
        LocalGaussian(epsilon=1.0, delta=1e-5).release(ds).to_csv_bytes()
    assert calls["getitem"] + calls["iloc"] < 100, calls


# ---------------------------------------------------------- Dask edges and messages (round three)
def _class_table(path: Path, rows: int = 400) -> Path:
    path.write_text("a,b,y\n" + "".join(f"{i % 7},{i % 5},{i % 2}\n" for i in range(rows)))
    return path


def _ab_bounds(tmp_path: Path) -> Path:
    path = tmp_path / "ab.json"
    path.write_text('{"a": [0, 10], "b": [0, 10]}')
    return path


def test_a_folder_of_csv_files_is_released_on_dask(tmp_path, capsys):
    """A folder was read for its Parquet files only: 'no Parquet or CSV file matches'."""
    folder = tmp_path / "parts"
    folder.mkdir()
    for k in range(3):
        _class_table(folder / f"part{k}.csv")
    out = tmp_path / "out"
    code, err = _cli(capsys, "release", "local-gaussian", str(folder), "-o", str(out), "--label", "y",
                     *CLASS_ARGS, "--bounds", str(_ab_bounds(tmp_path)))
    assert code == 0, err
    assert json.loads((out / "card.json").read_text())["n_rows"] == 1_200


def test_dask_output_onto_the_ledger_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    """-o L.json --ledger L.json ran the whole computation, then failed 'Not a directory'."""
    from dpcore import dask_engine

    def never(*args, **kwargs):
        raise AssertionError("the table was opened")

    monkeypatch.setattr(dask_engine, "open_table", never)
    ledger = tmp_path / "L.json"
    code, err = _cli(capsys, "release", "local-gaussian", str(_class_table(tmp_path / "t.csv")), "-o",
                     str(ledger), "--engine", "dask", "--ledger", str(ledger), "--label", "y", *CLASS_ARGS,
                     "--bounds", str(_ab_bounds(tmp_path)))
    _assert_cli_error(code, err, "would overwrite the ledger")
    assert not ledger.exists()


def test_a_killed_runs_temporary_folder_is_removed_by_the_next_run(tmp_path, capsys):
    """A SIGKILL leaves the hidden temporary folder of the parts (1.7 GB in the issue); the next
    release to the same output removes it (under the output's claim, so no live run's)."""
    stale = tmp_path / ".out.k1ll3d_x"
    stale.mkdir()
    (stale / "part-00000.parquet").write_bytes(b"partly written")
    other = tmp_path / ".other.abcdefgh"  # another output's: left alone
    other.mkdir()
    out = tmp_path / "out"
    code, err = _cli(capsys, "release", "local-gaussian", str(_class_table(tmp_path / "t.csv")), "-o",
                     str(out), "--engine", "dask", "--label", "y", *CLASS_ARGS, "--bounds",
                     str(_ab_bounds(tmp_path)))
    assert code == 0, err
    assert not stale.exists() and other.exists() and (out / "card.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


@pytest.mark.parametrize(("blocksize", "fragment"), [
    ("0", "blocksize must be a positive number of bytes"),
    ("-1", "blocksize must be a positive number of bytes"),
    ("abc", "blocksize 'abc' is not a size"),
    ("16", "cuts the table into"),
])
def test_block_sizes_are_checked(blocksize, fragment, tmp_path, capsys, monkeypatch):
    """--blocksize 0: 'range() arg 3 must not be zero'; -1: 'the Parquet files hold no rows'; 1 or
    16 on a 10 MB CSV planned millions of blocks (killed at 120 s, 1.8 GB)."""
    monkeypatch.setenv("DPCORE_MAX_PARTITIONS", "1000")
    table = _class_table(tmp_path / "t.csv", rows=4_000)  # 40 KB: 2,500 blocks of 16 bytes
    code, err = _cli(capsys, "release", "local-gaussian", str(table), "-o", str(tmp_path / "out"), "--engine",
                     "dask", f"--blocksize={blocksize}", "--label", "y", *CLASS_ARGS, "--bounds",
                     str(_ab_bounds(tmp_path)))
    _assert_cli_error(code, err, fragment)
    assert not (tmp_path / "out").exists()


def _mute_listener() -> tuple[Any, int]:
    """A TCP listener that accepts connections and never answers (closed with the test)."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    return server, server.getsockname()[1]


@pytest.mark.parametrize("address", ["mute", "inproc://x", "tcp://localhost:abc"])
def test_a_scheduler_that_does_not_answer_is_refused_in_time(address, tmp_path):
    """--scheduler naming a listener that accepts and never answers hung until killed (the
    Client's timeout covers the connection, not the handshake); inproc://x gave 'not enough values
    to unpack'. Run in a subprocess: a hang fails the test at its timeout instead of hanging it."""
    server = None
    if address == "mute":
        server, port = _mute_listener()
        address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "DPCORE_SCHEDULER_TIMEOUT": "2"}
    try:
        table = str(_class_table(tmp_path / "t.csv"))
        proc = subprocess.run(
            [sys.executable, "-m", "dpcore.cli", "release", "local-gaussian", table, "-o",
             str(tmp_path / "out"), "--engine", "dask", "--scheduler", address, "--label", "y", *CLASS_ARGS,
             "--bounds", str(_ab_bounds(tmp_path))],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"--scheduler {address} hung for 60 s")
    finally:
        if server is not None:
            server.close()
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert ("did not answer within 2 s" if "127.0.0.1" in address else "is not the address of a scheduler") \
        in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_refused_values_deep_in_a_table_name_their_rows(tmp_path, capsys):
    """A label outside the class list deep in a Parquet folder or a CSV read in blocks was refused
    without a row; text deep in a CSV column gave 'holds numbers as Python objects' (pandas types
    a large file in chunks), with no row or value."""
    from benchmarks.hostile_cases import deep_tables  # the tables the hostile-case benchmark uses

    deep_tables(tmp_path)  # deep_label.csv (label 7 at row 250,123), deep_text.csv, deep_pq
    bounds = str(_ab_bounds(tmp_path))
    for source, engine, fragment in [
            ("deep_label.csv", "dask", "(e.g. [7]; first rows: [250123])"),
            ("deep_pq", "dask", "part2.parquet (row groups 3-4): 1 values of label 'y' are not in its "
                                "public class list [0, 1] (e.g. [9]; first rows: [77777])"),
            ("deep_text.csv", "dask", "column 'b' is numeric except for 1 value(s) that are not numbers: "
                                      "'oops' (row 260001)"),
            ("deep_text.csv", "memory", "'oops' (row 260001)")]:
        out = tmp_path / f"out-{source}-{engine}"
        code, err = _cli(capsys, "release", "local-gaussian", str(tmp_path / source), "-o", str(out),
                         "--engine", engine, "--blocksize", "1MiB", "--label", "y", *CLASS_ARGS, "--bounds",
                         bounds)
        # the Dask engine notes the table's rows and partitions on stderr before reading them
        err = "\n".join(line for line in err.splitlines() if " rows in " not in line)
        _assert_cli_error(code, err, fragment)
        assert not out.exists()


@pytest.mark.parametrize("mechanism", ["dpmix", "local-gaussian"])
def test_an_epsilon_too_large_for_float64_is_called_too_large(mechanism, tmp_path, capsys):
    """epsilon = 1e308 with a delta was refused as 'too small for a finite noise scale' (dpmix) or
    with the advice 'use a larger epsilon'."""
    code, err = _cli(capsys, "release", mechanism, str(BAD / "far_outside_bounds.csv"), "-o",
                     str(tmp_path / "r.csv"), "--label", "y", *CLASS_ARGS, "--bounds",
                     str(BAD / "far_outside_bounds.bounds.json"), "--epsilon", "1e308", "--delta", "1e-5")
    _assert_cli_error(code, err, "epsilon = 1e+308 is too large")
    assert "too small" not in err and "larger epsilon" not in err and "smaller --epsilon" in err


def test_text_beyond_the_first_rows_of_an_object_column_is_named_with_its_row():
    """pandas reads a large CSV in chunks: a column with text in a later chunk holds numbers (as
    Python floats) above it, and the first 1,000 values decided 'holds numbers as Python objects',
    with no row or value (a 2.2 GB CSV with text deep in a column)."""
    column = pd.Series([1.5] * 2_000 + ["oops"] + [2.5] * 10, dtype=object)
    frame = pd.DataFrame({"a": np.arange(2_011.0), "b": column})
    with pytest.raises(DataValidationError, match=r"'oops' \(row 2000\)"):
        load_dataset(frame, bounds={"a": (0, 3000), "b": (0, 5)})


def test_a_memory_error_the_estimates_missed_is_one_line_with_status_2(monkeypatch, capsys, tmp_path):
    """A MemoryError (numpy's, or Arrow's ArrowMemoryError) was 'internal error (MemoryError)',
    exit 1: the work was too large, not a bug of the input's making; nothing is written."""
    def exhausted(self, *args, **kwargs):
        raise MemoryError("Unable to allocate 74.5 GiB for an array with shape (100000, 99999)")

    monkeypatch.setattr(LocalGaussian, "release", exhausted)
    monkeypatch.delenv("DPCORE_DEBUG", raising=False)
    code, err = _cli(capsys, "release", "local-gaussian", str(BAD / "far_outside_bounds.csv"), "-o",
                     str(tmp_path / "r.csv"), "--label", "y", *CLASS_ARGS, "--bounds",
                     str(BAD / "far_outside_bounds.bounds.json"))
    _assert_cli_error(code, err, "out of memory (Unable to allocate 74.5 GiB")
    assert not list(tmp_path.iterdir())


def test_equal_label_bounds_are_refused_by_name(tmp_path, capsys):
    """--label-bounds 0.5 0.5 got the generic 'NOT PRIVATE' refusal (equal feature bounds are
    refused by name)."""
    code, err = _cli(capsys, "release", "local-gaussian", str(BAD / "far_outside_bounds.csv"), "-o",
                     str(tmp_path / "r.csv"), "--label", "y", "--task", "regression", "--label-bounds", "0.5",
                     "0.5", "--bounds", str(BAD / "far_outside_bounds.bounds.json"))
    _assert_cli_error(code, err, "label bounds must have lo < hi, got [0.5, 0.5]")
    with pytest.raises(ValueError, match="label_bounds must have lo < hi"):
        LocalGaussian(task="regression", label_bounds=(0.5, 0.5), bounds=(0, 1)).release(
            np.random.default_rng(0).uniform(0, 1, (20, 3)), np.full(20, 0.5))


# -------------------------------------------------------------------------------------------- app
st_testing = pytest.importorskip("streamlit.testing.v1")
AppTest = st_testing.AppTest
ENTRY = str(ROOT / "app" / "streamlit_app.py")
TIMEOUT = 120
MIME = {".csv": "text/csv", ".gz": "application/gzip", ".npz": "application/octet-stream",
        ".parquet": "application/octet-stream"}


def _unescape(text: str) -> str:
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text)


def _errors(at) -> list[str]:
    return [_unescape(e.value) for e in at.error]


def _no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _html_sinks(at) -> list[str]:
    bad = []
    for node in [*at.main, *at.sidebar]:
        proto = getattr(node, "proto", None)
        if proto is None:
            continue
        kind = type(proto).__name__
        if (kind == "Markdown" and proto.allow_html and "<" in proto.body) or kind in {
                "Html", "IFrame", "ComponentInstance"}:
            bad.append(f"{kind}: {str(proto)[:120]}")
    return bad


def _new_upload_app():
    at = AppTest.from_file(ENTRY, default_timeout=TIMEOUT)
    at.run()
    _no_exception(at)
    at.switch_page("../pages/data.py").run()
    at.radio(key="p:data_source").set_value("Upload a file").run()
    _no_exception(at)
    return at


@pytest.fixture(scope="module")
def upload_app():
    """One AppTest session shared by the whole corpus (one user uploading file after file)."""
    return _new_upload_app()


def _upload(at, name: str, data: bytes):
    suffix = Path(name).suffix
    at.get("file_uploader")[0].set_value((name, data, MIME.get(suffix, "text/csv"))).run()
    _no_exception(at)
    return at


def _use_table(at, entry: dict[str, Any]):
    label = entry.get("label") or "(none)"
    at.selectbox(key="upload_label").select(label).run()
    at.selectbox(key="upload_task").select(entry.get("task") or "(choose)").run()
    if entry.get("classes"):
        at.text_input(key="upload_classes").input(",".join(str(c) for c in entry["classes"])).run()
    elif any(w.key == "upload_classes" for w in at.text_input):  # no list: read from the data
        at.text_input(key="upload_classes").input("").run()
    for column, cats in entry.get("categories", {}).items():
        at.text_input(key=f"cats:{column}").input(", ".join(cats)).run()
    buttons = [b for b in at.button if b.label == "Use this table"]
    assert buttons, [e.value for e in at.error]
    buttons[0].click().run()
    _no_exception(at)
    return at


@pytest.mark.slow
@pytest.mark.parametrize("entry", [e for e in TABLES if e.get("app", True)], ids=_ids)
def test_app_upload_gives_a_clear_error_and_keeps_the_session(upload_app, entry, monkeypatch):
    _env(entry, monkeypatch)
    at = upload_app
    before = at.session_state.dataset
    _upload(at, entry["file"], (BAD / entry["file"]).read_bytes())
    if entry["expect"] == "error" and entry["stage"] == "read":
        assert any(entry["fragment"] in e for e in _errors(at)), _errors(at)
        assert not [b for b in at.button if b.label == "Use this table"]
    else:
        _use_table(at, entry)
    if entry["expect"] == "error":
        assert any(entry["fragment"] in e for e in _errors(at)), _errors(at)
        assert at.session_state.dataset is before, "a failed upload replaced the dataset"
    else:
        ds = at.session_state.dataset
        assert ds.name == entry["file"] and ds.n_samples >= 2
        if "columns" in entry:
            assert ds.feature_names == entry["columns"]
        assert ds.bounds_source == "data"  # the app never invents public bounds
        assert any("computed from the private data" in e for e in _errors(at))
    assert not _html_sinks(at), _html_sinks(at)
    # still usable: the page kept its controls
    assert at.radio(key="p:data_source").value == "Upload a file"


@pytest.mark.slow
def test_app_session_is_usable_after_bad_uploads():
    at = _new_upload_app()
    for name in ("zip.csv", "ragged.csv", "latin1.csv"):
        _upload(at, name, (BAD / name).read_bytes())
        assert at.error
    _upload(at, "text_in_numeric.csv", (BAD / "text_in_numeric.csv").read_bytes())
    _use_table(at, _entry("text_in_numeric.csv"))
    assert any("is numeric except" in e for e in _errors(at))
    assert at.session_state.dataset.name == "digits"
    # a good CSV afterwards is accepted, and Explore renders on it
    good = "a,b,y\n" + "\n".join(f"{i % 7},{(i * 3) % 5},{i % 2}" for i in range(60)) + "\n"
    _upload(at, "good.csv", good.encode())
    _use_table(at, {"label": "y", "task": "classification", "classes": [0, 1]})
    assert at.session_state.dataset.name == "good.csv"
    at.switch_page("../pages/explore.py").run()
    _no_exception(at)
    # and so does switching back to a bundled dataset
    at.switch_page("../pages/data.py").run()
    at.radio(key="p:data_source").set_value("Bundled real dataset").run()
    at.selectbox[0].select("breast-cancer").run()
    _no_exception(at)
    assert at.session_state.dataset.name == "breast-cancer"
    at.switch_page("../pages/explore.py").run()
    _no_exception(at)
    assert at.get("vega_lite_chart") or at.table


def test_app_refuses_a_file_over_the_upload_limit():
    """The browser widget enforces server.maxUploadSize; the page checks the size again."""
    limit = int(upload_limit_mb() * 2**20)
    row = b"1.5,2.5,0\n"
    data = b"a,b,y\n" + row * ((limit - 6) // len(row) + 1)  # a valid CSV just over the limit
    assert limit < len(data) <= limit + len(row)
    at = _new_upload_app()
    _upload(at, "big.csv", data)
    messages = _errors(at)
    assert any(OVER_LIMIT["fragment"] in m for m in messages), messages
    assert not [b for b in at.button if b.label == "Use this table"]
    assert at.session_state.dataset.name == "digits"


def test_app_parameter_widgets_cannot_express_hostile_values():
    """epsilon/delta are chosen from grids inside their ranges (epsilon = inf is NOT PRIVATE and
    cannot be downloaded); integer parameters are bounded by the data (p < d, ell <= n, T >= 1)."""
    from app.controls import DELTA_GRID, EPSILON_GRID

    assert all(e > 0 and not math.isnan(e) for e in EPSILON_GRID)
    assert all(0 < d < 1 for d in DELTA_GRID)
    at = AppTest.from_file(ENTRY, default_timeout=TIMEOUT)
    at.run()
    ds = at.session_state.dataset
    at.switch_page("../pages/explore.py").run()
    for mech, name in (("pca-gauss", "n_components"), ("ron-gauss", "n_components"),
                       ("dpmix", "ell"), ("dpmix", "n_mixtures")):
        at.sidebar.selectbox(key="mechanism").select(mech).run()
        _no_exception(at)
        key = f"p:{mech}:{name}"
        widget = next((w for w in [*at.slider, *at.number_input] if w.key == key), None)
        assert widget is not None, f"no widget {key}"
        low, high = widget.min, widget.max
        assert low >= 1
        if name == "n_components":
            assert high <= ds.n_features - 1
        elif name == "ell":
            assert high <= ds.n_samples
    at.sidebar.selectbox(key="mechanism").select("local-gaussian").run()
    eps = at.select_slider(key="p:local-gaussian:epsilon")
    delta = at.select_slider(key="p:local-gaussian:delta")
    assert len(eps.options) == len(EPSILON_GRID) and len(delta.options) == len(DELTA_GRID)


def _edit_bounds(at, rows: dict[int, tuple[float, float]]):
    """Edit rows of the Data page's bounds table (the data_editor's widget state) and apply."""
    ds = at.session_state.dataset
    key = f"bounds_editor:{ds.fingerprint[:12]}"
    at.session_state[key] = {"edited_rows": {j: {"lo": lo, "hi": hi} for j, (lo, hi) in rows.items()},
                             "added_rows": [], "deleted_rows": []}
    at.run()
    next(b for b in at.button if b.label == "Apply these bounds as public").click().run()
    _no_exception(at)
    return at


def _draw_release_card(at) -> dict[str, Any]:
    """Draw on the Release page and return the card; each draw charges a fresh ledger store (an
    opted-in release on data bounds is booked as unbounded and spends a dataset's whole budget)."""
    import tempfile

    os.environ["DP_EXPLORER_LEDGER"] = str(Path(tempfile.mkdtemp()) / "ledger.sqlite")
    at.switch_page("../pages/release.py").run()
    optin = [c for c in at.checkbox if c.key == "optin_unbounded"]
    draw = next(b for b in at.button if b.label == "Draw release")
    assert draw.proto.disabled == bool(optin)  # data bounds: not drawn without the opt-in
    if optin:
        optin[0].check().run()
    next(b for b in at.button if b.label == "Draw release").click().run()
    _no_exception(at)
    card = json.loads(at.session_state.pending_release["card"])
    at.switch_page("../pages/data.py").run()
    return card


def test_app_bounds_editor_partial_edit_keeps_unedited_columns_as_data():
    at = _new_upload_app()
    good = "a,b,y\n" + "\n".join(f"{i % 7},{(i * 3) % 5},{i % 2}" for i in range(60)) + "\n"
    _upload(at, "good.csv", good.encode())
    _use_table(at, {"label": "y", "task": "classification", "classes": [0, 1]})
    assert at.session_state.dataset.bounds_sources == ["data", "data"]
    _edit_bounds(at, {0: (-1.0, 10.0)})  # the user declares "a" only
    ds = at.session_state.dataset
    assert ds.bounds.tolist() == [[-1.0, 10.0], [0.0, 4.0]]
    assert ds.bounds_sources == ["user", "data"] and ds.bounds_source == "data"
    assert any("computed from the private data" in e for e in _errors(at))
    assert any("1 column(s) (b)" in _unescape(w.value) for w in at.warning), [w.value for w in at.warning]
    card = _draw_release_card(at)
    assert card["bounds_source"] == "data" and card["guarantee"]["holds"] is False
    _edit_bounds(at, {1: (0.0, 5.0)})  # only hi of "b" replaced: lo is still the private minimum
    ds = at.session_state.dataset
    assert ds.bounds_sources == ["user", "data"] and ds.bound_side_sources()[1] == ("data", "user")
    assert any("only one side was replaced for b" in _unescape(w.value) for w in at.warning)
    card = _draw_release_card(at)
    assert card["guarantee"]["holds"] is False
    assert card["public_facts"]["bounds"]["b"]["lo_source"] == "data"
    _edit_bounds(at, {1: (-1.0, 5.0)})  # now both sides of "b": everything public
    ds = at.session_state.dataset
    assert ds.bounds_sources == ["user", "user"] and ds.bounds_source == "user"
    assert not any("computed from the private data" in e for e in _errors(at))
    card = _draw_release_card(at)
    assert card["bounds_source"] == "user" and card["guarantee"]["holds"] is True


@pytest.mark.parametrize(("values", "message"), [
    ([1.5, None, 2.0, 3.0], "holds numbers as Python objects"),
    ([1, 2, "x", 4], r"numeric except for 1 value\(s\) that are not numbers: 'x' \(row 2\)"),
    (["1", "2", "3", "4"], "holds only numbers, but stored as text"),
])
def test_object_column_of_numbers_says_what_it_holds(values, message):
    """Object columns of numbers, of numbers and one text, and of numeric text: each refusal says
    what the column holds (they said 'values of type float, not numbers: convert it to floats',
    'values of type int', and 'numeric except for 0 value(s)')."""
    frame = pd.DataFrame({"a": pd.Series(values, dtype=object), "b": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(DataValidationError, match=message):
        load_dataset(frame, bounds={"a": (0, 5), "b": (0, 5)})


def test_app_ledger_with_totals_past_float64_is_no_exception():
    """An uploaded ledger with two epsilon = 1e308 entries raised OverflowError (math.fsum) on the
    Release page; the CLI refused the same file cleanly."""
    entry = {"mechanism": "local-gaussian", "epsilon": 1e308, "delta": 0.0, "neighbouring": "replace-one",
             "dataset": "digits", "created_utc": "2026-01-01T00:00:00+00:00"}
    data = json.dumps({"format": "dpcore-ledger", "version": 2,
                       "entries": [dict(entry, sha256="a" * 64), dict(entry, sha256="b" * 64)]}).encode()
    at = AppTest.from_file(ENTRY, default_timeout=TIMEOUT)
    at.run()
    at.switch_page("../pages/release.py").run()
    _no_exception(at)
    uploader = next(u for u in at.get("file_uploader") if "ledger" in u.proto.label.lower())
    uploader.set_value(("L.json", data, "application/json")).run()
    _no_exception(at)
    at.run()
    _no_exception(at)
    shown = [*_errors(at), *(_unescape(w.value) for w in [*at.warning, *at.success])]
    assert any("epsilon" in m or "ε" in m for m in shown), shown


def test_app_use_this_table_never_shows_a_traceback(monkeypatch):
    """'Use this table' caught ValueError only: a MemoryError (the dictionary-typed upload that took
    the server to 5.85 GB) reached the page as an uncaught exception."""
    import dpcore.data

    at = _new_upload_app()
    _upload(at, "good.csv", ("a,b,y\n" + "".join(f"{i % 7},{i % 5},{i % 2}\n" for i in range(60))).encode())

    def exhausted(*args, **kwargs):
        raise MemoryError("out of memory")

    monkeypatch.setattr(dpcore.data, "load_dataset", exhausted)
    _use_table(at, {"label": "y", "task": "classification", "classes": [0, 1]})
    assert any("could not be used (MemoryError" in e for e in _errors(at)), _errors(at)
    assert at.session_state.dataset.name == "digits"
