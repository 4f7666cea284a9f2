"""JL projection + Laplace noise (Dhaliwal, So, Parker-Wood & Beck, "Utility Preserving Secure
Private Data Release"; SPEC section 4).

``Z = X P + Lap(c / epsilon)``, ``P`` a ``d x k`` matrix of i.i.d. ``N(0, 1/k)`` entries that is
kept SECRET (paper section 3.1, against reconstruction attacks). The release is the ``n x k``
matrix ``Z``; it has no public transform, because publishing ``P`` is exactly what the paper
forbids.

The primitives JL-Laplace shares with DPPro (the Gaussian projection matrix, the element-wise
sensitivity of ``X -> X P``, the mapping of rows into the projected space's input) live in
:mod:`dpcore.mechanisms._projection`; the private release of labels in
:mod:`dpcore.mechanisms._labels`.

Calibration of ``c`` (the L1 sensitivity of ``X -> X P``):

* ``relation="replace-one"`` (default; one row, label included, replaced by any row of the public
  box, the row-level unit of every card): ``c = max_{s in {-1,1}^k} sum_i w_i |(P s)_i|``, the exact
  L1 sensitivity of the drawn ``P`` over the box (enumerated; a proven bound for large ``k``).
  ``published``: Thm 5 with ``alpha`` = the box's squared diameter.
* ``relation="element"`` (the paper's; one entry changes by at most ``Delta``):
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
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcore import noise as dpnoise
from dpcore.calibration import EpsilonSplit, laplace_scale
from dpcore.mechanisms._labels import LABEL_SPLIT, combine_with_labels, release_labels
from dpcore.mechanisms._projection import (
    box_sensitivity,
    element_sensitivity,
    projected_columns,
    projection_setup,
)
from dpcore.mechanisms.base import Mechanism
from dpcore.noise import BitSource
from dpcore.preprocessing import PreparedInput
from dpcore.release import Guarantee, NoiseRecord, Release
from dpcore.schema import EPSILON, Param

__all__ = [
    "JLLaplace",
    "max_sign_quadratic",
    "published_element_constant",
    "published_row_constant",
    "row_sensitivity",
]

#: largest k for which the row-wise sensitivity is computed exactly (2^(k-1) sign vectors)
MAX_ENUMERATED_K = 20

JL_CITATION = ("Dhaliwal, So, Parker-Wood & Beck, Utility Preserving Secure Private Data Release "
               "(Symantec Center for Advanced Machine Learning)")


# ---------------------------------------------------------------------------------- primitives


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
    relation : {"replace-one", "element", "row"}, default "replace-one"
        Neighbouring relation the guarantee is about. ``replace-one`` (default): one row, label
        included, is replaced by any row of the public box; ``c`` is the exact L1 sensitivity of
        the drawn ``P`` over the box (:func:`~dpcore.mechanisms._projection.box_sensitivity`).
        The paper's modes: ``element`` (one entry changes by at most ``element_bound``) and ``row``
        (one row by at most ``row_bound`` in squared L2 norm); their cards also report the
        row-level equivalent for the drawn ``P`` (``Release.row_level``, card key ``row_level``):
        ``epsilon_row = c_box / b`` plus the labels' epsilon. At the paper's element epsilon = 1,
        that is epsilon_row of about ``d`` (c_box / c_element grows like ``d / max_i ||P_i||_1``).
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
    epsilon_split : (float, float), default (0.5, 0.5)
        Replace-one and row relations with labels: budget fractions for the features and the
        labels (a row change moves both, so their epsilons add up; the default share is derived in
        :func:`~dpcore.mechanisms._labels.label_budget_share`). Under the element relation the
        changed entry is either a feature or the label, so both get the whole epsilon.
    rescale : bool, default True
        Map each column to ``[0, 1]`` with its public bounds before projecting (public, no privacy
        cost), so that bounds are comparable across columns.
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`.

    Notes
    -----
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
        Param("relation", "choice", "replace-one", "Neighbouring relation: replace-one (one row, label "
              "included, replaced by any row of the public box: the row-level unit every mechanism "
              "reports); the paper's element (one entry changes by at most element_bound) or row (one "
              "row moves by at most row_bound in squared L2 norm).",
              choices=("replace-one", "element", "row"), privacy=True),
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
        LABEL_SPLIT,
        Param("rescale", "bool", True, "Map each column to [0, 1] with its public bounds before "
              "projecting."),
    )
    neighbouring = "replace-one"
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
        if has_labels and relation != "element":
            split = EpsilonSplit.from_fractions(eps, dict(zip(("features", "labels"),
                                                              params["epsilon_split"], strict=True)))
            eps_f, eps_l = split["features"], split["labels"]
        else:
            eps_f, eps_l = eps, (eps if has_labels else None)

        details: dict[str, Any] = {"relation": relation, "rescaled": inp.rescaled}
        # the row-level (replace-one) sensitivity of the drawn P over the public box: the
        # calibration of relation="replace-one" and the row-level equivalent of the paper's modes
        c_box, box_method = box_sensitivity(P, inp.widths, ord=1)
        if relation == "element":
            bound = params["element_bound"] or float(np.max(inp.widths)) or 1.0
            c_exact = element_sensitivity(P, inp.widths, bound, ord=1)
            c_pub, beta_pub = published_element_constant(k, d, bound)
            details.update(element_bound=bound, sensitivity_method="exact: max_i min(Delta, w_i) "
                           "||P_i||_1 (row L1 norms of the drawn P)")
            pub_formula, pub_source = "c = 2 sqrt(k) Delta", "JL paper Thm 3 (Lemmas 1, 2)"
            neighbouring = "element"
        elif relation == "row":
            bound = params["row_bound"] or float(np.sum(inp.widths**2)) or 1.0
            c_exact, method, spectral = row_sensitivity(P, bound)
            beta_pub = params["beta"]
            c_pub = published_row_constant(k, bound, beta_pub)
            details.update(row_bound=bound, sensitivity_method=method,
                           sensitivity_spectral_bound=spectral)
            pub_formula = "c = k t, t = sqrt(2 alpha ln(2k/beta) / k)"
            pub_source = "JL paper Thm 5 (Lemma 4), with sqrt(alpha) for the paper's alpha (a typo)"
            neighbouring = "row-l2"
        else:  # replace-one: one row (label included) replaced by any row of the public box
            c_exact = c_box
            beta_pub = params["beta"]
            alpha_box = float(np.sum(inp.widths**2)) or 1.0
            c_pub = published_row_constant(k, alpha_box, beta_pub)
            details.update(row_bound=alpha_box, sensitivity_method=box_method)
            pub_formula = ("c = k t, t = sqrt(2 alpha ln(2k/beta) / k), alpha = squared diameter of "
                           "the public box")
            pub_source = ("JL paper Thm 5 (Lemma 4) with alpha = the box's squared diameter, which "
                          "bounds every replaced row")
            neighbouring = "replace-one"

        if calibration == "exact":
            c = c_exact
            feat = FeatureGuarantee(eps_f, "pure", None, eps_f, ())
            formula = ("c = " + {"element": "max_i min(Delta, w_i) ||P_i||_1",
                                 "row": "sqrt(alpha) max_s ||P s||_2 (<= sqrt(k alpha) sigma_max(P))",
                                 "replace-one": "sup over the public box of ||(x - x') P||_1 = max_s "
                                                "sum_i w_i |(P s)_i|"}[relation]
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
        total = combine_with_labels("element" if relation == "element" else "row", feat.epsilon, eps_l)
        guarantee = Guarantee(epsilon=total, delta=0.0, neighbouring=neighbouring, kind=feat.kind,
                              beta=feat.beta)
        # row-level equivalent for the drawn P: the grid Laplace mechanism with scale b = t g is
        # (c' / b)-DP for any query of L1 sensitivity c, c' = c + k g with the rounding (dpcore.noise)
        eps_row_f = math.inf if b == 0 else (c_box + k * (plan.grid or 0.0)) / b
        row_level = None if neighbouring == "replace-one" else Guarantee(
            epsilon=combine_with_labels("row", eps_row_f, eps_l), delta=0.0, neighbouring="replace-one",
            kind="pure")
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
            row_level_sensitivity=c_box,
            row_level_sensitivity_method=box_method,
            row_level_epsilon_features=eps_row_f,
        )
        details["warnings"] = list(feat.warnings)
        rel = self._new_release(
            data, params, values=Z, columns=projected_columns(k), guarantee=guarantee, noise=noise,
            calibration=calibration, labels=labels.labels, label_columns=labels.columns,
            details=details, row_level=row_level,
        )
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
