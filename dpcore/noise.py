"""Floating-point-safe noise from a cryptographically secure source (SPEC section 10).

Continuous samplers published at full precision leak: the low bits of ``x + Lap(b)`` drawn with
``numpy.random.Generator.laplace`` exclude neighbours with certainty (Mironov, "On significance of the
least significant bits for differential privacy", CCS 2012; Jin et al. 2022 for the Gaussian). Every
noisy value a release publishes therefore comes from this module:

* the statistic is rounded to a public power-of-two grid ``g`` (``rint(v / g)`` is exact for a power
  of two) and the noise is ``g`` times an integer drawn by an exact discrete sampler, the sum done in
  ``int64`` (:func:`laplace`, :func:`gaussian`). The float that is published, ``g * integer``, is a
  deterministic function of the integer release, i.e. post-processing;
* the integers come from exact samplers: the discrete Laplace of Canonne, Kamath & Steinke, "The
  Discrete Gaussian for Differential Privacy", NeurIPS 2020 (Algorithms 1-2, with an exact
  inverse-CDF table for the geometric part), and the discrete Gaussian by rejection from an exact
  alias-table proposal (their Algorithm 3 is kept as ``method="cks"``), vectorised with masked
  rejection rounds (:func:`discrete_laplace`, :func:`discrete_gaussian`);
* the random bits come from :class:`SecureBits` (a ChaCha20 keystream keyed by 256 bits of OS entropy,
  or ``os.urandom`` itself) unless a seed asks for an exploration preview (:class:`SeededBits`), on a
  stream separate from the one that draws published random matrices (:func:`noise_source`).

Rounding moves each coordinate by at most ``g / 2``, so between neighbours a rounded coordinate moves
by at most ``g`` more than the raw one: the L1 sensitivity used is ``S1 + n_changed * g`` and the L2
one ``S2 + sqrt(n_changed) * g`` (SPEC section 10), where ``n_changed`` counts the coordinates that
can differ between neighbours.
"""

from __future__ import annotations

import decimal
import functools
import math
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, Protocol

import numpy as np

__all__ = [
    "BitSource",
    "DerivedBits",
    "GAUSSIAN_TAIL_K",
    "NOISE_BLOCK",
    "NoiseDraw",
    "NoiseStream",
    "SecureBits",
    "SeededBits",
    "combine_slack",
    "discrete_gaussian",
    "discrete_laplace",
    "gaussian",
    "gaussian_grid",
    "gaussian_mechanism",
    "gaussian_plan",
    "calibrated_gaussian_plan",
    "GridNoise",
    "laplace_plan",
    "gaussian_slack",
    "tail_k",
    "laplace",
    "laplace_grid",
    "noise_blocks",
    "noise_source",
    "record_fields",
    "reserve_slack",
    "reserved_guarantee",
    "fixed_sigma_guarantee",
    "slack_details",
    "stream_secret",
    "symmetric",
    "symmetric_laplace",
    "uniform_below",
    "uniform_open01",
]

#: spawn key of the noise stream derived from an integer seed: far from the keys ``Generator.spawn``
#: hands out (0, 1, 2, ...), so the noise never shares a stream with the public random matrices.
NOISE_SPAWN_KEY = 0x6E6F697365  # "noise"
#: the discrete Gaussian's error analysis holds on |k| <= K sigma; the mass beyond is <= 2 exp(-K^2/2)
GAUSSIAN_TAIL_K = 20.0
#: grids are fine enough that rounding adds at most 2^-42 of the sensitivity (the calibrated scales
#: move by ~2e-13 relative: invisible next to the noise), within the limits below
ROUNDING_BITS = 42
#: Gaussian: sigma / g in [2^24, ~2^46] grid units (at least 2^20 is required)
MIN_GAUSSIAN_GRID_BITS = 20
GAUSSIAN_GRID_BITS = 24
MAX_GAUSSIAN_GRID_BITS = 46
#: Laplace: the discrete scale t stays <= 2^47 (the grid coarsens if needed; the inflation is counted)
MAX_LAPLACE_T = 2**47
_CHUNK = 1 << 17
_TWO64 = 2**64
_UNIT_ROUNDOFF = 2.0**-53


# ---------------------------------------------------------------------------------------- bit sources
class BitSource(Protocol):
    """Where random bits come from: ``words(n)`` returns ``n`` independent uniform ``uint64``."""

    secure: bool
    description: str

    def words(self, n: int) -> np.ndarray: ...


class _ChaCha20Stream:
    """Uniform ``uint64`` words from the ChaCha20 keystream (RFC 8439, via the ``cryptography``
    package's OpenSSL binding) under 256-bit keys from ``_new_key``, re-keyed every 2^36 bytes."""

    def __init__(self) -> None:
        self._encryptor = None
        self._left = 0
        self._zeros = b""

    def _new_key(self) -> bytes:
        raise NotImplementedError

    def _rekey(self) -> None:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

        # fresh key, zero counter and nonce: (key, nonce) never repeats
        self._encryptor = Cipher(algorithms.ChaCha20(self._new_key(), bytes(16)), mode=None).encryptor()
        self._left = 2**36

    def _keystream_words(self, n: int) -> np.ndarray:
        nbytes = 8 * int(n)
        if self._encryptor is None or self._left < nbytes:
            self._rekey()
        if len(self._zeros) < nbytes:
            self._zeros = bytes(nbytes)
        out = np.empty(int(n), dtype=np.uint64)
        self._encryptor.update_into(memoryview(self._zeros)[:nbytes], memoryview(out).cast("B"))
        self._left -= nbytes
        return out


