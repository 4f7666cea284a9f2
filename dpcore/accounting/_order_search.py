"""Numerics of the subsampled-Gaussian Rényi-DP accountant, part two: the branch-and-bound search
over every integer order (:func:`_search`, :class:`_Search`) of the objective whose terms
:mod:`dpcore.accounting._rdp_terms` computes (``B(m)``, the ``j``-sum with proven truncation).

Private: :mod:`dpcore.accounting.dpmix` is its public face.

Numerics
--------
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

from dpcore.accounting._rdp_terms import _log_w2, _Model
from dpcore.accounting.rdp import _conv, _conv_min

__all__ = []


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
