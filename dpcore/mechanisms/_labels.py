"""Label privacy shared by the per-class (Gaussian mixture) mechanisms.

The papers' per-class algorithms (RON-Gauss Alg. 5, PCA-Gauss Alg. 3, MODIPS per class) assume the
class sizes ``n_c`` are public and emit exactly ``n_c`` synthetic rows per class. Under the
replace-one relation with the label included, that is not differentially private at all: changing
one record's label changes the released class histogram deterministically (issue 12, row 2).

Two choices, stated on every card:

* ``label_privacy="protected"`` (default): a DP class histogram (Laplace, L1 sensitivity 2 under
  replace-one: one record leaves class ``c`` and joins ``c'``) is released with its own budget
  share; the per-class statistics are noisy *sums* (sensitivities that hold when the replaced
  record changes class, see each mechanism) divided by the noisy counts (post-processing), and the
  synthetic row counts follow the noisy histogram. Neighbouring relation ``replace-one``, label
  included.
* ``label_privacy="within-class"``: the papers' algorithms. Neighbours replace a record by another
  of the *same class*; the class sizes and every record's label are not protected. The relation is
  ``replace-one-within-class``, which the ledger and the Compare page keep apart from
  ``replace-one``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from dpcore import noise as dpnoise
from dpcore.calibration import laplace_scale
from dpcore.noise import BitSource
from dpcore.preprocessing import PreparedInput
from dpcore.release import NoiseRecord
from dpcore.schema import Param

__all__ = [
    "rows_by_class",
    "DEFAULT_LABEL_SHARE",
    "HISTOGRAM_FRACTION",
    "LABEL_SPLIT",
    "LABEL_PRIVACY",
    "WITHIN_CLASS",
    "HISTOGRAM_SENSITIVITY",
    "HISTOGRAM_L2_SENSITIVITY",
    "dp_class_histogram",
    "histogram_weights",
    "largest_remainder",
    "label_budget_share",
    "label_privacy_assumption",
    "reserve_part_slack",
    "proportional_counts",
    "synthetic_counts",
]

#: L1 sensitivity of the class histogram under replace-one with the label included: the replaced
#: record leaves one class and joins another (Dwork & Roth 2014, histogram queries).
HISTOGRAM_SENSITIVITY = 2.0

#: L2 sensitivity of the same histogram: two counts change by 1 each, ``sqrt(1 + 1)``.
HISTOGRAM_L2_SENSITIVITY = math.sqrt(2.0)

#: Neighbouring relation of the papers' per-class algorithms (class sizes public).
WITHIN_CLASS = "replace-one-within-class"

LABEL_PRIVACY = Param(
    "label_privacy", "choice", "protected",
    "Classification: 'protected' releases a DP class histogram and per-class noisy sums, so one "
    "record's label is protected (replace-one); 'within-class' is the papers' algorithm, where "
    "class sizes and labels are public and neighbours stay in their class.",
    choices=("protected", "within-class"), privacy=True,
)

HISTOGRAM_FRACTION = Param(
    "histogram_fraction", "float", 0.1,
    "Classification with protected labels: fraction of epsilon spent on the DP class histogram "
    "(the rest is split as epsilon_split says).", low=0.0, high=1.0, low_open=True, high_open=True,
    privacy=True,
)


def label_budget_share(epsilon: float, n_classes: int | None) -> float:
    """The fraction of ``epsilon`` that maximises the signal of (noisy features, private labels).

    Derivation (ours). A mechanism that releases each row's features with noise of scale
    ``~ 1/eps_f`` and its label by k-ary randomized response at ``eps_l = epsilon - eps_f``
    (:func:`randomized_response`) gives a model trained on the release the label-feature signal
    ``Cov(x~, y~) = m(eps_l) Cov(x, y)``, ``m = (e^eps_l - 1) / (e^eps_l + K - 1)`` (the keep
    probability minus the probability of any given other class: randomized response shrinks every
    class-conditional rate towards ``1/K`` by that factor), while the estimation error of that
    covariance is dominated by the feature noise, ``~ 1/eps_f``. The share maximising the ratio
    ``m(eps_l) * eps_f`` is returned (grid search on 2,000 points). As ``epsilon -> 0``,
    ``m ~ eps_l / K`` and the optimum is exactly 1/2 whatever ``K``; at ``epsilon = 1`` it is
    0.49 (K = 2), 0.51 (K = 3), 0.55 (K = 10); at ``epsilon = 10``, 0.27-0.40 (the label is then
    nearly noise-free and the features need the budget). Regression labels (Laplace noise of scale
    ``1/eps_l``, ``n_classes=None``): the ratio ``eps_l eps_f`` gives 1/2 at every epsilon.

    At the default share 1/2 and ``epsilon = 1``, a binary label is kept with probability
    ``e^0.5 / (e^0.5 + 1) = 0.62`` (0.51 at the former 10% share): the released label rate stays
    on the same side of 1/2 as the real one by ``0.24 |rate - 1/2|`` instead of ``0.05 |rate - 1/2|``.

    Depends on public numbers only (epsilon and the size of the public class list).
    """
    if not math.isfinite(epsilon) or n_classes is None:
        return 0.5
    K = int(n_classes)
    a = np.linspace(0.0, float(epsilon), 2002)[1:-1]
    m = np.expm1(a) / (np.exp(a) + K - 1)
    return float(a[int(np.argmax(m * (epsilon - a)))] / epsilon)


#: default label share of the baselines that release labels by randomized response (identity-laplace,
#: pca-identity, JL-Laplace and DPPro under replace-one): :func:`label_budget_share` for epsilon <= 1,
#: within 0.05 of it for K = 2..10 at epsilon = 1
DEFAULT_LABEL_SHARE = 0.5

LABEL_SPLIT = Param(
    "epsilon_split", "fraction_split", (1.0 - DEFAULT_LABEL_SHARE, DEFAULT_LABEL_SHARE),
    "Supervised tasks: budget fractions for the features and the labels (a replaced row changes "
    "both, so they add up; default 1/2 each, derived in dpcore.mechanisms._labels.label_budget_share).",
    privacy=True, split_names=("features", "labels"))


def reserve_part_slack(epsilon: float, epsilon_part: float, delta: float, n_changed: int
                       ) -> tuple[float, float]:
    """:func:`dpcore.noise.reserve_slack` for the features' part of a split budget, whose error
    names the epsilon the user gave (``epsilon``), not only its part.

    Raises
    ------
    ValueError
        The discrete Gaussian's slack does not fit into ``(epsilon_part, delta)``.
    """
    try:
        return dpnoise.reserve_slack(epsilon_part, delta, n_changed)
    except ValueError as exc:
        if epsilon_part == epsilon:
            raise
        raise ValueError(f"epsilon = {epsilon:g} is too small for a finite noise scale (an infinite "
                         f"noise scale in practice): its features' part {epsilon_part:g} fails: {exc}"
                         ) from None


def dp_class_histogram(
    y: np.ndarray | None, n_classes: int, epsilon: float, bits: BitSource, source: str, gauss=None,
    counts: np.ndarray | None = None,
) -> tuple[np.ndarray, NoiseRecord]:
    """Laplace-noised class counts, shape ``(n_classes,)`` (floats; may be negative).

    ``y`` holds class indices into the public class list. Pure ``epsilon``-DP under replace-one
    with the label included (L1 sensitivity :data:`HISTOGRAM_SENSITIVITY`). Every class of the
    public list gets a count, whether or not it occurs in the data. Exact grid Laplace noise
    (:mod:`dpcore.noise`; two counts change between neighbours). ``gauss`` (a
    :class:`~dpcore.mechanisms._gaussian_model.ZCDPBudget`, ``noise="gaussian"``): Gaussian noise
    with L2 sensitivity :data:`HISTOGRAM_L2_SENSITIVITY` and the budget's ``"histogram"`` share.
    ``counts``: the exact class counts already computed (e.g. in a pass over a table larger than
    memory); ``y`` is then not read.
    """
    counts = (np.bincount(y, minlength=n_classes) if counts is None else np.asarray(counts)).astype(float)
    if gauss is not None:
        return gauss.add(
            counts, "histogram", HISTOGRAM_L2_SENSITIVITY, min(2, n_classes),
            laplace_s1=HISTOGRAM_SENSITIVITY, statistic=f"class histogram ({n_classes} public classes)",
            formula="S2 = sqrt(2) (replace-one with the label: two counts change by 1)",
            source=f"Dwork & Roth 2014, histogram queries; {source}")
    draw = dpnoise.laplace(counts, HISTOGRAM_SENSITIVITY, scale=laplace_scale(HISTOGRAM_SENSITIVITY, epsilon),
                           n_changed=min(2, n_classes), bits=bits)
    noisy = draw.values
    rec = NoiseRecord(
        statistic=f"class histogram ({n_classes} public classes)", sensitivity=HISTOGRAM_SENSITIVITY,
        scale=draw.scale, distribution="laplace", norm="L1", epsilon=epsilon, delta=0.0,
        **dpnoise.record_fields(draw),
        formula="S1 = 2 (replace-one with the label: one record leaves a class, joins another); "
                "b = S1/eps_histogram",
        source=f"Dwork & Roth 2014, histogram queries; {source}",
    )
    return noisy, rec


def histogram_weights(noisy_counts: np.ndarray) -> np.ndarray:
    """Class weights from the DP class histogram: the noisy counts clipped at 0, or uniform if every
    noisy count is <= 0 (post-processing). Shape ``(n_classes,)``, not normalised."""
    w = np.clip(np.asarray(noisy_counts, dtype=float), 0.0, None)
    return w if np.any(w > 0) else np.ones_like(w)


def synthetic_counts(total: int, noisy_counts: np.ndarray) -> np.ndarray:
    """Rows per class for ``total`` synthetic rows, proportional to :func:`histogram_weights`
    (post-processing), by :func:`proportional_counts`."""
    return proportional_counts(total, histogram_weights(noisy_counts))


def proportional_counts(total: int, weights: np.ndarray) -> np.ndarray:
    """Split ``total`` into integers proportional to ``weights`` (largest remainder method).

    Used to give each class ``n_samples * n_c / n`` synthetic rows; with ``total = n`` the counts
    equal the class sizes ``n_c`` exactly.
    """
    w = np.asarray(weights, dtype=float)
    return largest_remainder(total, total * w / w.sum())


def largest_remainder(total: int, exact: np.ndarray) -> np.ndarray:
    """Integers summing to ``total``: the floors of ``exact`` (shape ``(k,)``, summing to about
    ``total`` over every class), plus one for each of the largest remainders (ties: lower index)."""
    counts = np.floor(exact).astype(int)
    short = int(total - counts.sum())
    if short > 0:
        order = np.argsort(-(exact - counts), kind="stable")
        counts[order[:short]] += 1
    return counts


def rows_by_class(y: np.ndarray, n_classes: int) -> list[np.ndarray]:
    """``[np.flatnonzero(y == c) for c in range(n_classes)]`` in one sort: the positions of each
    class's rows, ascending (a stable sort keeps them in order). ``O(n log n)`` instead of
    ``O(n n_classes)`` (one pass over ``y`` per class: seconds with 10^4 classes)."""
    y = np.asarray(y)
    order = np.argsort(y, kind="stable")
    cuts = np.searchsorted(y[order], np.arange(n_classes + 1))
    return [order[cuts[c]:cuts[c + 1]] for c in range(n_classes)]


def label_privacy_assumption(mode: str) -> str:
    """The card's plain-words sentence for a ``label_privacy`` mode."""
    if mode == "protected":
        return ("labels are protected: the class histogram is released with its own budget share "
                "and the per-class statistics are noisy sums whose sensitivities hold when the "
                "replaced record changes class (replace-one, label included)")
    return ("class sizes n_c are public (the papers' algorithm): neighbours replace one record by "
            "another of the SAME class, so a record's label and the class sizes are NOT protected "
            f"(relation {WITHIN_CLASS})")


