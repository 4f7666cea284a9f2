"""DP bounds: spend a stated epsilon on differentially private estimates of a low and a high
quantile of each column that has no public bounds, instead of reading them off the private data.

**Mechanism.** For each side to estimate (``lo`` of a column, ``hi`` of a column, the label's
range), the exponential mechanism (McSherry & Talwar 2007) chooses among public candidates with the
quantile score of Smith (2011), as OpenDP's ``make_quantile_score_candidates`` /
``make_private_quantile`` define it::

    score_a(c) = | (1 - a) #{x_i < c}  -  a #{x_i > c} |        (a = the quantile level)
    P(c) ~ exp(-eps_q score_a(c) / 2)

- *Sensitivity* (replace-one, ``n`` public): replacing one row moves it between "below c",
  "equal to c" and "above c"; ``#{x < c}`` and ``#{x > c}`` change by at most 1 each, and at most one
  of them decreases, so ``score_a`` changes by at most ``max((1 - a) + a, 1 - a, a) = 1``.
  The exponential mechanism with ``P ~ exp(eps_q u / (2 Delta u))`` is ``eps_q``-DP (Dwork & Roth
  2014, Thm 3.10); here ``u = -score``, ``Delta u = 1``. ``tests/test_dp_bounds.py`` checks the
  ratio of the exact output probabilities over neighbours by worst-case search, and the scores
  against OpenDP (which scales them by the level's denominator).
- *Exact sampling*: a candidate drawn uniformly (exact integers from :mod:`dpcore.noise`) is kept
  with probability ``exp(-eps_q (score - min score) / 2)``, an exact Bernoulli of a rational
  argument (Canonne, Kamath & Steinke 2020, Algorithm 1; ``eps_q`` is the float's exact value);
  repeated until one is kept. The kept candidate has exactly the exponential mechanism's
  distribution: no floating-point weight is ever trusted.
- *Candidates* (public): from a public candidate range ``[L, U]`` per column, 201 evenly spaced
  points plus, on each sign, 20 log-spaced magnitudes per decade over the 8 decades below
  ``max(|L|, |U|)`` (so a column in [0, 16] within a range of [0, 10^6] still gets candidates 12 %
  apart), plus ``L``, ``U`` and 0 when inside. A column's estimate is always a candidate: the range
  must contain the data's likely values, and a narrower public range gives better estimates.
- *Levels*: ``quantiles = (a_lo, a_hi)``, by default ``"auto"``: ``a_lo = 1 - a_hi =
  clip(2 (ln m + 3) / (n eps_q), 0.05, 0.25)``, from public numbers only (``n``, ``eps_q``, ``m``
  candidates). Why: every candidate outside the data's range scores ``a n`` (a low candidate below
  the minimum has ``#{x > c} = n``), the best about 0, so together they weigh at most
  ``m exp(-eps_q a n / 2)`` against the best one; the rule keeps that below ``e^-3`` (about 5 %),
  so the estimate lands near the quantile instead of anywhere in the range. The bounds then clip
  about ``a_lo n`` and ``(1 - a_hi) n`` rows: 5 % each side when the budget allows it, more when it
  does not. Missing values (``missing="impute"``) are left out of the counts.
- *Composition*: every side of every column is one quantile at ``eps_q = epsilon / k`` for ``k``
  sides estimated; basic composition over the ``k`` sides (one row touches every column) gives
  ``epsilon``. The release that uses the bounds then runs at ``epsilon_total - epsilon`` and its
  card states both (:func:`compose_release`): **total = bounds + mechanism**.
- *Post-processing*: ``lo > hi`` is swapped; ``lo == hi`` takes the next candidate above ``hi``
  (or below ``lo``), since bounds must differ.

Every estimate is recorded on the card (source ``"dp"`` per side in ``public_facts``, one noise
record per quantile, ``details["dp_bounds"]`` with the levels, ranges, epsilons and the split).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from dpcore import noise as dpnoise
from dpcore.bounds import resolve_bound_rules
from dpcore.data import Dataset
from dpcore.exceptions import DataValidationError
from dpcore.release import Guarantee, NoiseRecord, Release

__all__ = [
    "DEFAULT_CANDIDATE_RANGE",
    "DEFAULT_QUANTILES",
    "BoundsEstimate",
    "apply_estimate",
    "auto_level",
    "candidates",
    "compose_release",
    "estimate_bounds",
    "exponential_quantile",
    "quantile_scores",
]

#: The candidate range used where none is given: wide, data-independent, and so expensive (a
#: narrower public range gives tighter estimates at the same epsilon).
DEFAULT_CANDIDATE_RANGE = (-1e6, 1e6)
DEFAULT_QUANTILES = "auto"
#: The range of the automatic low level (the high one is 1 minus it).
AUTO_LEVELS = (0.05, 0.25)
LINEAR_POINTS = 201
PER_DECADE = 20
DECADES = 8
SOURCE = ("exponential mechanism over public candidates (McSherry & Talwar 2007) with the quantile "
          "score of Smith 2011 (as OpenDP's make_private_quantile); exact sampling (Canonne, Kamath & "
          "Steinke 2020, Algorithm 1)")


def candidates(lo: float, hi: float) -> np.ndarray:
    """The public candidates of a range ``[lo, hi]`` (module docstring), sorted, ``(m,)``.

    Raises
    ------
    ValueError
        A range that is not finite with ``lo < hi``.
    """
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"a candidate range needs finite lo < hi, got [{lo:g}, {hi:g}]")
    top = max(abs(lo), abs(hi))
    mags = 10.0 ** (np.arange(-DECADES * PER_DECADE, 1) / PER_DECADE) * top
    pts = np.concatenate([np.linspace(lo, hi, LINEAR_POINTS), mags, -mags, [lo, hi, 0.0]])
    return np.unique(pts[(pts >= lo) & (pts <= hi)])


def auto_level(n: int, epsilon_per_side: float, n_candidates: int) -> float:
    """The automatic low quantile level (module docstring): ``clip(2 (ln m + 3) / (n eps_q),
    0.05, 0.25)``; public numbers only."""
    need = 2 * (math.log(max(n_candidates, 2)) + 3) / (max(n, 1) * epsilon_per_side)
    return float(min(max(need, AUTO_LEVELS[0]), AUTO_LEVELS[1]))


def quantile_scores(x: np.ndarray, cands: np.ndarray, alpha: Fraction) -> list[Fraction]:
    """``|(1 - a) #{x < c} - a #{x > c}|`` for every candidate ``c`` (exact rationals)."""
    xs = np.sort(np.asarray(x, dtype=float))
    below = np.searchsorted(xs, cands, side="left")
    above = xs.size - np.searchsorted(xs, cands, side="right")
    return [abs((1 - alpha) * int(b) - alpha * int(a)) for b, a in zip(below, above, strict=True)]


