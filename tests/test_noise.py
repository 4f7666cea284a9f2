"""dpcore.noise: exact samplers on the integer grid, the grid mechanisms, bit sources, the Mironov attack.

Distribution tests draw from seeded bit sources (deterministic, so never flaky) and compare with the
exact PMF (chi-square) or with OpenDP's exact samplers (two-sample chi-square).
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpcore import noise


def _seeded(seed: int = 0) -> noise.SeededBits:
    return noise.SeededBits(np.random.default_rng(seed))


class ScriptedBits:
    """Plays back given uint64 words, then a seeded stream."""

    secure = False
    description = "scripted"

    def __init__(self, words: list[int], seed: int = 0) -> None:
        self.queue = list(words)
        self.rest = _seeded(seed)

    def words(self, n: int) -> np.ndarray:
        head, self.queue = self.queue[:n], self.queue[n:]
        return np.concatenate([np.array(head, dtype=np.uint64), self.rest.words(n - len(head))])


def _chisquare_pvalue(observed: np.ndarray, expected_prob: np.ndarray) -> float:
    """Chi-square goodness of fit after merging the smallest bins into one (expected count >= 5)."""
    n = observed.sum()
    expected = expected_prob / expected_prob.sum() * n
    keep = expected >= 5
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] < 5:
        obs, exp = obs[:-1], exp[:-1]
        exp = exp / exp.sum() * obs.sum()
    return float(stats.chisquare(obs, exp).pvalue)


def _integer_gof(samples: np.ndarray, log_pmf, half_width: int) -> float:
    """Chi-square p-value of integer samples against ``exp(log_pmf(k))`` on ``[-half_width, half_width]``
    plus the two tails lumped into the end bins (the PMF is normalised over the window)."""
    ks = np.arange(-half_width, half_width + 1)
    prob = np.exp(log_pmf(ks))
    observed = np.bincount(np.clip(samples, -half_width, half_width) + half_width, minlength=ks.size)
    return _chisquare_pvalue(observed, prob)


def _dlap_log_pmf(t: float):
    p = math.exp(-1.0 / t)
    return lambda k: math.log((1 - p) / (1 + p)) - np.abs(k) / t


def _binned_gof(samples: np.ndarray, probs_of_edges, edges: np.ndarray) -> float:
    observed = np.histogram(samples, bins=edges)[0]
    return _chisquare_pvalue(observed, probs_of_edges(edges))


# ----------------------------------------------------------------------------- uniforms and sources
@pytest.mark.parametrize("bound", [2, 5, 8, 1000])
def test_uniform_below_is_uniform(bound):
    x = noise.uniform_below(bound, 60_000, _seeded(bound))
    assert x.dtype == np.int64 and x.min() >= 0 and x.max() < bound
    if bound <= 8:
        assert _chisquare_pvalue(np.bincount(x, minlength=bound), np.ones(bound)) > 1e-4
    else:
        assert _chisquare_pvalue(np.bincount(x // 100, minlength=10), np.ones(10)) > 1e-4


def test_uniform_below_rejects_the_biased_words():
    # bound = 3 * 2^61: words >= 2^64 - 2^62 must be redrawn, else the first third is too likely
    bound = 3 * 2**61
    x = noise.uniform_below(bound, 60_000, _seeded(1))
    thirds = np.bincount((x >> 61).astype(np.int64), minlength=3)
    assert _chisquare_pvalue(thirds, np.ones(3)) > 1e-4
    # a scripted word in the rejected zone is replaced by the next one
    bits = ScriptedBits([2**64 - 1, 5])
    assert noise.uniform_below(bound, 1, bits)[0] == 5


def test_uniform_open01_exact_binades():
    u = noise.uniform_open01(200_000, _seeded(2))
    assert np.all((u > 0) & (u < 1))
    for c in (0.5, 0.1, 0.001):
        assert abs(np.mean(u < c) - c) < 5 * math.sqrt(c * (1 - c) / u.size)
    # leading zeros over several words: mantissa word, then 0 (64 zeros), then 2^62 (1 more zero)
    u = noise.uniform_open01(1, ScriptedBits([0, 0, 2**62]))
    assert 2.0**-66 <= u[0] < 2.0**-65
    # P(U < c) = c exactly for a float c: with the top mantissa bits fixed, U lands on the grid
    u = noise.uniform_open01(1, ScriptedBits([(2**52 - 1) << 12, 2**63]))
    assert u[0] == 1 - 2.0**-53


def test_lazy_bernoulli_resolves_ties_exactly():
    q0 = noise._decimal_prob(lambda: 1 / (1 + (decimal.Decimal(1) / 3).exp()))  # 1 / (1 + e^{1/3})
    table = noise._LazyBernoullis([q0])
    byte, word2 = int(table.level1[0]), table.digits(0, 2)
    word3 = table.digits(0, 3)
    # first byte ties (the word's other bytes are unused), second level ties, third level
    # decides: below -> True, above -> False
    first = byte | (2**64 - 256)
    for third, expected in ((word3 - 1, True), (word3 + 1, False)):
        bits = ScriptedBits([first, word2, third])
        assert bool(table.sample(1, bits)[0, 0]) is expected
    # the expansion agrees with the probability computed directly
    with decimal.localcontext(decimal.Context(prec=80)):
        exact = q0()
        assert int(exact * 2**8) == byte
        assert int(exact * 2**72) % 2**64 == word2


@pytest.mark.parametrize("nbits", [8, 64, 128, 200])
def test_floor_scaled_is_exact_at_every_length(nbits):
    # floor(2^nbits q) for q = e^{-2^31 / t}: against 120-digit Decimal (the bracketing must not pass
    # through the default 28-digit context, which got 128 bits wrong)
    t = 2**40 + 12345
    prob = noise._decimal_prob(lambda: (-(decimal.Decimal(2**31) / decimal.Decimal(t))).exp())
    with decimal.localcontext(decimal.Context(prec=120)):
        exact = int((-(decimal.Decimal(2**31) / decimal.Decimal(t))).exp() * 2**nbits)
    assert noise._floor_scaled(prob, nbits) == exact


def _exact_floor(x: decimal.Decimal, nbits: int) -> int:
    return int(x * 2**nbits)


@pytest.mark.parametrize("t", [3, 5000, 21_810_381, 2**40 + 12345])
def test_geometric_table_is_the_exact_floor_of_r_to_the_k(t):
    # F_k = floor(2^nbits r^k), r = e^{-2^L/t}, checked against 60-digit Decimal at every k (small
    # tables) or at 300 spread k, and strictly decreasing (so a word ties with at most one entry)
    table = noise._geometric_parts(t).high
    entries = [int(v) for v in table.table[1:-1]]
    assert all(a > b for a, b in zip(entries[:-1], entries[1:], strict=True)) and entries[-1] > 0
    ks = range(1, table.size + 1) if table.size <= 64 else np.linspace(1, table.size, 300).astype(int)
    with decimal.localcontext(decimal.Context(prec=60)):
        for k in ks:
            exact = (-(decimal.Decimal(int(k) * table.step) / decimal.Decimal(t))).exp()
            assert entries[int(k) - 1] == _exact_floor(exact, table.nbits), k
    # the tail beyond the table (a fresh draw) is rare but not negligible: r^size in (e^-16, e^-8]
    assert 8 <= table.size * table.step / t <= 16


def test_geometric_table_counts_and_resolves_ties_exactly():
    table = noise._geometric_parts(21_810_381).high
    entries = table.table[1:-1]
    # count = #{k: F_k > u} at and around every kind of boundary, whatever the float guess says
    one = np.uint64(1)
    u = np.concatenate([entries[::97] - one, entries[::97] + one, entries[-3:] - one,
                        np.array([0, 1, 2**table.nbits - 1, 2**table.nbits - 2], dtype=np.uint64),
                        _seeded(4).words(5000) >> np.uint64(64 - table.nbits)])
    brute = (entries[None, :] > u[:, None]).sum(axis=1)
    np.testing.assert_array_equal(table.count(u, _seeded()), brute)
    # u == F_k: the next 64 bits of V against bits nbits+1 .. nbits+64 of r^k decide (V < r^k -> k)
    k = 123
    digits = noise._floor_scaled(table._power(k), table.nbits + 64) % 2**64
    for word, expected in ((digits - 1, k), (digits + 1, k - 1)):
        got = table.count(np.array([entries[k - 1]], dtype=np.uint64), ScriptedBits([word]))
        assert got[0] == expected


def test_low_part_rejection_set_has_the_conditional_law():
    # F = {j < L: R_j}, R_j ~ Bernoulli(1 - e^{-2^j/t}) independent, conditioned on F nonempty
    t = 2**12 + 1
    parts = noise._geometric_parts(t)
    assert parts.low_bits == 4
    masks = parts.sample_f(60_000, _seeded(3))
    rho = [-math.expm1(-(2.0**j) / t) for j in range(4)]
    prob = np.array([
        math.prod(rho[j] if s >> j & 1 else 1 - rho[j] for j in range(4)) for s in range(16)
    ])
    prob[0] = 0.0
    observed = np.bincount(masks, minlength=16)
    assert observed[0] == 0
    assert _chisquare_pvalue(observed[1:], prob[1:]) > 1e-4


def test_noise_source_kinds_and_streams():
    secure = noise.noise_source(None)
    assert isinstance(secure, noise.SecureBits) and secure.secure
    a, b = secure.words(4), noise.noise_source(None).words(4)
    assert not np.array_equal(a, b)
    assert not np.array_equal(noise.SecureBits("os").words(4), noise.SecureBits("os").words(4))
    s1, s2 = noise.noise_source(7), noise.noise_source(7)
    assert not s1.secure
    np.testing.assert_array_equal(s1.words(8), s2.words(8))
    # separate from the generator that draws the public matrices, and from its spawned children
    noise_words = noise.noise_source(7).words(8)
    public = np.random.default_rng(7)
    assert not np.array_equal(noise_words, public.bit_generator.random_raw(8))
    for child in np.random.default_rng(7).spawn(3):
        assert not np.array_equal(noise_words, child.bit_generator.random_raw(8))
    gen = np.random.default_rng(3)
    from_gen = noise.noise_source(gen)
    assert not from_gen.secure and not np.array_equal(from_gen.words(8), gen.bit_generator.random_raw(8))
    with pytest.raises(ValueError, match="random_state"):
        noise.noise_source("seed")


# ------------------------------------------------------------------------------- exact samplers
@pytest.mark.parametrize("t", [1, 3, 7])
@pytest.mark.parametrize("method", ["table", "cks"])
def test_discrete_laplace_matches_exact_pmf(t, method):
    x = noise.discrete_laplace(t, 100_000, _seeded(t), method=method)
    assert x.dtype == np.int64
    assert _integer_gof(x, _dlap_log_pmf(t), 12 * t) > 1e-4


@pytest.mark.parametrize("t", [5000, 70001, 21_810_381, 2**40 + 12345])
def test_discrete_laplace_large_scale_binned(t):
    # t >= 2^9 uses the low/high split (low bits by rejection; high from the table, on 47 bits of
    # the first word up to L = 16, on a word of its own beyond: t = 2^40); bins of t/4, tails lumped
    x = noise.discrete_laplace(t, 100_000, _seeded(t))
    p = math.exp(-1.0 / t)
    c = (1 - p) / (1 + p)

    def cdf(k):  # P(X <= k), k integer
        k = np.asarray(k, dtype=float)
        upper = 1 - c * p ** np.maximum(k + 1, 0) / (1 - p)
        lower = c * p ** np.maximum(-k, 0) / (1 - p)
        return np.where(k >= 0, upper, lower)

    edges = np.concatenate([[-np.inf], np.arange(-6 * t, 6 * t + 1, t // 4) - 0.5, [np.inf]])
    inner = np.diff(cdf(np.floor(np.clip(edges, -1e15, 1e15))))
    assert _binned_gof(x, lambda e: inner, edges) > 1e-4
    assert abs(np.mean(np.abs(x)) / (2 * p / (1 - p**2)) - 1) < 0.02


@pytest.mark.parametrize("method", ["table", "cks"])
@pytest.mark.parametrize("sigma", [1.0, 2.5, 40.3, 70.3])
def test_discrete_gaussian_matches_exact_pmf(sigma, method):
    x = noise.discrete_gaussian(sigma, 100_000, _seeded(int(sigma * 10)), method=method)
    assert x.dtype == np.int64
    assert _integer_gof(x, lambda k: -(k.astype(float) ** 2) / (2 * sigma**2), int(8 * sigma) + 1) > 1e-4


def _gaussian_bin_gof(x: np.ndarray, sigma: float) -> float:
    """Chi-square p-value of integer samples against the discrete Gaussian of parameter ``sigma`` in
    bins of ~sigma/4 on [-6 sigma, 6 sigma] (tails lumped). Bin masses from the normal CDF with the
    continuity correction: for sigma >= 50 they are within 1e-4 (relative) of the exact PMF's sums."""
    inner = np.unique(np.round(np.arange(-24, 25) * sigma / 4)) - 0.5
    edges = np.concatenate([[-np.inf], inner, [np.inf]])
    return _binned_gof(x, lambda e: np.diff(stats.norm.cdf(e / sigma)), edges)


