"""Slow, plain reference for the DPMix RDP accountant (SPEC 6.1), for cross-checking only.

Direct formulas with mpmath for B(m) (exact alternating sum at high precision), an explicit sum
over j for every order, and a scan over every integer order up to a cap.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
from scipy.special import gammaln


def log_B(m: int, c: float, dps: int = 60) -> float:
    if c * (m - 1) > 2.0:
        # dominated by the last term: sum of (-1)^(m-i) C(m,i) e^{(i(i-1) - m(m-1))c/2}, |ratio| small
        i = np.arange(m + 1)
        logt = gammaln(m + 1) - gammaln(i + 1) - gammaln(m - i + 1) + (i * (i - 1) - m * (m - 1)) * c / 2
        sign = np.where((m - i) % 2 == 0, 1.0, -1.0)
        return m * (m - 1) * c / 2 + math.log(float(np.sum(sign * np.exp(logt))))
    extra = int(0.31 * m + 0.5 * m * max(0.0, -math.log10(c)) + m * m * c / 4.6)
    with mpmath.workdps(dps + extra):
        cc = mpmath.mpf(c)
        s = mpmath.fsum((-1) ** i * mpmath.binomial(m, i) * mpmath.exp(i * (i - 1) * cc / 2)
                        for i in range(m + 1))
        return float(mpmath.log(s))


def per_mixture_rdp(alphas: np.ndarray, q: float, c: float, bound: str, jmax: int = 400) -> np.ndarray:
    jmax = int(min(jmax, alphas.max()))
    logB = {m: log_B(m, c) for m in range(2, 2 * ((jmax + 1) // 2) + 2, 2)}
    out = np.empty(alphas.size)
    for idx, a in enumerate(alphas.astype(int)):
        two = math.log(a * (a - 1) / 2) + 2 * math.log(q) + min(math.log(4) + math.log(math.expm1(c)),
                                                                 math.log(2) + c)
        terms = [0.0, two]
        for j in range(3, min(a, jmax) + 1):
            lc = gammaln(a + 1) - gammaln(j + 1) - gammaln(a - j + 1) + j * math.log(q)
            lbb = 0.5 * (logB[2 * (j // 2)] + logB[2 * ((j + 1) // 2)])
            if bound == "paper":
                t = math.log(4) + lbb
            else:
                t = min(math.log(4) + lbb, math.log(2) + (j - 1) * j * c / 2)
            terms.append(lc + t)
        tmax = max(terms)
        out[idx] = (tmax + math.log(sum(math.exp(t - tmax) for t in terms))) / (a - 1)
    return out


def epsilon(sigma: float, ell: int, n: int, T: int, d_x: int, d_y: int, delta: float, bound: str,
            alphas: np.ndarray, jmax: int = 400) -> tuple[float, int]:
    q = ell / n
    c = (d_x / sigma**2 + d_y / sigma**2) / ell**2
    rdp = T * per_mixture_rdp(alphas, q, c, bound, jmax=jmax)
    if bound == "paper":
        eps = rdp + math.log(1 / delta) / (alphas - 1)
    else:
        eps = rdp + np.log1p(-1 / alphas) - np.log(delta * alphas) / (alphas - 1)
    i = int(np.argmin(eps))
    return float(eps[i]), int(alphas[i])
