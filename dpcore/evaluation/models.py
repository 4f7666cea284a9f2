"""The models trained on a release: the DPMix experiments' soft-label models and the sweep's classifiers.

Training on a release is post-processing: it costs no privacy budget. Two families, both fitted by
:func:`dpcore.evaluation.train_on_release` (the one entry that trains on a release):

*Soft-target models* (they have ``predict_scores`` and are fitted on ``(m, K)`` soft or one-hot
targets, or ``(m, 1)`` regression targets), those of the DPMix paper's experiments, sized for a
laptop:

- :class:`SoftLabelLinear` — a linear model fitted by minibatch SGD with weight decay, either
  softmax cross-entropy with *soft* targets (classification) or squared loss (Theorem 2's
  ``J(W) = ||Y - W X||_F^2 / (2n)``; regression, or classification by argmax). Both gradients are
  *linear in the target* (``p - t`` and ``W x - t``), so zero-mean label noise leaves them unbiased
  (the Theorem 2 setting). Feature noise biases the squared-loss gradient by ``sigma_X^2 W``
  (errors-in-variables, ``E[x~ x~^T] = E[x x^T] + sigma_X^2 I``); ``noise_correction=sigma_X^2``
  removes that bias (sigma_X is public, so the correction is free post-processing) at the price
  of variance, so :func:`~dpcore.evaluation.train_on_release` leaves it off unless asked.
- :class:`MLPOnRelease` — scikit-learn's MLP: ``MLPRegressor`` on the soft labels, prediction by
  argmax (model ``"mlp"``; keeps the mixing proportions), or ``MLPClassifier`` on the argmax
  labels (``"mlp-classifier"``; better on noisy MNIST mixtures: 0.66 vs 0.41 at ell = 64,
  epsilon = 20). The paper used a small CNN; these are CPU stand-ins, and on noisy mixtures they
  do worse than the linear softmax (the noisy, blurred training inputs differ from the clean
  test images, which a linear model tolerates and a ReLU network does not).

*Hard-label estimators* (any scikit-learn estimator: ``fit(X, y)``, ``predict``): the models of the
utility sweep (:func:`sweep_models`, SPEC section 7: the papers' RBF SVM, logistic regression and
kernel ridge regression). They are fitted on one class per row; for soft labels that class is
drawn from the row's soft label (:func:`~dpcore.evaluation.soft_label_draw`).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from sklearn.compose import TransformedTargetRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

from dpcore.evaluation.metrics import CLASSIFICATION_METRICS, REGRESSION_METRICS
from dpcore.validation import check_random_state

__all__ = [
    "MODELS",
    "MLPOnRelease",
    "SoftLabelLinear",
    "make_model",
    "sweep_models",
    "takes_soft_targets",
]

#: Names :func:`make_model` knows (soft-target models).
MODELS = ("softmax", "linear", "mlp", "mlp-classifier")

# ---------------------------------------------------------------------------------------- models
class SoftLabelLinear:
    """Linear model ``x -> x W + b`` fitted by minibatch SGD on (possibly noisy) soft targets.

    Parameters
    ----------
    loss : {"softmax", "squared"}
        ``"softmax"``: cross-entropy with soft targets ``t`` (rows need not sum to 1; the logit
        gradient used is ``softmax(x W + b) - t``, linear in ``t``). ``"squared"``: least squares
        ``||x W + b - t||^2 / 2`` (DPMix Theorem 2).
    epochs : int
        Passes over the data.
    batch_size : int
    learning_rate : float, optional
        Default 8 for softmax, 1 for squared loss (tuned on digits). Base step, divided by the
        minibatch smoothness estimate
        ``lambda_max(E[x x^T]) + E||x||^2 / batch_size`` (so the same value works for 64 or 784
        features and any noise level; the squared loss needs ``< 2``) and decayed as
        ``1/sqrt(1 + epoch)``.
    weight_decay : float
        L2 penalty ``weight_decay/2 ||W||^2``.
    noise_correction : float
        ``sigma_X^2`` of the feature noise (squared loss only): subtracts ``sigma_X^2 W`` from the
        gradient, which removes the errors-in-variables bias. 0 = off.
    random_state : None, int or Generator
        Shuffling.

    Attributes
    ----------
    coef_ : ndarray (n_features, n_outputs), intercept_ : ndarray (n_outputs,)
    """

    def __init__(self, loss: str = "softmax", *, epochs: int = 10, batch_size: int = 128,
                 learning_rate: float | None = None, weight_decay: float = 1e-4,
                 noise_correction: float = 0.0, random_state: Any = None) -> None:
        self.loss = loss
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.noise_correction = noise_correction
        self.random_state = random_state

    def fit(self, X: np.ndarray, Y: np.ndarray) -> SoftLabelLinear:
        """Fit on ``X`` (m, d) and targets ``Y`` (m, k) (or (m,) for one output).

        Raises
        ------
        ValueError
            Unknown loss, non-positive epochs/batch_size/learning_rate, mismatched lengths.
        """
        if self.loss not in ("softmax", "squared"):
            raise ValueError(f"loss must be 'softmax' or 'squared', got {self.loss!r}")
        lr = self.learning_rate
        if lr is None:
            lr = 8.0 if self.loss == "softmax" else 1.0
        for name, value in (("epochs", self.epochs), ("batch_size", self.batch_size),
                            ("learning_rate", lr)):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        X = np.asarray(X, dtype=float)
        Y = np.asarray(Y, dtype=float)
        Y = Y[:, None] if Y.ndim == 1 else Y
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but Y has {Y.shape[0]}")
        rng = check_random_state(self.random_state)
        W = np.zeros((X.shape[1], Y.shape[1]))
        b = np.zeros(Y.shape[1])
        base = lr / _sgd_smoothness(X, int(self.batch_size))
        shrink = self.weight_decay - (self.noise_correction if self.loss == "squared" else 0.0)
        # minibatch products are small: BLAS threads only add overhead (5x slower on a busy machine)
        with threadpool_limits(limits=1, user_api="blas"):
            W, b = self._sgd(X, Y, W, b, base, shrink, rng)
        self.coef_, self.intercept_ = W, b
        return self

    def _sgd(self, X: np.ndarray, Y: np.ndarray, W: np.ndarray, b: np.ndarray, base: float,
             shrink: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        m = X.shape[0]
        for epoch in range(int(self.epochs)):
            step = base / math.sqrt(1.0 + epoch)
            order = rng.permutation(m)
            for start in range(0, m, int(self.batch_size)):
                rows = order[start:start + int(self.batch_size)]
                xb = X[rows]
                g = self._output(xb @ W + b) - Y[rows]
                W -= step * (xb.T @ g / len(rows) + shrink * W)
                b -= step * g.mean(axis=0)
        return W, b

    def _output(self, z: np.ndarray) -> np.ndarray:
        if self.loss == "squared":
            return z
        # floor at -60 (e^-60 ~ 1e-26): exp of very negative logits gives subnormal floats,
        # which slow the next matrix product down by an order of magnitude
        z = np.maximum(z - z.max(axis=1, keepdims=True), -60.0)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=float) @ self.coef_ + self.intercept_

    def predict_scores(self, X: np.ndarray) -> np.ndarray:
        """Class probabilities (softmax) or fitted values (squared), shape (m, k)."""
        return self._output(self.decision_function(X))


def _sgd_smoothness(X: np.ndarray, batch_size: int, n_iter: int = 30) -> float:
    """``lambda_max(M) + trace(M)/batch_size`` with ``M = mean [x, 1][x, 1]^T``.

    The squared loss's minibatch gradient is stable for steps below ``2/`` this value (the softmax
    loss's curvature is at most half of it). ``lambda_max`` by power iteration. With feature noise
    ``M`` gains ``sigma^2 I``: the trace term grows by ``d sigma^2 / batch_size``, the top
    eigenvalue only by ``sigma^2``.
    """
    m = X.shape[0]
    trace = float(np.einsum("ij,ij->", X, X)) / m + 1.0
    v = np.ones(X.shape[1] + 1) / math.sqrt(X.shape[1] + 1)
    lam = 0.0
    for _ in range(n_iter):
        xv = X @ v[:-1] + v[-1]
        w = np.append(X.T @ xv, xv.sum()) / m
        lam = float(np.linalg.norm(w))
        if lam == 0:
            break
        v = w / lam
    return lam + trace / batch_size


class MLPOnRelease:
    """scikit-learn MLP on soft labels (``MLPRegressor``, default) or their argmax (``MLPClassifier``).

    Parameters
    ----------
    target : {"soft", "argmax"}
        ``"soft"``: ``MLPRegressor`` (squared loss, linear in the target, so unbiased under
        zero-mean label noise) on the soft labels; class = argmax of the output. ``"argmax"``:
        ``MLPClassifier`` on the argmax class of each soft label (loses the mixing proportions).
    hidden : tuple of int
    epochs : int
        ``max_iter`` (Adam epochs); convergence warnings are silenced (few epochs on purpose).
    random_state : None or int
    blas_threads : int or None, default 1
        BLAS threads during ``fit`` (``None``: library default). One thread is the default because
        on a shared 2-core machine threaded BLAS made a 20k x 784 fit 5x slower (5 s vs 26 s).
    **kwargs
        Passed to scikit-learn (e.g. ``alpha``, ``learning_rate_init``, ``batch_size``).
    """

    def __init__(self, target: str = "soft", *, hidden: tuple[int, ...] = (256,), epochs: int = 20,
                 random_state: int | None = None, blas_threads: int | None = 1,
                 **kwargs: Any) -> None:
        self.target = target
        self.hidden = hidden
        self.epochs = epochs
        self.random_state = random_state
        self.blas_threads = blas_threads
        self.kwargs = kwargs

    def fit(self, X: np.ndarray, Y: np.ndarray) -> MLPOnRelease:
        if self.target not in ("soft", "argmax"):
            raise ValueError(f"target must be 'soft' or 'argmax', got {self.target!r}")
        Y = np.asarray(Y, dtype=float)
        Y = Y[:, None] if Y.ndim == 1 else Y
        opts = {"hidden_layer_sizes": tuple(self.hidden), "max_iter": int(self.epochs),
                "random_state": self.random_state, **self.kwargs}
        self.n_outputs_ = Y.shape[1]
        if self.target == "soft" or Y.shape[1] == 1:
            self.model_ = MLPRegressor(**opts)
            target = Y if Y.shape[1] > 1 else Y[:, 0]
        else:
            self.model_ = MLPClassifier(**opts)
            target = np.argmax(Y, axis=1)
        with warnings.catch_warnings(), threadpool_limits(limits=self.blas_threads, user_api="blas"):
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.model_.fit(np.asarray(X, dtype=float), target)
        return self

    def predict_scores(self, X: np.ndarray) -> np.ndarray:
        """Output scores of shape (m, k): regression outputs or class probabilities."""
        X = np.asarray(X, dtype=float)
        if isinstance(self.model_, MLPClassifier):
            proba = self.model_.predict_proba(X)
            out = np.zeros((X.shape[0], self.n_outputs_))
            out[:, self.model_.classes_] = proba
            return out
        pred = self.model_.predict(X)
        return pred[:, None] if pred.ndim == 1 else pred


def make_model(model: str = "softmax", *, random_state: Any = None, **params: Any) -> Any:
    """A fresh model by name: ``softmax``, ``linear`` (squared loss), ``mlp`` (soft), ``mlp-classifier``.

    Raises
    ------
    ValueError
        Unknown name.
    """
    if model == "softmax":
        return SoftLabelLinear("softmax", random_state=random_state, **params)
    if model == "linear":
        return SoftLabelLinear("squared", random_state=random_state, **params)
    if model in ("mlp", "mlp-classifier"):
        seed = random_state if isinstance(random_state, (int, np.integer)) else None
        return MLPOnRelease("soft" if model == "mlp" else "argmax", random_state=seed, **params)
    raise ValueError(f"model must be one of {MODELS}, got {model!r}")



def takes_soft_targets(model: Any) -> bool:
    """True for the soft-target models (:class:`SoftLabelLinear`, :class:`MLPOnRelease`): fitted on
    ``(m, K)`` soft or one-hot targets and read through ``predict_scores``; False for a scikit-learn
    estimator fitted on one label per row."""
    return hasattr(model, "predict_scores")


def sweep_models(task: str, random_state: int | None = None) -> dict[str, Any]:
    """Fresh, unfitted models of the utility sweep by metric name (SPEC section 7).

    - ``"classification"``: ``svm_accuracy`` — RBF SVC (``C = 1``, ``gamma = "scale"``; the
      papers' classifier) and ``logreg_accuracy`` — logistic regression, both after
      standardisation fitted on the training rows.
    - ``"regression"``: ``krr_rmse`` — kernel ridge regression (RBF, ``alpha = 1``) on standardised
      features with a standardised target.

    Raises
    ------
    ValueError
        Any other task.
    """
    if task == "classification":
        svm, logreg = CLASSIFICATION_METRICS
        return {
            svm: make_pipeline(StandardScaler(), SVC(kernel="rbf", C=1.0, gamma="scale")),
            logreg: make_pipeline(StandardScaler(),
                                  LogisticRegression(max_iter=500, random_state=random_state)),
        }
    if task == "regression":
        return {REGRESSION_METRICS[0]: TransformedTargetRegressor(
            regressor=make_pipeline(StandardScaler(), KernelRidge(alpha=1.0, kernel="rbf")),
            transformer=StandardScaler())}
    raise ValueError(f"the sweep trains models for classification or regression, got {task!r}")
