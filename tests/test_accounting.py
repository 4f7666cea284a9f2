"""Tests for the DPMix Rényi-DP accountant (dpcore.accounting)."""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
import pytest

from dpcore import accounting as acc
from dpcore.accounting import (
    RDPEpsilon,
    dpmix_calibrate_sigma,
    dpmix_epsilon,
    dpmix_rdp,
    gaussian_rdp,
    rdp_to_dp,
)

# SPEC 6.1 setting: d_X = d_Y = 50, n = T = 1e6, delta = 1/n, sigma_X = sigma_Y = sigma.
N = 10**6
SETTING = dict(n=N, n_mixtures=N, d_x=50, d_y=50, delta=1.0 / N)


def _eps(sigma, ell, bound="tight", **kw):
    params = {**SETTING, **kw}
    return dpmix_epsilon(sigma_x=sigma, sigma_y=sigma, ell=ell, bound=bound, **params)


def _rdp(alpha, sigma, ell, bound="tight", n=N, d_x=50, d_y=50):
    return dpmix_rdp(alpha, sigma_x=sigma, sigma_y=sigma, ell=ell, n=n, d_x=d_x, d_y=d_y, bound=bound)


# --------------------------------------------------------------------------------------------
# Reference values (SPEC 6.1)
# --------------------------------------------------------------------------------------------

# (ell, sigma): (paper, tight) as written in SPEC 6.1.
SPEC_VALUES = {
    (1, 4.0): (4.650, 3.900),
    (1, 8.0): (0.8637, 0.6260),
    (16, 2.0): (0.07350, 0.04487),
    (64, 8.0): (0.01316, 0.008358),
    (256, 32.0): (0.003288, 0.001836),
}
# SPEC's tight value at ell = 1, sigma = 4 is the *paper* per-order RDP combined with the improved
# conversion (3.9001); the tight per-term minimum of WBK 2019 (Theorems 9 and 27) gives 3.8707,
# which dp-accounting reproduces (see test_matches_dp_accounting_epsilon). The j = 3 term is where
# they differ: 4 sqrt(B(2) B(4)) ~ 1.3e10 against 2 exp(2 eps_G(3)) = 2 e^{18.75} ~ 2.8e8.
TIGHT_CORRECTED = {(1, 4.0): 3.870714}


@pytest.mark.parametrize(("ell", "sigma"), list(SPEC_VALUES))
def test_spec_reference_values_paper(ell, sigma):
    res = _eps(sigma, ell, bound="paper")
    assert isinstance(res, RDPEpsilon)
    assert res.bound == "paper" and res.delta == 1.0 / N
    assert res.epsilon == pytest.approx(SPEC_VALUES[(ell, sigma)][0], rel=1e-3)


@pytest.mark.parametrize(("ell", "sigma"), list(SPEC_VALUES))
def test_spec_reference_values_tight(ell, sigma):
    expected = TIGHT_CORRECTED.get((ell, sigma), SPEC_VALUES[(ell, sigma)][1])
    assert _eps(sigma, ell).epsilon == pytest.approx(expected, rel=1e-3)


def test_spec_tight_value_at_ell1_sigma4_is_paper_rdp_with_improved_conversion():
    orders = np.arange(2, 41)
    paper = _rdp(orders, 4.0, 1, bound="paper")
    eps, alpha = rdp_to_dp(N * paper, orders, 1.0 / N, conversion="improved")
    assert eps == pytest.approx(3.900, rel=1e-4)  # SPEC's number ...
    assert _eps(4.0, 1).epsilon < 0.995 * eps  # ... is not the tight bound
    assert alpha == 4


def test_alpha_star_in_the_thousands():
    # SPEC: alpha* ~ 8,400 at ell = 64, sigma = 32 (paper bound).
    res = _eps(32.0, 64, bound="paper")
    assert 8000 < res.alpha < 8800
    assert isinstance(res.alpha, int) and isinstance(res.epsilon, float)


# --------------------------------------------------------------------------------------------
# Structural properties
# --------------------------------------------------------------------------------------------

GRID_SIGMA = np.geomspace(0.5, 64.0, 12)
GRID_ELL = np.array([1, 4, 16, 64, 256, 4096])


