"""Building blocks shared by every mechanism: noise calibration, budget splits, matrices.

Everything here follows ``SPEC.md`` section 1. Each function states the sensitivity it expects
and the source of its formula. The input checks (``check_epsilon``, ``check_delta``,
``check_random_state``) live in :mod:`dpcore.validation` and are re-exported here.
"""

from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import special

from dpcore.exceptions import NonFiniteNoiseError
from dpcore.validation import (  # re-exported (default_delta, delta_or_default: their old home)
    check_delta,
    check_epsilon,
    check_random_state,
    default_delta,
    delta_or_default,
)

__all__ = [
    "LAPLACE_SOURCE",
    "EpsilonSplit",
    "analytic_gaussian_sigma",
    "check_delta",
    "check_epsilon",
    "check_random_state",
    "classic_gaussian_sigma",
    "default_delta",
    "delta_or_default",
    "gaussian_delta",
    "gaussian_epsilon",
    "haar_stiefel",
    "image_dct_basis",
    "kenthapadi_sigma",
    "laplace_scale",
    "psd_repair",
    "recommended_mechanism",
    "resolve_noise",
    "shrink_noisy_covariance",
    "recommended_n_components",
    "tied_mean_share",
    "upper_triangle_l1_sensitivity",
]


LAPLACE_SOURCE = "Laplace mechanism (Dwork, McSherry, Nissim & Smith 2006)"


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Scale ``b = S1 / epsilon`` of the Laplace mechanism (Dwork, McSherry, Nissim, Smith 2006).

    Adding i.i.d. ``Lap(b)`` to every coordinate of a query whose entrywise L1 sensitivity is
    ``S1`` gives pure epsilon-DP. ``epsilon = inf`` gives ``b = 0`` (NOT PRIVATE).
    """
    if sensitivity < 0 or not np.isfinite(sensitivity):
        raise ValueError(f"sensitivity must be finite and >= 0, got {sensitivity}")
    eps = check_epsilon(epsilon)
    if math.isinf(eps):
        return 0.0
    return _finite_scale(float(sensitivity) / eps, eps)


def _finite_scale(scale: float, epsilon: float, delta: float | None = None) -> float:
    """``scale``, or a ValueError naming the parameters when it is not a finite float64."""
    if not math.isfinite(scale):
        named = f"epsilon = {epsilon:g}" + ("" if delta is None else f", delta = {delta:g}")
        raise NonFiniteNoiseError(f"{named} gives an infinite noise scale (it overflows float64); "
                                  "use a larger epsilon")
    return scale


def classic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Classic Gaussian mechanism: ``sigma = S2 * sqrt(2 ln(1.25/delta)) / epsilon``.

    Dwork & Roth 2014, Theorem A.1; valid only for ``epsilon < 1`` (ValueError otherwise).
    """
    eps = check_epsilon(epsilon, allow_inf=False)
    dlt = check_delta(delta)
    if eps >= 1:
        raise ValueError(f"the classic Gaussian mechanism needs epsilon < 1, got {eps}")
    return _finite_scale(float(sensitivity) * math.sqrt(2 * math.log(1.25 / dlt)) / eps, eps, dlt)


