"""DP one-way marginals and marginal-faithful decoding of a release into the original schema.

A generative release (PCA-Gauss, MODIPS) models the joint distribution of the encoded columns with a
Gaussian; mapped back to the custodian's columns it gets the dependence roughly right but the shape
of each column wrong: a column with 92% zeros (Adult's ``capital-gain``) comes out as a bell curve
clipped at the bounds, a rare category is never the largest indicator of its one-hot group, and so
on. A model trained on such a file learns the wrong thing, and at small epsilon below the majority
rate. This module fixes the *marginals* with a small public share of the budget and leaves the
*dependence* to the mechanism: a Gaussian copula whose margins are DP histograms (Li, Xiong & Jiang,
DPCopula, EDBT 2014), with the one-way marginals measured first as MST does (McKenna, Miklau &
Sheldon, "Winning the NIST Contest", JPC 2021).

**Measurement (privacy).** Every original column is one table of counts over public cells:

- a numeric column with public bounds ``[lo, hi]``: a cell for the value ``lo`` itself, ``n_bins``
  equal-width interior cells of ``(lo, hi)``, and a cell for ``hi`` itself (point masses at a bound,
  such as top-coded values or zeros, are common and come back exactly);
- a categorical column (a public one-hot group): one cell per public category (a row whose group is
  all zero, a missing value of a pre-encoded table, is in no cell);
- a regression label with public bounds: as a numeric column.

For classification the tables are **class-conditional** (one row of cells per public class): a
record lies in exactly one cell of each table whatever its class, so this costs the same
sensitivity as the one-way tables and carries the label's dependence with each column, the signal
a classifier trained on the file needs most. Under replace-one (``n`` public, the label included) a
changed record leaves one cell and joins one cell of each of the ``m`` tables: L1 sensitivity
``2 m``, L2 sensitivity ``sqrt(2 m)`` for all tables together (:func:`marginal_sensitivities`). The
counts get the release's noise (Gaussian in its zCDP budget, or Laplace) from those sensitivities,
as a budget part of their own (``"marginals"``) composed with the mechanism's other statistics.

**Cells from public facts only** (:func:`plan_marginals`): the number of interior cells of a
numeric column is chosen from ``n``, the number of groups and the counts' noise standard deviation
``sd`` (known before any count is read): the largest ``n_bins <= MAX_BINS`` with an expected
``n/(groups n_bins) >= CELL_SNR sd`` rows per interior cell, at least 1.

**Decoding (post-processing, free).** :func:`faithful_decode` takes the release's rows in the
encoded units (after the mechanism's public inverse map) and, within each class (or for all rows):

- a numeric column by quantile mapping: each value's rank among the group's values gives a level
  ``u``; the value becomes the DP marginal's inverse CDF at ``u`` (piecewise linear inside an
  interior cell, the bound itself in a bound cell). The mechanism's ranking (hence its dependence
  with the other columns) is kept, the marginal is the DP one;
- a categorical group by a quota assignment: every row gets one category so that the group's rows
  follow the DP counts (largest remainder), each row taking the category the model scores highest
  after per-category offsets (the dual prices of the assignment problem), so a rare category is
  given to the rows most like it instead of to none (no argmax mode collapse);
- the label keeps the mechanism's class counts, which already follow its DP class histogram.

Every step reads DP outputs and public facts only: the decoded file costs no budget beyond the
counts' share (Dwork & Roth 2014, Prop. 2.1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcore.schema import Param

__all__ = [
    "MARGINALS_PARAM",
    "MARGINAL_FRACTION_PARAM",
    "CELL_SNR",
    "EXACT_ASSIGNMENT_ROWS",
    "MARGINAL_FRACTION",
    "MARGINALS",
    "MARGINAL_SOURCE",
    "MAX_BINS",
    "MODEL_ROWS_IN_CELL",
    "DPMarginals",
    "MarginalColumn",
    "MarginalPlan",
    "faithful_decode",
    "marginal_fraction",
    "marginal_noise_sd",
    "measured_share",
    "marginal_sensitivities",
    "plan_marginals",
    "quota_assign",
    "quantile_map",
    "rr_class_rates",
]

#: sources of the measurement and of the decoding, for the card
MARGINAL_SOURCE = ("one-way marginals measured first as in McKenna, Miklau & Sheldon, MST (J. Privacy "
                   "and Confidentiality 2021); decoded as a Gaussian copula with DP margins, Li, Xiong & "
                   "Jiang, DPCopula (EDBT 2014)")
#: ``marginals`` parameter values: on for a release that can return to the original schema, or off
MARGINALS = ("auto", "off")
#: the marginals' share of the budget when left empty (:func:`marginal_fraction`)
MARGINAL_FRACTION = 0.3
#: the parameters of every mechanism that measures marginals (the Param schema drives the CLI and app)
MARGINALS_PARAM = Param(
    "marginals", "choice", "auto", "DP one-way marginals (class-conditional for classification) "
    "measured with a share of the budget, onto which the file in your original columns is mapped: "
    "each numeric column's distribution, point masses at its bounds, every category's rate follow "
    "the DP counts, the dependence comes from the model (auto: on where the release can return to "
    "your columns; off: the whole budget to the model).", choices=MARGINALS, privacy=True)
MARGINAL_FRACTION_PARAM = Param(
    "marginal_fraction", "float", None, "Share of epsilon spent on the marginals (marginals='auto'); "
    f"empty = {MARGINAL_FRACTION:g}, a public constant (dpcore.marginals.marginal_fraction).",
    low=0.0, high=1.0, low_open=True, high_open=True, privacy=True, optional=True)
#: rows of the model inside an interior cell for its shape there to follow the model (:func:`quantile_map`)
MODEL_ROWS_IN_CELL = 5
#: up to this many rows a category assignment is solved exactly (:func:`quota_assign`)
EXACT_ASSIGNMENT_ROWS = 1500
#: largest number of interior cells of a numeric column
MAX_BINS = 64
#: expected rows per cell over the counts' noise standard deviation, at least (the cell rule)
CELL_SNR = 8.0
#: interior cells a numeric column needs for a plan of numeric columns only to be measured
MIN_NUMERIC_BINS = 2


def marginal_fraction(value: float | None) -> float:
    """The marginals' share of the budget: ``value`` if given, else :data:`MARGINAL_FRACTION`.

    The default is a public constant, measured (docs: the downloaded file's benchmark): on Adult at
    epsilon = 0.1 and 1 (delta = 1e-6, PCA-Gauss) shares 0.2, 0.3 and 0.45 give file accuracies within
    their spread of each other at epsilon = 1, and 0.3 is the best at 0.1, where 0.1 leaves the counts
    too noisy for more than two cells and 0.6 or more starves the model.
    """
    return MARGINAL_FRACTION if value is None else float(value)


def marginal_noise_sd(epsilon: float, delta: float | None, fraction: float, n_tables: int) -> float:
    """Standard deviation of each count's noise with ``fraction`` of the budget: Gaussian (``delta``
    given, the share ``fraction rho`` of the zCDP budget, :func:`dpcore.accounting.zcdp_rho`),
    ``sqrt(2 m)/sqrt(2 fraction rho)``; Laplace ``sqrt(2) 2 m/(fraction epsilon)``. 0 at
    ``epsilon = inf``. Public facts only (the plan's figure; the release's own scale is on its card)."""
    from dpcore.accounting import zcdp_rho

    if math.isinf(epsilon):
        return 0.0
    s1, s2 = marginal_sensitivities(n_tables)
    if delta is None:
        return math.sqrt(2.0) * s1 / (fraction * epsilon)
    return s2 / math.sqrt(2.0 * fraction * zcdp_rho(epsilon, delta))


def measured_share(fraction: float, *, epsilon: float, delta: float | None, n_rows: int, n_groups: int,
                   n_tables: int, numeric_only: bool = False) -> float:
    """``fraction`` when the marginals are worth their budget, else 0 (none measured).

    Public rule: measured when at least one interior cell per group can hold ``CELL_SNR`` noise
    standard deviations of rows, ``n/groups >= CELL_SNR sd`` (:func:`marginal_noise_sd`); below
    that every count is mostly noise (e.g. 442 rows at epsilon = 1 without delta: sd = 103 per
    count) and the budget is better left to the model. A plan of numeric columns only (no category
    list, no class: ``numeric_only``) needs :data:`MIN_NUMERIC_BINS` interior cells: with one, a
    numeric table measures only the mass at its two bounds, which is nothing to map the model onto
    and noise to mistake for point masses (a simulated wage table at epsilon = 0.1: file RMSE 34.9
    with the marginals measured, 23.7 with their share left to the model, 20 releases each).
    """
    if fraction <= 0 or n_tables <= 0:
        return 0.0
    sd = marginal_noise_sd(epsilon, delta, fraction, n_tables)
    cells = MIN_NUMERIC_BINS if numeric_only else 1
    return fraction if n_rows >= max(1, n_groups) * cells * CELL_SNR * sd else 0.0


def marginal_sensitivities(n_tables: int) -> tuple[float, float]:
    """``(S1, S2)`` of the counts of ``n_tables`` tables under replace-one (label included).

    A record lies in at most one cell of each table (exactly one of a numeric table, at most one of
    a categorical group, one of a class-conditional table whatever its class). Replacing it takes
    ``1`` from at most one cell and adds ``1`` to at most one cell per table: per table L1 ``<= 2``
    and L2 ``<= sqrt(2)``, over ``m`` tables L1 ``<= 2 m`` and L2 ``<= sqrt(2 m)``, both attained by
    a record that moves to another cell of every table.
    """
    m = int(n_tables)
    return 2.0 * m, math.sqrt(2.0 * m)


@dataclass(frozen=True)
class MarginalColumn:
    """One table: an original column and its public cells.

    Attributes
    ----------
    name : str
        The original column (a one-hot group's column, a numeric column, or the label).
    kind : {"numeric", "categorical"}
    features : tuple of int
        Encoded feature indices: the numeric column, or the group's columns in category order;
        ``()`` for the regression label.
    lo, hi : float
        Numeric: the public bounds.
    n_bins : int
        Numeric: interior cells (the table has ``n_bins + 2`` cells: ``lo``, the bins, ``hi``).
    categories : tuple of str
        Categorical: the public categories (one cell each).
    """

    name: str
    kind: str
    features: tuple[int, ...]
    lo: float = 0.0
    hi: float = 1.0
    n_bins: int = 0
    categories: tuple[str, ...] = ()

    @property
    def n_cells(self) -> int:
        return self.n_bins + 2 if self.kind == "numeric" else len(self.categories)

    def edges(self) -> np.ndarray:
        """Numeric: the ``n_bins + 1`` edges of the interior cells, from ``lo`` to ``hi``."""
        return np.linspace(self.lo, self.hi, self.n_bins + 1)

    def cells(self, values: np.ndarray) -> np.ndarray:
        """The cell of each row, ``-1`` for none. ``values``: the numeric column ``(n,)`` (clipped
        to ``[lo, hi]``) or the group's columns ``(n, k)`` (0/1 indicators)."""
        if self.kind == "categorical":
            v = np.asarray(values, dtype=float)
            return np.where(v.max(axis=1) > 0, np.argmax(v, axis=1), -1)
        v = np.asarray(values, dtype=float)
        width = (self.hi - self.lo) / self.n_bins
        inner = 1 + np.clip(np.floor((v - self.lo) / width), 0, self.n_bins - 1).astype(np.int64)
        return np.where(v <= self.lo, 0, np.where(v >= self.hi, self.n_bins + 1, inner))

    def variance(self, probs: np.ndarray) -> np.ndarray:
        """The variance of the column under the marginal ``probs`` over its cells, in its units:
        numeric, a scalar: the variance of the cells' midpoints (the bound cells at the bounds) less
        Sheppard's correction ``w^2/12`` for the interior cells' share (grouping a smooth density
        into cells of width ``w`` adds about ``w^2/12`` to its variance; Sheppard 1898), at least 0;
        categorical, each category's indicator variance ``r (1 - r)``."""
        p = np.asarray(probs, dtype=float)
        if self.kind == "categorical":
            return p * (1.0 - p)
        e = self.edges()
        mids = np.concatenate([[self.lo], (e[:-1] + e[1:]) / 2, [self.hi]])
        mean = float(p @ mids)
        sheppard = float(p[1:-1].sum()) * ((self.hi - self.lo) / self.n_bins) ** 2 / 12.0
        return np.asarray(max(0.0, float(p @ (mids - mean) ** 2) - sheppard))

    def card(self) -> dict[str, Any]:
        out: dict[str, Any] = {"column": self.name, "kind": self.kind, "cells": self.n_cells}
        if self.kind == "numeric":
            out.update({"bounds": [self.lo, self.hi], "interior_bins": self.n_bins,
                        "bound_cells": "one cell each for the values lo and hi themselves"})
        else:
            out["categories"] = list(self.categories)
        return out


@dataclass(frozen=True)
class MarginalPlan:
    """The public tables of a release's marginals (:func:`plan_marginals`).

    Attributes
    ----------
    columns : tuple of MarginalColumn
        One per original feature column, then the regression label (``features == ()``) if any.
    n_groups : int
        Public classes (class-conditional tables) or 1.
    noise_sd : float
        The counts' noise standard deviation the cells were chosen for.
    rule : dict
        The cell rule and its inputs (card).
    """

    columns: tuple[MarginalColumn, ...]
    n_groups: int
    noise_sd: float
    rule: dict[str, Any]

    @property
    def n_tables(self) -> int:
        return len(self.columns)

    @property
    def conditional(self) -> bool:
        return self.n_groups > 1

    @property
    def numeric_only(self) -> bool:
        """One group (no class) and numeric tables only: no category list to measure
        (:func:`measured_share` then asks for :data:`MIN_NUMERIC_BINS` interior cells)."""
        return self.n_groups == 1 and all(c.kind == "numeric" for c in self.columns)

    @property
    def sensitivities(self) -> tuple[float, float]:
        return marginal_sensitivities(self.n_tables)

    def offsets(self) -> np.ndarray:
        """Start of each table in the concatenated cell vector (length ``n_tables + 1``)."""
        return np.concatenate([[0], np.cumsum([c.n_cells for c in self.columns])]).astype(np.int64)

    def counts(self, X: np.ndarray, y: np.ndarray | None) -> np.ndarray:
        """Exact counts ``(n_groups, total cells)`` of the rows ``X`` (encoded, clipped) and labels
        ``y`` (class indices for class-conditional tables; the regression label for its table)."""
        X = np.asarray(X, dtype=float)
        groups = (np.zeros(X.shape[0], dtype=np.int64) if not self.conditional
                  else np.asarray(y, dtype=np.int64))
        off = self.offsets()
        out = np.zeros((self.n_groups, int(off[-1])))
        for j, col in enumerate(self.columns):
            if col.features:
                values = X[:, list(col.features)] if col.kind == "categorical" else X[:, col.features[0]]
            else:
                values = np.asarray(y, dtype=float)
            cell = col.cells(values)
            ok = cell >= 0
            np.add.at(out, (groups[ok], off[j] + cell[ok]), 1.0)
        return out


def _groups_of(names: Sequence[str], onehot_groups: Sequence[np.ndarray]) -> dict[int, tuple[str, list[int]]]:
    """First encoded index of each public one-hot group -> (original column, its indices)."""
    out = {}
    for g in onehot_groups:
        idx = [int(i) for i in g]
        if not idx:
            continue
        column = names[idx[0]].split("=", 1)[0]
        out[idx[0]] = (column, idx)
    return out


def plan_marginals(feature_names: Sequence[str], bounds: np.ndarray, onehot_groups: Sequence[np.ndarray],
                   *, task: str, n_rows: int, noise_sd: float, n_classes: int = 0,
                   label_name: str | None = None, label_bounds: tuple[float, float] | None = None
                   ) -> MarginalPlan:
    """The public tables of a release: one per original column, cells from public facts only.

    Parameters
    ----------
    feature_names : sequence of str, length d
        Encoded feature columns (one-hot columns named ``column=value``).
    bounds : ndarray of shape (d, 2)
        Public bounds of the encoded columns.
    onehot_groups : sequence of int arrays
        The public one-hot groups (column indices), as in ``PreparedInput.onehot_groups``.
    task : {"unsupervised", "classification", "regression"}
    n_rows : int
        The public ``n``.
    noise_sd : float
        Standard deviation of the noise each count will get (0 or ``inf`` allowed: the largest /
        smallest cell count).
    n_classes : int
        Classification: the public class list's size (tables are class-conditional).
    label_name, label_bounds
        Regression: the label's name and public bounds (a numeric table of its own).

    Returns
    -------
    MarginalPlan
    """
    names = list(feature_names)
    groups = _groups_of(names, onehot_groups)
    in_group = {i for _, idx in groups.values() for i in idx}
    n_groups = max(1, int(n_classes)) if task == "classification" else 1
    per_cell = CELL_SNR * float(noise_sd)
    if per_cell <= 0:
        n_bins = MAX_BINS
    elif math.isinf(per_cell):
        n_bins = 1
    else:
        n_bins = int(min(MAX_BINS, max(1, math.floor(n_rows / (n_groups * per_cell)))))
    cols: list[MarginalColumn] = []
    for j, name in enumerate(names):
        if j in groups:
            column, idx = groups[j]
            cols.append(MarginalColumn(column, "categorical", tuple(idx),
                                       categories=tuple(names[i].split("=", 1)[1] for i in idx)))
        elif j not in in_group:
            lo, hi = (float(v) for v in bounds[j])
            if hi > lo:
                cols.append(MarginalColumn(name, "numeric", (j,), lo=lo, hi=hi, n_bins=n_bins))
    if task == "regression" and label_bounds is not None and label_bounds[1] > label_bounds[0]:
        cols.append(MarginalColumn(label_name or "label", "numeric", (), lo=float(label_bounds[0]),
                                   hi=float(label_bounds[1]), n_bins=n_bins))
    rule = {"interior_bins": n_bins,
            "rule": f"numeric columns: the largest n_bins <= {MAX_BINS} with n/(groups n_bins) >= "
                    f"{CELL_SNR:g} noise sd, at least 1, plus one cell for each bound; categorical "
                    "columns: one cell per public category"
                    + ("; class-conditional (one row of cells per public class)" if n_groups > 1 else ""),
            "inputs": {"n": int(n_rows), "groups": n_groups, "noise_sd": float(noise_sd)}}
    return MarginalPlan(tuple(cols), n_groups, float(noise_sd), rule)


@dataclass(frozen=True)
class DPMarginals:
    """Noisy marginal counts (a DP output) and their public plan.

    Attributes
    ----------
    plan : MarginalPlan
    counts : ndarray of shape (n_groups, total cells)
        The noisy counts (may be negative; :meth:`probabilities` clips them).
    epsilon_share : float
        Fraction of the release's budget they cost (for the card).
    """

    plan: MarginalPlan
    counts: np.ndarray
    epsilon_share: float

    def table(self, j: int, group: int = 0) -> np.ndarray:
        off = self.plan.offsets()
        return np.asarray(self.counts[group, off[j]:off[j + 1]], dtype=float)

    def probabilities(self, j: int, group: int | None = 0) -> np.ndarray:
        """Table ``j`` of ``group`` as probabilities (post-processing of the noisy counts).

        ``group=None`` (or a one-way plan): the counts, every class's added up, clipped at 0 and
        normalised (uniform when none is positive). A class of a class-conditional plan: its
        clipped counts plus ``alpha`` pseudo-counts spread as the one-way marginal, ``alpha = sd
        sqrt(cells)`` (the noise of the class's total over the table): a large class keeps its own
        marginal, a rare class's marginal, whose counts are mostly noise, leans on the one-way
        marginal in proportion (the posterior mean under a prior centred on the pooled marginal).
        """
        pooled = np.clip(np.sum([self.table(j, g) for g in range(self.plan.n_groups)], axis=0), 0.0, None)
        pooled = pooled / pooled.sum() if pooled.sum() > 0 else np.full(pooled.size, 1.0 / pooled.size)
        if group is None or not self.plan.conditional:
            return pooled
        own = np.clip(self.table(j, group), 0.0, None)
        alpha = self.plan.noise_sd * math.sqrt(own.size)
        total = own.sum() + alpha
        return (own + alpha * pooled) / total if total > 0 else pooled

    def card(self) -> dict[str, Any]:
        """What the card says of them: tables, cells, rule, share, source and the noisy counts."""
        return {
            "epsilon_share": self.epsilon_share,
            "class_conditional": self.plan.conditional,
            "tables": [c.card() for c in self.plan.columns],
            "cell_rule": self.plan.rule,
            "noisy_counts": [[float(v) for v in row] for row in self.counts],
            "decoding": "numeric columns: quantile mapping onto the DP marginal (the mechanism's ranks "
                        "kept); categorical columns: categories assigned so their counts follow the DP "
                        "counts, each row taking the category its model scores highest after "
                        "per-category offsets",
            "source": MARGINAL_SOURCE,
        }


def quantile_map(values: np.ndarray, column: MarginalColumn, probs: np.ndarray) -> np.ndarray:
    """``values`` (one group's synthetic column) mapped onto the marginal ``probs`` (over the
    column's cells) by their ranks: the value of rank ``r`` among ``m`` falls at the level
    ``u = (r + 1/2)/m`` of the marginal's CDF, which gives its cell; a bound cell gives the bound
    itself. Inside an interior cell ``[a, b]`` the value follows the model's own distribution there:
    the row's place ``t`` in the cell is mapped through the empirical quantiles of ``values``
    between its CDF at ``a`` and at ``b`` (the cells are as coarse as the counts' noise requires, so
    their inside shape comes from the model), or uniformly across the cell where the model has fewer
    than :data:`MODEL_ROWS_IN_CELL` rows in it. The result keeps the model's ranking (ties in input
    order) and follows the DP marginal across cells."""
    v = np.asarray(values, dtype=float)
    m = v.size
    if m == 0:
        return v.copy()
    order = np.argsort(v, kind="stable")
    ranks = np.empty(m, dtype=np.int64)
    ranks[order] = np.arange(m)
    u = (ranks + 0.5) / m
    cdf = np.concatenate([[0.0], np.cumsum(probs)])
    cdf[-1] = 1.0
    cell = np.clip(np.searchsorted(cdf, u, side="right") - 1, 0, probs.size - 1)
    width = probs[cell]
    frac = np.clip(np.divide(u - cdf[cell], width, out=np.full(m, 0.5), where=width > 0), 0.0, 1.0)
    edges = column.edges()
    inner = np.clip(cell - 1, 0, column.n_bins - 1)
    a, b = edges[inner], edges[inner + 1]
    out = a + frac * (b - a)
    sorted_v = v[order]
    lo_idx = np.searchsorted(sorted_v, a, side="left")
    hi_idx = np.searchsorted(sorted_v, b, side="right")
    model = (hi_idx - lo_idx) >= MODEL_ROWS_IN_CELL
    if np.any(model):
        pos = lo_idx + frac * (hi_idx - lo_idx - 1)
        k = np.clip(np.floor(pos).astype(np.int64), 0, m - 1)
        k1 = np.clip(k + 1, 0, m - 1)
        w = pos - np.floor(pos)
        inside = np.clip(sorted_v[k] * (1 - w) + sorted_v[k1] * w, a, b)
        out = np.where(model, inside, out)
    out[cell == 0] = column.lo
    out[cell == column.n_bins + 1] = column.hi
    return out


def quota_assign(scores: np.ndarray, quotas: np.ndarray, *, iterations: int = 100) -> np.ndarray:
    """One category per row, exactly ``quotas[k]`` rows in category ``k``, rows taking the categories
    they score highest.

    The assignment problem ``max sum_i scores[i, k_i]`` under the quotas: up to
    :data:`EXACT_ASSIGNMENT_ROWS` rows, exactly (scipy's ``linear_sum_assignment`` on rows against
    category slots); above, through its dual: each row takes ``argmax_k scores[i, k] + b_k`` with
    per-category prices ``b`` moved by the log ratio of the quota to the current count (at most
    ``iterations`` steps; a few dozen suffice), then the rows still in excess move to a short
    category in order of least loss. Deterministic.

    Parameters
    ----------
    scores : ndarray of shape (n, k)
    quotas : int ndarray of shape (k,)
        Summing to ``n``.

    Returns
    -------
    ndarray of shape (n,)
        The category index of each row.

    Raises
    ------
    ValueError
        ``quotas`` do not sum to ``n``.
    """
    S = np.asarray(scores, dtype=float)
    n, k = S.shape
    q = np.asarray(quotas, dtype=np.int64)
    if q.sum() != n:
        raise ValueError(f"quotas sum to {q.sum()}, expected {n}")
    if k == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    if n <= EXACT_ASSIGNMENT_ROWS:  # small: the exact optimum (Hungarian method, scipy)
        from scipy.optimize import linear_sum_assignment

        slots = np.repeat(np.arange(k), q)
        rows, cols = linear_sum_assignment(S[:, slots], maximize=True)
        choice = np.empty(n, dtype=np.int64)
        choice[rows] = slots[cols]
        return choice
    step = 0.3 * (float(np.std(S)) or 1.0)
    b = np.zeros(k)
    for _ in range(iterations):
        choice = np.argmax(S + b, axis=1)
        count = np.bincount(choice, minlength=k)
        if np.maximum(count - q, 0).sum() <= max(1, n // 1000):
            break
        b += step * (np.log1p(q) - np.log1p(count))
    value = S + b
    choice = np.argmax(value, axis=1)
    count = np.bincount(choice, minlength=k)
    while np.any(count > q):  # each pass moves at least one row; the excess is small after the prices
        short = np.flatnonzero(count < q)
        rows = np.flatnonzero(count[choice] > q[choice])
        alt = short[np.argmax(value[np.ix_(rows, short)], axis=1)]
        loss = value[rows, choice[rows]] - value[rows, alt]
        excess, room = count - q, q - count
        for r in np.argsort(loss, kind="stable"):
            src, dst = choice[rows[r]], alt[r]
            if excess[src] > 0 and room[dst] > 0:
                choice[rows[r]] = dst
                excess[src] -= 1
                room[dst] -= 1
                if not np.any(excess > 0) or not np.any(room > 0):
                    break
        count = np.bincount(choice, minlength=k)
    return choice


def rr_class_rates(counts: np.ndarray, flip: float) -> np.ndarray:
    """Class rates estimated from labels released by k-ary randomized response (post-processing).

    Each label is kept with probability ``1 - flip`` and replaced by one of the ``K - 1`` other
    classes uniformly otherwise (``flip``: the public probability of reporting another class), so
    the expected reported count of class ``c`` is ``n_c (1 - flip) + (n - n_c) flip/(K - 1)``;
    solving for ``n_c`` (Warner 1965) gives an unbiased estimate, clipped at 0 and normalised here.
    Reported rates are pulled towards ``1/K``: 36-40% positives where 3-6% are real, uncorrected.
    Returns the rates, shape ``(K,)``; uniform when ``flip`` leaves nothing to invert.
    """
    c = np.asarray(counts, dtype=float)
    k, n = c.size, float(c.sum())
    keep_minus_other = 1.0 - flip - flip / max(1, k - 1)
    if k < 2 or n <= 0 or keep_minus_other <= 1e-12:
        return np.full(k, 1.0 / max(1, k))
    est = np.clip((c - n * flip / (k - 1)) / keep_minus_other, 0.0, None)
    return est / est.sum() if est.sum() > 0 else np.full(k, 1.0 / k)


def _quotas(total: int, probs: np.ndarray) -> np.ndarray:
    """Integers summing to ``total`` proportional to ``probs`` (largest remainder)."""
    exact = total * np.asarray(probs, dtype=float)
    base = np.floor(exact).astype(np.int64)
    rest = int(total - base.sum())
    if rest > 0:
        base[np.argsort(-(exact - base), kind="stable")[:rest]] += 1
    return base


def _unique(values: np.ndarray, target: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``values`` (rows x columns) plus independent Gaussian noise of variance ``target - var``
    per column where the rows vary less than the marginal says (a factor model's unique variance)."""
    extra = np.clip(np.asarray(target, dtype=float) - values.var(axis=0), 0.0, None)
    if not np.any(extra > 0):
        return values
    return values + rng.standard_normal(values.shape) * np.sqrt(extra)


def faithful_decode(X: np.ndarray, labels: np.ndarray | None, marginals: DPMarginals,
                    rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Rows in the encoded units mapped onto the DP marginals (post-processing).

    Parameters
    ----------
    X : ndarray of shape (m, d)
        The release's rows in the encoded feature units (after the mechanism's public inverse map):
        numeric columns in their units, one-hot groups as scores.
    labels : ndarray of shape (m,) or None
        Class indices into the public class list (class-conditional tables), or the regression label
        in its units (mapped when the plan has a label table), or ``None``.
    marginals : DPMarginals
    rng : numpy Generator, optional
        Draws each column's unique variance: where the model's rows vary less than the column's DP
        marginal (a rank-``p`` reconstruction has no variance outside its ``p`` directions, and
        the rows of a class share its model's spread), independent Gaussian noise brings the
        column's variance up to the marginal's before the mapping, as the unique factors of factor
        analysis. Without it (``None``) no variance is added.

    Returns
    -------
    (X, labels)
        Copies: numeric columns quantile-mapped onto their DP marginal within each class, one-hot
        groups exactly 0/1 with counts following the DP counts, the regression label mapped too.
    """
    out = np.array(X, dtype=float, copy=True)
    plan = marginals.plan
    # a copy; in float when the plan maps a regression label (its table has no encoded feature)
    label_table = any(not c.features for c in plan.columns)
    lab = None if labels is None else np.array(labels, dtype=float if label_table else None, copy=True)
    if plan.conditional:
        if labels is None:
            raise ValueError("class-conditional marginals need the release's class labels")
        groups: list[tuple[int, np.ndarray]] = [
            (g, np.flatnonzero(np.asarray(labels) == g)) for g in range(plan.n_groups)]
    else:
        groups = [(0, np.arange(out.shape[0]))]
    for g, rows in groups:
        if rows.size == 0:
            continue
        for j, col in enumerate(plan.columns):
            probs = marginals.probabilities(j, g)
            target = col.variance(probs)
            if col.kind == "categorical":
                idx = list(col.features)
                scores = out[np.ix_(rows, idx)]
                if rng is not None:
                    scores = _unique(scores, target, rng)
                choice = quota_assign(scores, _quotas(rows.size, probs))
                block = np.zeros((rows.size, len(idx)))
                block[np.arange(rows.size), choice] = 1.0
                out[np.ix_(rows, idx)] = block
                continue
            if col.features:
                values = out[rows, col.features[0]]
            elif lab is not None:
                values = lab[rows]
            else:
                continue
            if rng is not None:
                values = _unique(values[:, None], target[None], rng)[:, 0]
            mapped = quantile_map(values, col, probs)
            if col.features:
                out[rows, col.features[0]] = mapped
            else:
                lab[rows] = mapped
    return out, lab
