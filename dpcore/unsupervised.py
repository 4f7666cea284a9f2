"""Public-rule defaults of the unsupervised release (issue 13, items 5 and 6).

Without labels the recommended release is RON-Gauss Alg. 3 (:func:`dpcore.calibration.
recommended_mechanism`: a public random orthonormal basis, so real rows map into the release). Its
paper defaults (``p`` from Meckes's bound, 30% of the budget for the DP mean) lose to isotropic
noise of the same scale on the bundled tables at epsilon = 1 (``benchmarks/unsupervised_null.py``):
the DP mean of the unit rows, ``mu_DP``, is off by ``e`` with ``E||e||^2 = 8 d^2/(n eps_mu)^2``
(Laplace, ``S1 = 2 sqrt(d)/n`` per coordinate) or ``2 d/(n^2 rho_mu)`` (Gaussian, ``S2 = 2/n``), and
when ``||e||`` is comparable to the spread ``r`` of the unit rows around their mean, the centred rows
``(x - mu_DP)/||x - mu_DP||`` all point along ``-e``: Alg. 3 samples ``N(0, Sigma_DP)``, symmetric
about 0, while the real rows mapped by the release's transform sit on one side of it, so K-means
on the release puts (almost) every real row in one cluster (ARI 0; breast-cancer: ``r^2 = 0.07``).

Two fixes, both public: RON-Gauss's ``model_mean=True`` (release the DP mean ``m_DP`` of the
projected rows too and sample ``N(m_DP, Sigma_DP - m m^T)``, so the release sits where the mapped
real rows do), and ``p`` and the budget split chosen from public facts only (``n``, ``d``, epsilon,
delta) by :func:`recommended_unsupervised`. Nothing here reads data.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "MEAN_FRACTIONS",
    "SPREAD_REFERENCE",
    "recommended_unsupervised",
    "unsupervised_error",
]

#: public reference for ``r^2 = E||x^ - mu||^2``, the squared spread of the unit-normalised rows
#: around their mean (the data's own value is private). Small = rows concentrated in a narrow
#: cone, the case where the DP mean's error matters most; non-negative tables sit there (0.07 to
#: 0.6 on the bundled tables, where it is only checked, never fitted)
SPREAD_REFERENCE = 0.1

#: the mean's budget fractions the rule chooses from (the rest goes to the second moment)
MEAN_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)

def unsupervised_error(n_rows: int, n_features: int, *, epsilon: float, delta: float | None = None,
                       mean_fraction: float, covariance_fraction: float | None = None,
                       spread: float = SPREAD_REFERENCE) -> dict[str, np.ndarray | float]:
    """Predicted error of RON-Gauss Alg. 3 for clustering, for every ``p`` in ``[1, d - 1]``, with
    ``mean_fraction`` of the budget on the centring mean ``mu_DP`` and ``covariance_fraction``
    (default: the rest) on the second moment: the inverse of the signal-to-noise ratio of the
    data's top direction in the release, times its share ``lambda_1`` of the spread.

    K-means on a Gaussian release cuts along its top eigenvector, so the release is useful for
    clustering when the data's top direction (second-moment mass ``lambda_1`` out of ``r^2`` =
    ``spread``) stands out of everything else in the noisy ``p x p`` second moment of the centred,
    normalised, projected rows. A Haar-random ``p``-dimensional basis keeps ``p/d`` of every
    direction's mass (``E[W W^T] = (p/d) I``), so per projected direction the competitors of the
    top direction's ``lambda_1 p/d`` are:

    * the rest of the spread, about ``r^2/d`` (the within-cluster bulk);
    * the DP mean's centring error ``e``, a spurious direction of mass ``||e||^2 p/d`` that Alg. 3's
      zero-mean model cannot represent (module docstring): ``E||e||^2 = 8 d^2/(n f epsilon)^2``
      (Laplace, per coordinate ``Lap(2 sqrt(d)/(n f epsilon))``, RON-Gauss Lemma 2) or ``d sigma_mu^2``,
      ``sigma_mu = (2/n)/sqrt(2 f rho)`` (Gaussian, ``S2 = 2/n``; ``rho`` the zCDP budget of
      ``(epsilon, delta)``, :func:`dpcore.accounting.zcdp_rho`);
    * the edge ``2 sigma_M sqrt(p)`` of the noise's semicircle (a spike below it cannot be told
      from the noise; Baik, Ben Arous & Peche 2005), ``sigma_M`` =
      ``sqrt(2) (p + 1)/(n c epsilon)`` (Laplace, ``S1 = (p + 1)/n`` on the upper triangle) or
      ``(sqrt(2)/n)/sqrt(2 c rho)`` (Gaussian, ``S2 = sqrt(2)/n``; ``c`` = ``covariance_fraction``),
      in units of the normalised rows, i.e. times ``r^2 + ||e||^2`` in units of the spread.

    Hence ``lambda_1 / SNR = r^2/p + ||e||^2 + 2 sigma_M (d/sqrt(p)) (r^2 + ||e||^2)``, returned as
    ``error``; the unknown ``lambda_1`` does not change its minimiser.

    Returns
    -------
    dict
        ``p`` (int array), ``error`` (array, same shape), ``centring_error`` (``E||e||^2``) and
        ``noise_sd`` (``sigma_M``, array).
    """
    n, d, f, r2 = int(n_rows), int(n_features), float(mean_fraction), float(spread)
    c = 1.0 - f if covariance_fraction is None else float(covariance_fraction)
    if d < 2:
        raise ValueError("n_components: the data need at least 2 features to be projected")
    if not (0 < f < 1 and 0 < c <= 1 - f + 1e-12):
        raise ValueError(f"mean_fraction and covariance_fraction must be positive with a sum <= 1, got "
                         f"{mean_fraction} and {covariance_fraction}")
    p = np.arange(1, d, dtype=float)
    if math.isinf(epsilon):
        centring, sigma_m = 0.0, np.zeros(p.size)
    elif delta is not None:
        from dpcore.accounting import zcdp_rho

        rho = zcdp_rho(epsilon, delta)
        centring = 2.0 * d / (n * n * f * rho)
        sigma_m = np.full(p.size, (math.sqrt(2.0) / n) / math.sqrt(2.0 * c * rho))
    else:
        centring = 8.0 * d * d / (n * f * epsilon) ** 2
        sigma_m = math.sqrt(2.0) * (p + 1.0) / (n * c * epsilon)
    error = r2 / p + centring + 2.0 * sigma_m * (d / np.sqrt(p)) * (r2 + centring)
    return {"p": p.astype(int), "error": error, "centring_error": centring, "noise_sd": sigma_m}


def recommended_unsupervised(n_rows: int, n_features: int, *, epsilon: float,
                             delta: float | None = None, n_components: int | None = None,
                             mean_fraction: float | None = None) -> dict:
    """The default unsupervised release from public facts only: RON-Gauss Alg. 3 with its model mean
    (``model_mean=True``), and ``p`` and the budget split ``(mean, covariance)`` that minimise
    :func:`unsupervised_error` (the centring mean ``mu_DP`` gets half of the mean's share) over ``p`` in
    ``[1, d - 1]`` and the mean's fraction in :data:`MEAN_FRACTIONS`, at the public reference spread
    :data:`SPREAD_REFERENCE`. Gaussian noise (zCDP) when ``delta`` is given (its L2 sensitivities,
    ``2/n`` for the mean and ``sqrt(2)/n`` for the second moment, do not grow with ``d`` or ``p``),
    the paper's Laplace noise (pure epsilon) otherwise.

    Never tuned on private data; checked on the bundled tables by ``benchmarks/unsupervised_null.py``
    (README, "Unsupervised releases against the null"). ``epsilon = inf`` (no noise) gives
    ``p = d - 1`` and the paper's split.

    ``n_components`` / ``mean_fraction`` (given by the user, public): the rule minimises over the
    other one only (``p`` fixed: the best mean fraction for that ``p``; fraction fixed: the best ``p``).

    Returns
    -------
    dict
        ``mechanism`` (``"ron-gauss"``), ``reason``, ``parameters`` (``n_components``,
        ``epsilon_split``, ``model_mean``, and
        ``noise``/``delta`` when ``delta`` is given: pass them to the mechanism), ``rule`` (text),
        ``inputs``, ``predicted_error`` and ``centring_error``.

    Raises
    ------
    ValueError
        Fewer than 2 features, ``epsilon <= 0`` or ``delta`` outside (0, 1) (from
        :func:`dpcore.accounting.zcdp_rho`).
    """
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}")
    best: tuple[float, int, float, float] | None = None
    fractions = (0.3,) if math.isinf(epsilon) else MEAN_FRACTIONS
    if mean_fraction is not None:
        fractions = (float(mean_fraction),)
    for f in fractions:
        # model_mean=True: half of the mean's share centres the rows (mu_DP), half is m_DP
        pred = unsupervised_error(n_rows, n_features, epsilon=epsilon, delta=delta, mean_fraction=f / 2,
                                  covariance_fraction=1.0 - f)
        j = int(np.argmin(pred["error"])) if n_components is None else int(n_components) - 1
        if best is None or pred["error"][j] < best[0]:
            best = (float(pred["error"][j]), int(pred["p"][j]), f, float(pred["centring_error"]))
    assert best is not None
    error, p, f, centring = best
    kept = [k for k, v in (("p", n_components), ("mean fraction", mean_fraction)) if v is not None]
    fixed = f" (the user's {' and '.join(kept)} kept)" if kept else ""
    params: dict = {"n_components": p, "epsilon_split": (f, round(1.0 - f, 10)), "model_mean": True}
    if delta is not None:
        params.update(noise="gaussian", delta=delta)
    noise = ("Gaussian noise (zCDP): its L2 sensitivities do not grow with p or d" if delta is not None else
             "Laplace noise (pure epsilon; give delta for the Gaussian variant, which adds far less noise)")
    return {
        "mechanism": "ron-gauss",
        "parameters": params,
        "reason": (f"no labels: RON-Gauss, a public random orthonormal basis, so real rows map into the "
                   f"release; {noise}; its model's DP mean (model_mean) so the release sits where the real "
                   f"rows do; p = {p} and {f:g} of the budget for the DP means by the public rule of "
                   f"dpcore.unsupervised.recommended_unsupervised (n, d, epsilon, delta only){fixed}"),
        "rule": ("minimise r^2/p + ||e||^2 + 2 sigma_M (d/sqrt(p)) (r^2 + ||e||^2) over p and the DP "
                 "mean's share: what competes with the data's top direction in the release (the rest of "
                 "the spread, the DP mean's centring error, the edge of the noise's semicircle) at the "
                 f"public reference spread r^2 = {SPREAD_REFERENCE:g}; public facts only "
                 "(dpcore.unsupervised.recommended_unsupervised)"),
        "inputs": {"n": int(n_rows), "d": int(n_features), "epsilon": epsilon, "delta": delta,
                   "noise": "gaussian" if delta is not None else "laplace",
                   "spread_reference": SPREAD_REFERENCE, "n_components": n_components,
                   "mean_fraction": mean_fraction},
        "predicted_error": error,
        "centring_error": centring,
    }
