"""The public row-norm bound (issue 13, item 4) and the Gaussian variants of PCA-Gauss and MODIPS
(item 2): worst-case searches of every bound the sensitivities use, the map that keeps one-hot
groups sparse, noise scales of the Gaussian statistics, the card, and the public p rule (item 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcore.calibration import recommended_n_components
from dpcore.data import load_dataset
from dpcore.mechanisms import PCAGauss
from dpcore.mechanisms._box import BoxMap, lap_pca_sensitivity, row_second_moment_l1, scale_to_box
from dpcore.mechanisms._gaussian_model import second_moment_l2_sensitivity
from dpcore.mechanisms.modips import MODIPS, gaussian_model_l2_sensitivities
from dpcore.mechanisms.pca_gauss import class_l2_sensitivities, eigenvalue_l2_sensitivity
from dpcore.preprocessing import group_indices, prepare_input, row_norm_bound

# a schema: 3 numerics with arbitrary bounds, groups of sizes 4, 1 and 3, one constant column
BOUNDS = np.array([[0, 10], [-5, 5], [1, 2], *[[0, 1]] * 4, [0, 1], *[[0, 1]] * 3, [3, 3]], float)
GROUPS = (np.arange(3, 7), np.array([7]), np.arange(8, 11))


def _rows(rng, m, extreme=True):
    """``m`` raw rows the schema allows (one-hot groups with at most one 1), numerics at their
    bounds (``extreme``) or inside them."""
    X = np.empty((m, BOUNDS.shape[0]))
    lo, hi = BOUNDS[:, 0], BOUNDS[:, 1]
    X[:] = lo + (rng.integers(0, 2, X.shape) if extreme else rng.uniform(size=X.shape)) * (hi - lo)
    for g in GROUPS:
        X[:, g] = 0.0
        pick = rng.integers(-1, g.size, m)  # -1: missing (all zeros)
        on = pick >= 0
        X[np.flatnonzero(on), g[pick[on]]] = 1.0
    return X


def _bad_rows(rng, m):
    """Rows that break the schema (imputed midpoints, several ones per group): the map must still
    respect the bound."""
    return rng.uniform(BOUNDS[:, 0] - 1, BOUNDS[:, 1] + 1, size=(m, BOUNDS.shape[0]))


def _triu(A):
    iu = np.triu_indices(A.shape[-1])
    return A[..., iu[0], iu[1]]


def test_bound_values_and_the_box_map_would_not_give_them():
    b = row_norm_bound(BOUNDS, GROUPS)
    assert (b.n_numeric, b.n_groups) == (3, 3)
    assert b.l2 == pytest.approx(math.sqrt(6)) and b.l1 == 6
    assert b.l2_diameter == pytest.approx(math.sqrt(4 * 3 + 2 * 2 + 1))  # the 1-column group moves by 1
    assert b.box_l2 == pytest.approx(math.sqrt(11))
    # the plain box map onto [-1, 1] makes a group's squared norm its size
    z = scale_to_box(_rows(np.random.default_rng(0), 50), BOUNDS)
    assert np.linalg.norm(z, axis=1).max() == pytest.approx(math.sqrt(11))
    nog = row_norm_bound(BOUNDS)
    assert nog.l2 == pytest.approx(math.sqrt(11)) and nog.l1_diameter == 22


@pytest.mark.parametrize("extreme", [True, False])
def test_worst_case_search_of_every_row_bound(extreme):
    rng = np.random.default_rng(1)
    bmap = BoxMap.from_bounds(BOUNDS, GROUPS)
    b = bmap.bound
    X = np.vstack([_rows(rng, 4000, extreme), _bad_rows(rng, 4000)])
    Z = bmap.apply(X)
    Zp = Z[rng.permutation(Z.shape[0])]
    tol = 1 + 1e-12
    assert np.linalg.norm(Z, axis=1).max() <= b.l2 * tol
    assert np.abs(Z).sum(axis=1).max() <= b.l1 * tol
    assert (Z**4).sum(axis=1).max() <= b.l4_power4 * tol
    assert np.linalg.norm(Z - Zp, axis=1).max() <= b.l2_diameter * tol
    assert np.abs(Z - Zp).sum(axis=1).max() <= b.l1_diameter * tol
    assert np.maximum(np.abs(Z), np.abs(Zp)).sum(axis=1).max() <= b.max_pair_l1 * tol
    # second moments: upper triangle of z z^T - z' z'^T, L1 and L2
    A = np.einsum("ni,nj->nij", Z[:3000], Z[:3000]) - np.einsum("ni,nj->nij", Zp[:3000], Zp[:3000])
    assert np.abs(_triu(A)).sum(axis=1).max() <= row_second_moment_l1(b) * tol
    assert np.linalg.norm(_triu(A), axis=1).max() <= second_moment_l2_sensitivity(b.l2**2, b.l4_power4) * tol
    if extreme:  # the schema's rows attain the norm bounds
        assert np.linalg.norm(Z, axis=1).max() == pytest.approx(b.l2)
        assert np.linalg.norm(Z - Zp, axis=1).max() == pytest.approx(b.l2_diameter)


def test_rows_that_follow_the_schema_are_not_changed_by_the_group_cap():
    X = _rows(np.random.default_rng(2), 500, extreme=False)
    Z = BoxMap.from_bounds(BOUNDS, GROUPS).apply(X)
    lo, hi = BOUNDS[:, 0], BOUNDS[:, 1]
    g = np.concatenate(GROUPS)
    np.testing.assert_allclose(Z[:, g], (X[:, g] - lo[g]) / (hi - lo)[g])
    np.testing.assert_allclose(Z[:, :3], scale_to_box(X, BOUNDS)[:, :3])


def test_without_groups_the_bounds_are_the_box_ones():
    k = 6
    b = row_norm_bound(np.tile([[0.0, 1.0]], (k, 1)))
    assert row_second_moment_l1(b) == k * (k + 1) / 2 == lap_pca_sensitivity(k, 1)
    assert second_moment_l2_sensitivity(b.l2**2, b.l4_power4) == pytest.approx(math.sqrt(k * k + k))


def test_groups_come_from_metadata_and_reach_the_card():
    ds = load_dataset("adult")
    assert len(ds.onehot_groups) == 8 and all("=" in c for cols in ds.onehot_groups.values() for c in cols)
    data = prepare_input(ds.subset(np.arange(2000)))
    assert data.row_norm_bound.l2 == pytest.approx(math.sqrt(14))  # 6 numerics + 8 groups
    assert data.public_facts["onehot_groups"]["sex"] == ["sex=Female", "sex=Male"]
    rel = PCAGauss(epsilon=1.0, n_components=5, random_state=0).release(ds.subset(np.arange(2000)))
    card = rel.details["row_norm_bound"]
    assert card["l2"] == pytest.approx(math.sqrt(14)) and card["box_l2"] == pytest.approx(math.sqrt(105))
    assert card["noise_variance_saved_vs_box"] == pytest.approx(105 / 14)
    # category lists given on load make groups too; an unknown name is skipped
    assert group_indices(["a", "b=x", "b=y"], {"b": ["b=x", "b=y", "b=z"]})[0].tolist() == [1, 2]
    with pytest.raises(ValueError, match="shares a column"):
        group_indices(["a", "b"], {"g": ["a", "b"], "h": ["b"]})


def test_pca_transform_uses_the_same_map_as_the_release():
    ds = load_dataset("adult").subset(np.arange(3000))
    rel = PCAGauss(epsilon=5.0, n_components=4, noise="gaussian", delta=1e-6, random_state=0).release(ds)
    t = rel.transform_arrays
    Z = BoxMap.from_bounds(t["bounds"], tuple(np.flatnonzero(t["onehot_group"] == i)
                                              for i in range(t["onehot_group"].max() + 1))).apply(ds.X)
    np.testing.assert_allclose(rel.transform(ds.X), Z @ t["W"] / t["norm_bound"], atol=1e-12)
    assert np.linalg.norm(rel.transform(ds.X), axis=1).max() <= 1 + 1e-12


# ------------------------------------------------------------------------------ Gaussian variants
def test_pca_gauss_gaussian_noise_scales_follow_the_zcdp_shares():
    ds = load_dataset("adult").subset(np.arange(4000))
    rel = PCAGauss(epsilon=1.0, n_components=6, noise="gaussian", delta=1e-6, random_state=0).release(ds)
    g = rel.guarantee
    assert (g.kind, g.epsilon, g.delta, g.neighbouring) == ("approx", 1.0, 1e-6, "replace-one")
    rho = rel.details["rho_parts"]
    for rec in rel.noise:
        assert rec.distribution == "gaussian"
        part = {"class histogram": "histogram", "DP PCA": "pca", "sum of": "mean", "second": "covariance",
                "counts of": "marginals"}
        key = next(v for k, v in part.items() if rec.statistic.startswith(k))
        # sigma = S2'/sqrt(2 rho_part), S2' the grid-inflated sensitivity
        assert rec.scale == pytest.approx(rec.sensitivity_used / math.sqrt(2 * rho[key]), rel=1e-9)
    s2 = {r.statistic.split(" of ")[0]: r.sensitivity for r in rel.noise}
    assert s2["sum"] == class_l2_sensitivities()[0] == 2.0
    assert math.isclose(s2["second moment"], math.sqrt(2))
    savings = rel.details["laplace_over_gaussian_variance"]
    assert savings["pca"] > 1 and savings["covariance"] > 1


@pytest.mark.slow
def test_pca_gauss_gaussian_alg1_eigenvalue_noise_statistics():
    """Alg. 1 Gaussian: the noisy eigenvalues minus the exact ones have the stated sd."""
    X = np.random.default_rng(3).uniform(0, 1, size=(400, 6))
    box = np.tile([[0.0, 1.0]], (6, 1))
    Z = scale_to_box(X, box)
    lam = np.sort(np.linalg.eigvalsh(Z.T @ Z / (400 * 6)))[::-1][:3]  # rows / B, B = sqrt(6)
    errs = []
    for seed in range(200):
        rel, rel_diag = PCAGauss(epsilon=2.0, n_components=3, noise="gaussian", delta=1e-5, bounds=box,
                       random_state=seed).explore(X)
        errs.append(rel_diag["eigenvalues_dp"] - lam)
    sigma = rel.noise[0].scale
    assert rel.noise[0].sensitivity == eigenvalue_l2_sensitivity(400)
    sd = np.std(np.concatenate(errs))
    assert 0.85 * sigma < sd < 1.15 * sigma  # 600 draws: sd within ~6% at 2 standard errors


def test_modips_gaussian_uses_the_row_bound_and_is_approx():
    ds = load_dataset("adult").subset(np.arange(3000))
    rel = MODIPS(epsilon=1.0, noise="gaussian", delta=1e-6, random_state=0).release(ds)
    assert rel.guarantee.kind == "approx" and rel.guarantee.delta == 1e-6 and rel.guarantee.epsilon == 1.0
    b = prepare_input(ds).row_norm_bound
    s_mu, s_m = gaussian_model_l2_sensitivities(b, 1, per_class_sums=True)
    stated = {r.statistic.split(" of")[0]: r.sensitivity for r in rel.noise}
    assert stated["mean"] == pytest.approx(s_mu) and stated["second moment (1/n) Z^T Z"] == pytest.approx(s_m)
    assert s_m == pytest.approx(math.sqrt(14**2 + 14))
    lap = MODIPS(epsilon=1.0, noise="laplace", random_state=0).release(ds)
    s1 = {r.statistic.split(" of")[0]: r.sensitivity for r in lap.noise}
    assert s1["second moment (1/n) Z^T Z"] == pytest.approx(14**2 + 14)  # not 105 * 106
    # released one-hot columns come back in their [0, 1] units
    assert rel.data.shape[1] == 105


# ------------------------------------------------------------------------------ public p rule
def test_recommended_p_is_a_function_of_public_facts_and_grows_with_epsilon():
    ps = [recommended_n_components(24420, 105, epsilon=e, delta=1e-6, n_classes=2)["n_components"]
          for e in (0.1, 1.0, 10.0)]
    assert ps == sorted(ps) and 1 <= ps[0] < ps[-1] <= 104
    lap = recommended_n_components(24420, 105, epsilon=1.0, n_classes=2)["n_components"]
    assert lap < ps[1]  # Laplace noise grows with p: a smaller p
    a = PCAGauss(epsilon=1.0, random_state=0).release(load_dataset("adult").subset(np.arange(2000)))
    b = PCAGauss(epsilon=1.0, random_state=0).release(load_dataset("adult").subset(np.arange(2000, 4000)))
    assert a.details["n_components"] == b.details["n_components"]  # same public facts, same p
    assert a.details["recommended"]["inputs"]["n"] == 2000


def test_recommended_mechanism_and_fraction_follow_public_facts():
    from dpcore.calibration import recommended_mechanism

    sup = recommended_mechanism("classification", 1000, 20, epsilon=1.0, delta=1e-6, n_classes=2)
    assert sup["mechanism"] == "pca-gauss" and sup["parameters"]["noise"] == "gaussian"
    # no delta: Gaussian noise with the automatic delta (the mechanism fills it in)
    untouched = recommended_mechanism("classification", 1000, 20, epsilon=1.0)
    assert untouched["parameters"] == {"noise": "gaussian"}
    assert recommended_mechanism("unsupervised", 1000, 20, epsilon=1.0)["mechanism"] == "ron-gauss"
    rule = recommended_n_components(24420, 105, epsilon=1.0, delta=1e-6, n_classes=2, dp_basis=True)
    assert 0 < rule["pca_fraction"] < 1
    # a given p: the rule chooses the fraction only
    fixed = recommended_n_components(24420, 105, epsilon=1.0, delta=1e-6, n_classes=2, dp_basis=True,
                                     n_components=7)
    assert fixed["n_components"] == 7 and fixed["pca_fraction"] in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
    ds = load_dataset("adult").subset(np.arange(2000))
    rel = PCAGauss(epsilon=1.0, noise="gaussian", delta=1e-6, random_state=0, pca_source="lap").release(ds)
    rec = rel.details["recommended"]
    assert rec["mechanism"]["mechanism"] == "pca-gauss"
    # the model's parts share what the marginals leave (dpcore.marginals), in the rule's proportions
    share = rel.marginals.epsilon_share if rel.marginals is not None else 0.0
    assert rel.details["epsilon_parts"]["pca"] == pytest.approx((1 - share) * rec["pca_fraction"])
    assert rel.details["n_components"] == rec["n_components"]
    assert rel.card()["parameters"]["pca_fraction"] is None  # parameters as given: empty
