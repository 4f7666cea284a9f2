"""Numerics of the subsampled-Gaussian Rényi-DP accountant: ``B(m)``, the ``j``-sum of
``eps'(a)`` with proven truncation, and the branch-and-bound search over every integer order.

Private: :mod:`dpcore.accounting.dpmix` is its public face. ``log A(a)`` below is
``log(1 + sum_j q^j C(a,j) w_j)`` of the module docstring of :mod:`dpcore.accounting.dpmix`
(``eps'(a) = log A(a) / (a - 1)``).

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

import numpy as np
from scipy.special import gammaln, log_ndtr

from dpcore.accounting.rdp import _conv, _conv_min

__all__ = []

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

