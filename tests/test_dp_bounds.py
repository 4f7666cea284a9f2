"""DP bounds (dpcore.dp_bounds), bounds-file rules and templates (dpcore.bounds), and describe
keeping the data's range apart from anything --bounds takes."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpcore.bounds import resolve_bound_rules, template
from dpcore.cli import main
from dpcore.data import load_dataset, parse_bounds
from dpcore.dp_bounds import (
    apply_estimate,
    candidates,
    compose_release,
    estimate_bounds,
    exponential_quantile,
    quantile_scores,
)
from dpcore.exceptions import DataValidationError, PrivacyLeakWarning
from dpcore.ledger import LedgerEntry
from dpcore.mechanisms import get_mechanism
from dpcore.noise import SeededBits


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def _pmf(x: np.ndarray, cands: np.ndarray, alpha: float, epsilon: float) -> np.ndarray:
    """The exponential mechanism's exact output probabilities (float, from the exact scores)."""
    s = np.array([float(v) for v in quantile_scores(x, cands, Fraction(alpha))])
    w = np.exp(-epsilon * (s - s.min()) / 2)
    return w / w.sum()


# ------------------------------------------------------------------ the mechanism
def test_scores_match_opendp():
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    rng = np.random.default_rng(0)
    x = np.round(rng.normal(50, 10, 200), 1)
    cands = np.linspace(0, 100, 41)
    for alpha in (0.25, 0.125, 0.5, 0.05):
        den = Fraction(alpha).denominator  # OpenDP scales by the exact float level's denominator
        score = dp.t.make_quantile_score_candidates(
            dp.vector_domain(dp.atom_domain(T=float, nan=False), size=len(x)), dp.symmetric_distance(),
            cands.tolist(), alpha)
        theirs = score(x.tolist())
        ours = quantile_scores(x, cands, Fraction(alpha))
        assert np.allclose([float(v * den) for v in ours], theirs, rtol=1e-12, atol=0)
        assert score.map(2) == pytest.approx(den)  # replace-one (symmetric distance 2): sensitivity 1


def test_neighbours_change_each_probability_by_at_most_e_to_the_epsilon():
    """Worst-case search: every replacement of one row (by each candidate, and by values between
    them) changes no output probability by more than e^epsilon."""
    rng = np.random.default_rng(1)
    x = np.round(rng.uniform(0, 10, 30), 0)
    cands = np.arange(0.0, 11.0)
    epsilon = 0.7
    for alpha in (0.05, 0.5, 0.95):
        p = _pmf(x, cands, alpha, epsilon)
        worst = 0.0
        for i in range(x.size):
            for v in np.concatenate([cands, cands + 0.5, [-5.0, 50.0]]):
                y = x.copy()
                y[i] = v
                q = _pmf(y, cands, alpha, epsilon)
                worst = max(worst, float(np.max(np.abs(np.log(p / q)))))
        assert worst <= epsilon + 1e-12
        assert worst > 0.4 * epsilon  # the bound is not loose: some neighbour comes near it


def test_the_sampler_draws_the_exponential_mechanism_exactly():
    rng = np.random.default_rng(2)
    x = rng.normal(5, 2, 100)
    cands = np.linspace(0, 10, 11)
    p = _pmf(x, cands, 0.2, 0.3)
    bits = SeededBits(np.random.default_rng(3))
    draws = np.array([exponential_quantile(x, cands, 0.2, 0.3, bits) for _ in range(4000)])
    counts = np.array([(draws == c).sum() for c in cands])
    keep = p * draws.size >= 5
    expected = p[keep] * draws.size
    chi2 = ((counts[keep] - expected) ** 2 / expected).sum() + 0.0
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3, (counts, expected)


def test_candidates_cover_linear_and_log_scales():
    c = candidates(0, 1e6)
    assert c[0] == 0 and c[-1] == 1e6 and np.all(np.diff(c) > 0)
    small = c[(c > 10) & (c < 20)]
    assert small.size >= 5  # a column in [0, 16] still gets candidates 12 % apart
    assert candidates(-5, 5).min() == -5
    with pytest.raises(ValueError):
        candidates(3, 3)


