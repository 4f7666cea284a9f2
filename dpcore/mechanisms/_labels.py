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

import numpy as np

from dpcore import noise as dpnoise
from dpcore.calibration import laplace_scale
from dpcore.noise import BitSource
from dpcore.release import NoiseRecord
from dpcore.schema import Param

__all__ = [
    "HISTOGRAM_FRACTION",
    "LABEL_PRIVACY",
    "WITHIN_CLASS",
    "HISTOGRAM_SENSITIVITY",
    "HISTOGRAM_L2_SENSITIVITY",
    "dp_class_histogram",
    "label_privacy_assumption",
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


def dp_class_histogram(
    y: np.ndarray, n_classes: int, epsilon: float, bits: BitSource, source: str
) -> tuple[np.ndarray, NoiseRecord]:
    """Laplace-noised class counts, shape ``(n_classes,)`` (floats; may be negative).

    ``y`` holds class indices into the public class list. Pure ``epsilon``-DP under replace-one
    with the label included (L1 sensitivity :data:`HISTOGRAM_SENSITIVITY`). Every class of the
    public list gets a count, whether or not it occurs in the data. Exact grid Laplace noise
    (:mod:`dpcore.noise`; two counts change between neighbours).
    """
    counts = np.bincount(y, minlength=n_classes).astype(float)
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


def synthetic_counts(total: int, noisy_counts: np.ndarray) -> np.ndarray:
    """Rows per class for ``total`` synthetic rows, proportional to the noisy counts clipped at 0
    (post-processing; uniform if every noisy count is <= 0), by :func:`proportional_counts`."""
    w = np.clip(np.asarray(noisy_counts, dtype=float), 0.0, None)
    return proportional_counts(total, w if np.any(w > 0) else np.ones_like(w))


def proportional_counts(total: int, weights: np.ndarray) -> np.ndarray:
    """Split ``total`` into integers proportional to ``weights`` (largest remainder method).

    Used to give each class ``n_samples * n_c / n`` synthetic rows; with ``total = n`` the counts
    equal the class sizes ``n_c`` exactly.
    """
    w = np.asarray(weights, dtype=float)
    exact = total * w / w.sum()
    counts = np.floor(exact).astype(int)
    short = int(total - counts.sum())
    if short > 0:
        order = np.argsort(-(exact - counts), kind="stable")
        counts[order[:short]] += 1
    return counts


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
