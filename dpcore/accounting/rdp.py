"""General Rényi differential privacy: the Gaussian mechanism's RDP, the RDP -> (epsilon, delta)
conversion and zero-concentrated DP (zCDP), independent of any mechanism.

* :func:`gaussian_rdp` -- ``alpha / (2 noise_multiplier^2)`` (Mironov 2017, Prop. 7).
* :func:`rdp_conversion_term` -- the term added to a composed RDP at order ``alpha`` to get an
  ``(epsilon, delta)``-DP epsilon: ``log(1/delta) / (alpha - 1)`` (``"classic"``, Mironov 2017,
  Prop. 3) or ``log1p(-1/alpha) - log(delta alpha) / (alpha - 1)`` (``"improved"``, Canonne,
  Kamath & Steinke 2020, Prop. 12). :func:`rdp_to_dp` minimises ``rdp + term`` over given orders.
* :func:`zcdp_epsilon`, :func:`zcdp_rho` -- rho-zCDP is ``(alpha, alpha rho)``-RDP for every
  ``alpha > 1`` (Bun & Steinke, TCC 2016).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from dpcore.validation import check_delta

__all__ = [
    "CONVERSIONS",
    "RDPEpsilon",
    "gaussian_rdp",
    "rdp_conversion_term",
    "rdp_to_dp",
    "zcdp_epsilon",
    "zcdp_rho",
]

#: The RDP -> DP conversions: ``"improved"`` (Canonne, Kamath & Steinke 2020) and ``"classic"``.
CONVERSIONS = ("improved", "classic")


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



def rdp_conversion_term(alpha, delta, conversion="improved"):
    """The RDP -> ``(epsilon, delta)`` conversion term at each order (added to the composed RDP).

    Parameters
    ----------
    alpha
        Rényi order(s) ``> 1`` (array-like).
    delta
        Target delta in ``(0, 1)``.
    conversion
        ``"improved"``: ``log1p(-1/alpha) - log(delta alpha) / (alpha - 1)`` (Canonne, Kamath &
        Steinke 2020, Prop. 12); ``"classic"``: ``log(1/delta) / (alpha - 1)`` (Mironov 2017,
        Prop. 3).

    Returns
    -------
    numpy.ndarray
        The term (nats), shape of ``alpha``. The same function the accountants use, so a figure
        drawn from it cannot disagree with a reported epsilon.

    Raises
    ------
    ValueError
        ``delta`` outside ``(0, 1)`` or an unknown ``conversion``.
    """
    if conversion not in CONVERSIONS:
        raise ValueError(f"conversion must be one of {CONVERSIONS}, got {conversion!r}")
    d = check_delta(delta)
    return _conv(np.asarray(alpha, dtype=float), math.log(1.0 / d), conversion == "improved")


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
    if conversion not in CONVERSIONS:
        raise ValueError(f"conversion must be one of {CONVERSIONS}, got {conversion!r}")
    d = check_delta(delta)
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


# ------------------------------------------------------------------------------------ zCDP

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


@functools.lru_cache(maxsize=4096)
def zcdp_rho(epsilon: float, delta: float) -> float:
    """The largest ``rho`` (to 1e-12 relative) whose :func:`zcdp_epsilon` at ``delta`` is
    ``<= epsilon``, by bisection on ``log rho`` (the epsilon is increasing in rho).

    Remembered per ``(epsilon, delta)`` (a pure function of two numbers): some 40 conversions over
    the order grid each time, 12 % of the app server's CPU per move of the epsilon slider under 25
    sessions (py-spy), where a release asks for it two or three times.

    ``epsilon = inf`` gives ``inf`` (NOT PRIVATE). Raises ValueError for ``epsilon <= 0`` or
    ``delta`` outside ``(0, 1)``.
    """
    eps = float(epsilon)
    check_delta(delta)
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
