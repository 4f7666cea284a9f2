"""RON-Gauss: sensitivities, noise scales, empirical noise spread, guarantees, GMM, transform, errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from histogram_check import check_histogram_noise

from dpcore.calibration import EpsilonSplit
from dpcore.mechanisms import RONGauss, get_mechanism
from dpcore.mechanisms._gaussian_model import default_n_components
from dpcore.mechanisms.ron_gauss import (
    guaranteed_epsilon,
    mean_sensitivity,
    normalize_rows,
    proportional_counts,
    ron_covariance_sensitivity,
)
from dpcore.utility import evaluate_non_private, evaluate_release

INF = float("inf")


def _data(n=300, d=20, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, size=(n, d))


def _blobs(n=3000, d=20, k=3, seed=0, spread=0.15):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-1, 1, size=(k, d))
    y = np.arange(n) % k
    X = np.clip(centers[y] + spread * rng.standard_normal((n, d)), -2, 2)
    return X, y


def _true_preprocessed(X, mu):
    """Alg. 1 recomputed independently from the released mu_DP (test oracle)."""
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    C = Xn - mu
    return C / np.linalg.norm(C, axis=1, keepdims=True)


# ------------------------------------------------------------------------------------ formulas
@pytest.mark.parametrize("p", [1, 2, 3, 5, 10])
@pytest.mark.parametrize("n", [50, 1000])
def test_sensitivity_table_matches_spec(p, n):
    assert ron_covariance_sensitivity(p, n, "sound") == pytest.approx((p + 1) / n)
    assert ron_covariance_sensitivity(p, n, "published") == pytest.approx(2 * math.sqrt(p) / n)
    assert ron_covariance_sensitivity(p, n, "sound", full_matrix=True) == pytest.approx(2 * p / n)
    for a in (0.5, 1.0, 3.0):
        rp = math.sqrt(p)
        assert ron_covariance_sensitivity(p, n, "sound", a) == pytest.approx(
            (p + 1 + 2 * a * rp + a * a) / n)
        assert ron_covariance_sensitivity(p, n, "published", a) == pytest.approx(
            (2 * rp + 4 * a * rp + a * a) / n)
        assert ron_covariance_sensitivity(p, n, "sound", a, full_matrix=True) == pytest.approx(
            (2 * p + 4 * a * rp + a * a) / n)
    assert mean_sensitivity(64, n) == pytest.approx(16 / n)


def test_sound_bound_holds_and_published_bound_is_violated():
    rng = np.random.default_rng(1)
    for p in (3, 6, 10):
        # random pairs of vectors in the unit ball never exceed the sound upper-triangle bound
        x = rng.standard_normal((20000, p))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        x *= rng.uniform(0, 1, size=(20000, 1)) ** (1 / p)
        a, b = x[:10000], x[10000:]
        diff = np.einsum("ni,nj->nij", a, a) - np.einsum("ni,nj->nij", b, b)
        iu = np.triu_indices(p)
        assert np.abs(diff[:, iu[0], iu[1]]).sum(axis=1).max() <= p + 1 + 1e-12
        assert np.abs(diff).sum(axis=(1, 2)).max() <= 2 * p + 1e-12
        # an explicit neighbour pair beats the published Lemma 4 constant 2 sqrt(p) for p >= 6;
        # x = (1,...,1)/sqrt(p) and x' = (1,-1,1,...)/sqrt(p): entrywise L1 of the change is
        # ~p (plus the search above finds ~sqrt(2) p, as SPEC section 2 says)
        u = np.ones(p) / math.sqrt(p)
        v = np.array([(-1) ** j for j in range(p)]) / math.sqrt(p)
        l1 = np.abs(np.outer(u, u) - np.outer(v, v)).sum()
        assert l1 == pytest.approx(2 * (p // 2) * (p - p // 2) * 2 / p)
        if p >= 6:
            assert l1 > 2 * math.sqrt(p)


def test_default_n_components_and_normalisation():
    assert default_n_components(64) == 5
    assert default_n_components(784) == 7
    assert default_n_components(2) == 1
    assert all(1 <= default_n_components(d) < d for d in range(2, 300))
    X = np.array([[3.0, 4.0], [0.0, 0.0], [1e-300, 0.0], [1e-3, 0.0]])
    out, n_zero = normalize_rows(X)
    assert n_zero == 2  # exact zero, and a norm below the public constant ZERO_NORM = 1e-12
    assert np.allclose(out[0], [0.6, 0.8]) and np.all(out[1:3] == 0) and np.allclose(out[3], [1, 0])
    counts = proportional_counts(1000, np.array([178, 182, 177, 183]))
    assert counts.sum() == 1000 and np.all(np.abs(counts - 1000 * np.array([178, 182, 177, 183]) / 720) < 1)
    assert list(proportional_counts(720, np.array([178, 182, 177, 183]))) == [178, 182, 177, 183]


# ------------------------------------------------------------------------------------ noise scales
@pytest.mark.parametrize("n,d,p,split", [(200, 20, 3, (0.3, 0.7)), (500, 10, 7, (0.5, 0.5)),
                                         (1000, 30, 1, (0.1, 0.9))])
def test_release_noise_scales_equal_formulas(n, d, p, split):
    eps = 1.7
    rel = RONGauss(noise="laplace", epsilon=eps, epsilon_split=split, n_components=p, random_state=0,
                   bounds=(-1, 1)).release(_data(n, d))
    parts = EpsilonSplit.from_fractions(eps, {"mean": split[0], "covariance": split[1]})
    mean_rec, cov_rec = rel.noise
    assert mean_rec.sensitivity == pytest.approx(2 * math.sqrt(d) / n)
    assert mean_rec.scale == pytest.approx(2 * math.sqrt(d) / (n * parts["mean"]))
    assert cov_rec.sensitivity == pytest.approx((p + 1) / n)
    assert cov_rec.scale == pytest.approx((p + 1) / (n * parts["covariance"]))
    assert rel.guarantee.epsilon == pytest.approx(eps) and rel.guarantee.epsilon <= eps
    assert rel.guarantee.kind == "pure" and rel.guarantee.delta == 0
    assert rel.guarantee.neighbouring == "replace-one"
    assert rel.data.shape == (n, p)
    W = rel.transform_arrays["W"]
    assert np.allclose(W.T @ W, np.eye(p))


def test_regression_noise_scale_uses_label_bound():
    X = _data(400, 12)
    y = X[:, 0] * 3 + 1
    a = 2.0
    rel = RONGauss(noise="laplace",
                   epsilon=2.0, n_components=4, label_bound=a, random_state=0, bounds=(-1, 1),
                   label_bounds=(-2, 4)).release(X, y)
    s1 = (4 + 1 + 2 * a * 2 + a * a) / 400
    assert rel.noise[1].sensitivity == pytest.approx(s1)
    assert rel.noise[1].scale == pytest.approx(s1 / (0.7 * 2.0))
    assert rel.labels.shape == (400,) and rel.data.shape == (400, 4)


# ------------------------------------------------------------------------------------ spread
@pytest.mark.slow
def test_empirical_noise_spread_matches_laplace_scale():
    """Mean and second-moment noise over 150 seeded releases on fixed data: mean |noise| = b
    and std/mean|noise| = sqrt(2) (Laplace), tolerance 6% (~3.5 standard errors)."""
    n, d, p, eps = 300, 24, 8, 1.0
    X = _data(n, d, seed=3)
    mech = RONGauss(noise="laplace", epsilon=eps, n_components=p, bounds=(-1, 1), feature_scaling="none")
    mean_noise, cov_noise = [], []
    iu = np.triu_indices(p)
    true_mean = (X / np.linalg.norm(X, axis=1, keepdims=True)).mean(axis=0)
    for seed in range(150):
        rel, rel_diag = mech.set_params(random_state=seed).explore(X)
        mu, W = rel_diag["mu_dp"], rel.transform_arrays["W"]
        mean_noise.append(mu - true_mean)
        Z = _true_preprocessed(X, mu) @ W
        noisy = rel_diag["sigma_dp"]
        assert np.allclose(noisy, noisy.T)
        cov_noise.append((noisy - Z.T @ Z / n)[iu])
    b_mu, b_cov = rel.noise[0].scale, rel.noise[1].scale
    for noise, b in ((np.concatenate(mean_noise), b_mu), (np.concatenate(cov_noise), b_cov)):
        assert abs(np.mean(noise)) < 0.1 * b
        assert np.mean(np.abs(noise)) == pytest.approx(b, rel=0.06)
        assert np.std(noise) / np.mean(np.abs(noise)) == pytest.approx(math.sqrt(2), rel=0.06)


def test_published_mode_reports_larger_guaranteed_epsilon():
    X = _data(300, 20)
    y = X[:, 1]
    for p in (2, 4, 9):
        rel, rel_diag = RONGauss(noise="laplace", epsilon=1.0, n_components=p, epsilon_split=(0.3, 0.7),
                                 calibration="published", random_state=0, bounds=(-1, 1)).explore(X)
        expected = 0.3 + 0.7 * math.sqrt(p)  # S1_sound,full / S1_published = 2p / (2 sqrt p)
        assert rel.guarantee.epsilon == pytest.approx(expected)
        assert rel.guarantee.epsilon > rel.details["nominal_epsilon"] == 1.0
        assert rel.details["guaranteed_epsilon"] == pytest.approx(expected)
        assert rel.noise[1].scale == pytest.approx(2 * math.sqrt(p) / (300 * 0.7))
        assert rel.noise[1].epsilon == pytest.approx(0.7 * math.sqrt(p))
        # published noise is i.i.d. on every entry (the paper's mechanism): not symmetric
        assert not np.allclose(rel_diag["sigma_dp"], rel_diag["sigma_dp"].T)
        assert np.allclose(rel_diag["sigma_dp_repaired"], rel_diag["sigma_dp_repaired"].T)
    a, p = 1.0, 4
    rel, rel_diag = RONGauss(noise="laplace",
                             epsilon=1.0, n_components=p, calibration="published", random_state=0,
                   bounds=(-1, 1), label_bounds=(-1, 1)).explore(X, y)
    ratio = (2 * p + 4 * a * 2 + a * a) / (2 * 2 + 4 * a * 2 + a * a)
    assert rel.guarantee.epsilon == pytest.approx(0.3 + 0.7 * ratio)
    split = EpsilonSplit.from_fractions(1.0, {"mean": 0.3, "covariance": 0.7})
    assert guaranteed_epsilon(split, 1, "published") == pytest.approx(1.0)  # p = 1: 2p = 2 sqrt(p)


# ------------------------------------------------------------------------------------ epsilon = inf
def test_epsilon_inf_sample_covariance_converges_to_non_private():
    X = _data(400, 15, seed=5)
    rel = RONGauss(epsilon=INF, n_components=4, random_state=0, bounds=(-1, 1),
                   feature_scaling="none").release(X, n_samples=200_000)
    assert rel.guarantee.epsilon == INF and not rel.is_private and not rel.downloadable
    assert all(r.scale == 0 for r in rel.noise)
    mu, W = rel.transform_arrays["mean"], rel.transform_arrays["W"]
    assert np.allclose(mu, (X / np.linalg.norm(X, axis=1, keepdims=True)).mean(axis=0))
    Z = _true_preprocessed(X, mu) @ W
    sigma = Z.T @ Z / len(Z)
    emp = rel.data.T @ rel.data / len(rel.data)
    assert np.linalg.norm(emp - sigma) / np.linalg.norm(sigma) < 0.02
    # the public transform maps the real rows onto exactly these projected rows
    assert np.allclose(rel.transform(X), Z)


# ------------------------------------------------------------------------------------ GMM
def test_gmm_labels_match_class_sizes_and_parallel_composition():
    """The paper's Alg. 5 (label_privacy="within-class"): exactly n_c rows per class, noise scaled
    by n_c, parallel composition over the classes."""
    X, y = _blobs(n=903, d=12, k=3, seed=2)
    y = np.where(y == 2, 7, y)  # class values 0, 1, 7
    keep = np.ones(len(y), bool)
    keep[np.flatnonzero(y == 7)[:50]] = False  # unequal class sizes
    X, y = X[keep], y[keep]
    sizes = {c: int(np.sum(y == c)) for c in (0, 1, 7)}
    eps = 0.8
    paper = {"bounds": (-2, 2), "classes": [0, 1, 7], "label_privacy": "within-class"}
    rel = RONGauss(noise="laplace", epsilon=eps, n_components=3, random_state=0, **paper).release(X, y)
    assert rel.guarantee.neighbouring == "replace-one-within-class"  # class sizes are public
    got = dict(zip(*np.unique(rel.labels, return_counts=True), strict=True))
    assert {int(k): int(v) for k, v in got.items()} == sizes
    assert rel.guarantee.epsilon == pytest.approx(eps)  # not 3 * eps: parallel composition
    assert len(rel.noise) == 6
    for c, n_c in sizes.items():
        mean_rec = next(r for r in rel.noise if r.statistic.startswith(f"mean of class {c} "))
        assert mean_rec.scale == pytest.approx(2 * math.sqrt(12) / (n_c * 0.3 * eps))
        cov_rec = next(r for r in rel.noise if r.statistic.startswith(f"second moment Sigma of class {c} "))
        assert cov_rec.scale == pytest.approx(4 / (n_c * 0.7 * eps))
    assert any("class sizes n_c are public" in a for a in rel.details["assumptions"])
    # n_samples split in proportion to the public class sizes
    rel = RONGauss(noise="laplace",
                   epsilon=eps, n_components=3, random_state=1, **paper).release(X, y, n_samples=100)
    counts = {int(k): int(v) for k, v in zip(*np.unique(rel.labels, return_counts=True), strict=True)}
    assert sum(counts.values()) == 100
    for c, n_c in sizes.items():
        assert abs(counts[c] - 100 * n_c / len(y)) < 1


def test_gmm_utility_close_to_non_private_on_separated_classes():
    X, y = _blobs(n=4000, d=20, k=3, seed=4)
    tr, te = np.arange(3000), np.arange(3000, 4000)
    base = evaluate_non_private((X[tr], y[tr]), (X[te], y[te]), "classification")
    accs = []
    for seed in range(3):
        rel = RONGauss(epsilon=1.0, n_components=10, random_state=seed, bounds=(-2, 2),
                       feature_scaling="none", classes=[0, 1, 2],
                       label_privacy="within-class").release(X[tr], y[tr])  # the paper's Alg. 5
        accs.append(evaluate_release(rel, X[te], y[te])["svm_accuracy"])
    assert base["svm_accuracy"] > 0.99
    assert np.mean(accs) > 0.9


def test_feature_scaling_bounds_equals_prescaled_rows():
    X = _data(120, 6, seed=8) * np.array([1, 2, 3, 4, 5, 6])
    bounds = np.column_stack([-np.arange(1, 7), np.arange(1, 7) * 2.0])
    a = RONGauss(epsilon=1.0, n_components=2, random_state=3, bounds=bounds).release(X)
    Xs = (X - bounds[:, 0]) / (bounds[:, 1] - bounds[:, 0])
    b = RONGauss(epsilon=1.0, n_components=2, random_state=3, bounds=(0, 1),
                 feature_scaling="none").release(Xs)
    assert np.allclose(a.data, b.data)
    assert np.allclose(a.transform(X), b.transform(Xs))


def test_reconstruct_output_and_transform():
    X, y = _blobs(n=600, d=10, k=2, seed=6)
    rel = RONGauss(epsilon=INF, n_components=3, reconstruct=True, random_state=0,
                   bounds=(-2, 2), classes=[0, 1]).release(X, y)
    assert rel.data.shape == (600, 10) and rel.columns[0] == "x0"
    W = rel.transform_arrays["W"]
    # reconstructed rows lie in the column span of W (classification: class means included)
    assert np.allclose(rel.data - rel.data @ W @ W.T, 0, atol=1e-10)
    T = rel.transform(X[:5])
    assert T.shape == (5, 10) and np.allclose(T - T @ W @ W.T, 0, atol=1e-10)
    rel = RONGauss(epsilon=1.0, n_components=3, reconstruct=True, random_state=0,
                   bounds=(-2, 2), task="unsupervised").release(X)
    mu = rel.transform_arrays["mean"]
    assert np.allclose((rel.data - mu) - (rel.data - mu) @ W @ W.T, 0, atol=1e-10)
    assert rel.transform(X).shape == (600, 10)


def test_zero_norm_rows_are_counted_and_harmless():
    X = _data(100, 8)
    X[:7] = 0.0
    rel, rel_diag = RONGauss(epsilon=1.0, n_components=2, random_state=0, bounds=(-1, 1),
                   feature_scaling="none").explore(X)
    assert rel_diag["n_zero_norm_rows"] == 7
    assert np.all(np.isfinite(rel.data))
    assert np.all(np.isfinite(rel.transform(X)))


def test_card_is_json_and_hides_diagnostics():
    X = _data(100, 8)
    rel = RONGauss(epsilon=1.0, n_components=2, random_state=0, bounds=(-1, 1)).release(X)
    card = json.loads(rel.card_json())
    assert card["mechanism"] == "ron-gauss" and card["guarantee"]["epsilon"] == 1.0
    assert card["transform_file"] is True
    text = json.dumps(card)
    for hidden in ("sigma_dp", "mu_dp", "random_state"):
        assert hidden not in text
    assert get_mechanism("ron-gauss") is RONGauss
    npz = rel.transform_npz_bytes()
    assert len(npz) > 0


def test_paper_projection_is_orthonormal():
    rel = RONGauss(epsilon=1.0, n_components=4, projection="paper", random_state=0,
                   bounds=(-1, 1)).release(_data(100, 9))
    W = rel.transform_arrays["W"]
    assert np.allclose(W.T @ W, np.eye(4))


# ------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("kwargs,match", [
    ({"n_components": 20}, "n_components"),
    ({"n_components": 25}, "n_components"),
    ({"n_components": 0}, "n_components"),
    ({"epsilon": 0}, "epsilon"),
    ({"epsilon": -1}, "epsilon"),
    ({"epsilon_split": (0.5, 0.6)}, "epsilon_split"),
    ({"epsilon_split": (1.0,)}, "epsilon_split"),
    ({"projection": "gaussian"}, "projection"),
    ({"calibration": "loose"}, "calibration"),
    ({"label_bound": 0}, "label_bound"),
])
def test_bad_parameters_raise_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RONGauss(random_state=0, bounds=(-1, 1), **kwargs).release(_data(50, 20))


# ------------------------------------------------------------------------------------ labels protected
# label_privacy="protected" (default): a DP class histogram (Laplace, L1 sensitivity 2) and noisy
# per-class SUMS whose sensitivities hold when the replaced record changes class (issue 12, row 2).
def _labelled(n=200, d=3, k=50, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, size=(n, d)), np.arange(n) % k


def test_protected_class_histogram_noise_is_laplace_with_scale_2_over_eps_histogram():
    """2,000 draws (50 classes x 40 seeded releases) of the released noisy class counts minus
    the true counts: KS-consistent with Lap(2/eps_histogram), and a 1.5x wrong scale (either
    way) is rejected. (n_samples=1: one class is modelled, every class is counted.)"""
    X, y = _labelled()
    eps, h = 1.0, 0.25
    mech = RONGauss(noise="laplace", epsilon=eps, histogram_fraction=h, n_components=1, bounds=(-1, 1),
                    classes=list(range(50)))
    check_histogram_noise(mech, X, y, h * eps)


def _stacked_unit_sums(diagnostics, classes):
    """Per-class sums of the unit rows, all classes stacked, read back from the diagnostics of an
    epsilon = inf release (no noise: mu_DP = sum / exact count)."""
    counts = diagnostics["class_counts_dp"]
    return np.concatenate([diagnostics["mu_dp"][c] * counts[i] for i, c in enumerate(classes)])


@pytest.mark.parametrize("scaling", ["bounds", "none"])
def test_protected_unit_row_sums_sensitivity_holds_with_a_class_change(scaling):
    """Worst-case search through release() (epsilon = inf, so the sums are exact): a neighbour
    replaces one row's features and/or its label. The L1 change of the stacked per-class sums
    never exceeds the stated S1 = 2 sqrt(d), and the adversarial pairs reach it."""
    rng = np.random.default_rng(11)
    n, d, classes = 12, 5, [0, 1, 2]
    mech = RONGauss(noise="laplace", epsilon=INF, n_components=2, bounds=(-1, 1), classes=classes,
                    feature_scaling=scaling, random_state=0)

    def sums(X, y):
        rel, rel_diag = mech.explore(X, y)
        (s1,) = {r.sensitivity for r in rel.noise if r.statistic.startswith("sum of unit rows")}
        return _stacked_unit_sums(rel_diag, classes), s1

    corner = np.ones(d)  # "bounds": scaled to (1, ..., 1); "none": the unit row (1, ..., 1)/sqrt(d)
    worst, stated = 0.0, set()
    for trial in range(40):
        X = rng.uniform(-1, 1, size=(n, d))
        y = np.arange(n) % 3
        i = int(rng.integers(n))
        X2, y2 = X.copy(), y.copy()
        if trial % 3 != 1:
            X2[i] = rng.choice([-1.0, 1.0], size=d) if trial % 2 else rng.uniform(-1, 1, size=d)
        if trial % 3 != 0:
            y2[i] = (y[i] + 1 + int(rng.integers(2))) % 3  # the record changes class
        if trial < 6:  # adversarial: the extreme row, then moved to another class / negated
            X[i] = corner
            X2[i] = corner if trial % 3 == 1 else (-corner if scaling == "none" else corner)
        (a, s1), (b, s1b) = sums(X, y), sums(X2, y2)
        stated |= {s1, s1b}
        worst = max(worst, np.abs(a - b).sum())
    (s1,) = stated
    assert s1 == pytest.approx(2 * math.sqrt(d))
    assert worst <= s1 * (1 + 1e-9)
    assert worst >= 0.8 * s1  # attained: a corner row leaving one class and joining another


def test_protected_second_moment_sums_are_over_unit_rows_and_their_sensitivity_holds():
    """Alg. 5 protected: the released per-class second moment is sum_c z z^T / DP count over the
    class's projected rows (norm <= 1, checked at epsilon = inf against an independent
    recomputation); for such rows the stacked upper triangles change by at most the stated
    S1 = p + 1 when one row is replaced, its label included, and a unit row (1, ..., 1)/sqrt(p)
    moving class attains it."""
    X, y = _blobs(n=60, d=8, k=3, seed=12)
    p, classes = 3, [0, 1, 2]
    rel, rel_diag = RONGauss(noise="laplace",
                             epsilon=INF, n_components=p, bounds=(-2, 2), feature_scaling="none",
                   classes=classes, random_state=0).explore(X, y)
    W, counts = rel.transform_arrays["W"], rel_diag["class_counts_dp"]
    for c in classes:
        Z = _true_preprocessed(X[y == c], rel_diag["mu_dp"][c]) @ W
        assert np.linalg.norm(Z, axis=1).max() <= 1 + 1e-12
        np.testing.assert_allclose(rel_diag["sigma_dp"][c] * counts[c], Z.T @ Z, atol=1e-10)
    (s1,) = {r.sensitivity for r in rel.noise if r.statistic.startswith("second moment Sigma")}
    assert s1 == pytest.approx(p + 1)

    iu = np.triu_indices(p)

    def stacked(Z, lab):
        return np.concatenate([(Z[lab == c].T @ Z[lab == c])[iu] for c in classes])

    rng = np.random.default_rng(13)
    worst = 0.0
    for trial in range(1500):
        Z = rng.standard_normal((9, p))
        Z *= rng.uniform(0, 1, size=(9, 1)) ** (1 / p) / np.linalg.norm(Z, axis=1, keepdims=True)
        lab = np.arange(9) % 3
        i = int(rng.integers(9))
        Z2, lab2 = Z.copy(), lab.copy()
        if trial % 3 != 1:
            v = rng.standard_normal(p) if trial % 2 else rng.choice([-1.0, 1.0], size=p)
            Z2[i] = v / np.linalg.norm(v)
        if trial % 3 != 0:
            lab2[i] = (lab[i] + 1 + int(rng.integers(2))) % 3
        if trial == 0:  # adversarial: the same extreme unit row leaves class 0 and joins class 1
            Z[i] = Z2[i] = np.ones(p) / math.sqrt(p)
            lab[i], lab2[i] = 0, 1
        worst = max(worst, np.abs(stacked(Z, lab) - stacked(Z2, lab2)).sum())
    assert worst <= s1 * (1 + 1e-12)
    assert worst >= 0.8 * s1


@pytest.mark.slow
def test_protected_one_label_change_does_not_fix_the_released_class_sizes():
    """{100, 100} vs {99, 101} (one record's label changed): the paper's algorithm releases the
    true class sizes deterministically (distinguishable with certainty); with protected labels
    both outcomes occur under both neighbours."""
    X, y = _labelled(n=200, d=4, k=2, seed=14)
    y2 = y.copy()
    y2[np.flatnonzero(y == 0)[0]] = 1
    assert list(np.bincount(y)) == [100, 100] and list(np.bincount(y2)) == [99, 101]
    kw = {"epsilon": 2.0, "n_components": 2, "bounds": (-1, 1), "classes": [0, 1]}
    paper = RONGauss(label_privacy="within-class", random_state=0, **kw)
    assert list(np.bincount(paper.release(X, y).labels)) == [100, 100]
    assert list(np.bincount(paper.release(X, y2).labels)) == [99, 101]
    mech = RONGauss(histogram_fraction=0.5, **kw)  # eps_histogram = 1
    seen = {}
    for name, labels in (("D", y), ("D'", y2)):
        outcomes = [tuple(np.bincount(mech.set_params(random_state=s).release(X, labels).labels,
                                      minlength=2)) for s in range(60)]
        seen[name] = {o: outcomes.count(o) for o in ((100, 100), (99, 101))}
    for name in seen:  # ~10 of each outcome expected in 60 releases
        assert min(seen[name].values()) >= 3, seen


def test_protected_card_states_replace_one_and_the_histogram_part():
    X, y = _blobs(n=300, d=6, k=3, seed=15)
    eps, h, d, p = 2.0, 0.2, 6, 2
    rel = RONGauss(noise="laplace", epsilon=eps, histogram_fraction=h, n_components=p, bounds=(-2, 2),
                   classes=[0, 1, 2], random_state=0).release(X, y)
    card = json.loads(rel.card_json())
    assert card["guarantee"]["neighbouring"] == "replace-one" and card["guarantee"]["holds"] is True
    assert card["guarantee"]["epsilon"] == pytest.approx(eps)
    parts = card["details"]["epsilon_parts"]
    assert parts["histogram"] == pytest.approx(h * eps)
    assert parts["mean"] == pytest.approx((1 - h) * 0.3 * eps)
    assert parts["covariance"] == pytest.approx((1 - h) * 0.7 * eps)
    hist = [r for r in card["noise"] if r["statistic"].startswith("class histogram")]
    assert len(hist) == 1 and hist[0]["scale"] == pytest.approx(2 / (h * eps))
    sums = [r for r in card["noise"] if r["statistic"].startswith("sum of unit rows of class")]
    assert len(sums) == 3 and all(r["scale"] == pytest.approx(2 * math.sqrt(d) / parts["mean"])
                                  for r in sums)
    assert any("labels are protected" in a for a in card["details"]["assumptions"])
    paper = json.loads(RONGauss(noise="laplace",
                                epsilon=eps, n_components=p, bounds=(-2, 2), classes=[0, 1, 2],
                                label_privacy="within-class", random_state=0).release(X, y).card_json())
    assert paper["guarantee"]["neighbouring"] == "replace-one-within-class"
    assert "histogram" not in paper["details"]["epsilon_parts"]
    assert not any(r["statistic"].startswith("class histogram") for r in paper["noise"])


def test_protected_utility_on_separated_classes_at_large_epsilon():
    X, y = _blobs(n=3000, d=10, k=2, seed=16)
    keep = (y == 0) | (np.arange(len(y)) % 5 == 0)  # about 83% / 17%: the majority rate matters
    X, y = X[keep], y[keep]
    te = np.random.default_rng(0).permutation(len(y)) < len(y) // 4
    tr = ~te
    base = evaluate_non_private((X[tr], y[tr]), (X[te], y[te]), "classification")["svm_accuracy"]
    majority = max(np.mean(y[te]), 1 - np.mean(y[te]))
    accs = [evaluate_release(RONGauss(epsilon=50.0, n_components=4, bounds=(-2, 2),
                                      feature_scaling="none", classes=[0, 1],
                                      random_state=s).release(X[tr], y[tr]),
                             X[te], y[te])["svm_accuracy"] for s in range(2)]
    assert base > 0.98 and majority > 0.8
    assert np.mean(accs) >= base - 0.03 and min(accs) > majority + 0.1


@pytest.mark.parametrize("scaling", ["folded", "explicit", "none"])
@pytest.mark.parametrize("labelled", [False, True])
def test_pass_two_statistics_summed_block_by_block_equal_the_literal_pipeline(monkeypatch, scaling, labelled):
    """Pass 2's statistics (``Z^T Z``, column sums, rows zeroed after centring) are summed block by
    block without the ``(n, p)`` projection; across many blocks (a block of 40 rows here), with
    zero rows, rows equal to mu (zeroed) and rows near mu (recomputed), they equal the literal
    Alg. 1 pipeline's, and the projection's own ``Z^T Z``."""
    from functools import partial

    from dpcore.mechanisms import ron_gauss as rg
    from dpcore.mechanisms._gaussian_model import label_to_unit
    from dpcore.preprocessing import row_blocks

    monkeypatch.setattr(rg, "row_blocks", partial(row_blocks, block_bytes=40 * 8 * 6))
    rng = np.random.default_rng(11)
    n, d, p = 1000, 6, 4
    lo, width = {"folded": (np.full(d, -1.0), np.full(d, 2.0)),        # |lo/width| <= 4: folded
                 "explicit": (np.full(d, -100.0), np.full(d, 20.0)),   # |lo/width| = 5: scaled rows
                 "none": (None, None)}[scaling]
    Xs = rng.uniform(0.0, 1.0, size=(n, d))
    mu = Xs[0] / np.linalg.norm(Xs[0])              # a unit mu: rows in its direction centre to 0
    Xs[:5] = 0.0                                    # zero rows
    Xs[5:9] = 0.5 * mu                              # x^ = mu: zeroed after centring
    Xs[9:12] = mu * (1 + 1e-7 * rng.standard_normal((3, d)))  # near mu: recomputed from the rows
    X = Xs if lo is None else Xs * width + lo
    W = np.linalg.qr(rng.standard_normal((d, d)))[0][:, :p]
    loader = rg._RowLoader(X, lo=lo, width=width)
    inv_norms, _, _, direct = rg._unit_rows_pass(loader)
    labels = rng.uniform(-3.0, 5.0, size=n) if labelled else None
    label_map = ((-3.0, 5.0), 0.5)
    gram, total, n_zero = rg._projected_moments(loader, inv_norms, W, mu, direct, labels,
                                                 label_map if labelled else None)
    # the literal pipeline (test oracle): normalise, centre on mu, normalise (zero rows stay 0)
    norms = np.linalg.norm(Xs, axis=1, keepdims=True)
    Xn = np.divide(Xs, norms, out=np.zeros_like(Xs), where=norms > rg.ZERO_NORM)
    C = Xn - mu
    r = np.linalg.norm(C, axis=1, keepdims=True)
    Z = np.divide(C, r, out=np.zeros_like(C), where=r > rg.ZERO_NORM) @ W
    if labelled:
        Z = np.column_stack([Z, label_to_unit(labels, *label_map)])
    assert gram.shape == (p + labelled, p + labelled)
    np.testing.assert_allclose(gram, Z.T @ Z, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(total, Z.sum(axis=0), rtol=1e-9, atol=1e-9)
    assert np.array_equal(gram, gram.T)
    assert n_zero == int(np.sum(r <= rg.ZERO_NORM)) >= 4
    Zp, n_zero_p = rg._projection_pass(loader, inv_norms, W, mu, direct)
    assert n_zero_p == n_zero
    np.testing.assert_allclose(gram[:p, :p], Zp.T @ Zp, rtol=1e-12, atol=1e-12)
    assert np.all(np.linalg.norm(Zp, axis=1) <= 1.0)
