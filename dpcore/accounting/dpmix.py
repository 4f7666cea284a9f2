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

The numerics (exact log-space ``B(m)``, proven truncation of the ``j``-sum, the search over every
integer order) are in :mod:`dpcore.accounting._order_search`. :func:`dpmix_noise` resolves the
noise of a DPMix release from its parameters (given sigmas, or calibrated from epsilon) for the
mechanism and the app alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpcore.accounting._order_search import _Model, _search
from dpcore.accounting.rdp import RDPEpsilon
from dpcore.validation import check_delta, check_epsilon, check_integer, check_positive_array, default_delta

__all__ = [
    "BOUNDS",
    "DPMixNoise",
    "dpmix_calibrate_sigma",
    "dpmix_epsilon",
    "dpmix_noise",
    "dpmix_rdp",
]

#: Per-mixture RDP bounds: the paper's Theorem 1 and the tighter per-term bound (module docstring).
BOUNDS = ("paper", "tight")


def _check_bound(bound) -> str:
    if bound not in BOUNDS:
        raise ValueError(f"bound must be one of {BOUNDS}, got {bound!r}")
    return bound


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



def _common(sigma_x, sigma_y, ell, n, d_x, d_y):
    """Validate the DPMix parameters; return broadcast (q, c) arrays and the shape."""
    n = check_integer("n", n, 1)
    d_x = check_integer("d_x", d_x, 1)
    d_y = check_integer("d_y", d_y, 0)
    sx = check_positive_array("sigma_x", sigma_x)
    if sigma_y is None:
        if d_y:
            raise ValueError("sigma_y is required when d_y > 0")
        sy = np.ones(())
    else:
        sy = check_positive_array("sigma_y", sigma_y)
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
    2019, Theorems 9 and 27) and :mod:`dpcore.accounting._order_search` for the numerics; values
    are exact to ~1e-13 relative.

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
    covered (branch and bound, see :mod:`dpcore.accounting._order_search`).

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
    d = check_delta(delta)
    T = check_integer("n_mixtures", n_mixtures, 1)
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


def dpmix_calibrate_sigma(*, epsilon, delta, ell, n, n_mixtures, d_x, d_y, sigma_ratio=1.0,
                          bound="tight") -> float:
    """Smallest ``sigma_x`` (with ``sigma_y = sigma_ratio * sigma_x``) meeting a target ``(eps, delta)``.

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
    sigma_ratio
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
    d = check_delta(delta)
    target = check_epsilon(epsilon, allow_inf=False)
    try:
        rt = float(sigma_ratio)
    except (TypeError, ValueError):
        raise ValueError(f"sigma_ratio must be a number > 0, got {sigma_ratio!r}") from None
    if not (math.isfinite(rt) and rt > 0.0):
        raise ValueError(f"sigma_ratio must be finite and > 0, got {sigma_ratio!r}")
    T = check_integer("n_mixtures", n_mixtures, 1)
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



# ---------------------------------------------------------------------------- noise of a release
@dataclass(frozen=True)
class DPMixNoise:
    """The noise of a DPMix release and the epsilon the accountant guarantees for it.

    Attributes
    ----------
    sigma_x, sigma_y : float
        Noise standard deviations of the features and the labels (scaled ``[0, 1]`` units);
        ``sigma_y = 0`` when there are no labels (``d_y = 0``).
    epsilon : float
        :func:`dpmix_epsilon` at these sigmas; ``inf`` (NOT PRIVATE) when a released block has
        zero noise or the target epsilon was ``inf``.
    alpha : int or None
        The optimal Rényi order ``alpha*`` (None when ``epsilon`` is ``inf``).
    sigma_source : {"given", "calibrated", "epsilon=inf"}
        Where ``sigma_x`` came from.
    """

    sigma_x: float
    sigma_y: float
    epsilon: float
    alpha: int | None
    sigma_source: str


def dpmix_noise(*, epsilon, sigma_x, sigma_y, sigma_ratio, ell, n, n_mixtures, d_x, d_y, delta=None,
                bound="tight") -> DPMixNoise:
    """Resolve DPMix's noise from its parameters: given sigmas, or calibrated from ``epsilon``.

    ``sigma_x`` given: ``sigma_y`` is the given one, else ``sigma_ratio * sigma_x``; ``epsilon``
    is ignored and the guarantee is :func:`dpmix_epsilon` at these sigmas. ``sigma_x`` None:
    ``sigma_x = dpmix_calibrate_sigma(epsilon, sigma_ratio=sigma_ratio)``, ``sigma_y = sigma_ratio *
    sigma_x``, and the guarantee is again :func:`dpmix_epsilon` at those sigmas (``<= epsilon``).
    ``epsilon = inf`` without sigmas gives zero noise. A zero sigma on a released block gives
    ``epsilon = inf`` (NOT PRIVATE). This is the rule of :class:`dpcore.mechanisms.dpmix.DPMix`
    (before its sampler's slack is reserved) and of the app's Privacy page.

    Parameters
    ----------
    epsilon : float
        Target budget (> 0, ``inf`` allowed), used when ``sigma_x`` is None.
    sigma_x, sigma_y : float or None
        Explicit noise standard deviations (>= 0). ``sigma_y`` without ``sigma_x`` is refused.
    sigma_ratio : float
        ``sigma_y / sigma_x`` when ``sigma_y`` is not given (> 0).
    ell, n, n_mixtures, d_x, d_y, bound
        As in :func:`dpmix_epsilon`.
    delta : float, optional
        In ``(0, 1)``; default :func:`dpcore.validation.default_delta` of ``n`` (the mechanism's).

    Returns
    -------
    DPMixNoise

    Raises
    ------
    ValueError
        ``sigma_y`` without ``sigma_x``, and every error of :func:`dpmix_epsilon` and
        :func:`dpmix_calibrate_sigma`.
    """
    d = default_delta(check_integer("n", n, 1)) if delta is None else check_delta(delta)
    common = dict(ell=ell, n=n, n_mixtures=n_mixtures, d_x=d_x, d_y=d_y, delta=d, bound=bound)
    if sigma_x is None and sigma_y is not None:
        raise ValueError("sigma_y was given without sigma_x; give both, or leave both empty and "
                         "set sigma_ratio to calibrate them from epsilon")
    if sigma_x is not None:
        sx = float(sigma_x)
        sy = float(sigma_y) if sigma_y is not None else sigma_ratio * sx
        source = "given"
    elif math.isinf(epsilon):
        sx = sy = 0.0
        source = "epsilon=inf"
    else:
        sx = float(dpmix_calibrate_sigma(epsilon=epsilon, sigma_ratio=sigma_ratio, **common))
        sy = sigma_ratio * sx
        source = "calibrated"
    if d_y == 0:
        sy = 0.0
    if sx == 0 or (d_y and sy == 0):
        return DPMixNoise(sx, sy, math.inf, None, source)
    res = dpmix_epsilon(sigma_x=sx, sigma_y=sy if d_y else None, **common)
    return DPMixNoise(sx, sy, float(res.epsilon), int(res.alpha), source)
