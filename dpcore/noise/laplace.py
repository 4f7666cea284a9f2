"""The exact discrete Laplace sampler (Canonne, Kamath & Steinke 2020, Algorithms 1-2, with an exact
inverse-CDF table for the geometric part; :func:`discrete_laplace`) and the exact Bernoulli trials it
is built from.
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dpcore.noise.bits import _CHUNK, _TWO64, MAX_LAPLACE_T, BitSource, uniform_below


# ------------------------------------------------------------------------------- exact Bernoullis
def _bernoulli_exp_fraction(num: np.ndarray, den: int, bits: BitSource) -> np.ndarray:
    """Bernoulli(exp(-num/den)) for integers ``0 <= num <= den`` (CKS 2020, Algorithm 1, gamma <= 1).

    ``K`` counts successes of Bernoulli(gamma / K) for K = 1, 2, ...; the answer is ``K`` odd. Every
    element of a round shares ``K``, so one bound ``den * K`` serves the round; once ``den * K >= 2^62``
    Bernoulli(num / (den K)) is drawn as Bernoulli(num / den) AND Bernoulli(1 / K) (same law).
    """
    out = np.empty(num.size, dtype=bool)
    active = np.arange(num.size)
    k = 1
    while active.size:
        m = active.size
        if den * k < 2**62:
            success = uniform_below(den * k, m, bits) < num[active]
        else:
            success = (uniform_below(den, m, bits) < num[active]) & (uniform_below(k, m, bits) == 0)
        out[active[~success]] = k % 2 == 1
        active = active[success]
        k += 1
    return out


def _discrete_laplace_cks(t: int, m: int, bits: BitSource) -> np.ndarray:
    """One round of CKS 2020 Algorithm 2 (scale t/1) on ``m`` trials, returning the accepted samples.

    ``U`` uniform on ``{0..t-1}`` kept with probability ``exp(-U/t)``, ``V`` geometric with ratio
    ``e^-1`` (Bernoulli(exp(-1)) successes before a failure), ``X = U + t V``, a random sign, ``-0``
    rejected. The reference implementation (``method="cks"``), ~10x slower than the digit sampler.
    """
    u = uniform_below(t, m, bits)
    u = u[_bernoulli_exp_fraction(u, t, bits)]
    v = np.zeros(u.size, dtype=np.int64)
    active = np.arange(u.size)
    while active.size:
        active = active[_bernoulli_exp_fraction(np.ones(active.size, dtype=np.int64), 1, bits)]
        v[active] += 1
    x = u + t * v
    negative = uniform_below(2, u.size, bits) == 1
    return np.where(negative, -x, x)[~(negative & (x == 0))]


def _floor_scaled(prob, nbits: int) -> int:
    """``floor(2^nbits * q)`` exactly, for ``q = prob()`` evaluated in :mod:`decimal`.

    ``prob`` computes ``q`` with a few correctly rounded decimal operations (``exp`` is correctly rounded
    in :mod:`decimal`), so its relative error is below ``10^(6 - prec)``; the precision grows until
    both ends of that interval have the same floor (``q`` is irrational, so this ends). The ends are
    compared in exact integer arithmetic (``q``'s exact ratio), never in a decimal context, whose
    default 28 digits would round them.
    """
    prec = int(nbits * 0.302) + 30
    while True:
        with decimal.localcontext(decimal.Context(prec=prec)):
            q = prob()
        num, den = q.copy_abs().as_integer_ratio()  # exact (abs() would round to the context)
        scale = 10 ** (prec - 6)  # q (1 -+ 10^(6 - prec)) = q (scale -+ 1) / scale
        lo = (num * (scale - 1) << nbits) // (den * scale)
        if lo == (num * (scale + 1) << nbits) // (den * scale):
            return lo
        prec += 20


class _LazyBernoullis:
    """Exact Bernoulli(q_j) for fixed irrational ``q_j``, by lazy comparison of a uniform ``U`` with ``q_j``.

    ``U``'s first byte ``r`` decides unless ``r == floor(256 q_j)`` (probability 1/256); then its next
    64 bits are compared with bits 9..72 of ``q_j``, and so on (a further level with probability 2^-64,
    done one element at a time). No rounding anywhere: ``U < q_j`` exactly.
    """

    def __init__(self, probs: list) -> None:
        self.probs = probs
        self.level1 = np.array([_floor_scaled(p, 8) for p in probs], dtype=np.uint8)
        self._levels: dict[tuple[int, int], int] = {}
        # level 2 is computed on the first tie of a row (small draws rarely need every row's)
        self.level2 = np.zeros(len(probs), dtype=np.uint64)
        self._have_level2 = np.zeros(len(probs), dtype=bool)

    def digits(self, j: int, level: int) -> int:
        """Bits ``8 + 64 (level - 2) + 1 .. 8 + 64 (level - 1)`` of ``q_j`` as an integer (level >= 2)."""
        key = (j, level)
        if key not in self._levels:
            nbits = 8 + 64 * (level - 1)
            self._levels[key] = _floor_scaled(self.probs[j], nbits) % _TWO64
        return self._levels[key]

    def sample(self, m: int, bits: BitSource) -> np.ndarray:
        """Boolean ``(len(probs), m)``: row ``j`` is i.i.d. Bernoulli(q_j)."""
        n_probs = len(self.probs)
        r = _random_bytes(bits, n_probs * m).reshape(n_probs, m)
        level1 = self.level1[:, None]
        out = r < level1
        tied = np.flatnonzero(r == level1)
        if tied.size:
            rows, cols = np.divmod(tied, m)
            for j in np.unique(rows[~self._have_level2[rows]]):
                self.level2[j] = self.digits(int(j), 2)
                self._have_level2[j] = True
            w = bits.words(tied.size)
            c2 = self.level2[rows]
            res = w < c2
            for i in np.flatnonzero(w == c2):
                res[i] = _resolve_tie(self.probs[int(rows[i])], 8 + 64, bits)
            out[rows, cols] = res
        return out


def _random_bytes(bits: BitSource, n: int) -> np.ndarray:
    return bits.words((n + 7) // 8).view(np.uint8)[:n]


def _decimal_prob(fn):
    """Wrap ``fn`` (Decimal arithmetic) to run with 20 extra digits and round once to the caller's
    precision, so cancellations such as ``1 - e^{-x}`` for ``x >= 2^-48`` (at most 15 digits) keep
    the relative error of the result below ``10^(1 - prec)`` (what :func:`_floor_scaled` assumes)."""

    def prob():
        with decimal.localcontext() as ctx:
            ctx.prec += 20
            value = fn()
        return +value

    return prob


def _resolve_tie(prob, nbits: int, bits: BitSource) -> bool:
    """``U < q`` for ``q = prob()`` when ``U``'s first ``nbits`` bits equal ``floor(2^nbits q)``: the
    next 64 bits of ``U`` are compared with the next 64 of ``q`` until they differ (exact)."""
    while True:
        nbits += 64
        word, c = int(bits.words(1)[0]), _floor_scaled(prob, nbits) % _TWO64
        if word != c:
            return word < c


class _GeometricTable:
    """Exact inverse-CDF sampler of ``H ~ Geometric(r)``, ``P(H >= k) = r^k``, ``r = e^{-step/t}``.

    For a uniform ``V`` in (0, 1), ``H = #{k >= 1: V < r^k}`` has this law. ``V``'s first ``nbits``
    bits are an integer ``u``; the table holds ``F_k = floor(2^nbits r^k)`` for ``k = 1 .. size``
    (strictly decreasing), and ``u < F_k`` implies ``V < r^k``, ``u > F_k`` implies ``V > r^k``
    (``u == F_k``, probability ``<= size 2^-nbits``: further bits of ``V`` decide,
    :func:`_resolve_tie`). A float ``log(V) / log(r)`` only *guesses* the count; the guess ``h`` is
    kept when the integer comparisons ``F_h > u > F_{h+1}`` certify it, and replaced by a binary
    search of the table otherwise, so no float decides a sample. A count that reaches ``size``
    (probability ``r^size``) continues with a fresh draw (``H`` is memoryless).

    ``F_k`` comes from ``P_k = floor(P_{k-1} P_1 / 2^128)``, ``P_1 = floor(2^128 r)``
    (:func:`_floor_scaled`), so ``2^128 r^k - 2k < P_k <= 2^128 r^k``: ``F_k = floor(P_k 2^(nbits-128))``
    unless ``P_k + 2k`` crosses the next multiple of ``2^(128-nbits)``; :func:`_floor_scaled` then
    computes ``F_k`` directly.
    """

    def __init__(self, step: int, t: int, size: int, nbits: int) -> None:
        self.step, self.t, self.size, self.nbits = step, t, size, nbits
        self.inv_log_r = -t / step
        self.guess_shift = max(0, nbits - 53)  # the float guess uses the top 53 bits of u
        shift = 128 - nbits
        p1 = p = _floor_scaled(self._power(1), 128)
        powers = [p1]
        for _ in range(size - 1):
            p = p * p1 >> 128
            powers.append(p)
        table = [p >> shift for p in powers]
        for k, p in enumerate(powers, start=1):
            if (p + 2 * k) >> shift != table[k - 1]:  # the floor is not certain: compute it directly
                table[k - 1] = _floor_scaled(self._power(k), nbits)
        # F_0, F_{size+1}: sentinels above every u but the largest, below every u but 0
        self.table = np.array([2**nbits - 1, *table, 0], dtype=np.uint64)
        entries = self.table[1:-1]
        if not (np.all(entries[:-1] > entries[1:]) and entries[-1] > 0):  # steps r^k (1 - r) >> 2^-nbits
            raise ArithmeticError(f"geometric table for t = {t} is not strictly decreasing")
        self.ascending = entries[::-1].copy()
        self.next = self.table[1:].copy()  # next[h] = F_{h+1}
        self.guess_offset = (nbits - self.guess_shift) * math.log(2) * self.inv_log_r

    def _power(self, k: int):
        D = decimal.Decimal
        return _decimal_prob(lambda: (-(D(k * self.step) / D(self.t))).exp())

    def count(self, u: np.ndarray, bits: BitSource) -> np.ndarray:
        """``min(H, size)`` for the uniforms whose first ``nbits`` bits are ``u`` (uint64)."""
        top = u >> np.uint64(self.guess_shift) if self.guess_shift else u
        guess = top.view(np.int64).astype(np.float64)  # < 2^53: exact
        with np.errstate(divide="ignore"):  # u = 0: log 0 = -inf, a guess clipped to size
            np.log(guess, out=guess)
        guess *= self.inv_log_r  # log(V) / log(r) = (log(top) - bits ln 2) / log(r)
        guess -= self.guess_offset
        np.clip(guess, 0, self.size, out=guess)
        h = guess.astype(np.int64)
        bad = np.flatnonzero((np.take(self.table, h) <= u) | (np.take(self.next, h) >= u))
        if bad.size:  # a float guess off by one, or u equal to a table entry
            ub = u[bad]
            hb = self.size - np.searchsorted(self.ascending, ub, side="right")  # #{k: F_k > u}
            for i in np.flatnonzero(self.table[hb + 1] == ub):
                k = int(hb[i]) + 1  # u == F_k: V < r^k is decided by V's further bits
                if k <= self.size and _resolve_tie(self._power(k), self.nbits, bits):
                    hb[i] = k
            h[bad] = hb
        return h

    def sample(self, u: np.ndarray, bits: BitSource) -> np.ndarray:
        """Draws of ``H`` (int64) whose first uniforms start with ``u`` (``nbits``-bit integers)."""
        h = self.count(u, bits)
        active = np.flatnonzero(h == self.size)
        while active.size:
            more = self.count(bits.words(active.size) >> np.uint64(64 - self.nbits), bits)
            h[active] += more
            active = active[more == self.size]
        return h


@dataclass(frozen=True)
class _GeometricParts:
    """Tables of the sampler of ``|X| ~ Geometric(p = e^{-1/t})`` (see :func:`discrete_laplace`).

    ``|X| = low + 2^L * high``, two independent parts (a geometric variable's remainder and quotient
    by ``2^L`` are independent):

    * ``low`` in ``[0, 2^L)`` with ``P ∝ e^{-low/t}`` (``L = bit_length(t) - 9``, so ``2^L / t <=
      2^-8``): uniform ``low`` accepted with probability ``e^{-low/t} = prod_{j: bit j of low}
      (1 - rho_j)``, ``rho_j = 1 - e^{-2^j/t}``. Draw the random set ``F = {j < L: R_j = 1}`` of
      independent events ``R_j ~ Bernoulli(rho_j)`` and accept iff ``F`` misses the bits of ``low``.
      ``F`` is empty with probability ``e^{-(2^L - 1)/t}`` (one lazy Bernoulli, ``any_f``); given
      ``F`` nonempty it is drawn sequentially: ``R_j`` with probability ``rho_j / P(F ∩ [j, L)
      nonempty)`` while no earlier ``R_i`` occurred (``cond``), ``rho_j`` after one did (``free``);
      if none occurred before ``L - 1``, ``R_{L-1} = 1``.
    * ``high``: geometric with ratio ``e^{-2^L/t}``, by the exact inverse-CDF table
      :class:`_GeometricTable` of ``2^(J - L) = 4096`` entries (``J = bit_length(t) + 3``: a count
      beyond the table, probability ``e^{-2^J/t} < e^-8``, continues with a fresh draw; the entries'
      steps ``r^k (1 - r) > e^-16 2^-9.01`` keep 47 bits strictly decreasing), on 47 bits of the word
      that also gives the sign and ``low`` when ``L <= 16`` (the Gaussian's grids, ``t < 2^26``), on
      a word of its own otherwise.
    """

    low_bits: int
    high: _GeometricTable
    any_f: _LazyBernoullis | None
    cond: _LazyBernoullis | None
    free: _LazyBernoullis | None

    def sample_f(self, r: int, bits: BitSource) -> np.ndarray:
        """``r`` draws of the set ``F`` (as bit masks) conditioned on being nonempty."""
        cond = self.cond.sample(r, bits)
        free = self.free.sample(r, bits)
        mask = np.zeros(r, dtype=np.int64)
        conditioned = np.ones(r, dtype=bool)
        for j in range(self.low_bits):
            rj = np.where(conditioned, cond[j] if j < self.low_bits - 1 else True, free[j])
            mask |= rj.astype(np.int64) << j
            conditioned &= ~rj
        return mask


#: bits of the first word given to the table of ``high`` (bit 63 is the sign, the next ``L <= 16`` ``low``)
_SHARED_BITS = 47


@functools.lru_cache(maxsize=32)
def _geometric_parts(t: int) -> _GeometricParts:
    D = decimal.Decimal
    low_bits = max(0, t.bit_length() - 9)
    n_digits = t.bit_length() + 3  # 2^J / t > 8: a count beyond the table has probability < e^-8
    high = _GeometricTable(2**low_bits, t, 2 ** (n_digits - low_bits), _SHARED_BITS if low_bits <= 16 else 64)
    if not low_bits:
        return _GeometricParts(0, high, None, None, None)

    def rho(j: int):
        return _decimal_prob(lambda: 1 - (-(D(2**j) / D(t))).exp())

    def cond(j: int):
        return _decimal_prob(lambda: (1 - (-(D(2**j) / D(t))).exp())
                             / (1 - (-(D(2**low_bits - 2**j) / D(t))).exp()))

    return _GeometricParts(
        low_bits, high, _LazyBernoullis([_decimal_prob(lambda: 1 - (-(D(2**low_bits - 1) / D(t))).exp())]),
        _LazyBernoullis([cond(j) for j in range(low_bits - 1)]) if low_bits > 1 else None,
        _LazyBernoullis([rho(j) for j in range(low_bits)]),
    )


def _laplace_trials(t: int, m: int, bits: BitSource) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``m`` trials of the table sampler of :func:`discrete_laplace`: ``(|X|, sign, invalid)``.

    ``|X|`` (int64) and ``sign`` (int64, 0 for ``+`` and -1 for ``-``) are independent; ``invalid``
    indexes the trials that CKS Alg. 2 (sign ``-`` with ``|X| = 0``) or the rejection of ``low``
    discards. The other trials' ``S |X|`` are i.i.d. discrete Laplace. Layout of the first word:
    bit 63 the sign, bits 47-62 ``low`` (``L <= 16``), bits 0-46 the start of ``high``'s uniform.
    """
    parts = _geometric_parts(t)
    low_bits, high = parts.low_bits, parts.high
    w = bits.words(m)
    sign = w.view(np.int64) >> 63  # arithmetic shift: 0 or -1
    if high.nbits < 64:
        u = w & np.uint64(2**high.nbits - 1)
        low = ((w << np.uint64(1)) >> np.uint64(64 - low_bits)).view(np.int64) if low_bits else None
    else:
        u = bits.words(m)
        low = ((w << np.uint64(1)) >> np.uint64(64 - low_bits)).view(np.int64)
    x = high.sample(u, bits)
    if x.max() >= 2 ** (62 - low_bits):
        raise OverflowError("discrete Laplace sample beyond 2^62")
    if low_bits:
        x <<= low_bits
        x += low
    zero = np.flatnonzero(x == 0)
    invalid = zero[sign[zero] != 0]
    if low_bits:
        rare = np.flatnonzero(parts.any_f.sample(m, bits)[0])
        if rare.size:
            f = parts.sample_f(rare.size, bits) if low_bits > 1 else np.ones(rare.size, dtype=np.int64)
            invalid = np.concatenate([invalid, rare[(low[rare] & f) != 0]])
    return x, sign, invalid


def _signed(x: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """``x`` where ``sign = 0``, ``-x`` where ``sign = -1`` (two's complement ``(x ^ s) - s``, in place)."""
    x ^= sign
    x -= sign
    return x


def _discrete_laplace_table(t: int, m: int, bits: BitSource) -> np.ndarray:
    """``m`` trials of the table sampler; returns the valid samples."""
    x, sign, invalid = _laplace_trials(t, m, bits)
    return np.delete(_signed(x, sign), invalid)


def _fill(size: int, rate: float, draw, chunk: int = _CHUNK, out: np.ndarray | None = None) -> np.ndarray:
    """Concatenate accepted values of i.i.d. trials until ``size`` are collected (chunks of at most
    ``chunk`` trials), into ``out`` if given (int64, ``size`` long).

    Accepted values of i.i.d. trials are i.i.d. with the target law, whatever chunk they come from.
    """
    if out is None:
        out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        m = min(chunk, int(need / rate * 1.02) + 32)
        got = draw(m)
        take = min(got.size, need)
        out[filled:filled + take] = got[:take]
        filled += take
    return out


def _shape(size: int | tuple[int, ...]) -> tuple[int, ...]:
    return (int(size),) if np.isscalar(size) else tuple(int(s) for s in size)


def discrete_laplace(t: int, size: int | tuple[int, ...], bits: BitSource, *,
                     method: Literal["table", "cks"] = "table") -> np.ndarray:
    """Exact discrete Laplace: ``P(x) = (1 - e^{-1/t}) / (1 + e^{-1/t}) * exp(-|x| / t)`` on the integers.

    Both methods return ``S * |X|`` with ``|X| ~ Geometric(p = e^{-1/t})`` (``P(|X| = k) = (1-p) p^k``)
    and a fair sign ``S``, rejecting ``S = -1, |X| = 0`` (Canonne, Kamath & Steinke 2020, Algorithm 2).

    * ``"table"`` (default): ``|X| = low + 2^L high`` (:class:`_GeometricParts`). ``low``, the last
      ``L ~ bit_length(t) - 11`` bits, is uniform with a rare exact rejection; ``high`` is a geometric
      variable drawn by inversion against a table of ``floor(2^64 e^{-k 2^L / t})`` (the bits come
      from :mod:`decimal` with a proven error bound, :class:`_GeometricTable`): one 64-bit word per
      sample, integer comparisons decide, further words only when a word equals a table entry. A
      float logarithm only guesses the table position; no floating point decides a sample.
    * ``"cks"``: Algorithms 1 and 2 of CKS 2020 verbatim (integer arithmetic, ``t K < 2^62``).

    Parameters
    ----------
    t : int
        Scale in grid units, ``1 <= t <= 2^47``.
    size : int or tuple
    bits : BitSource

    Returns
    -------
    numpy.ndarray of int64, shape ``size``

    Raises
    ------
    ValueError
        ``t`` not an integer in ``[1, 2^47]``.
    """
    if isinstance(t, bool) or int(t) != t or not 1 <= int(t) <= MAX_LAPLACE_T:
        raise ValueError(f"t must be an integer in [1, 2^47], got {t!r}")
    t = int(t)
    shape = _shape(size)
    rate = 0.5 * (1 + math.exp(-1.0 / t))  # 1 - P(S = -1, |X| = 0)
    if method == "cks":
        rate *= (-math.expm1(-1.0)) / (t * -math.expm1(-1.0 / t))  # mean of exp(-U/t)
        return _fill(math.prod(shape), max(rate, 0.3),
                     lambda m: _discrete_laplace_cks(t, m, bits)).reshape(shape)
    if method != "table":
        raise ValueError(f"method must be 'table' or 'cks', got {method!r}")
    return _laplace_draws(t)(math.prod(shape), bits).reshape(shape)


def _laplace_draws(t: int) -> Callable[..., np.ndarray]:
    """``draw(count, bits, out=None)``: ``count`` i.i.d. discrete Laplace draws of scale ``t`` (the
    table sampler), written into ``out`` if given."""
    rate = 0.5 * (1 + math.exp(-1.0 / t))  # 1 - P(S = -1, |X| = 0)

    def draw(count: int, bits: BitSource, out: np.ndarray | None = None) -> np.ndarray:
        return _fill(int(count), rate, lambda m: _discrete_laplace_table(t, m, bits), out=out)

    return draw
