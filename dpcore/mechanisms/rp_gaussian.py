"""rp-gaussian: rows times a public Gaussian matrix ``R``, plus Gaussian noise; (epsilon, delta)-DP.

The random-projection baseline of DPMix (section IV), after Kenthapadi et al. (2013) and DPPro
Lemma 3. Neighbouring relation: replace-one (``n`` public; one row, label included). Labels are
released on their own with ``epsilon_split``'s label part (``label_release="separate"``, default),
or appended to the projected row under ONE Gaussian mechanism (``"appended"``: the label's share
enters the L2 sensitivity, but the noise scale is set by the projection's sensitivity, about
``sqrt(d)`` times the label's, so at epsilon = 1 the decoded labels are nearly uniform and a
classifier trained on them falls below the majority rate: 0.24 on Adult, issue 13). Features are
clipped to their public bounds and mapped onto ``[-1, 1]``
(:func:`~dpcore.mechanisms._box.scale_to_box`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np

from dpcore import noise as dpnoise
from dpcore.calibration import (
    EpsilonSplit,
    analytic_gaussian_sigma,
    gaussian_epsilon,
    kenthapadi_sigma,
)
from dpcore.mechanisms._box import (
    BOX,
    box_l2_sensitivity,
    box_projection,
    box_widths,
)
from dpcore.mechanisms._gaussian_model import (
    label_to_unit,
    unit_to_label,
)
from dpcore.mechanisms._identity import _N_COMPONENTS_JL
from dpcore.mechanisms._labels import LABEL_SPLIT, release_labels, reserve_part_slack
from dpcore.mechanisms._projection import (
    check_one_row_per_input,
    gaussian_projection,
    projected_columns,
    resolve_n_components,
)
from dpcore.mechanisms.base import Mechanism
from dpcore.noise import BitSource
from dpcore.preprocessing import PreparedInput
from dpcore.release import Guarantee, NoiseRecord, Release
from dpcore.schema import DELTA, EPSILON, Param

__all__ = ['RPGaussian']


DPMIX_RP_CITATION = ("Lee, Kim, Lee, Suh & Ramchandran, DPMix, ISIT 2019, section IV (random "
                     "projection baseline, after Kenthapadi et al. 2013 and DPPro Lemma 3)")


class RPGaussian(Mechanism):
    """Gaussian random projection + Gaussian noise, replace-one ((eps, delta)-DP): DPMix's baseline.

    DPMix section IV: "This algorithm first draws a random projection matrix ``R`` ... transforms
    each data point by multiplying it with ``R``. It then adds Gaussian noise whose standard
    deviation is ``sigma(R) (sqrt(log(1/(2 delta)) + eps)/eps)``, where ``sigma(R)`` is the spectral
    norm of matrix ``R``. It can be shown that this setting yields (eps, delta)-DP [10], [11]."

    Implementation. Rows scaled to ``[-1, 1]^d`` (module docstring) are multiplied by a public
    ``d x k`` matrix ``R`` of i.i.d. ``N(0, 1/k)`` entries (the matrices of [10] Kenthapadi et al. and
    [11] DPPro; DPMix does not name a distribution) and released with i.i.d. ``N(0, sigma^2)`` noise.
    With ``label_release="appended"``, labels are appended to each projected row, encoded as a
    one-hot vector of height 2 (the features' width; classification, decoded by argmax) or the label mapped to
    ``[-1, 1]`` (regression, mapped back), and perturbed by the SAME Gaussian mechanism.

    Sensitivity (replace-one, ours). One replaced row changes its projected row by ``v R``,
    ``|v_l| <= w_l``, and its encoded label by at most ``2 sqrt(2)`` (one-hot) or 2 (regression):
    ``S2 = sqrt(S_R^2 + S_label^2)`` with ``S_R`` from :func:`box_l2_sensitivity`. DPMix's
    ``sigma(R)`` is ``S_R``'s spectral form in units where a row moves by at most 1 (its data have
    ``||x|| <= 1`` with non-negative entries, so a replaced row actually moves by up to ``sqrt(2)``;
    the scale-free form ``sigma_max(R) ||w||_2`` used here is sound for any public box).

    Calibration.

    * ``"analytic"`` (default): ``sigma`` = analytic Gaussian mechanism (Balle & Wang 2018) for
      ``S2`` with ``S_R = min(sigma_max(R) ||w||_2, sum_l w_l ||R_l||_2)``: exactly (eps, delta).
    * ``"paper"``: ``sigma = S2 sqrt(2 (ln(1/(2 delta)) + eps)) / eps`` with the spectral
      ``S_R = sigma_max(R) ||w||_2`` (:func:`kenthapadi_sigma`, the form of DPPro Lemma 3 / Thm 2
      that DPMix cites). The extracted DPMix text lacks the factor 2 under the root; read literally,
      ``sigma = S2 sqrt(ln(1/(2 delta)) + eps)/eps`` is NOT sound (its exact delta exceeds the target
      by up to 229x at delta = 1e-8), so the cited sound form is used. It is conservative; the
      epsilon it actually achieves for the drawn ``R`` is in ``details["epsilon_achieved"]``.

    Parameters
    ----------
    epsilon : float, default 1.0
        (> 0; ``inf`` = NOT PRIVATE, zero noise.)
    delta : float, default 1e-5
        In (0, 1); ``< 0.5`` for ``calibration="paper"``.
    n_components : int, optional
        ``k``, ``1 <= k < n_features``; default ``min(10, d - 1)`` (DPMix Table II uses 50-400 on
        784-pixel images).
    calibration : {"analytic", "paper"}, default "analytic"
    label_release : {"separate", "appended"}, default "separate"
        ``separate``: features by the Gaussian mechanism at ``(eps_features, delta)``, labels by
        k-ary randomized response / Laplace at ``eps_labels``
        (:func:`~dpcore.mechanisms._labels.release_labels`); a replaced row moves both, so the
        guarantee is ``(eps_features + eps_labels, delta)``. ``appended``: the encoding below.
    epsilon_split : (float, float), default (0.5, 0.5)
        ``label_release="separate"``: fractions for the features and the labels
        (:func:`~dpcore.mechanisms._labels.label_budget_share`).
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`.

    Notes
    -----
    Released table: ``n`` rows ``z1..zk`` plus the decoded label column. ``transform_arrays``:
    ``R``, ``center`` (zeros), ``bounds``; ``transform(x) = scale_to_box(clip(x)) @ R``.

    Raises
    ------
    ValueError
        ``n_components >= n_features``, ``delta`` outside (0, 1) (or ``>= 0.5`` for "paper"),
        ``epsilon <= 0``, ``n_samples`` different from the number of rows.
    """

    name = "rp-gaussian"
    title = "Random projection + Gaussian (DPMix baseline)"
    summary = ("Baseline: project every row with a public Gaussian random matrix and add Gaussian "
               "noise calibrated to the projection's spectral norm (replace-one).")
    citation = DPMIX_RP_CITATION
    params = (
        EPSILON,
        DELTA,
        _N_COMPONENTS_JL,
        Param("calibration", "choice", "analytic", "analytic Gaussian mechanism (exact) or the "
              "paper's sigma(R) sqrt(2(ln(1/(2 delta)) + eps))/eps (sound, conservative).",
              choices=("analytic", "paper"), privacy=True),
        Param("label_release", "choice", "separate", "Supervised tasks: labels released on their own "
              "(randomized response / Laplace, with epsilon_split's label part) or appended to the "
              "projected row under the same Gaussian noise (whose scale, set by the projection, "
              "drowns them: the decoded labels are close to uniform).",
              choices=("separate", "appended"), privacy=True),
        LABEL_SPLIT,
    )
    neighbouring = "replace-one"
    guarantee_kind = "approx"
    space = "projected"
    baseline = True

    @classmethod
    def transform_from_arrays(cls, arrays: Mapping[str, np.ndarray], parameters: Mapping[str, Any]
                              ) -> Callable[[np.ndarray], np.ndarray]:
        """``(scale_to_box(clip(x)) - center) @ R`` (:func:`~dpcore.mechanisms._box.box_projection`)."""
        return partial(box_projection, bounds=np.array(arrays["bounds"], dtype=float),
                       center=np.array(arrays["center"], dtype=float), M=np.array(arrays["R"], dtype=float))

    def _release(
        self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator,
        n_samples: int | None, *, bits: BitSource,
    ) -> Release:
        check_one_row_per_input(n_samples, data.n_samples, "rp-gaussian")
        n, d = data.X.shape
        k = resolve_n_components(params["n_components"], d)
        eps, delta, calibration = params["epsilon"], params["delta"], params["calibration"]
        if calibration == "paper":
            kenthapadi_sigma(1.0, 1.0, delta)  # validates delta < 0.5 before any randomness
        R = gaussian_projection(d, k, rng)
        widths = box_widths(data.bounds)
        s_r, s_r_spectral = box_l2_sensitivity(R, widths)
        separate = params["label_release"] == "separate" and data.task != "unsupervised"
        if not data.engine.in_memory and data.task != "unsupervised" and not separate:
            raise ValueError(f"rp-gaussian on the {data.engine.name} engine releases labels separately only "
                             "(label_release='separate'); 'appended' is not available there")
        if separate:  # features (eps_f, delta) + labels eps_l, pure: basic composition
            split = EpsilonSplit.from_fractions(
                eps, dict(zip(("features", "labels"), params["epsilon_split"], strict=True)))
            eps, eps_l = split["features"], split["labels"]
            encoded, s_label = np.zeros((n, 0)), 0.0
            decode = None
        else:
            eps_l = None
            encoded, s_label, decode = _encode_labels(data)
        s2 = math.hypot(s_r, s_label)
        if calibration == "paper":
            s2_used = math.hypot(s_r_spectral, s_label)
            sigma = kenthapadi_sigma(s2_used, eps, delta)
            formula = ("S2 = sqrt((sigma_max(R) ||w||_2)^2 + S_label^2); sigma = S2 sqrt(2(ln(1/(2 delta))"
                       " + eps))/eps")
            source = f"{DPMIX_RP_CITATION}; DPPro Lemma 3 / Thm 2"
        else:
            s2_used = s2
            sigma = analytic_gaussian_sigma(s2, eps, delta)
            formula = ("S2 = sqrt(min(sigma_max(R) ||w||_2, sum_l w_l ||R_l||_2)^2 + S_label^2); "
                       "sigma = analytic Gaussian(S2, eps, delta)")
            source = f"{DPMIX_RP_CITATION}; Balle & Wang, ICML 2018, Thm 8 / Alg. 1"
        projected = data.engine.map_rows(partial(box_projection, bounds=data.bounds, center=np.zeros(d), M=R),
                                         data.X, k)
        block = data.engine.column_stack([projected, encoded])
        # one replaced row moves its projected row and encoded label: n_changed = its width
        n_changed = block.shape[1]
        s2_rounded = s2
        if sigma > 0 and calibration == "paper":  # the published sigma, on a grid: count the rounding
            g, s2_rounded = dpnoise.gaussian_grid(s2, n_changed, sigma)
            plan = dpnoise.gaussian_plan(sigma, grid=g, l2_sensitivity=s2, n_changed=n_changed, bits=bits)
        elif sigma > 0:  # recalibrated at the rounding-inflated sensitivity, the sampler's slack reserved
            eps_i, delta_i = reserve_part_slack(params["epsilon"], eps, delta, n_changed)
            plan = dpnoise.calibrated_gaussian_plan(s2, lambda s: analytic_gaussian_sigma(s, eps_i, delta_i),
                                                    n_changed=n_changed, bits=bits)
            sigma, s2_rounded = plan.scale, plan.sensitivity_used
        # exact epsilon of this sigma for the drawn R (and the grid rounding)
        reserved = sigma > 0 and calibration != "paper"
        achieved = gaussian_epsilon(sigma, s2_rounded, delta_i if reserved else delta)
        draws = [data.engine.add_noise(plan, block)] if sigma > 0 else []
        if draws:
            block = draws[0].values
        if separate:
            released = release_labels(data, eps_l, bits)
            labels, label_columns = released.labels, released.columns
        else:
            assert decode is not None
            labels, label_columns = decode(block[:, k:])
        noise = [NoiseRecord(
            statistic=f"projected rows scale(X) R ({n} x {k})"
            + (" with the encoded label appended" if data.task != "unsupervised" and not separate else ""),
            sensitivity=s2_used, scale=sigma, distribution="gaussian", norm="L2", epsilon=eps,
            delta=delta, formula=formula, source=source, **(dpnoise.record_fields(draws[0]) if draws else {}),
        )]
        details = {
            "n_components": k,
            "scaling": BOX,
            "sensitivity_projection": s_r,
            "sensitivity_projection_spectral": s_r_spectral,
            "sensitivity_label": s_label,
            "sigma_max_R": float(np.linalg.norm(R, 2)),
            "epsilon_achieved": achieved,
            "noise_variance": sigma * sigma,
            "labels": None if data.task == "unsupervised" else (
                "released as their own column (k-ary randomized response / Laplace) with the 'labels' "
                "part of epsilon_split; a replaced row changes its features and its label, so the "
                "two epsilons add up" if separate else
                "appended to the projected row (one-hot of height 2 / label mapped to [-1, 1]) under "
                "the same Gaussian mechanism, then decoded (argmax / mapped back): post-processing"),
            "epsilon_features": eps,
            "epsilon_labels": eps_l,
            "assumptions": ["n is public (bounded DP, replace-one neighbours)",
                            "R is drawn independently of the data and released"],
        }
        if reserved:
            eps_total, delta_total, details["noise_slack"] = dpnoise.reserved_guarantee(
                draws, eps, delta, achieved, delta_i)
        elif draws:  # the paper's sigma: its epsilon at the rounded sensitivity, plus the slack
            eps_total, delta_total, details["noise_slack"] = dpnoise.fixed_sigma_guarantee(
                draws, lambda dl: gaussian_epsilon(sigma, s2_rounded, dl), max(eps, achieved),
                delta, n_changed)
        else:
            eps_total, delta_total, details["noise_slack"] = dpnoise.slack_details(
                [], max(eps, achieved), delta)
        if separate:
            eps_total += eps_l
            noise.append(released.noise)
        guarantee = Guarantee(epsilon=eps_total, delta=delta_total, neighbouring="replace-one",
                              kind="approx")
        return self._new_release(
            data, params, values=block[:, :k], columns=projected_columns(k), guarantee=guarantee,
            noise=noise, calibration=calibration, labels=labels, label_columns=label_columns,
            details=details, transform_arrays={"R": R, "center": np.zeros(d), "bounds": data.bounds},
        )


def _encode_labels(data: PreparedInput) -> tuple[np.ndarray, float, Any]:
    """Encoded labels, their L2 sensitivity and the decoder (post-processing) for rp-gaussian.

    Classification: one-hot of height 2 (a replaced row moves two entries by 2: ``2 sqrt(2)``),
    decoded by argmax. Regression: the label mapped from its public bounds to ``[-1, 1]``
    (sensitivity 2), mapped back. Unsupervised: nothing.
    """
    n = data.n_samples
    name = [data.label_name or "label"]
    if data.task == "classification":
        assert data.classes is not None and data.y is not None
        classes = data.classes
        onehot = np.zeros((n, classes.size))
        onehot[np.arange(n), data.y] = 2.0
        return onehot, 2.0 * math.sqrt(2.0), lambda b: (classes[np.argmax(b, axis=1)], name)
    if data.task == "regression":
        assert data.y is not None and data.label_bounds is not None
        lb = data.label_bounds
        width = 2.0 if lb[1] > lb[0] else 0.0
        return (label_to_unit(data.y, lb, 1.0)[:, None], width,
                lambda b: (unit_to_label(b[:, 0], lb, 1.0), name))
    return np.zeros((n, 0)), 0.0, lambda b: (None, [])