def gaussian_delta(sigma: float | np.ndarray, sensitivity: float, epsilon: float) -> np.ndarray:
    """Exact delta of the Gaussian mechanism with noise ``sigma`` at a given epsilon.

    Balle & Wang, "Improving the Gaussian Mechanism for Differential Privacy", ICML 2018,
    Theorem 8: ``delta = Phi(S/(2 sigma) - eps sigma/S) - e^eps Phi(-S/(2 sigma) - eps sigma/S)``.
    Computed in log space (``log_ndtr``) so tiny deltas keep their digits.
    """
    sigma = np.asarray(sigma, dtype=float)
    a = sensitivity / (2 * sigma)
    b = epsilon * sigma / sensitivity
    log_p = special.log_ndtr(a - b)
    log_q = epsilon + special.log_ndtr(-a - b)
    with np.errstate(over="ignore", invalid="ignore"):
        diff = np.where(log_q < log_p, -np.expm1(np.minimum(log_q - log_p, 0.0)), 0.0)
        out = np.exp(log_p) * diff
    return np.clip(out, 0.0, 1.0)


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest ``sigma`` of the analytic Gaussian mechanism (Balle & Wang, ICML 2018, Alg. 1).

    Parameters
    ----------
    sensitivity : float
        L2 sensitivity ``S2`` of the query under the mechanism's neighbouring relation.
    epsilon : float
        Privacy budget, > 0; ``inf`` returns 0 (NOT PRIVATE).
    delta : float
        In (0, 1).

    Returns
    -------
    float
        ``sigma`` such that adding ``N(0, sigma^2 I)`` is exactly (epsilon, delta)-DP
        (:func:`gaussian_delta` equals ``delta`` up to 1e-12 relative), valid for every epsilon
        and never larger than the classic calibration.

    Raises
    ------
    ValueError
        For epsilon <= 0, delta outside (0, 1) or a negative sensitivity.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    if sensitivity < 0 or not np.isfinite(sensitivity):
        raise ValueError(f"sensitivity must be finite and >= 0, got {sensitivity}")
    if math.isinf(eps) or sensitivity == 0:
        return 0.0

    def excess(log_sigma: float) -> float:
        return float(gaussian_delta(math.exp(log_sigma), sensitivity, eps)) - dlt

    lo, hi = math.log(sensitivity) - 10.0, math.log(sensitivity) + 5.0
    while excess(lo) < 0:
        lo -= 10.0
        if lo < -700.0:  # sigma below 1e-304: not representable as a useful noise scale
            raise ValueError(f"epsilon = {eps:g}, delta = {dlt:g} give a noise scale below float64 "
                             "precision; use a smaller epsilon or delta")
    while excess(hi) > 0:
        hi += 5.0
        if hi > 700.0:  # math.exp overflows just above 709
            _finite_scale(math.inf, eps, dlt)
    from scipy import optimize  # deferred: importing scipy.optimize costs ~0.6 s at app start

    root = optimize.brentq(excess, lo, hi, xtol=1e-14, rtol=1e-13, maxiter=500)
    sigma = math.exp(root)
    # brentq returns a point within tolerance on either side; step up until delta <= target.
    while excess(math.log(sigma)) > 0:
        sigma = math.nextafter(sigma, math.inf) * (1 + 1e-12)
    return sigma


@dataclass(frozen=True)
class EpsilonSplit:
    """A budget split into named parts that never sum above the total.

    Each part is ``fraction * total`` rounded *down* (``math.nextafter``) until the float sum of
    the parts is ``<= total`` (OpenDP's convention), so basic composition of the parts is never
    more than the stated epsilon.

    Attributes
    ----------
    total : float
    names : tuple[str, ...]
    parts : tuple[float, ...]
    """

    total: float
    names: tuple[str, ...]
    parts: tuple[float, ...]

    @classmethod
    def from_fractions(cls, total: float, fractions: dict[str, float]) -> EpsilonSplit:
        """Split ``total`` by ``fractions`` (positive, summing to at most 1 + 1e-9).

        Raises
        ------
        ValueError
            If a fraction is not in (0, 1] or the fractions sum to more than 1.
        """
        total = check_epsilon(total)
        names = tuple(fractions)
        fr = [float(fractions[k]) for k in names]
        if any(not (0 < f <= 1) for f in fr):
            raise ValueError(f"budget fractions must lie in (0, 1], got {fractions}")
        if sum(fr) > 1 + 1e-9:
            raise ValueError(f"budget fractions sum to {sum(fr):.6g} > 1: {fractions}")
        if math.isinf(total):
            return cls(total, names, tuple(math.inf for _ in fr))
        s = math.fsum(fr)
        if s > 1:
            fr = [f / s for f in fr]
        parts = [total * f for f in fr]

        def over(ps: list[float]) -> bool:
            return (sum(map(Fraction, ps)) > Fraction(total)
                    or functools.reduce(operator.add, ps) > total)

        while over(parts):
            i = int(np.argmax(parts))
            parts[i] = math.nextafter(parts[i], 0.0)
        return cls(total, names, tuple(parts))

    def __getitem__(self, name: str) -> float:
        return self.parts[self.names.index(name)]

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.names, self.parts, strict=True))


def upper_triangle_l1_sensitivity(diff: np.ndarray) -> float:
    """Entrywise L1 norm of the upper triangle (diagonal included) of a symmetric matrix change.

    SPEC section 1: for ``A = x x^T - x' x'^T``, ``(||A||_1 + sum_i |A_ii|) / 2``.
    """
    diff = np.asarray(diff, dtype=float)
    return float((np.abs(diff).sum() + np.abs(np.diag(diff)).sum()) / 2)


