"""Rényi-DP accounting for DPMix (random mixtures of rows plus Gaussian noise).

What is accounted
-----------------
DPMix (Lee, Kim, Lee, Suh, Ramchandran, ISIT 2019, ``papers/dpmix.txt``) releases ``T`` mixtures.
Each mixture picks ``ell`` distinct rows of the private data uniformly at random (sampling without
replacement, rate ``q = ell / n``), averages them and adds ``N(0, sigma_x^2 I)`` to the ``d_x``
feature coordinates and ``N(0, sigma_y^2 I)`` to the ``d_y`` label coordinates. Features and labels
lie in ``[0, 1]`` (public bounds), so under the **replace-one** relation (``n`` public) one mixture
is a Gaussian mechanism with whitened L2 sensitivity ``sqrt(D2) / ell``, where
``D2 = d_x / sigma_x^2 + d_y / sigma_y^2``. Its Rényi DP (RDP) is ``eps_G(a) = a * c / 2`` with
``c = D2 / ell^2``; the noise multiplier of the equivalent unit-sensitivity Gaussian is
``ell / sqrt(D2)``.

Per-mixture RDP at integer order ``a >= 2`` (SPEC 6.1)::

    eps'(a) = log(1 + q^2 C(a,2) min(4 (e^c - 1), 2 e^c) + sum_{j=3..a} q^j C(a,j) w_j) / (a - 1)
    B(m)    = sum_{i=0..m} (-1)^i C(m,i) exp(i (i-1) c / 2)              (m even, B(m) > 0)
    paper:  w_j = 4 sqrt(B(2 floor(j/2)) B(2 ceil(j/2)))
    tight:  w_j = min(4 sqrt(B(2 floor(j/2)) B(2 ceil(j/2))), 2 exp((j-1) eps_G(j)))

``bound="paper"`` is Theorem 1 of the DPMix paper exactly (the paper writes the factor 4 outside
``G``). ``bound="tight"`` is Wang, Balle & Kasiviswanathan 2019 ("Subsampled Rényi differential
privacy and analytical moments accountant", AISTATS), Theorem 9 (the ``2 exp((j-1) eps(j))``
option) combined term by term with their Theorem 27 (the ``B`` option) -- the form used by
dp-accounting (``_compute_rdp_sample_wor_gaussian_int``) and autodp. ``tight`` additionally caps
``eps'(a)`` at the un-subsampled Gaussian RDP ``a c / 2``: subsampling is a mixture over index sets
and Rényi divergence is quasi-convex in the pair of distributions, so the cap is always valid;
dp-accounting applies the same rule at ``q = 1``. It does not bind at the SPEC 6.1 reference
points (it matters for ``q`` near 1, where the subsampling bound is up to 4x the Gaussian RDP).

Composition over ``T`` mixtures multiplies the RDP by ``T``. Conversion to ``(epsilon, delta)``::

    paper (Mironov 2017, Prop. 3):   eps = min_a T eps'(a) + log(1/delta) / (a - 1)
    tight (Canonne, Kamath & Steinke 2020, Prop. 12):
                                     eps = min_a T eps'(a) + log1p(-1/a) - log(delta a) / (a - 1)

Both minimise over **every** integer order ``a >= 2``; results are clamped at 0 (a negative value
from the improved conversion still certifies ``(0, delta)``-DP; dp-accounting does the same).

Numerics
--------
* Everything is in log space: binomials through ``scipy.special.gammaln``, sums through
  log-sum-exp, and ``log(1 + x)`` through ``logaddexp(0, log x)`` so that an RDP of ``1e-12`` keeps
  all its digits.
* ``B(m)`` is never computed as the alternating float sum when it would cancel (it loses every
  digit for small ``c``, goes negative and ``sqrt`` gives NaN). We use the exact identity
  ``B(m) = E_{Z ~ N(0,1)}[(exp(sqrt(c) Z - c/2) - 1)^m]``: the integrand is an entire function whose
  logarithm is concave on either side of its single zero ``z0 = sqrt(c)/2`` (curvature <= -1), so a
  trapezoid rule on the grid ``z0 + k h`` (``h = 1/2``) restricted to +-8.5 around each of the two
  peaks is accurate to ~1e-15 relative for every ``c`` and ``m`` (checked against mpmath in the
  tests). When ``c (m-1) >= log m`` the alternating sum is dominated by its top terms and is summed
  from the top, ``B(m) = exp(c m (m-1)/2) * sum_k (-1)^k C(m,k) exp(-c k (2m-k-1)/2)``; those terms
  decrease monotonically, so stopping at ``k = 40`` (with the first omitted term checked below
  1e-30) is exact to double precision. Both are vectorised; no arbitrary precision is needed.
* Truncation of the ``j``-sum. ``j <= J`` (a per-setting head of 8-512 terms, sized from a proven
  per-term majorant) is always summed exactly. The remaining ``j`` are split into blocks and each
  block is bounded above with ``B(m) <= e^{c m(m-1)/2} + 1`` and
  ``B(m) <= (e^{c m(m-1)/2} + 1) (sqrt(c) ((m-1)!!)^{1/m} + c (m - 1/2))^m`` (proofs in
  :meth:`_Model.tail_block_bounds`), the chord of the convex exponent over the block and the
  log-concavity of ``C(a,j) x^j`` in ``j``. Blocks whose bound exceeds ``1e-32 / n_blocks`` of the
  running total are summed exactly (the cliff region ``j ~ a``), so everything discarded is
  < 1e-30 of the total: far below double precision.
* Orders. The objective ``f(a) = T eps'(a) + conv(a)`` is minimised over all integers ``a >= 2``
  by branch and bound (:class:`_Search`). A geometric scan (ratio 1.25) stops once
  ``T eps'(A) + inf_{a >= A} conv(a)`` exceeds the best exact value found, which rules out every
  larger order. Every interval between evaluated orders is then screened with proven lower
  bounds -- monotonicity of ``eps'``; ``C(a,j) >= C(lo,j) a(a-1)/(lo(lo-1))`` for ``j >= 2``;
  a Jensen bound ``log(A(a)-1) >= log(A(lo)-1) + (jbar/2) log(a(a-1)/(lo(lo-1)))`` that keeps
  the right slope when ``A`` is large (small ``T``); second-order (two-tangent) versions of both
  over segments -- and what survives is subdivided, evaluated, down to single integers. No order
  is skipped unless a bound excludes it, so the result equals the exhaustive minimum (up to ties
  within 1e-12 relative). This relies on ``eps'(a)`` being non-decreasing in ``a``, true for the
  RDP itself and checked for the formula in the tests. The curve has a cliff where the top
  ``j ~ a`` terms take over (``a ~ 2 log(1/q) / c``), so a sparse grid of orders loses real
  epsilon; the optimum can be ~1e4 (SPEC setting) or ~1e8 (a single mixture). Work is vectorised
  across settings and orders.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, log_ndtr

__all__ = [
    "RDPEpsilon",
    "dpmix_calibrate_sigma",
    "dpmix_epsilon",
    "dpmix_rdp",
    "gaussian_rdp",
    "rdp_to_dp",
    "zcdp_epsilon",
    "zcdp_rho",
]

_BOUNDS = ("paper", "tight")
_CONVERSIONS = ("improved", "classic")

# Relative size below which a block of j-terms is discarded (summed over all blocks: < 1e-30).
_LOG_BLOCK_NEGLIGIBLE = math.log(1e-32)
# Head terms are chosen so that the per-term majorant of the first omitted term is below this.
_LOG_HEAD_NEGLIGIBLE = math.log(1e-33)
# Head lengths (also the widths of the vectorised head matrices).
_HEAD_SIZES = np.array([8, 16, 32, 64, 128, 256, 512])

# Trapezoid quadrature for B(m): step and half-width (in grid steps) of each peak window.
_QUAD_H = 0.5
_QUAD_K = 17
# Top-down direct summation of B(m): number of correction terms.
_DIRECT_K = 40

_LOG2 = math.log(2.0)
_LOG4 = math.log(4.0)
_LOG8 = math.log(8.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def _log_comb(a, k):
    """log C(a, k) for real a >= k >= 0 (elementwise)."""
    return gammaln(a + 1.0) - gammaln(k + 1.0) - gammaln(a - k + 1.0)


def _log_abs_expm1(x):
    """log|exp(x) - 1| without overflow or cancellation (``-inf`` at x = 0)."""
    ax = np.abs(x)
    with np.errstate(divide="ignore"):
        base = np.log(-np.expm1(-ax))
    return np.where(x > 0, x + base, base)


def _log_expm1_scalar(c: np.ndarray) -> np.ndarray:
    """log(exp(c) - 1) for c > 0."""
    return c + np.log(-np.expm1(-c))


def _log_w2(c):
    """log min(4 (e^c - 1), 2 e^c): the j = 2 weight (Theorem 9 of WBK 2019, eps(2) = c)."""
    return np.minimum(_LOG4 + _log_expm1_scalar(c), _LOG2 + c)


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _as_int(name: str, value, minimum: int) -> int:
    """Validate an integer parameter (ints or integral floats such as 1e6 are accepted)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if _is_int(value) or (isinstance(value, np.integer)):
        iv = int(value)
    elif isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        iv = int(value)
    else:
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if iv < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return iv


def _check_bound(bound) -> str:
    if bound not in _BOUNDS:
        raise ValueError(f"bound must be one of {_BOUNDS}, got {bound!r}")
    return bound


def _check_delta(delta) -> float:
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise ValueError(f"delta must be a number in (0, 1), got {delta!r}") from None
    if not (0.0 < d < 1.0):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return d


def _positive_array(name: str, value) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number or array of them") from None
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return arr