class SecureBits(_ChaCha20Stream):
    """Cryptographically secure uniform ``uint64`` words.

    Parameters
    ----------
    method : {"chacha20", "os"}
        ``"chacha20"`` (default): the keystream of ChaCha20 under a fresh 256-bit key from
        ``os.urandom``, re-keyed every 2^36 bytes. This is the construction the Linux kernel's own
        CSPRNG uses behind ``getrandom`` and it runs at memory speed (10^7 words in ~0.04 s here,
        against ~0.4 s for ``os.urandom``). ``"os"``: every word straight from ``os.urandom``.

    Notes
    -----
    The key lives only in this object; create one per release (:func:`noise_source` does).
    """

    secure = True

    def __init__(self, method: Literal["chacha20", "os"] = "chacha20") -> None:
        if method not in ("chacha20", "os"):
            raise ValueError(f"method must be 'chacha20' or 'os', got {method!r}")
        super().__init__()
        self.method = method
        self.description = (
            "ChaCha20 keystream keyed by 256 bits of os.urandom (CSPRNG)" if method == "chacha20"
            else "os.urandom (OS CSPRNG)"
        )

    def _new_key(self) -> bytes:
        return os.urandom(32)

    def words(self, n: int) -> np.ndarray:
        if self.method == "os":
            return np.frombuffer(os.urandom(8 * int(n)), dtype=np.uint64).copy()
        return self._keystream_words(n)


class SeededBits(_ChaCha20Stream):
    """Reproducible words for previews only: the ChaCha20 keystream under keys taken from a NumPy
    ``Generator`` (4 words of ``bit_generator.random_raw`` per key), so a seed gives the same stream
    every time, at ChaCha20's speed (about twice that of ``random_raw`` itself here).

    Not cryptographically secure (whoever knows the seed knows the key): a release drawn with it must
    never be published (``Release.save`` refuses seeded releases).
    """

    secure = False

    def __init__(self, generator: np.random.Generator) -> None:
        super().__init__()
        self.generator = generator
        self.description = (f"ChaCha20 keyed by a seeded numpy {type(generator.bit_generator).__name__} "
                            "(seeded preview, not secure)")

    def _new_key(self) -> bytes:
        return np.asarray(self.generator.bit_generator.random_raw(4), dtype="<u8").tobytes()

    def words(self, n: int) -> np.ndarray:
        return self._keystream_words(n)


class DerivedBits(_ChaCha20Stream):
    """The words of one stream of a family, for noise drawn in parallel (one stream per partition of
    a table held in partitions): the ChaCha20 keystream under 256-bit keys
    ``HMAC-SHA256(secret, "dpcore-stream" || index || rekeys)`` (RFC 2104; 8-byte big-endian
    integers), re-keyed every 2^36 bytes. HMAC-SHA256 is a pseudorandom function of its key: the
    streams of distinct ``index`` are independent, each is a ChaCha20 keystream under a uniform key,
    and a stream is a deterministic function of ``(secret, index)`` (a partition computed twice gets
    the same noise). ``secret``: 32 bytes from :func:`stream_secret`; secure when it is.
    """

    def __init__(self, secret: bytes, index: int, *, secure: bool) -> None:
        if len(secret) != 32:
            raise ValueError("the secret must be 32 bytes (256 bits)")
        super().__init__()
        self.secure = bool(secure)
        self.description = f"ChaCha20 stream {int(index)} keyed by HMAC-SHA256 of a 256-bit secret"
        self._secret, self._index, self._rekeys = bytes(secret), int(index), 0

    def _new_key(self) -> bytes:
        import hashlib
        import hmac

        message = b"dpcore-stream" + self._index.to_bytes(8, "big") + self._rekeys.to_bytes(8, "big")
        self._rekeys += 1
        return hmac.new(self._secret, message, hashlib.sha256).digest()

    def words(self, n: int) -> np.ndarray:
        return self._keystream_words(n)


def stream_secret(bits: BitSource) -> tuple[bytes, bool]:
    """A fresh 256-bit secret for a family of :class:`DerivedBits` streams standing for ``bits``,
    and whether it is secure: from ``os.urandom`` (the OS CSPRNG) for :class:`SecureBits`, never
    written anywhere; from the seeded generator of :class:`SeededBits` (a preview: the same seed
    gives the same secret, hence the same streams); four words of any other source (a
    :class:`DerivedBits` stream: a family derived from one stream of another family, secure when
    that stream is).
    """
    if isinstance(bits, SecureBits):
        return os.urandom(32), True
    if isinstance(bits, SeededBits):
        return bits._new_key(), False
    return np.asarray(bits.words(4), dtype="<u8").tobytes(), bool(bits.secure)


def noise_source(random_state: None | int | np.random.Generator) -> BitSource:
    """The bit source for the noise of one release.

    ``None`` -> :class:`SecureBits` (fresh OS entropy); an ``int`` -> :class:`SeededBits` on
    ``SeedSequence(seed, spawn_key=(NOISE_SPAWN_KEY,))``, a stream separate from ``default_rng(seed)``
    (which draws the public random matrices) and from its ``spawn`` children; a ``Generator`` ->
    :class:`SeededBits` on ``generator.spawn(1)[0]``.

    Raises
    ------
    ValueError
        Any other ``random_state``.
    """
    if random_state is None:
        return SecureBits()
    if isinstance(random_state, np.random.Generator):
        try:
            child = random_state.spawn(1)[0]
        except TypeError:  # a bit generator built without a SeedSequence
            seed = random_state.integers(0, 2**63, size=4).tolist()
            child = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
        return SeededBits(child)
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        seq = np.random.SeedSequence(int(random_state), spawn_key=(NOISE_SPAWN_KEY,))
        return SeededBits(np.random.Generator(np.random.PCG64(seq)))
    raise ValueError(f"random_state must be None, an int or a numpy Generator, got {random_state!r}")


# ------------------------------------------------------------------------------------ exact uniforms
def uniform_below(bound: int, size: int, bits: BitSource) -> np.ndarray:
    """``size`` i.i.d. integers uniform on ``{0, ..., bound - 1}``, as ``int64``, exactly.

    A power of two takes the top bits of a word; otherwise ``w % bound`` for words ``w`` below the
    largest multiple of ``bound`` that fits in 64 bits, redrawing the others (rejection: no modulo
    bias; a word is rejected with probability < ``bound / 2^64``).

    Raises
    ------
    ValueError
        ``bound`` outside ``[1, 2^63]``.
    """
    bound = int(bound)
    if not 1 <= bound <= 2**63:
        raise ValueError(f"bound must lie in [1, 2^63], got {bound}")
    if bound == 1:
        return np.zeros(size, dtype=np.int64)
    if bound & (bound - 1) == 0:
        return (bits.words(size) >> np.uint64(65 - bound.bit_length())).astype(np.int64)
    w = bits.words(size)
    limit = _TWO64 - _TWO64 % bound
    bad = np.flatnonzero(w >= np.uint64(limit))
    while bad.size:
        w[bad] = bits.words(bad.size)
        bad = bad[w[bad] >= np.uint64(limit)]
    return (w % np.uint64(bound)).astype(np.int64)


