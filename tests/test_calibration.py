"""Tests of dpcore.calibration: Gaussian/Laplace calibration, budget splits and matrix helpers.

Independent references: dp-accounting's Gaussian privacy-loss distribution (exact delta of the
Gaussian mechanism), exact rational arithmetic for budget splits, and textbook distributional facts
(Laplace variance 2 b^2, Haar-uniform columns have mean 0 and E[W_00^2] = 1/d).
Statistical tests use fixed seeds, so they are deterministic; each states its tolerance.
"""

from __future__ import annotations

import functools
import math
import operator
from fractions import Fraction

import numpy as np
import pytest

from dpcore.calibration import (
    EpsilonSplit,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    haar_stiefel,
    laplace_scale,
    psd_repair,
    upper_triangle_l1_sensitivity,
)
from dpcore.noise import noise_source, symmetric_laplace

GRID = [(eps, delta, s) for eps in (0.1, 1.0, 5.0, 20.0) for delta in (1e-3, 1e-8) for s in (0.5, 3.0)]


# ------------------------------------------------------------------------- analytic Gaussian
@pytest.mark.parametrize(("eps", "delta", "sens"), GRID)
def test_analytic_sigma_gives_exactly_delta_per_dp_accounting_pld(eps, delta, sens):
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    sigma = analytic_gaussian_sigma(sens, eps, delta)
    # value_discretization_interval=1e-3 instead of 1e-5: the PLD is pessimistic (an upper bound on
    # delta) and here already agrees with the exact value to ~1e-13 relative, while 1e-5 needs ~90 s
    # at eps=20.
    got = pld.from_gaussian_mechanism(
        sigma, sensitivity=sens, value_discretization_interval=1e-3
    ).get_delta_for_epsilon(eps)
    assert got == pytest.approx(delta, rel=1e-8)
    assert got <= delta * (1 + 1e-9)  # never above the target


@pytest.mark.parametrize(("eps", "delta", "sens"), GRID)
def test_analytic_sigma_is_the_smallest_sigma(eps, delta, sens):
    plm = pytest.importorskip("dp_accounting.pld.privacy_loss_mechanism")
    sigma = analytic_gaussian_sigma(sens, eps, delta)
    exact = plm.GaussianPrivacyLoss(sigma, sensitivity=sens).get_delta_for_epsilon(eps)
    smaller = plm.GaussianPrivacyLoss(sigma * (1 - 1e-6), sensitivity=sens).get_delta_for_epsilon(eps)
    assert exact <= delta * (1 + 1e-12)
    assert smaller > delta  # any less noise breaks (eps, delta)


@pytest.mark.parametrize("eps", [0.05, 0.1, 0.5, 0.9, 0.999])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_analytic_never_worse_than_classic_below_one(eps, delta):
    assert analytic_gaussian_sigma(2.0, eps, delta) <= classic_gaussian_sigma(2.0, eps, delta)


def test_classic_sigma_formula_and_range():
    s, eps, delta = 1.7, 0.5, 1e-5
    expected = s * math.sqrt(2 * math.log(1.25 / delta)) / eps
    assert classic_gaussian_sigma(s, eps, delta) == pytest.approx(expected)
    with pytest.raises(ValueError, match="epsilon"):
        classic_gaussian_sigma(s, 1.0, delta)


@pytest.mark.parametrize(("eps", "delta"), [(0.1, 1e-5), (1.0, 1e-8), (20.0, 1e-3)])
def test_analytic_sigma_is_linear_in_sensitivity(eps, delta):
    base = analytic_gaussian_sigma(1.0, eps, delta)
    for sens in (0.01, 0.5, 3.0, 250.0):
        assert analytic_gaussian_sigma(sens, eps, delta) == pytest.approx(sens * base, rel=1e-9)


def test_analytic_sigma_decreases_in_epsilon_and_delta():
    sig_eps = [analytic_gaussian_sigma(1.0, e, 1e-6) for e in (0.1, 0.5, 1, 2, 8, 50)]
    assert all(a > b for a, b in zip(sig_eps, sig_eps[1:], strict=False))
    sig_delta = [analytic_gaussian_sigma(1.0, 1.0, d) for d in (1e-12, 1e-8, 1e-4, 1e-2)]
    assert all(a > b for a, b in zip(sig_delta, sig_delta[1:], strict=False))


def test_infinite_epsilon_means_no_noise():
    assert analytic_gaussian_sigma(3.0, math.inf, 1e-5) == 0.0
    assert laplace_scale(3.0, math.inf) == 0.0


@pytest.mark.parametrize("eps", [0, -1.0, math.nan, "abc", None])
def test_bad_epsilon_raises(eps):
    with pytest.raises(ValueError, match="epsilon"):
        analytic_gaussian_sigma(1.0, eps, 1e-5)
    with pytest.raises(ValueError, match="epsilon"):
        laplace_scale(1.0, eps)


