"""PCA-Gauss: principal components + Gaussian generative model (pure or (epsilon, delta)-DP).

Chanyaswad, Liu & Mittal, "Coupling Dimensionality Reduction with Generative Model for
Non-Interactive Private Data Release" (``papers/pca_gauss.txt``; its formulas were lost in the text
extraction and are restored in SPEC section 3, which this module follows).

Data. Every feature is mapped affinely from its public bounds (clipped first): numerics onto
``[-a, a]`` with ``a = 1``, the columns of a public one-hot group onto ``[0, 1]`` with the group's L1
norm capped at 1 (:class:`~dpcore.mechanisms._box.BoxMap`; without groups this is the papers' box
``[-1, 1]^d``). The box centre maps to 0, which plays the role of the paper's centring without
spending budget on a private mean. PCA features are ``x^ = W^T z / B``, ``B`` the public row-norm
bound of the mapped rows (:func:`dpcore.preprocessing.row_norm_bound`: ``sqrt(d)`` for the box,
``sqrt(#numerics + #groups)`` with one-hot groups, e.g. ``sqrt(14)`` instead of ``sqrt(105)`` on
Adult), so ``||x^||_2 <= ||z||_2/B <= 1`` and ``|x^_j| <= 1`` for any orthonormal ``W`` (Lemma 1 plus
rescaling). Regression labels are mapped from their public ``label_bounds`` onto ``[-a, a]`` the
same way and mapped back for the release.

``noise="gaussian"`` ((epsilon, delta)-DP, issue 13): the same statistics get Gaussian noise from
their L2 sensitivities, composed in zCDP (:class:`~dpcore.mechanisms._gaussian_model.ZCDPBudget`):
eigenvalues ``sqrt(2)/n`` (:func:`eigenvalue_l2_sensitivity`), the DP PCA is Analyze Gauss
(``sqrt(2)``), the class histogram ``sqrt(2)``, class means/sums ``2`` and second moments
``sqrt(2)`` (:func:`class_l2_sensitivities`), Alg. 2's augmented second moment ``sqrt(6)/n``.
Empty ``n_components`` / ``pca_fraction``: the public rule
:func:`dpcore.calibration.recommended_n_components`.

Algorithms (replace-one neighbours, ``n`` public; Laplace mechanism on entrywise L1 sensitivity):

* **Alg. 1 (unsupervised)**. The query is the top-``p`` eigenvalues ``lambda`` of
  ``(1/(n d)) X^T X`` (the covariance of ``x^`` in the private PCA basis is ``diag(lambda)``).
  ``calibration="paper"``: ``S1 = p a^2/n`` (Theorem 4, Weyl). ``calibration="tight"``
  (default): ``S1 = min(p, 2) a^2/n`` (Lidskii-Mirsky: ``sum_i |lambda_i - lambda'_i| <=
  ||A - A'||_trace <= 2 max ||x||^2/(n d)``; SPEC section 3). The release is ``N(0, diag(lambda_DP))``
  in the private PCA coordinates: ``W`` is data-dependent and is NOT released, so real rows
  cannot be mapped into this space (the release has no transform).
* **Alg. 2 (regression)**, ``W`` derived independently: second moment of ``[x^, y]``,
  ``S1 = (p^2 a^2 + 4 p a^2 + a^2)/n`` (Theorem 5; "paper", noise on every entry) or, "tight"
  (noise on the upper triangle, mirrored), ``min(p(p+1)/2 + 2p + 1, p + 2 + 2 sqrt(p)) a^2/n``.
  The paper samples ``N(0, M_DP)``: centred on the box's centre, its file's columns sit around the
  midpoints of their bounds at any epsilon. Here (ours, as the paper's Alg. 3 and MODIPS do) the
  mean of ``[x^, y]`` is released too, with the ``"mean"`` part of ``epsilon_split`` (L2
  ``2 sqrt(2)/n``, L1 ``(2 sqrt(p) + 2)/n``), and the model is ``N(mu_DP, M_DP - mu_DP mu_DP^T)``
  (:meth:`PCAGauss._alg2`).
* **Marginals** (``marginals="auto"``, Alg. 2 and 3 on tables that are not images): DP one-way
  marginals of every original column (class-conditional for classification) with a public share
  of the budget (:mod:`dpcore.marginals`), onto which the file in the original columns is mapped
  (:func:`dpcore.decode.to_original`); their counts and noise are on the card.
* **Alg. 3 (classification, GMM)**, per class: mean ``S1 = 2 p a/n_c`` ("paper") or
  ``2 sqrt(p) a/n_c`` ("tight"); second moment ``(1/n_c) X^_c^T X^_c``: ``S1 = p^2 a^2/n_c``
  ("paper") or ``min(p(p+1)/2, p + 1) a^2/n_c`` ("tight", upper triangle); covariance by
  post-processing ``M_c,DP - mu_c,DP mu_c,DP^T``, PSD-repaired. Default split
  ``eps_mu = 0.1, eps_Sigma = 0.9`` of the model budget. Class sizes ``n_c`` are public; parallel
  composition across classes.
* **Alg. 3 with a tied covariance** (``covariance_type="tied"``; ours, the pooled covariance of LDA /
  scikit-learn's ``GaussianMixture(covariance_type="tied")``): the class means (or sums) as above and
  ONE second moment ``M = (1/n) sum_i x^_i x^_i^T`` of all ``n`` rows, whose sensitivity ignores the
  labels (a replaced record changes one term, whatever its classes): ``S1 = min(p(p+1)/2, p+1)
  a^2/n`` (upper triangle) or ``p^2 a^2/n``, ``S2 = sqrt(2)/n`` (:func:`tied_second_moment_sensitivities`).
  Every class gets the pooled within-class covariance ``M - sum_c w_c mu_c mu_c^T`` (post-processing,
  ``w_c`` the DP or public class shares), PSD-repaired: its noise is relative to ``n``, not ``n_c``
  (``K`` classes: ``K`` times less), and the budget it frees goes to the class means (empty
  ``epsilon_split``: :func:`dpcore.calibration.tied_mean_share`). The parts compose as before
  (mean, covariance, histogram; zCDP with Gaussian noise).

The "tight" matrix and mean bounds use, besides the box, that PCA features lie in the L2 ball of
radius ``a``: ``||x^||_2 = ||W^T x||_2/sqrt(d) <= ||x||_2/sqrt(d) <= a`` for any orthonormal ``W``
(ours, not in the paper or SPEC; the same argument as RON-Gauss's ``||x~|| <= 1``). The paper's
box-only bounds are about ``p`` (matrices) and ``sqrt(p)`` (mean) times larger.

Where ``W`` comes from (Alg. 2 and 3; each changes the total guarantee):

* ``pca_source="lap"`` (LapPCA, paper section VII): top-``p`` eigenvectors of
  ``(1/n) X^T X + Lap(S1/eps_pca)``, ``S1 = d^2 a^2/n`` (Prop. 3, every entry, "paper") or
  ``d(d+1) a^2/(2n)`` (upper triangle, "tight"). Total ``eps_pca + eps_mu + eps_Sigma``, pure.
* ``pca_source="analyze-gauss"`` (AGPCA; Dwork, Talwar, Thakurta & Zhang, "Analyze Gauss", STOC
  2014): rows scaled to L2 norm <= 1, ``X^T X`` plus a symmetric matrix of i.i.d. Gaussians on the
  upper triangle; replace-one Frobenius sensitivity ``sqrt(2)``; ``sigma`` from the analytic
  Gaussian mechanism (Balle & Wang 2018). Total ``(eps_pca + eps_mu + eps_Sigma, delta)``.
* ``pca_source="dct"`` (images): ``W`` is the ``p`` lowest-frequency functions of the 2-D DCT basis
  of the public image shape (:func:`dpcore.calibration.image_dct_basis`): data-independent like
  RON-Gauss's random ``W``, no budget; total ``eps_mu + eps_Sigma``. Not in the paper (ours).
* ``pca_source="identity"``: ``W = I_d``, ``p = d``: no projection and no budget for a basis; the
  model is Alg. 2/3's Gaussian over every feature (total ``eps_mu + eps_Sigma``). Not in the paper
  (ours): on a narrow table a projection drops directions worth more than their noise, and the
  rule of :func:`dpcore.calibration.recommended_n_components` (``identity=True``) then takes it.
* ``pca_source="public"`` (PubPCA): ``W`` is the top-``p`` eigenvectors of a separate table of
  PUBLIC rows, ``public_data`` (recorded on the card by its SHA-256; never a part of the private
  input, see :mod:`dpcore.mechanisms._public`). No budget; total ``eps_mu + eps_Sigma``.

``epsilon`` is always the total: LapPCA/AGPCA take ``pca_fraction`` of it, the Gaussian model the
rest (split by ``epsilon_split`` in Alg. 3). Each part is in the release's noise records.

Computation: the box scaling is applied block by block (a few MiB of rows at a time, in cache),
and ``X^T X`` and the projection ``X W`` are accumulated over the blocks, so no scaled copy of
``X`` is ever made (:func:`box_gram`, :func:`box_project`); the cost is that of one ``X^T X``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np

from dpcore import marginals as dpmarg
from dpcore import noise as dpnoise
from dpcore.accounting import zcdp_epsilon, zcdp_rho
from dpcore.calibration import (
    EpsilonSplit,
    analytic_gaussian_sigma,
    check_delta,
    default_delta,
    image_dct_basis,
    laplace_scale,
    recommended_mechanism,
    recommended_n_components,
    tied_mean_share,
)
from dpcore.mechanisms._box import (
    A_BOUND,
    BoxMap,
    box_gram,
    box_project,
    lap_pca_sensitivity,
    top_eigvecs,
)
from dpcore.mechanisms._gaussian_model import (
    GAUSSIAN_DELTA,
    NOISE,
    FittedGaussian,
    GaussianGenerator,
    GaussianModel,
    OutputMap,
    ZCDPBudget,
    add_matrix_noise,
    check_n_components,
)
from dpcore.mechanisms._labels import (
    HISTOGRAM_FRACTION,
    LABEL_PRIVACY,
    WITHIN_CLASS,
    dp_class_histogram,
    label_privacy_assumption,
)
from dpcore.mechanisms._marginals import marginal_plan, marginal_share, measure_marginals
from dpcore.mechanisms._pca_models import (  # re-exported: their home was this module
    alg2_model,
    alg3_model,
    regression_covariance,
    shrink_class_means,
)
from dpcore.mechanisms._pca_statistics import (  # re-exported: their home was this module
    AG_SOURCE,
    SOURCE,
    _gaussian_coordinates,
    _Moments,
    _norm,
    _PCAStats,
    class_l2_sensitivities,
    class_sum_sensitivities,
    eigenvalue_l2_sensitivity,
    eigenvalue_sensitivity,
    pca_mean_sensitivity,
    pca_second_moment_sensitivity,
    tied_second_moment_sensitivities,
)
from dpcore.mechanisms._public import public_rows
from dpcore.noise import BitSource, NoiseDraw
from dpcore.preprocessing import PreparedInput
from dpcore.release import Guarantee, NoiseRecord
from dpcore.schema import EPSILON, Param

__all__ = [
    "PCAGauss",
    "class_l2_sensitivities",
    "class_sum_sensitivities",
    "eigenvalue_l2_sensitivity",
    "eigenvalue_sensitivity",
    "pca_mean_sensitivity",
    "pca_second_moment_sensitivity",
    "regression_covariance",
    "shrink_class_means",
    "tied_second_moment_sensitivities",
]


#: Alg. 2's default split of the model budget between the mean of [z/B, y] and the second moment
REGRESSION_SPLIT = (0.5, 0.5)

#: ``pca_source`` values whose ``W`` costs no budget
PUBLIC_BASES = ("public", "dct", "identity")


def _model_epsilon(epsilon: float, delta: float | None, marg: float) -> float:
    """The budget left to the model after the marginals' share ``marg``, as the epsilon the public
    rule of ``p`` sees: ``(1 - marg) epsilon`` (Laplace), or the epsilon of ``(1 - marg) rho`` at
    ``delta`` (Gaussian noise composed in zCDP)."""
    if marg <= 0 or math.isinf(epsilon):
        return epsilon
    if delta is None:
        return (1.0 - marg) * epsilon
    return zcdp_epsilon((1.0 - marg) * zcdp_rho(epsilon, delta), delta)


def _dct_basis(data: PreparedInput, p: int) -> np.ndarray:
    """``pca_source="dct"``: :func:`dpcore.calibration.image_dct_basis` of the public image shape.

    Raises
    ------
    ValueError
        The input has no public image shape whose pixels are its features.
    """
    shape = data.image_shape
    if shape is None or int(np.prod(shape)) != data.X.shape[1]:
        raise ValueError(f"pca_source='dct' needs images: a public image_shape whose pixels are the "
                         f"{data.X.shape[1]} features (got image_shape = {shape})")
    return image_dct_basis(shape, p)


def _pca_transform(X: np.ndarray, *, W: np.ndarray, bmap: BoxMap) -> np.ndarray:
    """Real rows -> PCA features ``W^T z / B`` of the mapped rows ``z`` (:class:`BoxMap`)."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != W.shape[0]:
        raise ValueError(f"X must have shape (m, {W.shape[0]}), got {X.shape}")
    return box_project(X, bmap, W / _norm(bmap))


