"""The exact discrete Gaussian sampler (:func:`discrete_gaussian`): rejection from an exact alias-table
proposal, and Canonne, Kamath & Steinke's Algorithm 3 (``method="cks"``).
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np

from dpcore.noise.bits import _TWO64, BitSource, uniform_open01
from dpcore.noise.laplace import (
    _decimal_prob,
    _fill,
    _floor_scaled,
    _laplace_trials,
    _resolve_tie,
    _shape,
    _signed,
    discrete_laplace,
)

#: acceptance exponents above this are evaluated exactly (rational arithmetic, CKS Alg. 1), so the
#: float analysis of :func:`discrete_gaussian` is only needed for ``|y| <= FLOAT_K sigma``
EXACT_TAIL_GAMMA = 200.0
FLOAT_K = 22.0


def _gaussian_exponent(y: int, sigma: float, t: int) -> Fraction:
    """``(|y| - sigma^2/t)^2 / (2 sigma^2)`` exactly (``sigma`` is a float, i.e. a dyadic rational)."""
    s2 = Fraction(sigma) ** 2
    return (abs(y) - s2 / t) ** 2 / (2 * s2)


def _uniform_int_below(m: int, bits: BitSource) -> int:
    """Uniform integer in ``[0, m)`` for a Python integer ``m >= 1`` (rejection on whole words)."""
    n_words = max(1, (m.bit_length() + 63) // 64)
    span = 1 << (64 * n_words)
    limit = span - span % m
    while True:
        value = 0
        for w in bits.words(n_words):
            value = (value << 64) | int(w)
        if value < limit:
            return value % m


def _bernoulli_exp_exact(gamma: Fraction, bits: BitSource) -> bool:
    """Bernoulli(exp(-gamma)) for a rational ``gamma >= 0``, exactly (CKS 2020, Algorithm 1)."""

    def bern(p: Fraction) -> bool:
        return _uniform_int_below(p.denominator, bits) < p.numerator

    def exp_minus(g: Fraction) -> bool:  # g in [0, 1]
        k = 1
        while bern(g / k):
            k += 1
        return k % 2 == 1

    while gamma > 1:
        if not exp_minus(Fraction(1)):
            return False
        gamma -= 1
    return exp_minus(gamma)


#: the largest float below 1: keeps ``c 2^64`` inside uint64 (``c = 1`` is accepted separately)
_BELOW_ONE = 1.0 - 2.0**-53


def _bernoulli_float(c: np.ndarray, bits: BitSource) -> np.ndarray:
    """``U < c`` for a uniform ``U`` and float64 ``c`` in [0, 1]: exactly Bernoulli(c).

    For ``c >= 2^-11`` the float ``c * 2^64`` is an integer, so comparing one 64-bit word ``w`` (``U``'s
    leading bits) with it decides exactly (``c = 1``: always); smaller ``c`` (rare) use
    :func:`uniform_open01` instead.
    """
    w = bits.words(c.size)
    threshold = np.minimum(c, _BELOW_ONE)
    threshold *= 2.0**64  # exact (a power of two)
    out = w < threshold.astype(np.uint64)
    out |= c >= 1.0
    low = np.flatnonzero(c < 2.0**-11)
    if low.size:
        out[low] = uniform_open01(low.size, bits) < c[low]
    return out


def _discrete_gaussian_cks(sigma: float, size: int, bits: BitSource) -> np.ndarray:
    """Discrete Gaussian ``P(x) ∝ exp(-x^2 / (2 sigma^2))`` on the integers (CKS 2020, Algorithm 3):
    :func:`discrete_gaussian`'s ``method="cks"``, the reference the table sampler is checked against.

    Proposal ``Y`` ~ :func:`discrete_laplace` with ``t = floor(sigma) + 1``, accepted with probability
    ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))`` (about 0.76 of proposals are accepted). The exponent
    does not fit int64 at the sigmas used here (~2^24), so ``c = exp(-gamma)`` is computed in float64
    and the test ``U < c`` is then exact (:func:`_bernoulli_float`: ``P(accept) = c``).

    Proposals whose float exponent exceeds :data:`EXACT_TAIL_GAMMA` (``|y| > ~21 sigma``: probability
    below 1e-9 per proposal) are accepted by CKS Algorithm 1 in exact rational arithmetic instead,
    so beyond ``FLOAT_K sigma`` the implemented PMF is the exact discrete Gaussian.

    Error of the implemented PMF (``u = 2^-53``, ``K`` = :data:`FLOAT_K`). For ``|y| <= K sigma``
    (``sigma >= 1``): ``sigma^2`` and ``sigma^2/t`` carry relative errors <= 2.01u, so ``d = |y| -
    sigma^2/t`` is off by <= 2.01 u sigma + u|d| with ``|d| <= K sigma``; squaring and dividing by
    ``2 sigma^2`` adds relative error <= 3.01u on ``gamma <= K^2/2``. Hence
    ``|gamma_float - gamma| <= u (2.52 K^2 + 2.02 K + 0.02) <= 3 u (K^2 + K)``. ``numpy.exp`` is
    taken to be within 4 ulp (relative 8u), and the comparison with ``U`` is exact, so the acceptance
    probability ``a'`` of every proposal satisfies ``|log(a'/a)| <= r0 = 3u(K^2 + K) + 8u``. The
    proposal is exact; the normaliser ``Z' = sum L a'`` is within ``e^{+-r0}`` of ``Z`` on the bulk and
    the tail beyond ``K sigma`` holds mass ``tau <= 2 exp(-K^2/2)`` (a Gaussian tail; ``1/(K sqrt(2 pi))``
    absorbs the discretisation), so on ``|k| <= K sigma`` the implemented PMF is within
    ``exp(+-r)`` of the exact one with ``r = 2 r0 + 2 tau`` (K = 22: r < 3.5e-13), and beyond
    ``K sigma`` it is exact up to the normaliser (``e^{+-r}`` as well). :func:`gaussian_slack` turns this
    into epsilon and delta.

    ``sigma`` is checked by :func:`discrete_gaussian`; returns ``size`` draws (int64).
    """
    t = math.floor(sigma) + 1
    s2 = sigma * sigma
    centre = s2 / t
    two_s2 = 2.0 * s2

    def chunk(m: int) -> np.ndarray:
        x, sign, invalid = _laplace_trials(t, m, bits)
        c = x.astype(np.float64)
        c -= centre
        c *= c
        c /= -two_s2  # -gamma: the same roundings as (d * d) / (2 sigma^2)
        far = np.flatnonzero(c < -EXACT_TAIL_GAMMA)
        np.exp(c, out=c)
        accept = _bernoulli_float(c, bits)
        for i in far:  # probability < 1e-9 per proposal: exact rational arithmetic
            accept[i] = _bernoulli_exp_exact(_gaussian_exponent(int(x[i]), sigma, t), bits)
        accept[invalid] = False
        return _signed(x, sign)[accept]

    return _fill(int(size), 0.7, chunk)


# ------------------------------------------------------------- discrete Gaussian: exact alias table
#: the table's bulk covers ``|x| < TABLE_BULK_K sigma``; beyond (probability < 2e-22) a geometric
#: envelope, with the same exact rejection
TABLE_BULK_K = 10.0
#: the table's intervals have width ``2^b`` with ``sigma / 2^b`` in ``[32, 64)`` (width 1 below 64):
#: ~300-640 intervals, a table in ~1 ms per sigma (releases with a new sigma each pay it)
_TABLE_WIDTH_SHIFT = 5
#: fixed-point bits of the exact powers ``q^(j^2)`` behind the table
_TABLE_FIXED_BITS = 256
#: the fast path's float acceptance probability is trusted to ``_TABLE_BAND * 2^-32`` (absolute):
#: a uniform whose first 32 bits lie that close to it is decided in exact arithmetic
_TABLE_BAND = 4.0
#: proposals per vectorised round of the table sampler (its temporaries stay in the L2 cache)
_TABLE_CHUNK = 1 << 14


def _fixed_mul(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """Product of two fixed-point numbers in ``[0, 1]`` given as ``(v, e)``: the exact value times
    ``2^_TABLE_FIXED_BITS`` lies in ``[v, v + e]``. The floor of the product and a bound that keeps
    that invariant (``e = e_a + e_b + 2`` while ``e_a e_b < 2^_TABLE_FIXED_BITS``)."""
    return (a[0] * b[0]) >> _TABLE_FIXED_BITS, a[1] + b[1] + 2


def _uniform_below_prob(prefix: int, nbits: int, prob: Callable[[], decimal.Decimal],
                        bits: BitSource) -> bool:
    """``U < q`` exactly, for a uniform ``U`` in (0, 1) whose first ``nbits`` bits are ``prefix`` and
    an irrational ``q = prob()`` (:func:`_floor_scaled`'s contract): ``U``'s next 64 bits (a fresh
    word) are compared with the same bits of ``q``, and further words only on a tie."""
    level = _floor_scaled(prob, nbits + 64) - (prefix << 64)
    if level < 0:
        return False
    if level >= _TWO64:
        return True
    word = int(bits.words(1)[0])
    if word != level:
        return word < level
    return _resolve_tie(prob, nbits + 64, bits)


@dataclass(frozen=True)
class _GaussianTable:
    """An exact sampler of the discrete Gaussian ``N_Z(0, sigma^2)`` (see :func:`discrete_gaussian`).

    ``|X|`` is drawn by rejection from a proposal that is exact by construction: item ``j`` of an
    alias table (Walker 1977; Vose 1991), then a uniform integer in ``[j w, (j + 1) w)`` for the
    ``J`` bulk items (``w = 2^b``, ``J w >= TABLE_BULK_K sigma``), ``J w + G`` with ``G``
    geometric of ratio ``r = e^{-1/t}``, ``t = ceil(sigma^2 / (J w))``, for the tail item ``J``, and
    nothing (a rejection) for item ``J + 1``. The alias table holds integer weights ``N_j`` summing
    to ``M = 2^(a + nb)`` exactly, so item ``j`` is drawn with probability ``N_j / M`` exactly.
    ``y`` is accepted with probability ``a(y) = S f(y) / N_j`` (bulk) or ``S f(y) / (w N_J (1 - r)
    r^G)`` (tail), ``f(y) = exp(-y^2 / (2 sigma^2))``, so every ``y >= 0`` is output with probability
    proportional to ``f(y)`` (rejection sampling, Devroye 1986, II.3), whatever the weights are,
    provided ``a <= 1``: ``N_j >= S f(j w)`` (``f`` decreases) and ``N_J >= S f(J w) / (w (1 - r))``
    (``f(J w + g) <= f(J w) r^g`` because ``1/t <= J w / sigma^2``).

    The weights are exact integers: ``f(j w) = q^(j^2)``, ``q = e^{-w^2 / (2 sigma^2)}``, is carried
    in 256-bit fixed point from ``floor(2^256 q)`` (:func:`_floor_scaled`, correctly rounded decimal
    arithmetic) by ``f(j w) = f((j-1) w) q^(2j-1)`` with a proven error bound (:func:`_fixed_mul`),
    and ``N_j`` is the ceiling of ``S`` times the upper end (``N_0 = S``: ``f(0) = 1``). ``S`` is
    chosen so that ``sum N_j <= M``; the rest is the rejection item's weight.

    Acceptance, with the first 32 bits ``u`` of a uniform ``U`` (``U < a`` is the event):

    * ``u < squeeze[j]`` accepts (about 98 % of proposals): ``squeeze[j] = floor(2^32 S f((j+1) w)
      / N_j)`` from the lower ends (``f(j)`` when ``w = 1``) is at most ``2^32 a`` on the interval;
    * otherwise ``a' = exp(log_rho[j] - (y - jw)(y + jw) / (2 sigma^2))`` in float64, with
      ``log_rho[j] = log(S f(jw) / N_j)``. Error: the two factors are exact (< 2^53); the product
      and the scaling add relative ``4.01u`` (``u = 2^-53``) on an exponent below 0.32
      (``w <= sigma / 32``, ``J w <= 10 sigma + w``); ``log_rho`` is within ``2^-45`` (a correctly
      rounded ratio of the fixed-point bounds, ``math.log``), the subtraction adds
      ``u |gamma| <= 2^-47`` (``|gamma| < 52``); so the exponent is within ``2^-44``, and if
      ``numpy.exp`` is within ``2^-36`` relative (it is within a few ulp, ``~2^-51``:
      ``tests/test_noise.py`` checks it), ``|2^32 a' - 2^32 a| < 1/8``. Accept when ``u + 5 <=
      2^32 a'``, reject when ``u >= 2^32 a' + 4`` (both float comparisons are exact);
    * the rest (fewer than 9 of the 2^32 values of ``u``: probability below ``2^-28`` per
      proposal that reaches the float test), the tail item and ``y = 0`` are decided in exact
      arithmetic (:func:`_uniform_below_prob` compares ``U``'s bits with ``a``'s from
      :mod:`decimal`; ``a(0) = S / N_0 = 1``).

    No float decides a sample: the samples are exactly discrete Gaussian.
    """

    sigma: float
    b: int  # interval width 2^b
    n_bulk: int  # J
    col_bits: int  # a: the alias table has 2^a columns
    thr_bits: int  # nb: thresholds in [0, 2^nb]
    scale: int  # S
    t_tail: int
    weights: tuple[int, ...]  # N_0 .. N_J (bulk and tail)
    prob: np.ndarray  # int64 thresholds in [0, 2^nb], at 2c and 2c + 1 for column c
    pair: np.ndarray  # intp: column c at 2c, its alias at 2c + 1
    squeeze: np.ndarray  # uint32, one per column (0 beyond the bulk)
    log_rho: np.ndarray  # float64, one per column (-inf beyond the bulk)
    rate: float  # expected accepted draws per proposal

    def _tail_prob(self, g: int) -> Callable[[], decimal.Decimal]:
        """``a(J w + g)`` for the tail item, as :func:`_floor_scaled`'s ``prob``."""
        D = decimal.Decimal
        y = (self.n_bulk << self.b) + g
        e = Fraction(y * y) / (2 * Fraction(self.sigma) ** 2) - Fraction(g, self.t_tail)
        return _decimal_prob(lambda: D(self.scale) * (-(D(e.numerator) / D(e.denominator))).exp() / (
            D(self.weights[-1]) * D(1 << self.b) * (1 - (D(-1) / D(self.t_tail)).exp())))

    def _bulk_prob(self, j: int, y: int) -> Callable[[], decimal.Decimal]:
        D = decimal.Decimal
        e = Fraction(y * y) / (2 * Fraction(self.sigma) ** 2)
        return _decimal_prob(lambda: D(self.scale) * (-(D(e.numerator) / D(e.denominator))).exp()
                             / D(self.weights[j]))

    def decide(self, j: int, y: int, prefix: int, bits: BitSource) -> int | None:
        """The exact acceptance of a proposal of item ``j`` (value ``y`` for a bulk item) whose
        uniform starts with the 32 bits ``prefix``: the accepted ``|X|``, or ``None``."""
        if j > self.n_bulk:  # the rejection item
            return None
        if j == self.n_bulk:  # the tail: J w + G, G = a nonnegative discrete Laplace (geometric) draw
            while True:
                g = discrete_laplace(self.t_tail, 8, bits)
                if np.any(g >= 0):
                    break
            g0 = int(g[g >= 0][0])
            return (self.n_bulk << self.b) + g0 if _uniform_below_prob(
                prefix, 32, self._tail_prob(g0), bits) else None
        if y == 0:  # a(0) = S / N_0 = 1
            return 0
        return y if _uniform_below_prob(prefix, 32, self._bulk_prob(j, y), bits) else None


@functools.lru_cache(maxsize=64)
def _gaussian_table(sigma: float, bulk_k: float = TABLE_BULK_K) -> _GaussianTable:
    """The :class:`_GaussianTable` for ``sigma`` (1 <= sigma < 2^47; a few ms, cached)."""
    D = decimal.Decimal
    P = _TABLE_FIXED_BITS
    s2 = Fraction(sigma) ** 2
    b = max(0, math.floor(math.log2(sigma)) - _TABLE_WIDTH_SHIFT)
    w = 1 << b
    J = max(1, math.ceil(bulk_k * sigma / w))
    a = (J + 1).bit_length()  # J bulk items, the tail and the rejection item fit in 2^a columns
    nb = 63 - a - b
    if nb < 8:
        raise ValueError(f"sigma = {sigma!r} is too large for the table sampler")
    M = 1 << (a + nb)
    qe = Fraction(w * w) / (2 * s2)
    q = (_floor_scaled(_decimal_prob(lambda: (-(D(qe.numerator) / D(qe.denominator))).exp()), P), 1)
    q2v, q2e = _fixed_mul(q, q)
    # f(j w) = q^(j^2) = f((j-1) w) q^(2j-1), j = 0 .. J, as (value, error) of _fixed_mul, inlined
    f = [(1 << P, 0)]
    fv, fe, rv, re = 1 << P, 0, q[0], q[1]  # rv: q^(2j - 1)
    for _ in range(J):
        fv, fe = (fv * rv) >> P, fe + re + 2
        f.append((fv, fe))
        rv, re = (rv * q2v) >> P, re + q2e + 2
    t = math.ceil(s2 / (J * w))
    te = Fraction(J * w) ** 2 / (2 * s2)

    def tail_mass() -> decimal.Decimal:  # f(J w) / (w (1 - e^{-1/t}))
        return (-(D(te.numerator) / D(te.denominator))).exp() / (D(w) * (1 - (D(-1) / D(t)).exp()))

    total = sum(v for v, _ in f[:J]) / 2.0**P + float(tail_mass())
    S = int((M - J - 2) / (total * (1 + 2.0**-20)))
    while True:
        N = [-((-S * (v + e)) >> P) for v, e in f[:J]]  # ceil(S * upper end)
        n_tail = _floor_scaled(_decimal_prob(lambda s=S: D(s) * tail_mass()), 0) + 1
        if sum(N) + n_tail <= M:
            break
        S -= max(1, S // 1000)
    if N[0] != S:
        raise ArithmeticError("table weight of 0 must equal the scale")
    cols, T = 1 << a, 1 << nb
    items = N + [n_tail, M - sum(N) - n_tail] + [0] * (cols - J - 2)
    # Vose's alias table in integers: every column holds T units, the totals are exact
    prob, alias, left = [T] * cols, list(range(cols)), list(items)
    small = [i for i in range(cols) if left[i] < T]
    large = [i for i in range(cols) if left[i] >= T]
    while small and large:
        lo, hi = small.pop(), large.pop()
        prob[lo], alias[lo] = left[lo], hi
        left[hi] -= T - left[lo]
        (small if left[hi] < T else large).append(hi)
    # a lower bound of a(y) on each interval: at its end (f decreases), or at its one point (w = 1)
    low = [f[j + (w > 1)][0] for j in range(J)]
    squeeze = [min((1 << 32) - 1, ((S * low[j]) << 32) // (N[j] << P)) for j in range(J)]
    log_rho = [math.log(max(S * f[j][0] / (N[j] << P), 1e-300)) for j in range(J)]
    z_half = math.sqrt(math.pi / 2) * sigma + 0.5  # ~ sum_{y >= 0} f(y)
    return _GaussianTable(
        sigma=sigma, b=b, n_bulk=J, col_bits=a, thr_bits=nb, scale=S, t_tail=t,
        weights=(*N, n_tail), prob=np.repeat(np.array(prob, dtype=np.int64), 2),
        pair=np.column_stack([np.arange(cols), alias]).astype(np.intp).ravel(),
        squeeze=np.array(squeeze + [0] * (cols - J), dtype=np.uint32),
        log_rho=np.array(log_rho + [-math.inf] * (cols - J)),
        rate=min(1.0, S * z_half / (M * w) * (1 - 0.5 / z_half)),
    )


def _table_trials(tab: _GaussianTable, m: int, bits: BitSource, band: float = _TABLE_BAND) -> np.ndarray:
    """``m`` proposals of the table sampler; returns the accepted draws (int64, signed).

    Per proposal one word (bit 63 the sign, then ``a`` bits of alias column, ``nb`` of threshold,
    ``b`` of offset in the interval) and 32 bits of the acceptance uniform. A ``-`` sign with
    ``|X| = 0`` is rejected (CKS 2020, Algorithm 2's symmetrisation): ``X`` is then exactly
    ``N_Z(0, sigma^2)``. Written with few temporaries (each costs page faults at this size).
    """
    w = bits.words(m).view(np.int64)
    u = bits.words((m + 1) // 2).view(np.uint32)[:m]
    sign = w >> 63  # 0 or -1
    idx = w >> (62 - tab.col_bits)  # twice the column (int64 throughout: no float promotion)
    idx &= ((1 << tab.col_bits) - 1) << 1
    scratch = w >> tab.b
    scratch &= (1 << tab.thr_bits) - 1
    idx += scratch >= tab.prob.take(idx)  # the alias when the threshold is not below the column's
    j = tab.pair.take(idx)
    y = np.left_shift(j, tab.b, out=idx)
    if tab.b:
        y += np.bitwise_and(w, (1 << tab.b) - 1, out=scratch)
    accept = u < tab.squeeze.take(j)
    rest = np.flatnonzero(~accept)
    if rest.size:
        jr, yr, ur = j[rest], y[rest], u[rest].astype(np.float64)
        start = jr << tab.b
        a = (yr - start).astype(np.float64)
        a *= (yr + start).astype(np.float64)
        a *= 0.5 / (tab.sigma * tab.sigma)
        np.subtract(tab.log_rho.take(jr), a, out=a)
        np.exp(a, out=a)
        a *= 2.0**32
        sure = ur + (1.0 + band) <= a
        tail = jr == tab.n_bulk
        undecided = np.flatnonzero((~sure & (ur < a + band)) | tail)
        sure[tail] = False
        for i in undecided:
            value = tab.decide(int(jr[i]), int(yr[i]), int(ur[i]), bits)
            if value is not None:
                sure[i] = True
                yr[i] = value
        accept[rest] = sure
        y[rest] = yr
    accept &= (y != 0) | (sign == 0)
    y ^= sign  # two's complement: -y where sign = -1
    y -= sign
    return y[accept]


def discrete_gaussian(sigma: float, size: int | tuple[int, ...], bits: BitSource, *,
                      method: Literal["table", "cks"] = "table") -> np.ndarray:
    """Exact discrete Gaussian ``P(x) ∝ exp(-x^2 / (2 sigma^2))`` on the integers.

    * ``"table"`` (default): rejection from a proposal drawn through an alias table (Walker 1977,
      "An efficient method for generating discrete random variables with general distributions",
      ACM TOMS 3(3); Vose 1991, IEEE TSE 17(9)) over 300-640 intervals of width ``sigma/64`` to
      ``sigma/32`` covering ``|x| < 10 sigma``, with a geometric envelope beyond, and a squeeze (rejection
      sampling with a step-function envelope: Devroye 1986, *Non-Uniform Random Variate
      Generation*, II.3). The table's weights are exact integers (fixed-point powers of
      ``e^{-w^2/(2 sigma^2)}`` from correctly rounded decimal arithmetic, with a proven error
      bound); the acceptance test is exact: ~98 % of proposals are accepted by an integer
      comparison with a lower bound (the squeeze), the rest by a float64 acceptance probability
      trusted only to ``2^-30`` (its error is below ``2^-35``), and the uniforms that fall within
      that band (probability below ``2^-29`` per proposal), the tail and ``x = 0`` by exact decimal
      arithmetic. So the output is exactly discrete Gaussian (details: :class:`_GaussianTable`).
      About 1.5 ChaCha20 words and ~1-2 % rejections per draw; a table costs about a millisecond
      per ``sigma`` (cached).
    * ``"cks"``: Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy",
      NeurIPS 2020, Algorithm 3 (discrete Laplace proposal, float64 acceptance within a proven
      relative error ``r``; :func:`_discrete_gaussian_cks`), about 3-4x slower. :func:`gaussian_slack`
      charges ``r``, an upper bound for both methods (the table method's is 0).

    The tails are the same law as the bulk: sampled from the geometric envelope and accepted exactly.

    Parameters
    ----------
    sigma : float
        Standard-deviation parameter in grid units, ``1 <= sigma < 2^47``.
    size : int or tuple
    bits : BitSource
    method : {"table", "cks"}

    Returns
    -------
    numpy.ndarray of int64, shape ``size``

    Raises
    ------
    ValueError
        ``sigma`` outside ``[1, 2^47)`` or an unknown ``method``.
    """
    sigma = float(sigma)
    if not (1.0 <= sigma < 2.0**47):
        raise ValueError(f"sigma must lie in [1, 2^47) grid units, got {sigma!r}")
    shape = _shape(size)
    return _gaussian_draws(sigma, method)(math.prod(shape), bits).reshape(shape)


def _gaussian_draws(sigma: float, method: str = "table") -> Callable[..., np.ndarray]:
    """``draw(count, bits, out=None)``: ``count`` i.i.d. discrete Gaussian draws (int64) by
    ``method``, written into ``out`` if given."""
    if method == "cks":
        return lambda count, bits, out=None: _into(out, _discrete_gaussian_cks(sigma, count, bits))
    if method != "table":
        raise ValueError(f"method must be 'table' or 'cks', got {method!r}")
    tab = _gaussian_table(sigma)
    return lambda count, bits, out=None: _fill(int(count), tab.rate, lambda m: _table_trials(tab, m, bits),
                                               chunk=_TABLE_CHUNK, out=out)


def _into(out: np.ndarray | None, values: np.ndarray) -> np.ndarray:
    if out is None:
        return values
    out[...] = values
    return out
