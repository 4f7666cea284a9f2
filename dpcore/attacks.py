"""Membership inference against a release, and the empirical epsilon it proves (issue 18).

What epsilon means against an attacker, on the custodian's own data and settings. The game is the
definition of differential privacy played out (Kairouz, Oh & Viswanath 2015; Jagielski, Ullman &
Oprea 2020, "Auditing differentially private machine learning"; Nasr et al. 2021, "Adversary
instantiation"):

1. **Two neighbouring tables** under the mechanism's own relation (replace-one: ``n`` and every
   label stay as they are). A *target* row is chosen from public facts: a corner of the public box
   (``"upper"``: every feature at its upper bound, ``"lower"``: at its lower bound), or a chosen row
   of the training split. In the IN world the target sits at one *position* of the table; in the
   OUT world that position holds another row (for a corner: the row that was there, by default the
   row farthest from the corner; for a chosen row: the row farthest from it). For mechanisms that
   protect one element (JL-Laplace, DPPro) the two rows differ in ONE entry (the one that moves
   most, capped at the public ``element_bound``); for JL-Laplace's row relation the move is
   shrunk to squared L2 length ``row_bound`` if needed.
2. **Many seeded releases** of each world (exploration previews, every one with its own seed, so
   the runs are independent), each reduced to one *attack score*, larger = "the target is in":

   * ``"position"`` — the noisy-statistic test for releases whose row ``i`` is a noisy map of input
     row ``i`` (local-gaussian, identity-laplace, rp-gaussian, jl-laplace, dppro): the exact
     log-likelihood ratio of the released row at the target's position between the two noise-free
     centres (Laplace or Gaussian noise of the scale on the release's noise record). The centres
     come from a noise-free run (``epsilon = inf``) with the same seed on the two candidate rows:
     every projection is drawn before any data-dependent randomness, so the attacker is even given
     the secret JL matrix (the exact calibrations promise DP for the drawn matrix). By the
     Neyman-Pearson lemma this is the most powerful test for one release.
   * ``"model"`` — for the Gaussian-model releases (ron-gauss, pca-gauss, modips: synthetic rows
     drawn from a noisy mean and covariance): the mean of the released rows (of the target's class
     when labelled), minus the mean the OUT table would give, projected on the unit direction from
     the OUT row to the target (both mapped with the release's public transform). A noisy-statistic
     test of the released model's mean.
   * ``"closest-row"`` — for releases whose rows are not aligned with the input (dpmix mixtures,
     pca-identity's private rows): minus the distance from the target (mapped into the release's
     space by its public transform) to the closest released row. Releases with no public map
     (jl-laplace; PCA-Gauss Alg. 1, whose ``W`` is private — its default falls back to this
     statistic) place the target where a noise-free run with the same seed on the candidate rows
     puts it: exact for a data-independent projection, a weak guess for a data-dependent one.
3. **The ROC curve and AUC** of the score (:func:`sklearn.metrics.roc_curve`), and the **empirical
   lower bound on epsilon** (:func:`epsilon_lower_bound`, the estimator the statistical audits in
   ``benchmarks/audit_table.py`` and ``tests/test_audit.py`` import from here): any
   (epsilon, delta)-DP mechanism makes every test satisfy ``FPR + e^eps FNR >= 1 - delta`` and
   ``FNR + e^eps FPR >= 1 - delta``, so ``epsilon >= log((1 - delta - FNR) / FPR)`` (and the swapped
   form), here with the Clopper-Pearson upper limits of the rates at 95%.

A sound mechanism gives a lower bound at most its claimed epsilon; a realistic attack (a row of
real data, not the worst-case pair of the audits) usually shows much less — the gap is the
difference between the worst case the guarantee covers and this attacker.

The results are **NOT differentially private**: the game runs on the private training split and
its scores depend on it. They are for the custodian's eyes, are never part of a release, and are
computed from seeded exploration previews, which :meth:`dpcore.release.Release.save` refuses.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import stats

from dpcore.data import Dataset
from dpcore.exceptions import PrivacyLeakWarning
from dpcore.mechanisms._projection import input_map
from dpcore.mechanisms.base import Mechanism, get_mechanism
from dpcore.release import Release

__all__ = [
    "CONFIDENCE",
    "NOT_PRIVATE_NOTICE",
    "AttackResult",
    "LowerBound",
    "MembershipPair",
    "attack_statistic",
    "clopper_pearson",
    "dp_tradeoff_curve",
    "epsilon_lower_bound",
    "membership_game",
    "membership_pair",
    "plain_summary",
    "point_epsilon",
    "summarise_game",
]

CONFIDENCE = 0.95
SELECTION_FRACTION = 0.3
MAX_THRESHOLDS = 4000

NOT_PRIVATE_NOTICE = ("NOT differentially private: this attack ran on the private training data; "
                      "its numbers are for the custodian only and are never part of a release.")

#: Attack statistic per registered mechanism (module docstring); unknown names get ``closest-row``
#: unless their release keeps one row per input row.
STATISTICS: dict[str, str] = {
    "local-gaussian": "position", "identity-laplace": "position", "rp-gaussian": "position",
    "jl-laplace": "position", "dppro": "position",
    "ron-gauss": "model", "pca-gauss": "model", "modips": "model",
    "dpmix": "closest-row", "pca-identity": "closest-row",
}
STATISTIC_TEXT = {
    "position": "log-likelihood ratio of the released row at the target's position (noisy-statistic test)",
    "model": "released rows' mean (target's class) projected on the direction of the target",
    "closest-row": "minus the distance from the target to the closest released row",
}


# ------------------------------------------------------------------------------------ estimator
def clopper_pearson(k: np.ndarray | int, n: int, confidence: float = CONFIDENCE
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided Clopper-Pearson interval ``(lower, upper)`` for ``k`` successes out of ``n``.

    Exact binomial limits from the beta quantiles (Clopper & Pearson 1934); ``lower = 0`` at
    ``k = 0`` and ``upper = 1`` at ``k = n``. Arrays broadcast.
    """
    k = np.asarray(k, dtype=float)
    a = (1.0 - confidence) / 2.0
    with np.errstate(invalid="ignore"):
        lo = np.where(k > 0, stats.beta.ppf(a, k, n - k + 1), 0.0)
        hi = np.where(k < n, stats.beta.ppf(1.0 - a, k + 1, n - k), 1.0)
    return lo, hi


