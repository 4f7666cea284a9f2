"""Tests of the dpcore command line (in-process through ``dpcore.cli.main``, plus one subprocess run
to prove the ``python -m dpcore.cli`` entry point works)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcore.cli import main
from dpcore.data import bundled_datasets
from dpcore.mechanisms import LocalGaussian

REPO = Path(__file__).resolve().parents[1]
BUNDLED = ["adult", "breast-cancer", "diabetes", "digits", "mnist-10k"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _card(csv_path: Path) -> dict:
    return json.loads(csv_path.with_name(csv_path.stem + ".card.json").read_text())


def _toy_csv(tmp_path: Path, n: int = 60) -> Path:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({
        "a": rng.uniform(0, 1, n).round(4), "b": rng.uniform(-2, 2, n).round(4),
        "c": rng.uniform(0, 10, n).round(4), "y": rng.integers(0, 2, n),
    })
    path = tmp_path / "toy.csv"
    frame.to_csv(path, index=False)
    return path


def _assert_one_line_error(code: int, err: str) -> None:
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dpcore: error:")


# ------------------------------------------------------------------------- datasets / describe
def test_datasets_lists_all_bundled(capsys):
    code, out, err = run(capsys, "datasets")
    assert code == 0 and err == ""
    listed = [line.split()[0] for line in out.strip().splitlines()]
    assert sorted(listed) == BUNDLED
    meta = bundled_datasets()
    for line in out.strip().splitlines():
        name = line.split()[0]
        assert str(meta[name]["n_rows"]) in line and meta[name]["task"] in line


@pytest.mark.slow
def test_module_entry_point_subprocess():
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "dpcore.cli", "datasets"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert sorted(line.split()[0] for line in proc.stdout.strip().splitlines()) == BUNDLED


def test_describe_prints_parameters(capsys):
    code, out, _ = run(capsys, "describe", "local-gaussian")
    assert code == 0
    for p in LocalGaussian.params:
        assert p.cli_flag in out
    assert "replace-one" in out and "approx" in out


def test_describe_json(capsys):
    code, out, _ = run(capsys, "describe", "local-gaussian", "--json")
    assert code == 0
    info = json.loads(out)
    assert info["name"] == "local-gaussian"
    assert [p["name"] for p in info["parameters"]] == [p.name for p in LocalGaussian.params]
    assert info["neighbouring"] == "replace-one" and info["guarantee_kind"] == "approx"


# ------------------------------------------------------------------------- release
def test_release_bundled_writes_csv_and_card_matching_flags(capsys, tmp_path):
    out = tmp_path / "bc.csv"
    code, stdout, err = run(capsys, "release", "local-gaussian", "breast-cancer", "-o", str(out),
                            "--epsilon", "2", "--delta", "1e-6")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bc.card.json", "bc.csv"]
    card = _card(out)
    g = card["guarantee"]
    assert (g["epsilon"], g["delta"]) == (2.0, 1e-6)
    assert g["holds"] is True and g["kind"] == "approx" and g["neighbouring"] == "replace-one"
    assert card["parameters"]["epsilon"] == 2.0 and card["parameters"]["delta"] == 1e-6
    assert card["mechanism"] == "local-gaussian"
    assert card["bounds_source"] == "metadata"
    meta = bundled_datasets()["breast-cancer"]
    assert card["n_rows"] == meta["n_rows"]
    assert card["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    frame = pd.read_csv(out)
    assert frame.shape == (meta["n_rows"], meta["n_features"] + 1)
    assert "epsilon = 2" in stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["no-such-dataset"], "neither a file nor a bundled dataset"),
     (["digits", "--epsilon", "0"], "epsilon"),
     (["digits", "--epsilon", "inf"], "NOT PRIVATE"),
     (["digits", "--epsilon", "nan"], "epsilon"),
     (["digits", "--delta", "1.5"], "delta"),
     (["digits", "--label", "nope"], "label column 'nope' not found"),
     (["digits", "--calibration", "classic", "--epsilon", "2"], "epsilon < 1"),
     (["digits", "--n-samples", "5"], "--n-samples"),
     (["digits", "--budget", "3"], "--ledger")],
    ids=["unknown-dataset", "eps-0", "eps-inf", "eps-nan", "delta-1.5", "missing-label", "classic-eps",
         "n-samples", "budget-without-ledger"],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(capsys, tmp_path, args, needle):
    out = tmp_path / "o.csv"
    code, _, err = run(capsys, "release", "local-gaussian", *args, "-o", str(out))
    _assert_one_line_error(code, err)
    assert needle in err
    assert list(tmp_path.iterdir()) == []


def test_csv_without_bounds_is_refused_unless_data_bounds(capsys, tmp_path):
    src = _toy_csv(tmp_path)
    out = tmp_path / "rel.csv"
    label = ["--label", "y", "--task", "classification", "--classes", "0,1"]
    code, _, err = run(capsys, "release", "local-gaussian", str(src), *label, "-o", str(out))
    _assert_one_line_error(code, err)
    assert "--bounds" in err and "--data-bounds" in err
    assert not out.exists()

    code, _, err = run(capsys, "release", "local-gaussian", str(src), *label, "-o", str(out),
                       "--data-bounds")
    assert code == 0
    assert "dpcore: warning:" in err and "Traceback" not in err
    card = _card(out)
    assert card["bounds_source"] == "data"
    assert card["guarantee"]["holds"] is False


@pytest.mark.parametrize("kind", ["json", "csv"])
def test_bounds_file(capsys, tmp_path, kind):
    src = _toy_csv(tmp_path)
    if kind == "json":
        bfile = tmp_path / "bounds.json"
        bfile.write_text(json.dumps({"a": [0, 1], "b": [-2, 2], "c": [0, 10]}))
    else:
        bfile = tmp_path / "bounds.csv"
        bfile.write_text("column,lo,hi\na,0,1\nb,-2,2\nc,0,10\n")
    out = tmp_path / "rel.csv"
    code, _, err = run(capsys, "release", "local-gaussian", str(src), "--label", "y", "-o", str(out),
                       "--task", "classification", "--classes", "0,1",
                       "--bounds", str(bfile), "--epsilon", "0.5", "--column-noise", "equal")
    assert code == 0, err
    assert "computed from the private data" not in err  # no data bounds (noise notes may follow)
    card = _card(out)
    assert card["bounds_source"] == "user" and card["guarantee"]["holds"] is True
    # the sensitivity reflects the bounds file: the box diameter (labels are released on their own
    # by randomized response, the card's second noise record)
    assert card["noise"][0]["sensitivity"] == pytest.approx(np.sqrt(1 + 16 + 100))
    assert card["noise"][1]["distribution"] == "randomized-response"


def test_ledger_and_budget(capsys, tmp_path):
    ledger = tmp_path / "ledger.json"
    first, second, third = (tmp_path / f"r{i}.csv" for i in (1, 2, 3))
    base = ["release", "local-gaussian", "breast-cancer", "--delta", "1e-6", "--ledger", str(ledger),
            "--budget", "1.5"]
    code, stdout, err = run(capsys, *base, "-o", str(first), "--epsilon", "1")
    assert code == 0, err
    assert "ledger:" in stdout
    saved = json.loads(ledger.read_text())
    assert saved["total_epsilon"] == 1.0 and len(saved["entries"]) == 1

    code, _, err = run(capsys, *base, "-o", str(second), "--epsilon", "1")
    _assert_one_line_error(code, err)
    assert "budget" in err
    assert not second.exists() and not (tmp_path / "r2.card.json").exists()
    saved = json.loads(ledger.read_text())
    assert saved["total_epsilon"] == 1.0 and len(saved["entries"]) == 1

    code, _, err = run(capsys, *base, "-o", str(third), "--epsilon", "0.5")
    assert code == 0, err  # exactly reaching the budget is allowed
    saved = json.loads(ledger.read_text())
    assert saved["total_epsilon"] == 1.5 and saved["total_delta"] == pytest.approx(2e-6)
    assert [e["epsilon"] for e in saved["entries"]] == [1.0, 0.5]
    assert [e["sha256"] for e in saved["entries"]] == [
        hashlib.sha256(p.read_bytes()).hexdigest() for p in (first, third)]
    assert all(e["dataset"] == "breast-cancer" for e in saved["entries"])


def test_corrupted_ledger_is_refused(capsys, tmp_path):
    ledger = tmp_path / "ledger.json"
    ledger.write_text("{broken")
    out = tmp_path / "r.csv"
    code, _, err = run(capsys, "release", "local-gaussian", "breast-cancer", "-o", str(out),
                       "--ledger", str(ledger))
    _assert_one_line_error(code, err)
    assert "ledger" in err
    assert not out.exists()


@pytest.mark.parametrize("args", [["release", "local-gaussian", "digits", "-o", "x.csv", "--epsilon", "abc"],
                                  ["release", "no-such-mechanism", "digits", "-o", "x.csv"]],
                         ids=["bad-float", "unknown-mechanism"])
def test_usage_errors_are_one_line(capsys, args):
    code, _, err = run(capsys, *args)
    _assert_one_line_error(code, err)


def test_dpmix_accounting_commands_round_trip(capsys):
    from dpcore import accounting

    common = ["--ell", "64", "--n", "100000", "--T", "100000", "--d-x", "50", "--d-y", "10",
              "--delta", "1e-5"]
    code, out, err = run(capsys, "calibrate", "dpmix", "--epsilon", "2", *common)
    assert code == 0, err
    sigma = float(out.split("sigma_x = ")[1].split()[0])
    expected = accounting.dpmix_calibrate_sigma(epsilon=2, delta=1e-5, ell=64, n=100000,
                                                n_mixtures=100000, d_x=50, d_y=10)
    assert sigma == pytest.approx(expected, rel=1e-5)
    code, out, err = run(capsys, "epsilon", "dpmix", "--sigma-x", str(sigma), "--sigma-y", str(sigma),
                         *common)
    assert code == 0, err
    eps = float(out.split("epsilon = ")[1].split()[0])
    assert 2 * (1 - 1e-4) <= eps <= 2 * (1 + 1e-5)
    code, _, err = run(capsys, "epsilon", "dpmix", "--sigma-x", "-1", "--sigma-y", "1", *common)
    assert code == 2 and err.startswith("dpcore: error:") and "--sigma-x" in err


def test_dpmix_accounting_flags_use_the_library_names_and_keep_the_paper_aliases(capsys):
    common = ["--ell", "16", "--n", "5000", "--d-x", "20", "--d-y", "2", "--delta", "1e-5"]
    outs = []
    for t_flag, r_flag in (("--n-mixtures", "--sigma-ratio"), ("--T", "--ratio")):
        code, out, err = run(capsys, "calibrate", "dpmix", "--epsilon", "3", t_flag, "2000", r_flag, "2",
                             *common)
        assert code == 0, err
        outs.append(out)
    assert outs[0] == outs[1]
    sigma_x, sigma_y = (float(outs[0].split(f"{k} = ")[1].split()[0]) for k in ("sigma_x", "sigma_y"))
    assert sigma_y == pytest.approx(2 * sigma_x, rel=1e-5)