def psd_repair(matrix: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """Nearest symmetric PSD matrix by eigenvalue clipping (post-processing, no privacy cost).

    Symmetrises ``(A + A^T)/2``, eigendecomposes and clips eigenvalues at ``floor``. Never hand a
    non-symmetric or indefinite matrix to ``multivariate_normal`` (SPEC section 1).
    """
    a = np.asarray(matrix, dtype=float)
    sym = (a + a.T) / 2
    vals, vecs = np.linalg.eigh(sym)
    vals = np.maximum(vals, floor)
    out = (vecs * vals) @ vecs.T
    return (out + out.T) / 2


def shrink_noisy_covariance(matrix: np.ndarray, noise_sd: float) -> np.ndarray:
    """A PSD estimate of a covariance observed with i.i.d. symmetric noise of standard deviation
    ``noise_sd`` per entry (post-processing of a DP matrix with its public noise scale: no privacy cost).

    Spiked Wigner model: a ``p x p`` matrix ``A + N``, ``N`` symmetric with i.i.d. entries of variance
    ``s^2``, has a noise bulk on ``[-2 s sqrt(p), 2 s sqrt(p)]``; an eigenvalue ``lambda`` of ``A`` above
    ``s sqrt(p)`` appears at ``mu = lambda + s^2 p/lambda`` (Benaych-Georges & Nadakuditi 2011, the
    BBP transition). Each observed ``mu`` above the bulk edge is mapped back to
    ``lambda = (mu + sqrt(mu^2 - 4 s^2 p))/2``, eigenvalues inside the bulk to 0, keeping the observed
    eigenvectors. :func:`psd_repair` keeps the noise eigenvalues (clipping only the negative ones), so
    samples drawn from it carry the noise's variance, ``~ s sqrt(p)`` per direction, in every
    direction; on mnist-10k it hid the classes from an RBF SVM once ``p`` was large.
    ``noise_sd = 0`` is :func:`psd_repair`.
    """
    if noise_sd < 0 or not math.isfinite(noise_sd):
        raise ValueError(f"noise_sd must be finite and >= 0, got {noise_sd}")
    a = np.asarray(matrix, dtype=float)
    vals, vecs = np.linalg.eigh((a + a.T) / 2)
    p = vals.size
    edge = 2.0 * noise_sd * math.sqrt(p)
    spike = (vals + np.sqrt(np.maximum(vals**2 - 4.0 * noise_sd**2 * p, 0.0))) / 2.0
    vals = np.where(vals > edge, spike, 0.0) if noise_sd > 0 else np.maximum(vals, 0.0)
    out = (vecs * vals) @ vecs.T
    return (out + out.T) / 2


def haar_stiefel(d: int, p: int, rng: np.random.Generator, method: str = "haar") -> np.ndarray:
    """Random ``(d, p)`` matrix with orthonormal columns (``W^T W = I_p``).

    ``method="haar"``: QR of a standard Gaussian matrix with column signs fixed by ``diag(R)``,
    which is uniform (Haar) on the Stiefel manifold (Mezzadri 2007) as RON-Gauss's DFM theorem
    needs. ``method="paper"``: QR of a Uniform(0, 1) matrix, as in the RON-Gauss paper's public
    code (not Haar; for reproduction only). Data-independent: costs no privacy budget.
    """
    if not (1 <= p <= d):
        raise ValueError(f"need 1 <= n_components <= n_features, got n_components={p}, d={d}")
    if method == "haar":
        g = rng.standard_normal((d, p))
    elif method == "paper":
        g = rng.uniform(0.0, 1.0, size=(d, p))
    else:
        raise ValueError(f"projection must be 'haar' or 'paper', got {method!r}")
    q, r = np.linalg.qr(g)
    if method == "haar":
        signs = np.sign(np.diag(r))
        signs[signs == 0] = 1.0
        q = q * signs
    return q


def image_dct_basis(image_shape: tuple[int, ...], p: int) -> np.ndarray:
    """The ``p`` lowest-frequency functions of the orthonormal 2-D DCT-II basis of ``image_shape``
    images, as the columns of a ``(h w, p)`` matrix ``W`` (``W^T W = I_p``); pixels in row-major order.

    A public basis: it depends only on the image shape (public metadata), never on the data, so it
    costs no privacy budget, like the random ``W`` of :func:`haar_stiefel`, while keeping far more
    of a natural image's mass in few components (the JPEG transform; Ahmed, Natarajan & Rao, "Discrete
    Cosine Transform", IEEE Trans. Computers 1974). Frequencies ``(u, v)`` are ordered by ``u + v``,
    then ``max(u, v)``, then ``u`` (a zig-zag scan).

    Raises
    ------
    ValueError
        ``image_shape`` not 2-D (a trailing channel axis of size 1 is allowed), or ``p`` outside
        ``[1, h w]``.
    """
    from scipy.fft import dct  # local: scipy.fft is only needed here

    shape = tuple(int(s) for s in image_shape)
    if len(shape) == 3 and shape[2] == 1:
        shape = shape[:2]
    if len(shape) != 2 or min(shape) < 1:
        raise ValueError(f"image_shape must be (height, width), got {image_shape!r}")
    h, w = shape
    if not (1 <= p <= h * w):
        raise ValueError(f"need 1 <= n_components <= {h * w} pixels, got n_components={p}")
    rows, cols = dct(np.eye(h), norm="ortho", axis=0), dct(np.eye(w), norm="ortho", axis=0)
    freqs = sorted(((u, v) for u in range(h) for v in range(w)), key=lambda t: (t[0] + t[1], max(t), t[0]))
    return np.stack([np.outer(rows[u], cols[v]).ravel() for u, v in freqs[:p]], axis=1)


def gaussian_epsilon(sigma: float, sensitivity: float, delta: float) -> float:
    """Smallest epsilon for which ``N(0, sigma^2)`` noise on an ``S2 = sensitivity`` query is
    (epsilon, delta)-DP: the inverse in epsilon of the exact privacy curve
    :func:`dpcore.calibration.gaussian_delta` (Balle & Wang 2018, Thm 8), which decreases in epsilon.

    Returns ``inf`` for ``sigma = 0`` and 0 when even epsilon = 0 meets ``delta``.
    """
    dlt = check_delta(delta)
    if sensitivity <= 0:
        return 0.0
    if sigma <= 0:
        return math.inf

    def excess(eps: float) -> float:
        return float(gaussian_delta(sigma, sensitivity, eps)) - dlt

    if excess(0.0) <= 0:
        return 0.0
    from scipy import optimize  # lazy: importing scipy.optimize costs ~0.6 s at app start

    hi = 1.0
    while excess(hi) > 0:
        hi *= 2.0
    eps = optimize.brentq(excess, 0.0, hi, xtol=1e-13, rtol=1e-12, maxiter=500)
    while excess(eps) > 0:  # land on the safe side of the root
        eps = math.nextafter(eps, math.inf) * (1 + 1e-12)
    return float(eps)


def kenthapadi_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """``sigma = S2 sqrt(2 (ln(1/(2 delta)) + epsilon)) / epsilon`` (Kenthapadi et al. 2013; DPPro
    Lemma 3 / Thm 2; the calibration DPMix section IV cites). Needs ``delta < 1/2``.

    Sound but conservative: its exact delta (Balle & Wang 2018, Thm 8) is at most 0.074 times the
    target on eps in [0.01, 50], delta in [1e-8, 0.4]. ``epsilon = inf`` gives 0.

    Raises
    ------
    ValueError
        ``delta >= 1/2`` (the formula's condition).
    """
    dlt = check_delta(delta)
    if dlt >= 0.5:
        raise ValueError(f"delta must be < 0.5 for the paper's calibration "
                         f"sqrt(2(ln(1/(2 delta)) + eps))/eps, got {delta!r}")
    if math.isinf(epsilon):
        return 0.0
    return float(sensitivity) * math.sqrt(2.0 * (math.log(1.0 / (2.0 * dlt)) + epsilon)) / epsilon


# Public-rule defaults (issue 13, item 5)
# --------------------------------------------------------------------------------------------

#: the ``noise`` value that lets :func:`resolve_noise` choose
NOISE_AUTO = "auto"


def resolve_noise(noise: str, delta: float | None) -> tuple[str, str]:
    """The noise a ``noise="auto"`` release uses, and why.

    Rule: ``"gaussian"``, with the ``delta`` given or, left empty, the automatic
    :func:`default_delta` of ``n`` (``min(1e-5, n^-1.5)``, well below ``1/n``). Gaussian noise is
    calibrated to L2 sensitivities, which do not grow with ``p`` or ``d`` (second moments
    ``sqrt(2)/n``, means ``2/n`` for rows of norm <= 1, SPEC section 10) where the L1 ones grow like
    ``p`` (model) and ``d^2`` (DP basis): for the same epsilon it adds far less noise
    (:func:`recommended_mechanism`), so the recommended setting is the default. Pure epsilon-DP
    (the papers' Laplace mechanism, no delta) is ``noise="laplace"``, by name. ``"laplace"`` and
    ``"gaussian"`` are returned unchanged.

    Returns
    -------
    tuple[str, str]
        ``(noise, reason)``, ``noise`` in ``{"laplace", "gaussian"}``; ``reason`` is written on the
        release card (``details["noise_choice"]``).

    Raises
    ------
    ValueError
        An unknown ``noise``.
    """
    if noise in ("laplace", "gaussian"):
        return noise, f"noise={noise!r} given"
    if noise != NOISE_AUTO:
        raise ValueError(f"noise must be 'auto', 'laplace' or 'gaussian', got {noise!r}")
    given = f"delta = {delta:g} was given" if delta is not None and delta > 0 else \
        "delta left empty takes its automatic value min(1e-5, n^-1.5)"
    return "gaussian", (f"noise='auto': Gaussian noise ({given}): on L2 sensitivities, which do not grow "
                        "with p or d, it adds far less noise than Laplace for the same epsilon; choose "
                        "noise='laplace' for pure epsilon-DP (dpcore.calibration.resolve_noise)")


#: E ||N||_* / (sigma p^1.5) for a p x p symmetric matrix N with i.i.d. N(0, sigma^2) entries on
#: the upper triangle, as p grows: the Wigner semicircle of radius 2 sigma sqrt(p) has mean
#: |eigenvalue| 8 sigma sqrt(p)/(3 pi)
WIGNER_TRACE_NORM = 8.0 / (3.0 * math.pi)


#: the DP-basis budget fractions the rule chooses from
PCA_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)


