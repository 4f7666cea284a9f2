"""Where the noise's random bits come from: :class:`SecureBits` (a ChaCha20 keystream keyed by 256 bits
of OS entropy), :class:`SeededBits` (a seeded exploration preview), :class:`DerivedBits` (one
stream per partition of a table, keyed by HMAC-SHA256), :func:`noise_source`, and exact uniform
integers and floats drawn from them (:func:`uniform_below`, :func:`uniform_open01`).
"""

from __future__ import annotations

import os
from typing import Literal, Protocol

import numpy as np

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
