"""Noise mechanisms on a public grid: the statistic rounded to a power-of-two grid plus an exact
discrete sampler's integers (:class:`GridNoise`, :func:`laplace`, :func:`gaussian`), their plans and
calibration, and the samplers' slack in (epsilon, delta) (:func:`gaussian_slack`,
:func:`combine_slack`, :func:`reserve_slack`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpcore.noise.bits import (
    _UNIT_ROUNDOFF,
    GAUSSIAN_GRID_BITS,
    GAUSSIAN_TAIL_K,
    MAX_GAUSSIAN_GRID_BITS,
    MAX_LAPLACE_T,
    MIN_GAUSSIAN_GRID_BITS,
    ROUNDING_BITS,
    BitSource,
)
from dpcore.noise.gaussian import FLOAT_K, _gaussian_draws, _into
from dpcore.noise.laplace import _laplace_draws, _shape
from dpcore.noise.streams import NoiseStream


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