def exponential_quantile(x: np.ndarray, cands: np.ndarray, alpha: float, epsilon: float,
                         bits: dpnoise.BitSource) -> float:
    """One ``epsilon``-DP quantile estimate (replace-one, ``n`` public): a candidate drawn with
    probability ``~ exp(-epsilon score(c) / 2)`` (module docstring), exactly.

    Parameters
    ----------
    x : ndarray (n,)
        The column's values (NaN left out by the caller).
    cands : ndarray (m,)
        Public candidates (:func:`candidates`).
    alpha : float
        The quantile level in (0, 1).
    epsilon : float
        > 0 and finite.
    """
    if not (0 < alpha < 1) or not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"need 0 < alpha < 1 and a finite epsilon > 0, got {alpha}, {epsilon}")
    scores = quantile_scores(x, cands, Fraction(alpha))
    best = min(scores)
    half_eps = Fraction(epsilon) / 2
    m = len(cands)
    while True:
        i = int(dpnoise.uniform_below(m, 1, bits)[0])
        if dpnoise._bernoulli_exp_exact(half_eps * (scores[i] - best), bits):
            return float(cands[i])


@dataclass(frozen=True)
class BoundsEstimate:
    """DP bounds for the sides that had none, and what they cost.

    Attributes
    ----------
    epsilon : float
        Total spent (basic composition over the sides).
    bounds : dict {column: (lo, hi)}
        The new bounds of every column with an estimated side (the other side kept).
    sides : dict {column: (bool, bool)}
        Which sides were estimated.
    label_bounds : (lo, hi) or None
        The regression label's estimated range, if it was estimated.
    epsilon_per_side : float
    quantiles : (float, float)
    ranges : dict {column: (L, U)}
        The public candidate range of each estimated column (``"(label)"`` for the label).
    noise : list of NoiseRecord
        One per estimated side (for the card).
    """

    epsilon: float
    bounds: dict[str, tuple[float, float]]
    sides: dict[str, tuple[bool, bool]]
    label_bounds: tuple[float, float] | None
    epsilon_per_side: float
    quantiles: tuple[float, float]
    ranges: dict[str, tuple[float, float]]
    noise: list[NoiseRecord] = field(default_factory=list)

    @property
    def n_sides(self) -> int:
        return sum(a + b for a, b in self.sides.values()) + (2 if self.label_bounds is not None else 0)

    def details(self) -> dict[str, Any]:
        """The card's ``details["dp_bounds"]``."""
        return {
            "epsilon": self.epsilon, "epsilon_per_side": self.epsilon_per_side,
            "sides_estimated": self.n_sides, "quantiles": list(self.quantiles),
            "columns": {c: {"lo": lo, "hi": hi, "estimated": list(self.sides[c]),
                            "candidate_range": list(self.ranges[c])} for c, (lo, hi) in self.bounds.items()},
            "label_bounds": None if self.label_bounds is None else list(self.label_bounds),
            "composition": "basic: epsilon = epsilon_per_side x sides estimated",
            "source": SOURCE,
        }


