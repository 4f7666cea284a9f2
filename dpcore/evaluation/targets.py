"""What a model trained on a release learns from, and how real rows reach the release's space.

The vocabulary of the whole evaluation (SPEC section 7: train on the release, test on real rows):

- :func:`training_set` — the one extraction: a release's features and labels as a
  :class:`TrainingSet` ``(X, y, label_kind, classes, task, label_scale)``. The label kind is

  * ``"soft"``: ``y`` is ``(m, K)``, one column per public class (DPMix classification: the mean
    of ``ell`` one-hot labels plus zero-mean noise; the ``<label>_argmax`` column is left out);
  * ``"hard"``: ``y`` is ``(m,)``, one class value per row (randomized response, decoded noisy
    one-hot labels, synthetic rows' labels);
  * ``"continuous"``: ``y`` is ``(m,)``, a regression target, in ``[0, 1]`` units mapped back by
    ``label_scale = (lo, hi)`` when the release stores it (DPMix), else in the label's units.

  :func:`real_training_set` builds the same object from real rows (the non-private baseline).
- :func:`to_release_space` — the one map of real rows into the release's space (its public
  transform); :func:`has_public_transform` says whether there is one.
- :func:`soft_label_draw` — one class per row drawn from its soft label, for models that accept
  only hard labels (issue 13: never the argmax, which is a mixture's majority class).

Everything here is post-processing of the release (no privacy cost); the real rows it maps are
the custodian's held-out rows, which is why the evaluation is not private
(:data:`~dpcore.evaluation.metrics.NOT_DP_NOTICE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcore.preprocessing import scale_to_unit
from dpcore.validation import normalize_bounds

__all__ = [
    "LABEL_KINDS",
    "TrainingSet",
    "check_public_transform",
    "has_public_transform",
    "one_hot",
    "real_training_set",
    "release_class_labels",
    "release_training_arrays",
    "release_training_labels",
    "scale_by_public_bounds",
    "soft_label_block",
    "soft_label_draw",
    "subsample",
    "to_release_space",
    "training_set",
]

LABEL_KINDS = ("soft", "hard", "continuous")


@dataclass(frozen=True)
class TrainingSet:
    """Features and labels a model is trained on, in the release's units.

    Attributes
    ----------
    X : ndarray (m, d)
        Features (the released rows).
    y : ndarray
        ``(m, K)`` soft labels, ``(m,)`` class values or ``(m,)`` regression targets (``label_kind``).
    label_kind : {"soft", "hard", "continuous"}
    classes : ndarray (K,) or None
        Class values in soft-label column order (soft: the public class list; hard: the classes
        seen, sorted); None for regression.
    task : {"classification", "regression"}
    label_scale : (lo, hi) or None
        Continuous targets in ``[0, 1]`` units stand for ``lo + z (hi - lo)``.
    """

    X: np.ndarray
    y: np.ndarray
    label_kind: str
    classes: np.ndarray | None
    task: str
    label_scale: tuple[float, float] | None = None

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    def rows(self, index: np.ndarray) -> TrainingSet:
        """The training set restricted to ``index`` (same classes, kind and scale)."""
        return TrainingSet(self.X[index], self.y[index], self.label_kind, self.classes, self.task,
                           self.label_scale)

    def soft_targets(self) -> np.ndarray:
        """Targets of a soft-target model: soft labels ``(m, K)``, one-hot hard labels ``(m, K)`` over
        ``classes``, or regression targets ``(m, 1)``.

        Raises
        ------
        ValueError
            A hard label that is not in ``classes``.
        """
        if self.label_kind == "soft":
            return self.y.astype(float)
        if self.label_kind == "continuous":
            return self.y.astype(float).reshape(-1, 1)
        assert self.classes is not None
        lookup = {v: i for i, v in enumerate(self.classes.tolist())}
        missing = sorted({v for v in self.y.tolist() if v not in lookup}, key=str)
        if missing:
            raise ValueError(f"labels {missing[:5]} are not in the class list {self.classes.tolist()}")
        return one_hot(np.array([lookup[v] for v in self.y.tolist()], dtype=int), self.classes.size)

    def hard_labels(self, rng: np.random.Generator) -> np.ndarray:
        """One label per row for a model that accepts no soft targets: a class drawn from each soft
        label (:func:`soft_label_draw`), else ``y`` itself (``rng`` unused)."""
        if self.label_kind != "soft":
            return self.y
        assert self.classes is not None
        return self.classes[soft_label_draw(self.y, rng)]

    def decoded_labels(self) -> np.ndarray:
        """One label per row for display: soft labels decoded to their argmax class (the
        mixture's majority class: never train on it), else ``y``."""
        if self.label_kind != "soft":
            return self.y
        assert self.classes is not None
        return self.classes[np.argmax(self.y, axis=1)]


def training_set(release: Any, task: str | None = None) -> TrainingSet:
    """A release's features and labels, the one extraction every model trained on a release uses.

    Parameters
    ----------
    release : dpcore.release.Release
    task : {"classification", "regression"}, optional
        Default: the release's task (``release.parameters["task"]``).

    Returns
    -------
    TrainingSet
        DPMix classification releases (``details["classes"]`` and one ``label=c`` column per class,
        first) give soft labels; other classification releases hard labels (2-D noisy one-hot
        label columns without a class list are decoded to their argmax column index); regression
        releases continuous targets (``label_scale`` from the public ``label_lo``/``label_hi``
        transform arrays when present).

    Raises
    ------
    ValueError
        A release without labels, or an unsupervised task (nothing to train on).
    """
    task = task or release.parameters.get("task", "unsupervised")
    if release.labels is None or task == "unsupervised":
        raise ValueError("this release has no labels: a model cannot be trained on it")
    if task not in ("classification", "regression"):
        raise ValueError(f"task must be unsupervised, classification or regression, got {task!r}")
    X = np.asarray(release.data, dtype=float)
    labels = np.asarray(release.labels)
    if task == "regression":
        arrays = release.transform_arrays
        scale = ((float(arrays["label_lo"][0]), float(arrays["label_hi"][0]))
                 if "label_lo" in arrays else None)
        return TrainingSet(X, labels.reshape(len(X), -1)[:, 0].astype(float), "continuous", None,
                           task, scale)
    classes = release.details.get("classes") if isinstance(release.details, dict) else None
    if labels.ndim == 2 and classes is not None and labels.shape[1] >= len(classes):
        return TrainingSet(X, labels[:, : len(classes)].astype(float), "soft", np.asarray(classes), task)
    if labels.ndim == 2:  # noisy one-hot label columns without a class list: the argmax column
        labels = np.argmax(labels, axis=1)
    return TrainingSet(X, labels, "hard", np.unique(labels), task)


def real_training_set(X: Any, y: Any, *, bounds: Any = None, task: str = "classification",
                      classes: Any = None, label_bounds: tuple[float, float] | None = None) -> TrainingSet:
    """Real rows as a :class:`TrainingSet` (the non-private baseline), features scaled to [0, 1] by
    the public ``bounds`` (:func:`scale_by_public_bounds`; unscaled without bounds).

    Classification: hard labels over ``classes`` (default: the values in ``y``). Regression:
    targets scaled to [0, 1] by ``label_bounds`` (``label_scale``; unscaled without them).
    """
    X = scale_by_public_bounds(X, bounds)
    y = np.asarray(y)
    if task == "classification":
        cls = np.unique(y) if classes is None else np.asarray(classes)
        return TrainingSet(X, y, "hard", cls, task)
    if label_bounds is None:
        return TrainingSet(X, y.astype(float), "continuous", None, task)
    scale = (float(label_bounds[0]), float(label_bounds[1]))
    return TrainingSet(X, scale_to_unit(y[:, None], np.array([scale]))[:, 0], "continuous", None,
                       task, scale)


def has_public_transform(release: Any) -> bool:
    """Whether real rows can be mapped into the release's space: it lives in the feature space or
    carries a public transform (not JL-Laplace, whose projection is secret, nor PCA-Gauss Alg. 1)."""
    return release.transform_fn is not None or release.space == "features"


def to_release_space(release: Any, X: Any) -> np.ndarray:
    """Real rows ``(m, n_features)`` in original units mapped into the release's space
    ``(m, n_columns)`` by its public transform (:meth:`~dpcore.release.Release.transform`).

    Raises
    ------
    ValueError
        The release has no public transform (:func:`has_public_transform`), or ``X`` has the
        wrong number of columns.
    """
    check_public_transform(release)
    return release.transform(np.asarray(X, dtype=float))


def check_public_transform(release: Any) -> None:
    """Raise ``ValueError`` naming the mechanism unless :func:`has_public_transform`."""
    if not has_public_transform(release):
        raise ValueError(f"the {release.mechanism} release has no public transform: real test rows "
                         "cannot be mapped into its space, so a model trained on it cannot be tested")


def scale_by_public_bounds(X: Any, bounds: Any) -> np.ndarray:
    """Rows clipped to the public ``bounds`` (``(lo, hi)`` or ``(d, 2)``) and scaled to [0, 1]
    (:func:`~dpcore.preprocessing.scale_to_unit`); ``X`` as floats when ``bounds`` is None."""
    X = np.asarray(X, dtype=float)
    return X if bounds is None else scale_to_unit(X, normalize_bounds(bounds, X.shape[1]))


def soft_label_draw(soft: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One class index per row, drawn with probabilities ``max(t, 0) / sum max(t, 0)`` (uniform when
    every entry is <= 0).

    Why (issue 13): a DPMix soft label ``t`` is the mean of ``ell`` one-hot labels plus zero-mean
    noise; its argmax is the majority class among the ``ell`` rows, so a 25% minority class is
    the argmax of under 10% of the mixtures once ``ell >= 6`` and an argmax-trained classifier
    predicts the majority class. A draw keeps the mixing proportions (for noise-free ``t``,
    ``E[onehot(draw)] = t``), and the expected cross-entropy at the drawn class equals the
    soft-target cross-entropy ``-sum_c p_c log q_c`` with the clipped, normalised targets: a
    one-sample Monte Carlo of the soft-label loss that any classifier (SVM, logistic regression)
    accepts, at the cost of hard labels. Post-processing: no privacy cost.
    """
    w = np.clip(np.asarray(soft, dtype=float), 0.0, None)
    total = w.sum(axis=1, keepdims=True)
    p = np.where(total > 0, w / np.where(total > 0, total, 1.0), 1.0 / w.shape[1])
    u = rng.random(len(p))
    return np.minimum((np.cumsum(p, axis=1) < u[:, None]).sum(axis=1), w.shape[1] - 1)


def one_hot(index: np.ndarray, k: int) -> np.ndarray:
    """``(m, k)`` float matrix with a 1 at column ``index[i]`` of row ``i``."""
    out = np.zeros((index.size, k))
    out[np.arange(index.size), index] = 1.0
    return out


def subsample(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of ``size`` of ``n`` rows drawn without replacement; all rows (and no draw
    from ``rng``) when ``n <= size``."""
    return np.arange(n) if n <= size else np.sort(rng.choice(n, size=size, replace=False))


# ------------------------------------------------------------------ names kept from dpcore.training
# and dpcore.utility: views of training_set, for existing callers
def release_training_arrays(release: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str]:
    """``(X (m, d), Y, classes, task)`` of :func:`training_set`, ``Y`` =
    :meth:`TrainingSet.soft_targets` (soft labels, one-hot hard labels, or ``(m, 1)`` targets).

    Raises
    ------
    ValueError
        A release without labels (nothing to train on).
    """
    data = training_set(release)
    return data.X, data.soft_targets(), data.classes, data.task


def soft_label_block(release: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """``(soft (m, K), classes (K,))`` of a release carrying soft label columns, else None."""
    if release.labels is None:
        return None
    data = training_set(release, "classification")
    return (data.y, data.classes) if data.label_kind == "soft" else None


def release_training_labels(release: Any, rng: np.random.Generator) -> np.ndarray | None:
    """The labels a hard-label classifier is trained on (:meth:`TrainingSet.hard_labels`), or None
    for a release without labels."""
    if release.labels is None:
        return None
    return training_set(release, "classification").hard_labels(rng)


def release_class_labels(release: Any) -> np.ndarray | None:
    """One class per released row for display (:meth:`TrainingSet.decoded_labels`), or None."""
    if release.labels is None:
        return None
    return training_set(release, "classification").decoded_labels()
