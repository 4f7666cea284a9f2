"""``dpcore release auto``: the recommended mechanism and settings for the table's public facts, as
an untouched CLI call gives them (dpcore.calibration.recommended_mechanism)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dpcore.calibration import default_delta, recommended_mechanism
from dpcore.cli import main


def _card(path) -> dict:
    return json.loads(path.with_suffix(".card.json").read_text())


def test_auto_on_images_is_the_rule_for_images(tmp_path, capsys):
    out = tmp_path / "d.csv"
    assert main(["release", "auto", "digits", "-o", str(out), "--epsilon", "1"]) == 0
    err = capsys.readouterr().err
    card = _card(out)
    rule = recommended_mechanism("classification", 1797, 64, epsilon=1.0, n_classes=10, image_shape=(8, 8))
    assert card["mechanism"] == rule["mechanism"] == "pca-gauss" and "auto: pca-gauss" in err
    assert card["details"]["pca_source"] == "dct" and card["details"]["covariance_type"] == "tied"
    assert card["details"]["chosen_by"]["mechanism"] == "pca-gauss"
    # delta left empty: Gaussian noise with the automatic delta min(1e-5, n^-1.5)
    assert card["guarantee"]["kind"] == "approx"
    assert card["guarantee"]["delta"] == pytest.approx(default_delta(1797))
    assert pd.read_csv(out).shape == (1797, 65)


def test_auto_on_a_labelled_table_and_an_unlabelled_one(tmp_path, capsys):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.uniform(0, 10, 800), "b": rng.uniform(0, 5, 800)})
    frame["y"] = np.where(frame["a"] + rng.normal(0, 1, 800) > 5, "yes", "no")
    frame.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "b.json").write_text(json.dumps({"a": [0, 10], "b": [0, 5]}))
    common = ["--bounds", str(tmp_path / "b.json"), "--epsilon", "2", "--delta", "1e-6"]
    out = tmp_path / "l.csv"
    assert main(["release", "auto", str(tmp_path / "t.csv"), "-o", str(out), "--label", "y", "--task",
                 "classification", "--classes", "no,yes", *common]) == 0
    card = _card(out)
    assert card["mechanism"] == "pca-gauss" and card["guarantee"]["delta"] == pytest.approx(1e-6)
    assert list(pd.read_csv(out).columns) == ["a", "b", "y"]
    frame.drop(columns="y").to_csv(tmp_path / "u.csv", index=False)
    out = tmp_path / "u_out.csv"
    assert main(["release", "auto", str(tmp_path / "u.csv"), "-o", str(out), "--label", "", *common]) == 0
    assert _card(out)["mechanism"] == "ron-gauss"
    assert "auto: ron-gauss" in capsys.readouterr().err


def test_auto_refuses_what_every_release_refuses(tmp_path, capsys):
    assert main(["release", "auto", "digits", "-o", str(tmp_path / "x.csv"), "--epsilon", "inf"]) == 2
    assert "NOT PRIVATE" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