@pytest.mark.parametrize("method", ["table", "cks"])
@pytest.mark.parametrize("sigma", [70.3, 3000.5, 1.3 * 2.0**24, 2.0**33 + 0.25, 2.0**46 + 3.5])
def test_discrete_gaussian_large_sigma_shape_scale_and_tails(sigma, method):
    # the grids' sigmas (2^24 .. 2^46 grid units); for "cks", the discrete Laplace table sampler's
    # three layouts (L = 0, L <= 16 on a shared word, L > 16 on a word of its own); for "table",
    # interval widths 1 to 2^40 (thresholds of 52 down to 13 bits); the exact-PMF shape at each scale
    x = noise.discrete_gaussian(sigma, 200_000, _seeded(int(sigma) % 1000), method=method)
    assert _gaussian_bin_gof(x, sigma) > 1e-4
    # a 1.5x mis-scale in either direction is rejected outright
    assert _gaussian_bin_gof(x, 1.5 * sigma) < 1e-10 and _gaussian_bin_gof(x, sigma / 1.5) < 1e-10
    assert abs(np.var(x.astype(float)) / sigma**2 - 1) < 0.02  # sd of the ratio ~0.003
    assert abs(np.mean(x) / sigma) < 0.01
    # tail mass beyond 3 sigma: 0.0027 (about 540 +- 23 of 200,000)
    tail = np.mean(np.abs(x) > 3 * sigma)
    assert abs(tail - 2 * stats.norm.sf(3)) < 5 * math.sqrt(2 * stats.norm.sf(3) / x.size)


