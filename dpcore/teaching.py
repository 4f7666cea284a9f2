"""Small computations behind the app's teaching tour (each well under a second on bundled data).

Pure functions returning arrays; the figures live in ``app/figures/tour.py``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from dpcore.calibration import haar_stiefel
from dpcore.preprocessing import scale_to_unit

__all__ = ["posterior_bound", "qq_points", "ron_snr_vs_p", "dpmix_sigma_vs_ell", "dfm_projection",
           "unit_rows"]


def posterior_bound(prior: np.ndarray, epsilon: float, delta: float = 0.0) -> np.ndarray:
    """Largest posterior belief an attacker can reach about one person from an (ε, δ)-DP release.

    For any event about an individual with prior probability ``p``, (ε, 0)-DP bounds the posterior
    by ``e^ε p / (e^ε p + 1 - p)`` (the odds grow by at most ``e^ε``; Kasiviswanathan & Smith 2014,
    "On the 'semantics' of differential privacy"); with δ > 0 the bound holds up to an additive δ.

    Parameters
    ----------
    prior : array of probabilities in [0, 1]
    epsilon : float >= 0
    delta : float in [0, 1)
    """
    p = np.clip(np.asarray(prior, dtype=float), 0.0, 1.0)
    e = math.exp(min(epsilon, 700.0))
    return np.minimum(1.0, e * p / (e * p + 1.0 - p) + delta)


def ron_snr_vs_p(X: np.ndarray, bounds: np.ndarray, n_components: np.ndarray, epsilon: float,
                 rng: np.random.Generator, covariance_share: float = 0.7) -> dict[str, np.ndarray]:
    """Signal-to-noise ratio of RON-Gauss's noisy second moment as the projection dimension grows.

    Signal: ``||Σ_p||_F`` of the projected, row-normalised data (``Σ_p = X̃ᵀX̃/n``). Noise: the
    expected Frobenius norm of the symmetric Laplace noise with the sound upper-triangle scale
    ``b = (p + 1)/(n ε_Σ)`` (SPEC section 2): ``sqrt(2) b p`` (all ``p²`` entries have variance
    ``2b²``). The signal saturates (at most 1 for unit rows) while the noise grows like ``p²``,
    so a small ``p`` keeps the SNR high — the papers' reason for reducing dimension first.
    """
    Z = unit_rows(X, bounds)
    Z = Z - Z.mean(axis=0)
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    Z = Z / np.where(norms > 0, norms, 1.0)
    n, d = Z.shape
    W = haar_stiefel(d, int(max(n_components)), rng)
    proj = Z @ W
    signal, noise = [], []
    for p in n_components:
        S = proj[:, :p].T @ proj[:, :p] / n
        b = (p + 1) / (n * epsilon * covariance_share)
        signal.append(np.linalg.norm(S))
        noise.append(math.sqrt(2) * b * p)
    signal_arr, noise_arr = np.asarray(signal), np.asarray(noise)
    return {"p": np.asarray(n_components), "signal": signal_arr, "noise": noise_arr,
            "snr": signal_arr / noise_arr}


def qq_points(values: np.ndarray, max_points: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Standardised sample quantiles against standard-normal quantiles (a normal Q-Q plot)."""
    v = np.sort(np.asarray(values, dtype=float))
    sd = v.std()
    v = (v - v.mean()) / (sd if sd > 0 else 1.0)
    idx = np.linspace(0, v.size - 1, min(max_points, v.size)).round().astype(int)
    probs = (idx + 0.5) / v.size
    return stats.norm.ppf(probs), v[idx]


def dpmix_sigma_vs_ell(ells: np.ndarray, *, epsilon: float, n: int, d_x: int, d_y: int,
                       delta: float | None = None) -> dict[str, np.ndarray]:
    """Noise DPMix needs for a target ε, per mixture degree ℓ (T = n mixtures).

    Returns the calibrated ``sigma`` (:func:`dpcore.accounting.dpmix_calibrate_sigma`, tight bound),
    the L2 sensitivity of one mixture ``sqrt(d_x + d_y)/ell`` (averaging ℓ rows in [0, 1] divides
    it by ℓ) and their ratio. Averaging and sampling without replacement (amplification) together
    let σ fall quickly with ℓ; the price is that each mixture blurs ℓ records together.
    """
    from dpcore import accounting

    delta = delta if delta is not None else 1.0 / n
    sig = np.array([accounting.dpmix_calibrate_sigma(epsilon=epsilon, delta=delta, ell=int(ell), n=n,
                                                     n_mixtures=n, d_x=d_x, d_y=d_y) for ell in ells])
    sens = math.sqrt(d_x + d_y) / np.asarray(ells, dtype=float)
    return {"ell": np.asarray(ells), "sigma": sig, "sensitivity": sens, "ratio": sig / sens}


def unit_rows(X: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Rows clipped to the public ``bounds`` (d, 2), scaled to ``[0, 1]`` per feature, then to unit
    L2 norm (an all-zero row stays 0): the normalisation RON-Gauss starts from."""
    Z = scale_to_unit(X, bounds)
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    return Z / np.where(norms > 0, norms, 1.0)


def dfm_projection(X: np.ndarray, bounds: np.ndarray, rng: np.random.Generator,
                   feature: int | None = None, max_rows: int = 5000) -> dict[str, object]:
    """The Diaconis-Freedman-Meckes effect on a table: a random 1-D projection of the unit rows
    against one raw feature, as normal Q-Q points (:func:`qq_points`).

    Parameters
    ----------
    X : array (n, d); bounds : array (d, 2), public
    rng : Generator
        Draws the Haar-random direction (another seed, another projection).
    feature : int, optional
        The raw feature to compare (default: the one with the largest spread).
    max_rows : int
        At most this many rows (the first ones) are used.

    Returns
    -------
    dict with ``projection`` and ``feature`` (each ``(theoretical, sample)`` quantiles),
    ``feature_index`` and ``kurtosis`` of both (excess kurtosis; 0 for a normal sample).
    """
    Z = unit_rows(np.asarray(X, dtype=float)[:max_rows], np.asarray(bounds, dtype=float))
    j = int(np.argmax(Z.std(axis=0))) if feature is None else int(feature)
    w = haar_stiefel(Z.shape[1], 1, rng)[:, 0]
    proj, raw = Z @ w, Z[:, j]
    return {"projection": qq_points(proj), "feature": qq_points(raw), "feature_index": j,
            "kurtosis": (float(stats.kurtosis(proj)), float(stats.kurtosis(raw)))}