@pytest.mark.parametrize("delta", [0, 1, 1.5, -1e-3, math.nan, "x"])
def test_bad_delta_raises(delta):
    with pytest.raises(ValueError, match="delta"):
        analytic_gaussian_sigma(1.0, 1.0, delta)
    with pytest.raises(ValueError, match="delta"):
        classic_gaussian_sigma(1.0, 0.5, delta)


@pytest.mark.parametrize("sens", [-1.0, math.inf, math.nan])
def test_bad_sensitivity_raises(sens):
    with pytest.raises(ValueError, match="sensitivity"):
        analytic_gaussian_sigma(sens, 1.0, 1e-5)
    with pytest.raises(ValueError, match="sensitivity"):
        laplace_scale(sens, 1.0)


# ------------------------------------------------------------------------- Laplace
@pytest.mark.parametrize(("sens", "eps"), [(1.0, 1.0), (2.5, 0.1), (0.3, 7.0), (0.0, 2.0)])
def test_laplace_scale_is_sensitivity_over_epsilon(sens, eps):
    assert laplace_scale(sens, eps) == pytest.approx(sens / eps, rel=1e-15)


# ------------------------------------------------------------------------- EpsilonSplit
def _split_cases() -> list[tuple[float, list[float]]]:
    cases: list[tuple[float, list[float]]] = [
        (0.3, [1 / 3, 1 / 3, 1 / 3]),
        (1.0, [0.1, 0.2, 0.7]),
        (0.3, [0.1 / 0.3, 0.2 / 0.3]),
        (1.0, [0.1, 0.2, 0.3, 0.4]),
        (1.1, [0.1, 0.2, 0.3, 0.4]),
        (7.0, [0.1, 0.3, 0.6]),
        (1e-300, [0.5, 0.5]),
        (1e300, [0.3, 0.7]),
        (5e-324 * 7, [0.5, 0.5]),
        (1.0, [1.0]),
        (3.0, [0.25, 0.25, 0.25, 0.25]),
    ]
    rng = np.random.default_rng(12345)
    for _ in range(3000):
        k = int(rng.integers(2, 7))
        fr = rng.dirichlet(np.ones(k))
        fr = [float(f) for f in fr / fr.sum()]
        if math.fsum(fr) > 1 or min(fr) <= 0:
            continue
        total = float(10 ** rng.uniform(-4, 4))
        cases.append((total, fr))
    return cases


SPLIT_CASES = _split_cases()


def test_split_parts_never_exceed_total_correctly_rounded_sum():
    for total, fr in SPLIT_CASES:
        split = EpsilonSplit.from_fractions(total, {f"p{i}": f for i, f in enumerate(fr)})
        assert math.fsum(split.parts) <= total, (total, fr, split.parts)


def test_split_parts_are_fraction_times_total_rounded_down_by_at_most_a_few_ulp():
    for total, fr in SPLIT_CASES:
        split = EpsilonSplit.from_fractions(total, {f"p{i}": f for i, f in enumerate(fr)})
        assert len(split.parts) == len(fr)
        for part, f in zip(split.parts, fr, strict=True):
            target = f * total
            assert part <= target  # only ever rounded down
            # the total deficit to remove is < len(fr)/2 ulp(total); it is taken from the parts
            assert target - part <= len(fr) * math.ulp(total), (total, fr, split.parts)
            assert part > 0


def test_split_parts_never_exceed_total_exactly_or_summed_left_to_right():
    for total, fr in SPLIT_CASES:
        split = EpsilonSplit.from_fractions(total, {f"p{i}": f for i, f in enumerate(fr)})
        assert sum(map(Fraction, split.parts)) <= Fraction(total), (total, fr, split.parts)
        assert functools.reduce(operator.add, split.parts) <= total, (total, fr, split.parts)


def test_split_accessors_and_infinite_total():
    split = EpsilonSplit.from_fractions(2.0, {"mean": 0.3, "covariance": 0.7})
    assert split.names == ("mean", "covariance")
    assert split["mean"] == split.parts[0] and split["covariance"] == split.parts[1]
    assert split.as_dict() == {"mean": split.parts[0], "covariance": split.parts[1]}
    with pytest.raises(ValueError):
        split["nope"]
    inf = EpsilonSplit.from_fractions(math.inf, {"a": 0.3, "b": 0.7})
    assert inf.parts == (math.inf, math.inf)
    with pytest.raises(AttributeError):
        split.total = 3.0  # frozen