def test_paper_never_below_tight_and_decreasing_in_sigma():
    s, e = np.meshgrid(GRID_SIGMA, GRID_ELL)
    paper = _eps(s, e, bound="paper")
    tight = _eps(s, e, bound="tight")
    assert paper.epsilon.shape == s.shape == tight.alpha.shape
    assert np.all(tight.epsilon <= paper.epsilon)
    assert np.all(tight.epsilon < paper.epsilon)  # strictly, in this setting
    for res in (paper, tight):
        assert np.all(np.diff(res.epsilon, axis=1) < 0)  # strictly decreasing in sigma
        assert np.all(res.alpha >= 2)


@pytest.mark.slow
def test_per_order_rdp_paper_at_least_tight_and_nondecreasing_in_alpha():
    orders = np.arange(2, 3001)
    for ell, sigma in [(1, 8.0), (16, 2.0), (64, 8.0), (N, 1.0)]:
        paper = _rdp(orders, sigma, ell, bound="paper")
        tight = _rdp(orders, sigma, ell, bound="tight")
        assert np.all(tight <= paper)
        for r in (paper, tight):
            # The order search relies on eps'(alpha) being non-decreasing (true for the RDP itself).
            assert np.all(np.diff(r) >= -1e-13 * r[1:])


def test_array_results_match_scalar_calls():
    sig = np.array([[2.0], [8.0]])
    ell = np.array([1, 16, 64])
    res = _eps(sig, ell)
    assert res.epsilon.shape == (2, 3) and res.alpha.dtype.kind == "i"
    for i in range(2):
        for j in range(3):
            one = _eps(float(sig[i, 0]), int(ell[j]))
            assert res.epsilon[i, j] == one.epsilon
            assert res.alpha[i, j] == one.alpha