#: the leading-zero count of the exponent words is capped here (probability 2^-1024 of reaching it)
_MAX_ZEROS = 1024


def uniform_open01(size: int, bits: BitSource) -> np.ndarray:
    """``size`` i.i.d. floats ``U`` in (0, 1) with full precision down to 2^-1024.

    The binade is drawn from the leading zeros of further words (``P(U in [2^-(z+1), 2^-z)) =
    2^-(z+1)``) and the 52 mantissa bits are uniform, so for every float ``c`` in
    ``[2^-1024, 1]``, ``P(U < c) = c`` *exactly*: a float is a multiple of its binade's spacing.
    This is what makes the float acceptance test of :func:`discrete_gaussian` lose no probability.
    """
    mant = bits.words(size) >> np.uint64(12)  # 52 bits
    zeros = np.zeros(size, dtype=np.int64)
    w = bits.words(size)
    todo = np.flatnonzero(w == 0)
    # leading zeros of a nonzero word: exact through the 53-bit top part or the 11-bit bottom part
    hi = (w >> np.uint64(11)).astype(np.float64)
    lo = (w & np.uint64(0x7FF)).astype(np.float64)
    e_hi = np.frexp(hi)[1]
    e_lo = np.frexp(lo)[1]
    lz = np.where(hi > 0, 53 - e_hi, 64 - e_lo)
    zeros += lz
    while todo.size and zeros[todo[0]] < _MAX_ZEROS:
        w2 = bits.words(todo.size)
        hi = (w2 >> np.uint64(11)).astype(np.float64)
        lo = (w2 & np.uint64(0x7FF)).astype(np.float64)
        lz = np.where(hi > 0, 53 - np.frexp(hi)[1], 64 - np.frexp(lo)[1])
        zeros[todo] += lz
        todo = todo[w2 == 0]
    zeros = np.minimum(zeros, _MAX_ZEROS)
    return np.ldexp((mant + np.uint64(1 << 52)).astype(np.float64), -(zeros + 53).astype(np.int32))


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


# -------------------------------------------------------------------------- noise in parallel blocks
#: draws per block of a :class:`NoiseStream`: block ``i`` of a stream of ``size`` draws holds the draws
#: at positions ``[i B, min((i + 1) B, size))`` (:func:`noise_blocks`), from its own keyed stream
NOISE_BLOCK = 1 << 16


def noise_blocks(size: int) -> list[tuple[int, int]]:
    """The block layout of ``size`` draws: ``[(start, stop), ...]`` in blocks of :data:`NOISE_BLOCK`.

    A function of the number of draws only (the public shape of what is perturbed): never of the
    values, the machine, the thread count or how the draws are taken.
    """
    return [(start, min(int(size), start + NOISE_BLOCK)) for start in range(0, int(size), NOISE_BLOCK)]


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_in_pool = threading.local()


def _noise_pool() -> ThreadPoolExecutor:
    """The process's pool of noise threads, one per CPU (:func:`dpcore.threads.cpu_count`), shared
    by every stream (a server's sessions too): block draws are NumPy and ChaCha20 work that releases
    the GIL, so the blocks of one draw run on every core."""
    global _pool
    with _pool_lock:
        if _pool is None:
            from dpcore.threads import cpu_count

            _pool = ThreadPoolExecutor(cpu_count(), thread_name_prefix="dpcore-noise",
                                       initializer=lambda: setattr(_in_pool, "worker", True))
        return _pool


def _forget_pool() -> None:  # a forked child has none of the parent's threads
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _map_blocks(fn: Callable[[Any], Any], jobs: list[Any], workers: int | None) -> list[Any]:
    """``[fn(job) for job in jobs]``, on the noise pool when there are several jobs (and this is
    not already a noise thread, and ``workers`` is not 1)."""
    if len(jobs) <= 1 or workers == 1 or getattr(_in_pool, "worker", False):
        return [fn(job) for job in jobs]
    return list(_noise_pool().map(fn, jobs))


class NoiseStream:
    """The integer noise of a grid mechanism as one stream of ``size`` i.i.d. draws, drawn in blocks
    on every core.

    Block ``i`` (:func:`noise_blocks`: the draws at ``[i B, (i + 1) B)``, ``B =`` :data:`NOISE_BLOCK`)
    comes from ``draw(len, DerivedBits(secret, i))``: its own ChaCha20 stream, keyed by HMAC-SHA256
    of one fresh 256-bit ``secret`` per stream (:func:`stream_secret` of the mechanism's bit source:
    ``os.urandom`` for secure bits) and ``i``. HMAC-SHA256 is a pseudorandom function, so the blocks'
    streams are independent uniform keystreams and each block holds i.i.d. draws of the exact
    sampler: the stream has the law of ``size`` i.i.d. draws, the same as one sequential draw. A draw
    is a function of ``(secret, position)`` only: taking the draws in any pieces, on any number of
    threads, gives the same values (a seeded preview is reproducible on any machine), and the block
    layout depends on ``size`` alone.

    Parameters
    ----------
    draw : callable ``(count, bits, out=None) -> ndarray of int64``
        The exact sampler (:meth:`GridNoise.exact_sampler`).
    size : int
        Number of draws the stream holds.
    bits : BitSource or None
        The mechanism's bit source; only its secret is taken (one call of :func:`stream_secret`).
    workers : int, optional
        1 draws the blocks on the calling thread; otherwise on the noise pool (one thread per CPU).
    """

    def __init__(self, draw: Callable[..., np.ndarray], size: int, bits: BitSource | None, *,
                 workers: int | None = None) -> None:
        self._draw, self.size, self.workers = draw, int(size), workers
        # no bits: a mechanism that adds nothing (its sampler ignores them)
        self._secret, self._secure = stream_secret(bits) if bits is not None else (bytes(32), False)
        self._taken = 0
        self._next_block = 0
        self._left = np.empty(0, dtype=np.int64)

    def _block_size(self, i: int) -> int:
        return max(0, min(self.size, (i + 1) * NOISE_BLOCK) - i * NOISE_BLOCK)

    def block(self, i: int, out: np.ndarray | None = None) -> np.ndarray:
        """The draws of block ``i`` (int64, as long as :func:`noise_blocks`' block ``i``), into ``out``
        if given."""
        count = self._block_size(i)
        if count == 0:
            raise IndexError(f"block {i} is beyond the stream's {self.size} draws")
        return self._draw(count, DerivedBits(self._secret, i, secure=self._secure), out=out)

    def take(self, count: int) -> np.ndarray:
        """The next ``count`` draws (int64), the blocks they need drawn in parallel, each straight
        into its place in the result.

        Raises
        ------
        ValueError
            More draws than the stream has left.
        """
        count = int(count)
        if count < 0 or self._taken + count > self.size:
            raise ValueError(f"{count} draws asked of a stream with {self.size - self._taken} left")
        out = np.empty(count, dtype=np.int64)
        pos = min(count, self._left.size)
        out[:pos] = self._left[:pos]
        self._left = self._left[pos:]
        jobs, last = [], None
        while pos < count:
            i, n_i = self._next_block, self._block_size(self._next_block)
            self._next_block += 1
            if pos + n_i <= count:
                jobs.append((i, out[pos:pos + n_i]))
            else:  # the block that ends past this take: its rest is kept for the next one
                last = (np.empty(n_i, dtype=np.int64), count - pos)
                jobs.append((i, last[0]))
            pos += n_i
        _map_blocks(lambda job: self.block(*job), jobs, self.workers)
        if last is not None:
            block, used = last
            out[count - used:] = block[:used]
            self._left = block[used:]
        self._taken += count
        return out