def _range_for(column: str, ranges: dict[str, tuple[float, float]] | None,
               default: tuple[float, float]) -> tuple[float, float]:
    return (ranges or {}).get(column, default)


def estimate_bounds(ds: Dataset, epsilon: float, *, candidate_range: Any = None,
                    quantiles: Any = DEFAULT_QUANTILES, random_state: Any = None
                    ) -> BoundsEstimate:
    """DP estimates of every bound side of ``ds`` that came from the private data (and of a
    regression label's range read from the data), spending ``epsilon`` in total.

    Parameters
    ----------
    ds : Dataset
        Its ``data_side_mask()`` says which sides need an estimate; public sides are kept (and
        bound the candidates of the other side).
    epsilon : float
        Total epsilon for the bounds, > 0 (split evenly over the sides: module docstring).
    candidate_range : (L, U), dict {column or pattern: (L, U)}, or None
        The public range the candidates span (patterns as in bounds files: ``"f*"``); default
        :data:`DEFAULT_CANDIDATE_RANGE`. ``"(label)"`` names the label.
    quantiles : (a_lo, a_hi) or "auto"
        Quantile levels of the low and high bounds, ``0 < a_lo < a_hi < 1``; ``"auto"`` (default):
        :func:`auto_level` of ``n``, the epsilon per side and the number of candidates.
    random_state : None, int or Generator
        ``None`` (a release): OS entropy. A seed makes a reproducible preview only.

    Returns
    -------
    BoundsEstimate

    Raises
    ------
    DataValidationError
        No side needs an estimate; a bad epsilon, levels or candidate range.
    """
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise DataValidationError(f"the DP bounds' epsilon must be a finite number > 0, got {epsilon!r}")
    auto = isinstance(quantiles, str) and quantiles == "auto"
    if not auto:
        a_lo, a_hi = (float(q) for q in quantiles)
        if not 0 < a_lo < a_hi < 1:
            raise DataValidationError(f"quantile levels must satisfy 0 < lo < hi < 1, got {quantiles}")
    sides = ds.data_side_mask()
    label = ds.task == "regression" and ds.label_bounds_source == "data"
    k = int(sides.sum()) + (2 if label else 0)
    if k == 0:
        raise DataValidationError("every column has public bounds: there is nothing to estimate "
                                  "(DP bounds are for columns without public bounds)")
    default = DEFAULT_CANDIDATE_RANGE
    if candidate_range is None:
        ranges: dict[str, tuple[float, float]] = {}
    elif isinstance(candidate_range, dict):
        names = list(ds.feature_names) + (["(label)"] if label else [])
        ranges = {c: tuple(v) for c, v in resolve_bound_rules(candidate_range, names,
                                                               what="candidate range").items()}
    else:
        default = tuple(float(v) for v in candidate_range)
        ranges = {}
    eps_q = float(epsilon) / k
    if auto:  # public: n, the epsilon per side, the number of candidates of the widest range asked
        widest = max([len(candidates(*default))] + [len(candidates(*r)) for r in ranges.values()])
        a_lo = auto_level(ds.n_samples, eps_q, widest)
        a_hi = 1.0 - a_lo
    bits = dpnoise.noise_source(random_state)
    out: dict[str, tuple[float, float]] = {}
    est_sides: dict[str, tuple[bool, bool]] = {}
    used: dict[str, tuple[float, float]] = {}
    records: list[NoiseRecord] = []
    imputed = ds.imputed_cells()
    missing = np.zeros(ds.X.shape, dtype=bool)
    if imputed is not None:
        missing[imputed[0]] = imputed[1]

    def estimate(name: str, values: np.ndarray, want: tuple[bool, bool], public: tuple[float, float]
                 ) -> tuple[float, float]:
        L, U = _range_for(name, ranges, default)
        lo_pub, hi_pub = public
        cands = candidates(L, U)
        lo, hi = lo_pub, hi_pub
        if want[0]:
            c_lo = cands if want[1] else cands[cands < hi_pub]
            lo = exponential_quantile(values, _nonempty(c_lo, name), a_lo, eps_q, bits)
        if want[1]:
            c_hi = cands if want[0] else cands[cands > lo_pub]
            hi = exponential_quantile(values, _nonempty(c_hi, name), a_hi, eps_q, bits)
        lo, hi = min(lo, hi), max(lo, hi)
        if lo == hi:  # post-processing: bounds must differ
            above = cands[cands > hi]
            below = cands[cands < lo]
            if above.size and want[1]:
                hi = float(above[0])
            elif below.size and want[0]:
                lo = float(below[-1])
            else:
                raise DataValidationError(f"the candidate range [{L:g}, {U:g}] of {name} leaves no room "
                                          "for two different bounds")
        used[name] = (float(L), float(U))
        for side, a in ((0, a_lo), (1, a_hi)):
            if want[side]:
                records.append(NoiseRecord(
                    statistic=f"DP bound ({'low' if side == 0 else 'high'}, quantile {a:g}) of {name}",
                    sensitivity=1.0, scale=2.0 / eps_q, distribution="exponential-mechanism",
                    norm="quantile score",
                    epsilon=eps_q, delta=0.0,
                    formula="P(c) ~ exp(-eps_q |(1-a) #{x<c} - a #{x>c}| / 2) over public candidates in "
                            f"[{L:g}, {U:g}]; score sensitivity 1 (replace-one); scale = 2/eps_q",
                    source=SOURCE, sampler="exact rejection (uniform candidate, Bernoulli(exp(-gamma)))"))
        return float(lo), float(hi)

    for j, name in enumerate(ds.feature_names):
        want = (bool(sides[j, 0]), bool(sides[j, 1]))
        if not any(want):
            continue
        values = ds.X[~missing[:, j], j]
        lo_pub, hi_pub = ds.bounds[j]
        public = (lo_pub if not want[0] else -math.inf, hi_pub if not want[1] else math.inf)
        out[name] = estimate(name, values, want, public)
        est_sides[name] = want
    label_bounds = None
    if label:
        label_bounds = estimate("(label)", np.asarray(ds.y, dtype=float), (True, True), (-math.inf, math.inf))
        out.pop("(label)", None)
    return BoundsEstimate(epsilon=float(epsilon), bounds=out, sides=est_sides, label_bounds=label_bounds,
                          epsilon_per_side=eps_q, quantiles=(a_lo, a_hi), ranges=used, noise=records)