def recommended_n_components(
    n_rows: int, n_features: int, *, epsilon: float, delta: float | None = None, n_classes: int = 1,
    model_share: float = 0.81, dp_basis: bool = False, basis_l1: float | None = None,
    pca_fraction: float | None = None, row_norm: float = 1.0, n_components: int | None = None,
    random_basis: bool = False, mean_share: float | None = None, tied: bool = False,
    identity: bool = False,
) -> dict:
    """The number of components ``p`` of a projected Gaussian model and, with a DP basis, the
    budget fraction spent on it, from public facts only (issue 13, item 5).

    Rule (derived, never fitted to private data): rows are scaled to norm ``<= 1`` (by the public
    row-norm bound), so their second moment has trace ``<= 1``. Take the public reference spectrum
    ``lambda_j = 1/(j H_d)`` (Zipf, trace 1; ``H_d`` the harmonic number: the data's own spectrum is
    private) and minimise over ``p`` in ``[1, d - 1]`` (and the basis fraction ``f`` in
    :data:`PCA_FRACTIONS`) the predicted trace-norm error of the model's rank-``p`` second moment

    ``E(p, f) = sum_{j > p} lambda_j + sum_{j <= p, lambda_j <= tau(f)} lambda_j
    + WIGNER_TRACE_NORM * sigma_M(p, f) * p^1.5``:

    * the first sum is the mass the projection leaves out; with ``random_basis`` (RON-Gauss: a
      Haar-random ``W`` drawn without looking at the data) it is ``1 - p/d`` whatever the spectrum,
      since a uniformly random ``p``-dimensional subspace keeps ``p/d`` of every direction's mass in
      expectation (``E[W W^T] = (p/d) I``), and there is no basis noise;
    * the second is the mass of the directions a DP basis cannot find: a spike ``lambda`` of a
      ``d x d`` matrix with i.i.d. symmetric noise of standard deviation ``sigma_B`` per entry is
      detectable only above ``tau = sigma_B sqrt(d)`` (Baik, Ben Arous & Peche 2005; Benaych-Georges &
      Nadakuditi 2011), where ``sigma_B`` is the basis noise for ``f`` of the budget: Gaussian
      ``sqrt(2)/(n sqrt(2 f rho))`` (L2 sensitivity ``sqrt(2)``, ``rho`` from
      :func:`dpcore.accounting.zcdp_rho`), Laplace ``sqrt(2) basis_l1/(n f epsilon)``; 0 for a
      public or no basis;
    * the last term is the expected trace norm of the ``p x p`` noise of the model's second moment
      (semicircle law), ``sigma_M`` the per-entry noise of the second moment of one average class
      (``n/classes`` rows) with ``model_share (1 - f)`` of the budget: Gaussian
      ``sqrt(2)/(n_c sqrt(2 rho share))``, Laplace ``sqrt(2) (p + 1)/(n_c epsilon share)``
      (the L1 sensitivity ``(p + 1)`` of rows in the unit ball).

    Classification with one Gaussian per class (``mean_share`` given, the class means' share of the
    non-basis budget): the classes are told apart by their means, while the second moments' noise,
    PSD-repaired, widens every class alike; the noise term is then the expected squared error of one
    class mean, ``p sigma_mu^2``, ``sigma_mu`` its per-coordinate noise (``n/classes`` rows): Gaussian
    ``2/(n_c sqrt(2 rho mean_share (1 - f)))`` (L2 sensitivity 2 of the per-class sums), Laplace
    ``sqrt(2) 2 sqrt(p)/(n_c epsilon mean_share (1 - f))`` (L1 ``2 sqrt(p)``). A component is then
    kept while its reference variance ``lambda_p`` exceeds ``sigma_mu^2`` (and the basis can find it).
    PCA-Gauss passes ``mean_share`` with Gaussian noise only: with Laplace noise the second moments'
    per-entry noise grows like ``p`` (L1 sensitivity ``p + 1``) and their trace-norm term decides
    (on Adult at epsilon = 10 the class-mean criterion's p = 104 gave 0.795 against 0.809 at p = 30).

    A tied covariance (``tied=True`` with ``mean_share``: one pooled second moment of all ``n`` rows,
    PCA-Gauss ``covariance_type="tied"``): its noise no longer dominates, so the noise term is the
    sum of the expected squared errors of one class mean and of the pooled covariance (Frobenius),
    ``p sigma_mu^2 + p^2 sigma_T^2``, ``sigma_T`` the per-entry noise of the pooled second moment of
    ``n`` rows with ``model_share (1 - f)``: Gaussian ``sqrt(2)/(n sqrt(2 rho share))``, Laplace
    ``sqrt(2) (p + 1)/(n epsilon share)`` (the objective :func:`tied_mean_share` splits the budget by).

    ``identity=True`` also weighs ``p = d`` with the identity basis (PCA-Gauss
    ``pca_source="identity"``: no projection, no basis budget): nothing is left out or hidden, so its
    error is the noise term alone at ``p = d`` with the whole model share. It wins on narrow tables,
    where the few directions a projection drops hold more than the noise of keeping them (a wage
    table of year and age: ``p = 1`` kept one mixed direction and a regression trained on the file
    lost the label's dependence on age at every epsilon; RMSE at epsilon = 10, 18.9 against 15.8 with
    the identity, the non-private model 15.4). The record's ``basis`` says which won.

    ``model_share`` is the second moments' share of the non-basis budget (PCA-Gauss's defaults:
    ``0.9 * 0.9`` with a DP class histogram). A given ``pca_fraction`` or ``n_components`` is used as it
    is (the rule then chooses the other). ``row_norm`` is recorded only.

    Returns
    -------
    dict
        ``n_components``, ``pca_fraction`` (``None`` without a DP basis) and the rule's inputs and
        predicted error, for the release card's ``details["recommended"]``.
    """
    from dpcore import accounting  # local: accounting is heavy and imports nothing from here

    n, d = int(n_rows), int(n_features)
    if d < 2:
        raise ValueError("n_components: the data need at least 2 features to be projected")
    n_c = max(1.0, n / max(1, int(n_classes)))
    gaussian = delta is not None
    p = np.arange(1, d)
    lam = 1.0 / (np.arange(1, d + 1) * np.sum(1.0 / np.arange(1, d + 1)))
    tail = 1.0 - (p / d if random_basis else np.cumsum(lam)[:-1])
    dp_basis = dp_basis and not random_basis
    allowed = np.ones(p.size, dtype=bool) if n_components is None else p == int(n_components)
    rho = accounting.zcdp_rho(epsilon, delta) if gaussian and not math.isinf(epsilon) else math.inf
    fractions = ([pca_fraction] if pca_fraction is not None else list(PCA_FRACTIONS)) if dp_basis else [0.0]

    def noise_error(p: np.ndarray, f: float) -> tuple[np.ndarray, np.ndarray]:
        """The model's noise term at ``p`` components with ``f`` of the budget on the basis, and the
        per-entry noise sd of its second moment."""
        share = model_share * (1.0 - f)
        if math.isinf(epsilon):
            sigma_m = np.zeros(p.size)
        elif gaussian:
            sigma_m = np.full(p.size, math.sqrt(2.0) / (n_c * math.sqrt(2.0 * rho * share)))
        else:
            sigma_m = math.sqrt(2.0) * (p + 1) / (n_c * epsilon * share)
        if mean_share is None:
            return WIGNER_TRACE_NORM * sigma_m * p**1.5, sigma_m
        model_error = p * _class_mean_sd(p, n_c, epsilon, rho, mean_share * (1.0 - f), gaussian) ** 2
        if tied:  # the pooled second moment of all n rows (n_c / n of the per-class noise)
            model_error = model_error + (p * sigma_m * n_c / n) ** 2
        return model_error, sigma_m

    best: tuple[float, int, float, float] | None = None
    for f in fractions:
        if math.isinf(epsilon) or gaussian:
            tau = (math.sqrt(2.0) / (n * math.sqrt(2.0 * f * rho)) * math.sqrt(d)
                   if f > 0 and not math.isinf(epsilon) else 0.0)
        else:
            s1 = basis_l1 if basis_l1 is not None else d * (d + 1) / 2
            tau = math.sqrt(2.0) * s1 / (n * f * epsilon) * math.sqrt(d) if f > 0 else 0.0
        hidden = np.cumsum(np.where(lam[:-1] <= tau, lam[:-1], 0.0))
        model_error, sigma_m = noise_error(p, f)
        error = np.where(allowed, tail + hidden + model_error, np.inf)
        j = int(np.argmin(error))
        if best is None or error[j] < best[0]:
            best = (float(error[j]), int(p[j]), f, float(sigma_m[j]))
    assert best is not None
    basis = "dp" if dp_basis else ("random" if random_basis else "public")
    identity_error = None
    if identity and (n_components is None or int(n_components) == d):
        err, sig = noise_error(np.array([d]), 0.0)
        identity_error = float(err[0])
        if identity_error < best[0]:
            best, basis = (identity_error, d, 0.0, float(sig[0])), "identity"
    return {
        "n_components": best[1],
        "pca_fraction": best[2] if dp_basis and basis != "identity" else None,
        "basis": basis,
        "identity_error": identity_error,
        "rule": ("minimise (1 - p/d) + (8/(3 pi)) sigma_M p^1.5: the second-moment mass a random "
                 "orthonormal projection leaves out (E[W W^T] = (p/d) I), plus the expected trace norm of "
                 "the p x p noise" if random_basis else
                 "minimise tail(p) + hidden(p, f) + (8/(3 pi)) sigma_M p^1.5: the second-moment mass lost "
                 "by the projection and by a DP basis (below the BBP threshold sigma_B sqrt(d)) under a "
                 "public Zipf reference spectrum lambda_j = 1/(j H_d), plus the expected trace norm of the "
                 "p x p noise") + "; public facts only (dpcore.calibration.recommended_n_components)",
        "inputs": {"n": n, "d": d, "classes": int(n_classes), "epsilon": epsilon, "delta": delta,
                   "noise": "gaussian" if gaussian else "laplace", "model_share": model_share,
                   "dp_basis": dp_basis, "random_basis": random_basis, "mean_share": mean_share,
                   "tied_covariance": tied,
                   "row_norm_bound": row_norm},
        "predicted_error": best[0],
        "noise_sd_per_entry": best[3],
    }