def test_automatic_levels_keep_the_estimate_near_the_data():
    """With little epsilon per side, fixed 5 % / 95 % levels leave the many candidates outside the
    data nearly as likely as the right one; the automatic level (public: n, eps_q, m) does not."""
    from dpcore.dp_bounds import auto_level

    x = np.clip(np.random.default_rng(5).normal(200, 40, 3000), 0, 640)
    cands = candidates(0, 1000)
    eps = 0.5 / 12
    a = auto_level(x.size, eps, cands.size)
    assert 0.05 < a < 0.25 and auto_level(10**7, eps, cands.size) == 0.05 and auto_level(50, eps, 10) == 0.25
    bits = SeededBits(np.random.default_rng(6))
    auto = [exponential_quantile(x, cands, 1 - a, eps, bits) for _ in range(100)]
    fixed = [exponential_quantile(x, cands, 0.95, eps, bits) for _ in range(100)]
    assert np.quantile(auto, 0.9) < 1.2 * np.quantile(x, 1 - a)
    assert np.median(fixed) > 1.5 * np.quantile(x, 0.95)


# ------------------------------------------------------------------ estimates on a table
def _wide(n: int = 4000, d: int = 12, seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(np.clip(rng.normal(200, 40, (n, d)), 0, 640), columns=[f"f{j}" for j in range(d)])
    frame["y"] = (frame["f0"] + frame["f1"] > 400).astype(int)
    return frame


def test_every_column_gets_bounds_and_the_card_their_cost():
    frame = _wide()
    with pytest.warns(PrivacyLeakWarning):
        ds = load_dataset(frame, label="y", task="classification", classes=[0, 1], bounds={"f0": [0, 640]})
    assert ds.data_bound_columns() == [f"f{j}" for j in range(1, 12)]
    est = estimate_bounds(ds, 2.2, candidate_range=(0, 1000), random_state=0)
    assert est.n_sides == 22 and est.epsilon_per_side == pytest.approx(0.1)
    new = apply_estimate(ds, est)
    assert new.data_bound_columns() == [] and new.bounds_source == "dp"
    assert new.bounds[0].tolist() == [0, 640]  # a public bound is kept
    lo, hi = new.bounds[1:, 0], new.bounds[1:, 1]
    true_lo, true_hi = np.quantile(frame.iloc[:, 1:12], [0.05, 0.95], axis=0)
    assert np.all(np.abs(lo - true_lo) < 40) and np.all(np.abs(hi - true_hi) < 40)  # 4000 rows, eps 0.1
    release = get_mechanism("local-gaussian")(epsilon=1.0, delta=1e-6).release(new)
    release = compose_release(release, est)
    card = release.card()
    assert card["guarantee"]["epsilon"] == pytest.approx(3.2) and card["guarantee"]["holds"] is True
    assert card["details"]["epsilon_split"]["dp_bounds"] == 2.2
    assert card["details"]["dp_bounds"]["sides_estimated"] == 22
    assert sum(r["statistic"].startswith("DP bound") and r["distribution"] == "exponential-mechanism"
               for r in card["noise"]) == 22
    assert card["public_facts"]["bounds"]["f3"]["lo_source"] == "dp"
    assert card["public_facts"]["bounds"]["f0"]["lo_source"] == "user"
    assert LedgerEntry.from_card(card).epsilon == pytest.approx(3.2)  # composed in the ledger
    from app.card_text import card_in_words, report_html

    assert "2.2 for the DP bounds (22 quantile(s)" in card_in_words(card).replace("\\", "")
    assert "2.2 for the DP bounds" in report_html(card, dataset="wide.csv")


def test_only_missing_sides_are_estimated_and_nothing_to_estimate_is_said():
    frame = _wide(d=3)
    with pytest.warns(PrivacyLeakWarning):
        ds = load_dataset(frame, label="y", task="classification", classes=[0, 1],
                          bounds={"f0": [0, 640], "f1": [0, 640]})
    est = estimate_bounds(ds, 1.0, candidate_range={"f*": (0, 1000)}, random_state=0)
    assert est.n_sides == 2 and list(est.bounds) == ["f2"]
    public = load_dataset(frame, label="y", task="classification", classes=[0, 1], bounds={"f*": [0, 640]})
    with pytest.raises(DataValidationError, match="nothing to estimate"):
        estimate_bounds(public, 1.0)


def test_cli_dp_bounds_splits_the_epsilon_and_books_the_total(tmp_path, capsys):
    _wide(n=3000, d=6).to_csv(tmp_path / "t.csv", index=False)
    base = ["release", "local-gaussian", str(tmp_path / "t.csv"), "--label", "y", "--task", "classification",
            "--classes", "0,1", "--epsilon", "3", "--delta", "1e-6"]
    code, text = _cli(capsys, *base, "-o", str(tmp_path / "r0.csv"))
    assert code == 2 and "no public bounds" in text  # without --dp-bounds: refused as before
    code, text = _cli(capsys, *base, "-o", str(tmp_path / "r.csv"), "--dp-bounds", "1.2", "--dp-bounds-range",
                      "0", "1000", "--ledger", str(tmp_path / "L.json"), "--budget", "3")
    assert code == 0, text
    assert "epsilon 1.2 for 12 bound side(s)" in text and "gets epsilon 1.8" in text
    # the data's range was never used: no warning about bounds or the data (the release's noise notes
    # on stderr are about the mechanism)
    assert "computed from the private data" not in text
    card = json.loads((tmp_path / "r.card.json").read_text())
    assert card["guarantee"]["epsilon"] == pytest.approx(3.0) and card["parameters"]["epsilon"] == 1.8
    assert card["bounds_source"] == "dp" and card["differentially_private"] is True
    assert json.loads((tmp_path / "L.json").read_text())["total_epsilon"] == pytest.approx(3.0)
    code, text = _cli(capsys, *base, "-o", str(tmp_path / "r2.csv"), "--dp-bounds", "3")
    assert code == 2 and "must be less than --epsilon 3" in text


# ------------------------------------------------------------------ rules, template, describe
def test_bounds_rules_for_wide_tables():
    cols = [f"f{j}" for j in range(85)] + ["age", "workclass=Private"]
    rules = {"f*": [0, 640], "f7": [1, 2], "age": [17, 90], "workclass=*": None}
    out = resolve_bound_rules(rules, cols)
    assert out["f0"] == [0, 640] and out["f84"] == [0, 640] and out["f7"] == [1, 2]  # a name wins
    assert "workclass=Private" not in out and out["age"] == [17, 90]
    with pytest.raises(DataValidationError, match="matches no column"):
        resolve_bound_rules({"g*": [0, 1]}, cols)
    with pytest.raises(DataValidationError, match="unknown column"):
        resolve_bound_rules({"f85": [0, 1]}, cols)
    with pytest.raises(DataValidationError, match="patterns 'f\\*' and 'f1\\*'"):
        resolve_bound_rules({"f*": [0, 640], "f1*": [0, 10]}, cols)
    assert resolve_bound_rules({"f*": [0, 640], "f1*": [0, 640]}, cols)["f12"] == [0, 640]  # same value


def test_a_template_holds_no_value_and_reads_back_as_no_bounds(tmp_path):
    cols = ["a", "b c", "d"]
    for fmt in ("json", "csv"):
        text = template(cols, fmt)
        parsed = parse_bounds(text, f"t.{fmt}")
        assert parsed == {c: None for c in cols}


def test_cli_template_and_describe_keep_the_data_range_apart(tmp_path, capsys):
    frame = _wide(n=200, d=3)
    frame.to_csv(tmp_path / "t.csv", index=False)
    code, text = _cli(capsys, "bounds-template", str(tmp_path / "t.csv"), "--label", "y", "-o",
                      str(tmp_path / "b.json"))
    assert code == 0
    assert json.loads((tmp_path / "b.json").read_text()) == {"f0": None, "f1": None, "f2": None}
    code, text = _cli(capsys, "bounds-template", str(tmp_path / "t.csv"), "-o", str(tmp_path / "b.json"))
    assert code == 2 and "exists" in text
    assert main(["describe", str(tmp_path / "t.csv"), "--label", "y", "--task", "classification",
                 "--classes", "0,1", "--json"]) == 0
    out = capsys.readouterr().out
    info = json.loads(out)
    assert info["public_bounds"] == {} and info["columns_without_public_bounds"] == ["f0", "f1", "f2"]
    assert set(info["private_data_range"]["columns"]["f0"]) == {"min", "max"}
    # describe's output can no longer be fed back as bounds
    (tmp_path / "d.json").write_text(out)
    code, text = _cli(capsys, "release", "local-gaussian", str(tmp_path / "t.csv"), "--label", "y", "--task",
                      "classification", "--classes", "0,1", "--bounds", str(tmp_path / "d.json"), "-o",
                      str(tmp_path / "r.csv"))
    assert code == 2 and not (tmp_path / "r.csv").exists()
    code, text = _cli(capsys, "describe", str(tmp_path / "t.csv"), "--label", "y", "--task", "classification",
                      "--classes", "0,1")
    assert "NOT a bound to pass to --bounds" in text and "data min" in text and "bounds-template" in text
    # a filled template with a rule works
    (tmp_path / "b2.json").write_text(json.dumps({"f*": [0, 640]}))
    code, text = _cli(capsys, "release", "local-gaussian", str(tmp_path / "t.csv"), "--label", "y", "--task",
                      "classification", "--classes", "0,1", "--bounds", str(tmp_path / "b2.json"), "-o",
                      str(tmp_path / "r.csv"))
    assert code == 0, text
    assert math.isclose(json.loads((tmp_path / "r.card.json").read_text())["guarantee"]["epsilon"], 1.0)


# ------------------------------------------------------------------ the app's button
@pytest.mark.slow
def test_app_estimates_dp_bounds_charges_them_and_records_them_on_the_card(tmp_path):
    testing = pytest.importorskip("streamlit.testing.v1")
    from pathlib import Path

    from app.ledger import store as app_store

    root = Path(__file__).resolve().parents[1]
    at = testing.AppTest.from_file(str(root / "app" / "streamlit_app.py"), default_timeout=120)
    at.run()
    at.switch_page("../pages/data.py").run()
    at.radio(key="p:data_source").set_value("Upload a file").run()
    data = _wide(n=3000, d=6).to_csv(index=False).encode()
    at.get("file_uploader")[0].set_value(("wide.csv", data, "text/csv")).run()
    at.selectbox(key="upload_label").select("y").run()
    at.selectbox(key="upload_task").select("classification").run()
    at.text_input(key="upload_classes").input("0,1").run()
    next(b for b in at.button if b.label == "Use this table").click().run()
    assert at.session_state.dataset.bounds_source == "data"
    at.session_state[f"dp_bounds:{at.session_state.dataset.fingerprint[:12]}"] = True  # the user opens it
    at.run()
    at.number_input(key="dpb_eps").set_value(1.2).run()
    at.number_input(key="dpb_lo").set_value(0.0).run()
    at.number_input(key="dpb_hi").set_value(1000.0).run()
    at.number_input(key="p:budget").set_value(5.0).run()
    next(b for b in at.button if b.label.startswith("Estimate the bounds with DP")).click().run()
    assert not at.exception, [e.value for e in at.exception]
    ds = at.session_state.dataset
    assert ds.bounds_source == "dp" and not ds.data_bound_columns()
    key = at.session_state.dataset_key
    ledger = app_store().ledger(key)
    assert [(e.mechanism, e.epsilon) for e in ledger.entries] == [("dp-bounds", 1.2)] and ledger.budget == 5.0
    at.switch_page("../pages/release.py").run()
    assert not [c for c in at.checkbox if c.key == "optin_unbounded"]  # the guarantee holds now
    assert any("DP estimates" in i.value for i in at.info)
    next(b for b in at.button if b.label == "Draw release").click().run()
    card = json.loads(at.session_state.pending_release["card"])
    assert card["guarantee"]["holds"] is True and card["bounds_source"] == "dp"
    assert card["details"]["dp_bounds"]["epsilon"] == 1.2
    # the card in words says what the bounds cost and that it was charged on its own
    words = [m.value.replace("\\", "") for m in at.markdown]
    assert any("DP bounds" in w and "cost epsilon = 1.2" in w for w in words)
    assert app_store().ledger(key).total_epsilon == pytest.approx(2.2)