# ------------------------------------------------------------------------------------ mechanisms
@dataclass(frozen=True)
class NoiseDraw:
    """A noisy statistic on a public grid and how it was drawn.

    Attributes
    ----------
    values : numpy.ndarray of float
        ``grid * integer``: the published values, same shape as the input.
    grid : float
        The public power-of-two grid ``g`` (0 when no noise was added).
    scale : float
        The actual noise scale in value units: Laplace ``b = t * g`` or Gaussian ``sigma``.
    sensitivity_used : float
        The sensitivity including the rounding: ``S1 + n_changed g`` or ``S2 + sqrt(n_changed) g``.
    distribution : {"discrete-laplace", "discrete-gaussian", "none"}
    sampler : str
        Sampler and bit source.
    extra_epsilon, extra_delta : float
        What the implementation adds to the ideal mechanism's guarantee (0 for the discrete
        Laplace; see :func:`gaussian_slack`).
    n_changed : int
        Coordinates that can differ between neighbours.
    """

    values: np.ndarray
    grid: float
    scale: float
    sensitivity_used: float
    distribution: str
    sampler: str
    extra_epsilon: float = 0.0
    extra_delta: float = 0.0
    n_changed: int = 0
    sigma_grid: float = 0.0


def _pow2_floor(x: float) -> float:
    return math.ldexp(1.0, math.frexp(x)[1] - 1)


def _check_n_changed(n_changed: int) -> int:
    if isinstance(n_changed, bool) or int(n_changed) != n_changed or n_changed < 1:
        raise ValueError(f"n_changed must be a positive integer, got {n_changed!r}")
    return int(n_changed)


def laplace_grid(sensitivity: float, epsilon: float | Fraction, n_changed: int) -> tuple[float, int, float]:
    """Grid ``g``, discrete scale ``t`` and inflated sensitivity ``S1' = S1 + n_changed g``.

    ``g`` is the largest power of two with ``n_changed g <= S1 2^-42``, doubled while
    ``t = ceil(S1' / (g epsilon))`` (computed in exact rational arithmetic) exceeds 2^47. The discrete
    Laplace with scale ``t`` on the rounded query (integer L1 sensitivity ``<= S1 / g + n_changed =
    S1' / g``) is exactly ``S1' / (g t) <= epsilon``-DP (geometric mechanism, Ghosh, Roughgarden &
    Sundararajan 2009; CKS 2020). Depends on public numbers only. The returned ``S1'`` is rounded up.
    """
    s1 = float(sensitivity)
    n = _check_n_changed(n_changed)
    if not (s1 > 0 and math.isfinite(s1)):
        raise ValueError(f"sensitivity must be finite and > 0, got {sensitivity!r}")
    eps = epsilon if isinstance(epsilon, Fraction) else Fraction(float(epsilon))
    g = _pow2_floor(s1 * 2.0**-ROUNDING_BITS / n)
    while True:
        s1_used = Fraction(s1) + n * Fraction(g)
        t = math.ceil(s1_used / (Fraction(g) * eps))
        if t <= MAX_LAPLACE_T:
            break
        g *= 2.0
    used = float(s1_used)
    return g, max(t, 1), used if used >= s1_used else math.nextafter(used, math.inf)


#: entries of one piece of :func:`_on_grid` (256 KiB of float64: its temporaries stay in cache)
_GRID_PIECE = 1 << 15