def _table_draws(tab, n: int, seed: int, **kwargs) -> np.ndarray:
    bits = _seeded(seed)
    return noise._fill(n, 0.5, lambda m: noise._table_trials(tab, m, bits, **kwargs), chunk=1 << 12)


def _exact_f(y: int, sigma: float, prec: int = 60) -> decimal.Decimal:
    e = Fraction(y * y) / (2 * Fraction(sigma) ** 2)
    with decimal.localcontext(decimal.Context(prec=prec)):
        return (-(decimal.Decimal(e.numerator) / decimal.Decimal(e.denominator))).exp()


@pytest.mark.parametrize("sigma", [1.0, 40.3, 3000.5, 1.3 * 2.0**24, 2.0**46 + 3.5])
def test_gaussian_table_is_an_exact_proposal_and_bounds_the_acceptance(sigma):
    """The alias table draws item j with probability N_j / M exactly (integer bookkeeping); every
    acceptance probability a = S f(y) / N_j is at most 1 (N_j >= S f(j w)) and the squeeze is below
    a on its interval (checked at the interval's last point in decimal arithmetic)."""
    tab = noise._gaussian_table(sigma)
    cols, T = 1 << tab.col_bits, 1 << tab.thr_bits
    mass = np.zeros(cols + 1, dtype=object)
    for c in range(cols):
        p = int(tab.prob[2 * c])
        mass[int(tab.pair[2 * c])] += p
        mass[int(tab.pair[2 * c + 1])] += T - p
    M = cols * T
    assert int(mass.sum()) == M and list(mass[: tab.n_bulk + 1]) == list(tab.weights)
    assert mass[tab.n_bulk + 1] == M - sum(tab.weights) >= 0  # the rejection item
    w = 1 << tab.b
    for j in sorted({0, 1, 2, tab.n_bulk // 7, tab.n_bulk // 2, tab.n_bulk - 1}):
        n_j = tab.weights[j]
        assert tab.scale * _exact_f(j * w, sigma) <= n_j  # a <= 1 on the interval (f decreases)
        last = (j + 1) * w - 1
        assert int(tab.squeeze[j]) <= 2**32 * tab.scale * _exact_f(last, sigma) / n_j
    assert tab.weights[0] == tab.scale  # a(0) = 1 exactly


def test_numpy_exp_is_well_within_what_the_table_trusts():
    """The table's float test assumes numpy.exp within 2^-36 relative on [-75, 0]; it is far better."""
    x = np.random.default_rng(0).uniform(-75, 0, 3000)
    worst = 0.0
    with decimal.localcontext(decimal.Context(prec=40)):
        for v, e in zip(x, np.exp(x), strict=True):
            exact = decimal.Decimal(float(v)).exp()
            worst = max(worst, abs(float((decimal.Decimal(float(e)) - exact) / exact)))
    assert worst < 2.0**-48


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [2.5, 40.3])
def test_gaussian_table_tail_envelope_and_exact_path_give_the_exact_pmf(sigma):
    """The table's rare paths at work on a large share of draws: a bulk of 1.5 sigma (the rest from
    the geometric envelope, accepted in exact arithmetic: ~13 % of the draws) and, separately, no
    squeeze and a band so wide that every proposal is decided in exact decimal arithmetic."""
    log_pmf = lambda k: -(k.astype(float) ** 2) / (2 * sigma**2)  # noqa: E731
    tail_tab = noise._gaussian_table(sigma, 1.5)
    x = _table_draws(tail_tab, 40_000, 1)
    assert np.mean(np.abs(x) >= tail_tab.n_bulk << tail_tab.b) > 0.1
    assert _integer_gof(x, log_pmf, int(8 * sigma) + 1) > 1e-4
    exact_tab = dataclasses.replace(noise._gaussian_table(sigma),
                                    squeeze=np.zeros_like(noise._gaussian_table(sigma).squeeze))
    x = _table_draws(exact_tab, 15_000, 2, band=2.0**33)
    assert _integer_gof(x, log_pmf, int(8 * sigma) + 1) > 1e-4
    # the same checks have the power to see a 1.5x mis-scale
    assert _integer_gof(x, lambda k: -(k.astype(float) ** 2) / (2 * (1.5 * sigma) ** 2),
                        int(8 * sigma) + 1) < 1e-6


def test_gaussian_table_float_test_agrees_with_exact_arithmetic():
    """Where the float test decides (outside its band), the exact decision agrees: proposals near
    the squeeze's edge, their uniforms just outside the band of the float acceptance probability."""
    sigma = 3000.5
    tab = noise._gaussian_table(sigma)
    rng = np.random.default_rng(3)
    w = 1 << tab.b
    bits = _seeded(4)
    for _ in range(300):
        j = int(rng.integers(0, tab.n_bulk))
        y = j * w + int(rng.integers(0, w))
        a = math.exp(float(tab.log_rho[j]) - (y - j * w) * (y + j * w) * (0.5 / sigma**2)) * 2.0**32
        for u, expected in ((math.floor(a - 5.0), True), (math.ceil(a + 4.0), False)):
            if 0 <= u < 2**32 and y:
                assert (tab.decide(j, y, u, bits) is not None) == expected


class RecordingBits:
    """A seeded stream that keeps every block of words it hands out."""

    secure = False
    description = "recorded"

    def __init__(self, seed: int) -> None:
        self.inner, self.calls = _seeded(seed), []

    def words(self, n: int) -> np.ndarray:
        self.calls.append(self.inner.words(n))
        return self.calls[-1].copy()


@pytest.mark.parametrize("sigma", [40.3, 3000.5])
def test_table_trials_decide_every_proposal_as_exact_arithmetic_does(sigma):
    """Without the squeeze every proposal goes through the float test: its outputs are those of the
    exact decision (decimal arithmetic) for each proposal, decoded here from the recorded words with
    the documented layout (sign, alias column, threshold, offset; 32-bit acceptance uniforms)."""
    tab = noise._gaussian_table(sigma)
    flat = dataclasses.replace(tab, squeeze=np.zeros_like(tab.squeeze))
    m = 2000
    rec = RecordingBits(5)
    out = noise._table_trials(flat, m, rec)
    words, uniforms = rec.calls[0], rec.calls[1].view(np.uint32)[:m]
    a, nb, b = tab.col_bits, tab.thr_bits, tab.b
    expected = []
    spare = _seeded(6)
    for word, u in zip(words.tolist(), uniforms.tolist(), strict=True):
        col = (word >> (63 - a)) & ((1 << a) - 1)
        item = int(tab.pair[2 * col]) if (word >> b) & ((1 << nb) - 1) < int(tab.prob[2 * col]) \
            else int(tab.pair[2 * col + 1])
        value = tab.decide(item, (item << b) + (word & ((1 << b) - 1)), u, spare)
        if value is not None and not (word >> 63 and value == 0):
            expected.append(-value if word >> 63 else value)
    np.testing.assert_array_equal(out, expected)


def test_table_and_cks_samplers_agree_in_law():
    sigma = 1000.25
    a = noise.discrete_gaussian(sigma, 100_000, _seeded(21))
    b = noise.discrete_gaussian(sigma, 100_000, _seeded(22), method="cks")
    assert stats.ks_2samp(a, b).pvalue > 1e-4
    assert stats.ks_2samp(a, 1.5 * b).pvalue < 1e-10


# ------------------------------------------------------------------------------- parallel blocks
def _plans(seed: int) -> list[noise.GridNoise]:
    return [noise.laplace_plan(1.0, 2.0, n_changed=3, bits=noise.noise_source(seed)),
            noise.gaussian_plan(0.7, grid=2.0**-30, l2_sensitivity=1.0, n_changed=3,
                                bits=noise.noise_source(seed))]


def test_noise_blocks_are_a_function_of_the_size_and_keyed_by_position():
    """A draw is its blocks' draws, block i of noise_blocks(size) from DerivedBits(secret, i): the
    same values on the noise pool, on one thread, taken in any pieces, and for any shape of that size."""
    B = noise.NOISE_BLOCK
    n = 3 * B + 1234
    assert noise.noise_blocks(n) == [(0, B), (B, 2 * B), (2 * B, 3 * B), (3 * B, n)]
    assert noise.noise_blocks(0) == [] and noise.noise_blocks(5) == [(0, 5)]
    for i in range(2):
        pooled = _plans(3)[i].draw(n)
        assert np.array_equal(pooled, _plans(3)[i].draw(n, workers=1))
        np.testing.assert_array_equal(pooled, _plans(3)[i].draw((n // 2, 2)).ravel())  # n is even
        stream = _plans(3)[i].stream(n)
        pieces = [stream.take(m) for m in (1, 5000, B, 7, n - B - 5008)]
        np.testing.assert_array_equal(np.concatenate(pieces), pooled)
        with pytest.raises(ValueError, match="left"):
            stream.take(1)
        plan = _plans(3)[i]
        secret, secure = noise.stream_secret(noise.noise_source(3))
        assert not secure
        by_hand = [plan.exact_sampler()(hi - lo, noise.DerivedBits(secret, j, secure=False))
                   for j, (lo, hi) in enumerate(noise.noise_blocks(n))]
        np.testing.assert_array_equal(np.concatenate(by_hand), pooled)
    # secure bits: a fresh secret per stream
    secure_plan = noise.laplace_plan(1.0, 2.0, n_changed=3, bits=noise.SecureBits())
    assert not np.array_equal(secure_plan.draw(1000), secure_plan.draw(1000))


def test_noise_blocks_are_independent_with_the_exact_law():
    """Pairs (block i, position p) and (block i + 1, position p) are independent (contingency
    test) and the whole stream is discrete Laplace (exact pmf); blocks drawn from one key would
    fail the independence test (its power)."""
    t, B = 3, noise.NOISE_BLOCK
    plan = noise.GridNoise(grid=1.0, scale=3.0, sensitivity_used=1.0, distribution="discrete-laplace",
                           sampler="", bits=noise.noise_source(8), n_changed=1, t=t)
    x = plan.draw((6, B))
    assert _integer_gof(x.ravel(), _dlap_log_pmf(t), 12 * t) > 1e-4
    cut = 6

    def table(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        counts = np.zeros((2 * cut + 1, 2 * cut + 1))
        np.add.at(counts, (np.clip(a, -cut, cut) + cut, np.clip(b, -cut, cut) + cut), 1)
        return counts[:, counts.sum(axis=0) > 0][counts.sum(axis=1) > 0]

    for i in range(5):
        assert stats.chi2_contingency(table(x[i], x[i + 1])).pvalue > 1e-4
    same_key = noise.discrete_laplace(t, B, noise.DerivedBits(bytes(32), 0, secure=False))
    again = noise.discrete_laplace(t, B, noise.DerivedBits(bytes(32), 0, secure=False))
    assert stats.chi2_contingency(table(same_key, again)).pvalue < 1e-10


def test_seeded_noise_is_reproducible_and_secure_noise_is_not():
    sigma = 1.3 * 2.0**24
    a = noise.discrete_gaussian(sigma, 50_000, noise.noise_source(7))
    np.testing.assert_array_equal(a, noise.discrete_gaussian(sigma, 50_000, noise.noise_source(7)))
    np.testing.assert_array_equal(noise.discrete_laplace(2**40, 1000, noise.noise_source(7)),
                                  noise.discrete_laplace(2**40, 1000, noise.noise_source(7)))
    assert not np.array_equal(a, noise.discrete_gaussian(sigma, 50_000, noise.noise_source(8)))
    assert not np.array_equal(a, noise.discrete_gaussian(sigma, 50_000, noise.noise_source(None)))


def test_samplers_reject_bad_parameters():
    bits = _seeded()
    with pytest.raises(ValueError, match="t must be"):
        noise.discrete_laplace(0, 3, bits)
    with pytest.raises(ValueError, match="t must be"):
        noise.discrete_laplace(2.5, 3, bits)
    with pytest.raises(ValueError, match="sigma"):
        noise.discrete_gaussian(0.5, 3, bits)


@pytest.mark.slow
def test_same_law_as_opendp():
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    n = 20_000
    lap = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=3.0)
    gauss = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int), scale=2.5)
    pairs = [
        (np.array(lap([0] * n)), noise.discrete_laplace(3, n, _seeded(11)), 15),
        (np.array(gauss([0] * n)), noise.discrete_gaussian(2.5, n, _seeded(12)), 9),
    ]
    for theirs, ours, cut in pairs:
        table = np.array([np.bincount(np.clip(s, -cut, cut) + cut, minlength=2 * cut + 1)
                          for s in (theirs, ours)])
        table = table[:, table.min(axis=0) >= 5]
        assert stats.chi2_contingency(table).pvalue > 1e-4
        assert stats.ks_2samp(theirs, ours).pvalue > 1e-4
    # at a larger scale (the table sampler with a low part): KS, tail mass beyond 2 sigma
    sigma = 3000.5
    big = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int), scale=sigma)
    theirs, ours = np.array(big([0] * n)), noise.discrete_gaussian(sigma, n, _seeded(13))
    assert stats.ks_2samp(theirs, ours).pvalue > 1e-4
    tails = np.array([[np.sum(np.abs(s) > 2 * sigma), np.sum(np.abs(s) <= 2 * sigma)]
                      for s in (theirs, ours)])
    assert stats.chi2_contingency(tails).pvalue > 1e-4
    # the test has the power to see a 1.5x mis-scale of either sampler
    assert stats.ks_2samp(theirs, noise.discrete_gaussian(1.5 * sigma, n, _seeded(14))).pvalue < 1e-10