def _test_counts(s0: np.ndarray, s1: np.ndarray, thresholds: np.ndarray
                 ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """False-positive and false-negative counts of the tests "say D1 iff s >= t" (direction +1)
    and "say D1 iff s <= t" (direction -1), for every threshold ``t``."""
    a0, a1 = np.sort(s0), np.sort(s1)
    ge0 = a0.size - np.searchsorted(a0, thresholds, "left")   # s0 >= t
    lt1 = np.searchsorted(a1, thresholds, "left")             # s1 < t
    le0 = np.searchsorted(a0, thresholds, "right")            # s0 <= t
    gt1 = a1.size - np.searchsorted(a1, thresholds, "right")  # s1 > t
    return {1: (ge0, lt1), -1: (le0, gt1)}


def _bounds(fp: np.ndarray, fn: np.ndarray, n0: int, n1: int, delta: float, confidence: float
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Both hypothesis-testing bounds (``log((1 - delta - FNR_u)/FPR_u)`` and the swapped one)
    from the Clopper-Pearson upper limits of the two rates."""
    fpr_u = clopper_pearson(fp, n0, confidence)[1]
    fnr_u = clopper_pearson(fn, n1, confidence)[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        num_a, num_b = 1.0 - delta - fnr_u, 1.0 - delta - fpr_u
        eps_a = np.where(num_a > 0, np.log(np.maximum(num_a, 1e-300) / fpr_u), -np.inf)
        eps_b = np.where(num_b > 0, np.log(np.maximum(num_b, 1e-300) / fnr_u), -np.inf)
    return eps_a, eps_b, fpr_u, fnr_u


@dataclass(frozen=True)
class LowerBound:
    """An empirical lower bound on epsilon and the test that gave it (evaluation split).

    ``fpr``/``fnr`` are the measured rates, ``fpr_upper``/``fnr_upper`` their Clopper-Pearson
    upper limits, ``n0``/``n1`` the evaluation runs of each world, ``direction`` +1 for "say IN iff
    score >= threshold" and -1 for "<=".
    """

    epsilon: float
    threshold: float
    direction: int
    inequality: str
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    n0: int
    n1: int


def epsilon_lower_bound(
    s0: np.ndarray, s1: np.ndarray, delta: float = 0.0, *, confidence: float = CONFIDENCE,
    selection_fraction: float = SELECTION_FRACTION, seed: int = 0,
) -> LowerBound:
    """Empirical lower bound on epsilon from scores ``s0`` (runs on D0) and ``s1`` (runs on D1).

    ``epsilon_lb = max(log((1 - delta - FNR_u) / FPR_u), log((1 - delta - FPR_u) / FNR_u))`` at the
    best threshold, ``FPR_u``/``FNR_u`` the Clopper-Pearson upper limits at ``confidence``
    (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021). Thresholds (the distinct selection-split
    scores, or ``MAX_THRESHOLDS`` quantiles of them), both test directions and both inequalities
    are tried on a random ``selection_fraction`` of each sample; the best (by its bound on the
    selection split) is then evaluated on the remaining runs, and that value is returned (clipped
    at 0), so choosing the threshold does not bias the bound upwards. Valid at level
    ``confidence`` for any (epsilon, delta)-DP mechanism whose runs are independent.

    Raises
    ------
    ValueError
        Fewer than 4 scores in either sample (no split possible).
    """
    rng = np.random.default_rng(seed)
    s0 = rng.permutation(np.asarray(s0, dtype=float))
    s1 = rng.permutation(np.asarray(s1, dtype=float))
    if min(s0.size, s1.size) < 4:
        raise ValueError(f"need at least 4 scores per world, got {s0.size} and {s1.size}")
    m0, m1 = max(1, int(s0.size * selection_fraction)), max(1, int(s1.size * selection_fraction))
    sel0, ev0, sel1, ev1 = s0[:m0], s0[m0:], s1[:m1], s1[m1:]
    pooled = np.concatenate([sel0, sel1])
    thresholds = np.unique(pooled)
    if thresholds.size > MAX_THRESHOLDS:
        thresholds = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, MAX_THRESHOLDS)))
    best = (-np.inf, 0.0, 1, "a")
    for direction, (fp, fn) in _test_counts(sel0, sel1, thresholds).items():
        eps_a, eps_b, _, _ = _bounds(fp, fn, m0, m1, delta, confidence)
        for name, eps in (("a", eps_a), ("b", eps_b)):
            i = int(np.argmax(eps))
            if eps[i] > best[0]:
                best = (float(eps[i]), float(thresholds[i]), direction, name)
    _, t, direction, name = best
    fp, fn = _test_counts(ev0, ev1, np.array([t]))[direction]
    eps_a, eps_b, fpr_u, fnr_u = _bounds(fp, fn, ev0.size, ev1.size, delta, confidence)
    eps = float((eps_a if name == "a" else eps_b)[0])
    return LowerBound(
        epsilon=max(eps, 0.0), threshold=t, direction=direction,
        inequality="FPR + e^eps FNR >= 1 - delta" if name == "a" else "FNR + e^eps FPR >= 1 - delta",
        fpr=float(fp[0]) / ev0.size, fnr=float(fn[0]) / ev1.size, fpr_upper=float(fpr_u[0]),
        fnr_upper=float(fnr_u[0]), n0=int(ev0.size), n1=int(ev1.size),
    )


def point_epsilon(lb: LowerBound, delta: float = 0.0) -> float:
    """The epsilon of ``lb``'s test at its MEASURED rates (no confidence margin): ``log((1 - delta
    - FNR)/FPR)`` or the swapped form, ``inf`` when the denominator rate is 0, 0 if negative."""
    a, b = (lb.fnr, lb.fpr) if lb.inequality.startswith("FPR") else (lb.fpr, lb.fnr)
    if 1.0 - delta - a <= 0:
        return 0.0
    return math.inf if b == 0 else max(0.0, math.log((1.0 - delta - a) / b))


def dp_tradeoff_curve(fpr: np.ndarray, epsilon: float, delta: float = 0.0) -> np.ndarray:
    """The largest true-positive rate any test can reach at false-positive rate ``fpr`` against an
    (epsilon, delta)-DP mechanism: ``min(1, e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR))``
    (both hypothesis-testing inequalities; Kairouz, Oh & Viswanath 2015, Thm 2.1). ``epsilon = inf``
    gives 1 everywhere."""
    fpr = np.clip(np.asarray(fpr, dtype=float), 0.0, 1.0)
    if math.isinf(epsilon):
        return np.ones_like(fpr)
    e = math.exp(min(epsilon, 700.0))
    tpr = np.minimum(e * fpr + delta, 1.0 - (1.0 - delta - fpr) / e)
    return np.clip(np.maximum(tpr, fpr), 0.0, 1.0)


# ------------------------------------------------------------------------------------ the pair
@dataclass(frozen=True)
class MembershipPair:
    """The two neighbouring tables of the game: row ``position`` holds ``x_in`` (IN world) or
    ``x_out`` (OUT world); everything else, labels included, is the training split."""

    position: int
    x_in: np.ndarray
    x_out: np.ndarray
    description: str

    def table(self, ds: Dataset, member: bool) -> Dataset:
        X = ds.X.copy()
        X[self.position] = self.x_in if member else self.x_out
        return replace(ds, X=X)

    def probe(self, ds: Dataset) -> Dataset:
        """The two candidate rows (OUT row first, with the position's label), plus for
        classification one row of another class (a label needs two classes); only the first two
        rows are read."""
        X = np.vstack([self.x_out, self.x_in])
        if ds.y is None:
            return replace(ds, X=X)
        y = np.repeat(ds.y[self.position : self.position + 1], 2)
        if ds.task == "classification":
            other = np.flatnonzero(ds.y != ds.y[self.position])
            if other.size:
                X, y = np.vstack([X, ds.X[other[:1]]]), np.r_[y, ds.y[other[:1]]]
        return replace(ds, X=X, y=y)


def _scaled(X: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    width = bounds[:, 1] - bounds[:, 0]
    return (np.clip(X, bounds[:, 0], bounds[:, 1]) - bounds[:, 0]) / np.where(width > 0, width, 1.0)


def _farthest_row(ds: Dataset, x: np.ndarray, exclude: int | None = None) -> int:
    dist = np.linalg.norm(_scaled(ds.X, ds.bounds) - _scaled(x[None, :], ds.bounds), axis=1)
    if exclude is not None:
        dist[exclude] = -np.inf
    return int(np.argmax(dist))


def membership_pair(ds: Dataset, target: str | int = "upper", *, position: int | None = None,
                    relation: str = "replace-one", element_bound: float | None = None,
                    row_bound: float | None = None, input_scale: np.ndarray | None = None
                    ) -> MembershipPair:
    """Build the game's neighbouring pair on the training split ``ds``.

    Parameters
    ----------
    target : ``"upper"``, ``"lower"`` or a row index of ``ds``
        A corner of the public box (``ds.bounds``), or a real row.
    position : int, optional
        Corner target: the row it replaces (default: the row farthest from the corner, in the
        box-scaled L2 distance). Row target: ignored (the row's own position; the OUT world holds
        the row farthest from it there).
    relation : ``"replace-one"``, ``"element"`` or ``"row"``
        ``"element"``: ``x_in`` differs from ``x_out`` only in the entry that moves most in units
        of ``input_scale``, by at most ``element_bound`` in those units. ``"row"``: the move is
        shrunk to squared L2 length ``row_bound`` (in those units) if longer.
    input_scale : array of shape (n_features,), optional
        Units of the relation's bounds (default: the box widths).

    Raises
    ------
    ValueError
        Unknown target, an index outside the table, or a position outside the table.
    """
    n = ds.n_samples
    if isinstance(target, str):
        if target not in ("upper", "lower"):
            raise ValueError(f"target must be 'upper', 'lower' or a row index, got {target!r}")
        x_in = ds.bounds[:, 1 if target == "upper" else 0].astype(float)
        if position is None:
            position = _farthest_row(ds, x_in)
        if not 0 <= int(position) < n:
            raise ValueError(f"position must be a row index in [0, {n}), got {position}")
        position = int(position)
        x_out = ds.X[position].astype(float)
        text = f"the {target} corner of the public box, replacing row {position}"
    else:
        j = int(target)
        if not 0 <= j < n:
            raise ValueError(f"the target row must be in [0, {n}), got {target}")
        position, x_in = j, ds.X[j].astype(float)
        q = _farthest_row(ds, x_in, exclude=j)
        x_out = ds.X[q].astype(float)
        text = f"row {j} of the training split (OUT world: row {q} in its place)"
    x_in = np.clip(x_in, ds.bounds[:, 0], ds.bounds[:, 1])
    x_out = np.clip(x_out, ds.bounds[:, 0], ds.bounds[:, 1])
    width = ds.bounds[:, 1] - ds.bounds[:, 0]
    unit = np.where(width > 0, width, 1.0) if input_scale is None else np.asarray(input_scale, float)
    move = (x_in - x_out) / unit
    if relation == "element":
        k = int(np.argmax(np.abs(move)))
        step = float(move[k]) if element_bound is None else float(
            np.sign(move[k]) * min(abs(move[k]), element_bound))
        x_in = x_out.copy()
        x_in[k] = x_out[k] + step * unit[k]
        text += f"; one element (feature {ds.feature_names[k]}) changed, as the element relation allows"
    elif relation == "row" and row_bound is not None:
        length = float(np.linalg.norm(move))
        if length**2 > row_bound:
            x_in = x_out + move * math.sqrt(row_bound) / length * unit
            text += f"; the move shrunk to squared length {row_bound:g} (row relation)"
    if np.array_equal(x_in, x_out):
        raise ValueError("the target equals the row it replaces: nothing to infer; choose another target")
    return MembershipPair(position, x_in, x_out, text)


# ------------------------------------------------------------------------------------ scores
def _release(cls: type[Mechanism], params: dict[str, Any], ds: Dataset, seed: int,
             **overrides: Any) -> Release:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return cls(**{**params, **overrides}, random_state=seed).release(ds)


def attack_statistic(name: str) -> str:
    """The default attack statistic of mechanism ``name`` (module docstring)."""
    return STATISTICS.get(name, "closest-row")


def _position_score(rel: Release, centres: np.ndarray, position: int) -> float:
    """Exact log-likelihood ratio ``log p_in(z)/p_out(z)`` of the released row ``z`` at
    ``position``, noise i.i.d. per entry with the scale of the release's first noise record."""
    z = np.asarray(rel.data, dtype=float)[position]
    c0, c1 = centres
    rec = rel.noise[0]
    if rec.scale <= 0:
        return float(np.sign(np.linalg.norm(z - c0) - np.linalg.norm(z - c1)) * np.inf)
    if rec.distribution == "laplace":
        cap = np.abs(c1 - c0) / rec.scale
        terms = np.clip((np.abs(z - c0) - np.abs(z - c1)) / rec.scale, -cap, cap)
        return float(np.round(terms.sum(), 10))
    if rec.distribution == "gaussian":
        return float((np.sum((z - c0) ** 2) - np.sum((z - c1) ** 2)) / (2.0 * rec.scale**2))
    raise ValueError(f"no position test for {rec.distribution!r} noise")


def _model_score(rel: Release, pair: MembershipPair, table: Dataset, label: Any) -> float:
    Z = np.asarray(rel.data, dtype=float)
    rows = np.ones(Z.shape[0], dtype=bool)
    if label is not None and rel.labels is not None and np.ndim(rel.labels) == 1:
        rows = np.asarray(rel.labels) == label
        if not rows.any():
            return 0.0
    same = np.ones(table.n_samples, dtype=bool) if label is None or table.y is None else table.y == label
    out = pair.table(table, member=False)
    t_in, t_out = rel.transform(np.vstack([pair.x_in, pair.x_out]))
    u = t_in - t_out
    norm = float(np.linalg.norm(u))
    if norm == 0:
        return 0.0
    m_out = rel.transform(out.X[same]).mean(axis=0)
    return float((Z[rows].mean(axis=0) - m_out) @ (u / norm))


def _closest_row_score(rel: Release, pair: MembershipPair, centres: np.ndarray | None) -> float:
    """Minus the distance from the target in the release's space (its public transform, or else
    the noise-free run on the candidate rows, ``centres[1]``) to the closest released row."""
    Z = np.asarray(rel.data, dtype=float)
    t = centres[1] if centres is not None else rel.transform(pair.x_in[None, :])[0]
    return -float(np.min(np.linalg.norm(Z - t, axis=1)))


# ------------------------------------------------------------------------------------ the game
@dataclass
class AttackResult:
    """Outcome of :func:`membership_game` (NOT differentially private: see ``notice``).

    ``scores_out``/``scores_in``: one score per release of each world; ``fpr``/``tpr``/
    ``thresholds``: the ROC curve (:func:`sklearn.metrics.roc_curve`, IN = positive); ``auc``;
    ``lower_bound``: the empirical epsilon (:func:`epsilon_lower_bound`) with its test;
    ``claimed_epsilon``/``delta``: the guarantee on the releases' cards; ``trials``: releases per
    world done (``requested`` asked for; ``stopped`` if the stop flag ended it early).
    """

    mechanism: str
    parameters: dict[str, Any]
    statistic: str
    target: str
    claimed_epsilon: float
    delta: float
    neighbouring: str
    scores_out: np.ndarray
    scores_in: np.ndarray
    fpr: np.ndarray
    tpr: np.ndarray
    thresholds: np.ndarray
    auc: float
    lower_bound: LowerBound
    trials: int
    requested: int
    stopped: bool = False
    seconds: float = 0.0
    notice: str = NOT_PRIVATE_NOTICE
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def exceeds_claim(self) -> bool:
        """True if the empirical lower bound is above the claimed epsilon: the claim is false."""
        return self.lower_bound.epsilon > self.claimed_epsilon


def summarise_game(scores_out: np.ndarray, scores_in: np.ndarray, *, delta: float = 0.0,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, LowerBound]:
    """ROC curve ``(fpr, tpr, thresholds)``, AUC and the empirical epsilon of two score samples.

    Infinite scores (noise-free releases) are mapped to finite values beyond the others.
    """
    from sklearn.metrics import roc_auc_score, roc_curve

    s0, s1 = (np.asarray(s, dtype=float) for s in (scores_out, scores_in))
    both = np.concatenate([s0, s1])
    finite = both[np.isfinite(both)]
    span = (float(np.max(np.abs(finite))) if finite.size else 0.0) + 1.0
    s0, s1 = (np.nan_to_num(s, posinf=span, neginf=-span) for s in (s0, s1))
    labels = np.r_[np.zeros(s0.size), np.ones(s1.size)]
    scores = np.r_[s0, s1]
    fpr, tpr, thresholds = roc_curve(labels, scores)
    auc = float(roc_auc_score(labels, scores))
    return fpr, tpr, thresholds, auc, epsilon_lower_bound(s0, s1, delta, seed=seed)


def membership_game(
    mechanism: str | type[Mechanism], params: dict[str, Any], train: Dataset, *,
    target: str | int = "upper", position: int | None = None, trials: int = 200,
    statistic: str | None = None, seed: int = 0,
    progress: Callable[[int, int, np.ndarray, np.ndarray], None] | None = None,
    stop: Callable[[], bool] | None = None, min_trials: int = 10,
    resume: tuple[list[float], list[float]] | None = None,
) -> AttackResult:
    """Play the membership-inference game ``trials`` times per world (module docstring).

    Parameters
    ----------
    mechanism : registered name or a :class:`~dpcore.mechanisms.base.Mechanism` subclass
    params : dict
        The mechanism's parameters (as the app's controls give them); ``random_state`` is set here.
    train : Dataset
        The TRAINING split (private); the target and the releases come from it.
    target, position
        See :func:`membership_pair`.
    trials : int
        Releases per world (``2 * trials`` releases in all).
    statistic : ``"position"``, ``"model"``, ``"closest-row"`` or None (the mechanism's default,
        :data:`STATISTICS`).
    seed : int
        Seeds of the releases: ``(seed, trial, world)`` through :class:`numpy.random.SeedSequence`,
        so every release has its own independent stream.
    progress : callable ``(done, total, scores_out, scores_in)``, optional
        Called after each trial with the scores so far (an app can keep them if it is interrupted).
    stop : callable returning bool, optional
        Checked before each trial; True ends the game early (at least ``min_trials`` are kept).
    resume : (scores_out, scores_in) lists, optional
        Scores of an interrupted game with the same arguments: play continues with the next
        trial's seeds. The lists are EXTENDED IN PLACE as trials are played, so a caller that is
        interrupted (an app's Stop button) keeps every score drawn so far.

    Returns
    -------
    AttackResult

    Raises
    ------
    ValueError
        Bad target or parameters (from the mechanism), ``trials < min_trials``, or a statistic
        that does not fit the release (``"position"`` on a release with other rows).
    """
    start = time.perf_counter()
    cls = get_mechanism(mechanism) if isinstance(mechanism, str) else mechanism
    if int(trials) < min_trials:
        raise ValueError(f"trials must be at least {min_trials}, got {trials}")
    chosen = statistic
    statistic = statistic or attack_statistic(cls.name)
    if statistic not in STATISTIC_TEXT:
        raise ValueError(f"statistic must be one of {sorted(STATISTIC_TEXT)}, got {statistic!r}")
    params = {k: v for k, v in params.items() if k != "random_state"}
    first = _release(cls, params, train, 0, epsilon=math.inf)
    relation = first.guarantee.neighbouring
    relation = "element" if relation.startswith("element") else "row" if relation.startswith("row") \
        else "replace-one"
    proj = None
    if "rescale" in first.parameters:  # JL-Laplace / DPPro: rows enter the projection rescaled
        proj = dict(zip(("lo", "scale"), input_map(first.public_bounds(), bool(first.parameters["rescale"])),
                        strict=False))
    pair = membership_pair(
        train, target, position=position, relation=relation,
        element_bound=first.details.get("element_bound"), row_bound=first.details.get("row_bound"),
        input_scale=None if proj is None else np.broadcast_to(proj["scale"], (train.n_features,)))
    if statistic == "position" and np.asarray(first.data).shape[0] != train.n_samples:
        raise ValueError(f"{cls.name} does not release one row per input row: use 'closest-row'")
    try:
        first.transform(train.X[:1])
        public_map = True
    except ValueError:
        public_map = False
    if statistic == "model" and not public_map and chosen is None:
        statistic = "closest-row"  # e.g. PCA-Gauss Alg. 1, whose W is private
    if statistic == "model" and not public_map:
        raise ValueError(f"the {cls.name} release has no public map of real rows into its space, which "
                         "the 'model' statistic needs: use 'closest-row'")
    # the position test, and closest-row without a public map, read the noise-free candidate rows
    needs_centres = statistic == "position" or not public_map
    label = None if train.y is None or train.task != "classification" else train.y[pair.position]
    tables = (pair.table(train, member=False), pair.table(train, member=True))
    probe = pair.probe(train)
    seeds = np.random.SeedSequence([int(seed), 18]).spawn(2 * int(trials))
    scores: tuple[list[float], list[float]] = resume if resume is not None else ([], [])
    if len(scores[0]) != len(scores[1]) or len(scores[0]) > int(trials):
        raise ValueError("resume must hold as many scores per world, at most trials")
    # the claim: the guarantee on the card of trial 0's OUT release (the same for every release)
    claim = _release(cls, params, tables[0], int(seeds[0].generate_state(1)[0]))
    stopped = False
    for t in range(len(scores[0]), int(trials)):
        if stop is not None and t >= min_trials and stop():
            stopped = True
            break
        for world in (0, 1):
            s = int(seeds[2 * t + world].generate_state(1)[0])
            rel = _release(cls, params, tables[world], s)
            centres = np.asarray(_release(cls, params, probe, s, epsilon=math.inf).data,
                                 float)[:2] if needs_centres else None
            if statistic == "position":
                score = _position_score(rel, centres, pair.position)
            elif statistic == "model":
                score = _model_score(rel, pair, train, label)
            else:
                score = _closest_row_score(rel, pair, centres)
            scores[world].append(score)
        if progress is not None:
            progress(t + 1, int(trials), np.asarray(scores[0]), np.asarray(scores[1]))
    s0, s1 = np.asarray(scores[0]), np.asarray(scores[1])
    delta = float(claim.guarantee.delta)
    fpr, tpr, thresholds, auc, lb = summarise_game(s0, s1, delta=delta, seed=seed)
    return AttackResult(
        mechanism=cls.name, parameters=dict(params), statistic=statistic, target=pair.description,
        claimed_epsilon=float(claim.guarantee.epsilon), delta=delta,
        neighbouring=claim.guarantee.neighbouring, scores_out=s0, scores_in=s1, fpr=fpr, tpr=tpr,
        thresholds=thresholds, auc=auc, lower_bound=lb, trials=int(s0.size), requested=int(trials),
        stopped=stopped, seconds=time.perf_counter() - start,
        extra={"statistic_text": STATISTIC_TEXT[statistic], "position": pair.position,
               "holds": bool(claim.guarantee.holds)},
    )


def plain_summary(res: AttackResult) -> str:
    """One paragraph in plain words: what the attacker achieved, against what was claimed."""
    lb, claim = res.lower_bound, res.claimed_epsilon
    guess = 0.5 + float(np.max(np.abs(res.tpr - res.fpr))) / 2  # best balanced accuracy
    if res.exceeds_claim:
        verdict = (f"That is MORE than the ε = {claim:.3g} the release claims: the claim is wrong for "
                   "these settings.")
    elif lb.epsilon == 0:
        verdict = (f"This attacker could not prove any leak: consistent with the claimed ε = {claim:.3g} "
                   "(the guarantee covers the worst case, which this target may not be).")
    else:
        verdict = (f"That stays below the claimed ε = {claim:.3g}, as a correct guarantee must "
                   "(it covers every target and every attacker, not only this one).")
    return (f"An attacker who knows every other row and sees one release guessed whether the target "
            f"({res.target}) was in the data right {guess:.0%} of the time at best (AUC {res.auc:.2f}; "
            f"50% is a coin flip), over {res.trials} releases per world. Its best threshold proves, "
            f"with 95% confidence, a privacy loss of at least ε = {lb.epsilon:.2f}. {verdict}")