def divide_by_count(total: np.ndarray, noisy_count: float) -> np.ndarray:
    """A noisy sum over a noisy count, with the count floored at 1 (post-processing)."""
    return total / max(1.0, float(noisy_count))


#: Randomized response draws ``U`` uniform on ``{0, ..., 2^RR_BITS - 1}`` (an exact integer).
RR_BITS = 63


def keep_threshold(epsilon: float, n_classes: int) -> int:
    """The integer ``T`` of k-ary randomized response: keep the label when ``U < T``, ``U`` uniform
    on ``{0, ..., 2^63 - 1}``.

    ``T = floor(2^63 p)`` for a lower bound ``p`` of ``e^eps / (e^eps + K - 1) = 1 / (1 + (K - 1)
    e^-eps)`` computed in 80-digit decimal arithmetic with directed rounding (``Decimal.exp`` is
    correctly rounded; the next decimal above it bounds ``e^-eps`` from above, the denominator is
    rounded up and the quotient down), and at most ``2^63 - 1``. So the realised keep probability
    ``q = T / 2^63`` satisfies ``q <= p`` exactly, and the likelihood ratio of the mechanism,
    ``q (K - 1) / (1 - q)``, is at most ``e^eps``: the guarantee holds for ``epsilon`` (the float's
    exact value) with no rounding, also where ``p`` rounds to 1.0 in float64 (from ``eps ~ 37``
    with K = 2, where a float comparison never flipped a label). Above ``eps ~ 43.7 + ln(K - 1)``
    the flip probability is ``2^-63`` (a guarantee of ``ln((2^63 - 1)(K - 1)) < eps``).

    Raises
    ------
    ValueError
        ``n_classes < 2`` or ``epsilon`` not a number > 0.
    """
    from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext

    K = int(n_classes)
    if K < 2 or not epsilon > 0 or math.isnan(epsilon):
        raise ValueError(f"randomized response needs K >= 2 classes and epsilon > 0, got K = {K}, "
                         f"epsilon = {epsilon!r}")
    top = 2 ** RR_BITS
    if math.isinf(epsilon):
        return top
    with localcontext() as ctx:
        ctx.prec = 80
        e_up = (-Decimal(epsilon)).exp().next_plus()  # >= e^-eps
        ctx.rounding = ROUND_CEILING
        denominator = 1 + (K - 1) * e_up  # rounded up
        ctx.rounding = ROUND_FLOOR
        threshold = int((top / denominator).to_integral_value(rounding=ROUND_FLOOR))
    return min(threshold, top - 1)