def _class_mean_sd(p: np.ndarray, n_c: float, epsilon: float, rho: float, share: float,
                   gaussian: bool) -> np.ndarray:
    """Per-coordinate noise sd of one class mean of rows of norm <= 1 (sums over ``n_c`` rows, the
    per-class sums' sensitivities: L2 2, L1 ``2 sqrt(p)``), with ``share`` of the budget."""
    if math.isinf(epsilon):
        return np.zeros(p.size)
    if gaussian:
        return np.full(p.size, 2.0 / (n_c * math.sqrt(2.0 * rho * share)))
    return math.sqrt(2.0) * 2.0 * np.sqrt(p) / (n_c * epsilon * share)


def tied_mean_share(n_components: int, n_classes: int, *, gaussian: bool = True) -> dict:
    """The class means' share of a tied Gaussian mixture's model budget (PCA-Gauss
    ``covariance_type="tied"``, ``epsilon_split`` empty), from public facts only: ``p`` and the number
    of classes ``K``.

    Rule (derived): rows of norm ``<= 1``, ``n_c = n/K`` rows per class. With a share ``s`` for the
    ``K`` class sums (L2 sensitivity 2) and ``1 - s`` for the pooled ``p x p`` second moment of all ``n``
    rows (L2 ``sqrt(2)``), the expected squared errors of one class mean and of the pooled
    covariance (Frobenius) are ``A/s = 4 p K^2/(2 rho n^2 s)`` and ``B/(1 - s) = 2 p^2/(2 rho n^2 (1 - s))``.
    Their sum is smallest at ``s/(1 - s) = sqrt(A/B) = K sqrt(2/p)`` (Lagrange). Laplace noise (L1
    sensitivities ``2 sqrt(p)`` and ``p + 1``): the errors go like ``1/s^2``, so
    ``s/(1 - s) = (A'/B')^(1/3) = (4 K^2/(p + 1)^2)^(1/3)``. ``n``, epsilon and delta cancel. The
    share is clamped to ``[0.1, 0.9]``. On mnist-10k (``K = 10``, ``p = 85``) it gives 0.61 where
    the paper's full-covariance split is 0.1.

    Returns
    -------
    dict
        ``mean_share`` and the rule's statement and inputs, for the card's
        ``details["epsilon_split_rule"]``.
    """
    p, k = max(1, int(n_components)), max(1, int(n_classes))
    ratio = k * math.sqrt(2.0 / p) if gaussian else (4.0 * k * k / (p + 1.0) ** 2) ** (1.0 / 3.0)
    share = min(0.9, max(0.1, ratio / (1.0 + ratio)))
    return {"mean_share": share,
            "rule": ("class means' share s with s/(1 - s) = K sqrt(2/p)" if gaussian else
                     "class means' share s with s/(1 - s) = (4 K^2/(p + 1)^2)^(1/3)")
            + ", clamped to [0.1, 0.9]: minimises the expected squared error of a class mean plus that "
              "of the pooled covariance (dpcore.calibration.tied_mean_share)",
            "inputs": {"n_components": p, "classes": k, "noise": "gaussian" if gaussian else "laplace"}}


