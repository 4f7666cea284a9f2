"""DPPro: random projection + Gaussian noise (Xu, Ren, Zhang, Qin & Ren, IEEE TIFS 2017; SPEC
section 5).

``Y = X R + N(0, sigma^2)`` with ``R`` a ``d x k`` matrix of i.i.d. ``N(0, 1/k)`` entries; ``R``
and ``Y`` are both released (paper Alg. 1), so real rows map into the release's space by
``x -> x R``. Neighbours: one entry (one attribute of one user) changes by at most ``Delta``
(paper Definition 1; ``Delta = 1`` for binary data).

Neighbouring relation (``relation``): ``replace-one`` (default, the row-level unit every card
reports: one row, label included, replaced by any row of the public box; ``S2`` is the sensitivity
of the drawn ``R`` over the box) or the paper's ``element`` (below), whose card also gives its
row-level equivalent for the drawn ``R``.

Calibration of ``sigma`` (element relation; under replace-one the box sensitivity replaces
``Delta theta_2(R)``):

* ``exact`` (default; SPEC section 5): the L2 sensitivity of ``X -> X R`` for the drawn ``R`` is
  ``S2 = max_i min(Delta, w_i) ||R_i||_2`` (``Delta * theta_2(R)``, paper Definition 3 and the
  proof of Thm 2), and ``sigma`` is the analytic Gaussian mechanism's (Balle & Wang 2018):
  exactly (epsilon, delta)-DP for the drawn ``R``, for every epsilon, no condition on ``k``.
* ``published`` (paper Lemma 4): ``sigma = 4 sqrt(ln(1/delta)) / epsilon``. Lemma 4 assumes
  ``Delta = 1`` (binary attributes), ``k > 2 (ln d + ln(2/delta))`` (so that ``theta_2(R) <= 2``
  except with probability ``delta/2``), ``epsilon < ln(1/delta)``, and applies Thm 2 with
  ``theta_2 = 2``; the formula therefore contains neither ``Delta`` nor ``theta_2(R)``. Each
  violated condition is reported in ``details["warnings"]``; the guarantee reported is the
  (epsilon, delta) actually achieved by that ``sigma`` for the drawn ``R`` (never below the
  nominal epsilon), computed exactly with the analytic Gaussian privacy curve.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from dpcore import noise as dpnoise
from dpcore.calibration import EpsilonSplit, analytic_gaussian_sigma, gaussian_epsilon
from dpcore.mechanisms._labels import LABEL_SPLIT, combine_with_labels, release_labels, reserve_part_slack
from dpcore.mechanisms._projection import (
    box_sensitivity,
    element_sensitivity,
    projected_columns,
    projection_setup,
    scale_rows,
)
from dpcore.mechanisms.base import Mechanism
from dpcore.noise import BitSource
from dpcore.preprocessing import PreparedInput
from dpcore.release import Guarantee, NoiseRecord, Release
from dpcore.schema import DELTA, EPSILON, Param

__all__ = ["DPPro", "dppro_published_sigma", "lemma4_violations"]

DPPRO_CITATION = ("Xu, Ren, Zhang, Qin & Ren, DPPro: Differentially Private High-Dimensional Data "
                  "Release via Random Projection, IEEE TIFS 12(12), 2017")


def dppro_published_sigma(epsilon: float, delta: float) -> float:
    """DPPro Lemma 4: ``sigma = 4 sqrt(ln(1/delta)) / epsilon`` (0 for ``epsilon = inf``)."""
    return 0.0 if math.isinf(epsilon) else 4.0 * math.sqrt(math.log(1.0 / delta)) / epsilon


def lemma4_violations(epsilon: float, delta: float, d: int, k: int, element_bound: float,
                      theta2: float) -> list[str]:
    """The assumptions of DPPro Lemma 4 that do not hold, as sentences (empty when all hold)."""
    out = []
    k_min = 2.0 * (math.log(d) + math.log(2.0 / delta))
    if not k > k_min:
        out.append(f"Lemma 4 needs k > 2(ln d + ln(2/delta)) = {k_min:.2f}, got k = {k}")
    if not epsilon < math.log(1.0 / delta):
        out.append(f"Lemma 4 needs epsilon < ln(1/delta) = {math.log(1.0 / delta):.3g}, got {epsilon:.4g}")
    if element_bound > 1.0:
        out.append(f"Lemma 4 assumes one entry changes by at most 1 (binary data); element_bound = "
                   f"{element_bound:.4g}")
    if theta2 > 2.0:
        out.append(f"Lemma 4 relies on theta_2(R) <= 2; the drawn R has theta_2 = {theta2:.4g}")
    return out


class DPPro(Mechanism):
    """DPPro: ``Y = X R + N(0, sigma^2)``, ``R`` (d x k, entries ``N(0, 1/k)``) released.

    Parameters
    ----------
    epsilon : float, default 1.0
        Privacy budget (> 0; ``inf`` = NOT PRIVATE, zero noise, explore only).
    delta : float, default 1e-5
        In (0, 1); keep it well below ``1/n``.
    n_components : int, optional
        Projected dimension ``k``, ``1 <= k < n_features`` (default ``min(10, d - 1)``). The noise
        does not grow with ``k`` (``theta_2(R)`` concentrates near 1); the variance of recovered
        squared distances is minimised at ``k_opt = rho^2 / (2 sigma^2)`` (Lemma 5).
    relation : {"replace-one", "element"}, default "replace-one"
        ``replace-one`` (default): one row, label included, replaced by any row of the public box;
        ``S2`` is the L2 sensitivity of the drawn ``R`` over the box
        (:func:`~dpcore.mechanisms._projection.box_sensitivity`: exact by vertex enumeration for
        small ``d``, else ``min(sigma_max(R) ||w||_2, sum_i w_i ||R_i||_2)``), and the labels get
        ``epsilon_split``'s part (the two add up). ``element``: the paper's relation (one attribute
        changes), ``S2 = Delta theta_2(R)``; the card also reports the row-level equivalent for the
        drawn ``R`` (``Release.row_level``): the same sigma judged at the box sensitivity, plus the
        labels' epsilon. The paper's epsilon = 1 per attribute is epsilon of about 20-60 per row on
        a 100-column table (the box sensitivity is about ``sqrt(d)`` to ``d / sqrt(k)`` times
        ``theta_2``).
    calibration : {"exact", "published"}, default "exact"
        ``exact``: analytic Gaussian mechanism with the sensitivity of the drawn ``R``.
        ``published``: Lemma 4's ``sigma = 4 sqrt(ln(1/delta)) / epsilon``, its conditions checked.
    element_bound : float, optional
        Public ``Delta``, the largest change of one entry (units of the rescaled data when
        ``rescale``; default: the widest public column range, i.e. 1 after rescaling).
    rescale : bool, default True
        Map each column to ``[0, 1]`` with its public bounds before projecting.
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`.

    epsilon_split : (float, float), default (0.5, 0.5)
        Replace-one with labels: fractions for the features and the labels
        (:func:`~dpcore.mechanisms._labels.label_budget_share`).

    Notes
    -----
    Release: ``Y`` (``n x k``, columns ``z1..zk``), ``R`` and the public bounds in
    ``transform_arrays`` (``transform(X) = rescale(clip(X)) @ R``), ``details["noise_variance"] =
    sigma^2`` for distance recovery (``||y_i - y_j||^2 - 2 k sigma^2``, Alg. 2 / Thm 3). Labels of a
    supervised task are released as their own column with epsilon-DP (randomized response /
    Laplace, see :func:`~dpcore.mechanisms._labels.release_labels`); under the element relation a
    neighbour changes either a feature or the label, so the total stays (epsilon, delta). The
    paper's Fig. 5 trains SVMs on DPPro output without saying how labels are obtained (Table II
    counts the label among Adult's 15 attributes); a projected label cannot be read back, hence
    the separate private label column.

    Raises
    ------
    ValueError
        ``n_components >= n_features`` or ``< 1``, ``epsilon <= 0``, ``delta`` outside (0, 1),
        ``element_bound <= 0`` (from :meth:`release`).
    """

    name = "dppro"
    title = "DPPro (random projection + Gaussian noise)"
    summary = ("Random Gaussian projection to k dimensions (matrix released) plus Gaussian noise "
               "calibrated to the projection's row norms; distances recoverable without bias.")
    citation = DPPRO_CITATION
    params = (
        EPSILON,
        DELTA,
        Param("n_components", "int", None, "Projected dimension k (1 <= k < number of features; "
              "default min(10, d - 1)).", low=1, optional=True),
        Param("calibration", "choice", "exact", "exact: analytic Gaussian mechanism for the drawn "
              "R; published: Lemma 4's sigma = 4 sqrt(ln(1/delta))/epsilon (conditions checked).",
              choices=("exact", "published"), privacy=True),
        Param("relation", "choice", "replace-one", "Neighbouring relation: replace-one (one row, label "
              "included, replaced by any row of the public box: the row-level unit every mechanism "
              "reports) or the paper's element (one attribute changes by at most element_bound).",
              choices=("replace-one", "element"), privacy=True),
        Param("element_bound", "float", None, "Public largest change of one entry (default: the "
              "widest column range; 1 after rescaling).", low=0.0, low_open=True, optional=True,
              privacy=True),
        LABEL_SPLIT,
        Param("rescale", "bool", True, "Map each column to [0, 1] with its public bounds before "
              "projecting."),
    )
    neighbouring = "replace-one"
    guarantee_kind = "approx"
    space = "projected"
    capabilities = frozenset({"distances"})
    peak_row_copies = 8  # rescaled rows, projection, noise, per-class work (measured)

    @classmethod
    def transform_from_arrays(cls, arrays: Mapping[str, np.ndarray], parameters: Mapping[str, Any]
                              ) -> Callable[[np.ndarray], np.ndarray]:
        """``x -> ((clip(x, bounds) - lo) / scale) @ R`` from the saved public arrays."""
        return _public_transform(*(np.array(arrays[k], dtype=float) for k in ("lo", "scale", "bounds", "R")))

    def _release(
        self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator,
        n_samples: int | None, *, bits: BitSource,
    ) -> Release:
        setup = projection_setup(data, params, rng, n_samples, "DPPro")
        inp, R, n, d, k = setup.inp, setup.P, setup.n, setup.d, setup.k
        eps, delta, calibration = params["epsilon"], params["delta"], params["calibration"]

        relation = params["relation"]
        bound = params["element_bound"] or float(np.max(inp.widths)) or 1.0
        theta2 = float(np.max(np.linalg.norm(R, axis=1)))
        s2_element = element_sensitivity(R, inp.widths, bound, ord=2)
        # the row-level (replace-one) L2 sensitivity of the drawn R over the public box: the
        # calibration of relation="replace-one" and the row-level equivalent of the element mode
        s2_box, box_method = box_sensitivity(R, inp.widths, ord=2)
        s2 = s2_box if relation == "replace-one" else s2_element
        has_labels = data.task != "unsupervised" and data.y is not None
        if has_labels and relation == "replace-one":  # a replaced row moves features and label
            split = EpsilonSplit.from_fractions(eps, dict(zip(("features", "labels"),
                                                              params["epsilon_split"], strict=True)))
            eps_f, eps_l = split["features"], split["labels"]
        else:  # element: the changed entry is a feature or the label, each gets the whole epsilon
            eps_f, eps_l = eps, (eps if has_labels else None)
        sigma_exact = analytic_gaussian_sigma(s2, eps_f, delta)
        sigma_pub = dppro_published_sigma(eps_f, delta)
        warnings: list[str] = []
        sens_formula = ("S2 = sup over the public box of ||(x - x') R||_2 (" + box_method + ")"
                        if relation == "replace-one" else
                        "S2 = max_i min(Delta, w_i) ||R_i||_2 (= Delta theta_2(R))")
        if calibration == "exact":
            sigma, eps_features = sigma_exact, eps_f
            formula = sens_formula + "; sigma = analytic Gaussian"
            source = ("DPPro Definition 3, Thm 2 (sensitivity of the drawn R); Balle & Wang 2018, Alg. 1"
                      + ("; box supremum: dpcore.mechanisms._projection.box_sensitivity"
                         if relation == "replace-one" else ""))
        else:
            sigma = sigma_pub
            achieved = gaussian_epsilon(sigma, s2, delta)
            eps_features = max(eps_f, achieved)
            warnings = lemma4_violations(eps_f, delta, d, k, bound, theta2)
            if relation == "replace-one":
                warnings.append("Lemma 4 is stated for the element relation (one attribute changes); "
                                "under replace-one its sigma is checked against the box sensitivity "
                                "of the drawn R")
            if achieved > eps_f:
                warnings.append(f"with the published sigma the drawn R gives only ({achieved:.4g}, "
                                f"{delta:.3g})-DP, which is what the guarantee reports")
            formula = "sigma = 4 sqrt(ln(1/delta)) / epsilon"
            source = "DPPro Lemma 4 (via Thm 2 with theta_2 <= 2)"
        # one changed entry (or row) moves the k outputs of its row: n_changed = k. The exact
        # calibration is redone at the rounding-inflated sensitivity; the published sigma is kept
        # and its achieved epsilon recomputed at that sensitivity.
        eps_i, delta_i = reserve_part_slack(eps, eps_f, delta, k)
        if sigma > 0 and calibration == "exact":  # the sampler's slack reserved from (eps, delta)
            plan = dpnoise.calibrated_gaussian_plan(
                s2, lambda s: analytic_gaussian_sigma(s, eps_i, delta_i), n_changed=k, bits=bits)
            sigma = plan.scale
        elif sigma > 0:
            g, s2_used = dpnoise.gaussian_grid(s2, k, sigma)
            plan = dpnoise.gaussian_plan(sigma, grid=g, l2_sensitivity=s2, n_changed=k, bits=bits)
            eps_features = max(eps_f, gaussian_epsilon(sigma, s2_used, delta))
        Y = inp.project(R, plan if sigma > 0 else None)
        labels = release_labels(data, eps if eps_l is None else eps_l, bits)

        noise = [NoiseRecord(
            statistic=f"projected data Y = X R ({n} x {k})", sensitivity=s2, scale=sigma,
            distribution="gaussian", norm="L2", epsilon=eps_features, delta=delta, formula=formula,
            source=source, **(dpnoise.record_fields(plan) if sigma > 0 else {}),
        )]
        if labels.noise is not None:
            noise.append(labels.noise)
        total = combine_with_labels("element" if relation == "element" else "row", eps_features, eps_l)
        if calibration == "exact":
            total, delta_total, slack = dpnoise.reserved_guarantee(
                [plan] if sigma > 0 else [], total, delta, total - eps_f + eps_i, delta_i)
        elif sigma > 0:  # the published sigma: its epsilon at the rounded sensitivity, plus the slack
            total, delta_total, slack = dpnoise.fixed_sigma_guarantee(
                [plan], lambda dl: gaussian_epsilon(sigma, s2_used, dl), total, delta, k)
        else:
            total, delta_total, slack = dpnoise.slack_details([], total, delta)
        neighbouring = "element" if relation == "element" else "replace-one"
        guarantee = Guarantee(epsilon=total, delta=delta_total, neighbouring=neighbouring, kind="approx")
        row_level, eps_row_f = None, eps_features
        if relation == "element":
            # the same sigma judged at the drawn R's box sensitivity (rounding included), plus the
            # labels' epsilon (a replaced row changes its label too): the row-level equivalent
            if sigma > 0:
                s2_box_used = s2_box + math.sqrt(k) * plan.grid
                eps_row_f, delta_row, _ = dpnoise.fixed_sigma_guarantee(
                    [plan], lambda dl: gaussian_epsilon(sigma, s2_box_used, dl), eps_f, delta, k)
            else:
                eps_row_f, delta_row = math.inf, delta
            row_level = Guarantee(epsilon=combine_with_labels("row", eps_row_f, eps_l), delta=delta_row,
                                  neighbouring="replace-one", kind="approx")
        details: dict[str, Any] = {
            "n_components": k,
            "relation": relation,
            "rescaled": inp.rescaled,
            "element_bound": bound,
            "theta2": theta2,
            "noise_distribution": "gaussian",
            "noise_scale": sigma,
            "noise_variance": sigma * sigma,
            "sigma_exact": sigma_exact,
            "sigma_published": sigma_pub,
            "epsilon_features": eps_f,
            "epsilon_labels": eps_l,
            "epsilon_for_drawn_projection": gaussian_epsilon(sigma, s2, delta),
            "row_level_sensitivity": s2_box,
            "row_level_sensitivity_method": box_method,
            "element_sensitivity": s2_element,
            "row_level_epsilon_features": eps_row_f,
            "lemma4_conditions_hold": not lemma4_violations(eps_f, delta, d, k, bound, theta2),
            "transform": "public: x -> rescale(clip(x)) @ R (R and bounds in the transform file)",
            "labels": None if labels.noise is None else (
                "released as their own column with the whole epsilon (randomized response / Laplace): "
                "under the element relation a neighbour changes a feature or the label, never both"
                if relation == "element" else
                "released as their own column (randomized response / Laplace) with the 'labels' part "
                "of epsilon_split: a replaced row changes its features and its label, so the two "
                "epsilons add up"),
            "warnings": warnings,
            "noise_slack": slack,
        }
        rel = self._new_release(
            data, params, values=Y, columns=projected_columns(k), guarantee=guarantee, noise=noise,
            calibration=calibration, labels=labels.labels, label_columns=labels.columns,
            details=details, transform_arrays={"R": R, "bounds": inp.bounds, "lo": inp.lo,
                                               "scale": inp.scale},
            row_level=row_level,
        )
        return rel


def _public_transform(lo: np.ndarray, scale: np.ndarray, bounds: np.ndarray, R: np.ndarray
                      ) -> Callable[[np.ndarray], np.ndarray]:
    """``x -> rescale(clip(x)) @ R`` built from public arrays only (the closure holds no private data)."""

    def transform(X: np.ndarray) -> np.ndarray:
        return scale_rows(X, lo, scale, bounds) @ R

    return transform
