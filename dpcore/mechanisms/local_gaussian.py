"""Gaussian local perturbation: every clipped row plus analytic-Gaussian noise, one scale per column.

The simplest non-interactive release and the baseline the DPMix paper calls "local perturbation"
(DPMix with ``ell = 1``). Each record ``x_i`` (clipped to the public box
``[lo_1, hi_1] x ... x [lo_d, hi_d]``) is released as ``x_i + N(0, diag(sigma_1^2, ..., sigma_d^2))``.

Per-column noise shares. Column ``j`` gets noise ``sigma_j = sigma t_j`` for public shares
``t_j > 0`` (normalised so the largest feature share is 1). Adding ``N(0, diag(sigma_j^2))`` to
``x`` is the same as adding ``N(0, sigma^2 I)`` to ``x / t`` and multiplying back by the public
``t`` (post-processing), so the privacy loss is that of the Gaussian mechanism on ``x / t``, which
depends on the change of one row only through ``||Delta / t||_2`` (Dwork & Roth 2014, Thm A.1;
Balle & Wang 2018, Thm 8: the privacy profile of ``N(0, sigma^2 I)`` is a function of
``||Delta||_2 / sigma``). The L2 sensitivity of the scaled row is therefore

    ``S2 = sqrt(sum_j ((hi_j - lo_j) / t_j)^2 [+ label term])``,

attained by two opposite corners of the box: replacing one row changes column ``j`` by at most its
width ``w_j = hi_j - lo_j``, independently of the others. The label is one more block of
coordinates: a class label is one-hot encoded with height ``c = max_j w_j`` and share
``t = c / max_j w_j = 1`` (two entries change by ``c``: ``+ 2 c^2``); a regression label of range
``w_y`` has share ``w_y / max_j w_j`` (``+ max_j w_j^2``).

``column_noise="relative"`` (default): ``t_j = w_j / max_k w_k``, so every column's noise is the
same fraction of its range, ``sigma_j / w_j = sigma / max_k w_k`` (a column of width 72 next to one
of width 200,000 is not drowned by the wide one's noise). ``column_noise="equal"``: ``t_j = 1``, one
``sigma`` for every column, ``S2`` = the L2 diameter of the box (the previous behaviour). With equal
widths (images) both give the same noise. ``noise_shares`` (Python) sets the shares directly. A
warning is recorded when one column's range dominates (relative noise differing by more than
``DOMINANCE_RATIO`` between columns), and another when the noise standard deviation is at least
the whole range of every column (the rows are then mostly noise).

``sigma`` comes from the analytic Gaussian mechanism (Balle & Wang, ICML 2018, Theorem 8 / Alg. 1)
for ``S2`` — exact (epsilon, delta)-DP for every epsilon — or the classic bound
``S2 sqrt(2 ln(1.25/delta))/epsilon`` (Dwork & Roth 2014, Thm A.1, epsilon < 1). Neighbouring
relation: replace-one (``n`` public). Guarantee: (epsilon, delta)-DP.

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

__all__ = [
    "DOMINANCE_RATIO",
    "LocalGaussian",
    "column_shares",
    "dominance_warning",
    "swamped_warning",
    "label_height",
    "local_gaussian_sensitivity",
]

#: a warning is recorded when the relative noise sigma_j / w_j of two columns differs by more
DOMINANCE_RATIO = 10.0


def label_height(data: PreparedInput) -> float:
    """Height of the one-hot class encoding: the widest public feature range (1 if all are 0)."""
    widest = float(np.max(data.bounds[:, 1] - data.bounds[:, 0]))
    return widest if widest > 0 else 1.0


def _label_width(data: PreparedInput) -> float:
    """Public range of one label coordinate: ``c`` (classification), ``hi - lo`` (regression), 0."""
    if data.task == "classification":
        return label_height(data)
    if data.task == "regression" and data.label_bounds is not None:
        return float(data.label_bounds[1] - data.label_bounds[0])
    return 0.0


def column_shares(data: PreparedInput, column_noise: str = "relative",
                  noise_shares: Any = None) -> tuple[np.ndarray, float]:
    """Public noise shares ``(t_features (d,), t_label)``, the largest feature share 1.

    ``"relative"``: ``t_j = w_j / max_k w_k`` (a zero-width column, whose clipped value is public,
    takes the smallest positive share); ``"equal"``: all 1. ``noise_shares``: a dict
    ``{column: share}`` (unlisted columns: the relative share) or a sequence of ``d`` positive
    numbers, overriding ``column_noise``. The label's share follows its width as in ``"relative"``
    (``"equal"``: 1).

    Raises
    ------
    ValueError
        A share that is not a finite positive number, an unknown column, a wrong length.
    """
    widths = data.bounds[:, 1] - data.bounds[:, 0]
    wmax = float(np.max(widths)) if np.max(widths) > 0 else 1.0
    rel = widths / wmax
    positive = rel[rel > 0]
    rel = np.where(rel > 0, rel, positive.min() if positive.size else 1.0)
    label_w = _label_width(data)
    label_share = label_w / wmax if label_w > 0 else 1.0
    if noise_shares is None:
        if column_noise == "equal":
            return np.ones_like(widths, dtype=float), 1.0
        return rel, label_share
    if isinstance(noise_shares, dict):
        index = {name: j for j, name in enumerate(data.feature_names)}
        unknown = sorted(set(map(str, noise_shares)) - set(index))
        if unknown:
            raise ValueError(f"noise_shares names unknown column(s) {unknown[:5]}")
        shares = rel.copy()
        for name, value in noise_shares.items():
            shares[index[str(name)]] = value
    else:
        shares = np.asarray(noise_shares, dtype=float).ravel()
        if shares.shape != widths.shape:
            raise ValueError(f"noise_shares needs {widths.size} values (one per feature), got {shares.size}")
    shares = np.asarray(shares, dtype=float)
    if not (np.isfinite(shares).all() and (shares > 0).all()):
        raise ValueError("noise_shares must be finite positive numbers (a column's share of the noise)")
    return shares / shares.max(), label_share


def local_gaussian_sensitivity(data: PreparedInput, shares: np.ndarray | None = None,
                               label_share: float = 1.0, include_label: bool = True) -> float:
    """L2 sensitivity of releasing one row divided by its public noise shares ``t`` (module docstring).

    Returns ``sqrt(sum_j (w_j / t_j)^2 + label_term)`` with ``w_j = hi_j - lo_j`` (``t = 1`` when
    ``shares`` is None: the L2 diameter of the box); ``label_term`` = ``2 (c / t_label)^2`` for a
    class label one-hot encoded with height ``c`` = :func:`label_height` (two entries change by
    ``c``), ``((hi - lo) / t_label)^2`` for a regression label, 0 without labels or when
    ``include_label`` is False (labels released on their own). Units: those of a column with share 1.
    """
    widths = data.bounds[:, 1] - data.bounds[:, 0]
    t = np.ones_like(widths) if shares is None else shares
    total = float(np.sum((widths / t) ** 2))
    if not include_label:
        return math.sqrt(total)
    label_w = _label_width(data) / label_share
    if data.task == "classification":
        total += 2.0 * label_w**2
    elif data.task == "regression":
        total += label_w**2
    return math.sqrt(total)


def _relative_noise(data: PreparedInput, shares: np.ndarray, sigma: float
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``(sigma_j / w_j, w_j, sigma_j, names)`` over the columns of non-zero public range ``w_j``
    (``sigma_j = sigma t_j``), or None when there is none or ``sigma`` is 0 or not finite."""
    widths = data.bounds[:, 1] - data.bounds[:, 0]
    ok = widths > 0
    if not ok.any() or not math.isfinite(sigma) or sigma == 0:
        return None
    noise = sigma * shares[ok]
    return noise / widths[ok], widths[ok], noise, np.asarray(data.feature_names, dtype=object)[ok]