@pytest.mark.parametrize("bound", ["paper", "tight"])
@pytest.mark.parametrize(
    ("ell", "sigma", "T", "delta"),
    [
        (16, 2.0, N, 1e-6),  # optimum at the cliff, alpha* = 225
        (1, 8.0, N, 1e-6),  # cliff at alpha ~ 18
        (64, 8.0, N, 1e-6),  # smooth optimum in the thousands
        (300, 5.0, 10**5, 1e-8),
        (N // 2, 0.06, 50, 1e-5),  # q = 1/2
    ],
)
def test_search_equals_exhaustive_minimum(bound, ell, sigma, T, delta):
    res = _eps(sigma, ell, bound=bound, n_mixtures=T, delta=delta)
    orders = np.arange(2, 3 * res.alpha + 200)
    rdp = _rdp(orders, sigma, ell, bound=bound)
    conv = "improved" if bound == "tight" else "classic"
    eps, alpha = rdp_to_dp(T * rdp, orders, delta, conversion=conv)
    assert alpha == res.alpha
    assert res.epsilon == pytest.approx(eps, rel=1e-12)
    # Beyond the scanned range nothing can do better: eps' is non-decreasing and the
    # conversion term is >= -log(a)/(a - 1) + log1p(-1/a).
    a_max = orders[-1]
    assert T * rdp[-1] + math.log1p(-1 / a_max) - math.log(a_max) / (a_max - 1) > eps


@pytest.mark.parametrize(
    ("ell", "sigma", "bound"),
    [(16, 2.0, "paper"), (16, 2.0, "tight"), (1, 8.0, "tight"), (N // 10, 1.0, "paper")],
)
def test_rdp_equals_untruncated_j_sum(ell, sigma, bound):
    # Independent of the head/tail machinery: every j from 2 to alpha, summed with math.fsum.
    q, c = ell / N, (100 / sigma**2) / ell**2
    orders = [2, 3, 17, 18, 100, 224, 225, 226, 300, 700]
    log_b = dict(zip(range(2, 704, 2), acc._log_B(np.arange(2.0, 704.0, 2.0), c), strict=True))
    for a in orders:
        w2 = min(math.log(4 * math.expm1(c)), math.log(2) + c)
        terms = [math.lgamma(a + 1) - math.lgamma(3) - math.lgamma(a - 1) + 2 * math.log(q) + w2]
        for j in range(3, a + 1):
            lw = math.log(4) + 0.5 * (log_b[2 * (j // 2)] + log_b[2 * ((j + 1) // 2)])
            if bound == "tight":
                lw = min(lw, math.log(2) + c * j * (j - 1) / 2)
            lc = math.lgamma(a + 1) - math.lgamma(j + 1) - math.lgamma(a - j + 1)
            terms.append(lc + j * math.log(q) + lw)
        top = max(terms)
        log_x = top + math.log(math.fsum(math.exp(t - top) for t in terms))
        expected = (log_x + math.log1p(math.exp(-log_x))) / (a - 1)
        if bound == "tight":
            expected = min(expected, a * c / 2)
        got = _rdp(np.array([a]), sigma, ell, bound=bound)[0]
        assert got == pytest.approx(expected, rel=1e-11), a


def test_sparse_order_grid_loses_epsilon():
    # At ell = 16, sigma = 2 the RDP curve has a cliff just after alpha = 225.
    res = _eps(2.0, 16)
    assert res.alpha == 225
    sparse = np.unique(np.round(np.geomspace(2, 4096, 60)))
    rdp = _rdp(sparse, 2.0, 16)
    eps_sparse, _ = rdp_to_dp(N * rdp, sparse, 1.0 / N)
    assert eps_sparse > 1.02 * res.epsilon


def test_labels_optional_and_ratio():
    base = dict(n=1000, n_mixtures=100, delta=1e-5)
    no_labels = dpmix_epsilon(sigma_x=3.0, sigma_y=None, ell=10, d_x=20, d_y=0, **base)
    same = dpmix_epsilon(sigma_x=3.0, sigma_y=7.0, ell=10, d_x=20, d_y=0, **base)
    assert no_labels.epsilon == same.epsilon
    # Only D2 = d_x / sigma_x^2 + d_y / sigma_y^2 matters (here 20/4 + 16/16 = 6).
    a = dpmix_epsilon(sigma_x=2.0, sigma_y=4.0, ell=10, d_x=20, d_y=16, **base)
    b = dpmix_epsilon(sigma_x=math.sqrt(20 / 6), sigma_y=None, ell=10, d_x=20, d_y=0, **base)
    assert a.epsilon == pytest.approx(b.epsilon, rel=1e-12)
    assert a.epsilon > no_labels.epsilon


def test_q_equal_one_tight_is_the_gaussian_mechanism():
    # ell = n: the mixture is the mean of all rows; tight is capped at the Gaussian RDP.
    orders = np.arange(2, 200)
    sigma, n = 0.5, 1000
    d2 = 50 / sigma**2 + 50 / sigma**2
    tight = _rdp(orders, sigma, n, n=n)
    np.testing.assert_allclose(tight, gaussian_rdp(orders, n / math.sqrt(d2)), rtol=1e-14)
    assert np.all(_rdp(orders, sigma, n, n=n, bound="paper") >= tight)


# --------------------------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bound", ["paper", "tight"])
@pytest.mark.parametrize(
    ("target", "ell", "ratio", "d_y"),
    [
        (1.0, 16, 1.0, 50),
        (0.1, 1, 1.0, 50),
        (5.0, 256, 2.0, 50),
        (0.5, 64, 1.0, 0),
    ],
)
def test_calibration_round_trip(bound, target, ell, ratio, d_y):
    kw = dict(n=N, n_mixtures=N, d_x=50, d_y=d_y)
    sigma = dpmix_calibrate_sigma(epsilon=target, delta=1e-6, ell=ell, sigma_ratio=ratio, bound=bound, **kw)
    sy = ratio * sigma if d_y else None
    eps = dpmix_epsilon(sigma_x=sigma, sigma_y=sy, ell=ell, delta=1e-6, bound=bound, **kw)
    assert eps.epsilon <= target
    assert eps.epsilon >= target * (1 - 1e-6)
    # Smallest such sigma: a slightly smaller sigma misses the target.
    smaller = dpmix_epsilon(
        sigma_x=sigma * (1 - 1e-5),
        sigma_y=None if sy is None else sy * (1 - 1e-5),
        ell=ell,
        delta=1e-6,
        bound=bound,
        **kw,
    )
    assert smaller.epsilon > target


# --------------------------------------------------------------------------------------------
# Cross-check with dp-accounting
# --------------------------------------------------------------------------------------------


# dp-accounting's per-order cost grows like alpha^2 (pure Python: ~7 s for all of 2..256), so
# orders above 64 are sampled; all are <= 256, where it uses the same (tight) bound as ours.
DPA_ORDERS = tuple(sorted(set(range(2, 65)) | set(range(72, 257, 8)) | {225}))


@functools.cache
def _dp_accounting(ell, sigma):
    """(total RDP at DPA_ORDERS, (epsilon, order)) from dp-accounting, SPEC 6.1 recipe."""
    dp_accounting = pytest.importorskip("dp_accounting")
    d2 = 50 / sigma**2 + 50 / sigma**2
    accountant = dp_accounting.rdp.RdpAccountant(
        [float(a) for a in DPA_ORDERS],
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE,
    )
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.SampledWithoutReplacementDpEvent(
            N, ell, dp_accounting.GaussianDpEvent(ell / math.sqrt(d2))
        ),
        N,
    )
    accountant.compose(event)
    return np.asarray(accountant._rdp), accountant.get_epsilon_and_optimal_order(1.0 / N)


@pytest.mark.slow
@pytest.mark.parametrize(("ell", "sigma"), [(16, 2.0), (1, 8.0), (64, 8.0), (1, 4.0)])
def test_matches_dp_accounting_per_order(ell, sigma):
    rdp, _ = _dp_accounting(ell, sigma)
    ours = N * _rdp(np.array(DPA_ORDERS), sigma, ell)
    np.testing.assert_allclose(ours, rdp, rtol=1e-9)


@pytest.mark.parametrize(("ell", "sigma", "alpha_star"), [(16, 2.0, 225), (1, 4.0, 4)])
def test_matches_dp_accounting_epsilon(ell, sigma, alpha_star):
    # alpha* is inside dp-accounting's exact range and among its orders: the epsilons agree.
    _, (eps, alpha) = _dp_accounting(ell, sigma)
    res = _eps(sigma, ell)
    assert res.alpha == alpha_star == alpha
    assert res.epsilon == pytest.approx(eps, rel=1e-9)


def test_rdp_to_dp_matches_dp_accounting_compute_epsilon():
    rdp_mod = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")
    rng = np.random.default_rng(0)
    for _ in range(20):
        orders = np.sort(rng.uniform(1.5, 500, 30))
        rdp = rng.uniform(0, 5, 30) * orders / 100
        delta = 10 ** rng.uniform(-12, -2)
        eps, alpha = rdp_to_dp(rdp, orders, delta)
        ref_eps, ref_alpha = rdp_mod.compute_epsilon(orders, rdp, delta)
        assert eps == pytest.approx(ref_eps, rel=1e-12, abs=1e-15)
        if ref_eps > 0:
            assert alpha == pytest.approx(ref_alpha)
    eps_c, _ = rdp_to_dp([1.0], [3.0], 1e-5, conversion="classic")
    assert eps_c == pytest.approx(1.0 + math.log(1e5) / 2)


# --------------------------------------------------------------------------------------------
# Numerics of B(m)
# --------------------------------------------------------------------------------------------


def _log_b_mpmath(m: int, c: float) -> float:
    """log B(m) from the alternating sum with enough digits to absorb the cancellation."""
    digits = 40 + int(0.31 * m) + int(max(0.0, -(m / 2) * math.log10(math.expm1(c))))
    digits += int(c * m * m / 4.6)
    with mpmath.workdps(digits):
        cc = mpmath.mpf(c)
        total = mpmath.fsum(
            (-1) ** i * mpmath.binomial(m, i) * mpmath.exp(i * (i - 1) * cc / 2) for i in range(m + 1)
        )
        assert total > 0
        return float(mpmath.log(total))


@pytest.mark.parametrize("c", [1e-14, 1e-8, 1e-4, 1e-2, 0.1, 0.5, 2.0, 10.0, 300.0])
def test_log_b_matches_mpmath(c):
    ms = np.array([m for m in (2, 4, 6, 8, 10, 14, 20, 30, 50, 80) if c * m * m < 4000.0])
    got = acc._log_B(ms.astype(float), c)
    ref = np.array([_log_b_mpmath(int(m), c) for m in ms])
    # Relative error of B below 1e-12 (absolute in log B), or of log B when it is large.
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-12)


def test_log_b_quadrature_agrees_with_top_down_sum_where_both_apply():
    ms = np.array([20.0, 40.0, 80.0, 160.0])
    for c in (0.5, 1.0, 3.0):
        direct = acc._log_B(ms, c)
        quad = acc._log_B_quadrature(ms, np.full(ms.size, c))
        np.testing.assert_allclose(quad, direct, rtol=1e-13)


def test_log_b_small_c_large_m_where_the_float_sum_cancels():
    # The plain alternating float sum has no correct digit here (terms ~ 2^m, B ~ c^{m/2}).
    m, c = 40, 1e-6
    terms = [(-1) ** i * math.comb(m, i) * math.exp(i * (i - 1) * c / 2) for i in range(m + 1)]
    assert abs(math.fsum(terms) - math.exp(_log_b_mpmath(m, c))) > 1e3 * math.exp(_log_b_mpmath(m, c))
    assert acc._log_B(np.array([40.0]), c)[0] == pytest.approx(_log_b_mpmath(m, c), rel=1e-14)


# --------------------------------------------------------------------------------------------
# Robustness
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_no_nan_or_inf_on_a_wide_grid():
    sig = np.geomspace(0.1, 1000.0, 9)[:, None]
    ell = np.array([1, 3, 10, 100, 1000, 10**4, 10**5, 5 * 10**5, 10**6])[None, :]
    for bound in ("paper", "tight"):
        for T, delta in ((N, 1e-6), (1, 1e-3)):
            res = _eps(sig, ell, bound=bound, n_mixtures=T, delta=delta)
            assert np.all(np.isfinite(res.epsilon)) and np.all(res.epsilon >= 0)
            assert np.all(res.alpha >= 2)
            assert np.all(np.diff(res.epsilon, axis=0) <= 0)
    orders = np.array([2, 3, 10, 100, 1000, 10**5])
    for s in (0.1, 1.0, 1000.0):
        for e in (1, 100, 10**6):
            for bound in ("paper", "tight"):
                r = _rdp(orders, s, e, bound=bound)
                assert np.all(np.isfinite(r)) and np.all(r > 0)
                assert np.all(np.diff(r) >= 0)


BAD_INPUTS = [
    (dict(sigma_x=0.0), "sigma_x"),
    (dict(sigma_x=-1.0), "sigma_x"),
    (dict(sigma_x=np.nan), "sigma_x"),
    (dict(sigma_y=0.0), "sigma_y"),
    (dict(sigma_y=None), "sigma_y"),
    (dict(ell=0), "ell"),
    (dict(ell=N + 1), "ell"),
    (dict(ell=2.5), "ell"),
    (dict(ell=[1, 2.5]), "ell"),
    (dict(n=0), "n"),
    (dict(n=10.5), "n"),
    (dict(n_mixtures=0), "n_mixtures"),
    (dict(n_mixtures=2.5), "n_mixtures"),
    (dict(d_x=0), "d_x"),
    (dict(d_y=-1), "d_y"),
    (dict(d_y=1.5), "d_y"),
    (dict(delta=0.0), "delta"),
    (dict(delta=1.0), "delta"),
    (dict(delta="x"), "delta"),
    (dict(bound="loose"), "bound"),
]


@pytest.mark.parametrize(("override", "name"), BAD_INPUTS)
def test_dpmix_epsilon_rejects_bad_input(override, name):
    kw = dict(sigma_x=1.0, sigma_y=1.0, ell=10, n=N, n_mixtures=10, d_x=5, d_y=1, delta=1e-6)
    kw.update(override)
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        dpmix_epsilon(**kw)


def test_other_functions_reject_bad_input():
    kw = dict(sigma_x=1.0, sigma_y=1.0, ell=10, n=100, d_x=5, d_y=1)
    for alpha in (1, 0, 2.5, [2, 3.5], []):
        with pytest.raises(ValueError, match="alpha"):
            dpmix_rdp(alpha, **kw)
    with pytest.raises(ValueError, match="one setting"):
        dpmix_rdp(2, **{**kw, "sigma_x": [1.0, 2.0]})
    with pytest.raises(ValueError, match="bound"):
        dpmix_rdp(2, bound="x", **kw)
    cal = dict(epsilon=1.0, delta=1e-6, ell=10, n=100, n_mixtures=10, d_x=5, d_y=1)
    for key, value in (
        ("epsilon", 0.0),
        ("epsilon", -1.0),
        ("sigma_ratio", 0.0),
        ("delta", 2.0),
        ("ell", 101),
        ("n_mixtures", 0),
        ("bound", "x"),
    ):
        with pytest.raises(ValueError, match=rf"\b{key}\b"):
            dpmix_calibrate_sigma(**{**cal, key: value})
    with pytest.raises(ValueError, match="noise_multiplier"):
        gaussian_rdp(2, 0.0)
    with pytest.raises(ValueError, match="alpha"):
        gaussian_rdp(0.5, 1.0)
    with pytest.raises(ValueError, match="conversion"):
        rdp_to_dp([1.0], [2.0], 1e-5, conversion="x")
    with pytest.raises(ValueError, match="alpha"):
        rdp_to_dp([1.0], [1.0], 1e-5)
    with pytest.raises(ValueError, match="delta"):
        rdp_to_dp([1.0], [2.0], 0.0)


def test_gaussian_rdp():
    assert gaussian_rdp(10, 2.0) == pytest.approx(10 / 8)
    np.testing.assert_allclose(gaussian_rdp(np.array([2.0, 4.0]), 1.0), [1.0, 2.0])


# --------------------------------------------------------------------------------------------
# dpmix_noise: one rule for the mechanism and the Privacy page
# --------------------------------------------------------------------------------------------

_NOISE_SETTINGS = [
    dict(epsilon=3.0, sigma_x=None, sigma_y=None, sigma_ratio=1.0, d_y=2),  # calibrated
    dict(epsilon=3.0, sigma_x=None, sigma_y=None, sigma_ratio=2.5, d_y=1),  # calibrated, ratio
    dict(epsilon=math.inf, sigma_x=None, sigma_y=None, sigma_ratio=1.0, d_y=2),  # NOT PRIVATE
    dict(epsilon=3.0, sigma_x=6.0, sigma_y=None, sigma_ratio=0.5, d_y=3),  # given x, y by ratio
    dict(epsilon=3.0, sigma_x=6.0, sigma_y=0.0, sigma_ratio=1.0, d_y=3),  # zero label noise
    dict(epsilon=3.0, sigma_x=6.0, sigma_y=9.0, sigma_ratio=1.0, d_y=0),  # no labels
]


@pytest.mark.parametrize("setting", _NOISE_SETTINGS)
def test_dpmix_noise_is_the_mechanisms_rule(setting):
    from dpcore.mechanisms.dpmix import _account

    common = dict(ell=8, n=500, n_mixtures=300, d_x=6, d_y=setting["d_y"], delta=1e-6)
    params = {k: setting[k] for k in ("epsilon", "sigma_x", "sigma_y", "sigma_ratio")}
    got = acc.dpmix_noise(**params, bound="tight", **common)
    want = _account({**params, "bound": "tight"}, ell=8, n=500, T=300, d_x=6, d_y=setting["d_y"],
                    delta=1e-6)
    assert {"sigma_x": got.sigma_x, "sigma_y": got.sigma_y, "epsilon": got.epsilon, "alpha": got.alpha,
            "sigma_source": got.sigma_source} == want
    if got.sigma_source == "calibrated":
        assert got.epsilon <= setting["epsilon"] * (1 + 1e-12)
        assert got.sigma_y == pytest.approx(setting["sigma_ratio"] * got.sigma_x, rel=1e-15)
    if setting["sigma_y"] == 0.0 or math.isinf(setting["epsilon"]):
        assert math.isinf(got.epsilon) and got.alpha is None


def test_dpmix_noise_refuses_sigma_y_alone_and_defaults_delta():
    common = dict(ell=8, n=500, n_mixtures=300, d_x=6, d_y=1)
    with pytest.raises(ValueError, match="sigma_y was given without sigma_x"):
        acc.dpmix_noise(epsilon=1.0, sigma_x=None, sigma_y=2.0, sigma_ratio=1.0, **common)
    from dpcore.calibration import default_delta

    dflt = acc.dpmix_noise(epsilon=1.0, sigma_x=4.0, sigma_y=4.0, sigma_ratio=1.0, **common)
    explicit = acc.dpmix_epsilon(sigma_x=4.0, sigma_y=4.0, delta=default_delta(500), **common)
    assert dflt.epsilon == explicit.epsilon


def test_rdp_conversion_term_matches_rdp_to_dp():
    alphas = np.array([2.0, 7.0, 130.0])
    for conversion in ("improved", "classic"):
        term = acc.rdp_conversion_term(alphas, 1e-6, conversion)
        for a, t in zip(alphas, term, strict=True):
            assert rdp_to_dp([0.5], [a], 1e-6, conversion)[0] == pytest.approx(max(0.0, 0.5 + t), rel=1e-15)
    with pytest.raises(ValueError, match="conversion"):
        acc.rdp_conversion_term(alphas, 1e-6, "x")


def test_zcdp_rho_is_remembered_per_epsilon_and_delta():
    """The app asks for the same conversion on every slider move (two or three times a release):
    the second call is the cached result of the first, equal to a fresh bisection."""
    from dpcore.accounting import rdp

    rdp.zcdp_rho.cache_clear()
    first = rdp.zcdp_rho(0.7, 1e-6)
    assert rdp.zcdp_rho(0.7, 1e-6) == first and rdp.zcdp_rho.cache_info().hits == 1
    assert rdp.zcdp_epsilon(first, 1e-6) <= 0.7 < rdp.zcdp_epsilon(first * (1 + 1e-9), 1e-6)
