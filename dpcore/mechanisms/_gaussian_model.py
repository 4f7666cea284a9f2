"""Gaussian generative models shared by RON-Gauss, PCA-Gauss and MODIPS.

Sampling synthetic rows from a (DP) mean and covariance, the symmetric noise added to a second
moment, the number of components ``p`` and the affine map of a regression label onto ``[-a, a]``
and back. Public post-processing and shape checks only: the noise scales are set by each
mechanism from its own sensitivities.

The scikit-learn style ``fit`` / ``sample`` of the three generative mechanisms lives here too:
:class:`GaussianGenerator` (their common base) runs ``fit`` (everything that reads the private
rows: the noise and the DP statistics) into a :class:`GaussianModel` (a DP Gaussian, or one per
class) and an :class:`OutputMap` (the public decoding into the release's space); ``sample`` and
``release`` draw rows from them, which is free post-processing.

``noise="gaussian"`` variants share :class:`ZCDPBudget` (zCDP composition of the Gaussian
statistics of one release, Bun & Steinke 2016, converted once to (epsilon, delta) with Canonne,
Kamath & Steinke 2020) and :func:`second_moment_l2_sensitivity`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, ClassVar

import numpy as np

from dpcore import accounting, engines
from dpcore import noise as dpnoise
from dpcore.calibration import EpsilonSplit
from dpcore.exceptions import NonFiniteNoiseError
from dpcore.limits import check_memory
from dpcore.mechanisms._labels import largest_remainder
from dpcore.mechanisms.base import Mechanism, _check_n_samples, _privacy_parameters, check_finite_release
from dpcore.noise import BitSource, NoiseDraw, noise_source
from dpcore.preprocessing import PreparedInput
from dpcore.release import Exploration, NoiseRecord, Release
from dpcore.schema import Param
from dpcore.table import drawing, engine_of
from dpcore.threads import blas_limit
from dpcore.validation import check_random_state

__all__ = [
    "GAUSSIAN_DELTA",
    "NOISE",
    "NOISE_CHOICES",
    "FittedGaussian",
    "GaussianGenerator",
    "GaussianModel",
    "OutputMap",
    "ZCDPBudget",
    "add_matrix_noise",
    "second_moment_l2_sensitivity",
    "zcdp_sigma",
    "check_n_components",
    "default_n_components",
    "gaussian_samples",
    "label_to_unit",
    "mixture_weights",
    "unit_to_label",
]


def default_n_components(n_features: int) -> int:
    """Default projection dimension ``p``: Meckes's DFM range ``p < 2 ln d / ln ln d``.

    RON-Gauss section 3.4 (after Meckes 2012): the projections are near Gaussian for
    ``p < 2 log(d)/log(log(d))`` (d = 100 -> p <= 13 in the paper's words; the formula gives 8).
    Returns the floor of that bound, clamped to ``[1, d - 1]``. Data-independent, so it costs no
    budget. Also used as PCA-Gauss's default.
    """
    d = int(n_features)
    if d <= 2:
        return 1
    loglog = math.log(math.log(d))
    bound = 2 * math.log(d) / loglog if loglog > 0 else float(d - 1)
    return int(max(1, min(d - 1, math.floor(bound))))


def check_n_components(value: int | None, n_features: int) -> int:
    """Validate ``n_components`` (p) against ``n_features`` (d): need ``1 <= p < d``.

    Raises
    ------
    ValueError
        Naming ``n_components`` when ``p >= d`` (dimension reduction is the point of both RON-Gauss
        and PCA-Gauss) or when the data have a single feature.
    """
    if n_features < 2:
        raise ValueError("n_components: the data need at least 2 features to be projected")
    p = default_n_components(n_features) if value is None else int(value)
    if not (1 <= p < n_features):
        raise ValueError(
            f"n_components must satisfy 1 <= n_components < n_features = {n_features}, got {p}"
        )
    return p


def gaussian_samples(
    mean: np.ndarray, cov: np.ndarray, size: int, rng: np.random.Generator
) -> np.ndarray:
    """``size`` draws of ``N(mean, cov)`` for a symmetric PSD ``cov`` (call :func:`psd_repair`
    first). Uses the eigendecomposition, so a singular ``cov`` is fine. Shape ``(size, k)``.

    Drawn block by block into the output (the same standard normals, in the same order, as one
    ``(size, k)`` draw), so the only large allocation is the result."""
    vals, vecs = np.linalg.eigh(cov)
    k = cov.shape[0]
    factor_t = (vecs * np.sqrt(np.clip(vals, 0.0, None))).T
    # drawn by the engine of the release's rows (dpcore.table.drawing): in memory, or lazily per part
    return drawing().normal_rows(rng, size, k, factor_t, np.asarray(mean, dtype=float))


def add_matrix_noise(
    M: np.ndarray, sensitivity: float, scale: float, bits: BitSource, *, full_matrix: bool = False,
    n_statistics_changed: int = 1,
) -> tuple[np.ndarray, NoiseDraw]:
    """``M`` (k x k) through the exact grid Laplace mechanism (:mod:`dpcore.noise`): on the upper
    triangle (diagonal included) and mirrored (default, SPEC section 1; ``n_changed = k(k+1)/2``), or
    on every entry (``full_matrix=True``; ``n_changed = k^2``); ``scale``: the calibrated ``S1/epsilon``
    (:func:`dpcore.noise.laplace_plan`); ``n_statistics_changed``: how many such matrices the
    sensitivity covers jointly can change (2 for per-class sums when a record may change class).
    A new array and the draw; ``scale = 0`` adds nothing."""
    k = M.shape[0]
    if full_matrix:
        draw = dpnoise.laplace(M, sensitivity, scale=scale, n_changed=n_statistics_changed * M.size,
                               bits=bits)
        return draw.values, draw
    return dpnoise.symmetric_laplace(M, sensitivity, scale=scale, bits=bits,
                                     n_changed=n_statistics_changed * k * (k + 1) // 2)


def label_to_unit(y: np.ndarray, label_bounds: tuple[float, float], a: float) -> np.ndarray:
    """Affine map of labels from their public ``[lo, hi]`` onto ``[-a, a]``."""
    lo, hi = label_bounds
    half = (hi - lo) / 2 if hi > lo else 1.0
    return a * (y - (lo + hi) / 2) / half


def unit_to_label(y: np.ndarray, label_bounds: tuple[float, float], a: float) -> np.ndarray:
    """Inverse of :func:`label_to_unit` (post-processing back to the label's units)."""
    lo, hi = label_bounds
    half = (hi - lo) / 2 if hi > lo else 1.0
    return (lo + hi) / 2 + (np.asarray(y) if engine_of(y).in_memory else y) * half / a


NOISE_CHOICES = ("auto", "laplace", "gaussian")
ZCDP_SOURCE = "Bun & Steinke 2016 (zCDP of the Gaussian mechanism)"


#: the ``noise`` parameter of the mechanisms with a Gaussian variant
NOISE = Param("noise", "choice", "auto", "Noise on the statistics: 'gaussian' ((epsilon, delta)-DP, L2 "
                 "sensitivities that grow far slower with p and d, composed in zCDP), 'laplace' (the paper's "
                 "pure epsilon-DP, L1 sensitivities, no delta), or 'auto' (default): Gaussian, with delta "
                 "given or its automatic value (dpcore.calibration.resolve_noise).",
                 choices=NOISE_CHOICES, privacy=True)

#: ``delta`` of the ``noise="gaussian"`` variants (empty: :func:`dpcore.calibration.default_delta`)
GAUSSIAN_DELTA = Param("delta", "float", None, "Failure probability of (epsilon, delta)-DP, in (0, 1), "
                       "for Gaussian noise; empty = automatic, min(1e-5, n^-1.5) (well below 1/n); not used "
                       "with noise='laplace' (pure epsilon).",
                       low=0.0, high=1.0, low_open=True,
                       high_open=True, log=True, privacy=True, optional=True)


def zcdp_sigma(l2_sensitivity: float, rho: float) -> float:
    """``sigma = S2/sqrt(2 rho)``: the Gaussian mechanism is ``S2^2/(2 sigma^2)``-zCDP (Bun &
    Steinke 2016, Prop. 1.6); ``rho = inf`` gives 0 (NOT PRIVATE)."""
    return 0.0 if math.isinf(rho) else l2_sensitivity / math.sqrt(2.0 * rho)


def second_moment_l2_sensitivity(norm2: float, norm4_power4: float | None = None) -> float:
    """L2 sensitivity of the upper triangle (diagonal once) of ``sum_i z_i z_i^T`` under replace-one,
    for rows with ``||z||_2^2 <= norm2`` and ``||z||_4^4 <= norm4_power4`` (default ``norm2^2``).

    The change is ``A = u u^T - v v^T``; its upper-triangle vector has squared norm
    ``T(A) = (||A||_F^2 + sum_i A_ii^2)/2`` with ``||A||_F^2 = ||u||^4 + ||v||^4 - 2 (u.v)^2 <=
    2 norm2^2`` and ``sum_i A_ii^2 = sum_i (u_i^2 - v_i^2)^2 <= ||u||_4^4 + ||v||_4^4 <= 2 norm4``
    (the cross terms are >= 0), so ``S2 = sqrt(norm2^2 + norm4)``. Rows of norm <= 1: ``sqrt(2)``
    (attained by two orthogonal unit rows). The same bound covers per-class sums when a record changes
    class (two sums change, by ``u u^T`` and ``-v v^T``: ``T <= (||u||^4 + ||u||_4^4 + ||v||^4 +
    ||v||_4^4)/2``). Divide by ``n`` for the mean.
    """
    n4 = norm2 * norm2 if norm4_power4 is None else min(float(norm4_power4), norm2 * norm2)
    return math.sqrt(norm2 * norm2 + n4)


@dataclass
class ZCDPBudget:
    """The Gaussian statistics of one ``noise="gaussian"`` release, composed in zCDP.

    ``rho`` splits the total ``rho`` (the largest whose (epsilon, delta) conversion,
    :func:`dpcore.accounting.zcdp_epsilon`, fits the budget after the discrete Gaussian sampler's
    slack is reserved, :func:`dpcore.noise.reserve_slack`) with the same fractions as ``split`` splits
    epsilon (the Laplace variant's shares, kept for the comparison in :attr:`savings`).
    """

    rho: EpsilonSplit
    split: EpsilonSplit
    bits: BitSource
    epsilon: float
    delta: float
    epsilon_ideal: float
    delta_ideal: float
    draws: list[dpnoise.GridNoise] = field(default_factory=list)
    #: per budget part: Laplace noise variance at the same epsilon share over the Gaussian one
    savings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def plan(cls, epsilon: float, delta: float, fractions: dict[str, float], n_coordinates: int,
             bits: BitSource) -> ZCDPBudget:
        """Reserve the sampler's slack for ``n_coordinates`` Gaussian coordinates that can change
        between neighbours (summed over every draw), then split ``rho`` by ``fractions``."""
        eps_i, delta_i = dpnoise.reserve_slack(epsilon, delta, n_coordinates)
        return cls(rho=EpsilonSplit.from_fractions(accounting.zcdp_rho(eps_i, delta_i), fractions),
                   split=EpsilonSplit.from_fractions(epsilon, fractions), bits=bits, epsilon=epsilon,
                   delta=delta, epsilon_ideal=eps_i, delta_ideal=delta_i)

    def add(self, values: np.ndarray, part: str, s2: float, n_changed: int, *, laplace_s1: float,
            statistic: str, formula: str, source: str, matrix: bool = False
            ) -> tuple[np.ndarray, NoiseRecord]:
        """``values`` (a vector, or a symmetric matrix with ``matrix=True``: noise on the upper
        triangle, mirrored) through the grid Gaussian mechanism of :mod:`dpcore.noise` with the zCDP
        share ``rho[part]``: ``sigma = S2'/sqrt(2 rho)`` at the rounding-inflated sensitivity ``S2'``,
        so the statistic costs exactly ``rho[part]``. Records the plan (sampler slack) and the noise
        variance saved against ``Lap(laplace_s1/eps_part)``."""
        rho = self.rho[part]
        plan = dpnoise.calibrated_gaussian_plan(s2, partial(zcdp_sigma, rho=rho), n_changed=n_changed,
                                                bits=self.bits)
        if matrix:
            noisy, _ = dpnoise.symmetric(values, plan)
        else:
            noisy = plan.add(np.asarray(values, dtype=float)).values
        self.draws.append(plan)
        eps_part = self.split[part]
        if plan.scale > 0 and math.isfinite(eps_part):
            self.savings[part] = 2.0 * (laplace_s1 / eps_part) ** 2 / plan.scale**2
        rec = NoiseRecord(
            statistic=statistic, sensitivity=s2, scale=plan.scale, distribution="gaussian", norm="L2",
            rho=rho, formula=f"{formula}; sigma = S2'/sqrt(2 rho_{part}) (zCDP share of the total rho)",
            source=f"{source}; {ZCDP_SOURCE}", **dpnoise.record_fields(plan),
        )
        return noisy, rec

    def guarantee(self, delta_given: bool) -> tuple[float, float, dict[str, Any]]:
        """``(epsilon, delta, details)`` of the release: the zCDP total converted once, with the
        sampler's slack (reserved beforehand, so the nominal budget is met)."""
        eps_ideal = accounting.zcdp_epsilon(math.fsum(self.rho.parts), self.delta_ideal)
        eps_g, delta_g, slack = dpnoise.reserved_guarantee(self.draws, self.epsilon, self.delta,
                                                            eps_ideal, self.delta_ideal)
        details = {
            "delta": self.delta,
            "delta_rule": "given" if delta_given else "min(1e-5, n^-1.5)",
            "rho_total": self.rho.total,
            "rho_parts": self.rho.as_dict(),
            "composition": "zCDP: rho_i = S2'^2/(2 sigma_i^2) summed (Bun & Steinke 2016), converted "
                           "once to (epsilon, delta) (Canonne, Kamath & Steinke 2020, Prop. 12; "
                           "dpcore.accounting.zcdp_epsilon)",
            "noise_slack": slack,
            "laplace_over_gaussian_variance": {
                "note": "per coordinate, Laplace (pure epsilon, same epsilon share, sound L1 "
                        "sensitivity) noise variance / Gaussian noise variance; > 1: Gaussian "
                        "adds less noise", **self.savings},
        }
        return eps_g, delta_g, details


# ------------------------------------------------------------------------------------ fit / sample
def _readonly(arr: Any, dtype: Any = float) -> np.ndarray:
    out = np.array(arr, dtype=dtype)
    out.setflags(write=False)
    return out


def _is_diagonal(cov: np.ndarray) -> bool:
    return not np.any(cov - np.diag(np.diagonal(cov)))


def mixture_weights(weights: np.ndarray, n_samples: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(modelled, shares)``: the classes to model (indices into the public class list) and their
    shares ``w_c / sum(w)`` of the rows. ``weights``: public class sizes ``n_c``, or the DP class
    histogram through :func:`~dpcore.mechanisms._labels.histogram_weights` (the classes are then
    chosen from DP outputs and public facts only).

    ``n_samples=None`` (``fit``): every class with a positive weight (the shares sum to 1).
    ``n_samples = m`` (``release``, one draw of ``m`` rows): only the classes that draw rows among
    ``m`` (:meth:`GaussianModel.component_counts` of the full shares, so the kept shares give the same
    rows per class), as the papers' per-class algorithms do with protected labels; the shares then
    sum to at most 1 and the model serves that one draw."""
    w = np.asarray(weights, dtype=float)
    shares = w / w.sum()
    counts = shares > 0 if n_samples is None else largest_remainder(n_samples, n_samples * shares)
    modelled = np.flatnonzero(counts)
    return modelled, shares[modelled]


@dataclass(frozen=True, eq=False)
class GaussianModel:
    """A fitted DP Gaussian model: one Gaussian, or a mixture with one Gaussian per public class.

    Every array is a DP output or a public fact, so drawing from the model is free post-processing
    (the privacy of the statistics it was built from carries over; Dwork & Roth 2014, Prop. 2.1).
    Arrays are read-only.

    Attributes
    ----------
    weights : ndarray of shape (n_components,)
        Each component's share of the rows: the public class sizes ``n_c/n`` (labels
        within-class, the papers' Alg. 5 / Alg. 3), or the DP class histogram clipped at 0 and
        normalised (labels protected; uniform over the classes when every noisy count is <= 0).
        ``[1.0]`` for one Gaussian. They sum to 1 in a fitted model (``model_``); the model
        ``release`` fits for its one draw keeps only the classes that draw rows
        (:func:`mixture_weights`).
    means : ndarray of shape (n_components, n_features)
        DP means in model space (e.g. RON-Gauss ``W^T mu_c,DP``; 0 where the paper centres
        without a mean).
    covariances : ndarray of shape (n_components, n_features, n_features)
        DP covariances (or second moments), PSD-repaired.
    labels : ndarray of shape (n_components,), optional
        The public class of each component (``None`` without classes). A regression label is not
        here: it is the model's last feature (:class:`OutputMap` decodes it).
    """

    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray
    labels: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", _readonly(self.weights))
        object.__setattr__(self, "means", _readonly(np.atleast_2d(self.means)))
        object.__setattr__(self, "covariances", _readonly(self.covariances))
        if self.labels is not None:
            object.__setattr__(self, "labels", _readonly(self.labels, dtype=np.asarray(self.labels).dtype))
        k, f = self.means.shape
        if self.weights.shape != (k,) or self.covariances.shape != (k, f, f) or (
                self.labels is not None and self.labels.shape != (k,)):
            raise ValueError(f"GaussianModel: weights {self.weights.shape}, means {self.means.shape}, "
                             f"covariances {self.covariances.shape} do not describe the same components")

    @classmethod
    def single(cls, mean: np.ndarray, cov: np.ndarray) -> GaussianModel:
        """One Gaussian ``N(mean, cov)`` (weight 1, no label)."""
        return cls(np.ones(1), np.asarray(mean, dtype=float)[None, :], np.asarray(cov, dtype=float)[None])

    @property
    def n_components(self) -> int:
        return int(self.weights.size)

    @property
    def n_features(self) -> int:
        return int(self.means.shape[1])

    def component_counts(self, n_samples: int) -> np.ndarray:
        """Rows per component for ``n_samples`` rows: ``n_samples * weights`` rounded by the largest
        remainder method (:func:`~dpcore.mechanisms._labels.largest_remainder`), so the class sizes
        follow the weights exactly (``n_c`` rows per class at ``n_samples = n`` with public class
        sizes) rather than a multinomial draw."""
        return largest_remainder(int(n_samples), int(n_samples) * self.weights)

    def sample(self, n_samples: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        """Draw ``n_samples`` rows, component by component in order.

        Returns
        -------
        (ndarray of shape (n_samples, n_features), ndarray of shape (n_samples,) or None)
            Rows in model space (:func:`gaussian_samples`; a diagonal covariance draws independent
            coordinates, ``z * sqrt(diag)``) and each row's component label (``None`` without
            labels). The rows are drawn by :func:`dpcore.table.drawing` (lazy rows while a lazily opened
            table is released).
        """
        counts = self.component_counts(n_samples)
        chunks = [self._component_rows(c, int(size), rng) for c, size in enumerate(counts)]
        rows = chunks[0] if len(chunks) == 1 else np.vstack(chunks)
        labels = None if self.labels is None else np.repeat(self.labels, counts)
        return rows, labels

    def _component_rows(self, c: int, size: int, rng: np.random.Generator) -> np.ndarray:
        mean, cov = self.means[c], self.covariances[c]
        if not _is_diagonal(cov):
            return gaussian_samples(mean, cov, size, rng)
        rows = drawing().normal_rows(rng, size, mean.size)
        rows = rows * np.sqrt(np.clip(np.diagonal(cov), 0.0, None))
        return rows + mean if np.any(mean) else rows


@dataclass(frozen=True, eq=False)
class OutputMap:
    """Public decoding of model-space rows into the release's space (post-processing).

    Steps, in order, each skipped when its fields are ``None``:

    1. ``label_bounds``: the model's last column is a regression label on ``[-a, a]``
       (``a = label_scale``), mapped back to the label's units (:func:`unit_to_label`); the other
       columns are the features.
    2. ``basis`` ``(d, p)``: reconstruction ``x~ W^T + offset`` (RON-Gauss ``reconstruct=True``,
       ``offset`` = ``mu_DP`` for Alg. 3/4).
    3. ``box_lo``/``box_centre``/``box_factor``/``active`` (each ``(d,)``): the box map undone,
       ``x = centre + z/factor`` on the active (non-constant) features, ``lo`` elsewhere (MODIPS;
       :class:`~dpcore.mechanisms._box.BoxMap`).

    ``n_features_out`` is the number of released feature columns.
    """

    n_features_out: int
    label_bounds: tuple[float, float] | None = None
    label_scale: float = 1.0
    basis: np.ndarray | None = None
    offset: np.ndarray | None = None
    box_lo: np.ndarray | None = None
    box_centre: np.ndarray | None = None
    box_factor: np.ndarray | None = None
    active: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("basis", "offset", "box_lo", "box_centre", "box_factor"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _readonly(getattr(self, name)))
        if self.active is not None:
            object.__setattr__(self, "active", _readonly(self.active, dtype=bool))

    def __call__(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``(values (m, n_features_out), regression labels (m,) or None)`` of model rows ``(m, k)``."""
        labels = None
        if self.label_bounds is not None:
            labels = unit_to_label(rows[:, -1], self.label_bounds, self.label_scale)
            rows = rows[:, :-1]
        if self.basis is not None:
            rows = rows @ self.basis.T
            if self.offset is not None:
                rows = rows + self.offset
        if self.active is not None:  # a row map, on the engine of the drawn rows
            rows = engine_of(rows).map_rows(self._unbox, rows, self.active.size)
        return rows, labels

    def _unbox(self, rows: np.ndarray) -> np.ndarray:
        """Step 3: ``x = centre + z/factor`` on the active features, ``lo`` elsewhere."""
        assert self.active is not None and self.box_lo is not None
        assert self.box_centre is not None and self.box_factor is not None
        active = self.active
        values = np.tile(self.box_lo, (rows.shape[0], 1))
        values[:, active] = self.box_centre[active] + rows[:, : int(active.sum())] / self.box_factor[active]
        return values


@dataclass(frozen=True)
class FittedGaussian:
    """What a generative mechanism's ``_fit`` returns: the model, its decoding and the card.

    ``template`` is the release every table drawn from the model shares (guarantee, noise records,
    public facts, transform, columns) with no rows yet.
    """

    model: GaussianModel
    output_map: OutputMap
    template: Release

    def draw(self, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        """``m`` rows from the model, decoded: ``(X (m, n_features_out), labels (m,) or None)``."""
        rows, labels = self.model.sample(m, rng)
        values, regression = self.output_map(rows)
        return values, (labels if labels is not None else regression)

    def release(self, m: int, rng: np.random.Generator, n_samples: int | None, **changes: Any) -> Release:
        """The card with ``m`` drawn rows (``n_samples``: the card's parameter, when one was asked
        for; ``changes``: other :class:`Release` fields)."""
        X_new, y_new = self.draw(m, rng)
        parameters = dict(self.template.parameters)
        if n_samples is not None:
            parameters["n_samples"] = n_samples
        return dataclasses.replace(self.template, data=X_new, labels=y_new, parameters=parameters, **changes)


DRAWN_NOTE = ("rows drawn from the DP model released by the fit (free post-processing): no privacy budget "
              "was spent on them, the guarantee is the model's and covers every table drawn from it together")


class GaussianGenerator(Mechanism):
    """Base of the generative mechanisms (RON-Gauss, PCA-Gauss, MODIPS): scikit-learn style
    ``fit`` / ``sample`` beside ``release``.

    ``fit(X, y)`` runs everything that reads the private rows (clipping, the DP statistics, all the
    noise) and stores learned attributes ending in ``_`` that hold only DP outputs and public facts:

    model_ : GaussianModel
        The DP Gaussian (mixture) in model space.
    output_map_ : OutputMap
        The public decoding from model space into the release's space.
    guarantee_ : Guarantee
        The guarantee of the model, hence of every table drawn from it; ``epsilon_`` and
        ``delta_`` repeat its numbers.
    noise_ : tuple of NoiseRecord
        The noise of each DP statistic (the card's ``noise``).
    transform_ : callable
        The public map of real rows ``(m, n_features_in_)`` into the release's space
        (:meth:`Release.transform`; raises ``ValueError`` where there is none, PCA-Gauss Alg. 1).
    n_features_in_, n_samples_fit_ : int
        ``d`` and ``n`` of the private input (public facts).
    seeded_ : bool
        Fitted with a fixed ``random_state``: everything drawn from it is a preview that cannot be
        saved.

    ``sample`` and ``sample_release`` never read ``X``. :meth:`release` is the same ``_fit`` and one
    draw from the same generator (one code path; a seeded release is the same preview as before).
    Its fit serves that one draw: with protected labels it models only the classes that draw rows
    (:func:`mixture_weights`, as the papers' per-class algorithms), so it stores nothing on the
    mechanism; the table has the law of ``fit(X, y).sample(n_samples)``.
    """

    #: the learned attributes :meth:`fit` sets (a refit replaces them all)
    LEARNED_ATTRIBUTES: ClassVar[tuple[str, ...]] = (
        "model_", "output_map_", "guarantee_", "epsilon_", "delta_", "noise_", "transform_",
        "n_features_in_", "n_samples_fit_", "seeded_")

    def _fit(self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator, *,
             bits: BitSource, n_samples: int | None = None) -> FittedGaussian:
        """The mechanism's DP statistics: ``rng`` draws public randomness (projection matrices),
        ``bits`` every noise draw; exploration facts go into ``data.diagnostics``. ``n_samples``:
        ``None`` for a model of any size (``fit``), ``m`` for one draw of ``m`` rows (``release``;
        :func:`mixture_weights`)."""
        raise NotImplementedError

    def _fitted(self, values: dict[str, Any], data: PreparedInput, rng: np.random.Generator,
                n_samples: int | None) -> FittedGaussian:
        """:meth:`_fit` with the checks of :meth:`Mechanism.explore`: floating-point failures named,
        non-finite noise scales or model values refused, the input's warnings on the card, a seeded
        fit marked as a preview."""
        # noise bits: OS-keyed CSPRNG, or for a seed a stream separate from rng (public matrices)
        fitted = self._guarded(values, partial(self._fit, data, values, rng,
                                               bits=noise_source(self.random_state), n_samples=n_samples))
        template = self._finish(fitted.template, values, data)
        model = fitted.model
        bad = sum(int(np.count_nonzero(~np.isfinite(a)))
                  for a in (model.weights, model.means, model.covariances))
        if bad:
            raise NonFiniteNoiseError(
                f"{_privacy_parameters(values)} gives a fitted model with {bad:,} NaN/inf value(s); nothing "
                "is released: the noise overflows float64 arithmetic, use a larger epsilon")
        return dataclasses.replace(fitted, template=template)

    # ------------------------------------------------------------------ fit
    @blas_limit()
    def fit(self, X: Any, y: Any = None) -> GaussianGenerator:
        """Fit the DP model: spends the whole privacy budget once.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or dpcore.data.Dataset
            Private data; clipped to the public bounds before use.
        y : array-like of shape (n_samples,), optional
            Private labels (classification or regression).

        Returns
        -------
        self
            With the learned attributes of :class:`GaussianGenerator` (a refit replaces them all).

        Raises
        ------
        ValueError
            As :meth:`release` (bad parameters or input, named); ``NonFiniteNoiseError`` when the
            noise would overflow float64 (nothing is stored).
        """
        values, data, _ = self._prepare(X, y, None)
        fitted = self._fitted(values, data, check_random_state(self.random_state), None)
        template = fitted.template
        g = template.guarantee
        self.model_, self.output_map_ = fitted.model, fitted.output_map
        self.guarantee_, self.epsilon_, self.delta_ = g, g.epsilon, g.delta
        self.noise_ = tuple(template.noise)
        self.transform_ = template.transform
        self.n_samples_fit_, self.n_features_in_ = (int(k) for k in data.X.shape)
        self.seeded_ = template.seeded
        self._fitted_model = fitted
        return self

    # ------------------------------------------------------------------ release = fit + sample
    @blas_limit()
    def explore(self, X: Any, y: Any = None, *, n_samples: int | None = None) -> Exploration:
        """:meth:`_fit` for one table of ``n_samples`` rows (default ``n``), the draw with the same
        generator, and the exploration facts beside it. Same parameters, errors and release as
        :meth:`Mechanism.explore`."""
        with engines.opened(X) as X:  # the engine is chosen here, once (dpcore.engines)
            values, data, n_samples = self._prepare(X, y, n_samples)
            m = data.n_samples if n_samples is None else n_samples
            rng = check_random_state(self.random_state)
            rel = self._fitted(values, data, rng, m).release(m, rng, n_samples)
            check_finite_release(rel, values)
            return Exploration(rel, dict(data.diagnostics))

    # ------------------------------------------------------------------ sample
    def _checked_size(self, n_samples: int | None) -> int:
        """``n_samples`` checked (default ``n``), after the fit and the memory limit
        (:func:`dpcore.limits.check_memory`: the model rows, the decoded rows and the labels, float64)."""
        if not hasattr(self, "_fitted_model"):
            # imported here: sklearn's package import costs seconds on the app's first page
            from sklearn.exceptions import NotFittedError

            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet: call fit(X, y) "
                                 "before sample")
        m = self.n_samples_fit_ if n_samples is None else _check_n_samples(n_samples)
        check_memory(f"{self.name} sample of {m:,} rows",
                     8.0 * m * (2 * self.model_.n_features + self.output_map_.n_features_out + 1))
        return m

    @blas_limit()
    def sample(self, n_samples: int | None = None, random_state: Any = None
               ) -> tuple[np.ndarray, np.ndarray | None]:
        """Draw synthetic rows from the fitted model (free post-processing; never reads ``X``).

        As scikit-learn's ``GaussianMixture.sample``, but the rows per class follow the weights
        exactly (largest remainder, :meth:`GaussianModel.component_counts`) as :meth:`release` does.

        Parameters
        ----------
        n_samples : int, optional
            Rows to draw, ``1 <= n_samples <= 10,000,000``; default ``n_samples_fit_`` (``n``).
        random_state : None, int or numpy Generator
            Randomness of the draw only (the noise was fixed by :meth:`fit`). ``None``: OS entropy.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_output_features)
            Rows in the release's space (the columns of ``release().data``).
        y_new : ndarray of shape (n_samples,) or None
            Class labels (classification), labels in their units (regression), or ``None``.

        Raises
        ------
        NotFittedError
            Before :meth:`fit` (a ``ValueError``).
        ValueError
            ``n_samples`` not a whole number in range (named); ``ResourceLimitError`` past
            ``DPCORE_MAX_MEMORY``.
        """
        m = self._checked_size(n_samples)
        return self._fitted_model.draw(m, check_random_state(random_state))

    @blas_limit()
    def sample_release(self, n_samples: int | None = None, random_state: Any = None) -> Release:
        """A savable :class:`Release` of rows drawn from the fitted model, with the fit's card.

        The card states the fit's guarantee (``guarantee_``: no budget is spent again) and its
        ``details["drawn_from_fitted_model"]`` says the rows come from the already-released model
        (with the fit's ``created_utc``). A fit with a fixed ``random_state``, or a draw with one,
        gives a preview that :meth:`Release.save` refuses. Parameters and errors as :meth:`sample`.
        """
        m = self._checked_size(n_samples)
        fitted = self._fitted_model
        details = {**fitted.template.details, "drawn_from_fitted_model": {
            "note": DRAWN_NOTE, "model_created_utc": fitted.template.created_utc}}
        rel = fitted.release(m, check_random_state(random_state), n_samples, details=details,
                             seeded=self.seeded_ or random_state is not None,
                             created_utc=datetime.now(UTC).isoformat(timespec="seconds"))
        check_finite_release(rel, rel.parameters)
        return rel