def _nonempty(cands: np.ndarray, name: str) -> np.ndarray:
    if cands.size == 0:
        raise DataValidationError(f"no candidate of the range of {name} lies on the open side of its "
                                  "public bound: widen the candidate range")
    return cands


def apply_estimate(ds: Dataset, est: BoundsEstimate) -> Dataset:
    """``ds`` with the estimated sides as public bounds of source ``"dp"`` (and the estimated label
    range, source ``"dp"``)."""
    arr = np.array(ds.bounds, dtype=float)
    mask = np.zeros((ds.n_features, 2), dtype=bool)
    index = {c: j for j, c in enumerate(ds.feature_names)}
    for c, (lo, hi) in est.bounds.items():
        j = index[c]
        arr[j] = (lo, hi)
        mask[j] = est.sides[c]
    new = ds.with_bounds(arr, "dp", columns=list(est.bounds), sides=mask)
    if est.label_bounds is not None:
        sources = new.bounds_sources
        overall = "data" if "data" in sources else ("dp" if "dp" in sources else new.bounds_source)
        new = replace(new, label_bounds=est.label_bounds, label_bounds_source="dp", bounds_source=overall)
    return new


def compose_release(release: Release, est: BoundsEstimate) -> Release:
    """``release`` (drawn with ``epsilon_total - est.epsilon`` on the DP bounds) with the bounds'
    cost composed in: guarantee and row-level epsilon + ``est.epsilon`` (basic composition; the
    quantiles are replace-one, which implies every relation the mechanisms use), the quantiles'
    noise records first, and ``details["dp_bounds"]`` / ``details["epsilon_split"]``."""
    g = release.guarantee
    composed = Guarantee(**{**g.__dict__, "epsilon": g.epsilon + est.epsilon})
    row = release.row_level
    row = None if row is None else Guarantee(**{**row.__dict__, "epsilon": row.epsilon + est.epsilon})
    details = {**release.details, "dp_bounds": est.details(),
               "epsilon_split": {"dp_bounds": est.epsilon, "mechanism": g.epsilon,
                                 "total": g.epsilon + est.epsilon,
                                 "text": f"epsilon = {g.epsilon + est.epsilon:.6g} in total: "
                                         f"{est.epsilon:.6g} for the DP bounds ({est.n_sides} quantile(s) of "
                                         f"{est.epsilon_per_side:.4g} each) + {g.epsilon:.6g} for the "
                                         f"{release.mechanism} release (basic composition)"}}
    return replace(release, guarantee=composed, row_level=row, noise=[*est.noise, *release.noise],
                   details=details)
