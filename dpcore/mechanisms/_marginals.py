"""The marginals a generative mechanism measures with a share of its budget (:mod:`dpcore.marginals`).

Shared by PCA-Gauss and MODIPS: whether to measure them (a public rule), their public tables, and
the noisy counts in the mechanism's own accounting (a ``"marginals"`` part of its zCDP budget, or of
its pure-epsilon split), so they compose exactly with the mechanism's other statistics.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpcore import marginals as dpmarg
from dpcore import noise as dpnoise
from dpcore.calibration import EpsilonSplit, laplace_scale
from dpcore.mechanisms._gaussian_model import ZCDPBudget, zcdp_sigma
from dpcore.noise import BitSource
from dpcore.preprocessing import PreparedInput
from dpcore.release import NoiseRecord

__all__ = ["marginal_plan", "marginal_share", "measure_marginals"]


def marginal_plan(data: PreparedInput, noise_sd: float) -> dpmarg.MarginalPlan:
    """The public tables of ``data``'s marginals for counts with noise ``noise_sd``
    (:func:`dpcore.marginals.plan_marginals`)."""
    n_classes = 0 if data.classes is None else data.classes.size
    return dpmarg.plan_marginals(data.feature_names, data.bounds, data.onehot_groups, task=data.task,
                                 n_rows=data.n_samples, noise_sd=noise_sd, n_classes=n_classes,
                                 label_name=data.label_name, label_bounds=data.label_bounds)


def marginal_share(params: dict[str, Any], data: PreparedInput, *, decodable: bool = True) -> float:
    """The marginals' share of the budget, 0 when none are measured: ``marginals="off"``, a release
    that cannot return to the original columns (``decodable`` false), images (a public
    ``image_shape``: one marginal per pixel is not worth its noise), a table larger than memory (its
    parts stay in the released space), or too few rows for the counts' noise
    (:func:`dpcore.marginals.measured_share`). Public facts only; ``params`` validated, with the
    noise resolved (and ``delta`` filled where Gaussian noise is used)."""
    image = data.image_shape is not None and int(np.prod(data.image_shape)) == data.X.shape[1]
    if params["marginals"] == "off" or not decodable or image or not isinstance(data.X, np.ndarray):
        return 0.0
    plan = marginal_plan(data, 0.0)
    return dpmarg.measured_share(
        dpmarg.marginal_fraction(params["marginal_fraction"]), epsilon=params["epsilon"],
        delta=params["delta"] if params["noise"] == "gaussian" else None, n_rows=data.n_samples,
        n_groups=plan.n_groups, n_tables=plan.n_tables, numeric_only=plan.numeric_only)


def measure_marginals(data: PreparedInput, share: float, split: EpsilonSplit, gauss: ZCDPBudget | None,
                      bits: BitSource) -> tuple[dpmarg.DPMarginals, NoiseRecord]:
    """The DP marginals with the ``"marginals"`` part of the budget: Gaussian noise in the zCDP
    budget ``gauss`` (``S2 = sqrt(2 m)``) or Laplace noise from ``split`` (``S1 = 2 m``) on the counts
    of the ``m`` tables (:func:`dpcore.marginals.marginal_sensitivities`); the cells are chosen for
    that noise (:func:`dpcore.marginals.plan_marginals`). ``share``: the part's fraction, for the card.
    The exact counts go to ``data.diagnostics["marginal_counts"]`` (exploration only)."""
    m = marginal_plan(data, 0.0).n_tables
    s1, s2 = dpmarg.marginal_sensitivities(m)
    sd = (zcdp_sigma(s2, gauss.rho["marginals"]) if gauss is not None
          else math.sqrt(2.0) * laplace_scale(s1, split["marginals"]))
    plan = marginal_plan(data, sd)
    counts = plan.counts(data.X, data.y)
    statistic = (f"counts of {m} one-way marginals" + (" by class" if plan.conditional else "")
                 + f" over public cells ({counts.size} cells)")
    why = ("replace-one: a record leaves one cell and joins one cell of each of the m tables, "
           "whatever its class (dpcore.marginals.marginal_sensitivities)")
    if gauss is not None:
        noisy, rec = gauss.add(counts.ravel(), "marginals", s2, 2 * m, laplace_s1=s1, statistic=statistic,
                               formula=f"S2 = sqrt(2 m), m = {m} ({why})", source=dpmarg.MARGINAL_SOURCE)
    else:
        draw = dpnoise.laplace(counts.ravel(), s1, scale=laplace_scale(s1, split["marginals"]),
                               n_changed=2 * m, bits=bits)
        noisy = draw.values
        rec = NoiseRecord(statistic=statistic, sensitivity=s1, scale=draw.scale, distribution="laplace",
                          norm="L1", epsilon=split["marginals"], **dpnoise.record_fields(draw),
                          formula=f"S1 = 2 m, m = {m} ({why}); b = S1/eps_marginals",
                          source=dpmarg.MARGINAL_SOURCE)
    data.diagnostics["marginal_counts"] = counts
    return dpmarg.DPMarginals(plan, np.asarray(noisy, dtype=float).reshape(counts.shape), share), rec