def _transform_arrays(W: np.ndarray, bmap: BoxMap) -> dict[str, np.ndarray]:
    """What :func:`_pca_transform` needs, as arrays: ``z = (clip(x) - centre) * factor``, each
    one-hot group (``onehot_group`` = its number, -1 for none) scaled to L1 norm <= 1,
    ``x^ = W^T z / norm_bound``."""
    group = np.full(W.shape[0], -1)
    for i, g in enumerate(bmap.groups):
        group[g] = i
    return {"W": W, "bounds": bmap.bounds, "centre": bmap.centre, "factor": bmap.factor,
            "onehot_group": group, "norm_bound": np.array(_norm(bmap))}


# ------------------------------------------------------------------------------------ mechanism
class PCAGauss(GaussianGenerator):
    """PCA-Gauss: Gaussian model (or GMM) on PCA features, Laplace noise on its moments.

    Parameters
    ----------
    epsilon : float, default 1.0
        Total privacy budget (> 0; ``inf`` = NOT PRIVATE, explore only).
    delta : float, optional
        Given: ``noise="auto"`` (default) uses Gaussian noise and the guarantee is (epsilon, delta)
        (:func:`dpcore.calibration.resolve_noise`); also the delta of ``pca_source="analyze-gauss"``.
        Empty: pure epsilon with ``noise="auto"``; :func:`dpcore.calibration.default_delta` of ``n``
        (``min(1e-5, n^-1.5)``) where Gaussian noise is asked for.
    epsilon_split : (float, float), optional
        Alg. 3: fractions of the model budget for the class means and second moments. Empty
        (automatic): the paper's ``(0.1, 0.9)`` with ``covariance_type="full"``; with ``"tied"`` the
        public rule :func:`dpcore.calibration.tied_mean_share` of ``p`` and the class count (on the
        card: ``details["epsilon_split_rule"]``). Alg. 1 and 2 release a single noisy statistic and
        spend the whole model budget on it.
    covariance_type : {"full", "tied"}, optional
        Alg. 3: one covariance per class (the paper's) or one pooled within-class covariance shared by
        every class, from the DP second moment of all rows (module docstring;
        :func:`tied_second_moment_sensitivities`). ``"tied"`` is what
        :func:`dpcore.calibration.recommended_mechanism` names for image classification (mnist-10k at
        epsilon = 1: SVM accuracy 0.57 -> 0.75); on Adult the per-class model is better (0.804 against
        0.793 at epsilon = 1). Empty (automatic): ``"tied"`` for image classification, ``"full"``
        otherwise.
    n_components : int, optional
        ``p``, ``1 <= p < n_features``; empty (automatic): the public rule
        :func:`dpcore.calibration.recommended_n_components` of ``n, d``, the class count, epsilon and
        (``noise="gaussian"``) delta, recorded on the card as ``details["recommended"]``.
        Laplace sensitivities grow like ``p^2`` (Alg. 2/3): small ``p`` is the point of the method.
    noise : {"auto", "laplace", "gaussian"}, default "auto"
        ``"auto"``: ``"gaussian"`` when ``delta`` is given, else ``"laplace"`` (the card's
        ``details["noise_choice"]`` says which and why). ``"laplace"``: the paper's pure epsilon.
        ``"gaussian"``: (epsilon, delta)-DP, every statistic (the DP PCA as Analyze Gauss, the
        eigenvalues, the class histogram, means and second moments) gets Gaussian noise from its L2
        sensitivity (:func:`eigenvalue_l2_sensitivity`, :func:`class_l2_sensitivities`), composed in
        zCDP; the card's ``laplace_over_gaussian_variance`` shows the noise saved per part.
    pca_source : {"lap", "analyze-gauss", "public", "dct", "identity"}, optional
        Where ``W`` comes from in Alg. 2 and 3 (module docstring). Ignored by Alg. 1. Empty
        (automatic, :meth:`_automatic`): ``"dct"`` for images (a public ``image_shape``); on other
        tables ``"identity"`` (``p = d``) or ``"lap"``, whichever the public rule of
        :func:`dpcore.calibration.recommended_n_components` predicts the smaller error for
        (``details["recommended"]["basis"]``).
    pca_fraction : float, optional
        Fraction of ``epsilon`` spent on LapPCA / AGPCA (not used with ``"public"``); empty
        (automatic): chosen with ``p`` by :func:`dpcore.calibration.recommended_n_components` from
        public facts (the basis noise hides the directions whose eigenvalue is below its BBP
        threshold), recorded in ``details["recommended"]``.
    public_data : array-like of shape (n_public, n_features) or Dataset, optional
        ``pca_source="public"``: the public rows ``W`` is computed from (required there).
    covariance_repair : {"clip", "shrink"}, default "clip"
        Alg. 3: each class covariance ``M_c,DP - mu mu^T`` made PSD by clipping negative eigenvalues
        (the paper's repair), or by :func:`dpcore.calibration.shrink_noisy_covariance` with the
        statistic's public noise scale (eigenvalues inside the noise bulk to 0, spikes debiased), so
        samples do not carry the noise's variance in every direction. Post-processing: no budget.
    calibration : {"tight", "paper"}, default "tight"
        Sensitivities: the paper's values (noise on every matrix entry) or the tighter proven ones
        (``min(p, 2)`` for Alg. 1; upper-triangle noise and the L2-ball bound ``||x^||_2 <= a`` for
        Alg. 2/3, see the module docstring). Both are sound; for Alg. 1 ``details`` shows the scale
        the paper's calibration would have used.
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`. Public feature bounds are required for the
        ``[-a, a]`` scaling; regression needs public ``label_bounds``.

    Notes
    -----
    Released table: ``pc1..pcp`` (PCA features ``x^``), ``n_samples`` rows (default: the number of
    private rows), labels for regression (label units) and classification (``n_c`` per class, or
    ``n_samples`` split in proportion). Alg. 2/3 releases carry ``W`` and the bounds in
    ``transform_arrays`` and map real rows with ``x -> W^T scale(x)/sqrt(d)``.

    ``fit(X, y)`` / ``sample(n_samples)`` (:class:`~dpcore.mechanisms._gaussian_model.GaussianGenerator`):
    ``model_`` is ``N(0, diag(lambda_DP))`` (Alg. 1), ``N(0, M_DP)`` of ``[x^, y]`` (Alg. 2) or one
    ``N(mu_c,DP, Sigma_c,DP)`` per class (Alg. 3), in the PCA space the release's columns are in
    (``output_map_`` maps Alg. 2's label back to its units; the original units are
    :mod:`dpcore.decode`'s post-processing of the release).

    Raises
    ------
    ValueError
        ``n_components >= n_features``, ``pca_source="public"`` without ``public_data``, bad parameters.
    """

    name = "pca-gauss"
    title = "PCA-Gauss (PCA + Gaussian model)"
    summary = ("Scale features to [-1, 1], reduce with PCA (private eigenvalues, a DP PCA, a public "
               "basis), fit a DP Gaussian (or one per class), sample, and map the rows onto DP "
               "marginals of your columns.")
    citation = ("Chanyaswad, Liu & Mittal, Coupling Dimensionality Reduction with Generative Model "
                "for Non-Interactive Private Data Release (PCA-Gauss)")
    params = (
        EPSILON,
        GAUSSIAN_DELTA,
        NOISE,
        Param("epsilon_split", "fraction_split", None, "Fractions of the model budget for the means (per "
              "class, or of [features, label] for regression) and the second moments; empty = automatic: "
              "the paper's 0.1 / 0.9 for classification with covariance_type='full', the public rule of "
              "dpcore.calibration.tied_mean_share (p, classes) with 'tied', 0.5 / 0.5 for regression.",
              privacy=True, split_names=("mean", "covariance"), optional=True),
        Param("covariance_type", "choice", None, "Classification (GMM): one covariance per class "
              "(full, the paper's) or one pooled within-class covariance shared by every class (tied, as "
              "LDA / scikit-learn's GaussianMixture): its noise is relative to n, not to each class size; "
              "empty = automatic: tied for images (a public image shape), full otherwise "
              "(dpcore.calibration.recommended_mechanism).",
              choices=("full", "tied"), privacy=True, optional=True),
        Param("n_components", "int", None, "Number of principal components p (< number of "
              "features); empty = automatic: the public rule of dpcore.calibration."
              "recommended_n_components (n, d, classes, epsilon, delta).", low=1, optional=True),
        Param("pca_source", "choice", None, "Supervised tasks: W from LapPCA (pure), Analyze "
              "Gauss (epsilon, delta), a separate public table, public_data (no budget), or (images) "
              "the low-frequency 2-D DCT basis of the public image shape (no budget), or identity "
              "(no projection, p = d, no budget); empty = automatic: dct for images (a public image "
              "shape), otherwise identity or lap, whichever the public rule predicts better "
              "(dpcore.calibration.recommended_n_components).",
              choices=("lap", "analyze-gauss", "public", "dct", "identity"), privacy=True, optional=True),
        Param("pca_fraction", "float", None, "Fraction of epsilon spent on the DP PCA (lap, "
              "analyze-gauss); empty = automatic: the public rule of dpcore.calibration."
              "recommended_n_components.", low=0.0, high=1.0, low_open=True, high_open=True,
              privacy=True, optional=True),
        Param("calibration", "choice", "tight", "Sensitivities: tight (proven, less noise) or "
              "the paper's constants (also proven).", choices=("tight", "paper"), privacy=True),
        LABEL_PRIVACY,
        HISTOGRAM_FRACTION,
        Param("covariance_repair", "choice", "clip", "Classification: class covariances from the noisy "
              "moments by clipping negative eigenvalues (clip, the paper's PSD repair) or by shrinking "
              "the eigenvalues to what the public noise scale implies (shrink: the noise bulk goes to 0, "
              "spikes are debiased; dpcore.calibration.shrink_noisy_covariance). Post-processing: no "
              "budget.", choices=("clip", "shrink")),
        dpmarg.MARGINALS_PARAM,
        dpmarg.MARGINAL_FRACTION_PARAM,
    )
    neighbouring = "replace-one"
    guarantee_kind = "pure"
    space = "projected"
    peak_square_matrices = 4  # covariance, its noise, eigenvectors, repair (d x d)
    extra_args = ("public_data",)

    @classmethod
    def transform_from_arrays(cls, arrays: Mapping[str, np.ndarray], parameters: Mapping[str, Any]
                              ) -> Callable[[np.ndarray], np.ndarray]:
        """Real rows -> PCA features ``W^T z / B`` of the mapped rows (:func:`_pca_transform`) from
        the saved ``W``, ``bounds`` and ``onehot_group`` (the public one-hot groups of the
        sparsity-preserving :class:`~dpcore.mechanisms._box.BoxMap`)."""
        group = np.asarray(arrays.get("onehot_group", np.full(np.shape(arrays["W"])[0], -1)), dtype=int)
        groups = tuple(np.flatnonzero(group == g) for g in range(int(group.max(initial=-1)) + 1))
        bmap = BoxMap.from_bounds(np.array(arrays["bounds"], dtype=float), groups)
        return partial(_pca_transform, W=np.array(arrays["W"], dtype=float), bmap=bmap)

    def _fit(self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator, *,
             bits: BitSource, n_samples: int | None = None) -> FittedGaussian:
        """Alg. 1-3 up to the DP model (``fit``): ``N(0, diag(lambda_DP))`` (Alg. 1), ``N(0, M_DP)`` of
        ``[x^, y]`` (Alg. 2, the label decoded to its units) or one ``N(mu_c,DP, Sigma_c,DP)`` per
        class (Alg. 3), all in the p-dimensional PCA space (the release's columns ``pc1..pcp``);
        every noise draw from ``bits``. ``rng`` is not used: ``W`` is private or from public rows."""
        n, d = data.X.shape
        bmap = BoxMap.of(data)  # public: bounds and one-hot groups (sparsity-preserving map)
        if params["noise"] == "gaussian" and params["calibration"] == "paper":
            raise ValueError("noise='gaussian' needs calibration='tight' (the paper's constants are "
                             "L1 values for the Laplace mechanism)")
        params = self._automatic(params, data)
        approximate = params["noise"] == "gaussian" or params["pca_source"] == "analyze-gauss"
        if params["delta"] is None and approximate:  # (epsilon, delta) asked for without a delta
            params = {**params, "delta": default_delta(n)}
        marg = marginal_share(params, data, decodable=data.task != "unsupervised")
        params, split_rule = self._epsilon_split(params, data, marg)
        p, pca_fraction, rule = self._components(params, data, marg)
        if params["pca_source"] is None:  # a table: the rule chose the identity (p = d) or LapPCA
            params = {**params, "pca_source": "identity" if p == data.X.shape[1] else "lap"}
        # data.X is already clipped to data.bounds (prepare_input); the box scaling is applied
        # block by block inside box_gram / box_project
        if data.task == "unsupervised":
            fitted = self._alg1(data, params, p, bits, bmap)
        else:
            fitted = self._supervised(data, params, p, bits, bmap, pca_fraction, n_samples, marg)
        rel = fitted.template
        rel.details["row_norm_bound"] = bmap.bound.card()
        if split_rule is not None:
            rel.details["epsilon_split_rule"] = split_rule
        if rule is not None:
            rel.details["recommended"] = {
                **rule, "mechanism": recommended_mechanism(
                    data.task, n, d, epsilon=params["epsilon"],
                    delta=params["delta"] if params["noise"] == "gaussian" else None,
                    n_classes=0 if data.classes is None else data.classes.size, image_shape=data.image_shape)}
        return fitted

    @staticmethod
    def _automatic(params: dict[str, Any], data: PreparedInput) -> dict[str, Any]:
        """``params`` with an empty ``pca_source`` / ``covariance_type`` resolved by the public rule of
        :func:`dpcore.calibration.recommended_mechanism`: images (a public ``image_shape`` whose
        pixels are the features) take the DCT basis and, for classification, a tied covariance;
        other tables LapPCA (a DP basis) and one covariance per class."""
        image = data.image_shape is not None and int(np.prod(data.image_shape)) == data.X.shape[1]
        supervised = data.task != "unsupervised"
        # a table (not images), supervised: lap or identity, decided with p in _components
        source = params["pca_source"] or ("dct" if image and supervised else None if supervised else "lap")
        kind = params["covariance_type"] or ("tied" if image and data.task == "classification" else "full")
        return {**params, "pca_source": source, "covariance_type": kind}

    @classmethod
    def _epsilon_split(cls, params: dict[str, Any], data: PreparedInput, marg: float = 0.0
                       ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """``params`` with ``epsilon_split`` resolved: given; for regression (Alg. 2, whose mean is
        ours, not the paper's) ``REGRESSION_SPLIT``, RON-Gauss's split of its mean and second moment
        (its paper, section 5.2); the paper's ``(0.1, 0.9)`` with ``covariance_type="full"``; or with
        ``"tied"`` the public rule :func:`dpcore.calibration.tied_mean_share` at ``p`` (given, or
        from :func:`dpcore.calibration.recommended_n_components` at an equal split: one fixed-point
        step). Returns the params and the rule's record for the card (``None`` when not used).

        Regression's split was measured on a simulated wage table (2,100 rows, year and age, file
        RMSE of a linear model, delta = 1e-6, predicting the training mean: 19.0). With a DP basis
        and 5 releases each: at epsilon = 0.1, 61.6 with 0.1 for the mean, 31.6 with 0.3, 33.9 with
        0.5. With the identity basis and no marginals (the automatic setting there), 20 releases
        each: at epsilon = 0.1, 31.4 / 34.5 (two runs) with 0.3, 23.7 with 0.5, 31.0 with 0.7; at
        epsilon = 1, 17.8 with 0.3 and 17.6 with 0.5; at 10, 15.8 / 15.9 (10 releases; diabetes
        86.4 / 82.5 at 1, 65.8 / 66.0 at 10). The mean decides a regression file's level, and the
        label's level is most of its RMSE at a small epsilon."""
        if params["epsilon_split"] is not None:
            return params, None
        if data.task == "regression":
            return {**params, "epsilon_split": REGRESSION_SPLIT}, None
        paper = {**params, "epsilon_split": (0.1, 0.9)}
        gmm = data.task == "classification" and data.classes is not None
        if params["covariance_type"] != "tied" or not gmm:
            return paper, None
        assert data.classes is not None
        guess = cls._components({**params, "epsilon_split": (0.5, 0.5)}, data, marg)[0]
        rule = tied_mean_share(guess, data.classes.size, gaussian=params["noise"] == "gaussian")
        return {**params, "epsilon_split": (rule["mean_share"], 1.0 - rule["mean_share"])}, rule

    @staticmethod
    def _components(params: dict[str, Any], data: PreparedInput, marg: float = 0.0
                    ) -> tuple[int, float | None, dict[str, Any] | None]:
        """``p`` and ``pca_fraction``: given, or (empty) from the public rule
        :func:`dpcore.calibration.recommended_n_components` (n, d, the class count, epsilon, delta,
        the row-norm bound). Returns ``(p, pca_fraction, the rule's record for the card or None
        when nothing was left empty)``. ``pca_source="analyze-gauss"`` with Laplace noise on the model
        is predicted as all-Laplace (a larger basis noise: a conservative p)."""
        n, d = data.X.shape
        supervised = data.task != "unsupervised"
        if params["pca_source"] == "identity":
            if params["n_components"] not in (None, d):
                raise ValueError(f"n_components: pca_source='identity' keeps every feature, "
                                 f"n_components = n_features = {d} (got {params['n_components']})")
            return d, None, None
        dp_basis = supervised and params["pca_source"] not in PUBLIC_BASES
        # pca_source left empty on a table: the rule also weighs the identity (p = d, no basis)
        identity = supervised and params["pca_source"] is None and d >= 2
        if identity and params["n_components"] == d:
            return d, None, None
        if params["n_components"] is not None and (params["pca_fraction"] is not None or not dp_basis):
            return check_n_components(params["n_components"], d), params["pca_fraction"], None
        check_n_components(params["n_components"], d)  # names the problem (p >= d, a single feature)
        gmm = data.task == "classification" and data.classes is not None
        n_classes = data.classes.size if gmm else 1
        gaussian = params["noise"] == "gaussian"
        tied = gmm and params["covariance_type"] == "tied"
        if supervised:
            h = params["histogram_fraction"] if gmm and params["label_privacy"] == "protected" else 0.0
            model_share = (1 - h) * params["epsilon_split"][1]
        else:
            model_share = 1.0
        bound = BoxMap.of(data).bound
        b2 = bound.l2**2 or 1.0
        basis_l1 = (d * d if params["calibration"] == "paper"
                    else lap_pca_sensitivity(d, 1, bound=bound)) / b2
        rec = recommended_n_components(
            n, d, epsilon=_model_epsilon(params["epsilon"], params["delta"] if gaussian else None, marg),
            delta=params["delta"] if gaussian else None,
            n_classes=n_classes, model_share=model_share, dp_basis=dp_basis, basis_l1=basis_l1,
            pca_fraction=params["pca_fraction"], row_norm=bound.l2, n_components=params["n_components"],
            # Gaussian noise: the class means decide p (the second moments' noise does not grow with p);
            # Laplace: their per-entry noise grows like p and the trace-norm criterion decides; a tied
            # covariance: the class means and the pooled second moment together (both noises)
            mean_share=(1 - h) * params["epsilon_split"][0] if gmm and (gaussian or tied) else None,
            tied=tied, identity=identity)
        if rec["basis"] == "identity":
            return d, None, rec
        f = params["pca_fraction"] if params["pca_fraction"] is not None else rec["pca_fraction"]
        return check_n_components(rec["n_components"], d), f, rec

    # ------------------------------------------------------------------------------ Alg. 1
    def _alg1(self, data: PreparedInput, params: dict[str, Any], p: int, bits: BitSource,
              bmap: BoxMap) -> FittedGaussian:
        n, d = data.X.shape
        eps, cal = params["epsilon"], params["calibration"]
        gram = data.engine.sums(partial(box_gram, bounds=bmap, clip=False), data.X)[0]
        lam = np.sort(np.linalg.eigvalsh(gram / (n * _norm(bmap) ** 2)))[::-1][:p]
        s1 = eigenvalue_sensitivity(p, n, calibration=cal)
        gaussian_details: dict[str, Any] = {}
        if params["noise"] == "gaussian":
            gauss = ZCDPBudget.plan(eps, check_delta(params["delta"]), {"eigenvalues": 1.0}, p, bits)
            lam_dp, rec = gauss.add(
                lam, "eigenvalues", eigenvalue_l2_sensitivity(n), p, laplace_s1=s1,
                statistic="top-p eigenvalues of (1/(n B^2)) Z^T Z",
                formula="S2 = sqrt(2)/n (Hoffman-Wielandt: ||lambda - lambda'||_2 <= ||A - A'||_F; "
                        "rows of norm <= 1)", source=f"{SOURCE}, Alg. 1 (Gaussian variant)")
            eps_g, delta_g, gaussian_details = gauss.guarantee(self.delta is not None)
            guarantee = Guarantee(epsilon=eps_g, delta=delta_g, neighbouring="replace-one", kind="approx")
            noise = [rec]
        else:
            draw = dpnoise.laplace(lam, s1, scale=laplace_scale(s1, eps), n_changed=p, bits=bits)
            lam_dp = draw.values
            noise = [NoiseRecord(
                statistic="top-p eigenvalues of (1/(n B^2)) Z^T Z", sensitivity=s1, scale=draw.scale,
                distribution="laplace", norm="L1", epsilon=eps,
                formula=("S1 = p a^2/n (Weyl)" if cal == "paper" else "S1 = min(p, 2) a^2/n "
                         "(Lidskii-Mirsky)") + "; b = S1/epsilon; a = 1 (rows scaled by the public "
                        "norm bound B)",
                source=f"{SOURCE}, Alg. 1 / Theorem 4", **dpnoise.record_fields(draw),
            )]
            guarantee = Guarantee(epsilon=eps, delta=0.0, neighbouring="replace-one", kind="pure")
        lam_pos = np.clip(lam_dp, 0.0, None)
        details = {
            "algorithm": "Alg. 1 (unsupervised: private eigenvalues, W not released)",
            "n_components": p,
            "noise": params["noise"],
            **gaussian_details,
            "scale_paper": laplace_scale(eigenvalue_sensitivity(p, n, calibration="paper"), eps),
            "scale_tight": laplace_scale(eigenvalue_sensitivity(p, n, calibration="tight"), eps),
            "assumptions": [
                "n is public (bounded DP, replace-one neighbours)",
                "features are mapped from their public bounds (numerics to [-1, 1], one-hot groups to "
                "[0, 1]) and rows divided by the public norm bound B; the box centre is used as the "
                "centre (no private centring)",
                "the PCA basis W is private and NOT released: the columns are coordinates in an "
                "unknown basis and real data cannot be mapped into them",
            ],
            "pca_source": "not used (Alg. 1 uses the private data's own PCA)",
        }
        rel = self._new_release(
            data, params, values=np.empty((0, p)), columns=[f"pc{j + 1}" for j in range(p)],
            guarantee=guarantee, noise=noise, calibration=cal, details=details,
        )
        data.diagnostics.update({"eigenvalues_dp": lam_dp, "n_negative_eigenvalues_clipped":
                                int(np.sum(lam_dp < 0))})
        return FittedGaussian(GaussianModel.single(np.zeros(p), np.diag(lam_pos)), OutputMap(p), rel)

    # ------------------------------------------------------------------------------ Alg. 2 / 3
    def _supervised(self, data: PreparedInput, params: dict[str, Any], p: int, bits: BitSource,
                    bmap: BoxMap, pca_fraction: float | None, n_samples: int | None,
                    marg: float = 0.0) -> FittedGaussian:
        n, d = data.X.shape
        X = data.X
        B = _norm(bmap)
        rows = None  # every private row (public rows are a separate input)
        source, cal = params["pca_source"], params["calibration"]
        gaussian = params["noise"] == "gaussian"
        gmm = data.task == "classification"
        model = dict(zip(("mean", "covariance"), params["epsilon_split"], strict=True))
        protected = gmm and params["label_privacy"] == "protected"
        if protected:
            h = params["histogram_fraction"]
            model = {"histogram": h, **{k: (1 - h) * v for k, v in model.items()}}
        public_basis = source in PUBLIC_BASES  # no budget for W
        if public_basis:
            fractions = model
        else:
            f = pca_fraction
            assert f is not None
            fractions = {"pca": f, **{k: (1 - f) * v for k, v in model.items()}}
        plan = None
        if marg > 0:  # the marginals' share first, the mechanism's parts scaled into the rest
            fractions = {"marginals": marg, **{k: (1 - marg) * v for k, v in fractions.items()}}
            plan = marginal_plan(data, 0.0)
        gauss = None
        if gaussian:
            delta = check_delta(params["delta"])
            n_classes = data.classes.size if gmm and data.classes is not None else 0
            gauss = ZCDPBudget.plan(params["epsilon"], delta, fractions,
                                    _gaussian_coordinates(d, p, not public_basis, gmm, protected,
                                                          n_classes, params["covariance_type"] == "tied")
                                    + (2 * plan.n_tables if plan is not None else 0),
                                    bits)
            split = gauss.split
        else:
            split = EpsilonSplit.from_fractions(params["epsilon"], fractions)
            delta = check_delta(params["delta"]) if source == "analyze-gauss" else 0.0
        marginals = None
        if plan is not None:
            marginals, marg_rec = measure_marginals(data, marg, split, gauss, bits)

        y = data.y
        noise: list[NoiseRecord] = []
        gaussian_draws: list[NoiseDraw] = []
        diag: dict[str, Any] = {"pca_source": source}
        moments = None
        if not public_basis:
            # one pass (one per class for Alg. 3) gives X^T X for the DP PCA and everything the
            # Gaussian model needs: the PCA-space moments are W^T (.) W / B^2 of the same sums
            moments = _Moments.collect(X, bmap, None, y, data, gmm)
        if source == "public":
            pub = public_rows(getattr(self, "public_data", None), data.bounds,
                              mechanism="pca-gauss with pca_source='public'", min_rows=1)
            W = top_eigvecs(box_gram(pub.X, bmap, clip=False), p)
            diag["public_data"] = pub.card()
        elif source == "dct":
            W = _dct_basis(data, p)
        elif source == "identity":
            W = np.eye(d)
        elif gaussian:
            # Analyze Gauss inside the zCDP budget: Y^T Y for the rows Y = Z/B, of L2 norm <= 1
            assert moments is not None and gauss is not None
            s1_lap = lap_pca_sensitivity(d, 1, bound=bmap.bound) / B**2
            noisy, rec = gauss.add(
                moments.gram / B**2, "pca", math.sqrt(2.0), d * (d + 1) // 2, laplace_s1=s1_lap,
                matrix=True, statistic="DP PCA (Analyze Gauss): Z^T Z/B^2 of rows of norm <= 1 (d x d)",
                formula="S2 = sqrt(2) (replace-one, upper triangle; second_moment_l2_sensitivity(1)), "
                        "i.i.d. on the upper triangle, mirrored", source=AG_SOURCE)
            W = top_eigvecs(noisy, p)
            noise.append(rec)
        elif source == "lap":
            s1 = lap_pca_sensitivity(d, n, calibration=cal, bound=bmap.bound)
            assert moments is not None
            noisy, draw = add_matrix_noise(moments.gram / n, s1, laplace_scale(s1, split["pca"]), bits,
                                           full_matrix=cal == "paper")
            W = top_eigvecs(noisy, p)
            noise.append(NoiseRecord(
                statistic="LapPCA: (1/n) Z^T Z (d x d)", sensitivity=s1, scale=draw.scale,
                **dpnoise.record_fields(draw),
                distribution="laplace", norm="L1", epsilon=split["pca"],
                formula=("S1 = d^2 a^2/n, every entry" if cal == "paper" else
                         "S1 = min(d(d+1)/2, row_second_moment_l1(row norm bound)) a^2/n, upper "
                         "triangle mirrored") + "; b = S1/eps_pca",
                source=f"{SOURCE}, section VII (LapPCA) / Prop. 3",
            ))
        else:
            # Y^T Y for the rows Y = Z/B, of L2 norm <= 1
            assert moments is not None
            yty = moments.gram / B**2
            # the sampler's slack is reserved from (eps_pca, delta)
            eps_i, delta_i = dpnoise.reserve_slack(split["pca"], delta, d * (d + 1) // 2)
            plan = dpnoise.calibrated_gaussian_plan(
                math.sqrt(2.0), lambda s: analytic_gaussian_sigma(s, eps_i, delta_i),
                n_changed=d * (d + 1) // 2, bits=bits)
            noisy, gdraw = dpnoise.symmetric(yty, plan)
            gaussian_draws.append(gdraw)
            W = top_eigvecs(noisy, p)
            noise.append(NoiseRecord(
                statistic="Analyze Gauss: Z^T Z/B^2 of rows scaled to norm <= 1 (d x d)",
                sensitivity=math.sqrt(2.0), scale=plan.scale, distribution="gaussian", norm="L2",
                **dpnoise.record_fields(plan),
                epsilon=split["pca"], delta=delta,
                formula="S2 = sqrt(2) (replace-one, Frobenius); sigma = analytic Gaussian(S2, "
                        "eps_pca, delta), i.i.d. on the upper triangle, mirrored",
                source=AG_SOURCE,
            ))
        if moments is None:  # public W: project the private rows (cheaper than their X^T X)
            stats = _PCAStats.collect(X, bmap, W / B, rows, y, data, gmm)
        else:
            stats = _PCAStats.from_moments(moments, W / B)
        offset = None
        if gmm:
            noisy_counts = None
            if protected:
                assert y is not None and data.classes is not None
                noisy_counts, hist_rec = dp_class_histogram(
                    None, data.classes.size, split["histogram"], bits, f"{SOURCE}, Alg. 3 (label privacy)",
                    gauss=gauss, counts=stats.sizes)
                noise.append(hist_rec)
            model, recs = alg3_model(data, stats, p, split, cal, bits, diag, noisy_counts, gauss, n_samples,
                                     shrink=params["covariance_repair"] == "shrink",
                                     tied=params["covariance_type"] == "tied")
            tied = params["covariance_type"] == "tied"
            algorithm = ("Alg. 3 (Gaussian mixture, one Gaussian per class)" if not tied
                         else "Alg. 3 with a tied covariance (one Gaussian per class, one pooled "
                              "within-class covariance)")
        else:
            model, recs, offset = alg2_model(data, stats, p, split, cal, bits, diag, gauss, W=W, bmap=bmap)
            algorithm = "Alg. 2 (supervised, augmented second moment)"
        noise += recs
        if marginals is not None:
            noise.append(marg_rec)

        gaussian_details: dict[str, Any] = {}
        if gauss is not None:
            eps_total, delta, gaussian_details = gauss.guarantee(self.delta is not None)
            slack = gaussian_details.pop("noise_slack")
        elif gaussian_draws:
            eps_total = math.fsum(split.parts)
            eps_total, delta, slack = dpnoise.reserved_guarantee(
                gaussian_draws, eps_total, delta, eps_total - split["pca"] + eps_i, delta_i)
        else:
            eps_total = math.fsum(split.parts)
            slack = {"extra_epsilon": 0.0, "extra_delta": 0.0}
        kind = "approx" if source == "analyze-gauss" or gaussian else "pure"
        assumptions = [
            "n is public (bounded DP, replace-one neighbours)",
            "features are mapped from their public bounds (numerics to [-1, 1], one-hot groups to "
            "[0, 1] with L1 norm <= 1) and rows divided by the public row-norm bound B; the model "
            "is centred on DP means (per class, or of [x^, y] for regression)",
        ]
        if source == "public":
            assumptions.append(
                "W was computed without noise from the public_data rows (identified by "
                "public_data_sha256), which the custodian asserts are PUBLIC; they get no protection"
            )
        if source == "dct":
            assumptions.append(f"W is the {p} lowest-frequency functions of the 2-D DCT basis of the public "
                               f"image shape {data.image_shape}: no data and no budget")
        if gmm:
            assumptions.append(label_privacy_assumption(params["label_privacy"]))
        else:
            assumptions.append(f"labels lie in the public label_bounds {data.label_bounds}, "
                               "mapped to [-1, 1]")
        details = {
            "algorithm": algorithm,
            "n_components": p,
            "noise": params["noise"],
            **({"covariance_type": params["covariance_type"]} if gmm else {}),
            "pca_source": source if not (gaussian and source == "lap") else
            "lap with noise='gaussian': Analyze Gauss inside the zCDP budget",
            "epsilon_parts": split.as_dict(),
            **gaussian_details,
            "nominal_epsilon": split.total,
            "guaranteed_epsilon": eps_total,
            "noise_slack": slack,
            "assumptions": assumptions,
            **diag.get("public_data", {}),
            **({"marginals": marginals.card()} if marginals is not None else {}),
            # noise the tight calibration saves: paper S1 / tight S1 (1.0 when calibration="paper")
            "paper_over_tight_sensitivity": {
                "second_moment": pca_second_moment_sensitivity(p, 1, calibration="paper",
                                                               supervised=not gmm)
                / pca_second_moment_sensitivity(p, 1, calibration=cal, supervised=not gmm),
                **({"mean": pca_mean_sensitivity(p, 1, calibration="paper")
                    / pca_mean_sensitivity(p, 1, calibration=cal)} if gmm else {}),
            },
        }
        transform_arrays = _transform_arrays(W, bmap)
        if not gmm and offset is not None:
            transform_arrays["offset"] = offset  # decoding only (dpcore.decode): not used by the transform
        label_columns = [data.label_name or "label"]
        rel = self._new_release(
            data, params, values=np.empty((0, p)), columns=[f"pc{j + 1}" for j in range(p)],
            guarantee=Guarantee(epsilon=eps_total, delta=delta, kind=kind,
                                neighbouring=WITHIN_CLASS if gmm and not protected else "replace-one"),
            noise=noise, calibration=cal, label_columns=label_columns, transform_arrays=transform_arrays,
            details=details, marginals=marginals,
        )
        data.diagnostics.update(diag)
        # Alg. 2: the label is the model's last coordinate, on [-a, a]
        return FittedGaussian(model, OutputMap(p, label_bounds=None if gmm else data.label_bounds,
                                               label_scale=A_BOUND), rel)