def _ell_array(value, n: int) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        raise ValueError("ell must be an integer or array of integers") from None
    if arr.dtype == bool or arr.size == 0:
        raise ValueError(f"ell must be an integer or array of integers, got {value!r}")
    if not np.issubdtype(arr.dtype, np.integer):
        try:
            farr = arr.astype(float)
        except (TypeError, ValueError):
            raise ValueError(f"ell must be an integer or array of integers, got {value!r}") from None
        if not np.all(np.isfinite(farr)) or np.any(farr != np.round(farr)):
            raise ValueError(f"ell must be an integer or array of integers, got {value!r}")
        arr = farr
    arr = arr.astype(float)
    if np.any(arr < 1) or np.any(arr > n):
        raise ValueError(f"ell must satisfy 1 <= ell <= n = {n}, got {value!r}")
    return arr


# --------------------------------------------------------------------------------------------
# B(m) = E[(L - 1)^m], L = exp(sqrt(c) Z - c/2)
# --------------------------------------------------------------------------------------------


def _log_B(m, c) -> np.ndarray:
    """log B(m) for even m >= 2 and c > 0 (broadcast, returned flat).

    ``B(m) = sum_i (-1)^i C(m,i) e^{i(i-1)c/2} = E[(exp(sqrt(c) Z - c/2) - 1)^m]`` (the ``i``-th
    moment of the likelihood ratio is ``e^{i(i-1)c/2}``). Two exact evaluations:

    * top-down direct sum when ``c (m-1) >= log m``: ``B = e^{c m(m-1)/2} S`` with
      ``S = sum_k (-1)^k r_k``, ``r_k = C(m,k) e^{-c k (2m-k-1)/2}``. Then ``r_1 = m e^{-c(m-1)}
      <= 1`` and all ratios ``r_{k+1}/r_k < 1`` (``log`` of the ratio is ``log(i+1) - log(m-i)
      - c i`` with ``i = m-k-1``; it is < 0 at both ends and its interior maximum is about
      ``log(1/(c m)) - 1 < 0``), so the alternating series is bracketed by its partial sums and
      ``S >= 1 - r_1 >= e^-1``-ish (no cancellation); we stop at ``k = 40`` after checking
      ``r_41 < 1e-30`` (else quadrature).
    * trapezoid quadrature of the Gaussian expectation otherwise, in log space. On each side of
      the zero ``z0 = sqrt(c)/2`` of the integrand the log-integrand ``m log|e^u - 1| - z^2/2``
      (``u = sqrt(c)(z - z0)``) is strictly concave with curvature <= -1. Its two maxima are
      bracketed in closed form (``1/x + 1/2 <= 1/(1-e^-x) <= 1/x + 1``) and located by bisection;
      the sum over the grid ``z0 + k h`` within 9 of each peak misses < 1e-18 of the mass, and the
      trapezoid rule for this entire integrand has relative error ~exp(-pi^2/h^2) ~ 1e-21.
    """
    m, c = np.broadcast_arrays(np.asarray(m, dtype=float), np.asarray(c, dtype=float))
    m = m.ravel()
    c = c.ravel()
    out = np.empty(m.shape)
    if m.size == 0:
        return out
    kd = float(_DIRECT_K)
    direct = c * (m - 1.0) >= np.log(m)
    big = m > kd
    if np.any(direct & big):
        lr_next = np.full(m.shape, -np.inf)
        sel = direct & big
        lr_next[sel] = _log_comb(m[sel], kd + 1.0) - c[sel] * (kd + 1.0) * (2.0 * m[sel] - kd - 2.0) / 2.0
        direct &= ~big | (lr_next <= -70.0)
    if np.any(direct):
        md = m[direct][:, None]
        cd = c[direct][:, None]
        k = np.arange(1.0, kd + 1.0)[None, :]
        log_binom = np.cumsum(np.log(np.maximum(md - k + 1.0, 1.0) / k), axis=1)
        lr = log_binom - cd * k * (2.0 * md - k - 1.0) / 2.0
        r = np.exp(np.where(k <= md, lr, -np.inf))
        sign = np.where(k % 2 == 1, -1.0, 1.0)
        md = md[:, 0]
        cd = cd[:, 0]
        out[direct] = cd * md * (md - 1.0) / 2.0 + np.log1p((sign * r).sum(axis=1))
    quad = ~direct
    if np.any(quad):
        out[quad] = _log_B_quadrature(m[quad], c[quad])
    return out


def _log_B_quadrature(m: np.ndarray, c: np.ndarray) -> np.ndarray:
    s = np.sqrt(c)
    h = _QUAD_H
    # Peaks of the log-integrand on either side of z0, by Newton's method on a decreasing convex
    # function started left of the root (so the iterates increase monotonically to it):
    # right, t = z - z0:  F(t) = m s / (1 - e^{-s t}) - t - s/2,
    # left,  t = z0 - z:  G(t) = m s / (e^{s t} - 1) - t + s/2.
    # Starting points from 1/x + 1/2 <= 1/(1 - e^{-x}) and 1/x - 1/2 <= 1/(e^x - 1).
    a1 = (m - 1.0) * s / 2.0
    root1 = np.sqrt(a1 * a1 + 4.0 * m)
    t_right = (a1 + root1) / 2.0
    t_left = 2.0 * m / (a1 + root1)
    with np.errstate(over="ignore"):
        for _ in range(8):
            x = s * t_right
            f = m * s / (-np.expm1(-x)) - t_right - s / 2.0
            t_right = t_right + f / (m * c / (4.0 * np.sinh(x / 2.0) ** 2) + 1.0)
            x = s * t_left
            g = m * s / np.expm1(x) - t_left + s / 2.0
            t_left = t_left + g / (m * c / (4.0 * np.sinh(x / 2.0) ** 2) + 1.0)
    offs = np.arange(-_QUAD_K, _QUAD_K + 1, dtype=float)[None, :]
    k_right = np.round(t_right / h)[:, None] + offs
    k_left = -np.round(t_left / h)[:, None] + offs
    k = np.concatenate([k_left, k_right], axis=1)
    valid = np.concatenate([k_left <= -1.0, k_right >= 1.0], axis=1)
    k = np.where(valid, k, 1.0)
    sc = s[:, None]
    z = sc / 2.0 + k * h
    g = m[:, None] * _log_abs_expm1(sc * k * h) - z * z / 2.0
    g = np.where(valid, g, -np.inf)
    gmax = g.max(axis=1)
    total = np.exp(g - gmax[:, None]).sum(axis=1)
    return gmax + np.log(total) + math.log(h) - _LOG_SQRT_2PI


def _log_B_lower(m, c) -> np.ndarray:
    """A cheap lower bound on log B(m) (used only to prune orders), the largest of:

    * Lyapunov: ``B(m) = E|L-1|^m >= (E (L-1)^2)^{m/2} = (e^c - 1)^{m/2}``;
    * tilting: on ``{L >= t}``, ``L - 1 >= L (1 - 1/t)``, and ``E[L^m; L >= t] = e^{g(m)}
      P(N(c (m - 1/2), c) >= log t)``; with ``t = m + 1``:
      ``B(m) >= e^{g(m)} (m/(m+1))^m Phi((c (m - 1/2) - log(m+1)) / sqrt(c))``;
    * where ``c (m-1) >= log m + 4`` the top-down series of :func:`_log_B` has decreasing
      alternating terms, so ``B(m) >= e^{g(m)} (1 - m e^{-c (m-1)})``.
    """
    m, c = np.broadcast_arrays(np.asarray(m, dtype=float), np.asarray(c, dtype=float))
    g = c * m * (m - 1.0) / 2.0
    out = 0.5 * m * _log_expm1_scalar(c)
    tilt = g - m * np.log1p(1.0 / m) + log_ndtr((c * (m - 0.5) - np.log1p(m)) / np.sqrt(c))
    out = np.maximum(out, tilt)
    log_r1 = np.log(m) - c * (m - 1.0)
    top = g + np.log1p(-np.exp(np.minimum(log_r1, -4.0)))
    return np.where(log_r1 <= -4.0, np.maximum(top, out), out)


def _log_nu(m, c):
    """log(sqrt(c) ((m-1)!!)^{1/m} + c (m - 1/2)) for even m (Minkowski bound of B, below)."""
    log_dfact = gammaln(m + 1.0) - 0.5 * m * _LOG2 - gammaln(m / 2.0 + 1.0)
    return np.log(np.sqrt(c) * np.exp(log_dfact / m) + c * (m - 0.5))


# --------------------------------------------------------------------------------------------
# Per-setting model: weights, head sums, tail bounds
# --------------------------------------------------------------------------------------------