# ------------------------------------------------------------------------------------- mechanisms
def test_on_grid_is_the_exact_integer_sum_in_pieces_and_in_place():
    """grid * (rint(v / grid) + integer) against Python integers, for shapes that take one and many
    pieces, a transposed (non-contiguous) noise, noise beyond 2^53, float32 output written in place."""
    rng = np.random.default_rng(0)
    grid = 2.0**-20
    for shape in [(7,), (3, 5), (noise._GRID_PIECE // 10 + 3, 23), (2 * noise._GRID_PIECE + 5,)]:
        values = rng.normal(0, 100, shape)
        ints = rng.integers(-(2**40), 2**40, shape)
        ints.reshape(-1)[[0, -1]] = [2**60 + 1, -(2**55) - 3]
        expected = np.array([float(round(v / grid) + int(i)) * grid
                             for v, i in zip(values.ravel(), ints.ravel(), strict=True)]).reshape(shape)
        np.testing.assert_array_equal(noise._on_grid(values, grid, ints), expected)
        if len(shape) == 2:
            column_major = np.ascontiguousarray(ints.T).T
            np.testing.assert_array_equal(noise._on_grid(values, grid, column_major), expected)
        single = values.astype(np.float32)
        ref = noise._on_grid(single, grid, ints).astype(np.float32)
        np.testing.assert_array_equal(noise._on_grid(single, grid, ints, out=single), ref)
        np.testing.assert_array_equal(single, ref)
    with pytest.raises(ValueError, match="NaN"):
        noise._on_grid(np.array([1.0, np.nan]), grid, np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="shape"):
        noise._on_grid(np.zeros(3), grid, np.zeros(4, dtype=np.int64))


def test_laplace_mechanism_grid_scale_and_exact_epsilon():
    values = np.linspace(-3.3, 7.1, 30_000)
    draw = noise.laplace(values, 2.0, 0.5, n_changed=4, bits=_seeded(5))
    g = draw.grid
    assert math.frexp(g)[0] == 0.5  # a power of two
    assert 4 * g <= 2.0 * 2.0**-42
    assert draw.sensitivity_used >= 2.0 + 4 * g
    t = round(draw.scale / g)
    assert t * g == draw.scale and draw.sensitivity_used / (g * t) <= 0.5  # pure epsilon, exactly
    assert draw.scale < 2.0 / 0.5 * (1 + 1e-12)
    k = draw.values / g
    np.testing.assert_array_equal(k, np.rint(k))  # exact multiples of the grid
    noise_part = draw.values - np.rint(values / g) * g
    # mean |Lap(b)| = b: a 1.5x mis-calibration is ~70 standard errors away
    assert abs(np.mean(np.abs(noise_part)) / draw.scale - 1) < 0.03
    assert draw.distribution == "discrete-laplace" and draw.extra_epsilon == 0 == draw.extra_delta


def test_laplace_scale_cap_and_not_private():
    # a tiny epsilon with many coordinates would need t > 2^47 on the finest grid: the grid coarsens
    g, t, s1 = noise.laplace_grid(1.0, 1e-9, 10_000)
    assert t <= 2**47 and s1 >= 1.0 + 10_000 * g and s1 / (g * t) <= 1e-9
    draw = noise.laplace(np.arange(3.0), 1.0, math.inf, n_changed=3, bits=_seeded())
    np.testing.assert_array_equal(draw.values, np.arange(3.0))
    assert draw.scale == 0 and draw.distribution == "none"


def test_laplace_from_a_calibrated_scale_is_exactly_epsilon():
    # the mechanisms pass their calibration's scale b = S1/epsilon (the audits mis-calibrate it):
    # the loss must still be <= epsilon exactly, even when b was rounded down
    for s1, eps in ((1.0, 3.0), (0.7, 0.1), (2.0 / 3.0, 1.7)):
        b = s1 / eps
        plan = noise.laplace_plan(s1, scale=b, n_changed=5, bits=_seeded())
        t = round(plan.scale / plan.grid)
        assert Fraction(plan.sensitivity_used) / (Fraction(plan.grid) * t) <= Fraction(eps)
        assert plan.scale == pytest.approx(b, rel=1e-10)
    # a scale divided by 1.5 gives 1.5x less noise: what a mis-calibration audit must see
    assert noise.laplace_plan(1.0, scale=1 / 1.5, n_changed=1, bits=_seeded()).scale == pytest.approx(1 / 1.5)
    with pytest.raises(ValueError, match="exactly one"):
        noise.laplace_plan(1.0, 1.0, scale=1.0, n_changed=1, bits=_seeded())


def test_gaussian_mechanism_grid_scale_and_slack():
    s2, n_changed = 0.2, 10
    sigma_floor = 1.7
    g, s2_used = noise.gaussian_grid(s2, n_changed, sigma_floor)
    assert math.frexp(g)[0] == 0.5 and sigma_floor / g >= 2.0**24
    assert s2_used >= s2 + math.sqrt(n_changed) * g and s2_used <= s2 * (1 + 2.0**-41)
    sigma = sigma_floor * 1.01  # calibrated at s2_used >= s2
    values = np.full(40_000, 0.123456789)
    draw = noise.gaussian(values, sigma, grid=g, l2_sensitivity=s2, n_changed=n_changed, bits=_seeded(9))
    assert draw.scale == sigma and draw.sensitivity_used == s2_used
    k = draw.values / g
    np.testing.assert_array_equal(k, np.rint(k))
    sd = np.std(draw.values - np.rint(values / g) * g)
    assert abs(sd / sigma - 1) < 0.03  # a 1.5x error is ~70 standard errors away
    assert 0 < draw.extra_epsilon < 1e-9 and draw.extra_delta < 1e-80
    eps, delta = noise.combine_slack([draw], 1.0, 1e-6)
    assert eps == pytest.approx(draw.extra_epsilon, rel=1e-3) and 0 < delta < 1e-6 * 1e-9
    # reserved from the budget: calibrating at reserve_slack's values keeps the total within (1, 1e-6)
    eps_i, delta_i = noise.reserve_slack(1.0, 1e-6, n_changed)
    extra_eps, extra_delta = noise.combine_slack([draw], eps_i, delta_i)
    assert eps_i + extra_eps <= 1.0 and delta_i + extra_delta <= 1e-6
    with pytest.raises(ValueError, match="too coarse"):
        noise.gaussian(values, sigma, grid=2.0, l2_sensitivity=s2, n_changed=1, bits=_seeded())


def test_gaussian_slack_formula():
    # gamma1 = K^2 / (24 s^2) + r: the discretisation term shrinks as 1/s^2, the float term stays
    e20, d20 = noise.gaussian_slack(2.0**20, 1)
    e24, _ = noise.gaussian_slack(2.0**24, 1)
    k = noise.GAUSSIAN_TAIL_K
    assert e20 - e24 == pytest.approx(2 * k * k / 24 * (2.0**-40 - 2.0**-48), rel=1e-6)
    assert noise.gaussian_slack(2.0**20, 7)[0] == pytest.approx(7 * e20)
    assert d20 == pytest.approx(4 * math.exp(-k * k / 2))
    # the normaliser term of Poisson summation matters only for tiny sigma
    assert noise.gaussian_slack(0.3, 1)[0] > 2 * math.log1p(3 * math.exp(-2 * math.pi**2 * 0.09))


# ---------------------------------------------------------------------------- the Mironov attack
def _numpy_laplace_emulation(u: float, loc: float, scale: float) -> float:
    """NumPy's ``random_laplace`` (distributions.c) for one uniform ``u = next_double``."""
    if u >= 0.5:
        return loc - scale * math.log(2.0 - u - u)
    return loc + scale * math.log(u + u)


def _numpy_laplace_consistent(y: float, loc: float, scale: float, window: int = 16) -> bool:
    """Is there a 53-bit uniform ``u`` with ``random_laplace(u, loc, scale) == y`` (bit for bit)?"""
    z = (y - loc) / scale
    u0 = math.exp(z) / 2 if z < 0 else 1 - math.exp(-z) / 2
    center = round(u0 * 2**53)
    for k in range(center - window, center + window + 1):
        u = k / 2**53
        if 0 < u < 1 and _numpy_laplace_emulation(u, loc, scale) == y:
            return True
    return False


def test_mironov_attack_excludes_numpy_neighbour_but_not_the_grid():
    scale, n = 1.0, 300  # epsilon = 1 for neighbours 0 and 1 (sensitivity 1)
    rng = np.random.default_rng(42)
    u = (np.random.default_rng(42).bit_generator.random_raw(n) >> np.uint64(11)) * 2.0**-53
    released = rng.laplace(0.0, scale, n)
    # the emulation is bit-exact, and always finds the true centre
    assert all(_numpy_laplace_emulation(float(a), 0.0, scale) == b for a, b in zip(u, released, strict=True))
    assert all(_numpy_laplace_consistent(float(y), 0.0, scale) for y in released)
    excluded = np.mean([not _numpy_laplace_consistent(float(y), 1.0, scale) for y in released])
    assert excluded > 0.5  # the wrong neighbour is ruled out with certainty for most releases

    # the grid mechanism: every published value is grid * integer, and the integer noise it implies
    # under either neighbour has positive probability with a likelihood ratio <= e^epsilon
    bits = _seeded(42)
    for centre in (0.0, 1.0):
        draw = noise.laplace(np.full(n, centre), 1.0, 1.0, n_changed=1, bits=bits)
        k = draw.values / draw.grid
        assert np.array_equal(k, np.rint(k))
        t = draw.scale / draw.grid
        log_p = [-np.abs(k - round(c / draw.grid)) / t for c in (0.0, 1.0)]
        assert np.all(np.isfinite(log_p[0])) and np.all(np.isfinite(log_p[1]))
        assert np.max(np.abs(log_p[0] - log_p[1])) <= 1.0
