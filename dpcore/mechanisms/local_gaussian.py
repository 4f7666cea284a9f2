"""Gaussian local perturbation: every clipped row plus analytic-Gaussian noise.

The simplest non-interactive release and the baseline the DPMix paper calls "local perturbation"
(DPMix with ``ell = 1``). Each record ``x_i`` (clipped to the public box
``[lo_1, hi_1] x ... x [lo_d, hi_d]``) is released as ``x_i + N(0, sigma^2 I_d)``.

Privacy. Neighbouring relation: replace-one (``n`` public). Replacing one row changes one output
row, by at most the diameter of the public box in L2 norm,
``S2 = sqrt(sum_j (hi_j - lo_j)^2)`` plus the label's share when labels are released: a class
label is one-hot encoded with height ``c = max_j (hi_j - lo_j)`` (so it is as loud as the widest
feature against the same noise), which adds ``2 c^2`` under the root; a regression label adds
``(hi - lo)^2``. ``sigma`` comes from the analytic
Gaussian mechanism (Balle & Wang, ICML 2018, Theorem 8 / Alg. 1) — exact (epsilon, delta)-DP for
every epsilon — or the classic bound ``S2 sqrt(2 ln(1.25/delta))/epsilon`` (Dwork & Roth 2014,
Thm A.1, epsilon < 1). Guarantee: (epsilon, delta)-DP.

Labels (``label_release``). By default (``"separate"``) labels are released on their own, by k-ary
randomized response over the public class list or the Laplace mechanism on the clipped
regression label (:func:`~dpcore.mechanisms._labels.release_labels`), with the label part of
``epsilon_split`` (half by default, :func:`~dpcore.mechanisms._labels.label_budget_share`); the
features get ``(eps_features, delta)`` and a replaced row moves both, so the guarantee is
``(eps_features + eps_labels, delta)``. ``"appended"`` encodes the label into the noisy row as
above: the noise is then set by the box diameter, about ``sqrt(d)`` times the label's height, so at
epsilon = 1 the decoded labels are nearly uniform and a classifier trained on them falls below the
majority rate (issue 13).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpcore import noise as dpnoise
from dpcore.calibration import EpsilonSplit, analytic_gaussian_sigma, classic_gaussian_sigma
from dpcore.mechanisms._labels import LABEL_SPLIT, release_labels, reserve_part_slack
from dpcore.mechanisms.base import Mechanism
from dpcore.noise import BitSource
from dpcore.preprocessing import PreparedInput
from dpcore.release import Guarantee, NoiseRecord, Release
from dpcore.schema import DELTA, EPSILON, Param


def local_gaussian_sensitivity(data: PreparedInput, include_label: bool = True) -> float:
    """L2 sensitivity of releasing one row (features and, if ``include_label``, the encoded label).

    Returns ``sqrt(sum_j (hi_j - lo_j)^2 + label_term)``, ``label_term`` = ``2 c^2`` for a class
    label one-hot encoded with height ``c`` = :func:`label_height` (two entries change by ``c``),
    ``(hi - lo)^2`` for a regression label, 0 without labels.
    """
    widths = data.bounds[:, 1] - data.bounds[:, 0]
    total = float(np.sum(widths**2))
    if not include_label:
        return math.sqrt(total)
    if data.task == "classification":
        total += 2.0 * label_height(data) ** 2
    elif data.task == "regression" and data.label_bounds is not None:
        total += (data.label_bounds[1] - data.label_bounds[0]) ** 2
    return math.sqrt(total)


def label_height(data: PreparedInput) -> float:
    """Height of the one-hot class encoding: the widest public feature range (1 if all are 0)."""
    widest = float(np.max(data.bounds[:, 1] - data.bounds[:, 0]))
    return widest if widest > 0 else 1.0


class LocalGaussian(Mechanism):
    """Gaussian local perturbation of every row (replace-one, (epsilon, delta)-DP).

    Parameters
    ----------
    epsilon : float, default 1.0
        Privacy budget (> 0; ``inf`` = NOT PRIVATE, explore only).
    delta : float, default 1e-5
        In (0, 1).
    calibration : {"analytic", "classic"}, default "analytic"
        Analytic Gaussian mechanism (Balle & Wang 2018) or the classic bound (epsilon < 1 only).
    label_release : {"separate", "appended"}, default "separate"
        Supervised tasks: labels by randomized response / Laplace with ``epsilon_split``'s label
        part, or encoded into the noisy row (module docstring).
    epsilon_split : (float, float), default (0.5, 0.5)
        ``label_release="separate"``: fractions for the features and the labels.
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`.

    Released table: ``n`` rows ``x_i + N(0, sigma^2 I)`` in the input's feature space, plus the
    privately released labels (``"appended"``: the noisy one-hot decoded by argmax, or the noisy
    regression label). Noise is unbiased, so column means of the release estimate
    the clipped data's means with variance ``sigma^2 / n``.
    """

    name = "local-gaussian"
    title = "Gaussian local perturbation"
    summary = ("Each clipped row plus Gaussian noise calibrated to the row's L2 range "
               "(the DPMix paper's local-perturbation baseline, ell = 1).")
    citation = ("Balle & Wang, Improving the Gaussian Mechanism for Differential Privacy, ICML 2018; "
                "Lee et al., DPMix (local perturbation baseline)")
    params = (
        EPSILON,
        DELTA,
        Param("calibration", "choice", "analytic", "analytic Gaussian mechanism (exact, any "
              "epsilon) or the classic bound (epsilon < 1).", choices=("analytic", "classic"),
              privacy=True),
        Param("label_release", "choice", "separate", "Supervised tasks: labels released on their own "
              "(randomized response / Laplace, with epsilon_split's label part) or appended to the "
              "noisy row (whose noise, set by the box diameter, drowns them).",
              choices=("separate", "appended"), privacy=True),
        LABEL_SPLIT,
    )
    neighbouring = "replace-one"
    guarantee_kind = "approx"
    capabilities = frozenset({"images"})

    def _release(
        self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator,
        n_samples: int | None, *, bits: BitSource,
    ) -> Release:
        if n_samples is not None and n_samples != data.n_samples:
            raise ValueError(
                "local perturbation releases exactly one noisy row per input row; "
                f"n_samples must be None or {data.n_samples}, got {n_samples}"
            )
        eps, delta = params["epsilon"], params["delta"]
        separate = params["label_release"] == "separate" and data.task != "unsupervised"
        eps_l = None
        if separate:  # features (eps_f, delta) + labels eps_l, pure: basic composition
            split = EpsilonSplit.from_fractions(
                eps, dict(zip(("features", "labels"), params["epsilon_split"], strict=True)))
            eps, eps_l = split["features"], split["labels"]
        s2 = local_gaussian_sensitivity(data, include_label=not separate)

        n, d = data.X.shape
        # one row and its encoded label is the statistic: all its coordinates can change
        blocks = [data.X]
        if not separate and data.task == "classification":
            assert data.classes is not None and data.y is not None
            onehot = np.zeros((n, data.classes.size))
            onehot[np.arange(n), data.y] = label_height(data)
            blocks.append(onehot)
        elif not separate and data.task == "regression":
            assert data.y is not None
            blocks.append(data.y[:, None].astype(float))
        stacked = np.hstack(blocks) if len(blocks) > 1 else data.X
        if params["calibration"] == "classic" and math.isfinite(eps):
            classic_gaussian_sigma(s2, eps, delta)  # its validity conditions apply to the nominal epsilon
        # the discrete Gaussian's slack is reserved from (eps, delta): the card states (eps, delta)
        eps_i, delta_i = reserve_part_slack(params["epsilon"], eps, delta, stacked.shape[1])

        def calibrate(sensitivity: float) -> float:
            if math.isinf(eps):
                return 0.0
            if params["calibration"] == "classic":
                return classic_gaussian_sigma(sensitivity, eps_i, delta_i)
            return analytic_gaussian_sigma(sensitivity, eps_i, delta_i)

        draw = dpnoise.gaussian_mechanism(stacked, s2, calibrate, n_changed=stacked.shape[1], bits=bits)
        sigma = draw.scale
        values = draw.values[:, :d]
        labels = None
        label_columns: list[str] = []
        released = release_labels(data, eps_l, bits) if separate and eps_l is not None else None
        if released is not None:
            labels, label_columns = released.labels, released.columns
        elif data.task == "classification":
            labels = data.classes[np.argmax(draw.values[:, d:], axis=1)]
            label_columns = [data.label_name or "label"]
        elif data.task == "regression":
            labels = draw.values[:, d]
            label_columns = [data.label_name or "label"]
        formula = ("sigma = analytic Gaussian(S2, epsilon, delta)"
                   if params["calibration"] == "analytic"
                   else "sigma = S2 sqrt(2 ln(1.25/delta)) / epsilon")
        noise = [NoiseRecord(
            statistic="each row (features" + (" + encoded label" if labels is not None and not separate
                                              else "")
            + ")",
            sensitivity=s2, scale=sigma, distribution="gaussian", norm="L2", epsilon=eps,
            delta=delta,
            formula="S2 = sqrt(sum_j (hi_j - lo_j)^2 [+ 2 c^2 one-hot label of height c | + label range^2]); "
            + formula,
            source="Balle & Wang 2018, Thm 8 / Alg. 1" if params["calibration"] == "analytic"
            else "Dwork & Roth 2014, Thm A.1",
            **dpnoise.record_fields(draw),
        )]
        eps_total, delta_total, slack = dpnoise.reserved_guarantee([draw], eps, delta, eps_i, delta_i)
        if released is not None and released.noise is not None and eps_l is not None:
            noise.append(released.noise)
            eps_total += eps_l
        guarantee = Guarantee(epsilon=eps_total, delta=delta_total, neighbouring="replace-one",
                              kind="approx")
        return self._new_release(
            data, params, values=values, columns=list(data.feature_names), guarantee=guarantee,
            noise=noise, calibration=params["calibration"], labels=labels,
            label_columns=label_columns,
            details={"noise_slack": slack, "epsilon_features": eps, "epsilon_labels": eps_l},
        )
