"""RON-Gauss noise="gaussian": L2 sensitivities (worst-case searches), sigmas (statistics), zCDP
composition and conversion (against dp-accounting), the card; Alg. 4's DP mean of [x~, y]."""

from __future__ import annotations

import json
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp

from dpcore.accounting import zcdp_epsilon, zcdp_rho
from dpcore.calibration import default_delta
from dpcore.mechanisms import RONGauss
from dpcore.mechanisms.ron_gauss import (
    augmented_mean_sensitivity,
    gaussian_coordinates,
    ron_covariance_l2_sensitivity,
)

INF = float("inf")


def _data(n=300, d=20, seed=0):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=(n, d))


def _ball(rng, m, k):
    """``m`` random points of the unit ball in R^k, half of them on the sphere."""
    x = rng.standard_normal((m, k))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x[: m // 2] *= rng.uniform(0, 1, size=(m // 2, 1)) ** (1 / k)
    return x


def _triu_l2(A, iu):
    return np.linalg.norm(A[..., iu[0], iu[1]], axis=-1)


# ------------------------------------------------------------------------------ worst-case searches
@pytest.mark.parametrize("p", [1, 3, 8])
def test_second_moment_l2_sensitivity_holds_and_is_attained(p):
    """Upper triangle (diagonal once) of u u^T - v v^T over the unit ball: <= sqrt(2) whatever p,
    attained by two orthogonal unit rows; n divides it."""
    rng = np.random.default_rng(p)
    iu = np.triu_indices(p)
    u, v = _ball(rng, 20000, p), _ball(rng, 20000, p)[::-1]
    diff = np.einsum("ni,nj->nij", u, u) - np.einsum("ni,nj->nij", v, v)
    stated = ron_covariance_l2_sensitivity(1)
    assert stated == pytest.approx(math.sqrt(2)) and ron_covariance_l2_sensitivity(50) == stated / 50
    assert _triu_l2(diff, iu).max() <= stated * (1 + 1e-12)
    if p >= 2:
        e1, e2 = np.eye(p)[0], np.eye(p)[1]
        assert _triu_l2(np.outer(e1, e1) - np.outer(e2, e2), iu) == pytest.approx(stated)


@pytest.mark.parametrize("a", [0.5, 1.0, 2.0])
def test_augmented_l2_sensitivities_hold_and_are_attained(a):
    """z = [x~, y], ||x~|| <= 1, |y| <= a: second moment sqrt((1 + a^2)^2 + 1 + a^4), mean
    2 sqrt(1 + a^2) (n = 1); a search over random and extreme pairs never exceeds them and
    adversarial pairs reach 100% (mean) and >= 70% (second moment) of them."""
    rng = np.random.default_rng(7)
    p = 4
    k = p + 1
    iu = np.triu_indices(k)

    def rows(m):
        x = _ball(rng, m, p)
        y = rng.choice([-a, a], size=m) * np.where(rng.random(m) < 0.5, 1.0, rng.random(m))
        return np.column_stack([x, y])

    z, w = rows(20000), rows(20000)
    s1, s2_mean = augmented_mean_sensitivity(p, 1, a)
    s2_cov = ron_covariance_l2_sensitivity(1, a)
    assert s2_mean == pytest.approx(2 * math.sqrt(1 + a * a))
    assert s1 == pytest.approx(2 * math.sqrt(p) + 2 * a)
    assert s2_cov == pytest.approx(math.sqrt((1 + a * a) ** 2 + 1 + a**4))
    assert s2_cov <= math.sqrt(2) * (1 + a * a)
    diff = np.einsum("ni,nj->nij", z, z) - np.einsum("ni,nj->nij", w, w)
    assert _triu_l2(diff, iu).max() <= s2_cov * (1 + 1e-12)
    assert np.linalg.norm(z - w, axis=1).max() <= s2_mean * (1 + 1e-12)
    assert np.abs(z - w).sum(axis=1).max() <= s1 * (1 + 1e-12)
    # adversarial: [u, a] and [-u, -a] for the mean; [e1, a] and [e2, 0] for the second moment
    u = np.eye(p)[0]
    assert np.linalg.norm(np.r_[u, a] - np.r_[-u, -a]) == pytest.approx(s2_mean)
    zz, ww = np.r_[u, a], np.r_[np.eye(p)[1], 0.0]
    attained = _triu_l2(np.outer(zz, zz) - np.outer(ww, ww), iu)
    assert attained == pytest.approx(math.sqrt(2 + a**2 + a**4)) and attained >= 0.7 * s2_cov


def test_protected_per_class_l2_sensitivities_hold_with_a_class_change():
    """Stacked per-class sums of unit rows (L2 <= 2) and of their outer products (upper triangles,
    L2 <= sqrt(2)) under replace-one with the label: a search over feature and/or class changes;
    a row flipping sign in its class attains 2, a unit row moving class attains sqrt(2) for both;
    the release states these values and the histogram's sqrt(2)."""
    rng = np.random.default_rng(5)
    p, k, m = 3, 3, 9
    iu = np.triu_indices(p)

    def stacked(Z, lab):
        sums = np.concatenate([Z[lab == c].sum(axis=0) for c in range(k)])
        moments = np.concatenate([(Z[lab == c].T @ Z[lab == c])[iu] for c in range(k)])
        return sums, moments

    worst_sum = worst_mom = 0.0
    for trial in range(3000):
        Z = _ball(rng, m, p)
        lab = np.arange(m) % k
        i = int(rng.integers(m))
        Z2, lab2 = Z.copy(), lab.copy()
        if trial % 3 != 1:
            Z2[i] = _ball(rng, 2, p)[int(rng.integers(2))]
        if trial % 3 != 0:
            lab2[i] = (lab[i] + 1 + int(rng.integers(k - 1))) % k
        if trial == 0:  # a unit row moves class
            Z2[i] = Z[i] = np.eye(p)[0]
            lab2[i] = (lab[i] + 1) % k
        if trial == 1:  # a unit row is negated within its class
            Z[i], Z2[i], lab2[i] = np.eye(p)[0], -np.eye(p)[0], lab[i]
        (a1, a2), (b1, b2) = stacked(Z, lab), stacked(Z2, lab2)
        worst_sum = max(worst_sum, np.linalg.norm(a1 - b1))
        worst_mom = max(worst_mom, np.linalg.norm(a2 - b2))
    assert 0.999 * 2 <= worst_sum <= 2 * (1 + 1e-12)
    assert 0.999 * math.sqrt(2) <= worst_mom <= math.sqrt(2) * (1 + 1e-12)

    X = _data(600, 10)
    y = np.arange(600) % 3
    rel = RONGauss(epsilon=1.0, noise="gaussian", n_components=p, bounds=(-1, 1), classes=[0, 1, 2],
                   random_state=0).release(X, y)
    stated = {r.statistic.split(" of class")[0].split(" (")[0]: r.sensitivity for r in rel.noise}
    assert stated == pytest.approx({"class histogram": math.sqrt(2), "sum of unit rows": 2.0,
                                    "second moment Sigma": math.sqrt(2)})


# ------------------------------------------------------------------------------ sigmas
@pytest.mark.slow
def test_gaussian_noise_spread_matches_the_stated_sigmas():
    """Mean and second-moment noise over 150 seeded releases on fixed data: zero mean, standard
    deviation = the record's sigma within 5% (a 1.5x error fails), Gaussian tails (kurtosis ~ 3),
    and sigma = S2'/sqrt(2 rho_part) with S2' the rounding-inflated sensitivity."""
    n, d, p, eps = 300, 24, 8, 1.0
    X = _data(n, d, seed=3)
    mech = RONGauss(epsilon=eps, noise="gaussian", n_components=p, epsilon_split=(0.3, 0.7), bounds=(-1, 1),
                    feature_scaling="none")  # the paper's Alg. 3 (split given)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    true_mean = Xn.mean(axis=0)
    iu = np.triu_indices(p)
    mean_noise, cov_noise = [], []
    for seed in range(150):
        rel, rel_diag = mech.set_params(random_state=seed).explore(X)
        mu, W = rel_diag["mu_dp"], rel.transform_arrays["W"]
        mean_noise.append(mu - true_mean)
        C = Xn - mu
        Z = (C / np.linalg.norm(C, axis=1, keepdims=True)) @ W
        cov_noise.append((rel_diag["sigma_dp"] - Z.T @ Z / n)[iu])
    rec_mu, rec_cov = rel.noise
    assert rec_mu.sensitivity == pytest.approx(2 / n)
    assert rec_cov.sensitivity == pytest.approx(math.sqrt(2) / n)
    for rec in (rec_mu, rec_cov):
        assert rec.scale == pytest.approx(rec.sensitivity_used / math.sqrt(2 * rec.rho), rel=1e-12)
        assert rec.sensitivity < rec.sensitivity_used < rec.sensitivity * (1 + 1e-9)
    for noise, sigma in ((np.concatenate(mean_noise), rec_mu.scale),
                         (np.concatenate(cov_noise), rec_cov.scale)):
        assert abs(np.mean(noise)) < 0.1 * sigma
        assert np.std(noise) == pytest.approx(sigma, rel=0.05)
        assert np.mean((noise / np.std(noise)) ** 4) == pytest.approx(3.0, abs=0.35)


# ------------------------------------------------------------------------------ composition
def _part(rec):
    """A record's budget part: per-class records of one statistic share it."""
    return rec.statistic.split(" of class")[0]


def _dp_accounting_epsilon(records, delta, orders=None):
    """Independent composition: one Gaussian event per budget part (the per-class draws of a part
    form one Gaussian mechanism on the stacked statistics), noise multiplier sigma / S2'."""
    acc = rdp.RdpAccountant(orders=orders, neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    parts = {}
    for r in records:
        parts.setdefault(_part(r), r.scale / r.sensitivity_used)
    for nm in parts.values():
        acc.compose(dp_accounting.GaussianDpEvent(nm))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("task", ["unsupervised", "regression", "classification"])
def test_zcdp_composition_and_conversion_match_dp_accounting(task):
    X = _data(800, 12, seed=4)
    y = {"unsupervised": None, "regression": X[:, 0] * 2 + 1, "classification": np.arange(800) % 3}[task]
    kw = {"regression": {"label_bounds": (-1, 3)}, "classification": {"classes": [0, 1, 2]}}.get(task, {})
    rel = RONGauss(epsilon=1.0, noise="gaussian", n_components=4, epsilon_split=(0.3, 0.7), bounds=(-1, 1),
                   random_state=1, **kw).release(X, y)
    det = rel.details
    ideal = det["noise_slack"]["calibrated_at"]
    # rho actually spent per record: S2'^2 / (2 sigma^2), summed over the budget parts
    spent = {_part(r): r.sensitivity_used**2 / (2 * r.scale**2) for r in rel.noise}
    stated = {_part(r): r.rho for r in rel.noise}
    n_parts = {"unsupervised": 2, "regression": 3, "classification": 3}[task]
    assert len(spent) == len(det["rho_parts"]) == n_parts
    assert list(spent.values()) == pytest.approx(list(stated.values()), rel=1e-9)
    assert sorted(stated.values()) == sorted(det["rho_parts"].values())
    total = math.fsum(spent.values())
    assert total == pytest.approx(det["rho_total"], rel=1e-9)
    assert math.fsum(stated.values()) <= det["rho_total"]
    # the conversion: our epsilon at the total rho equals dp-accounting's RDP accountant (same
    # improved conversion) on the same orders, and is within 1% of its default orders
    eps_ours = zcdp_epsilon(total, ideal["delta"])
    assert eps_ours <= ideal["epsilon"] * (1 + 1e-9)
    fine = list(1 + np.geomspace(1e-4, 1e6, 6001))
    assert _dp_accounting_epsilon(rel.noise, ideal["delta"], fine) == pytest.approx(eps_ours, rel=1e-6)
    assert _dp_accounting_epsilon(rel.noise, ideal["delta"]) == pytest.approx(eps_ours, rel=0.01)
    assert rel.guarantee.epsilon == pytest.approx(1.0, rel=1e-9) and rel.guarantee.delta == pytest.approx(
        default_delta(800), rel=1e-9)
    assert gaussian_coordinates(None, False, 12, 4, 0) == 12 + 10


def test_zcdp_rho_inverts_zcdp_epsilon_and_matches_the_closed_form_bound():
    for eps, delta in ((0.1, 1e-6), (1.0, 1e-5), (10.0, 1e-6)):
        rho = zcdp_rho(eps, delta)
        assert zcdp_epsilon(rho, delta) <= eps
        assert zcdp_epsilon(rho * (1 + 1e-9), delta) > eps * (1 - 1e-9)
        # never worse than Bun & Steinke Prop. 1.3: eps = rho + 2 sqrt(rho log(1/delta))
        assert eps <= rho + 2 * math.sqrt(rho * math.log(1 / delta)) + 1e-12
    assert zcdp_rho(INF, 1e-5) == INF and zcdp_epsilon(INF, 1e-5) == INF


# ------------------------------------------------------------------------------ card
def test_gaussian_card_states_approx_guarantee_rho_split_and_variance_saving():
    X = _data(2000, 30, seed=2)
    rel = RONGauss(epsilon=1.0, noise="gaussian", delta=1e-6, n_components=6, epsilon_split=(0.3, 0.7),
                   bounds=(-1, 1),
                   random_state=0).release(X)
    card = json.loads(rel.card_json())
    g = card["guarantee"]
    assert g["kind"] == "approx" and g["epsilon"] == pytest.approx(1.0) and g["delta"] == pytest.approx(1e-6)
    assert g["epsilon"] <= 1.0 + 1e-12 and g["delta"] <= 1e-6 * (1 + 1e-12)
    for rec in card["noise"]:
        assert rec["norm"] == "L2" and rec["distribution"] == "gaussian" and rec["rho"] > 0
        assert "S2 =" in rec["formula"] and "Bun & Steinke" in rec["source"] and rec["scale"] > 0
    det = card["details"]
    assert det["noise"] == "gaussian" and det["delta_rule"] == "given"
    assert det["rho_parts"]["mean"] == pytest.approx(0.3 * det["rho_total"])
    assert det["rho_parts"]["covariance"] == pytest.approx(0.7 * det["rho_total"])
    saving = det["laplace_over_gaussian_variance"]
    # per coordinate: 2 (S1/eps_part)^2 / sigma^2, recomputed from the records
    s1 = {"mean": 2 * math.sqrt(30) / 2000, "covariance": 7 / 2000}
    for rec, part, frac in ((rel.noise[0], "mean", 0.3), (rel.noise[1], "covariance", 0.7)):
        assert saving[part] == pytest.approx(2 * (s1[part] / (frac * 1.0)) ** 2 / rec.scale**2, rel=1e-6)
        assert saving[part] > 1
    lap = RONGauss(epsilon=1.0, n_components=6, epsilon_split=(0.3, 0.7), bounds=(-1, 1), noise="laplace",
                   random_state=0).release(X)
    assert lap.details["noise"] == "laplace" and lap.guarantee.kind == "pure"
    assert all(r.rho is None for r in lap.noise)


def test_gaussian_bad_parameters_and_epsilon_inf():
    X = _data(200, 8)
    with pytest.raises(ValueError, match="calibration='sound'"):
        RONGauss(noise="gaussian", calibration="published", bounds=(-1, 1)).release(X)
    with pytest.raises(ValueError, match="noise"):
        RONGauss(noise="student-t", bounds=(-1, 1)).release(X)
    with pytest.raises(ValueError, match="delta"):
        RONGauss(noise="gaussian", delta=1.5, bounds=(-1, 1)).release(X)
    rel = RONGauss(epsilon=INF, noise="gaussian", n_components=3, bounds=(-1, 1), random_state=0).release(X)
    assert rel.guarantee.epsilon == INF and all(r.scale == 0 for r in rel.noise)


# ------------------------------------------------------------------------------ Alg. 4 label mean
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_regression_release_keeps_the_label_mean(noise):
    """Labels in the public [0, 10] with mean ~8 (far from the centre 5, where a mean-0 model puts
    them): the released label mean is within 0.25 of the real one at epsilon = 50, and the DP mean
    of [x~, y] is a budgeted, recorded statistic."""
    rng = np.random.default_rng(9)
    X = rng.uniform(-1, 1, size=(6000, 10))
    y = np.clip(8 + 1.5 * X[:, 0] + 0.3 * rng.standard_normal(6000), 0, 10)
    rel = RONGauss(epsilon=50.0, noise=noise, n_components=4, bounds=(-1, 1), label_bounds=(0, 10),
                   random_state=0).release(X, y)
    assert abs(rel.labels.mean() - y.mean()) < 0.25 and abs(y.mean() - 5) > 2.5
    stats = [r.statistic for r in rel.noise]
    assert stats[-1] == "mean of the augmented rows [x~, y]"
    parts = rel.details["rho_parts" if noise == "gaussian" else "epsilon_parts"]
    assert parts["augmented_mean"] == pytest.approx(parts["mean"])
    # the label's correlation with the first projected direction survives
    Zt = rel.transform(X)
    real = np.corrcoef(Zt.T, y)[-1, :-1]
    synth = np.corrcoef(rel.data.T, rel.labels)[-1, :-1]
    assert np.abs(real - synth).max() < 0.15