class _Model:
    """Vectorised evaluator of log A(a) = log(1 + sum_j q^j C(a,j) w_j) for many settings."""

    def __init__(self, q, c, tight: bool, alpha_ref):
        self.q = np.asarray(q, dtype=float)
        self.c = np.asarray(c, dtype=float)
        self.lq = np.log(self.q)
        self.s = np.sqrt(self.c)
        self.tight = bool(tight)
        self.lw2 = _log_w2(self.c)
        self.cap = np.maximum(1.0, np.floor(4.0 / self.s))
        self.J = self._choose_head(np.asarray(alpha_ref, dtype=float))
        self._build_head_weights()
        self._bkeys = np.zeros(0, dtype=np.int64)
        self._bvals = np.zeros(0)

    # -- head ---------------------------------------------------------------------------------
    def _majorant(self, si, a, j):
        """Upper bound on log(q^j C(a,j) w_j) for a single j (bounds as in tail_block_bounds)."""
        c = self.c[si]
        m1 = 2.0 * np.floor(j / 2.0)
        m2 = 2.0 * np.ceil(j / 2.0)
        log_u = 0.0
        for m in (m1, m2):
            g = c * m * (m - 1.0) / 2.0
            log_u = log_u + np.logaddexp(g, 0.0) + m * np.minimum(0.0, _log_nu(m, c))
        return _log_comb(a, np.minimum(j, a)) + j * self.lq[si] + _LOG4 + 0.5 * log_u

    def _choose_head(self, alpha_ref):
        """Head length J: the first size at which the term majorant at ``alpha_ref`` is < 1e-33.

        A heuristic only: whatever J is, the terms beyond it are bounded and summed when needed.
        J never exceeds the first size >= alpha_ref (orders up to J are then summed in full).
        """
        cand = _HEAD_SIZES.astype(float)
        n = self.c.size
        si = np.repeat(np.arange(n), cand.size)
        j = np.tile(cand, n)
        a = np.maximum(np.repeat(alpha_ref, cand.size), j)
        ok = (self._majorant(si, a, j) < _LOG_HEAD_NEGLIGIBLE).reshape(n, cand.size)
        ok |= cand[None, :] >= alpha_ref[:, None]
        ok[:, -1] = True
        return _HEAD_SIZES[np.argmax(ok, axis=1)]

    def _build_head_weights(self):
        n = self.c.size
        jmax = int(self.J.max())
        half = jmax // 2 + 2  # even m up to jmax + 1 (index m // 2)
        lb = np.full((n, half + 1), np.nan)
        counts = self.J // 2 + 1
        si = np.repeat(np.arange(n), counts)
        start = np.cumsum(counts) - counts
        idx = np.arange(si.size) - np.repeat(start, counts) + 1  # m/2 = 1..J//2 + 1
        lb[si, idx] = _log_B(2.0 * idx, self.c[si])
        j = np.arange(jmax + 1, dtype=float)
        lo = (j // 2).astype(np.int64)
        hi = ((j + 1) // 2).astype(np.int64)
        lw = _LOG4 + 0.5 * (lb[:, lo] + lb[:, hi])
        if self.tight:
            lw = np.minimum(lw, _LOG2 + self.c[:, None] * j * (j - 1.0) / 2.0)
        lw[:, :3] = -np.inf
        lw[:, 2] = self.lw2
        lw = np.where(j[None, :] <= self.J[:, None], lw, -np.inf)
        self.lw = lw

    def log_sum_head(self, si, a):
        """log sum_{j=2}^{min(a, J)} q^j C(a,j) w_j for pairs (si, a), and log of sum j * term.

        ``log(q^j C(a,j))`` is the running sum of ``log(q (a - i + 1) / i)``; pairs are grouped by
        ``min(a, J)`` so that each matrix is only as wide as it needs to be.
        """
        out = np.empty(si.size)
        out_j = np.empty(si.size)
        top = np.minimum(a, self.J[si])
        size = _HEAD_SIZES[np.searchsorted(_HEAD_SIZES, top)]
        for w in np.unique(size):
            sel = np.nonzero(size == w)[0]
            s_ = si[sel]
            a_ = a[sel][:, None]
            i = np.arange(1.0, w + 1.0)[None, :]
            steps = np.log(np.maximum(a_ - i + 1.0, 1.0) / i) + self.lq[s_][:, None]
            t = np.cumsum(steps, axis=1)[:, 1:] + self.lw[s_, 2 : w + 1]
            t = np.where(i[:, 1:] <= top[sel][:, None], t, -np.inf)
            tmax = t.max(axis=1)
            e = np.exp(t - tmax[:, None])
            out[sel] = tmax + np.log(e.sum(axis=1))
            out_j[sel] = tmax + np.log((e * i[:, 1:]).sum(axis=1))
        return out, out_j

    def log_top_lower(self, si, a):
        """Lower bound on log(q^a w_a) (the j = a term), -inf where a <= J (already in head)."""
        out = np.full(si.size, -np.inf)
        sel = a > self.J[si]
        if np.any(sel):
            s_ = si[sel]
            a_ = a[sel]
            c = self.c[s_]
            m1 = 2.0 * np.floor(a_ / 2.0)
            m2 = 2.0 * np.ceil(a_ / 2.0)
            lw = _LOG4 + 0.5 * (_log_B_lower(m1, c) + _log_B_lower(m2, c))
            if self.tight:
                lw = np.minimum(lw, _LOG2 + c * a_ * (a_ - 1.0) / 2.0)
            out[sel] = a_ * self.lq[s_] + lw
        return out

    def log_x_lower(self, si, a):
        """Lower bound on log(A(a) - 1) (exact when a <= J), and log sum of j * term over it."""
        head, head_j = self.log_sum_head(si, a)
        top = self.log_top_lower(si, a)
        return np.logaddexp(head, top), np.logaddexp(head_j, top + np.log(a))

    # -- tail ---------------------------------------------------------------------------------
    def _block_layout(self, si, a):
        lo = self.J[si].astype(float) + 1.0
        hi = np.asarray(a, dtype=float)
        cap = self.cap[si]
        switch = np.minimum(4.0 * cap, hi + 1.0)
        n1 = np.where(switch > lo, np.ceil(np.log(switch / lo) / math.log(1.25) - 1e-12), 0.0)
        b1 = np.ceil(lo * 1.25**n1)
        n2 = np.where(hi + 1.0 > b1, np.ceil((hi + 1.0 - b1) / cap), 0.0)
        counts = np.where(hi >= lo, n1 + n2, 0.0).astype(np.int64)
        return lo, hi, cap, n1, b1, counts

    def blocks(self, si, a):
        """Split (J, a] into blocks for each pair: geometric (ratio 1.25), then width <= cap.

        The width cap ``4 / sqrt(c)`` keeps the chord of ``c j (j-1) / 2`` within 2 of it.
        Returns flat arrays (pair index, block start, block end).
        """
        lo, hi, cap, n1, b1, counts = self._block_layout(si, a)
        pair = np.repeat(np.arange(si.size), counts)
        start_idx = np.cumsum(counts) - counts
        k = (np.arange(pair.size) - np.repeat(start_idx, counts)).astype(float)
        lo_p, n1_p, b1_p, cap_p, hi_p = lo[pair], n1[pair], b1[pair], cap[pair], hi[pair]

        def boundary(kk):
            geo = np.ceil(lo_p * 1.25 ** np.minimum(kk, n1_p))
            return np.where(kk <= n1_p, geo, b1_p + (kk - n1_p) * cap_p)

        first = np.minimum(boundary(k), hi_p)
        last = np.minimum(boundary(k + 1.0) - 1.0, hi_p)
        keep = first <= last
        return pair[keep], first[keep], last[keep]

    def tail_block_bounds(self, si, a, first, last):
        """Upper bound on log sum_{j=first..last} q^j C(a,j) w_j (elementwise over blocks).

        Write ``X = sqrt(c) Z - c/2``, ``L = e^X`` and ``g(m) = c m (m-1)/2 = log E[L^m] >= 0``.
        For even ``m``: ``|e^X - 1| <= |X| e^{max(X, 0)}``, so ``B(m) = E|L-1|^m <=
        E[|X|^m e^{mX}] + E|X|^m``. Tilting by ``e^{mX}`` turns ``X`` into
        ``sqrt(c) Y + c (m - 1/2)`` (``Y ~ N(0,1)``) and Minkowski's inequality with
        ``(E|Y|^m)^{1/m} = ((m-1)!!)^{1/m}`` gives
        ``B(m) <= (e^{g(m)} + 1) nu_m^m``, ``nu_m = sqrt(c) ((m-1)!!)^{1/m} + c (m - 1/2)``;
        also ``B(m) <= E[max(L,1)^m] <= e^{g(m)} + 1``. ``nu_m`` increases with ``m``, so for the
        even ``m1 + m2 = 2j`` of a block (``m <= M``, the largest even number ``<= last + 1``)
        ``w_j <= 4 sqrt(B(m1) B(m2)) <= 8 e^{c/2} e^{g(j)} min(1, nu_M)^j`` (the tight weights
        are smaller still), using ``(g(m1) + g(m2))/2 <= g(j) + c/2``. On the block ``g(j)`` lies
        below its chord ``g(first) + (j - first) kappa``, ``kappa = c (first + last - 1)/2``, so each
        term is at most ``K C(a,j) x^j`` with ``x = q e^kappa min(1, nu_M)``: log-concave in
        ``j``, maximal at its mode clipped to the block; the block sum is at most
        (block length) * (that maximum).
        """
        c = self.c[si]
        a0 = first
        b = last
        kappa = c * (a0 + b - 1.0) / 2.0
        big_m = 2.0 * np.floor((b + 1.0) / 2.0)
        lx = self.lq[si] + kappa + np.minimum(0.0, _log_nu(big_m, c))
        mode = np.floor((a + 1.0) / (1.0 + np.exp(-np.clip(lx, -700.0, 700.0))))
        best = None
        for jj in (np.clip(mode, a0, b), np.clip(mode + 1.0, a0, b)):
            v = _log_comb(a, jj) + jj * lx
            best = v if best is None else np.maximum(best, v)
        base = c * a0 * (a0 - 1.0) / 2.0 - a0 * kappa + c / 2.0
        return np.log(b - a0 + 1.0) + _LOG8 + base + best

    def log_B_cached(self, si, m):
        """log B(m) for (setting, even m) pairs, memoised per model (sorted-key cache)."""
        keys = si.astype(np.int64) * (1 << 34) + (m // 2).astype(np.int64)
        uniq, inv = np.unique(keys, return_inverse=True)
        pos = np.searchsorted(self._bkeys, uniq)
        hit = pos < self._bkeys.size
        hit[hit] = self._bkeys[pos[hit]] == uniq[hit]
        vals = np.empty(uniq.size)
        vals[hit] = self._bvals[pos[hit]]
        miss = ~hit
        if np.any(miss):
            mk = uniq[miss]
            vals[miss] = _log_B(2.0 * (mk % (1 << 34)), self.c[mk // (1 << 34)])
            allk = np.concatenate([self._bkeys, mk])
            allv = np.concatenate([self._bvals, vals[miss]])
            order = np.argsort(allk, kind="stable")
            self._bkeys, self._bvals = allk[order], allv[order]
        return vals[inv.ravel()]

    def log_terms(self, si, a, j):
        """Exact log(q^j C(a,j) w_j) for j >= 3 (flat arrays)."""
        c = self.c[si]
        lb1 = self.log_B_cached(si, 2.0 * np.floor(j / 2.0))
        lb2 = self.log_B_cached(si, 2.0 * np.ceil(j / 2.0))
        lw = _LOG4 + 0.5 * (lb1 + lb2)
        if self.tight:
            lw = np.minimum(lw, _LOG2 + c * j * (j - 1.0) / 2.0)
        return _log_comb(a, j) + j * self.lq[si] + lw

    def log_a_exact(self, si, a):
        """log A(a) to < 1e-30 relative."""
        return np.logaddexp(0.0, self.log_x_exact(si, a)[0])

    def log_x_exact(self, si, a):
        """log(A(a) - 1) to < 1e-30 relative (head exact, tail blocks summed when needed).

        Also returns the log of ``sum_j j * term_j`` over the summed terms (for the bounds of
        :class:`_Search`).
        """
        si = np.asarray(si, dtype=np.int64)
        a = np.asarray(a, dtype=float)
        total, total_j = self.log_sum_head(si, a)
        need = np.nonzero(a > self.J[si])[0]
        if need.size:
            # Chunk the pairs so that the ragged block / term arrays stay small.
            work = self._block_layout(si[need], a[need])[-1]
            chunk_id = np.cumsum(work) // 200_000
            for cid in np.unique(chunk_id):
                sub = need[chunk_id == cid]
                total[sub], total_j[sub] = self._log_tail_exact(si[sub], a[sub], total[sub], total_j[sub])
        return total, total_j

    def _log_tail_exact(self, si, a, head, head_j):
        """log(head + exactly summed non-negligible tail blocks) for pairs with a > J."""
        lower = np.logaddexp(0.0, np.logaddexp(head, self.log_top_lower(si, a)))
        pair, first, last = self.blocks(si, a)
        if not pair.size:
            return head, head_j
        bound = self.tail_block_bounds(si[pair], a[pair], first, last)
        nblk = np.bincount(pair, minlength=si.size).astype(float)
        flag = bound > lower[pair] + _LOG_BLOCK_NEGLIGIBLE - np.log(nblk[pair])
        if not np.any(flag):
            return head, head_j
        fpair, ff, fl = pair[flag], first[flag], last[flag]
        counts = (fl - ff + 1.0).astype(np.int64)
        out = head.copy()
        out_j = head_j.copy()
        # Sum the flagged blocks in pieces of bounded size.
        piece = np.cumsum(counts) // 2_000_000
        for pid in np.unique(piece):
            sel = piece == pid
            cnt = counts[sel]
            jp = np.repeat(fpair[sel], cnt)
            offs = np.arange(jp.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            jj = np.repeat(ff[sel], cnt) + offs
            t = self.log_terms(si[jp], a[jp], jj)
            # jp is sorted: per-pair reductions over contiguous runs.
            starts = np.flatnonzero(np.r_[True, jp[1:] != jp[:-1]])
            owners = jp[starts]
            tmax = np.maximum.reduceat(t, starts)
            e = np.exp(t - np.repeat(tmax, np.diff(np.r_[starts, jp.size])))
            out[owners] = np.logaddexp(out[owners], tmax + np.log(np.add.reduceat(e, starts)))
            ej = np.add.reduceat(e * jj, starts)
            out_j[owners] = np.logaddexp(out_j[owners], tmax + np.log(ej))
        return out, out_j


# --------------------------------------------------------------------------------------------
# Conversion helpers and the order search
# --------------------------------------------------------------------------------------------


def _conv(a, log_inv_delta, improved: bool):
    """RDP -> DP conversion term at order a (added to the composed RDP)."""
    if improved:
        return np.log1p(-1.0 / a) + (log_inv_delta - np.log(a)) / (a - 1.0)
    return log_inv_delta / (a - 1.0)


def _conv_min(lo, hi, log_inv_delta, improved: bool):
    """A lower bound on the conversion term over all orders a in [lo, hi] (hi may be inf)."""
    if improved:
        with np.errstate(invalid="ignore"):
            num = log_inv_delta - np.log(hi)
            tail = np.where(
                np.isinf(hi),
                -np.log(lo) / (lo - 1.0),  # (L - log a)/(a-1) >= -log(a)/(a-1) >= -log(lo)/(lo-1)
                np.minimum(num / (lo - 1.0), num / (hi - 1.0)),
            )
        return np.log1p(-1.0 / lo) + tail
    return np.where(np.isinf(hi), 0.0, log_inv_delta / (hi - 1.0))


def _scan_grid(limit: float = 2.0**52) -> np.ndarray:
    """Orders 2..16, then ceil(16 * 1.25^k) up to ``limit`` (integers exact in float64)."""
    dense = np.arange(2.0, 17.0)
    k = np.arange(1, int(math.log(limit / 16.0) / math.log(1.25)) + 1)
    geo = np.unique(np.ceil(16.0 * 1.25**k))
    return np.concatenate([dense, geo])


_GRID = _scan_grid()
_SCAN_ROUND = 8  # grid orders evaluated per setting and scan round
_LEAF = 32  # at most this many surviving orders are evaluated directly
_SPLIT = 16  # otherwise an interval is split into this many parts
_SCREEN_SPLIT = 16  # closed-form screen: split factor per round
_SCREEN_LEVELS = 2  # and number of rounds
_ENUM = 64  # intervals with at most this many surviving orders are screened order by order


def _ragged_arange(starts, counts):
    """Concatenation of arange(start, start + count) (floats) and the owner index of each."""
    owner = np.repeat(np.arange(counts.size), counts)
    offs = np.arange(owner.size) - np.repeat(np.cumsum(counts) - counts, counts)
    return owner, starts[owner] + offs


class _Search:
    """Branch-and-bound minimisation of ``T eps'(a) + conv(a)`` over all integers ``a >= 2``.

    Lower bounds used to discard orders without evaluating them (``lo`` an evaluated order,
    ``X_lo`` a lower bound on ``A(lo) - 1``, every ``a`` in ``[lo, hi]``):

    * monotonicity: ``eps'(a) >= eps'(lo)``;
    * growth: every term has ``C(a, j) >= C(lo, j) a (a-1) / (lo (lo-1))`` for ``j >= 2`` (each
      factor ``(a-i)/(lo-i)`` of the ratio is >= 1 and the first two give the j = 2 ratio), hence
      ``A(a) - 1 >= X_lo a (a-1) / (lo (lo-1))`` -- nearly exact wherever the j = 2 term dominates;
    * Jensen: ``A(a) - 1 >= X_lo rho^{jbar/2}``, ``rho = a (a-1) / (lo (lo-1))``
      (:meth:`_jensen_lx`) -- the right slope when many j contribute (large ``A``, small ``T``);
    * the conversion term is bounded below on the interval (:func:`_conv_min`).

    Over a segment the growth and Jensen bounds are used to second order
    (:func:`_two_tangent_lb` with a proven lower bound on the curvature), so the surviving orders
    shrink quickly around the optimum. Orders tied with the incumbent to 1e-12 relative are not
    pursued.
    """

    def __init__(self, model: _Model, T, log_inv_delta, improved: bool):
        self.m = model
        n = model.c.size
        self.T = np.broadcast_to(np.asarray(T, dtype=float), (n,)).copy()
        self.L = np.broadcast_to(np.asarray(log_inv_delta, dtype=float), (n,)).copy()
        self.improved = improved
        self.best = np.full(n, np.inf)  # exact objective value at best_a (an upper bound)
        self.best_a = np.full(n, 2.0)
        self._si: list[np.ndarray] = []
        self._a: list[np.ndarray] = []
        self._f: list[np.ndarray] = []
        self._done: list[np.ndarray] = []

    # -- objective ----------------------------------------------------------------------------
    def _te(self, si, log_x, a):
        """T eps'(a) from log(A - 1) (with the Gaussian cap for the tight bound)."""
        rdp = np.logaddexp(0.0, log_x) / (a - 1.0)
        if self.m.tight:
            rdp = np.minimum(rdp, a * self.m.c[si] / 2.0)
        return self.T[si] * rdp

    def lower(self, si, a):
        """Evaluate lower bounds at pairs; returns T eps'_lower, log X_lower, log sum j term.

        The best new point of each setting is also evaluated exactly when it may beat the
        incumbent; its exact values replace the bounds (they are bounds too, and better ones).
        """
        lx, ljx = self.m.log_x_lower(si, a)
        te = self._te(si, lx, a)
        f = te + _conv(a, self.L[si], self.improved)
        done = np.zeros(si.size, dtype=bool)
        if si.size:
            idx = _argbest_per_setting(si, f)
            idx = idx[f[idx] < self.best[si[idx]]]
            if idx.size:
                lx[idx], ljx[idx] = self.m.log_x_exact(si[idx], a[idx])
                te[idx] = self._te(si[idx], lx[idx], a[idx])
                f[idx] = te[idx] + _conv(a[idx], self.L[si[idx]], self.improved)
                self._update(si[idx], a[idx], f[idx])
                done[idx] = True
        self._si.append(si)
        self._a.append(a)
        self._f.append(f)
        self._done.append(done)
        return te, lx, ljx

    def _update(self, si, a, f):
        """Record exact objective values (f at orders a) as incumbents where they improve."""
        idx = _argbest_per_setting(si, f)
        s1, f1, a1 = si[idx], f[idx], a[idx]
        better = f1 < self.best[s1]
        self.best[s1[better]] = f1[better]
        self.best_a[s1[better]] = a1[better]

    def _threshold(self, si):
        """Orders whose lower bound is not below this cannot beat the incumbent (1e-12 slack)."""
        b = self.best[si]
        return b - 1e-12 * np.abs(b)

    def _growth_te(self, si, lo, lx_lo, a_num, a_den):
        """T * (growth lower bound on eps') with numerator order a_num and denominator a_den."""
        scale = np.log(a_num * (a_num - 1.0)) - np.log(lo * (lo - 1.0))
        rdp = np.logaddexp(0.0, lx_lo + scale) / (a_den - 1.0)
        if self.m.tight:
            rdp = np.minimum(rdp, a_num * self.m.c[si] / 2.0)
        return self.T[si] * rdp

    def _growth_te_segment(self, si, lo, lx_lo, a, b):
        """T * (lower bound on eps' over all orders in [a, b]) from the growth bound at lo.

        ``phi(x) = log(1 + y(x)) / (x - 1)``, ``y(x) = X_lo x (x-1) / (lo (lo-1))``, is
        non-decreasing wherever ``y <= 1`` (``phi' >= 0`` iff ``y (2 - 1/x) / (1 + y) >=
        log(1 + y)``, true for ``x >= 2``, ``y <= 1``), so its minimum over the segment is at ``a``;
        otherwise take the numerator at ``a`` and the denominator at ``b``.
        """
        y_b = lx_lo + np.log(b * (b - 1.0)) - np.log(lo * (lo - 1.0))
        den = np.where(y_b <= 0.0, a, b)
        return self._growth_te(si, lo, lx_lo, a, den)

    def _h_and_slope(self, si, log_r, x):
        """h(x) = T phi(x) + conv(x) and h'(x) (phi from the growth bound, log r = log y/(x(x-1)))."""
        u = x - 1.0
        y = np.exp(log_r + np.log(x * u))
        ell = np.log1p(y)
        r = np.exp(log_r)
        T = self.T[si]
        L = self.L[si]
        h = T * ell / u + _conv(x, L, self.improved)
        dphi = r * (2.0 * x - 1.0) / ((1.0 + y) * u) - ell / (u * u)
        dconv = -(L - np.log(x)) / (u * u) if self.improved else -L / (u * u)
        return h, T * dphi + dconv

    def _segment_lb(self, si, lo, lx_lo, te_lo, a, b):
        """Lower bound on the objective over the orders of [a, b] (lo < a <= b).

        Two valid bounds, the larger is returned:
        (1) ``max(T eps'(lo), T phi_segment) + min conv`` (monotone and growth bounds);
        (2) a second-order bound on ``h = T phi + conv`` (a lower bound on the objective when the
            tight bound's Gaussian cap cannot bind on the segment). With ``u = x - 1`` and
            ``log(1+y) >= y - y^2/2``: ``phi'' >= -(r^2/u) (3u^2 + 2u + 2y (u+1)^2)``, increasing
            in ``x``; ``conv'' = 2L/u^3`` (classic) or ``1/(x u^2) + 2 (L - log x)/u^3``
            (improved). So ``h'' >= -K`` on the segment and ``h + K (x - mid)^2 / 2`` is convex:
            it lies above its tangents at both ends, whose crossing bounds it below.
        """
        base = np.maximum(te_lo, self._growth_te_segment(si, lo, lx_lo, a, b))
        base = base + _conv_min(a, b, self.L[si], self.improved)
        log_r = lx_lo - np.log(lo * (lo - 1.0))
        ok = (b > a) & (log_r + np.log(b * (b - 1.0)) <= 0.0)  # y(b) <= 1: no overflow, phi' >= 0
        if self.m.tight:
            # The cap a c / 2 must stay above phi on the segment (phi(b) <= y(b) / (b - 1)).
            ok &= log_r + np.log(b) <= np.log(a * self.m.c[si] / 2.0)
        if not np.any(ok):
            return base
        k = np.nonzero(ok)[0]
        s_, lr, aa, bb = si[k], log_r[k], a[k], b[k]
        w = bb - aa
        ub = bb - 1.0
        y_b = np.exp(lr + np.log(bb * ub))
        k_phi = np.exp(2.0 * lr) / ub * (3.0 * ub * ub + 2.0 * ub + 2.0 * y_b * bb * bb)
        kk = np.maximum(0.0, self.T[s_] * k_phi - self._conv2_min(s_, aa, bb))
        ha, da = self._h_and_slope(s_, lr, aa)
        hb, db = self._h_and_slope(s_, lr, bb)
        lb2 = _two_tangent_lb(ha, da, hb, db, w, kk)
        out = base.copy()
        out[k] = np.maximum(base[k], lb2)
        return out

    def _conv2_min(self, si, a, b):
        """Lower bound on the second derivative of the conversion term over [a, b]."""
        L = self.L[si]
        ub = b - 1.0
        if self.improved:
            num = L - np.log(b)
            return 1.0 / (b * ub * ub) + 2.0 * np.minimum(num / ub**3, num / (a - 1.0) ** 3)
        return 2.0 * L / ub**3

    def _jensen_lx(self, lo, lx_lo, lj_lo, x):
        """Lower bound on log(A(x) - 1) for x >= lo: ``log X_lo + (jbar/2) log(rho)``.

        ``C(x, j) / C(lo, j) = prod_{i<j} (x-i)/(lo-i)`` has increasing factors, so it is at
        least ``rho^{j/2}``, ``rho = x (x-1) / (lo (lo-1))``; Jensen's inequality over the terms
        summed at ``lo`` (weights ``term_j / X_lo``, mean ``jbar``) gives the bound. Its slope in
        ``log x`` is right at ``lo``, which is what matters when ``A`` is large (small ``T``).
        """
        jbar = np.exp(lj_lo - lx_lo)
        return lx_lo + 0.5 * jbar * (np.log(x * (x - 1.0)) - np.log(lo * (lo - 1.0)))

    def _jensen_te(self, si, lo, lx_lo, lj_lo, x):
        lx = self._jensen_lx(lo, lx_lo, lj_lo, x)
        rdp = np.logaddexp(0.0, lx) / (x - 1.0)
        if self.m.tight:
            rdp = np.minimum(rdp, x * self.m.c[si] / 2.0)
        return self.T[si] * rdp

    def _jensen_segment_lb(self, si, lo, lx_lo, lj_lo, a, b):
        """Second-order lower bound on the objective over [a, b] from the Jensen bound at lo.

        ``h = T sp(l(x))/(x-1) + conv(x)``, ``sp(l) = log(1 + e^l)``, ``l`` from
        :meth:`_jensen_lx`. With ``u = x - 1``, ``l' = (jbar/2)(1/x + 1/u) > 0``,
        ``l'' = -(jbar/2)(1/x^2 + 1/u^2)`` and ``s = sigmoid(l)`` (increasing in x):
        ``h'' = T (sp''/u - 2 s l'/u^2 + 2 sp/u^3) + conv''`` with ``sp'' >= s l''``; bounding each
        piece by its worst value on the segment gives ``h'' >= -K`` and :func:`_two_tangent_lb`.
        """
        out = np.full(si.size, -np.inf)
        ok = b > a
        l_a = self._jensen_lx(lo, lx_lo, lj_lo, a)
        l_b = self._jensen_lx(lo, lx_lo, lj_lo, b)
        if self.m.tight:
            # The cap x c / 2 must stay above sp(l)/(x-1) on the segment.
            ok &= a * self.m.c[si] / 2.0 >= np.logaddexp(0.0, l_b) / (a - 1.0)
        if not np.any(ok):
            return out
        k = np.nonzero(ok)[0]
        s_, aa, bb, la, lb_ = si[k], a[k], b[k], l_a[k], l_b[k]
        jh = 0.5 * np.exp(lj_lo[k] - lx_lo[k])
        T = self.T[s_]
        L = self.L[s_]
        ua, ub = aa - 1.0, bb - 1.0
        sig_b = np.exp(-np.logaddexp(0.0, -lb_))
        a1 = -sig_b * jh * (1.0 / aa**2 + 1.0 / ua**2) / ua
        a2 = -2.0 * sig_b * jh * (1.0 / aa + 1.0 / ua) / ua**2
        a3 = 2.0 * np.logaddexp(0.0, la) / ub**3
        kk = np.maximum(0.0, -(T * (a1 + a2 + a3) + self._conv2_min(s_, aa, bb)))

        def h_and_slope(x, ell, u):
            sp = np.logaddexp(0.0, ell)
            sig = np.exp(-np.logaddexp(0.0, -ell))
            dconv = -(L - np.log(x)) / (u * u) if self.improved else -L / (u * u)
            h = T * sp / u + _conv(x, L, self.improved)
            return h, T * (sig * jh * (1.0 / x + 1.0 / u) / u - sp / (u * u)) + dconv

        ha, da = h_and_slope(aa, la, ua)
        hb, db = h_and_slope(bb, lb_, ub)
        out[k] = _two_tangent_lb(ha, da, hb, db, bb - aa, kk)
        return out

    # -- driver -------------------------------------------------------------------------------
    def run(self):
        n = self.m.c.size
        ptr = np.zeros(n, dtype=np.int64)
        te_max = np.zeros(n)
        active = np.arange(n)
        parts = []
        while active.size:
            idx = ptr[active][:, None] + np.arange(_SCAN_ROUND)[None, :]
            si = np.repeat(active, _SCAN_ROUND)
            a = _GRID[idx.ravel()]
            te, lx, lj = self.lower(si, a)
            parts.append((si, a, te, lx, lj))
            ptr[active] += _SCAN_ROUND
            te_max[active] = np.maximum(te_max[active], te.reshape(-1, _SCAN_ROUND).max(axis=1))
            a_last = a.reshape(-1, _SCAN_ROUND)[:, -1]
            never = np.full(active.size, np.inf)
            # eps' is non-decreasing, so no order beyond a_last can beat the incumbent once
            lb_rest = te_max[active] + _conv_min(a_last, never, self.L[active], self.improved)
            stop = lb_rest >= self.best[active]
            if np.any(~stop & (ptr[active] + _SCAN_ROUND >= _GRID.size)):
                raise ValueError("the optimal Renyi order exceeds 2^52; parameters out of range")
            active = active[~stop]
        si, a, te, lx, lj = (np.concatenate(x) for x in zip(*parts, strict=True))
        order = np.lexsort((a, si))
        si, a, te, lx, lj = si[order], a[order], te[order], lx[order], lj[order]
        te = _group_cummax(si, te)  # eps' is non-decreasing: any bound at a smaller order holds
        same = si[1:] == si[:-1]
        left = np.r_[same, False]
        self._refine(si[left], a[left], a[1:][same], te[left], lx[left], lj[left])
        self._final_check()
        return np.maximum(self.best, 0.0), self.best_a.astype(np.int64)

    def _refine(self, si, lo, hi, te_lo, lx_lo, lj_lo):
        """Resolve every order strictly inside the intervals (lo, hi) (lo evaluated).

        Each round screens the intervals with closed-form bounds (no j-sums). An interval whose
        surviving orders are few has them evaluated; otherwise _SPLIT - 1 points spread over its
        surviving orders are evaluated, which tightens the growth bound of the pieces.
        """
        while si.size:
            own, a, b = self._screen(si, lo, hi, te_lo, lx_lo, lj_lo)
            if not own.size:
                return
            width = b - a + 1.0
            total = np.bincount(own, weights=width, minlength=si.size)
            small = total[own] <= _ENUM
            new_ids, new_pts = [], []
            if np.any(small):
                # Order-by-order screen of small intervals.
                o2, x = _ragged_arange(a[small], width[small].astype(np.int64))
                k = own[small][o2]
                sk = si[k]
                h = np.maximum(te_lo[k], self._growth_te(sk, lo[k], lx_lo[k], x, x))
                h = np.maximum(h, self._jensen_te(sk, lo[k], lx_lo[k], lj_lo[k], x))
                alive = h + _conv(x, self.L[sk], self.improved) < self._threshold(sk)
                k, x = k[alive], x[alive]
                n_alive = np.bincount(k, minlength=si.size)
                leaf = n_alive[k] <= _LEAF
                if np.any(leaf):
                    self.lower(si[k[leaf]], x[leaf])
                if np.any(~leaf):
                    kb, xb = k[~leaf], x[~leaf]
                    ids = np.unique(kb)
                    first = np.searchsorted(kb, ids)
                    frac = (np.arange(1, _SPLIT) / _SPLIT)[None, :]
                    pick = first[:, None] + np.floor(n_alive[ids][:, None] * frac).astype(np.int64)
                    new_ids.append(ids)
                    new_pts.append(xb[pick])
            if np.any(~small):
                # Points at width-quantiles of the surviving segments of large intervals.
                ob, ab, wb = own[~small], a[~small], width[~small]
                ids = np.unique(ob)
                cum = np.cumsum(wb)
                start = np.searchsorted(ob, ids)
                base = np.where(start > 0, cum[np.maximum(start - 1, 0)], 0.0)
                frac = (np.arange(1, _SPLIT) / _SPLIT)[None, :]
                target = base[:, None] + np.floor(total[ids][:, None] * frac)  # 0-based rank
                seg = np.searchsorted(cum, target, side="right")
                prev = np.where(seg > 0, cum[np.maximum(seg - 1, 0)], 0.0)
                new_ids.append(ids)
                new_pts.append(ab[seg] + (target - prev))
            if not new_ids:
                return
            kk = np.concatenate(new_ids)
            pts = np.concatenate(new_pts, axis=0)  # (intervals, _SPLIT - 1), sorted rows
            te_p, lx_p, lj_p = self.lower(np.repeat(si[kk], _SPLIT - 1), pts.ravel())
            edges = np.concatenate([lo[kk][:, None], pts, hi[kk][:, None]], axis=1)
            te_e = np.concatenate([te_lo[kk][:, None], te_p.reshape(pts.shape)], axis=1)
            te_e = np.maximum.accumulate(te_e, axis=1)  # monotone: bounds carry to the right
            lx_e = np.concatenate([lx_lo[kk][:, None], lx_p.reshape(pts.shape)], axis=1)
            lj_e = np.concatenate([lj_lo[kk][:, None], lj_p.reshape(pts.shape)], axis=1)
            si = np.repeat(si[kk], _SPLIT)
            lo, hi = edges[:, :-1].ravel(), edges[:, 1:].ravel()
            te_lo, lx_lo, lj_lo = te_e.ravel(), lx_e.ravel(), lj_e.ravel()
            ok = hi - lo >= 2.0  # pieces with no order strictly inside are done
            si, lo, hi = si[ok], lo[ok], hi[ok]
            te_lo, lx_lo, lj_lo = te_lo[ok], lx_lo[ok], lj_lo[ok]

    def _screen(self, si, lo, hi, te_lo, lx_lo, lj_lo):
        """Segments of (lo, hi) not excluded by the closed-form bounds (:meth:`_segment_lb`).

        The whole interval is bounded first; survivors are split _SCREEN_SPLIT-fold for at most
        _SCREEN_LEVELS rounds. Returns (interval index, first order, last order) per surviving
        segment, sorted by interval and position.
        """
        own = np.arange(si.size)
        a, b = lo + 1.0, hi - 1.0
        keep = b >= a
        own, a, b = own[keep], a[keep], b[keep]
        for level in range(_SCREEN_LEVELS + 1):
            if level:
                wide = b - a + 1.0 > _SCREEN_SPLIT
                frac = np.arange(_SCREEN_SPLIT + 1) / _SCREEN_SPLIT
                edges = np.floor(a[wide][:, None] + (b[wide] - a[wide] + 1.0)[:, None] * frac)
                own = np.concatenate([own[~wide], np.repeat(own[wide], _SCREEN_SPLIT)])
                a = np.concatenate([a[~wide], edges[:, :-1].ravel()])
                b = np.concatenate([b[~wide], edges[:, 1:].ravel() - 1.0])
                ok = b >= a
                own, a, b = own[ok], a[ok], b[ok]
            s_ = si[own]
            lb = self._segment_lb(s_, lo[own], lx_lo[own], te_lo[own], a, b)
            lb = np.maximum(lb, self._jensen_segment_lb(s_, lo[own], lx_lo[own], lj_lo[own], a, b))
            keep = lb < self._threshold(s_)
            own, a, b = own[keep], a[keep], b[keep]
            if not own.size or np.all(b - a + 1.0 <= _SCREEN_SPLIT):
                break
        order = np.lexsort((a, own))
        return own[order], a[order], b[order]

    def _final_check(self):
        """Exact evaluation of any evaluated order whose lower bound still beats the incumbent."""
        si = np.concatenate(self._si)
        a = np.concatenate(self._a)
        f = np.concatenate(self._f)
        done = np.concatenate(self._done)
        for batch in range(64):
            cand = (f < self._threshold(si)) & ~done
            if not np.any(cand):
                return
            # Lowest bounds first, a growing number per setting per round.
            order = np.lexsort((f[cand], si[cand]))
            ci = np.nonzero(cand)[0][order]
            rank = np.arange(ci.size) - np.searchsorted(si[ci], si[ci])
            ci = ci[rank < 8 * 2**batch]
            fe = self._te(si[ci], self.m.log_x_exact(si[ci], a[ci])[0], a[ci])
            f = f.copy()
            f[ci] = fe + _conv(a[ci], self.L[si[ci]], self.improved)
            done[ci] = True
            self._update(si[ci], a[ci], f[ci])
        raise RuntimeError("order search did not converge")  # pragma: no cover


def _two_tangent_lb(ha, da, hb, db, w, K):
    """Lower bound on min over [0, w] of h, given h(0), h'(0), h(w), h'(w) and h'' >= -K.

    ``g = h + K (x - w/2)^2 / 2`` is convex, so it lies above its tangents at both ends; the
    minimum of their maximum is at their crossing (or at an end), and
    ``h >= g - K w^2 / 8``.
    """
    lift = K * w * w / 8.0
    ga, gb = ha + lift, hb + lift
    da, db = da - K * w / 2.0, db + K * w / 2.0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = np.clip((gb - ga - db * w) / (da - db), 0.0, w)
        lb = np.where(da >= 0.0, ga, np.where(db <= 0.0, gb, ga + da * t)) - lift
    return np.where(np.isfinite(lb), lb, -np.inf)


def _group_cummax(group, x):
    """Running maximum of x within runs of equal (sorted) group labels."""
    rank = np.empty(x.size, dtype=np.int64)
    order = np.argsort(x, kind="stable")
    rank[order] = np.arange(x.size)
    offset = group.astype(np.int64) * (x.size + 1)
    return x[order][np.maximum.accumulate(rank + offset) - offset]


def _argbest_per_setting(si, f):
    """Index of the smallest f within each setting (one index per distinct si)."""
    order = np.lexsort((f, si))
    first = np.ones(order.size, dtype=bool)
    first[1:] = si[order][1:] != si[order][:-1]
    return order[first]


def _search(q, c, T, log_inv_delta, bound: str, alpha_ref=None):
    q = np.asarray(q, dtype=float)
    c = np.asarray(c, dtype=float)
    L = np.broadcast_to(np.asarray(log_inv_delta, dtype=float), q.shape)
    if alpha_ref is None:
        # Where the optimum is expected: the small-c balance T q^2 a w2 / 2 = L / a, or the cliff
        # a ~ 2 log(1/q) / c where the top terms q^a e^{c a^2/2} take over. Only used to size the
        # exact head of the j-sum; correctness never depends on it.
        log_smooth = 0.5 * (math.log(2.0) + np.log(L) - np.log(T) - 2.0 * np.log(q) - _log_w2(c))
        smooth = np.exp(np.minimum(log_smooth, 40.0))
        with np.errstate(divide="ignore"):
            cliff = np.where(q < 1.0, 2.0 * np.log(1.0 / q) / c + 2.0, np.inf)
        alpha_ref = np.clip(2.0 * np.minimum(smooth, cliff), 8.0, 1e9)
    model = _Model(q, c, bound == "tight", alpha_ref)
    return _Search(model, T, L, bound == "tight").run()


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RDPEpsilon:
    """Result of :func:`dpmix_epsilon`.

    Attributes
    ----------
    epsilon
        Total ``(epsilon, delta)``-DP epsilon of the ``T`` mixtures (replace-one neighbours),
        a float, or an array with the broadcast shape of ``sigma_x``, ``sigma_y`` and ``ell``.
    alpha
        The optimal integer Rényi order ``alpha*`` (int or int array, same shape).
    delta
        The delta the epsilon holds for.
    bound
        ``"paper"`` or ``"tight"``: which per-mixture RDP bound and conversion were used.
    """

    epsilon: float | np.ndarray
    alpha: int | np.ndarray
    delta: float
    bound: str


def gaussian_rdp(alpha, noise_multiplier):
    """RDP of the Gaussian mechanism: ``alpha / (2 noise_multiplier^2)`` (Mironov 2017, Prop. 7).

    Parameters
    ----------
    alpha
        Rényi order(s), ``>= 1`` (real; array-like allowed).
    noise_multiplier
        Noise standard deviation divided by the L2 sensitivity, ``> 0`` (array-like allowed).

    Returns
    -------
    numpy.ndarray or float
        The RDP epsilon at each order (broadcast shape; a float for scalar inputs).

    Raises
    ------
    ValueError
        If ``alpha < 1`` or ``noise_multiplier <= 0`` (or either is not finite).
    """
    a = np.asarray(alpha, dtype=float)
    nm = np.asarray(noise_multiplier, dtype=float)
    if not np.all(np.isfinite(a)) or np.any(a < 1.0):
        raise ValueError(f"alpha must be finite and >= 1, got {alpha!r}")
    if not np.all(np.isfinite(nm)) or np.any(nm <= 0.0):
        raise ValueError(f"noise_multiplier must be finite and > 0, got {noise_multiplier!r}")
    out = a / (2.0 * nm * nm)
    return float(out) if out.ndim == 0 else out


def rdp_to_dp(rdp, alpha, delta, conversion="improved"):
    """Convert RDP guarantees at several orders into one ``(epsilon, delta)``-DP guarantee.

    Parameters
    ----------
    rdp
        RDP epsilon of the whole (composed) mechanism at each order, ``>= 0``.
    alpha
        The orders, ``> 1``, same length as ``rdp``.
    delta
        Target delta in ``(0, 1)``.
    conversion
        ``"improved"`` (Canonne, Kamath & Steinke 2020, Prop. 12):
        ``eps = rdp + log1p(-1/alpha) - log(delta * alpha) / (alpha - 1)``; or ``"classic"``
        (Mironov 2017, Prop. 3): ``eps = rdp + log(1/delta) / (alpha - 1)``.

    Returns
    -------
    (epsilon, alpha_star)
        The smallest epsilon over the given orders (clamped at 0: a negative value still
        certifies ``(0, delta)``-DP) and the order attaining it.

    Raises
    ------
    ValueError
        For mismatched or empty inputs, ``alpha <= 1``, negative or NaN ``rdp``, ``delta``
        outside ``(0, 1)`` or an unknown ``conversion``.
    """
    if conversion not in _CONVERSIONS:
        raise ValueError(f"conversion must be one of {_CONVERSIONS}, got {conversion!r}")
    d = _check_delta(delta)
    r = np.atleast_1d(np.asarray(rdp, dtype=float))
    a = np.atleast_1d(np.asarray(alpha, dtype=float))
    if r.shape != a.shape or r.ndim != 1 or r.size == 0:
        raise ValueError("rdp and alpha must be non-empty 1-d sequences of the same length")
    if np.any(np.isnan(r)) or np.any(r < 0.0):
        raise ValueError("rdp must be >= 0 (and not NaN)")
    if not np.all(np.isfinite(a)) or np.any(a <= 1.0):
        raise ValueError("alpha must be finite and > 1")
    eps = r + _conv(a, math.log(1.0 / d), conversion == "improved")
    k = int(np.argmin(eps))
    a_star = a[k]
    return max(0.0, float(eps[k])), (int(a_star) if float(a_star).is_integer() else float(a_star))


def _common(sigma_x, sigma_y, ell, n, d_x, d_y):
    """Validate the DPMix parameters; return broadcast (q, c) arrays and the shape."""
    n = _as_int("n", n, 1)
    d_x = _as_int("d_x", d_x, 1)
    d_y = _as_int("d_y", d_y, 0)
    sx = _positive_array("sigma_x", sigma_x)
    if sigma_y is None:
        if d_y:
            raise ValueError("sigma_y is required when d_y > 0")
        sy = np.ones(())
    else:
        sy = _positive_array("sigma_y", sigma_y)
    ell_a = _ell_array(ell, n)
    try:
        sx, sy, ell_a = np.broadcast_arrays(sx, sy, ell_a)
    except ValueError:
        raise ValueError("sigma_x, sigma_y and ell must broadcast to a common shape") from None
    d2 = d_x / sx**2 + (d_y / sy**2 if d_y else 0.0)
    return ell_a / n, d2 / ell_a**2, sx.shape


def dpmix_rdp(alpha, *, sigma_x, sigma_y, ell, n, d_x, d_y, bound="tight") -> np.ndarray:
    """Per-mixture RDP ``eps'(alpha)`` of DPMix at integer orders, for one setting.

    One mixture averages ``ell`` of the ``n`` rows drawn without replacement and adds Gaussian
    noise; under replace-one neighbours it is the WOR-subsampled Gaussian mechanism with
    sampling rate ``q = ell / n`` and noise multiplier ``ell / sqrt(D2)``,
    ``D2 = d_x / sigma_x^2 + d_y / sigma_y^2``. ``T`` mixtures have RDP ``T * eps'(alpha)``.
    See the module docstring for the formulas (paper Theorem 1; Wang, Balle & Kasiviswanathan
    2019, Theorems 9 and 27) and the numerics; values are exact to ~1e-13 relative.

    Parameters
    ----------
    alpha
        Integer order(s) ``>= 2`` (array-like of any shape).
    sigma_x, sigma_y
        Noise standard deviations on the ``d_x`` features / ``d_y`` labels (``> 0``; data in
        ``[0, 1]``). ``sigma_y`` may be ``None`` when ``d_y == 0``.
    ell
        Rows per mixture, an integer with ``1 <= ell <= n`` (``ell = n`` means ``q = 1``).
    n
        Number of private rows (public), ``>= 1``.
    d_x, d_y
        Feature and label dimensions, ``d_x >= 1``, ``d_y >= 0`` (0: no labels).
    bound
        ``"tight"`` (default) or ``"paper"``.

    Returns
    -------
    numpy.ndarray
        ``eps'(alpha)`` (nats), same shape as ``alpha``.

    Raises
    ------
    ValueError
        Non-integer or ``< 2`` orders; ``sigma <= 0``; ``ell`` not an integer in ``[1, n]``;
        ``n < 1``; ``d_x < 1``; ``d_y < 0``; array-valued ``sigma``/``ell``; unknown ``bound``.
    """
    _check_bound(bound)
    q, c, shape = _common(sigma_x, sigma_y, ell, n, d_x, d_y)
    if shape != ():
        raise ValueError("dpmix_rdp takes one setting: sigma_x, sigma_y and ell must be scalars")
    try:
        a = np.asarray(alpha, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"alpha must be integer orders >= 2, got {alpha!r}") from None
    if (
        a.size == 0
        or not np.all(np.isfinite(a))
        or np.any(a != np.round(a))
        or np.any(a < 2)
        or np.any(a > 2.0**52)
    ):
        raise ValueError(f"alpha must be integer orders >= 2, got {alpha!r}")
    flat = a.ravel()
    model = _Model(q.reshape(1), c.reshape(1), bound == "tight", np.array([flat.max()]))
    log_a = model.log_a_exact(np.zeros(flat.size, dtype=np.int64), flat)
    rdp = log_a / (flat - 1.0)
    if bound == "tight":
        rdp = np.minimum(rdp, flat * c.reshape(1) / 2.0)
    return rdp.reshape(a.shape)


def dpmix_epsilon(*, sigma_x, sigma_y, ell, n, n_mixtures, d_x, d_y, delta, bound="tight") -> RDPEpsilon:
    """Total ``(epsilon, delta)``-DP of ``n_mixtures`` DPMix mixtures (replace-one neighbours).

    ``epsilon = min over integer alpha >= 2 of T eps'(alpha) + conv(alpha)`` with the classic
    conversion for ``bound="paper"`` (exactly the paper's Theorem 1) and the improved one of
    Canonne, Kamath & Steinke 2020 (Prop. 12) for ``bound="tight"``; every integer order is
    covered (branch and bound, see the module docstring).

    Parameters
    ----------
    sigma_x, sigma_y, ell
        Scalars or arrays broadcast together (``sigma_y`` may be ``None`` when ``d_y == 0``);
        see :func:`dpmix_rdp`.
    n
        Number of private rows (public), ``>= 1``.
    n_mixtures
        ``T``, the number of released mixtures, ``>= 1``.
    d_x, d_y
        Feature / label dimensions (``d_x >= 1``, ``d_y >= 0``).
    delta
        Target delta in ``(0, 1)``.
    bound
        ``"tight"`` (default) or ``"paper"``.

    Returns
    -------
    RDPEpsilon
        ``epsilon`` and ``alpha`` are scalars for scalar inputs, else arrays of the broadcast
        shape.

    Raises
    ------
    ValueError
        Invalid parameters (see :func:`dpmix_rdp`), ``n_mixtures < 1``, ``delta`` outside
        ``(0, 1)``, or an optimal order beyond ``2**52`` (astronomically small epsilon).
    """
    _check_bound(bound)
    d = _check_delta(delta)
    T = _as_int("n_mixtures", n_mixtures, 1)
    q, c, shape = _common(sigma_x, sigma_y, ell, n, d_x, d_y)
    eps, alpha = _epsilon_flat(q.ravel(), c.ravel(), T, d, bound)
    if shape == ():
        return RDPEpsilon(float(eps[0]), int(alpha[0]), d, bound)
    return RDPEpsilon(eps.reshape(shape), alpha.reshape(shape), d, bound)


def _epsilon_flat(q, c, T, delta, bound):
    key = np.stack([q, c], axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    eps, alpha = _search(uniq[:, 0], uniq[:, 1], float(T), math.log(1.0 / delta), bound)
    inv = inv.ravel()
    return eps[inv], alpha[inv]


def dpmix_calibrate_sigma(*, epsilon, delta, ell, n, n_mixtures, d_x, d_y, ratio=1.0, bound="tight") -> float:
    """Smallest ``sigma_x`` (with ``sigma_y = ratio * sigma_x``) meeting a target ``(eps, delta)``.

    ``epsilon`` of :func:`dpmix_epsilon` is continuous and strictly decreasing in the noise
    level, so the answer is found by bracketing and bisection in ``log sigma`` (several trial
    points per round, placed by regula falsi in ``log epsilon``). The returned sigma satisfies
    ``target * (1 - 1e-6) <= dpmix_epsilon(sigma) <= target``.

    Parameters
    ----------
    epsilon, delta
        Target guarantee: ``epsilon > 0``, ``delta`` in ``(0, 1)``.
    ell, n, n_mixtures, d_x, d_y
        As in :func:`dpmix_epsilon` (``ell`` a scalar here).
    ratio
        ``sigma_y / sigma_x`` (``> 0``; ignored when ``d_y == 0``).
    bound
        ``"tight"`` (default) or ``"paper"``.

    Returns
    -------
    float
        ``sigma_x``.

    Raises
    ------
    ValueError
        Invalid parameters, ``epsilon <= 0``, or a target needing ``sigma_x`` outside
        ``[1e-8, 1e12]``.
    """
    _check_bound(bound)
    d = _check_delta(delta)
    try:
        target = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"epsilon must be a number > 0, got {epsilon!r}") from None
    if not (math.isfinite(target) and target > 0.0):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
    try:
        rt = float(ratio)
    except (TypeError, ValueError):
        raise ValueError(f"ratio must be a number > 0, got {ratio!r}") from None
    if not (math.isfinite(rt) and rt > 0.0):
        raise ValueError(f"ratio must be finite and > 0, got {ratio!r}")
    T = _as_int("n_mixtures", n_mixtures, 1)
    q, c1, shape = _common(1.0, rt, ell, n, d_x, d_y)  # c at sigma_x = 1
    if shape != ():
        raise ValueError("ell must be a scalar")
    q = float(q)
    c1 = float(c1)
    L = math.log(1.0 / d)

    def eps_at(log_sigma):
        ls = np.atleast_1d(np.asarray(log_sigma, dtype=float))
        cs = c1 * np.exp(-2.0 * ls)
        e, _ = _search(np.full(ls.size, q), cs, float(T), L, bound)
        return e

    lo_lim, hi_lim = math.log(1e-8), math.log(1e12)
    # Starting guess: epsilon ~ max(2 sqrt(2 T q^2 c L), L c / (2 log(1/q))), from the small-c
    # balance T q^2 a w2 / 2 = L / a and from the cliff at a ~ 2 log(1/q) / c.
    c0 = target**2 / (8.0 * T * q * q * L)
    if q < 1.0:
        c0 = min(c0, 2.0 * target * math.log(1.0 / q) / L)
    if not c0 > 0.0:  # epsilon so small that the starting guess underflows
        raise ValueError(f"epsilon = {target:g} needs sigma_x > 1e12 (an infinite noise scale in "
                         "practice); use a larger epsilon")
    x0 = float(np.clip(0.5 * math.log(c1 / c0), lo_lim + 3.0, hi_lim - 3.0))
    xs = np.clip(x0 + np.array([-1.0, -0.3, -0.1, 0.0, 0.1, 0.3, 1.0]), lo_lim, hi_lim)
    es = eps_at(xs)
    for _ in range(40):
        feasible = es <= target
        if feasible.any() and (~feasible).any():
            break
        if feasible.all():
            if xs.min() <= lo_lim:
                return math.exp(lo_lim)  # even sigma = 1e-8 meets the target
            nx = np.maximum(xs.min() - np.array([1.0, 3.0, 9.0]), lo_lim)
        else:
            if xs.max() >= hi_lim:
                raise ValueError("target epsilon needs sigma_x > 1e12; it is out of range")
            nx = np.minimum(xs.max() + np.array([1.0, 3.0, 9.0]), hi_lim)
        xs = np.concatenate([xs, nx])
        es = np.concatenate([es, eps_at(nx)])
    feasible = es <= target
    x_hi = xs[feasible].min()  # smallest feasible log sigma
    e_hi = es[feasible][np.argmin(xs[feasible])]
    infeasible = xs < x_hi
    x_lo = xs[infeasible].max()
    e_lo = es[infeasible][np.argmax(xs[infeasible])]
    log_t = math.log(target)
    weight_lo = weight_hi = 1.0  # Illinois weights on the residuals of stale bracket ends
    for it in range(60):
        if e_hi >= target * (1.0 - 1e-6) or x_hi - x_lo < 1e-15:
            break
        w = x_hi - x_lo
        if it == 0 and e_lo > 2.0 * e_hi:
            # The bracket may straddle the cliff where epsilon changes by orders of magnitude:
            # sample it evenly once before interpolating.
            trial = x_lo + w * np.arange(1, 9) / 9.0
        else:
            # Regula falsi (Illinois variant) in (log sigma, log eps), plus points spread
            # geometrically towards both ends of the bracket: epsilon is piecewise smooth, with
            # kinks where the optimal order changes, and one-sided interpolation would crawl.
            r_lo = weight_lo * (math.log(e_lo) - log_t)  # > 0
            r_hi = weight_hi * (log_t - math.log(max(e_hi, 1e-300)))  # >= 0
            xf = x_lo + w * min(max(r_lo / (r_lo + r_hi), 1e-3), 1.0 - 1e-3)
            steps = np.array([1e-3, 4e-3, 1.6e-2, 6.4e-2, 0.2, 0.5])
            trial = np.concatenate([[xf], xf + (x_hi - xf) * steps, xf - (xf - x_lo) * steps])
            trial = np.unique(trial)
        et = eps_at(trial)
        moved_lo = moved_hi = False
        ok = et <= target
        if ok.any():
            k = np.argmin(np.where(ok, trial, np.inf))
            if trial[k] < x_hi:
                x_hi, e_hi, moved_hi = trial[k], et[k], True
        bad = trial < x_hi
        if bad.any():
            k = np.argmax(np.where(bad, trial, -np.inf))
            if trial[k] > x_lo:
                x_lo, e_lo, moved_lo = trial[k], et[k], True
        weight_lo = 1.0 if moved_lo else weight_lo * 0.5
        weight_hi = 1.0 if moved_hi else weight_hi * 0.5
    return float(math.exp(x_hi))


# --------------------------------------------------------------------------------------------
# zCDP (Gaussian mechanisms composed across statistics)
# --------------------------------------------------------------------------------------------

#: Rényi orders for the zCDP -> (epsilon, delta) conversion: 1 + 10^-4 ... 1 + 10^6, log-spaced
#: (the optimum ``alpha ~ 1 + sqrt(log(1/delta)/rho)`` lies inside for every useful rho)
_ZCDP_ORDERS = 1.0 + np.geomspace(1e-4, 1e6, 6001)


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Epsilon of a ``rho``-zCDP mechanism at ``delta``.

    rho-zCDP is ``(alpha, alpha rho)``-RDP for every ``alpha > 1`` (Bun & Steinke, TCC 2016,
    Def. 1.1); :func:`rdp_to_dp` (improved conversion, Canonne, Kamath & Steinke 2020, Prop. 12)
    minimises over a fine log-spaced grid of orders. The Gaussian mechanism with L2 sensitivity
    ``S2`` and noise ``sigma`` is ``S2^2/(2 sigma^2)``-zCDP and rho's add under composition
    (Bun & Steinke 2016, Prop. 1.6 and Lemma 2.3). ``rho = inf`` gives ``inf``; ``rho = 0`` gives 0.
    """
    r = float(rho)
    if math.isnan(r) or r < 0:
        raise ValueError(f"rho must be >= 0, got {rho!r}")
    if math.isinf(r):
        return math.inf
    if r == 0:
        return 0.0
    return rdp_to_dp(_ZCDP_ORDERS * r, _ZCDP_ORDERS, delta)[0]


def zcdp_rho(epsilon: float, delta: float) -> float:
    """The largest ``rho`` (to 1e-12 relative) whose :func:`zcdp_epsilon` at ``delta`` is
    ``<= epsilon``, by bisection on ``log rho`` (the epsilon is increasing in rho).

    ``epsilon = inf`` gives ``inf`` (NOT PRIVATE). Raises ValueError for ``epsilon <= 0`` or
    ``delta`` outside ``(0, 1)``.
    """
    eps = float(epsilon)
    _check_delta(delta)
    if not eps > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}")
    if math.isinf(eps):
        return math.inf
    lo, hi = -60.0, 12.0
    while zcdp_epsilon(math.exp(hi), delta) <= eps:
        hi += 12.0
    while zcdp_epsilon(math.exp(lo), delta) > eps:
        lo -= 60.0
        if lo < -700.0:
            raise ValueError(f"epsilon = {eps:g}, delta = {delta:g} leave no zCDP budget")
    while hi - lo > 1e-12:
        mid = (lo + hi) / 2
        if zcdp_epsilon(math.exp(mid), delta) <= eps:
            lo = mid
        else:
            hi = mid
    return math.exp(lo)