def _on_grid(values: np.ndarray, grid: float, integers: np.ndarray, out: np.ndarray | None = None
             ) -> np.ndarray:
    """``grid * (rint(values / grid) + integers)`` as floats: a function of the exact integer sum only.

    ``rint(values / grid)`` is an integer-valued float (exact: ``grid`` is a power of two; ``values``
    are taken as float64) and every ``|integer| < 2^53`` is a float, so ``a + integer`` is ONE
    correctly rounded IEEE addition of two exact integers: the result depends on their exact sum
    alone (exact below 2^53; rounded, as any post-processing may, above), and multiplying by a power
    of two is exact. Noise integers of 2^53 or more (probability < e^-64 per entry at t <= 2^47) are
    added in Python integers. Computed in pieces of rows of :data:`_GRID_PIECE` entries, written
    into ``out`` (same shape; cast to its dtype, e.g. a float32 release: a function of the float64
    result) or a new float64 array; ``out`` may be ``values`` itself.
    """
    values = np.asarray(values)
    if np.shape(integers) != values.shape:
        raise ValueError(f"noise of shape {np.shape(integers)} for values of shape {values.shape}")
    if out is None:
        out = np.empty(values.shape, dtype=np.float64)
    if values.ndim == 0:
        out[...] = _on_grid(values.reshape(1), grid, np.reshape(integers, 1))[0]
        return out
    per_row = math.prod(values.shape[1:])
    step = max(1, _GRID_PIECE // max(1, per_row))
    buf = np.empty((min(step, values.shape[0]), *values.shape[1:]))
    for start in range(0, values.shape[0], step):
        rows = slice(start, min(values.shape[0], start + step))
        a = buf[: rows.stop - rows.start]
        np.divide(values[rows], grid, out=a, dtype=np.float64)
        np.rint(a, out=a)
        # a finite sum means every entry is finite (NaN and infinities propagate); else check each
        if not math.isfinite(float(a.sum())) and not np.all(np.isfinite(a)):
            raise ValueError("the statistic to perturb contains NaN or infinity (or overflows the grid)")
        piece = integers[rows]
        if piece.size and (piece.max() >= 2**53 or piece.min() <= -(2**53)):
            flat_a, flat_i = a.reshape(-1), np.asarray(piece).reshape(-1)
            exact = [float(int(x) + int(i)) for x, i in zip(flat_a.tolist(), flat_i.tolist(), strict=True)]
            a[...] = np.reshape(exact, a.shape)
        else:
            a += piece  # one correctly rounded addition per entry, the same as a + integer
        a *= grid
        out[rows] = a
    return out


@dataclass(frozen=True)
class GridNoise:
    """A calibrated grid mechanism, ready to perturb values (as a whole or block by block).

    ``draw(shape)`` returns the integer noise (grid units) for a block; ``apply(values, integers)``
    returns ``grid * (rint(values / grid) + integers)`` (:func:`_on_grid`); ``add(values)`` does both
    and returns a :class:`NoiseDraw`. The attributes mirror :class:`NoiseDraw`'s (without values), so
    :func:`record_fields` and :func:`combine_slack` accept either. ``distribution == "none"``
    (epsilon = inf, or nothing to protect) leaves values unchanged.
    """

    grid: float
    scale: float
    sensitivity_used: float
    distribution: str
    sampler: str
    bits: BitSource | None
    n_changed: int = 0
    t: int = 0
    sigma_grid: float = 0.0
    extra_epsilon: float = 0.0
    extra_delta: float = 0.0

    def exact_sampler(self) -> Callable[..., np.ndarray]:
        """``draw(count, bits, out=None)``: ``count`` i.i.d. integers (int64) of this mechanism's exact
        sampler, written into ``out`` if given."""
        if self.distribution == "discrete-laplace":
            return _laplace_draws(self.t)
        if self.distribution == "discrete-gaussian":
            return _gaussian_draws(self.sigma_grid)
        return lambda count, bits, out=None: _into(out, np.zeros(int(count), dtype=np.int64))

    def stream(self, size: int, *, workers: int | None = None) -> NoiseStream:
        """A :class:`NoiseStream` of ``size`` integers of this mechanism, keyed from its bits."""
        return NoiseStream(self.exact_sampler(), size, self.bits, workers=workers)

    def draw(self, shape: int | tuple[int, ...], *, workers: int | None = None) -> np.ndarray:
        """Integer noise (grid units, int64) of ``shape``: the ``prod(shape)`` draws of one
        :class:`NoiseStream` in C order, its blocks drawn on every core (``workers=1``: on this
        thread; the values are the same)."""
        shape = _shape(shape)
        if self.distribution == "none":
            return np.zeros(shape, dtype=np.int64)
        size = math.prod(shape)
        return self.stream(size, workers=workers).take(size).reshape(shape)

    def apply(self, values: np.ndarray, integers: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``grid * (rint(values / grid) + integers)`` (:func:`_on_grid`), into ``out`` if given."""
        if self.distribution == "none":
            if out is None:
                return np.array(values, dtype=np.float64)
            out[...] = values
            return out
        return _on_grid(values, self.grid, integers, out=out)

    def add(self, values: np.ndarray) -> NoiseDraw:
        """This mechanism on every cell of ``values`` (in memory; rows held elsewhere are noised by
        their engine, :meth:`dpcore.table.TableEngine.add_noise`)."""
        values = np.asarray(values, dtype=np.float64)
        return NoiseDraw(
            values=self.apply(values, self.draw(values.shape)), grid=self.grid, scale=self.scale,
            sensitivity_used=self.sensitivity_used, distribution=self.distribution, sampler=self.sampler,
            extra_epsilon=self.extra_epsilon, extra_delta=self.extra_delta, n_changed=self.n_changed,
            sigma_grid=self.sigma_grid,
        )


def _no_noise(sensitivity: float) -> GridNoise:
    return GridNoise(0.0, 0.0, float(sensitivity), "none", "none", None)


def laplace_plan(sensitivity: float, epsilon: float | None = None, *, scale: float | None = None,
                 n_changed: int, bits: BitSource) -> GridNoise:
    """The exact pure-epsilon grid Laplace mechanism of :func:`laplace`, before any value is seen.

    Give ``epsilon``, or the continuous ``scale = S1 / epsilon`` a calibration computed (the noise
    then follows that calibration: ``t g >= next_float_up(scale) S1' / S1``, so the loss is at most
    ``S1 / scale``, rounded safely); ``scale = 0`` or ``epsilon = inf`` adds nothing.
    """
    if (epsilon is None) == (scale is None):
        raise ValueError("give exactly one of epsilon and scale")
    if scale is not None:
        if float(scale) == 0 or float(sensitivity) == 0:
            return _no_noise(sensitivity)
        safe_scale = Fraction(math.nextafter(float(scale), math.inf))
        eps: float | Fraction = Fraction(float(sensitivity)) / safe_scale
    else:
        eps = float(epsilon)
        if math.isinf(eps) or float(sensitivity) == 0:
            return _no_noise(sensitivity)
    g, t, s1_used = laplace_grid(sensitivity, eps, n_changed)
    return GridNoise(
        grid=g, scale=t * g, sensitivity_used=s1_used, distribution="discrete-laplace",
        sampler=f"exact discrete Laplace (CKS 2020), t = {t} grid units; {bits.description}",
        bits=bits, n_changed=int(n_changed), t=t,
    )


def laplace(values: np.ndarray, sensitivity: float, epsilon: float | None = None, *,
            scale: float | None = None, n_changed: int, bits: BitSource) -> NoiseDraw:
    """Pure epsilon-DP Laplace mechanism on a public grid, exactly.

    Parameters
    ----------
    values : array-like of float, any shape
        The statistic.
    sensitivity : float
        Its L1 sensitivity ``S1`` under the mechanism's neighbouring relation.
    epsilon : float
        Budget of this statistic; ``inf`` (or ``S1 = 0``) returns ``values`` unchanged.
    scale : float, optional
        Instead of ``epsilon``: the calibrated continuous scale ``S1 / epsilon`` (:func:`laplace_plan`).
    n_changed : int
        How many coordinates can differ between neighbours (each can gain ``g`` from rounding).
    bits : BitSource

    Returns
    -------
    NoiseDraw
        ``values = g * (rint(values / g) + DLap(t))`` with :func:`laplace_grid`'s ``g, t``; ``scale =
        t g >= S1' / epsilon``; ``extra_epsilon = extra_delta = 0`` (the guarantee is exact).
    """
    return laplace_plan(sensitivity, epsilon, scale=scale, n_changed=n_changed, bits=bits).add(values)


def symmetric(matrix: np.ndarray, plan: GridNoise) -> tuple[np.ndarray, NoiseDraw]:
    """``plan`` applied to the upper triangle (diagonal included) of a symmetric ``(k, k)`` matrix,
    mirrored below (SPEC section 1). ``plan`` must count ``n_changed = k (k + 1) / 2``."""
    m = np.asarray(matrix, dtype=np.float64)
    iu = np.triu_indices(m.shape[0])
    draw = plan.add(m[iu])
    out = np.zeros_like(m)
    out[iu] = draw.values
    return out + np.triu(out, 1).T, draw


def symmetric_laplace(matrix: np.ndarray, sensitivity: float, epsilon: float | None = None, *,
                      scale: float | None = None, n_changed: int | None = None,
                      bits: BitSource) -> tuple[np.ndarray, NoiseDraw]:
    """Laplace mechanism on the upper triangle of a symmetric ``(k, k)`` matrix (``sensitivity``: the
    upper-triangle L1 sensitivity), mirrored: :func:`symmetric` with :func:`laplace_plan`.
    ``n_changed`` (default ``k (k + 1) / 2``): coordinates that can change between neighbours, over
    every statistic the sensitivity covers jointly."""
    k = np.shape(matrix)[0]
    n = k * (k + 1) // 2 if n_changed is None else n_changed
    return symmetric(matrix, laplace_plan(sensitivity, epsilon, scale=scale, n_changed=n, bits=bits))


def gaussian_grid(l2_sensitivity: float, n_changed: int, sigma_floor: float) -> tuple[float, float]:
    """Grid ``g`` and inflated L2 sensitivity ``S2' = S2 + sqrt(n_changed) g``, before calibration.

    ``sigma_floor`` is a public lower bound on the sigma that will be calibrated at ``S2'`` (e.g. the
    sigma calibrated at ``S2`` itself: calibration is monotone in the sensitivity). ``g`` is the
    largest power of two with ``sigma_floor / g >= 2^24`` and ``sqrt(n_changed) g <= S2 2^-42``,
    coarsened if needed so that ``sigma_floor / g <= 2^46``: the final ``sigma / g`` lies in
    ``[2^24, ~2^46]``. ``S2'`` is rounded up.
    """
    s2 = float(l2_sensitivity)
    n = _check_n_changed(n_changed)
    if not (s2 > 0 and math.isfinite(s2)) or not (sigma_floor > 0 and math.isfinite(sigma_floor)):
        raise ValueError(f"need finite l2_sensitivity > 0 and sigma_floor > 0, got {s2!r}, {sigma_floor!r}")
    g = _pow2_floor(min(sigma_floor * 2.0**-GAUSSIAN_GRID_BITS, s2 * 2.0**-ROUNDING_BITS / math.sqrt(n)))
    while sigma_floor / g > 2.0**MAX_GAUSSIAN_GRID_BITS:
        g *= 2.0
    return g, math.nextafter(s2 + math.sqrt(n) * g, math.inf)


def gaussian_slack(sigma_grid: float, n_changed: int, *, tail_k: float = GAUSSIAN_TAIL_K
                   ) -> tuple[float, float]:
    """``(extra_epsilon, extra_delta)`` of the implemented discrete Gaussian over the ideal mechanism.

    The ideal mechanism ``round_g(round_g(q) + N(0, sigma^2))`` is post-processing of the continuous
    Gaussian mechanism on the rounded query ``round_g(q)`` (L2 sensitivity ``S2'``), so every
    continuous accounting (analytic Gaussian, zCDP, RDP) applies to it. Per coordinate, in grid units
    (``s = sigma / g``), its PMF is ``p(k) = P(rint(Z) = k)``, ``Z ~ N(0, s^2)``, and
    ``p(k) / p_DG(k) = (Z_DG / (s sqrt(2 pi))) * I(k)`` with ``I(k) = int_{-1/2}^{1/2}
    exp(-(2ku + u^2)/(2 s^2)) du``. Poisson summation gives ``Z_DG = s sqrt(2 pi) (1 + 2 sum_m
    exp(-2 pi^2 s^2 m^2)) in [1, 1 + 3 e^{-2 pi^2 s^2}] s sqrt(2 pi)``; Jensen gives
    ``I(k) >= exp(-1/(24 s^2))`` and ``I(k) <= sinh(x)/x <= exp(x^2/6)`` with ``x = k/(2 s^2)``, i.e.
    ``<= exp(K^2/(24 s^2))`` for ``|k| <= K s``. With the sampler's own error ``r``
    (:func:`_discrete_gaussian_cks`'s; the default table sampler's is 0, so ``r`` is an upper bound
    kept for both methods), the implemented PMF is within ``exp(+-gamma1)`` of the ideal one on
    ``|k| <= K s``, ``gamma1 = max(1, K^2)/(24 s^2) + log(1 + 3 e^{-2 pi^2 s^2}) + r``, and both put
    mass ``<= 2 tau``, ``tau = 2 exp(-K^2/2)``, beyond.

    Only the ``n_changed`` coordinates that can differ between neighbours matter (the others have the
    same law under both and are independent). On the event ``G`` that all of them lie within ``K s``
    of their centre, the joint PMFs are within ``exp(+-a)``, ``a = n_changed gamma1``, so
    ``P_impl(S) <= e^a P_ideal(S) + n_changed 2 tau`` and vice versa. Chaining
    ``impl(D) -> ideal(D) -> ideal(D') -> impl(D')`` turns an (epsilon, delta) guarantee of the ideal
    mechanism into (epsilon + 2a, e^a delta + 2 n tau (1 + e^{epsilon + a})) for the implemented one
    (:func:`combine_slack` does this for a whole release).

    Returns
    -------
    (float, float)
        ``(2 a, 2 n_changed tau)``: the epsilon to add and the tail part of the delta. The rest of the
        delta, ``(e^a - 1) delta + 2 n tau e^{epsilon + a}``, needs the release's epsilon and delta.
    """
    s = float(sigma_grid)
    n = _check_n_changed(n_changed)
    k = float(tail_k)
    tau = 2.0 * math.exp(-k * k / 2)
    kf = FLOAT_K
    r0 = 3 * _UNIT_ROUNDOFF * (kf * kf + kf) + 8 * _UNIT_ROUNDOFF
    r = 2 * r0 + 2 * 2.0 * math.exp(-kf * kf / 2)
    gamma1 = max(1.0, k * k) / (24 * s * s) + math.log1p(3 * math.exp(-2 * math.pi**2 * s * s)) + r
    return 2 * n * gamma1, 2 * n * tau


def tail_k(epsilon: float) -> float:
    """The ``K`` of :func:`gaussian_slack` for a release at ``epsilon``: ``sqrt(2 (epsilon + 200))``, at
    least :data:`GAUSSIAN_TAIL_K`, so that the tail term ``tau e^epsilon <= 2 e^-200``."""
    if not math.isfinite(epsilon):
        return GAUSSIAN_TAIL_K
    return max(GAUSSIAN_TAIL_K, math.sqrt(2 * (max(epsilon, 0.0) + 200)))


def combine_slack(draws: Iterable[NoiseDraw | GridNoise], epsilon: float, delta: float
                  ) -> tuple[float, float]:
    """``(extra_epsilon, extra_delta)`` for a release whose ideal mechanism is (epsilon, delta)-DP.

    Sums ``a`` and the tail deltas of :func:`gaussian_slack` (with ``K =`` :func:`tail_k`) over every
    discrete Gaussian draw (coordinates of different draws are independent, so the argument applies
    to their union) and returns ``(2a, (e^a - 1) delta + tail (1 + e^{epsilon + a}))``. Discrete
    Laplace draws add nothing.
    """
    k = tail_k(epsilon)
    a = tail = 0.0
    for d in draws:
        if d.distribution == "discrete-gaussian":
            extra, t = gaussian_slack(d.sigma_grid, d.n_changed, tail_k=k)
            a, tail = a + extra / 2, tail + t
    if a == 0 and tail == 0:
        return 0.0, 0.0
    grow = math.exp(min(epsilon + a, 700.0)) if math.isfinite(epsilon) else math.inf
    return 2 * a, math.expm1(a) * float(delta) + tail * (1 + grow)


def gaussian_plan(sigma: float, *, grid: float, l2_sensitivity: float, n_changed: int,
                  bits: BitSource) -> GridNoise:
    """The grid Gaussian mechanism of :func:`gaussian`, before any value is seen."""
    sigma = float(sigma)
    if sigma == 0:
        return _no_noise(l2_sensitivity)
    g = float(grid)
    if not (g > 0 and math.frexp(g)[0] == 0.5):
        raise ValueError(f"grid must be a positive power of two, got {grid!r}")
    sigma_grid = sigma / g
    if sigma_grid < 2.0**MIN_GAUSSIAN_GRID_BITS:
        raise ValueError(f"grid {g!r} is too coarse for sigma {sigma!r}: need sigma/grid >= 2^20")
    n = _check_n_changed(n_changed)
    extra_eps, extra_delta = gaussian_slack(sigma_grid, n)
    return GridNoise(
        grid=g, scale=sigma,
        sensitivity_used=math.nextafter(float(l2_sensitivity) + math.sqrt(n) * g, math.inf),
        distribution="discrete-gaussian",
        sampler=(f"exact discrete Gaussian (alias table over the central mass, exact rejection; "
                 f"dpcore.noise.discrete_gaussian), sigma = {sigma_grid:.6g} grid units; {bits.description}"),
        bits=bits, n_changed=n, sigma_grid=sigma_grid, extra_epsilon=extra_eps, extra_delta=extra_delta,
    )


def gaussian(values: np.ndarray, sigma: float, *, grid: float, l2_sensitivity: float, n_changed: int,
             bits: BitSource) -> NoiseDraw:
    """Gaussian mechanism on a public grid with the exact-proposal discrete Gaussian sampler.

    Parameters
    ----------
    values : array-like of float, any shape
    sigma : float
        Noise standard deviation in value units, calibrated (by the caller's accountant) at the
        inflated sensitivity ``S2'`` of :func:`gaussian_grid`; 0 returns ``values`` unchanged.
    grid : float
        The grid :func:`gaussian_grid` returned; ``sigma / grid`` must be at least 2^20.
    l2_sensitivity : float
        The raw L2 sensitivity ``S2``; the record carries ``S2 + sqrt(n_changed) grid``.
    n_changed : int
    bits : BitSource

    Returns
    -------
    NoiseDraw
        ``values = g * (rint(values / g) + DG(sigma / g))``, ``scale = sigma`` exactly (``g`` is a power
        of two), ``extra_epsilon, extra_delta`` from :func:`gaussian_slack`.

    Raises
    ------
    ValueError
        A grid that is not a power of two or is coarser than ``sigma * 2^-20``.
    """
    return gaussian_plan(sigma, grid=grid, l2_sensitivity=l2_sensitivity, n_changed=n_changed,
                         bits=bits).add(values)


def calibrated_gaussian_plan(l2_sensitivity: float, calibrate: Callable[[float], float], *,
                             n_changed: int, bits: BitSource) -> GridNoise:
    """Calibrate sigma at the rounding-inflated sensitivity and return the grid Gaussian mechanism.

    ``calibrate`` maps an L2 sensitivity to sigma (the caller's accountant: analytic Gaussian, zCDP
    share, ...; monotone). ``sigma0 = calibrate(S2)`` fixes the grid (:func:`gaussian_grid`), then
    ``sigma = calibrate(S2')``. ``sigma0 = 0`` (NOT PRIVATE) adds nothing.
    """
    sigma0 = float(calibrate(float(l2_sensitivity)))
    if sigma0 == 0:
        return _no_noise(l2_sensitivity)
    g, s2_used = gaussian_grid(l2_sensitivity, n_changed, sigma0)
    return gaussian_plan(float(calibrate(s2_used)), grid=g, l2_sensitivity=l2_sensitivity,
                         n_changed=n_changed, bits=bits)


def gaussian_mechanism(values: np.ndarray, l2_sensitivity: float, calibrate: Callable[[float], float], *,
                       n_changed: int, bits: BitSource) -> NoiseDraw:
    """:func:`calibrated_gaussian_plan` applied to ``values``."""
    return calibrated_gaussian_plan(l2_sensitivity, calibrate, n_changed=n_changed, bits=bits).add(values)


def record_fields(draw: NoiseDraw | GridNoise) -> dict[str, object]:
    """The :class:`~dpcore.release.NoiseRecord` fields that describe how ``draw`` was made."""
    return {"grid": draw.grid or None, "sampler": draw.sampler, "sensitivity_used": draw.sensitivity_used}


def slack_details(draws: Iterable[NoiseDraw | GridNoise], epsilon: float, delta: float
                  ) -> tuple[float, float, dict]:
    """``(epsilon', delta', details)``: a release's guarantee with the Gaussian sampler slack added.

    ``epsilon, delta``: what the mechanism's accounting gives for the ideal (rounded continuous)
    mechanism; see :func:`combine_slack`. ``details`` goes into ``Release.details["noise_slack"]``.
    """
    extra_eps, extra_delta = combine_slack(draws, epsilon, delta)
    info = {
        "extra_epsilon": extra_eps, "extra_delta": extra_delta,
        "note": "floating-point-safe noise: discrete Laplace (exact, adds nothing) and discrete Gaussian "
                "on a public power-of-two grid (Canonne, Kamath & Steinke 2020); the discrete Gaussian's "
                "distance to the rounded continuous mechanism is added here (dpcore.noise.gaussian_slack)",
    }
    if extra_eps == 0 and extra_delta == 0:
        return epsilon, delta, info
    return epsilon + extra_eps, min(float(delta) + extra_delta, 1.0), info


def reserve_slack(epsilon: float, delta: float, n_changed: int) -> tuple[float, float]:
    """The (epsilon, delta) to calibrate the ideal mechanism at, so that with the discrete Gaussian
    slack of ``n_changed`` coordinates the release is (``epsilon``, ``delta``)-DP.

    Every grid of :func:`gaussian_grid` has ``sigma / g >= 2^24``, where :func:`gaussian_slack` is
    largest, so ``a = gaussian_slack(2^24, n_changed)[0] / 2`` bounds the slack before sigma is known:
    calibrate at ``(epsilon - 2a, (delta - tail (1 + e^epsilon)) / e^a)`` (:func:`combine_slack`).
    ``epsilon = inf`` is returned unchanged.

    Raises
    ------
    ValueError
        If the slack does not fit into ``(epsilon, delta)`` (only for absurdly many coordinates).
    """
    if math.isinf(epsilon):
        return epsilon, delta
    extra_eps, tail = gaussian_slack(2.0**GAUSSIAN_GRID_BITS, n_changed, tail_k=tail_k(epsilon))
    a = extra_eps / 2
    eps_ideal = epsilon - extra_eps
    delta_ideal = (float(delta) - tail * (1 + math.exp(min(epsilon, 700.0)))) / math.exp(a)
    if eps_ideal <= 0 or delta_ideal <= 0:
        raise ValueError(f"epsilon = {epsilon:g} (delta = {delta:g}) is too small for a finite noise "
                         f"scale (an infinite noise scale in practice): the discrete Gaussian's slack "
                         f"for {n_changed} coordinates ({extra_eps:.3g}) does not fit; use a larger "
                         "epsilon")
    return eps_ideal, delta_ideal


def reserved_guarantee(draws: Iterable[NoiseDraw | GridNoise], epsilon: float, delta: float,
                       eps_ideal: float, delta_ideal: float) -> tuple[float, float, dict]:
    """``(epsilon', delta', details)`` for a release calibrated at :func:`reserve_slack`'s values.

    The guarantee is the nominal ``(epsilon, delta)`` when the slack actually incurred fits (it does
    by construction; a float rounding above it is reported as computed).
    """
    eps_total, delta_total, info = slack_details(draws, eps_ideal, delta_ideal)
    info["calibrated_at"] = {"epsilon": eps_ideal, "delta": delta_ideal}
    info["note"] += "; reserved from the budget: the ideal mechanism was calibrated at calibrated_at"
    return max(eps_total, epsilon), max(delta_total, delta), info


def fixed_sigma_guarantee(draws: Iterable[NoiseDraw | GridNoise], epsilon_at: Callable[[float], float],
                          epsilon: float, delta: float, n_changed: int) -> tuple[float, float, dict]:
    """``(epsilon', delta', details)`` when sigma was fixed beforehand (a published formula, a given
    sigma): the ideal mechanism's epsilon is ``epsilon_at(delta_ideal)`` at the delta left after the
    sampler's tail reserve, plus the slack; the nominal ``(epsilon, delta)`` is reported when that
    fits within it, the larger computed value otherwise.
    """
    _, delta_ideal = reserve_slack(epsilon, delta, n_changed)
    eps_total, delta_total, info = slack_details(draws, epsilon_at(delta_ideal), delta_ideal)
    info["calibrated_at"] = {"delta": delta_ideal}
    return max(eps_total, epsilon), max(delta_total, delta), info

