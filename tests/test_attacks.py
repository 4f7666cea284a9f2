"""The membership-inference game and its empirical epsilon (dpcore.attacks, issue 18).

* the estimator: Clopper-Pearson limits against published values, the (epsilon, delta) trade-off
  curve;
* the game: the pair is neighbouring under each mechanism's relation, the position test's centres
  are the noise-free rows the noise is added to, the stop flag and progress work;
* soundness: for every registered mechanism at its defaults the empirical lower bound (95%) does
  not exceed the claimed epsilon;
* teeth: a deliberately mis-calibrated identity-laplace (noise scale / 2) is caught — its empirical
  epsilon exceeds the claim; and a NOT PRIVATE release (epsilon = inf) is caught on real data.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import dpcore.mechanisms._identity as identity_base
from dpcore import attacks
from dpcore.data import Dataset
from dpcore.mechanisms import MECHANISMS, get_mechanism


def box_dataset(n: int = 12, d: int = 2, seed: int = 0) -> Dataset:
    """Unsupervised rows in [0, 1]^d with public bounds; row 0 at the lower corner."""
    X = np.random.default_rng(seed).uniform(0.2, 0.8, size=(n, d))
    X[0] = 0.0
    return Dataset(X=X, y=None, feature_names=[f"x{i}" for i in range(d)], label_name=None,
                   task="unsupervised", bounds=np.tile([0.0, 1.0], (d, 1)), bounds_source="user")



# ------------------------------------------------------------------------------------ estimator
def test_clopper_pearson_matches_published_values():
    # exact binomial intervals as tabulated (e.g. Newcombe 1998, method 5; R binom.test)
    lo, hi = attacks.clopper_pearson(3, 20)
    assert float(lo) == pytest.approx(0.0321, abs=1e-4) and float(hi) == pytest.approx(0.3789, abs=1e-4)
    lo, hi = attacks.clopper_pearson(1, 10)
    assert float(lo) == pytest.approx(0.0025, abs=1e-4) and float(hi) == pytest.approx(0.4450, abs=1e-4)
    lo, hi = attacks.clopper_pearson(np.array([0, 30]), 30, 0.90)  # closed form at k = 0 and k = n
    assert lo[0] == 0.0 and hi[0] == pytest.approx(1 - 0.05 ** (1 / 30), rel=1e-9)
    assert hi[1] == 1.0 and lo[1] == pytest.approx(0.05 ** (1 / 30), rel=1e-9)


def test_lower_bound_of_a_perfect_separation_is_limited_by_the_trials():
    # FPR = FNR = 0 on m evaluation runs: the bound is log((1 - u)/u), u = 1 - 0.025^(1/m)
    lb = attacks.epsilon_lower_bound(np.zeros(100), np.ones(100))
    u = 1 - 0.025 ** (1 / 70)
    assert lb.n0 == lb.n1 == 70 and lb.epsilon == pytest.approx(math.log((1 - u) / u), rel=1e-9)
    with pytest.raises(ValueError, match="at least 4"):
        attacks.epsilon_lower_bound(np.zeros(3), np.ones(3))


def test_tradeoff_curve_is_the_two_inequalities():
    fpr = np.linspace(0, 1, 101)
    eps, delta = math.log(2), 0.01
    tpr = attacks.dp_tradeoff_curve(fpr, eps, delta)
    fnr = 1 - tpr
    assert np.all(fpr + 2 * fnr >= 1 - delta - 1e-12) and np.all(fnr + 2 * fpr >= 1 - delta - 1e-12)
    # and it is the largest such TPR (one of the two is tight, or TPR = 1)
    tight = np.isclose(fpr + 2 * fnr, 1 - delta) | np.isclose(fnr + 2 * fpr, 1 - delta) | (tpr == 1)
    assert tight.all()
    assert attacks.dp_tradeoff_curve(np.array([0.25]), math.log(2))[0] == pytest.approx(0.5)
    assert np.all(attacks.dp_tradeoff_curve(fpr, 0.0) == fpr)
    assert np.all(attacks.dp_tradeoff_curve(fpr, math.inf) == 1.0)


# ------------------------------------------------------------------------------------ the pair
def test_corner_pair_replaces_the_farthest_row_and_keeps_n_and_labels(small_digits):
    pair = attacks.membership_pair(small_digits, "upper")
    assert np.array_equal(pair.x_in, small_digits.bounds[:, 1])
    assert np.array_equal(pair.x_out, small_digits.X[pair.position])
    assert np.all(small_digits.bounds == [0.0, 16.0])  # equal widths: the scaled distance is L2
    dist = np.linalg.norm(small_digits.X - 16.0, axis=1)
    assert dist[pair.position] == dist.max()
    t_in, t_out = pair.table(small_digits, True), pair.table(small_digits, False)
    assert t_in.n_samples == t_out.n_samples == small_digits.n_samples
    assert np.array_equal(t_in.y, small_digits.y) and np.array_equal(t_out.X, small_digits.X)
    changed = np.flatnonzero(np.any(t_in.X != t_out.X, axis=1))
    assert changed.tolist() == [pair.position]


def test_row_target_and_element_relation(small_digits):
    pair = attacks.membership_pair(small_digits, 5)
    assert pair.position == 5 and np.array_equal(pair.x_in, small_digits.X[5])
    assert not np.array_equal(pair.x_out, pair.x_in)
    el = attacks.membership_pair(small_digits, "lower", relation="element", element_bound=0.25)
    moved = np.flatnonzero(el.x_in != el.x_out)
    assert moved.size == 1 and abs(el.x_in[moved[0]] - el.x_out[moved[0]]) == pytest.approx(0.25 * 16)
    row = attacks.membership_pair(small_digits, "upper", relation="row", row_bound=1.0)
    assert np.linalg.norm((row.x_in - row.x_out) / 16) == pytest.approx(1.0)
    for bad in ("middle", -1, small_digits.n_samples):
        with pytest.raises(ValueError):
            attacks.membership_pair(small_digits, bad)


@pytest.mark.parametrize("name", sorted(n for n, s in attacks.STATISTICS.items() if s == "position"))
def test_position_centres_are_the_noise_free_rows(name, small_digits):
    # The position test's centres come from a noise-free run on the two candidate rows with the
    # release's seed: they must equal the noise-free release of each whole table at that position.
    cls = get_mechanism(name)
    pair = attacks.membership_pair(small_digits, "upper")
    probe = attacks._release(cls, {}, pair.probe(small_digits), 7, epsilon=math.inf).data
    for member in (False, True):
        full = attacks._release(cls, {}, pair.table(small_digits, member), 7, epsilon=math.inf).data
        np.testing.assert_allclose(probe[int(member)], full[pair.position], rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------------------------ the game
def test_game_reports_roc_auc_claim_and_not_private_label(small_digits):
    seen = []
    res = attacks.membership_game("local-gaussian", {"epsilon": 1.0}, small_digits, trials=20,
                                  progress=lambda done, total, s0, s1: seen.append((done, s0.size)))
    assert seen[-1] == (20, 20) and len(seen) == 20
    assert res.trials == 20 and res.scores_in.shape == res.scores_out.shape == (20,)
    assert res.claimed_epsilon == 1.0 and res.delta == 1e-5 and res.neighbouring == "replace-one"
    assert res.fpr[0] == 0 and res.tpr[-1] == 1 and 0 <= res.auc <= 1
    assert "NOT differentially private" in res.notice
    text = attacks.plain_summary(res)
    assert "ε = 1" in text and "AUC" in text


def test_stop_flag_ends_the_game_early(small_digits):
    done: list[int] = []
    res = attacks.membership_game("identity-laplace", {}, small_digits, trials=100,
                                  progress=lambda d, total, s0, s1: done.append(d),
                                  stop=lambda: len(done) >= 12)
    assert res.stopped and res.trials == 12 and res.requested == 100 and res.scores_in.size == 12
    # a stop requested at once still keeps min_trials runs per world (an estimate needs some)
    res = attacks.membership_game("identity-laplace", {}, small_digits, trials=100, stop=lambda: True)
    assert res.stopped and res.trials == 10
    with pytest.raises(ValueError, match="at least"):
        attacks.membership_game("identity-laplace", {}, small_digits, trials=3)


@pytest.mark.slow
def test_a_resumed_game_draws_the_same_releases(small_digits):
    full = attacks.membership_game("rp-gaussian", {}, small_digits, trials=24, random_state=5)
    scores: tuple[list[float], list[float]] = ([], [])
    first = attacks.membership_game("rp-gaussian", {}, small_digits, trials=24, random_state=5, resume=scores,
                                    stop=lambda: len(scores[0]) >= 11)
    assert first.stopped and len(scores[0]) == 11  # the lists were extended in place
    resumed = attacks.membership_game("rp-gaussian", {}, small_digits, trials=24, random_state=5,
                                      resume=scores)
    np.testing.assert_array_equal(resumed.scores_in, full.scores_in)
    np.testing.assert_array_equal(resumed.scores_out, full.scores_out)
    assert resumed.lower_bound == full.lower_bound and not resumed.stopped


def test_point_epsilon_uses_the_measured_rates():
    lb = attacks.LowerBound(epsilon=0.1, threshold=0.0, direction=1,
                            inequality="FPR + e^eps FNR >= 1 - delta", fpr=0.1, fnr=0.5,
                            fpr_upper=0.2, fnr_upper=0.6, n0=100, n1=100)
    assert attacks.point_epsilon(lb) == pytest.approx(math.log(0.5 / 0.1))
    assert attacks.point_epsilon(lb, 0.1) == pytest.approx(math.log(0.4 / 0.1))
    swapped = replace(lb, inequality="FNR + e^eps FPR >= 1 - delta")
    assert attacks.point_epsilon(swapped) == pytest.approx(math.log(0.9 / 0.5))
    assert attacks.point_epsilon(replace(lb, fpr=0.0)) == math.inf
    assert attacks.point_epsilon(replace(lb, fnr=1.0)) == 0.0


def test_benchmark_script_prints_the_table(capsys):
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "attack_table.py"
    spec = importlib.util.spec_from_file_location("attack_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--mechanisms", "identity-laplace", "--epsilons", "10", "--trials", "12"]) == 0
    out = capsys.readouterr().out
    assert "| identity-laplace (position) | 10 |" in out and "12 trials per world" in out


def test_releases_without_a_public_map(small_digits):
    # jl-laplace keeps P secret: closest-row places the target by the noise-free run on the
    # candidate rows; at a huge epsilon the released target row is then the closest one
    res = attacks.membership_game("jl-laplace", {"epsilon": 1e4}, small_digits, trials=20,
                                  statistic="closest-row")
    assert res.statistic == "closest-row" and res.auc == 1.0
    # PCA-Gauss Alg. 1 (unsupervised) has a private W: the model test needs a map, the default
    # falls back to closest-row, and asking for "model" explicitly is refused
    unsup = replace(small_digits, y=None, task="unsupervised", label_name=None, classes=None)
    assert attacks.membership_game("pca-gauss", {}, unsup, trials=10).statistic == "closest-row"
    with pytest.raises(ValueError, match="no public map"):
        attacks.membership_game("pca-gauss", {}, unsup, trials=10, statistic="model")


def test_not_private_release_is_caught_on_real_rows(small_digits):
    # epsilon = inf: no noise, the released row at the position IS the target
    res = attacks.membership_game("local-gaussian", {"epsilon": math.inf}, small_digits, trials=100)
    u = 1 - 0.025 ** (1 / 70)  # no error on 70 evaluation runs: the most 100 trials can prove
    assert res.auc == 1.0 and res.lower_bound.epsilon == pytest.approx(math.log((1 - 1e-5 - u) / u))


# ------------------------------------------------------------------------------------ soundness
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_empirical_epsilon_never_exceeds_the_claim_at_defaults(name, narrow_digits):
    params = {}
    if "public_data" in MECHANISMS[name].extra_args:  # public by construction: random box rows
        lo, hi = narrow_digits.bounds[:, 0], narrow_digits.bounds[:, 1]
        params["public_data"] = np.random.default_rng(9).uniform(lo, hi, (60, lo.size))
    res = attacks.membership_game(name, params, narrow_digits, target="upper", trials=40, random_state=1)
    assert math.isfinite(res.claimed_epsilon) and res.extra["holds"]
    assert res.lower_bound.epsilon <= res.claimed_epsilon, (name, res.lower_bound)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(n for n, s in attacks.STATISTICS.items() if s == "position"))
@pytest.mark.parametrize("target", ["lower", 3])
def test_empirical_epsilon_never_exceeds_the_claim_with_more_trials(name, target, narrow_digits):
    res = attacks.membership_game(name, {"epsilon": 2.0}, narrow_digits, target=target, trials=400,
                                  random_state=2)
    assert res.lower_bound.epsilon <= res.claimed_epsilon, (name, target, res.lower_bound)


@pytest.mark.slow
def test_empirical_epsilon_exceeds_the_claim_when_the_noise_is_halved(monkeypatch):
    # identity-laplace on [0, 1]^2, k = 1, claim epsilon = 2: the upper corner replaces the row at
    # the lower corner. When the drawn B has two equal signs (half the releases) the pair attains
    # the exact sensitivity; with the noise scale halved those releases are 4-DP, not 2-DP.
    ds = box_dataset()
    params = {"epsilon": 2.0, "n_components": 1}
    good = attacks.membership_game("identity-laplace", params, ds, trials=1000, random_state=3)
    assert good.lower_bound.epsilon <= 2.0
    true_scale = identity_base.laplace_scale
    monkeypatch.setattr(identity_base, "laplace_scale", lambda s, e: true_scale(s, e) / 2)
    bad = attacks.membership_game("identity-laplace", params, ds, trials=1000, random_state=3)
    assert bad.claimed_epsilon == 2.0  # the card still claims 2
    assert bad.exceeds_claim and bad.lower_bound.epsilon > 2.0, bad.lower_bound


# ------------------------------------------------------------------------------------ the page
def attack_app(trials: int = 50):
    st_testing = pytest.importorskip("streamlit.testing.v1")
    at = st_testing.AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app" / "streamlit_app.py"),
                                      default_timeout=300)
    at.run()
    at.switch_page("../pages/attack.py").run()
    assert not at.exception, [e.value for e in at.exception]
    at.select_slider(key="p:attack_trials").set_value(trials).run()
    return at


def button(at, label: str):
    return next(b for b in at.button if b.label == label)


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


@pytest.mark.slow
def test_attack_page_runs_and_shows_auc_and_epsilon_beside_the_claim():
    at = attack_app()
    assert any("NOT differentially private" in w.value for w in at.warning)
    assert any("Run attack" in i.value for i in at.info) and not at.metric
    button(at, "Run attack").click().run()
    assert not at.exception, [e.value for e in at.exception]
    shown = metrics(at)
    assert 0.0 <= float(shown["AUC"]) <= 1.0
    assert 0.0 <= float(shown["Empirical ε (95% lower limit)"]) <= 1.0
    assert shown["Claimed ε (release card)"] == "1 (δ = 1e-05)"
    assert any("50 trials per world" in c.value for c in at.caption)
    assert any("An attacker who knows every other row" in m.value for m in at.markdown)
    assert len(at.get("plotly_chart")) == 2
    # cached per settings: a rerun shows the same numbers without running again
    at.run()
    assert metrics(at) == shown


def test_attack_page_stop_keeps_the_scores_drawn_so_far():
    at = attack_app()
    button(at, "Run attack").click().run()
    # What a Stop click during a run leaves behind: Streamlit ends the run, the scores drawn so far
    # stay in the session (the game extends these lists in place) and no result is stored.
    s0, s1 = at.session_state["_attack_partial"]["scores"]
    del s0[15:], s1[15:]
    at.session_state["_attack_results"] = {}
    button(at, "Stop the attack").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Stopped after 15 trials" in i.value for i in at.info)
    assert "AUC" in metrics(at)
    assert any("stopped early; 50 asked" in c.value for c in at.caption)


@pytest.mark.slow
def test_attack_page_flags_a_miscalibrated_mechanism(monkeypatch):
    # The page has teeth: identity-laplace with its noise scale halved, on a table whose training
    # split has rows at the lower corner, attacked with the upper corner, at a claim of 2.
    ds = box_dataset(n=40)
    ds.X[:10] = 0.0
    true_scale = identity_base.laplace_scale
    monkeypatch.setattr(identity_base, "laplace_scale", lambda s, e: true_scale(s, e) / 2)
    at = attack_app(trials=1000)
    at.session_state.dataset = ds
    at.session_state.dataset_label = "box"
    at.session_state.mechanism = "identity-laplace"
    at.session_state["p:identity-laplace:epsilon"] = 2.0
    at.session_state["p:identity-laplace:n_components"] = 1
    at.run()
    button(at, "Run attack").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert float(metrics(at)["Empirical ε (95% lower limit)"]) > 2.0
    assert any("MORE than the claimed ε = 2" in e.value for e in at.error)
