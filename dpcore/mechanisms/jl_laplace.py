"""JL projection + Laplace noise (Dhaliwal, So, Parker-Wood & Beck, "Utility Preserving Secure
Private Data Release"; SPEC section 4).

``Z = X P + Lap(c / epsilon)``, ``P`` a ``d x k`` matrix of i.i.d. ``N(0, 1/k)`` entries that is
kept SECRET (paper section 3.1, against reconstruction attacks). The release is the ``n x k``
matrix ``Z``; it has no public transform, because publishing ``P`` is exactly what the paper
forbids.

The module also holds the primitives DPPro (:mod:`dpcore.mechanisms.dppro`) shares: the Gaussian
projection matrix, the element-wise sensitivity of ``X -> X P``, the mapping of rows into the
projected space's input (clip + optional min-max rescale), and the private release of labels.

Calibration of ``c`` (the L1 sensitivity of ``X -> X P``):

* ``relation="element"`` (one entry changes by at most ``Delta``):
  ``exact``: ``c = max_i min(Delta, w_i) ||P_i||_1`` (row L1 norm of the drawn ``P``; ``w_i`` the
  public width of column ``i``, which no change inside the public box can exceed) - the exact
  sensitivity, pure epsilon-DP, no failure probability. ``published`` (Thm 3, with Lemma 1 and
  Kenthapadi et al.'s Lemma 2): ``c = 2 sqrt(k) Delta``, epsilon-DP with probability at least
  ``1 - d e^{-k/2}`` over ``P`` (the paper assumes ``Delta = 1``; the sensitivity is linear in
  ``Delta``).
* ``relation="row"`` (one row changes by at most ``alpha`` in squared L2 norm):
  ``exact``: ``c = sqrt(alpha) max_{s in {-1,1}^k} ||P s||_2`` (the exact supremum of
  ``||v P||_1`` over ``||v||_2^2 <= alpha``), enumerated for ``k <= 20``; for larger ``k`` the
  bound ``sqrt(k alpha) sigma_max(P)`` (SPEC section 4). ``published`` (Thm 5):
  ``c = k t``, ``t = sqrt(2 alpha ln(2k/beta) / k)`` (SPEC: the paper's ``sqrt(2 ln 2k / k) alpha``
  is a typo for the square root of alpha). Thm 5 bounds ``||v P||_1`` for ONE fixed change ``v``;
  DP needs it for every ``v`` at once, which fails for ``d`` much larger than ``k``. Because ``P``
  is drawn before and independently of the data, the release checks the drawn ``P`` and reports the
  epsilon actually guaranteed (see :func:`published_guarantee`).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcore import dask_engine
from dpcore import noise as dpnoise
from dpcore.calibration import EpsilonSplit, laplace_scale
from dpcore.mechanisms.base import Mechanism
from dpcore.noise import BitSource, GridNoise
from dpcore.preprocessing import PreparedInput, row_blocks
from dpcore.release import Guarantee, NoiseRecord, Release
from dpcore.schema import EPSILON, Param

__all__ = [
    "JLLaplace",
    "LabelRelease",
    "ProjectionInput",
    "element_sensitivity",
    "gaussian_projection",
    "max_sign_quadratic",
    "published_element_constant",
    "published_row_constant",
    "randomized_response",
    "release_labels",
    "resolve_n_components",
    "row_sensitivity",
    "scale_rows",
]

#: largest k for which the row-wise sensitivity is computed exactly (2^(k-1) sign vectors)
MAX_ENUMERATED_K = 20

JL_CITATION = ("Dhaliwal, So, Parker-Wood & Beck, Utility Preserving Secure Private Data Release "
               "(Symantec Center for Advanced Machine Learning)")


# ---------------------------------------------------------------------------------- primitives
def gaussian_projection(d: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """JL projection matrix ``(d, k)`` with i.i.d. ``N(0, 1/k)`` entries (SPEC section 1).

    Data-independent: costs no privacy budget. ``E ||x P||^2 = ||x||^2`` for every ``x``.
    """
    return rng.standard_normal((d, k)) / math.sqrt(k)


def resolve_n_components(n_components: int | None, n_features: int) -> int:
    """The projected dimension ``k``: ``1 <= k < d``; ``None`` gives ``min(10, d - 1)``.

    Raises
    ------
    ValueError
        ``n_components >= n_features``, ``n_components < 1``, or fewer than 2 features.
    """
    d = int(n_features)
    if d < 2:
        raise ValueError(f"a random projection needs at least 2 features (n_components < n_features), "
                         f"got n_features={d}")
    if n_components is None:
        return min(10, d - 1)
    k = int(n_components)
    if k < 1:
        raise ValueError(f"n_components must be >= 1, got {n_components}")
    if k >= d:
        raise ValueError(f"n_components must be < n_features = {d} (a projection reduces the "
                         f"dimension), got n_components={n_components}")
    return k


@dataclass(frozen=True)
class ProjectionInput:
    """Rows as the projection sees them.

    Attributes
    ----------
    raw : ndarray (n, d)
        The rows clipped to the public bounds, in their own units (not copied).
    X : ndarray (n, d), property
        ``raw`` mapped, when ``rescaled``, to ``[0, 1]`` per column by ``(x - lo) / (hi - lo)``
        (a public affine map: no privacy cost). A full copy, computed on access; the mechanisms
        use :meth:`project`, which never materialises it.
    widths : ndarray (d,)
        Largest possible change of each entry inside the public box, in the units of ``X``
        (1 for rescaled columns, 0 for constant ones).
    lo, scale : ndarray (d,)
        The map ``x -> (clip(x) - lo) / scale`` (``lo = 0, scale = 1`` without rescaling).
    bounds : ndarray (d, 2)
        The public bounds used for clipping.
    """

    raw: np.ndarray
    widths: np.ndarray
    lo: np.ndarray
    scale: np.ndarray
    bounds: np.ndarray
    rescaled: bool

    @property
    def X(self) -> np.ndarray:
        return (self.raw - self.lo) / self.scale

    def project(self, P: np.ndarray, noise: GridNoise | None = None) -> np.ndarray:
        """``X @ P`` (``(n, k)``, rows rescaled) plus noise, streamed over blocks of rows of ``raw``.

        The rescaling is folded into the product, ``X @ P = raw @ (P / scale) - (lo / scale) @ P``
        (exact to rounding while ``|lo| / scale <= 4``; beyond that, where the two terms would
        cancel, each block is rescaled explicitly in cache). No copy of ``X`` is made.

        ``noise`` (a grid mechanism of :mod:`dpcore.noise`), if given, perturbs each ``(rows, k)``
        output block: ``noise.draw`` is called once per block, in row order, on one helper thread that
        draws block ``i + 1`` while this thread computes the product of block ``i`` (BLAS and the
        samplers' NumPy work release the GIL), and ``noise.apply`` rounds the block to the public grid
        and adds the integers. The draws are sequential and in row order, so they are the same as
        drawing the blocks one after the other on one thread, whatever the timing.
        """
        if dask_engine.is_lazy(self.raw):  # a table larger than memory: noise added on the client
            return dask_engine.noisy_projection(self, P, noise, ProjectionInput.project)
        n, d = self.raw.shape
        identity = not self.rescaled or (np.all(self.lo == 0) and np.all(self.scale == 1))
        shift = self.lo / self.scale
        fold = not identity and float(np.max(np.abs(shift))) <= 4.0
        Pf = P / self.scale[:, None] if fold else P
        offset = shift @ P if fold else None
        explicit = not identity and not fold
        k = P.shape[1]
        Z = np.empty((n, k))
        blocks = list(row_blocks(n, d))
        buf = np.empty((blocks[0].stop, d)) if explicit else None
        pool = ThreadPoolExecutor(1) if noise is not None else None
        try:
            pending = pool.submit(noise.draw, (blocks[0].stop, k)) if pool is not None else None
            for i, sl in enumerate(blocks):
                T = self.raw[sl]
                if buf is not None:
                    out = buf[: sl.stop - sl.start]
                    T = np.divide(np.subtract(T, self.lo, out=out), self.scale, out=out)
                block = Z[sl]
                np.matmul(T, Pf, out=block)
                if offset is not None:
                    block -= offset
                if pending is not None:
                    drawn = pending.result()
                    if i + 1 < len(blocks):
                        nxt = blocks[i + 1]
                        pending = pool.submit(noise.draw, (nxt.stop - nxt.start, k))
                    block[...] = noise.apply(block, drawn)
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
        return Z

    @classmethod
    def from_prepared(cls, data: PreparedInput, rescale: bool) -> ProjectionInput:
        bounds = np.asarray(data.bounds, dtype=float)
        raw_w = bounds[:, 1] - bounds[:, 0]
        if rescale:
            lo = bounds[:, 0].copy()
            scale = np.where(raw_w > 0, raw_w, 1.0)
            widths = (raw_w > 0).astype(float)
        else:
            lo, scale, widths = np.zeros(raw_w.size), np.ones(raw_w.size), raw_w
        return cls(raw=data.X, widths=widths, lo=lo, scale=scale, bounds=bounds,
                   rescaled=bool(rescale))

    def as_diagnostics(self) -> dict[str, Any]:
        """Public facts needed to map real rows for distance experiments (exploration only)."""
        return {"projection_input": {"lo": self.lo, "scale": self.scale, "bounds": self.bounds}}


def scale_rows(X: np.ndarray, lo: np.ndarray, scale: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """``(clip(X, bounds) - lo) / scale``: the map :class:`ProjectionInput` applies, as a function."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != np.size(lo):
        raise ValueError(f"X must have shape (m, {np.size(lo)}), got {X.shape}")
    return (np.clip(X, bounds[:, 0], bounds[:, 1]) - lo) / scale


def element_sensitivity(P: np.ndarray, widths: np.ndarray, element_bound: float, ord: int = 1) -> float:
    """Sensitivity of ``X -> X P`` when one entry of ``X`` changes by at most ``element_bound``.

    A change of entry ``(m, i)`` by ``t`` changes the output by ``t P_i`` (row ``i`` of ``P``), so
    the exact sensitivity in the norm ``ord`` (1 for Laplace, 2 for Gaussian) is
    ``max_i min(element_bound, widths_i) ||P_i||_ord``. ``widths_i`` is the largest change possible
    inside the public box. ``ord=1``: JL paper Lemma 1 (before its Cauchy-Schwarz step);
    ``ord=2``: DPPro Definition 3, ``theta_2(R)`` times the element bound.
    """
    P = np.asarray(P, dtype=float)
    eff = np.minimum(float(element_bound), np.asarray(widths, dtype=float))
    norms = np.linalg.norm(P, ord=ord, axis=1)
    return float(np.max(eff * norms))


def max_sign_quadratic(G: np.ndarray, chunk: int = 1 << 14) -> float:
    """``max_{s in {-1, 1}^k} s^T G s`` by enumerating the ``2^(k-1)`` sign vectors with ``s_0 = 1``.

    Vectorised over chunks of sign vectors (at most ``2^(k-1) / chunk`` chunk iterations).
    """
    G = np.asarray(G, dtype=float)
    k = G.shape[0]
    if k == 1:
        return float(G[0, 0])
    total = 1 << (k - 1)
    bits = np.arange(k - 1)
    best = -math.inf
    for start in range(0, total, chunk):
        idx = np.arange(start, min(total, start + chunk))
        S = np.ones((idx.size, k))
        S[:, 1:] = 1.0 - 2.0 * ((idx[:, None] >> bits) & 1)
        best = max(best, float(np.max(np.einsum("ij,jl,il->i", S, G, S))))
    return best


def row_sensitivity(P: np.ndarray, row_bound: float, max_enumerated_k: int = MAX_ENUMERATED_K
                    ) -> tuple[float, str, float]:
    """L1 sensitivity of ``X -> X P`` when one row changes by at most ``row_bound`` (= alpha) in
    squared L2 norm.

    ``sup_{||v||^2 <= alpha} ||v P||_1 = sqrt(alpha) max_{s in {-1,1}^k} ||P s||_2`` (write
    ``||u||_1 = max_s <u, s>`` and maximise over ``v`` first). Enumerated exactly for
    ``k <= max_enumerated_k``; otherwise the bound ``sqrt(k alpha) sigma_max(P)``
    (``||P s|| <= sigma_max ||s|| = sigma_max sqrt(k)``; SPEC section 4).

    Returns
    -------
    (c, method, spectral_bound) : float, str, float
        The sensitivity used, how it was obtained, and ``sqrt(k alpha) sigma_max(P)``.
    """
    P = np.asarray(P, dtype=float)
    k = P.shape[1]
    spectral = math.sqrt(k * row_bound) * float(np.linalg.norm(P, 2))
    if k <= max_enumerated_k:
        exact = math.sqrt(row_bound * max(max_sign_quadratic(P.T @ P), 0.0))
        return min(exact, spectral), f"exact: max over 2^{k - 1} sign vectors of ||P s||_2", spectral
    return spectral, "bound: sqrt(k alpha) sigma_max(P)", spectral


def published_element_constant(k: int, d: int, element_bound: float = 1.0) -> tuple[float, float]:
    """JL paper Thm 3: ``c = 2 sqrt(k) Delta``, failing with probability ``beta = d e^{-k/2}``.

    ``beta >= 1`` means the theorem says nothing for this ``(d, k)``.
    """
    return 2.0 * math.sqrt(k) * float(element_bound), float(d) * math.exp(-k / 2.0)


def published_row_constant(k: int, row_bound: float, beta: float) -> float:
    """JL paper Thm 5 (SPEC section 4 reading): ``c = k t``, ``t = sqrt(2 alpha ln(2k/beta) / k)``.

    ``beta = 1`` is the paper's own choice ``t = sqrt(2 ln(2k) / k)`` (with sqrt(alpha)), for which
    the theorem's failure probability ``2k e^{-k t^2 / (2 alpha)}`` equals 1: no guarantee at all.
    """
    if not (0 < beta <= 1):
        raise ValueError(f"beta must lie in (0, 1], got {beta}")
    t = math.sqrt(2.0 * row_bound * math.log(2.0 * k / beta) / k)
    return k * t


# ---------------------------------------------------------------------------------- labels
def randomized_response(y: np.ndarray, n_classes: int, epsilon: float, bits: BitSource) -> np.ndarray:
    """k-ary randomized response on class indices ``0..n_classes-1`` (pure epsilon-DP per label).

    Keep the label with probability ``e^eps / (e^eps + K - 1)``, otherwise report one of the other
    ``K - 1`` classes uniformly (Warner 1965; Kairouz, Oh & Viswanath 2016, k-RR). The likelihood
    ratio between any two true labels is at most ``e^eps``. ``epsilon = inf`` returns ``y``.
    The coins come from ``bits`` (:mod:`dpcore.noise`): ``U < keep_p`` with the full-precision uniform
    is exactly Bernoulli(keep_p) for the float ``keep_p`` (whose rounding moves the likelihood ratio by
    a relative 2^-53), the other class by exact uniform integers.
    """
    y = np.asarray(y, dtype=int)
    if math.isinf(epsilon):
        return y.copy()
    K = int(n_classes)
    keep_p = 1.0 / (1.0 + (K - 1) * math.exp(-epsilon))
    keep = dpnoise.uniform_open01(y.size, bits) < keep_p
    other = (y + 1 + dpnoise.uniform_below(K - 1, y.size, bits)) % K
    return np.where(keep, y, other)


@dataclass(frozen=True)
class LabelRelease:
    """Privately released labels (or none) and the noise record describing them."""

    labels: np.ndarray | None
    columns: list[str]
    noise: NoiseRecord | None


def release_labels(data: PreparedInput, epsilon: float, bits: BitSource) -> LabelRelease:
    """Release the labels of a supervised task with ``epsilon``-DP per label.

    Classification: k-ary randomized response over the PUBLIC class list (:func:`randomized_response`).
    Regression: the clipped label plus ``Lap((hi - lo) / epsilon)`` (one label changes by at most its
    public range). Unsupervised: nothing. The labels are released as their own column; they are
    never projected (a projected label could not be read back for training, DPPro Fig. 5 needs it).
    """
    if data.task == "unsupervised" or data.y is None:
        return LabelRelease(None, [], None)
    name = [data.label_name or "label"]
    if data.task == "classification":
        assert data.classes is not None
        K = int(data.classes.size)
        noisy = randomized_response(data.y, K, epsilon, bits)
        # (K-1)/(e^eps + K-1) written with e^-eps so that a large label epsilon cannot overflow
        tail = 0.0 if math.isinf(epsilon) else (K - 1) * math.exp(-epsilon)
        flip = tail / (1 + tail)
        rec = NoiseRecord(
            statistic="class label of each row", sensitivity=1.0, scale=flip,
            distribution="randomized-response", norm="one label changes (any class)",  # type: ignore[arg-type]
            epsilon=epsilon, delta=0.0,
            formula=f"keep the label with probability e^eps/(e^eps + K - 1), K = {K}; scale = "
                    "probability of reporting another class",
            source="Warner 1965; Kairouz, Oh & Viswanath 2016 (k-ary randomized response)",
        )
        return LabelRelease(data.classes[noisy], name, rec)
    assert data.label_bounds is not None
    width = float(data.label_bounds[1] - data.label_bounds[0])
    draw = dpnoise.laplace(data.y, width, scale=laplace_scale(width, epsilon), n_changed=1, bits=bits)
    rec = NoiseRecord(
        statistic="label of each row", sensitivity=width, scale=draw.scale, distribution="laplace",
        norm="L1", epsilon=epsilon, delta=0.0, formula="b = (label hi - label lo) / epsilon",
        source="Dwork, McSherry, Nissim & Smith 2006 (Laplace mechanism)", **dpnoise.record_fields(draw),
    )
    return LabelRelease(draw.values, name, rec)


def check_one_row_per_input(n_samples: int | None, n: int, what: str) -> None:
    """Projection mechanisms release exactly one noisy row per input row."""
    if n_samples is not None and n_samples != n:
        raise ValueError(f"{what} releases exactly one projected row per input row; n_samples must be "
                         f"None or {n}, got {n_samples}")


@dataclass(frozen=True)
class ProjectionSetup:
    """What both projection mechanisms start from: the rows, ``k`` and the secret matrix."""

    inp: ProjectionInput
    P: np.ndarray  # (d, k), drawn from the release's generator (secret)
    n: int
    d: int
    k: int


def projection_setup(data: PreparedInput, params: dict[str, Any], rng: np.random.Generator,
                     n_samples: int | None, what: str) -> ProjectionSetup:
    """Check ``n_samples``, resolve ``n_components``, map the rows, draw the Gaussian matrix.

    Shared by JL-Laplace and DPPro (in this order, so the generator's draws are the same).
    """
    check_one_row_per_input(n_samples, data.n_samples, what)
    n, d = data.X.shape
    k = resolve_n_components(params["n_components"], d)
    inp = ProjectionInput.from_prepared(data, params["rescale"])
    return ProjectionSetup(inp, gaussian_projection(d, k, rng), n, d, k)


def projected_columns(k: int) -> list[str]:
    return [f"z{j + 1}" for j in range(k)]


# ---------------------------------------------------------------------------------- guarantee
@dataclass(frozen=True)
class FeatureGuarantee:
    """What the noisy projection guarantees for the drawn ``P``."""

    epsilon: float
    kind: str
    beta: float | None
    epsilon_for_drawn: float
    warnings: tuple[str, ...]


def published_guarantee(eps: float, c_exact: float, c_published: float, beta: float) -> FeatureGuarantee:
    """The guarantee of a published calibration, checked against the drawn ``P``.

    ``P`` is drawn before and independently of the data, so the mechanism restricted to the drawn
    ``P`` is pure ``eps * c_exact / c_published``-DP (``c_exact`` is the sensitivity of the drawn
    matrix). If the drawn ``P`` lies in the paper's good event (``c_exact <= c_published``) and the
    paper's failure probability ``beta`` is below 1, the paper's statement (epsilon-DP except with
    probability ``beta`` over ``P``) is reported; otherwise the epsilon actually guaranteed for
    this ``P`` (never below the nominal one), with a warning.
    """
    drawn = math.inf if math.isinf(eps) else eps * c_exact / c_published
    if c_exact <= c_published and beta < 1:
        return FeatureGuarantee(eps, "probabilistic", beta, drawn, ())
    notes = []
    if beta >= 1:
        notes.append(f"the paper's failure probability beta = {beta:.3g} is >= 1 for these (d, k): "
                     "the published theorem guarantees nothing; the drawn projection was checked "
                     "instead")
    if c_exact > c_published:
        notes.append(f"the drawn projection has sensitivity {c_exact:.4g} > the published constant "
                     f"c = {c_published:.4g} (the paper's failure event): the release is only "
                     f"{drawn:.4g}-DP, which is what the guarantee reports")
    return FeatureGuarantee(max(eps, drawn), "pure", None, drawn, tuple(notes))


def combine_with_labels(relation: str, eps_features: float, eps_labels: float | None) -> float:
    """Total epsilon of (projection, labels).

    ``element``: neighbours differ in ONE entry, which is either a feature (only the projection
    changes in distribution) or the label (only the labels do): the total is the max.
    ``row``: a row change moves features and label together: basic composition, the sum.
    """
    if eps_labels is None:
        return eps_features
    return max(eps_features, eps_labels) if relation == "element" else eps_features + eps_labels


# ---------------------------------------------------------------------------------- mechanism
class JLLaplace(Mechanism):
    """JL projection + Laplace noise: ``Z = X P + Lap(c / epsilon)``, ``P`` secret.

    Parameters
    ----------
    epsilon : float, default 1.0
        Privacy budget (> 0; ``inf`` = NOT PRIVATE, zero noise, explore only).
    n_components : int, optional
        Projected dimension ``k``, ``1 <= k < n_features`` (default ``min(10, d - 1)``). The noise
        grows with ``k`` (``c`` is about ``0.8 sqrt(k)`` element-wise), the JL distortion shrinks.
    relation : {"element", "row"}, default "element"
        Neighbouring relation the guarantee is about: one entry changes by at most
        ``element_bound``, or one row by at most ``row_bound`` in squared L2 norm.
    calibration : {"exact", "published"}, default "exact"
        ``exact``: ``c`` is the sensitivity of the drawn ``P`` (pure epsilon-DP, no failure
        probability). ``published``: the paper's constants (Thm 3 / Thm 5), reported with their
        failure probability ``beta`` and checked against the drawn ``P``.
    element_bound : float, optional
        Public ``Delta``, largest change of one entry (units of the rescaled data when ``rescale``;
        default: the widest public column range, i.e. 1 after rescaling).
    row_bound : float, optional
        Public ``alpha``, largest squared L2 change of one row (default: the squared L2 diameter of
        the public box, i.e. ``d`` after rescaling).
    beta : float, default 1e-3
        Published row-wise calibration only: the failure probability over ``P`` of Thm 5.
    epsilon_split : (float, float), default (0.9, 0.1)
        Row relation with labels only: budget fractions for the features and the labels (a row
        change moves both, so their epsilons add up). Under the element relation the changed entry
        is either a feature or the label, so both get the whole epsilon.
    rescale : bool, default True
        Map each column to ``[0, 1]`` with its public bounds before projecting (public, no privacy
        cost), so that bounds are comparable across columns.
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`.

    Release: the ``n x k`` matrix ``Z`` (columns ``z1..zk``), plus privately released labels for
    supervised tasks (k-ary randomized response / Laplace, see :func:`release_labels`).
    ``details["noise_variance"] = 2 b^2`` is the per-coordinate noise variance that distance
    recovery (JL paper Alg. 2, :mod:`dpcore.distances`) subtracts: ``||z_i - z_j||^2 - 2 k (2 b^2)``
    is unbiased for ``||x_i - x_j||^2`` over ``P`` and the noise. There is no public transform:
    ``Release.transform`` raises ``ValueError`` because ``P`` is secret.
    The generator is used in this order: ``P``, the feature noise, the labels (seeded previews are
    reproducible; published releases use OS entropy and keep none of it).

    Raises
    ------
    ValueError
        ``n_components >= n_features`` or ``< 1``, ``epsilon <= 0``, bounds or ``beta`` out of range,
        unknown ``relation``/``calibration`` (from :meth:`release`).
    """

    name = "jl-laplace"
    title = "JL projection + Laplace noise"
    summary = ("Random Gaussian projection to k dimensions (matrix kept secret) plus Laplace noise; "
               "pairwise squared distances are recoverable without bias.")
    citation = JL_CITATION
    params = (
        EPSILON,
        Param("n_components", "int", None, "Projected dimension k (1 <= k < number of features; "
              "default min(10, d - 1)). Noise grows with k.", low=1, optional=True),
        Param("relation", "choice", "element", "Neighbouring relation: one entry changes by at most "
              "element_bound, or one row by at most row_bound in squared L2 norm.",
              choices=("element", "row"), privacy=True),
        Param("calibration", "choice", "exact", "exact: calibrated to the drawn projection (pure "
              "epsilon-DP); published: the paper's constants with their failure probability beta.",
              choices=("exact", "published"), privacy=True),
        Param("element_bound", "float", None, "Public largest change of one entry (default: the "
              "widest column range; 1 after rescaling).", low=0.0, low_open=True, optional=True,
              privacy=True),
        Param("row_bound", "float", None, "Public largest squared L2 change of one row (default: "
              "the squared diameter of the public box).", low=0.0, low_open=True, optional=True,
              privacy=True),
        Param("beta", "float", 1e-3, "Published row-wise calibration: failure probability over the "
              "projection (Thm 5).", low=0.0, high=1.0, low_open=True, high_open=True, log=True,
              privacy=True),
        Param("epsilon_split", "fraction_split", (0.9, 0.1), "Row relation with labels: budget "
              "fractions for features and labels.", privacy=True, split_names=("features", "labels")),
        Param("rescale", "bool", True, "Map each column to [0, 1] with its public bounds before "
              "projecting."),
    )
    neighbouring = "element"
    guarantee_kind = "pure"
    space = "projected"
    capabilities = frozenset({"distances"})
    public_transform = False  # P is secret (section 3.1): Release.transform raises

    def _release(
        self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator,
        n_samples: int | None, *, bits: BitSource,
    ) -> Release:
        setup = projection_setup(data, params, rng, n_samples, "JL-Laplace")
        inp, P, n, d, k = setup.inp, setup.P, setup.n, setup.d, setup.k
        eps, relation, calibration = params["epsilon"], params["relation"], params["calibration"]

        has_labels = data.task != "unsupervised" and data.y is not None
        if has_labels and relation == "row":
            split = EpsilonSplit.from_fractions(eps, dict(zip(("features", "labels"),
                                                              params["epsilon_split"], strict=True)))
            eps_f, eps_l = split["features"], split["labels"]
        else:
            eps_f, eps_l = eps, (eps if has_labels else None)

        details: dict[str, Any] = {"relation": relation, "rescaled": inp.rescaled}
        if relation == "element":
            bound = params["element_bound"] or float(np.max(inp.widths)) or 1.0
            c_exact = element_sensitivity(P, inp.widths, bound, ord=1)
            c_pub, beta_pub = published_element_constant(k, d, bound)
            details.update(element_bound=bound, sensitivity_method="exact: max_i min(Delta, w_i) "
                           "||P_i||_1 (row L1 norms of the drawn P)")
            pub_formula, pub_source = "c = 2 sqrt(k) Delta", "JL paper Thm 3 (Lemmas 1, 2)"
            neighbouring = "element"
        else:
            bound = params["row_bound"] or float(np.sum(inp.widths**2)) or 1.0
            c_exact, method, spectral = row_sensitivity(P, bound)
            beta_pub = params["beta"]
            c_pub = published_row_constant(k, bound, beta_pub)
            details.update(row_bound=bound, sensitivity_method=method,
                           sensitivity_spectral_bound=spectral)
            pub_formula = "c = k t, t = sqrt(2 alpha ln(2k/beta) / k)"
            pub_source = "JL paper Thm 5 (Lemma 4), with sqrt(alpha) for the paper's alpha (a typo)"
            neighbouring = "row-l2"

        if calibration == "exact":
            c = c_exact
            feat = FeatureGuarantee(eps_f, "pure", None, eps_f, ())
            formula = ("c = " + ("max_i min(Delta, w_i) ||P_i||_1" if relation == "element"
                                 else "sqrt(alpha) max_s ||P s||_2 (<= sqrt(k alpha) sigma_max(P))")
                       + "; b = c / epsilon")
            source = ("exact calibration to the drawn P (P is data-independent); JL paper Lemma 1 / "
                      "Thm 5 proof")
        else:
            c = c_pub
            feat = published_guarantee(eps_f, c_exact, c_pub, beta_pub)
            formula, source = pub_formula + "; b = c / epsilon", pub_source
        # one changed entry (or row) moves the k outputs of its row: n_changed = k
        plan = dpnoise.laplace_plan(c, scale=laplace_scale(c, eps_f), n_changed=k, bits=bits)
        b = plan.scale
        Z = inp.project(P, plan if b > 0 else None)
        labels = release_labels(data, eps if eps_l is None else eps_l, bits)

        noise = [NoiseRecord(
            statistic=f"projected data Z = X P ({n} x {k})", sensitivity=c, scale=b,
            distribution="laplace", norm="L1", epsilon=eps_f, delta=0.0, formula=formula,
            source=source, **dpnoise.record_fields(plan),
        )]
        if labels.noise is not None:
            noise.append(labels.noise)
        total = combine_with_labels(relation, feat.epsilon, eps_l)
        guarantee = Guarantee(epsilon=total, delta=0.0, neighbouring=neighbouring, kind=feat.kind,
                              beta=feat.beta)
        details.update(
            n_components=k,
            noise_distribution="laplace",
            noise_scale=b,
            noise_variance=2.0 * b * b,
            sensitivity_exact=c_exact,
            sensitivity_published=c_pub,
            noise_scale_exact=laplace_scale(c_exact, eps_f),
            noise_scale_published=laplace_scale(c_pub, eps_f),
            published_beta=beta_pub,
            epsilon_features=eps_f,
            epsilon_features_for_drawn_projection=feat.epsilon_for_drawn,
            epsilon_labels=eps_l,
            transform="none: the projection matrix P is secret (JL paper section 3.1), so real data "
                      "cannot be mapped into this space",
            labels=_labels_note(data, relation),
        )
        details["warnings"] = list(feat.warnings)
        rel = self._new_release(
            data, params, values=Z, columns=projected_columns(k), guarantee=guarantee, noise=noise,
            calibration=calibration, labels=labels.labels, label_columns=labels.columns,
            details=details,
        )
        rel.diagnostics.update(inp.as_diagnostics())
        return rel


def _labels_note(data: PreparedInput, relation: str) -> str | None:
    if data.task == "unsupervised" or data.y is None:
        return None
    how = ("k-ary randomized response over the public class list" if data.task == "classification"
           else "Laplace noise scaled to the public label range")
    budget = ("the whole epsilon: under the element relation neighbours differ in one entry, either "
              "a feature or the label, never both" if relation == "element"
              else "the 'labels' part of epsilon_split: a row change moves features and label, so "
                   "the two epsilons add up")
    return f"released as their own column by {how}, with {budget}"