@pytest.mark.parametrize(
    "fractions",
    [{"a": 0.0, "b": 1.0}, {"a": -0.1, "b": 1.1}, {"a": 1.5}, {"a": math.nan, "b": 0.5},
     {"a": 0.6, "b": 0.6}, {"a": 0.5, "b": 0.5, "c": 0.01}],
)
def test_split_bad_fractions_raise(fractions):
    with pytest.raises(ValueError, match="fraction"):
        EpsilonSplit.from_fractions(1.0, fractions)


@pytest.mark.parametrize("total", [0.0, -1.0, math.nan])
def test_split_bad_total_raises(total):
    with pytest.raises(ValueError, match="epsilon"):
        EpsilonSplit.from_fractions(total, {"a": 1.0})


# ------------------------------------------------------------------------- symmetric noise
def test_symmetric_laplace_noise_is_symmetric_with_laplace_variance():
    # dpcore.noise.symmetric_laplace: the grid Laplace mechanism on the upper triangle, mirrored
    bits = noise_source(2024)
    size, scale, reps = 40, 1.7, 50
    zero = np.zeros((size, size))
    draws = [symmetric_laplace(zero, scale, 1.0, bits=bits) for _ in range(reps)]
    iu = np.triu_indices(size)
    for m, draw in draws:
        assert m.shape == (size, size)
        np.testing.assert_array_equal(m, m.T)
        assert draw.scale == pytest.approx(scale, rel=1e-9) and draw.scale >= scale
    upper = np.concatenate([m[iu] for m, _ in draws])
    n = upper.size  # 41,000 draws
    # Var(Lap(b)) = 2 b^2; the sample variance has relative s.e. sqrt((kurtosis - 1)/n) = sqrt(5/n)
    # (Laplace kurtosis 6) = 1.1%; tolerance 6 s.e.
    rel_se = math.sqrt(5 / n)
    assert np.var(upper) == pytest.approx(2 * scale**2, rel=6 * rel_se)
    assert abs(np.mean(upper)) < 6 * math.sqrt(2) * scale / math.sqrt(n)
    # E|X| = b for Laplace (a second, shape-sensitive moment; s.e. b/sqrt(n))
    assert np.mean(np.abs(upper)) == pytest.approx(scale, abs=6 * scale / math.sqrt(n))
    # the diagonal is noised too, and off-diagonal entries are not duplicated draws
    assert np.all(np.diag(draws[0][0]) != 0)
    assert np.unique(upper).size == n


def test_symmetric_laplace_noise_zero_scale_is_zero():
    m, draw = symmetric_laplace(np.eye(5), 1.0, math.inf, bits=noise_source(0))
    np.testing.assert_array_equal(m, np.eye(5))
    assert draw.scale == 0


# ------------------------------------------------------------------------- sensitivity
def _upper_l1_direct(a: np.ndarray) -> float:
    return float(sum(abs(a[i, j]) for i in range(a.shape[0]) for j in range(i, a.shape[0])))


@pytest.mark.parametrize("p", [1, 2, 4, 10])
def test_upper_triangle_l1_sensitivity_matches_spec_formula(p):
    rng = np.random.default_rng(p)
    for _ in range(50):
        x, x2 = rng.normal(size=p), rng.normal(size=p)
        a = np.outer(x, x) - np.outer(x2, x2)
        spec = (np.abs(a).sum() + np.abs(np.diag(a)).sum()) / 2
        assert upper_triangle_l1_sensitivity(a) == pytest.approx(spec, rel=1e-12)
        assert upper_triangle_l1_sensitivity(a) == pytest.approx(_upper_l1_direct(a), rel=1e-12)


@pytest.mark.parametrize("p", [2, 4, 10])
def test_upper_triangle_sensitivity_of_unit_vectors_within_sound_bound(p):
    # SPEC section 2: for ||x|| <= 1 the upper-triangle L1 change is at most p + 1
    rng = np.random.default_rng(100 + p)
    worst = 0.0
    for _ in range(2000):
        x, x2 = rng.normal(size=p), rng.normal(size=p)
        x /= np.linalg.norm(x)
        x2 /= np.linalg.norm(x2)
        worst = max(worst, upper_triangle_l1_sensitivity(np.outer(x, x) - np.outer(x2, x2)))
    assert worst <= p + 1
    # ... and the published 2 sqrt(p) is beaten for p >= 4 (upper triangle >= half the full matrix)
    x = np.ones(p) / math.sqrt(p)
    x2 = np.where(np.arange(p) % 2 == 0, 1.0, -1.0) / math.sqrt(p)
    full = np.abs(np.outer(x, x) - np.outer(x2, x2)).sum()
    assert full == pytest.approx(p)  # half the entries change by 2/p


