"""The default unsupervised release against the isotropic null (issue 13, items 5 and 6).

* the public rule :func:`dpcore.unsupervised.recommended_unsupervised` (n, d, epsilon, delta only)
  and the recommended mechanism built on it;
* its predicted centring error is the DP mean's actual error (RON-Gauss releases);
* ``ari_null`` is the null's expected ARI (averaged over independent null releases), with less
  spread than a single draw;
* on small bundled tables the default unsupervised release beats the null at epsilon = 1, by the
  paired difference over several releases (the protocol of ``benchmarks/unsupervised_null.py``).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dpcore.accounting import zcdp_rho
from dpcore.calibration import recommended_mechanism
from dpcore.mechanisms import RONGauss
from dpcore.unsupervised import MEAN_FRACTIONS, recommended_unsupervised, unsupervised_error
from dpcore.utility import EvalSettings, clustering_metrics, mean_interval, real_reference

ROOT = Path(__file__).resolve().parents[1]


def _load_benchmark():
    name = "unsupervised_null"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "unsupervised_null.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# ------------------------------------------------------------------------------------ the rule
@pytest.mark.parametrize(("n", "d"), [(331, 10), (426, 30), (1347, 64), (24_420, 105), (7500, 784)])
@pytest.mark.parametrize("delta", [1e-6, None])
def test_rule_is_the_minimiser_of_its_stated_error_over_public_facts(n, d, delta):
    rule = recommended_unsupervised(n, d, epsilon=1.0, delta=delta)
    params = rule["parameters"]
    p, (f, rest) = params["n_components"], params["epsilon_split"]
    assert rule["mechanism"] == "ron-gauss" and 1 <= p < d and f + rest == pytest.approx(1.0)
    assert (params.get("noise"), params.get("delta")) == (("gaussian", delta) if delta else (None, None))
    # the minimum over the whole grid (p, mean share), recomputed here
    # (model_mean: half of the mean's share centres the rows, half is the model's mean)
    assert params["model_mean"] is True
    grid = [unsupervised_error(n, d, epsilon=1.0, delta=delta, mean_fraction=g / 2,
                               covariance_fraction=1 - g)["error"] for g in MEAN_FRACTIONS]
    assert rule["predicted_error"] == pytest.approx(min(float(e.min()) for e in grid), rel=1e-12)
    # deterministic: public facts in, the same setting out
    assert recommended_unsupervised(n, d, epsilon=1.0, delta=delta) == rule
    if delta is not None:
        assert recommended_mechanism("unsupervised", n, d, epsilon=1.0, delta=delta)["parameters"] == params
    else:  # the recommended setting without a delta: Gaussian noise with the automatic delta
        from dpcore.calibration import default_delta

        automatic = dict(recommended_unsupervised(n, d, epsilon=1.0, delta=default_delta(n))["parameters"])
        automatic.pop("delta")
        assert recommended_mechanism("unsupervised", n, d, epsilon=1.0, delta=None)["parameters"] == automatic


def test_rule_responds_to_the_noise_as_derived():
    # Gaussian noise: the L2 sensitivities do not grow with p, so a larger p only helps; Laplace
    # noise grows like p + 1 per entry, so p stays small
    g = recommended_unsupervised(1347, 64, epsilon=1.0, delta=1e-6)["parameters"]["n_components"]
    lap = recommended_unsupervised(1347, 64, epsilon=1.0)["parameters"]["n_components"]
    assert g == 63 and lap < 10
    # fewer rows: a larger centring error, so a larger share for the DP mean
    small = recommended_unsupervised(300, 64, epsilon=1.0, delta=1e-6)["parameters"]["epsilon_split"][0]
    large = recommended_unsupervised(100_000, 64, epsilon=1.0, delta=1e-6)["parameters"]["epsilon_split"][0]
    assert small > large
    # no noise: the whole basis, the paper's split
    assert recommended_unsupervised(500, 12, epsilon=math.inf)["parameters"] == {
        "n_components": 11, "epsilon_split": (0.3, 0.7), "model_mean": True}
    with pytest.raises(ValueError, match="2 features"):
        recommended_unsupervised(500, 1, epsilon=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        recommended_unsupervised(500, 10, epsilon=0.0)


@pytest.mark.parametrize("delta", [1e-6, None])
def test_predicted_centring_error_is_the_dp_means_error(delta):
    # E ||mu_DP - mu||^2 over releases, against the rule's 8 d^2/(n f eps)^2 (Laplace) or
    # 2 d/(n^2 f rho) (Gaussian); the Gaussian sampler reserves a little slack, so slightly more
    rng = np.random.default_rng(0)
    n, d, f = 400, 12, 0.5
    X = rng.uniform(0, 1, size=(n, d))
    kw = dict(n_components=3, epsilon_split=(f, 1 - f), bounds=(0, 1), task="unsupervised")
    kw.update(noise="gaussian", delta=delta) if delta is not None else kw.update(noise="laplace")
    mu = RONGauss(epsilon=math.inf, random_state=0, **kw).explore(X)[1]["mu_dp"]
    err = [np.sum((RONGauss(epsilon=1.0, random_state=s, **kw).explore(X)[1]["mu_dp"] - mu) ** 2)
           for s in range(60)]
    pred = unsupervised_error(n, d, epsilon=1.0, delta=delta, mean_fraction=f)["centring_error"]
    if delta is not None:
        assert pred == pytest.approx(2 * d / (n * n * f * zcdp_rho(1.0, delta)))
    # 60 releases of d = 12 coordinates: the mean of the squared error is within ~10% of its expectation
    assert 0.8 * pred < np.mean(err) < 1.35 * pred


def test_model_mean_is_off_in_the_papers_mode_and_its_sensitivity_holds_for_unit_rows():
    from dpcore.mechanisms.ron_gauss import augmented_mean_sensitivity

    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, size=(300, 8))
    # p and the split given: the paper's Alg. 3 (model_mean automatic = off)
    kw = dict(epsilon=1.0, n_components=3, epsilon_split=(0.3, 0.7), bounds=(0, 1), random_state=0,
              noise="laplace")
    paper = RONGauss(**kw).release(X)
    assert len(paper.noise) == 2 and "with the DP mean" not in paper.details["algorithm"]
    rel = RONGauss(model_mean=True, **kw).release(X)
    rec = rel.noise[2]
    assert rec.statistic == "mean of the projected rows x~" and rel.guarantee.epsilon == pytest.approx(1.0)
    assert rel.details["epsilon_parts"] == pytest.approx({"mean": 0.15, "augmented_mean": 0.15,
                                                          "covariance": 0.7})
    s1, s2 = augmented_mean_sensitivity(3, 300, 0.0)
    assert rec.sensitivity == pytest.approx(s1) and s1 == pytest.approx(2 * math.sqrt(3) / 300)
    # worst case over projected rows of norm <= 1: +-(1, 1, 1)/sqrt(3) attains the L1 bound, and no
    # pair of random unit vectors exceeds either bound
    u = np.ones(3) / math.sqrt(3)
    assert np.abs(u - (-u)).sum() / 300 == pytest.approx(s1)
    V = rng.normal(size=(2, 20_000, 3))
    V /= np.linalg.norm(V, axis=2, keepdims=True)
    assert np.abs(V[0] - V[1]).sum(axis=1).max() / 300 <= s1 + 1e-15
    assert np.linalg.norm(V[0] - V[1], axis=1).max() / 300 <= s2 + 1e-15
    # the release is centred at the model's DP mean (within sampling error), the paper's at 0
    rel, diag = RONGauss(model_mean=True, **kw).explore(X, n_samples=20_000)
    Z, m = np.asarray(rel.data), diag["mean_dp_augmented"]
    assert m.shape == (3,) and np.linalg.norm(m) > 0.05
    assert np.all(np.abs(Z.mean(axis=0) - m) < 5 * Z.std(axis=0) / math.sqrt(20_000))
    Z0 = np.asarray(RONGauss(**kw).release(X, n_samples=20_000).data)
    assert np.all(np.abs(Z0.mean(axis=0)) < 5 * Z0.std(axis=0) / math.sqrt(20_000))


@pytest.mark.parametrize("delta", [None, 1e-6])
def test_unsupervised_defaults_are_the_public_rule_and_given_values_win(delta):
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, size=(400, 12))
    base = dict(epsilon=1.0, bounds=(0, 1), random_state=0, delta=delta,
                noise="laplace" if delta is None else "auto")
    rule = recommended_unsupervised(400, 12, epsilon=1.0, delta=delta)["parameters"]
    auto = RONGauss(**base).release(X)
    f = rule["epsilon_split"][0]
    assert auto.details["n_components"] == rule["n_components"]
    assert "with the DP mean" in auto.details["algorithm"]
    rec = auto.details["recommended"]
    assert rec["chosen"]["automatic"] == ["n_components", "epsilon_split", "model_mean"]
    assert rec["chosen"]["epsilon_split"] == rule["epsilon_split"] and "public rule" in rec["chosen"]["why"]
    assert auto.parameters["epsilon_split"] is None and auto.parameters["model_mean"] is None
    if delta is None:  # Laplace: the parts are the rule's fractions of epsilon
        assert auto.details["epsilon_parts"] == pytest.approx(
            {"mean": f / 2, "augmented_mean": f / 2, "covariance": 1 - f})
    else:
        assert rec["parameters"]["noise"] == "gaussian" and rec["inputs"]["delta"] == delta
    # p given: the rule's best mean fraction for that p (minimised over MEAN_FRACTIONS only)
    fixed = RONGauss(n_components=2, **base).release(X)
    errors = {g: unsupervised_error(400, 12, epsilon=1.0, delta=delta, mean_fraction=g / 2,
                                    covariance_fraction=1 - g)["error"][1] for g in MEAN_FRACTIONS}
    assert fixed.details["recommended"]["chosen"]["epsilon_split"][0] == min(errors, key=errors.get)
    assert fixed.details["n_components"] == 2 and fixed.details["recommended"]["chosen"]["automatic"] == [
        "epsilon_split", "model_mean"]
    # an explicit value always wins; with labels the automatic split is the paper's
    off = RONGauss(model_mean=False, **base).release(X)
    assert "with the DP mean" not in off.details["algorithm"] and off.details["n_components"] == rule[
        "n_components"]
    y = (X[:, 0] > 0.5).astype(int)
    lab = RONGauss(n_components=3, classes=[0, 1], **{**base, "delta": None}).release(X, y)
    parts = lab.details["epsilon_parts"]  # the DP class histogram first, then the paper's 0.3 / 0.7
    assert parts["mean"] / (parts["mean"] + parts["covariance"]) == pytest.approx(0.3)
    assert "chosen" not in lab.details.get("recommended", {})


# ------------------------------------------------------------------------------------ the null
@pytest.mark.slow
def test_null_ari_is_an_average_with_less_spread_than_one_draw():
    # two far-apart blobs: almost any cut through the centre separates them, so one null draw
    # scores 1 or much less depending on its random direction
    rng = np.random.default_rng(0)
    lab = rng.integers(0, 2, 1200)
    X = np.c_[lab * 6.0, rng.normal(size=(1200, 4)) * 2.0] + rng.normal(scale=0.5, size=(1200, 5))
    ref = real_reference(X[600:], None, EvalSettings(k_range=(2, 2)))

    def null_ari(seed: int, draws: int) -> float:
        settings = EvalSettings(k_range=(2, 2), random_state=seed, null_draws=draws)
        return clustering_metrics(X[:600], X[600:], X[600:], settings=settings, reference=ref)["ari_null"]

    one = [null_ari(s, 1) for s in range(12)]
    avg = [null_ari(s, 8) for s in range(12)]
    assert np.std(avg) < 0.6 * np.std(one)
    assert abs(np.mean(avg) - np.mean(one)) < 0.2
    with pytest.raises(ValueError, match="null_draws"):
        EvalSettings(null_draws=0)


# ------------------------------------------------------------------------------------ the claim
#: releases per table: breast-cancer's paired differences spread widely (0.01-0.34 over 5 releases;
#: with 5 or 8 the interval's lower end was -0.03 / -0.02 on some seeded streams), so it gets 20
#: (benchmarks/unsupervised_null.py --trials 20: 0.234 [0.136, 0.332]); 5 elsewhere
TRIALS = {"breast-cancer": 20}


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["digits", "breast-cancer"])
def test_plain_ron_gauss_on_unlabelled_data_beats_the_null_at_epsilon_1(dataset):
    # RONGauss(epsilon=1, delta=1e-6) with nothing else: the automatic p, split and model mean
    bench = _load_benchmark()
    split = bench.unsupervised_split(dataset)
    ref = bench.real_reference(split[1].X, split[0].bounds, EvalSettings(random_state=0))
    res = bench.compare(dataset, "ron-gauss", "defaults", {"epsilon": 1.0, "delta": 1e-6}, split, ref,
                        trials=TRIALS.get(dataset, 5))
    _, lo, _ = mean_interval(res.ari_real - res.ari_null)
    assert res.measurable and lo > 0, (dataset, res.ari_real, res.ari_null)


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["digits", "breast-cancer", "diabetes"])
def test_default_unsupervised_release_beats_the_null_at_epsilon_1(dataset):
    bench = _load_benchmark()
    split = bench.unsupervised_split(dataset)
    n, d = split[0].X.shape
    rec = recommended_mechanism("unsupervised", n, d, epsilon=1.0, delta=1e-6)
    ref = bench.real_reference(split[1].X, split[0].bounds, EvalSettings(random_state=0))
    res = bench.compare(dataset, rec["mechanism"], "recommended", {"epsilon": 1.0, **rec["parameters"]},
                        split, ref, trials=TRIALS.get(dataset, 5))
    assert res.measurable
    _, lo, _ = mean_interval(res.ari_real - res.ari_null)
    # the paired difference's 95% interval lies above 0 (benchmarks/unsupervised_null.py --trials 20:
    # digits 0.120 [0.108, 0.133], breast-cancer 0.234 [0.136, 0.332], diabetes 0.465 [0.411, 0.518])
    assert lo > 0, (dataset, res.ari_real, res.ari_null)
    assert res.beats_null


def test_benchmark_table_prints_the_p_the_rule_chose_for_default_rows():
    """A default row's p column is the p its releases used (``(automatic)``: chosen by the rule,
    the card's ``details["recommended"]["chosen"]``), not the word "default"; a mechanism without
    p prints a dash."""
    bench = _load_benchmark()
    split = bench.unsupervised_split("diabetes")
    ref = bench.real_reference(split[1].X, split[0].bounds, EvalSettings(random_state=0))
    auto = bench.compare("diabetes", "ron-gauss", "defaults", {"epsilon": 1.0, "delta": 1e-6}, split, ref,
                         trials=1)
    n, d = split[0].X.shape
    rule = recommended_unsupervised(n, d, epsilon=1.0, delta=1e-6)["parameters"]["n_components"]
    rel = RONGauss(epsilon=1.0, delta=1e-6, random_state=0).release(split[0])
    assert auto.n_components == rel.details["recommended"]["chosen"]["n_components"] == rule
    given = bench.compare("diabetes", "ron-gauss", "p = 2", {"epsilon": 1.0, "n_components": 2}, split, ref,
                          trials=1)
    table = bench.markdown_table([auto, given, replace(given, n_components=None)])
    rows = table.splitlines()[2:]
    assert rows[0].split(" | ")[2] == f"{rule} (automatic)"
    assert rows[1].split(" | ")[2] == "2" and rows[2].split(" | ")[2] == "—"
    assert "default" not in table.replace("defaults", "")
