"""Distance recovery from noisy random projections (JL-Laplace Alg. 2, DPPro Alg. 2; SPEC 4-5).

A release ``Z = X P + noise`` (``P`` with i.i.d. ``N(0, 1/k)`` entries, noise i.i.d. with variance
``s2`` per coordinate) estimates squared distances by

    D(z_i, z_j) = ||z_i - z_j||^2 - 2 k s2,

unbiased for ``rho^2 = ||x_i - x_j||^2`` over the projection and the noise, with variance

    Var D = 2 rho^4 / k + 8 s2 rho^2 + c4 k s2^2,

``c4 = 8`` for Gaussian noise (DPPro Thm 3) and ``c4 = 14`` for Laplace noise (``s2 = 2 b^2``;
``Var((L1 - L2)^2) = 56 b^4 = 14 s2^2`` for two Laplace draws). The JL paper's Claim 7
(``2 rho^4/k + 2k(7 s2^2 - s2) + 4 s2 rho^2``) is wrong: it subtracts ``2 k s2`` from a variance and
halves the cross term; :func:`jl_claim7_variance` keeps it for comparison only.

Every expectation here is over BOTH the projection and the noise. For one release (one ``P``) the
recovered distance of a pair is unbiased for ``||(x_i - x_j) P||^2``, not for ``rho^2``; averaged
over pairs the JL distortions largely cancel. The utility metric is DPPro eq. 12,
``L2 error = ||U^2 - U~^2||^2 / ||U^2||^2`` over sampled pairs, whose expectation is
``sum Var D / sum rho^4`` (:func:`expected_l2_error`).

The experiment helpers (:func:`distance_experiment`, :func:`simulate_recovered_distances`) compare
with the TRUE private distances: exploration only, never part of a release.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dpcore.calibration import check_random_state

__all__ = [
    "DistanceExperiment",
    "distance_experiment",
    "distance_variance",
    "expected_l2_error",
    "jl_claim7_variance",
    "l2_error",
    "optimal_k",
    "projection_input",
    "recovered_sq_distances",
    "sample_pairs",
    "simulate_recovered_distances",
    "sq_distances",
]

Noise = Literal["laplace", "gaussian"]

#: coefficient of k s2^2 in Var D: Var((e1 - e2)^2) / s2^2 for two i.i.d. noise draws
FOURTH_MOMENT_TERM = {"gaussian": 8.0, "laplace": 14.0}


def _noise_coefficient(noise: str) -> float:
    try:
        return FOURTH_MOMENT_TERM[noise]
    except KeyError:
        raise ValueError(f"noise must be 'laplace' or 'gaussian', got {noise!r}") from None


def _check_noise_variance(noise_variance: float) -> float:
    s2 = float(noise_variance)
    if not (s2 >= 0 and math.isfinite(s2)):
        raise ValueError(f"noise_variance must be finite and >= 0, got {noise_variance!r}")
    return s2


def sample_pairs(n: int, n_pairs: int, rng: Any = None) -> np.ndarray:
    """``n_pairs`` index pairs ``(i, j)``, ``i != j``, uniform over ordered pairs of ``range(n)``.

    Drawn with replacement across pairs (vectorised). Returns an int array ``(n_pairs, 2)``.

    Raises
    ------
    ValueError
        ``n < 2`` or ``n_pairs < 1``.
    """
    if int(n) < 2:
        raise ValueError(f"need n >= 2 rows to form pairs, got n={n}")
    if int(n_pairs) < 1:
        raise ValueError(f"n_pairs must be >= 1, got {n_pairs}")
    rng = check_random_state(rng)
    i = rng.integers(0, n, size=int(n_pairs))
    j = (i + rng.integers(1, n, size=int(n_pairs))) % n
    return np.column_stack([i, j])


def _check_pairs(pairs: np.ndarray, n: int) -> np.ndarray:
    pairs = np.asarray(pairs)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or not np.issubdtype(pairs.dtype, np.integer):
        raise ValueError(f"pairs must be an integer array of shape (n_pairs, 2), got {pairs.shape} "
                         f"{pairs.dtype}")
    if pairs.size and (pairs.min() < 0 or pairs.max() >= n):
        raise ValueError(f"pairs index rows outside 0..{n - 1}")
    return pairs


def sq_distances(X: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """``||x_i - x_j||^2`` for each pair (rows of ``X``)."""
    X = np.asarray(X, dtype=float)
    pairs = _check_pairs(pairs, X.shape[0])
    diff = X[pairs[:, 0]] - X[pairs[:, 1]]
    return np.einsum("ij,ij->i", diff, diff)


def recovered_sq_distances(Z: np.ndarray, pairs: np.ndarray, noise_variance: float,
                           k: int | None = None) -> np.ndarray:
    """JL-Laplace Alg. 2 / DPPro Alg. 2: ``||z_i - z_j||^2 - 2 k s2`` for each pair.

    Parameters
    ----------
    Z : ndarray (n, k)
        Released noisy projections.
    pairs : int ndarray (n_pairs, 2)
    noise_variance : float
        Per-coordinate noise variance ``s2`` (``2 b^2`` for ``Lap(b)``, ``sigma^2`` for Gaussian);
        a release stores it in ``details["noise_variance"]``.
    k : int, optional
        Projected dimension (default ``Z.shape[1]``).
    """
    Z = np.asarray(Z, dtype=float)
    if Z.ndim != 2:
        raise ValueError(f"Z must have shape (n, k), got {Z.shape}")
    k = Z.shape[1] if k is None else int(k)
    return sq_distances(Z, pairs) - 2.0 * k * _check_noise_variance(noise_variance)


def distance_variance(rho2: Any, k: Any, noise_variance: Any, noise: Noise = "gaussian") -> np.ndarray:
    """``Var D = 2 rho^4/k + 8 s2 rho^2 + c4 k s2^2`` (c4 = 8 Gaussian, DPPro Thm 3; 14 Laplace, SPEC 4).

    Broadcasts over ``rho2`` (squared true distances), ``k`` and ``noise_variance``.
    """
    c4 = _noise_coefficient(noise)
    rho2, k, s2 = (np.asarray(v, dtype=float) for v in (rho2, k, noise_variance))
    return 2.0 * rho2**2 / k + 8.0 * s2 * rho2 + c4 * k * s2**2


def jl_claim7_variance(rho2: Any, k: Any, noise_variance: Any) -> np.ndarray:
    """The JL paper's Claim 7 ``2 rho^4/k + 2k(7 s2^2 - s2) + 4 s2 rho^2`` - WRONG, for comparison.

    It subtracts ``2 k s2`` (a shift, which does not change a variance) and uses ``4 s2 rho^2`` for
    the cross term, whose variance is ``4 * (rho^2/k) * (2 s2) * k = 8 s2 rho^2``.
    """
    rho2, k, s2 = (np.asarray(v, dtype=float) for v in (rho2, k, noise_variance))
    return 2.0 * rho2**2 / k + 2.0 * k * (7.0 * s2**2 - s2) + 4.0 * s2 * rho2


def l2_error(true_sq: Any, est_sq: Any) -> float:
    """DPPro eq. 12: ``||U^2 - U~^2||_2^2 / ||U^2||_2^2`` over the pairs.

    Raises
    ------
    ValueError
        Shapes differ or all true distances are 0.
    """
    u = np.asarray(true_sq, dtype=float).ravel()
    v = np.asarray(est_sq, dtype=float).ravel()
    if u.shape != v.shape:
        raise ValueError(f"true_sq and est_sq differ in shape: {u.shape} vs {v.shape}")
    denom = float(u @ u)
    if denom == 0:
        raise ValueError("all true squared distances are 0: the L2 error is undefined")
    return float(np.sum((u - v) ** 2) / denom)


def expected_l2_error(rho2: Any, k: Any, noise_variance: Any, noise: Noise = "gaussian") -> np.ndarray:
    """Expected DPPro eq. 12 error of unbiased estimates: ``sum_p Var D_p / sum_p rho_p^4``.

    ``rho2`` is the array of true squared distances of the pairs; broadcasts over ``k`` and
    ``noise_variance`` given as arrays of the same shape (one value per curve point).
    """
    rho2 = np.asarray(rho2, dtype=float).ravel()
    k, s2 = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(noise_variance, dtype=float))
    var = distance_variance(rho2[:, None], k.ravel()[None, :], s2.ravel()[None, :], noise)
    return (var.sum(axis=0) / np.sum(rho2**2)).reshape(k.shape)


def optimal_k(rho2: Any, noise_variance: float, noise: Noise = "gaussian") -> float:
    """Projected dimension minimising the (average) variance of recovered distances at FIXED noise.

    For one distance, ``d/dk (2 rho^4/k + c4 k s2^2) = 0`` gives ``k = sqrt(2/c4) rho^2 / s2``:
    ``rho^2 / (2 s2)`` for Gaussian noise (DPPro Lemma 5's result; its proof differentiates in
    ``rho^2`` instead of ``k``) and ``rho^2 / (sqrt(7) s2)`` for Laplace noise. For an array of
    distances the average variance is minimised at ``sqrt(2 mean(rho^4) / c4) / s2``.
    Real-valued; round to a nearby integer. Returns ``inf`` for zero noise. Note that when the noise
    itself grows with k (JL-Laplace: ``b`` is proportional to ``sqrt(k)``) this is not the optimum;
    compare :func:`distance_variance` over a grid of ``k`` instead.
    """
    c4 = _noise_coefficient(noise)
    s2 = _check_noise_variance(noise_variance)
    r = np.asarray(rho2, dtype=float).ravel()
    if s2 == 0:
        return math.inf
    return float(math.sqrt(2.0 * np.mean(r**2) / c4) / s2)


def simulate_recovered_distances(diffs: np.ndarray, k: int, noise_scale: float, noise: Noise,
                                 n_runs: int, rng: Any = None, chunk: int = 256) -> np.ndarray:
    """Recovered squared distances of fixed difference vectors over ``n_runs`` fresh draws of the
    projection and the noise (the JL paper's Fig. 3 protocol).

    Parameters
    ----------
    diffs : ndarray (m, d)
        Differences ``x_i - x_j`` of the pairs.
    k : int
        Projected dimension.
    noise_scale : float
        Laplace ``b`` or Gaussian ``sigma`` (fixed across runs).
    noise : {"laplace", "gaussian"}
    n_runs : int
    rng : seed or Generator

    Returns
    -------
    ndarray (n_runs, m)
        ``||a P_r + e_r1 - e_r2||^2 - 2 k s2`` for each run ``r`` (fresh ``P_r``, fresh noise on each
        endpoint), vectorised over chunks of runs. Within a run all pairs share ``P_r`` (as in one
        release), so columns are independent across runs but correlated within a run: use run
        means, not all ``n_runs * m`` values, for a standard error of the grand mean.
    """
    _noise_coefficient(noise)
    rng = check_random_state(rng)
    diffs = np.atleast_2d(np.asarray(diffs, dtype=float))
    m, d = diffs.shape
    scale = float(noise_scale)
    s2 = 2.0 * scale**2 if noise == "laplace" else scale**2
    out = np.empty((int(n_runs), m))
    for start in range(0, int(n_runs), chunk):
        r = min(chunk, int(n_runs) - start)
        P = rng.standard_normal((r, d, k)) / math.sqrt(k)
        proj = np.einsum("md,rdk->rmk", diffs, P)
        if scale > 0:
            draw = rng.laplace if noise == "laplace" else rng.normal
            proj = proj + draw(0.0, scale, size=(r, m, k)) - draw(0.0, scale, size=(r, m, k))
        out[start:start + r] = np.einsum("rmk,rmk->rm", proj, proj) - 2.0 * k * s2
    return out


def projection_input(release: Any, X: np.ndarray) -> np.ndarray:
    """Map rows into the space a JL-Laplace / DPPro release projected (clip to the public bounds,
    then the release's public rescaling), for comparing with true distances.

    Raises
    ------
    ValueError
        The release does not carry the projection-input map (not a projection release).
    """
    if "rescale" not in release.parameters:
        raise ValueError(f"the {release.mechanism} release has no projection input map "
                         "(only jl-laplace and dppro releases do)")
    from dpcore.mechanisms._projection import input_map, scale_rows

    bounds = release.public_bounds()
    lo, scale, _ = input_map(bounds, bool(release.parameters["rescale"]))
    return scale_rows(X, lo, scale, bounds)


@dataclass(frozen=True)
class DistanceExperiment:
    """True versus recovered squared distances of sampled pairs of one release (exploration only).

    Attributes
    ----------
    pairs : int ndarray (m, 2)
    true_sq, recovered_sq, difference : ndarray (m,)
        ``difference = recovered_sq - true_sq``.
    variance : ndarray (m,)
        Theoretical ``Var D`` of each pair (:func:`distance_variance`).
    k : int
    noise_variance : float
    noise : str
    """

    pairs: np.ndarray
    true_sq: np.ndarray
    recovered_sq: np.ndarray
    difference: np.ndarray
    variance: np.ndarray
    k: int
    noise_variance: float
    noise: str

    @property
    def mean_difference(self) -> float:
        return float(np.mean(self.difference))

    @property
    def l2_error(self) -> float:
        return l2_error(self.true_sq, self.recovered_sq)

    @property
    def expected_l2_error(self) -> float:
        return float(np.sum(self.variance) / np.sum(self.true_sq**2))

    @property
    def k_opt(self) -> float:
        return optimal_k(self.true_sq, self.noise_variance, self.noise)  # type: ignore[arg-type]

    def summary(self) -> dict[str, float]:
        return {
            "n_pairs": int(self.pairs.shape[0]),
            "mean_difference": self.mean_difference,
            "sd_difference": float(np.std(self.difference)),
            "predicted_sd": float(np.sqrt(np.mean(self.variance))),
            "l2_error": self.l2_error,
            "expected_l2_error": self.expected_l2_error,
            "k": self.k,
            "k_opt": self.k_opt,
        }


def distance_experiment(release: Any, X: np.ndarray, n_pairs: int = 1000, rng: Any = None,
                        *, mapped: bool = False) -> DistanceExperiment:
    """Compare recovered with true squared distances on ``n_pairs`` sampled pairs of one release.

    Parameters
    ----------
    release : Release
        A ``jl-laplace`` or ``dppro`` release (needs ``details["noise_variance"]`` and
        ``details["noise_distribution"]``).
    X : ndarray (n, d)
        The PRIVATE rows the release was drawn from, in input units (clipped and rescaled here with
        :func:`projection_input`), or already mapped when ``mapped=True``.
    n_pairs : int
    rng : seed or Generator (pair sampling only)

    Raises
    ------
    ValueError
        Not a distance-capable release, or ``X`` has a different number of rows.
    """
    details = release.details
    if "noise_variance" not in details or "noise_distribution" not in details:
        raise ValueError(f"the {release.mechanism} release has no noise variance for distance recovery")
    Z = np.asarray(release.data, dtype=float)
    Xm = np.asarray(X, dtype=float) if mapped else projection_input(release, X)
    if Xm.shape[0] != Z.shape[0]:
        raise ValueError(f"X has {Xm.shape[0]} rows but the release has {Z.shape[0]}")
    pairs = sample_pairs(Z.shape[0], n_pairs, rng)
    s2 = float(details["noise_variance"])
    noise = details["noise_distribution"]
    k = Z.shape[1]
    true_sq = sq_distances(Xm, pairs)
    rec = recovered_sq_distances(Z, pairs, s2, k)
    return DistanceExperiment(pairs=pairs, true_sq=true_sq, recovered_sq=rec, difference=rec - true_sq,
                              variance=distance_variance(true_sq, k, s2, noise), k=k,
                              noise_variance=s2, noise=noise)
