"""Numerics of the subsampled-Gaussian Rényi-DP accountant, part one: ``B(m)`` and the ``j``-sum of
``eps'(a)`` with proven truncation (:class:`_Model`). The search over every integer order that uses
them is :mod:`dpcore.accounting._order_search`.

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
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, log_ndtr

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
