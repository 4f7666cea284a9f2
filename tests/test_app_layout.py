"""The app fits a 1280 x 720 projector and reads in plain words first (issue 33), checked without
a browser (AppTest and the configuration); the real-browser layout check is in tests/test_browser.py."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from app.card_text import card_in_words, noise_parts, plain_part
from app.explain import HOW, INTROS, LOCK_LEGEND
from app.launch import LAYOUT_SETTINGS
from dpcore.data import load_dataset
from dpcore.mechanisms import get_mechanism
from tests.test_app import goto, new_app

ROOT = Path(__file__).resolve().parents[1]


def test_layout_settings_of_the_config_file_and_the_launcher_agree():
    """``dp-explorer`` may start anywhere, where config.toml is not read: it passes the same layout."""
    theme = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["theme"]
    assert {f"theme.{k}": v for k, v in theme.items()} == {
        k: json.loads(v) if v.startswith("[") else v for k, v in LAYOUT_SETTINGS.items()}


# ------------------------------------------------------------------------ plain words first
#: what a formula or an internal name looks like in text (the full table and "How is this
#: computed?" may hold them; the main flow of a page may not)
FORMULA = ("S2 =", "S1 =", "sqrt(", "^T", "||", "BBP", "Zipf", "::", "LapPCA")


def _main_flow(block, skip=(HOW,)) -> list[str]:
    """Texts a page shows outside its "How is this computed?" expanders (markdown, captions, alerts,
    metric labels and values), in order, without icon codes (``:material/lock:``)."""
    out = []
    for child in getattr(block, "children", {}).values():
        if type(child).__name__ == "Expander" and getattr(child, "label", "") in skip:
            continue
        for attr in ("value", "label", "body"):
            v = getattr(child, attr, None)
            if isinstance(v, str) and v:
                out.append(re.sub(r":material/\w+:", "", v))
        out += _main_flow(child, skip)
    return out


@pytest.mark.parametrize("page", sorted(INTROS))
def test_every_page_opens_with_what_it_shows_and_what_to_try(page):
    at = goto(new_app(), page)
    first = at.main.markdown[0].value
    assert first == INTROS[page] and "**Try:**" in first
    children = list(at.main.children.values())
    assert type(children[0]).__name__ == "Title" and children[1].value == INTROS[page]


@pytest.mark.parametrize("mechanism", ["pca-gauss", "local-gaussian", "ron-gauss"])
def test_explore_and_privacy_say_the_noise_in_plain_words_with_the_table_behind_how(mechanism):
    for page in ("explore", "privacy"):
        at = goto(new_app(None if mechanism == "pca-gauss" else mechanism), page)
        flow = _main_flow(at.main)
        assert not [t for t in flow if any(f in t for f in FORMULA)], [t for t in flow if any(
            f in t for f in FORMULA)]
        assert any(t.startswith("**Noise added.**") for t in flow)
        how = [e for e in at.expander if e.label == HOW]
        assert len(how) == 1 and how[0].table, page  # the full table, formulas and sources
        assert "formula" in how[0].table[0].value.columns and "source" in how[0].table[0].value.columns
        assert not at.dataframe  # no table cut on the right: the full one is a wrapping st.table
        assert LOCK_LEGEND in [c.value for c in at.caption]  # the lock icon explained where it is shown


def test_privacy_page_of_dpmix_says_its_noise_in_words_with_the_accountant_behind_how():
    at = goto(new_app("dpmix"), "privacy")
    assert not at.exception, [e.value for e in at.exception]
    flow = _main_flow(at.main)
    said = [t for t in flow if t.startswith("Each of the ") and "Gaussian noise of standard deviation" in t]
    assert len(set(said)) == 1 and "**ε = " in said[0], flow
    assert not [t for t in flow if "Wang–Balle" in t or "T·ε'(α)" in t]
    how = [e for e in at.expander if e.label == HOW]
    assert len(how) == 1 and any("Wang–Balle" in c.value for c in how[0].caption)


def test_plain_part_names_every_statistic_without_symbols_or_internal_names():
    ds = load_dataset("digits")
    settings = [("pca-gauss", {}), ("pca-gauss", {"pca_source": "lap", "noise": "laplace"}),
                ("pca-gauss", {"pca_source": "analyze-gauss"}), ("ron-gauss", {}),
                ("ron-gauss", {"noise": "laplace"}), ("modips", {}), ("dpmix", {}), ("local-gaussian", {}),
                ("dppro", {}), ("jl-laplace", {}), ("identity-laplace", {}), ("rp-gaussian", {})]
    for name, kw in settings:
        rel = get_mechanism(name)(epsilon=1.0, random_state=0, **kw).release(ds)
        for rec in rel.noise:
            part = plain_part(rec.statistic)
            assert part and not any(c in part for c in "=^/:()"), (rec.statistic, part)
            assert "LapPCA" not in part and "Gauss" not in part, (rec.statistic, part)
        for line in noise_parts(rel.noise):
            assert not any(f in line for f in FORMULA), line
    assert plain_part("LapPCA: (1/n) Z^T Z (d x d)") == "PCA basis"
    assert plain_part("sum of PCA features of class 3") == "sums of the PCA features"
    assert plain_part("a new statistic: X^T X (4 x 4)") == "a new statistic"  # a rule nobody wrote yet


def test_card_in_words_has_no_internal_names():
    """The card of a LapPCA release read "LapPCA:: Laplace noise" (the statistic's name cut at " (")."""
    rel = get_mechanism("pca-gauss")(epsilon=1.0, pca_source="lap", noise="laplace",
                                     random_state=0).release(load_dataset("digits"))
    words = card_in_words(json.loads(rel.card_json()))
    assert "::" not in words and "LapPCA" not in words and "PCA basis" in words


def test_noise_parts_measure_the_noise_against_what_one_row_can_change():
    from dpcore.release import NoiseRecord

    recs = [NoiseRecord("class histogram (3 public classes)", 2 ** 0.5, 7.0, "gaussian", "L2"),
            NoiseRecord("mean of class 0", 2.0, 3.0, "laplace", "L1"),
            NoiseRecord("mean of class 1", 2.0, 4.0, "laplace", "L1")]
    lines = noise_parts(recs)
    assert lines[0] == "class counts: Gaussian noise of standard deviation 7, 4.95 times the most one row " \
                       "can change them."
    sd = [3 * 2 ** 0.5, 4 * 2 ** 0.5]  # a Laplace scale b has standard deviation b sqrt(2)
    assert lines[1] == (f"means (2): Laplace noise of standard deviation {sd[0]:.3g}–{sd[1]:.3g}, "
                        f"{sd[0] / 2:.3g}–{sd[1] / 2:.3g} times the most one row can change them.")


@pytest.mark.slow
def test_release_card_json_is_only_in_a_labelled_expander():
    at = goto(new_app(), "release")
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    holders = [e for e in at.expander if e.json]
    assert [e.label for e in holders] == ["The release card as JSON (the .card.json file)"]
    assert not [j for j in at.main.json if j not in holders[0].json]
    # the card in words has no formula: the public rule behind the automatic n_components ("BBP
    # threshold", "Zipf reference spectrum", "sqrt(d)") and the full noise table are behind HOW
    flow = _main_flow(at.main, skip=(HOW, holders[0].label))
    assert any("**Chosen automatically**" in t for t in flow)
    formulas = [t for t in flow if any(f in t for f in FORMULA)]
    assert not formulas, formulas
    how = [e for e in at.expander if e.label == HOW]
    assert len(how) == 1 and how[0].table and any("BBP" in m.value for m in how[0].markdown)