# ------------------------------------------------------------------------- PSD repair
def test_psd_repair_gives_symmetric_psd():
    rng = np.random.default_rng(7)
    for d in (1, 3, 8, 20):
        a = rng.normal(size=(d, d)) * 3
        out = psd_repair(a)
        np.testing.assert_array_equal(out, out.T)
        assert np.linalg.eigvalsh(out).min() >= -1e-10 * max(1.0, np.abs(a).max())
        # eigenvalues are the symmetrised input's, clipped at 0
        sym_vals = np.linalg.eigvalsh((a + a.T) / 2)
        np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(out)), np.sort(np.maximum(sym_vals, 0)),
                                   atol=1e-9 * np.abs(sym_vals).max())
        # idempotent
        np.testing.assert_allclose(psd_repair(out), out, atol=1e-10 * np.abs(a).max())


def test_psd_repair_leaves_psd_matrix_unchanged():
    rng = np.random.default_rng(8)
    b = rng.normal(size=(6, 6))
    a = b @ b.T + 0.1 * np.eye(6)
    np.testing.assert_allclose(psd_repair(a), a, rtol=0, atol=1e-12 * np.abs(a).max())


def test_psd_repair_floor():
    a = np.diag([2.0, -1.0, 0.0])
    out = psd_repair(a, floor=0.5)
    np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(out)), [0.5, 0.5, 2.0], atol=1e-12)


# ------------------------------------------------------------------------- Stiefel
@pytest.mark.parametrize("method", ["haar", "paper"])
@pytest.mark.parametrize(("d", "p"), [(5, 1), (5, 3), (30, 30), (64, 10)])
def test_stiefel_columns_are_orthonormal(method, d, p):
    w = haar_stiefel(d, p, np.random.default_rng(d * p), method=method)
    assert w.shape == (d, p)
    np.testing.assert_allclose(w.T @ w, np.eye(p), atol=1e-12)


def test_stiefel_haar_differs_from_paper_uniform_qr():
    d, p, reps = 5, 2, 4000
    rng = np.random.default_rng(99)
    haar = np.array([haar_stiefel(d, p, rng, method="haar")[0] for _ in range(reps)])
    paper = np.array([haar_stiefel(d, p, rng, method="paper")[0] for _ in range(reps)])
    # Haar: each column is uniform on the unit sphere, so W[0, j] has mean 0, variance 1/d.
    se = math.sqrt(1 / d / reps)  # 0.0071
    assert abs(haar[:, 0].mean()) < 5 * se
    assert abs(haar[:, 1].mean()) < 5 * se
    assert (haar[:, 0] ** 2).mean() == pytest.approx(1 / d, abs=0.02)
    # sign symmetry of the first entry (binomial, 5 s.e.)
    assert abs((haar[:, 0] > 0).mean() - 0.5) < 5 * 0.5 / math.sqrt(reps)
    # The paper's QR of a Uniform(0, 1) matrix: the first column is +-(positive vector)/norm, so
    # W[0, 0] has one sign and |mean| ~ 0.4 -- not Haar.
    assert abs(paper[:, 0].mean()) > 0.2
    assert abs(paper[:, 0].mean()) > 20 * se


def test_stiefel_bad_arguments():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="n_components"):
        haar_stiefel(3, 4, rng)
    with pytest.raises(ValueError, match="n_components"):
        haar_stiefel(3, 0, rng)
    with pytest.raises(ValueError, match="projection"):
        haar_stiefel(3, 2, rng, method="gaussian")


def test_recommended_n_components_weighs_the_identity_on_narrow_tables_only():
    """identity=True adds p = d with no basis (nothing left out or hidden, the whole model share):
    it wins where d is small next to what the budget can measure, never on a wide table at a small
    budget, and never when not asked for; a given n_components below d excludes it."""
    from dpcore.calibration import recommended_n_components as rule

    narrow = rule(2100, 2, epsilon=1.0, delta=1e-6, model_share=0.7, dp_basis=True, identity=True)
    assert narrow["basis"] == "identity" and narrow["n_components"] == 2 and narrow["pca_fraction"] is None
    assert narrow["predicted_error"] == narrow["identity_error"]
    wide = rule(300, 30, epsilon=0.1, delta=1e-6, model_share=0.7, dp_basis=True, identity=True)
    assert wide["basis"] == "dp" and wide["n_components"] < 30
    assert wide["identity_error"] > wide["predicted_error"]
    off = rule(2100, 2, epsilon=1.0, delta=1e-6, model_share=0.7, dp_basis=True)
    assert off["basis"] == "dp" and off["n_components"] == 1 and off["identity_error"] is None
    given = rule(2100, 2, epsilon=1.0, delta=1e-6, model_share=0.7, dp_basis=True, identity=True,
                 n_components=1)
    assert given["n_components"] == 1 and given["basis"] == "dp"