def recommended_mechanism(task: str, n_rows: int, n_features: int, *, epsilon: float,
                          delta: float | None = None, n_classes: int = 1,
                          image_shape: tuple[int, ...] | None = None) -> dict:
    """The recommended mechanism and noise for a task and data shape, from public facts only.

    Rule: with labels (classification or regression) and ``d >= 2``, PCA-Gauss: a DP basis keeps
    the directions with the most mass (``tail(p)`` of :func:`recommended_n_components`), while a
    random orthonormal projection (RON-Gauss) keeps a fraction ``p/d`` of every direction's mass
    whatever the spectrum. Its noise is ``noise="gaussian"``, with the ``delta`` given or, left empty,
    its automatic value :func:`default_delta` (``min(1e-5, n^-1.5)``): the L2 sensitivities of the
    second moments (``sqrt(2)/n``) do not grow with ``p`` or ``d`` while the L1 ones grow like ``p``
    (model) and ``d^2`` (basis), so the Laplace variant (pure epsilon, ``noise="laplace"``) needs
    about ``p`` (and ``d``) times the epsilon for the same noise. Images
    (a public ``image_shape`` whose pixels are the ``d`` features): ``pca_source="dct"``, the
    low-frequency DCT basis (:func:`image_dct_basis`), which needs no budget, where a DP basis of
    ``d = 784`` pixels hides every direction below its noise (BBP threshold ``sigma_B sqrt(d)``; on
    mnist-10k at epsilon = 1 only the mean image is found), and for image classification
    ``covariance_type="tied"``: one pooled within-class covariance of all ``n`` rows instead of one per
    class (``p x p`` with ``p`` in the hundreds: per-class second moments of ``n/K`` rows drown in their
    noise; mnist-10k at epsilon = 1, delta = 1e-6: SVM accuracy 0.57 -> 0.75, README). Tabular data keep
    the paper's per-class covariances (the default). Without
    labels: RON-Gauss (its basis is public, so real rows can be mapped into the release; PCA-Gauss
    Alg. 1 releases coordinates in a private basis), Gaussian noise under the same condition.
    ``p`` and the budget split then follow :func:`recommended_n_components`.

    Returns
    -------
    dict
        ``mechanism`` (CLI name), ``parameters`` and ``reason``.
    """
    # delta empty: its automatic value min(1e-5, n^-1.5) (what the mechanisms use), Gaussian noise
    automatic = delta is None
    delta_used = default_delta(n_rows) if automatic else delta
    if task not in ("classification", "regression") and n_features >= 2:
        from dpcore.unsupervised import recommended_unsupervised  # no labels: its own public rule

        rule = recommended_unsupervised(n_rows, n_features, epsilon=epsilon, delta=delta_used)
        params = dict(rule["parameters"])
        if automatic:
            params.pop("delta", None)
        return {"mechanism": rule["mechanism"], "parameters": params, "reason": rule["reason"]}
    params: dict = {"noise": "gaussian"} if automatic else {"noise": "gaussian", "delta": delta}
    image = image_shape is not None and int(np.prod(image_shape)) == n_features
    noise = ("Gaussian noise (zCDP, delta " + (f"= {delta:g}" if not automatic else
                                              f"automatic: min(1e-5, n^-1.5) = {delta_used:.2g}")
             + "): L2 sensitivities do not grow with p or d; noise='laplace' for pure epsilon")
    if task in ("classification", "regression") and n_features >= 2:
        basis = ("images: the low-frequency 2-D DCT basis of the public image shape (no budget) keeps "
                 "most of an image's mass" if image else
                 "a DP PCA basis keeps the directions with the most mass, or, where the table is "
                 "narrow for its budget, no projection at all (pca_source chosen with p by "
                 "recommended_n_components)")
        model = (f"one Gaussian per class ({n_classes} public classes)" if task == "classification"
                 else "one Gaussian of [features, label]")
        if image:
            params["pca_source"] = "dct"
            if task == "classification":
                params["covariance_type"] = "tied"
                model = (f"one Gaussian per class ({n_classes} public classes) sharing one pooled "
                         "covariance (covariance_type='tied': its noise is relative to n, not to each "
                         "class size; the class means get the budget tied_mean_share gives)")
        return {"mechanism": "pca-gauss", "parameters": params,
                "reason": f"labelled data, d = {n_features}: {basis}, then {model}; {noise}"}
    return {"mechanism": "ron-gauss", "parameters": params,
            "reason": "no labels: a public random orthonormal basis, so real rows map into the release; "
                      f"{noise}"}
