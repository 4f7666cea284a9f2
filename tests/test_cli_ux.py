"""The command line as users meet it (issue 16): options listed in ``release --help``, ``describe
FILE`` shows bounds and categories, errors name flags, and no help text or card cites "SPEC" (a
document users do not have)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcore.cli import cli_wording, main
from dpcore.mechanisms import MECHANISMS


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's --help and usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_release_help_lists_every_option_of_every_mechanism(capsys):
    code, out, _ = run(capsys, "release", "--help")
    assert code == 0
    for name, cls in MECHANISMS.items():
        joined = out.replace("\n      ", " ")  # wrapped lines of one mechanism
        line = next((ln for ln in joined.split("\n  ") if ln.startswith(f"{name}: ")), None)
        assert line is not None, name
        for p in cls.params:
            assert p.cli_flag[2:] in line, (name, p.name)
    for flag in ("--output", "--bounds", "--categories", "--label", "--task", "--ledger"):
        assert flag in out
    # and every option a mechanism's own help shows (the options shared by all mechanisms too)
    _, own, _ = run(capsys, "release", "local-gaussian", "--help")
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", own))
    assert {"--delta-budget", "--engine", "--output-space"} <= flags
    assert not sorted(f for f in flags if f not in re.findall(r"(?<![\w-])--[a-z][a-z-]*", out))


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_mechanism_help_groups_its_parameters(capsys, name):
    code, out, _ = run(capsys, "release", name, "--help")
    assert code == 0 and out.startswith(f"usage: dpcore release {name} ")
    section = out.split(f"{name} parameters")[1]
    for p in MECHANISMS[name].params:
        assert p.cli_flag in section
    assert "input data:" in out


def test_describe_file_prints_bounds_and_categories(capsys, tmp_path):
    code, out, _ = run(capsys, "describe", "digits")
    assert code == 0
    assert "px_0 .. px_63 (64 columns): [0, 16]  metadata" in out
    assert "classes: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9" in out
    csv = tmp_path / "people.csv"
    csv.write_text("age,city,y\n30,Oslo,0\n41,Rome,1\n52,Oslo,0\n")
    cats = tmp_path / "cats.json"
    cats.write_text(json.dumps({"city": ["Oslo", "Rome", "Paris"]}))
    bounds = tmp_path / "bounds.json"
    bounds.write_text(json.dumps({"age": [18, 99]}))
    code, out, _ = run(capsys, "describe", str(csv), "--label", "y", "--task", "classification",
                       "--categories", str(cats), "--bounds", str(bounds))
    assert code == 0, out
    assert "age: [18, 99]  user" in out
    assert "city: Oslo, Rome, Paris" in out
    code, out, _ = run(capsys, "describe", str(csv), "--label", "y", "--task", "classification",
                       "--categories", str(cats), "--bounds", str(bounds), "--json")
    info = json.loads(out)
    assert info["public_bounds"]["age"] == [18.0, 99.0] and info["public_bounds_sources"]["age"] == "user"
    assert info["categories"] == {"city": ["Oslo", "Rome", "Paris"]}


@pytest.mark.parametrize(("rows", "extra", "flag", "python"), [
    ("a,b,y\n1,x,0\n2,z,1\n3,x,0\n", [], "--categories FILE", "categories={"),
    ("a,y\n1,0\n,1\n3,0\n", [], "--missing", "missing='"),
    ("a,b,y\n1,2,0\n2,3,1\n3,1,0\n", ["--n-components", "5", "--data-bounds"], "--n-components",
     "n_components"),
])
def test_errors_name_flags_not_python_syntax(capsys, tmp_path, rows, extra, flag, python):
    csv = tmp_path / "t.csv"
    csv.write_text(rows)
    code, _, err = run(capsys, "release", "ron-gauss", str(csv), "-o", str(tmp_path / "o.csv"),
                       "--label", "y", "--task", "classification", "--classes", "0,1", *extra)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert flag in err and python not in err, err
    assert not (tmp_path / "o.csv").exists()


def test_cli_wording_leaves_other_words_alone():
    assert cli_wording("epsilon must be > 0, got -1") == "--epsilon must be > 0, got -1"
    assert cli_wording("the epsilon on the card") == "the epsilon on the card"
    assert cli_wording("got ell=5000") == "got --ell=5000"


def _no_spec(text: str, where: str) -> None:
    assert "SPEC" not in text, f"{where} cites SPEC, which users do not have: {text[:200]}"


@pytest.mark.slow
def test_no_help_text_or_description_cites_spec(capsys):
    for argv in (["--help"], ["release", "--help"], ["epsilon", "dpmix", "--help"],
                 ["calibrate", "dpmix", "--help"], ["describe", "--help"]):
        _no_spec(run(capsys, *argv)[1], " ".join(argv))
    for name in MECHANISMS:
        _no_spec(run(capsys, "release", name, "--help")[1], f"release {name} --help")
        _no_spec(run(capsys, "describe", name, "--json")[1], f"describe {name}")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_no_release_card_cites_spec(capsys, tmp_path, name):
    out = tmp_path / "o.csv"
    extra = []
    if "public_data" in MECHANISMS[name].extra_args:  # generated rows: public by construction
        rng = np.random.default_rng(0)
        public = pd.DataFrame(rng.integers(0, 17, size=(200, 64)), columns=[f"px_{j}" for j in range(64)])
        public["label"] = rng.integers(0, 10, size=200)
        public.to_csv(tmp_path / "public.csv", index=False)
        extra = ["--public-data", str(tmp_path / "public.csv")]
    code, _, err = run(capsys, "release", name, "digits", "-o", str(out), *extra)
    assert code == 0, err
    _no_spec(Path(str(out).replace(".csv", ".card.json")).read_text(), f"the {name} card")