def dominance_warning(data: PreparedInput, shares: np.ndarray, sigma: float) -> str | None:
    """A sentence when the relative noise ``sigma_j / w_j`` of two columns differs by more than
    :data:`DOMINANCE_RATIO` (one column's range dominates the noise of the others), else None."""
    columns = _relative_noise(data, shares, sigma)
    if columns is None or columns[0].size < 2:
        return None
    relative, widths, noise, names = columns
    ratio = float(relative.max() / relative.min())
    if ratio <= DOMINANCE_RATIO:
        return None
    loud, quiet = int(np.argmax(relative)), int(np.argmin(relative))
    return (f"one column's range dominates the noise: column {names[quiet]!r} (range "
            f"{widths[quiet]:.4g}) sets a noise of {noise[loud]:.4g} on column "
            f"{names[loud]!r} (range {widths[loud]:.4g}), {ratio:.3g} times more relative noise; "
            "column_noise='relative' gives every column noise in proportion to its range")


def swamped_warning(data: PreparedInput, shares: np.ndarray, sigma: float) -> str | None:
    """A sentence when the noise standard deviation ``sigma_j`` is at least the whole public range
    ``w_j`` of every column of non-zero range (each released row is then mostly noise, and clipping
    it to the bounds piles values on the bounds), else None. From public facts only (bounds, shares,
    ``sigma``)."""
    columns = _relative_noise(data, shares, sigma)
    if columns is None:
        return None
    least = float(np.min(columns[0]))
    if least < 1.0:
        return None
    return (f"the noise is larger than the data: each column's noise standard deviation is at least "
            f"{least:.3g} times its whole public range, so single released rows carry little of the real "
            "values (and a download clipped to the bounds piles many of them on a bound). Local "
            "perturbation pays for every row separately; at this epsilon a mechanism that releases a "
            "model of the table (PCA-Gauss, RON-Gauss, MODIPS) keeps far more of it")


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
    column_noise : {"relative", "equal"}, default "relative"
        Per-column noise shares (module docstring): in proportion to each column's public range,
        or one noise scale for every column.
    noise_shares : dict {column: share} or sequence of d positive floats, optional
        Public shares set by hand (relative scale of each column's noise); overrides ``column_noise``.
    label_release : {"separate", "appended"}, default "separate"
        Supervised tasks: labels by randomized response / Laplace with ``epsilon_split``'s label
        part, or encoded into the noisy row (module docstring).
    epsilon_split : (float, float), default (0.5, 0.5)
        ``label_release="separate"``: fractions for the features and the labels.
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`.

    Notes
    -----
    Released table: ``n`` rows ``x_i + N(0, diag(sigma_j^2))`` in the input's feature space, plus
    the privately released labels (``"appended"``: the noisy one-hot decoded by argmax, or the noisy
    regression label). Noise is unbiased, so column means of the release estimate
    the clipped data's means with variance ``sigma_j^2 / n``. ``details["noise_per_column"]`` gives
    every ``sigma_j`` (``details["noise_shares"]`` the shares ``t_j``).
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
        Param("column_noise", "choice", "relative", "Noise per column: in proportion to each "
              "column's public range (relative) or one scale for all columns (equal, set by the "
              "widest range).", choices=("relative", "equal"), privacy=True),
        Param("label_release", "choice", "separate", "Supervised tasks: labels released on their own "
              "(randomized response / Laplace, with epsilon_split's label part) or appended to the "
              "noisy row (whose noise, set by the box diameter, drowns them).",
              choices=("separate", "appended"), privacy=True),
        LABEL_SPLIT,
    )
    extra_args = ("noise_shares",)
    neighbouring = "replace-one"
    guarantee_kind = "approx"
    capabilities = frozenset({"images"})
    row_wise = True  # x_i + N(0, diag(sigma_j^2)), sigma from public bounds; labels per row

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
        if not data.engine.in_memory and data.task != "unsupervised" and not separate:
            raise ValueError(f"local-gaussian on the {data.engine.name} engine releases labels separately "
                             "only (label_release='separate'); 'appended' is not available there")
        eps_l = None
        if separate:  # features (eps_f, delta) + labels eps_l, pure: basic composition
            split = EpsilonSplit.from_fractions(
                eps, dict(zip(("features", "labels"), params["epsilon_split"], strict=True)))
            eps, eps_l = split["features"], split["labels"]
        shares, label_share = column_shares(data, params["column_noise"], self.noise_shares)
        s2 = local_gaussian_sensitivity(data, shares, label_share, include_label=not separate)

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
        t = np.concatenate([shares, np.full(stacked.shape[1] - d, label_share)])
        uniform = bool(np.all(t == 1.0))
        scaled = stacked if uniform else stacked / t  # x / t: unit noise share per coordinate
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

        plan = dpnoise.calibrated_gaussian_plan(s2, calibrate, n_changed=stacked.shape[1], bits=bits)
        draw = data.engine.add_noise(plan, scaled)  # on the engine of the rows (per block)
        sigma = draw.scale
        noisy = draw.values if uniform else draw.values * t  # public t: post-processing
        values = noisy[:, :d]
        labels = None
        label_columns: list[str] = []
        released = release_labels(data, eps_l, bits) if separate and eps_l is not None else None
        if released is not None:
            labels, label_columns = released.labels, released.columns
        elif data.task == "classification":
            labels = data.classes[np.argmax(noisy[:, d:], axis=1)]
            label_columns = [data.label_name or "label"]
        elif data.task == "regression":
            labels = noisy[:, d]
            label_columns = [data.label_name or "label"]
        formula = ("sigma = analytic Gaussian(S2, epsilon, delta)"
                   if params["calibration"] == "analytic"
                   else "sigma = S2 sqrt(2 ln(1.25/delta)) / epsilon")
        if uniform:
            s2_text = ("S2 = sqrt(sum_j (hi_j - lo_j)^2 [+ 2 c^2 one-hot label of height c "
                       "| + label range^2]); ")
        else:
            s2_text = ("S2 = sqrt(sum_j ((hi_j - lo_j) / t_j)^2 [+ 2 (c / t_y)^2 one-hot label of height c "
                       "| + (label range / t_y)^2]), public shares t (largest feature share 1); ")
        noise = [NoiseRecord(
            statistic="each row (features" + (" + encoded label" if labels is not None and not separate
                                              else "")
            + ")" + ("" if uniform else ", column j divided by its public share t_j"),
            sensitivity=s2, scale=sigma, distribution="gaussian", norm="L2", epsilon=eps,
            delta=delta,
            formula=s2_text + formula
            + ("" if uniform else "; column j gets sigma_j = sigma t_j (details.noise_per_column)"),
            source=("Balle & Wang 2018, Thm 8 / Alg. 1" if params["calibration"] == "analytic"
                    else "Dwork & Roth 2014, Thm A.1")
            + ("" if uniform else "; per-coordinate scales: the loss depends on ||Delta / t||_2 only"),
            **dpnoise.record_fields(draw),
        )]
        eps_total, delta_total, slack = dpnoise.reserved_guarantee([draw], eps, delta, eps_i, delta_i)
        if released is not None and released.noise is not None and eps_l is not None:
            noise.append(released.noise)
            eps_total += eps_l
        guarantee = Guarantee(epsilon=eps_total, delta=delta_total, neighbouring="replace-one",
                              kind="approx")
        details: dict[str, Any] = {
            "noise_slack": slack,
            "epsilon_features": eps,
            "epsilon_labels": eps_l,
            "column_noise": "custom" if self.noise_shares is not None else params["column_noise"],
            "noise_shares": dict(zip(data.feature_names, shares.tolist(), strict=True)),
            "noise_per_column": dict(zip(data.feature_names, (sigma * shares).tolist(), strict=True)),
        }
        if label_columns and not separate:
            details["label_noise_share"] = label_share
            details["label_noise"] = sigma * label_share
        notes = [w for w in (dominance_warning(data, shares, sigma), swamped_warning(data, shares, sigma))
                 if w]
        if notes:
            details["warnings"] = notes
        return self._new_release(
            data, params, values=values, columns=list(data.feature_names), guarantee=guarantee,
            noise=noise, calibration=params["calibration"], labels=labels,
            label_columns=label_columns, details=details,
        )