def randomized_response(y: np.ndarray, n_classes: int, epsilon: float, bits: BitSource) -> np.ndarray:
    """k-ary randomized response on class indices ``0..n_classes-1`` (pure epsilon-DP per label).

    Keep the label with probability ``e^eps / (e^eps + K - 1)``, otherwise report one of the other
    ``K - 1`` classes uniformly (Warner 1965; Kairouz, Oh & Viswanath 2016, k-RR). The likelihood
    ratio between any two true labels is at most ``e^eps``. ``epsilon = inf`` returns ``y``.
    The coins come from ``bits`` (:mod:`dpcore.noise`) as exact integers: keep when a uniform
    integer below ``2^63`` is below the exact threshold :func:`keep_threshold` (a float keep
    probability rounds to 1.0 for large epsilon and would never flip a label), the other class by
    exact uniform integers.
    """
    y = np.asarray(y, dtype=int)
    if math.isinf(epsilon):
        return y.copy()
    K = int(n_classes)
    threshold = keep_threshold(epsilon, K)
    keep = dpnoise.uniform_below(2 ** RR_BITS, y.size, bits) < threshold
    other = (y + 1 + dpnoise.uniform_below(K - 1, y.size, bits)) % K
    return np.where(keep, y, other)


def flip_probability(epsilon: float, n_classes: int) -> float:
    """The realised probability that randomized response reports another class,
    ``1 - keep_threshold / 2^63`` (0 for ``epsilon = inf``)."""
    if math.isinf(epsilon):
        return 0.0
    return (2 ** RR_BITS - keep_threshold(epsilon, n_classes)) / 2 ** RR_BITS


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
        # the coins are drawn where the release's sampler is (the engine's client), in row order
        noisy = data.engine.on_client(data.y, partial(randomized_response, n_classes=K, epsilon=epsilon,
                                                      bits=bits))
        flip = flip_probability(epsilon, K)  # the realised one (exact threshold, never 0)
        rec = NoiseRecord(
            statistic="class label of each row", sensitivity=1.0, scale=flip,
            distribution="randomized-response", norm="one label changes (any class)",  # type: ignore[arg-type]
            epsilon=epsilon, delta=0.0,
            formula=f"keep the label with probability T/2^63 <= e^eps/(e^eps + K - 1), K = {K} (T an "
                    "exact integer threshold, a uniform integer below 2^63 compared with it); scale = "
                    "probability of reporting another class",
            source="Warner 1965; Kairouz, Oh & Viswanath 2016 (k-ary randomized response)",
        )
        return LabelRelease(data.engine.take(data.classes, noisy), name, rec)
    assert data.label_bounds is not None
    width = float(data.label_bounds[1] - data.label_bounds[0])
    draw = data.engine.add_noise(dpnoise.laplace_plan(width, scale=laplace_scale(width, epsilon), n_changed=1,
                                                      bits=bits), data.y)
    rec = NoiseRecord(
        statistic="label of each row", sensitivity=width, scale=draw.scale, distribution="laplace",
        norm="L1", epsilon=epsilon, delta=0.0, formula="b = (label hi - label lo) / epsilon",
        source="Dwork, McSherry, Nissim & Smith 2006 (Laplace mechanism)", **dpnoise.record_fields(draw),
    )
    return LabelRelease(draw.values, name, rec)


def combine_with_labels(relation: str, eps_features: float, eps_labels: float | None) -> float:
    """Total epsilon of (projection, labels).

    ``element``: neighbours differ in ONE entry, which is either a feature (only the projection
    changes in distribution) or the label (only the labels do): the total is the max.
    ``row``: a row change moves features and label together: basic composition, the sum.
    """
    if eps_labels is None:
        return eps_features
    return max(eps_features, eps_labels) if relation == "element" else eps_features + eps_labels
