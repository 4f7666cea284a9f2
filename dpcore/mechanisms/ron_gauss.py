"""RON-Gauss: random orthonormal projection + Gaussian generative model (pure epsilon-DP).

Chanyaswad, Liu & Mittal, "RON-Gauss: Enhancing Utility in Non-Interactive Private Data Release",
PoPETs 2019(1) (``papers/ron_gauss.txt``); SPEC section 2 (authoritative where it differs).

Pipeline (rows are records, ``X`` has shape ``(n, d)``):

1. Pre-processing, Alg. 1: ``x <- x/||x||``; ``mu_DP = mean(x) + Lap(2 sqrt(d)/(n eps_mu))`` per
   coordinate (Lemma 2: the L1 sensitivity of the mean of unit vectors is ``2 sqrt(d)/n``; the
   authors' public code uses half of it, which is *not* copied); ``x <- x - mu_DP``;
   ``x <- x/||x||``. A row of norm 0 (or equal to ``mu_DP``) has no direction: it is mapped to the
   zero vector (norm <= 1 still holds, so the sensitivities below are unchanged) and counted in
   ``diagnostics``.
2. RON projection, Alg. 2: ``x~ = W^T x`` with ``W`` (d, p), ``W^T W = I``, drawn independently of
   the data (no budget). ``projection="haar"`` (default) is uniform on the Stiefel manifold as the
   DFM theorem needs; ``"paper"`` is the QR of a Uniform(0, 1) matrix as in the paper's code.
3. Gaussian model. Alg. 3 (unsupervised): ``Sigma = X~^T X~/n`` + Laplace noise, sample
   ``N(0, Sigma_DP)``. Alg. 4 (regression): the same with the augmented ``[x~, y]``, ``y`` in
   ``[-a, a]``. Alg. 5 (classification): a Gaussian per class, ``N(W^T mu_c,DP, Sigma_c,DP)``, each
   class pre-processed with its own DP mean; one ``W`` for all classes; parallel composition.

Sensitivity of the (augmented) second moment (SPEC section 2 table; entrywise L1 norm, which the
Laplace mechanism needs). The paper's Lemma 4/5 values bound an induced matrix norm, not the
entrywise one, and are violated for every p >= 3:

=========================  ========================  ===========================
statistic                  published (Lemma 4/5)     sound, upper triangle (used)
=========================  ========================  ===========================
Sigma (Alg. 3, 5)          2 sqrt(p)/n               (p + 1)/n
augmented Sigma_a (Alg. 4) (2 sqrt(p)+4a sqrt(p)+a^2)/n   (p + 1 + 2a sqrt(p) + a^2)/n
mean (Lemma 2)             2 sqrt(d)/n               2 sqrt(d)/n
=========================  ========================  ===========================

``calibration="sound"`` (default) adds ``Lap(S1/eps_Sigma)`` to the upper triangle (diagonal
included) and mirrors it. ``calibration="published"`` reproduces the paper's mechanism: i.i.d.
``Lap(S1_published/eps_Sigma)`` on every entry (then symmetrised, post-processing); the epsilon
actually guaranteed for that part is ``eps_Sigma * S1_sound,full / S1_published`` (full-matrix
column of the SPEC table: ``2p/n`` resp. ``(2p + 4a sqrt(p) + a^2)/n``), and the release reports it
(``details`` keeps both the nominal and the guaranteed epsilon). Noisy matrices are PSD-repaired
(free post-processing) before sampling.

Neighbouring relation: replace-one (``n`` public; for Alg. 5 the class sizes ``n_c`` too).
Guarantee: pure epsilon-DP with ``epsilon = eps_mu + eps_Sigma`` (sound), by sequential
composition (Theorems 3-5) and, in Alg. 5, parallel composition over the disjoint classes.

Alg. 4 here also releases the DP mean of ``[x~, y]`` (half of the mean's budget share) and samples
``N(m_DP, Sigma_a,DP - m_DP m_DP^T)``: the paper samples with mean 0, which puts the released
labels at the centre of their public range whatever the real label mean (issue 13).

``noise="gaussian"`` ((epsilon, delta)-DP, issue 13): every statistic gets Gaussian noise sized by
its L2 sensitivity, which does not grow with p or d: mean of unit rows ``2/n`` (L1: ``2 sqrt(d)/n``),
second moment ``sqrt(2)/n`` (L1: ``(p + 1)/n``), augmented second moment
``sqrt((1 + a^2)^2 + 1 + a^4)/n``, augmented mean ``2 sqrt(1 + a^2)/n``, protected per-class sums
``2`` and ``sqrt(2)``, class histogram ``sqrt(2)`` (proofs in :func:`ron_covariance_l2_sensitivity`,
:func:`augmented_mean_sensitivity`, :func:`_dp_mean`). The statistics are composed in
zCDP (``rho_i = S2_i^2/(2 sigma_i^2)``, summed; Bun & Steinke 2016): ``epsilon_split`` (and
``histogram_fraction``) split the total ``rho``, the largest ``rho`` whose (epsilon, delta)
conversion (Canonne, Kamath & Steinke 2020, :func:`dpcore.accounting.zcdp_epsilon`) fits the
budget after the discrete Gaussian sampler's slack is reserved (:func:`dpcore.noise.reserve_slack`).

Computation (same outputs as the literal pipeline, without its full-size temporaries). The two
normalisations and the centring only rescale rows, so with ``x^ = x/||x||`` (``||x^|| = 1``, or 0
for a zero row) and ``r = ||x^ - mu_DP||``::

    W^T (x^ - mu_DP)/r = (W^T x^ - W^T mu_DP)/r,   r^2 = ||x^||^2 - 2 mu_DP.x^ + ||mu_DP||^2.

Two streaming passes over blocks of rows (each block is a few MiB, so its scaling and norms stay
in cache) therefore suffice: pass 1 computes the row norms and ``sum x^`` (the mean, one
matrix-vector product per block); pass 2 computes one product ``x [W, mu_DP]`` per block and
forms the projected rows from it. Rows with ``r^2 < 1e-3`` (where the expanded ``r^2`` would lose
digits) are recomputed directly from the row, and every projected row is finally scaled to norm
``<= 1`` if rounding left it a few ulps above, so the sensitivity bounds hold exactly. Peak extra
memory: one block (the statistics of pass 2 are summed block by block) plus, where the projected
rows themselves are wanted (the transform of real rows), the ``(n, p)`` projection; never a copy
of ``X``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from dpcore import noise as dpnoise
from dpcore.calibration import (
    EpsilonSplit,
    check_delta,
    delta_or_default,
    haar_stiefel,
    laplace_scale,
    psd_repair,
    recommended_mechanism,
    recommended_n_components,
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
    mixture_weights,
)
from dpcore.mechanisms._labels import (
    HISTOGRAM_FRACTION,
    LABEL_PRIVACY,
    WITHIN_CLASS,
    divide_by_count,
    dp_class_histogram,
    histogram_weights,
    label_privacy_assumption,
    proportional_counts,
)
from dpcore.mechanisms._ron_statistics import (  # re-exported: their home was this module
    ZERO_NORM,
    _class_moments,
    _class_unit_rows,
    _projected_moments,
    _projected_moments_kernel,
    _projection_pass,
    _ron_transform,
    _RowLoader,
    _unit_rows_kernel,
    _unit_rows_pass,
    augmented_mean_sensitivity,
    gaussian_coordinates,
    guaranteed_epsilon,
    mean_sensitivity,
    noisy_second_moment,
    normalize_rows,
    ron_covariance_l2_sensitivity,
    ron_covariance_sensitivity,
    scale_features,
)
from dpcore.noise import BitSource
from dpcore.preprocessing import BLOCK_BYTES, PreparedInput, row_blocks
from dpcore.release import Guarantee, NoiseRecord
from dpcore.schema import EPSILON, Param

__all__ = [
    "BLOCK_BYTES",
    "ZERO_NORM",
    "RONGauss",
    "augmented_mean_sensitivity",
    "gaussian_coordinates",
    "guaranteed_epsilon",
    "mean_sensitivity",
    "noisy_second_moment",
    "normalize_rows",
    "proportional_counts",
    "ron_covariance_l2_sensitivity",
    "ron_covariance_sensitivity",
    "row_blocks",
    "scale_features",
]

SOURCE = "Chanyaswad, Liu & Mittal, RON-Gauss, PoPETs 2019"

# ------------------------------------------------------------------------------------ mechanism
class RONGauss(GaussianGenerator):
    """RON-Gauss (Chanyaswad, Liu & Mittal, PoPETs 2019): pure epsilon-DP synthetic data.

    Parameters
    ----------
    epsilon : float, default 1.0
        Total privacy budget (> 0; ``inf`` = NOT PRIVATE, explore only: no noise).
    epsilon_split : (float, float), optional
        Empty (automatic): the paper's ``(0.3, 0.7)`` with labels; without labels the public rule of
        :func:`dpcore.unsupervised.recommended_unsupervised` (for the given ``p`` if set).
        Fractions of ``epsilon`` for the DP mean (``eps_mu``) and the second moment
        (``eps_Sigma``); paper section 5.2. Parts are rounded down so they never exceed the total.
    n_components : int, optional
        Projection dimension ``p`` (``1 <= p < n_features``). Empty (default): the public rule
        :func:`dpcore.calibration.recommended_n_components` with ``random_basis=True``, which trades
        the mass a random projection leaves out (``1 - p/d``) against the model noise, from n, d,
        the class count, epsilon and delta only (``details["recommended"]``; on Adult, d = 105:
        p = 8 / 39 with Laplace noise at epsilon = 1 / 10, 104 with Gaussian noise). The paper's
        choice is Meckes's DFM bound ``floor(2 ln d / ln ln d)``
        (:func:`~dpcore.mechanisms._gaussian_model.default_n_components`; give it as ``n_components``).
        Smaller ``p`` means less noise (Laplace sensitivity ``(p + 1)/n``) and a more Gaussian
        projection, but more information lost.
    reconstruct : bool, default False
        Release ``x~ W^T + mu_DP`` in the ``d``-dimensional pre-processed space (unit-normalised
        rows, not the original units) instead of the ``p``-dimensional projection. For
        classification the class means are inside ``x~``, so it is ``x~ W^T``.
    projection : {"haar", "paper"}, default "haar"
        How ``W`` is drawn (:func:`~dpcore.calibration.haar_stiefel`); data-independent.
    calibration : {"sound", "published"}, default "sound"
        Sensitivity of the second moment, see the module docstring. With ``"published"`` the
        release's guarantee is the epsilon actually achieved (larger than the nominal one for
        Sigma whenever p >= 2).
    label_bound : float, default 1.0
        ``a`` of Alg. 4: regression labels are mapped affinely from their public ``label_bounds``
        onto ``[-a, a]``; synthetic labels are mapped back to the label's units.
    model_mean : bool, optional
        Empty (automatic): on without labels when the public rule sets ``p`` or the split, else off.
        Unsupervised (Alg. 3) only: also release the DP mean ``m_DP`` of the projected rows (half of
        the mean's budget share, ``S1 = 2 sqrt(p)/n``, ``S2 = 2/n``) and sample
        ``N(m_DP, Sigma_DP - m_DP m_DP^T)`` (PSD-repaired), as Alg. 4 here does with ``[x~, y]``. The
        paper's ``N(0, Sigma_DP)`` assumes the centred rows have mean 0; with a noisy ``mu_DP`` they
        do not, and the real rows mapped by the transform then sit on one side of the release
        (:mod:`dpcore.unsupervised`, whose public rule turns this on).
    feature_scaling : {"bounds", "none"}, default "bounds"
        ``"bounds"`` maps each feature from its public bounds to ``[0, 1]`` before the row
        normalisation (data-independent, no budget; identical to ``"none"`` when every feature has
        the same range, e.g. images). ``"none"`` normalises raw rows as the paper does.
    noise : {"auto", "laplace", "gaussian"}, default "auto"
        ``"auto"``: ``"gaussian"`` when ``delta`` is given, else ``"laplace"``
        (:func:`dpcore.calibration.resolve_noise`; the card's ``details["noise_choice"]``).
        ``"laplace"``: the paper's pure epsilon-DP. ``"gaussian"``: (epsilon, delta)-DP, L2
        sensitivities composed in zCDP (module docstring); the card records each statistic's
        ``rho`` and how much noise variance it saves against the Laplace variant.
    delta : float, optional
        Given: Gaussian noise under ``noise="auto"``; empty with ``noise="gaussian"``:
        :func:`~dpcore.calibration.default_delta` of ``n``.
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`. The row normalisation bounds each record's
        contribution, so feature bounds only matter for ``feature_scaling="bounds"``; a regression
        label needs public ``label_bounds``.

    Released table
    --------------
    ``n_samples`` (default ``n``) rows: ``ron1..ronp`` (projection) or the feature names
    (reconstruction); labels for regression (synthetic, in label units) and classification
    (``n_samples * n_c / n`` rows per class, exactly ``n_c`` by default). ``transform_arrays``
    holds ``W`` and ``mean`` (``mu_DP``) or ``class_means`` (Alg. 5), plus the scaling box;
    :meth:`Release.transform` maps real rows into the same space (the paper's train-on-release,
    test-on-real protocol): clip, scale, normalise, centre with ``mu_DP``, normalise, project
    (Alg. 3/4). For Alg. 5 a test row's class is unknown, so the transform is clip, scale,
    normalise, project (no centring; the synthetic classes are centred at ``W^T mu_c,DP``).

    ``fit(X, y)`` / ``sample(n_samples)`` (:class:`~dpcore.mechanisms._gaussian_model.GaussianGenerator`):
    ``model_`` is ``N(0, Sigma_DP)`` (Alg. 3), ``N(m_DP, Sigma_a,DP - m_DP m_DP^T)`` of ``[x~, y]``
    (Alg. 4) or one ``N(W^T mu_c,DP, Sigma_c,DP)`` per class (Alg. 5) in the p-dimensional projection;
    ``output_map_`` reconstructs (``x~ W^T + mu_DP``) and maps labels back to their units.

    Note (Alg. 5, measured): each class's deviations are re-normalised to unit length before the
    second moment is taken, so the synthetic within-class spread is larger than that of real rows
    mapped by the transform (about 2.4x on ``digits``). This is the paper's algorithm as
    published; it costs accuracy at small ``p``.

    Raises
    ------
    ValueError
        ``n_components >= n_features``, bad epsilon/split/choice (named by the schema),
        ``noise="gaussian"`` with ``calibration="published"``.
    """

    name = "ron-gauss"
    peak_basis_copies = 2  # the Haar basis W (d x p) and the QR that draws it
    title = "RON-Gauss (random orthonormal projection + Gaussian model)"
    summary = ("Normalise rows, centre with a DP mean, project with a random orthonormal matrix, "
               "fit a Gaussian (or one per class) with Laplace noise, and sample from it.")
    citation = ("Chanyaswad, Liu & Mittal, RON-Gauss: Enhancing Utility in Non-Interactive "
                "Private Data Release, PoPETs 2019(1)")
    params = (
        EPSILON,
        Param("epsilon_split", "fraction_split", None, "Fractions of epsilon for the DP "
              "mean and the DP second moment; empty = automatic: the paper's 0.3 / 0.7 with labels, "
              "without labels the public rule of dpcore.unsupervised.recommended_unsupervised "
              "(n, d, epsilon, delta; for the given p if n_components is set).", privacy=True,
              split_names=("mean", "covariance"), optional=True),
        Param("n_components", "int", None, "Projection dimension p (< number of features); "
              "empty = automatic: the public rule of dpcore.calibration.recommended_n_components for a "
              "random basis (n, d, classes, epsilon, delta; without labels "
              "dpcore.unsupervised.recommended_unsupervised). The paper's choice, Meckes's bound "
              "2 ln d / ln ln d, is 6 for d = 105 and 7 for d = 784.", low=1, optional=True),
        Param("reconstruct", "bool", False, "Release x~ W^T + mu_DP in the d-dimensional "
              "pre-processed space instead of the p-dimensional projection."),
        Param("projection", "choice", "haar", "Random orthonormal W: Haar (QR of a Gaussian "
              "matrix, as the DFM theorem needs) or the paper's QR of a uniform matrix.",
              choices=("haar", "paper")),
        Param("calibration", "choice", "sound", "Sensitivity of the second moment: sound "
              "(upper-triangle, proven) or the paper's published constants (then the release "
              "reports the larger epsilon actually guaranteed).", choices=("sound", "published"),
              privacy=True),
        Param("label_bound", "float", 1.0, "a of Alg. 4: regression labels are mapped from "
              "their public bounds to [-a, a].", low=0.0, low_open=True),
        Param("feature_scaling", "choice", "bounds", "Scale features from their public bounds "
              "to [0, 1] before normalising rows ('none' = raw rows, as in the paper).",
              choices=("bounds", "none")),
        LABEL_PRIVACY,
        HISTOGRAM_FRACTION,
        NOISE,
        GAUSSIAN_DELTA,
        Param("model_mean", "bool", None, "Unsupervised (Alg. 3): also release the DP mean of the "
              "projected rows (half of the mean's budget share) and sample N(m_DP, Sigma_DP - m m^T) "
              "instead of the paper's N(0, Sigma_DP), which puts the real rows on one side of the "
              "release when the DP centring is off (dpcore.unsupervised). Empty = automatic: on when "
              "the unsupervised rule sets p or the split, off (the paper) when both are given. "
              "Regression always does.", privacy=True, optional=True),
    )
    neighbouring = "replace-one"
    guarantee_kind = "pure"
    space = "projected"
    capabilities = frozenset({"images"})

    # ------------------------------------------------------------------------------ release
    @classmethod
    def transform_from_arrays(cls, arrays: Mapping[str, np.ndarray], parameters: Mapping[str, Any]
                              ) -> Callable[[np.ndarray], np.ndarray]:
        """Clip, [scale], normalise, [centre with ``mean``, normalise], project with ``W``,
        [reconstruct]: :func:`_ron_transform` with the saved arrays (``W``, ``bounds``, optional
        ``mean``, ``scale_lo``, ``scale_width``) and the card's ``reconstruct``."""
        def arr(key: str) -> np.ndarray | None:
            return None if key not in arrays else np.array(arrays[key], dtype=float)

        return partial(_ron_transform, W=arr("W"), mean=arr("mean"), bounds=arr("bounds"),
                       lo=arr("scale_lo"), width=arr("scale_width"),
                       reconstruct=bool(parameters["reconstruct"]))

    def _fit(self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator, *,
             bits: BitSource, n_samples: int | None = None) -> FittedGaussian:
        """Alg. 1-5 up to the DP model (``fit``): ``W`` from ``rng``, every noise draw from ``bits``;
        the model is ``N(center, Sigma_DP)`` (Alg. 3/4) or one ``N(W^T mu_c,DP, Sigma_c,DP)`` per class
        (Alg. 5) in the p-dimensional projection, decoded by reconstruction (``reconstruct``) and the
        label map of Alg. 4."""
        n, d = data.X.shape
        given = params  # the card keeps the parameters as given (empty = automatic)
        params, unsupervised_rule = _automatic_defaults(params, data)
        p, rule = _n_components(params, data)
        rule = unsupervised_rule or rule
        fractions = dict(zip(("mean", "covariance"), params["epsilon_split"], strict=True))
        protected = data.task == "classification" and params["label_privacy"] == "protected"
        if protected:
            h = params["histogram_fraction"]
            fractions = {"histogram": h, **{k: (1 - h) * v for k, v in fractions.items()}}
        model_mean = data.task == "regression" or (data.task == "unsupervised" and params["model_mean"])
        if model_mean:  # half of the mean share for the DP mean of [x~, y] (or of x~, unsupervised)
            fractions = {"mean": fractions["mean"] / 2, "augmented_mean": fractions["mean"] / 2,
                         "covariance": fractions["covariance"]}
        split = EpsilonSplit.from_fractions(params["epsilon"], fractions)
        calibration = params["calibration"]
        gaussian = params["noise"] == "gaussian"
        gauss = delta = None
        if gaussian:
            if calibration == "published":
                raise ValueError("noise='gaussian' needs calibration='sound' (the published constants "
                                 "are L1 values for the Laplace mechanism)")
            delta = check_delta(_effective_delta(params, n))
            n_classes = 0 if data.classes is None else data.classes.size
            # the discrete Gaussian sampler's slack is reserved from (epsilon, delta) first
            gauss = ZCDPBudget.plan(params["epsilon"], delta, fractions,
                                    gaussian_coordinates(data.task, protected, d, p, n_classes,
                                                         model_mean=model_mean), bits)
        width = data.bounds[:, 1] - data.bounds[:, 0]
        lo, wd = (data.bounds[:, 0], np.where(width > 0, width, 1.0)) \
            if params["feature_scaling"] == "bounds" else (None, None)
        X = data.X  # already clipped; the public scaling is applied block by block
        W = haar_stiefel(d, p, rng, method=params["projection"])
        ctx = _Context(split=split, calibration=calibration, W=W, bits=bits, p=p, d=d,
                       scaling={"lo": lo, "width": wd}, noise=params["noise"], gauss=gauss)
        if data.task == "classification":
            out = self._gmm(ctx, X, data, protected, n_samples)
        else:
            out = self._single(ctx, X, data, params["label_bound"], model_mean)

        eps_guaranteed = guaranteed_epsilon(
            split, p, calibration,
            params["label_bound"] if data.task == "regression" else None,
        )
        relation = WITHIN_CLASS if data.task == "classification" and not protected else "replace-one"
        guarantee = Guarantee(epsilon=eps_guaranteed, delta=0.0, neighbouring=relation, kind="pure")
        gaussian_details: dict[str, Any] = {}
        if gaussian:
            assert gauss is not None
            eps_g, delta_g, gaussian_details = gauss.guarantee(params["delta"] is not None)
            guarantee = Guarantee(epsilon=eps_g, delta=delta_g, neighbouring=relation, kind="approx")
        assumptions = [
            "n (the number of records) is public (bounded DP, replace-one neighbours)",
            "W is drawn independently of the data and released; mu_DP is a DP statistic",
        ]
        if data.task == "classification":
            assumptions.append(label_privacy_assumption(params["label_privacy"]))
        if data.task == "regression":
            assumptions.append(
                f"labels lie in the public label_bounds {data.label_bounds}, mapped to "
                f"[-a, a] with a = {params['label_bound']}"
            )
        details = {
            "algorithm": out.algorithm,
            "n_components": p,
            "noise": params["noise"],
            "epsilon_parts": split.as_dict(),
            "nominal_epsilon": split.total,
            "guaranteed_epsilon": guarantee.epsilon,
            **gaussian_details,
            "projection": params["projection"],
            "feature_scaling": params["feature_scaling"],
            "output": "reconstructed d-dimensional pre-processed space" if params["reconstruct"]
            else "p-dimensional RON projection",
            "assumptions": assumptions,
        }
        if rule is not None:
            details["recommended"] = rule
        if calibration == "published":
            details["calibration_note"] = (
                "published (Lemma 4/5) sensitivities are not valid entrywise L1 bounds for p >= 3; "
                "the guarantee states the epsilon actually achieved by the noise that was added"
            )
        transform_arrays = {"W": W, "bounds": data.bounds}
        if out.center is not None:
            transform_arrays["mean"] = out.center
        if out.class_means is not None:
            transform_arrays["class_means"] = out.class_means
        if lo is not None:
            transform_arrays["scale_lo"], transform_arrays["scale_width"] = lo, wd
        if params["reconstruct"]:
            columns = list(data.feature_names)
        else:
            columns = [f"ron{j + 1}" for j in range(p)]
        regression = data.task == "regression"
        output_map = OutputMap(
            len(columns), label_bounds=data.label_bounds if regression else None,
            label_scale=params["label_bound"], basis=W if params["reconstruct"] else None,
            offset=out.center if params["reconstruct"] else None)
        label_columns = [data.label_name or "label"] if data.task != "unsupervised" else []
        template = self._new_release(
            data, given, values=np.empty((0, len(columns))), columns=columns, guarantee=guarantee,
            noise=out.noise, calibration=calibration, label_columns=label_columns,
            transform_arrays=transform_arrays, details=details,
        )
        data.diagnostics.update(out.diagnostics)
        return FittedGaussian(out.model, output_map, template)

    # ------------------------------------------------------------------------------ Alg. 3 / 4
    def _single(
        self, ctx: _Context, X: np.ndarray, data: PreparedInput, a: float, model_mean: bool = False
    ) -> _Output:
        """Alg. 3 / 4. Two passes over the rows: pass 1 (unit rows: the DP mean's statistic), pass 2
        (``Z^T Z`` and the column sums of ``Z`` = ``[x~, y]`` or ``x~``, :func:`_projected_moments`)."""
        n = X.shape[0]
        engine = data.engine
        # pass 1 (its per-row state kept for pass 2 when the engine holds the table in one block)
        kernel = partial(_unit_rows_kernel, scaling=ctx.scaling)
        (unit_sum, n_zero), state = engine.sums(kernel, X, keep=True)
        n_zero = int(n_zero)
        mu, mean_rec = _dp_mean(unit_sum, n, ctx, "mean")
        supervised = data.task == "regression"
        labels = label_map = None
        if supervised:
            assert data.y is not None and data.label_bounds is not None
            labels, label_map = data.y, (data.label_bounds, a)
        kernel = partial(_projected_moments_kernel, scaling=ctx.scaling, state=state, W=ctx.W, mu=mu,
                         label_map=label_map)
        gram, total, n_zero2 = engine.sums(kernel, X, labels)
        n_zero2 = int(n_zero2)
        diag: dict[str, Any] = {"n_zero_norm_rows": n_zero, "n_zero_after_centering": n_zero2}
        cov_rec, noisy, repaired = _noisy_cov(
            gram, n, ctx, "augmented second moment [x~, y]" if supervised else "second moment Sigma",
            label_bound=a if supervised else None,
        )
        records = [mean_rec, cov_rec]
        center = np.zeros(repaired.shape[0])
        model = repaired
        if supervised or model_mean:  # the DP mean of [x~, y] (labels keep their mean) or of x~
            center, aug_rec = _augmented_mean(total / n, n, ctx, a if supervised else 0.0)
            records.append(aug_rec)
            model = psd_repair(repaired - np.outer(center, center))  # covariance = M2 - m m^T
            diag["mean_dp_augmented"] = center
        diag.update({
            "mu_dp": mu, "sigma_dp": noisy, "sigma_dp_repaired": repaired,
            "n_negative_eigenvalues_clipped": int(np.sum(np.linalg.eigvalsh(noisy) < 0)),
            "n_rows_used": n,
        })
        return _Output(
            model=GaussianModel.single(center, model), center=mu, class_means=None,
            noise=records, diagnostics=diag,
            algorithm="Alg. 4 (supervised, augmented second moment and DP mean of [x~, y])"
            if supervised else "Alg. 3 (unsupervised)" + (", with the DP mean of x~" if model_mean else ""),
        )

    # ------------------------------------------------------------------------------ Alg. 5
    def _gmm(self, ctx: _Context, X: np.ndarray, data: PreparedInput, protected: bool,
             n_samples: int | None) -> _Output:
        """Alg. 5. ``protected``: DP class histogram, per-class noisy sums over noisy counts
        (replace-one with the label); else the paper's algorithm with public class sizes.

        Two passes over the rows for all classes together: pass 1 gives the class counts and each
        class's sum of unit rows (:func:`_class_unit_rows`), then the histogram and every class's DP
        mean are drawn; pass 2 gives each class's ``Z_c^T Z_c`` in its own centring
        (:func:`_class_moments`), then every class's second moment is drawn."""
        assert data.y is not None and data.classes is not None
        n_classes = data.classes.size
        first = _class_unit_rows(data.engine, X, data.y, n_classes, ctx.scaling)
        sizes = first.counts
        noise: list[NoiseRecord] = []
        if protected:
            noisy_counts, hist_rec = dp_class_histogram(
                None, n_classes, ctx.split["histogram"], ctx.bits, f"{SOURCE}, Alg. 5 (label privacy)",
                gauss=ctx.gauss, counts=sizes)
            noise.append(hist_rec)
            # classes and weights chosen from the DP histogram only
            modelled, weights = mixture_weights(histogram_weights(noisy_counts), n_samples)
        else:
            noisy_counts = None
            modelled, weights = mixture_weights(sizes)
        class_means = np.zeros((n_classes, ctx.d))
        diag: dict[str, Any] = {"class_sizes": sizes, "mu_dp": {}, "sigma_dp": {},
                                "sigma_dp_repaired": {},
                                "n_zero_norm_rows": int(first.n_zero[modelled].sum()),
                                "n_zero_after_centering": 0}
        if noisy_counts is not None:
            diag["class_counts_dp"] = noisy_counts
        counts = {int(c): None if noisy_counts is None else float(noisy_counts[c]) for c in modelled}
        tags = {int(c): f" of class {data.classes[c]!s}" if protected
                else f" of class {data.classes[c]!s} (n_c = {sizes[c]})" for c in modelled}
        mus, cov_records = {}, []
        for c in map(int, modelled):
            mus[c], mean_rec = _dp_mean(first.unit_sums[c], int(sizes[c]), ctx, "mean" + tags[c],
                                        count=counts[c])
            noise.append(mean_rec)
        grams, diag["n_zero_after_centering"] = _class_moments(data.engine, X, data.y, first, ctx.W, mus,
                                                               ctx.scaling)
        means, covariances = [], []
        for c in map(int, modelled):
            cov_rec, noisy, repaired = _noisy_cov(grams[c], int(sizes[c]), ctx,
                                                  "second moment Sigma" + tags[c], count=counts[c])
            means.append(mus[c] @ ctx.W)
            covariances.append(repaired)
            cov_records.append(cov_rec)
            class_means[c] = mus[c]
            key = data.classes[c].item() if hasattr(data.classes[c], "item") else data.classes[c]
            diag["mu_dp"][key], diag["sigma_dp"][key] = mus[c], noisy
            diag["sigma_dp_repaired"][key] = repaired
        return _Output(
            model=GaussianModel(weights, np.array(means), np.array(covariances), data.classes[modelled]),
            center=None, class_means=class_means, noise=noise + cov_records, diagnostics=diag,
            algorithm="Alg. 5 (Gaussian mixture, one Gaussian per class)"
            + (", DP class histogram (labels protected)" if protected else ", public class sizes"),
        )


@dataclass(frozen=True)
class _Context:
    """Per-release constants shared by the algorithm steps (not part of the public API)."""

    split: EpsilonSplit
    calibration: str
    W: np.ndarray
    bits: BitSource  # noise (dpcore.noise)
    p: int
    d: int
    scaling: dict[str, np.ndarray | None]  # lo, width of the public feature scaling (or None)
    noise: str = "laplace"  # "laplace" (split: epsilon parts) or "gaussian" (gauss: zCDP parts)
    gauss: ZCDPBudget | None = None


def _effective_delta(params: dict[str, Any], n: int) -> float | None:
    """The delta the Gaussian variant uses (given, or :func:`default_delta` of ``n``); None for Laplace."""
    if params["noise"] != "gaussian":
        return None
    return delta_or_default(params["delta"], n)


def _automatic_defaults(params: dict[str, Any], data: PreparedInput
                        ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Resolve the automatic (``None``) ``epsilon_split`` and ``model_mean`` from public facts only.

    With labels: the paper's split ``(0.3, 0.7)``; ``model_mean`` off (regression models its mean
    anyway). Without labels, when ``n_components`` or ``epsilon_split`` is empty: the public rule
    :func:`dpcore.unsupervised.recommended_unsupervised` (``n``, ``d``, epsilon, the delta used)
    sets what is empty, keeping what is given (``p`` fixed: the best mean fraction for it), and
    ``model_mean`` defaults to on (the rule's model); with both given, the paper's Alg. 3 (off).
    A given value always wins. Returns ``(params, the rule's record for the card or None)``."""
    split, model_mean = params["epsilon_split"], params["model_mean"]
    unsupervised = data.task == "unsupervised"
    if not unsupervised or (split is not None and params["n_components"] is not None):
        out = {**params, "epsilon_split": (0.3, 0.7) if split is None else split,
               "model_mean": bool(model_mean)}
        return out, None
    from dpcore.unsupervised import recommended_unsupervised

    n, d = data.X.shape
    given_p = params["n_components"]
    if given_p is not None:
        check_n_components(given_p, d)
    rec = recommended_unsupervised(n, d, epsilon=params["epsilon"], delta=_effective_delta(params, n),
                                   n_components=given_p, mean_fraction=None if split is None else split[0])
    chosen = {"n_components": rec["parameters"]["n_components"],
              "epsilon_split": rec["parameters"]["epsilon_split"] if split is None else tuple(split),
              "model_mean": True if model_mean is None else bool(model_mean)}
    automatic = [k for k, v in (("n_components", given_p), ("epsilon_split", split),
                                ("model_mean", model_mean)) if v is None]
    rec["chosen"] = {**chosen, "automatic": automatic,
                     "why": "no labels: the unsupervised public rule sets " + ", ".join(automatic)
                     + " (" + rec["reason"] + ")"}
    return {**params, **chosen}, rec


def _n_components(params: dict[str, Any], data: PreparedInput) -> tuple[int, dict[str, Any] | None]:
    """``p``: given, or (empty) the public rule :func:`dpcore.calibration.recommended_n_components`
    with ``random_basis=True`` (a Haar ``W`` keeps ``p/d`` of the mass; n, d, the class count,
    epsilon, delta and the second moments' budget share only). Returns ``(p, the rule's record for
    the card, with the recommended mechanism, or None when p was given)``."""
    n, d = data.X.shape
    if params["n_components"] is not None:
        return check_n_components(params["n_components"], d), None
    check_n_components(None, d)  # names a single-feature input
    gmm = data.task == "classification" and data.classes is not None
    n_classes = data.classes.size if gmm and data.classes is not None else 1
    protected = gmm and params["label_privacy"] == "protected"
    share = params["epsilon_split"][1] * ((1 - params["histogram_fraction"]) if protected else 1.0)
    delta = _effective_delta(params, n)
    rec = recommended_n_components(n, d, epsilon=params["epsilon"], delta=delta, n_classes=n_classes,
                                   model_share=share, random_basis=True)
    rec["mechanism"] = recommended_mechanism(data.task, n, d, epsilon=params["epsilon"], delta=delta,
                                             n_classes=n_classes if gmm else 0, image_shape=data.image_shape)
    return check_n_components(rec["n_components"], d), rec


def _gaussian_statistic(
    ctx: _Context, values: np.ndarray, part: str, s2: float, n_changed: int, *, laplace_s1: float,
    statistic: str, formula: str, source: str, matrix: bool = False,
) -> tuple[np.ndarray, NoiseRecord]:
    """:meth:`ZCDPBudget.add` of the release's zCDP budget (``noise="gaussian"``)."""
    assert ctx.gauss is not None
    return ctx.gauss.add(values, part, s2, n_changed, laplace_s1=laplace_s1, statistic=statistic,
                         formula=formula, source=source, matrix=matrix)


@dataclass
class _Output:
    model: GaussianModel
    center: np.ndarray | None
    class_means: np.ndarray | None
    noise: list[NoiseRecord]
    diagnostics: dict[str, Any]
    algorithm: str


def _dp_mean(unit_sum: np.ndarray, n: int, ctx: _Context, statistic: str, count: float | None = None
             ) -> tuple[np.ndarray, NoiseRecord]:
    """RON-Gauss Alg. 1's DP mean from ``unit_sum``, the sum of the unit-normalised rows (all
    rows, or one class) computed by :func:`_unit_rows_pass` or :func:`_class_unit_rows`.

    ``count=None``: the mean over the public ``n`` rows, ``S1 = 2 sqrt(d)/n`` (Lemma 2).
    ``count`` (a DP class count, labels protected): the noisy *sum* of the class's unit rows over
    the noisy count. The per-class sums, stacked over all classes, have L1 sensitivity
    ``2 sqrt(d)`` under replace-one with the label (the replaced record changes one class's sum
    by at most ``||x^ - x^'||_1 <= 2 sqrt(d)``, or two classes' sums by ``||x^||_1 <= sqrt(d)``
    each), so ``Lap(2 sqrt(d)/eps_mu)`` on every class's sum is ``eps_mu``-DP.
    ``noise="gaussian"``: L2 sensitivities ``||x^ - x^'||_2 <= 2`` over ``n`` (mean) and, for the
    stacked per-class sums, ``2`` (same class) or ``sqrt(1 + 1)`` (the record changes class), so 2.
    Returns ``(mu_DP (d,), noise record)``."""
    d = ctx.d
    eps_mu = ctx.split["mean"]
    s1 = mean_sensitivity(d, n if count is None else 1)
    if ctx.noise == "gaussian":
        noisy, rec = _gaussian_statistic(
            ctx, unit_sum / n if count is None else unit_sum, "mean", 2.0 / (n if count is None else 1),
            d if count is None else 2 * d, laplace_s1=s1,
            statistic=statistic if count is None else statistic.replace("mean", "sum of unit rows", 1),
            formula=("S2 = 2/n (mean of unit-norm rows, replace-one: ||x - x'||_2 <= 2)" if count is None
                     else "S2 = 2 (per-class sums of unit-norm rows, all classes jointly: <= 2 within a "
                     "class, sqrt(1 + 1) when the record changes class); mean = sum / DP count"),
            source=f"{SOURCE}, Alg. 1")
        return (noisy if count is None else divide_by_count(noisy, count)), rec
    # grid rounding: with protected labels a replaced record may change two classes' sums
    draw = dpnoise.laplace(unit_sum / n if count is None else unit_sum, s1, scale=laplace_scale(s1, eps_mu),
                           n_changed=d if count is None else 2 * d, bits=ctx.bits)
    mu = draw.values if count is None else divide_by_count(draw.values, count)
    rec = NoiseRecord(
        statistic=statistic if count is None else statistic.replace("mean", "sum of unit rows", 1),
        sensitivity=s1, scale=draw.scale, distribution="laplace", norm="L1", epsilon=eps_mu,
        formula=("S1 = 2 sqrt(d)/n (mean of unit-norm rows); b = S1/eps_mu" if count is None else
                 "S1 = 2 sqrt(d) (per-class sums of unit-norm rows, all classes jointly, the "
                 "replaced record may change class); b = S1/eps_mu; mean = sum / DP count"),
        source=f"{SOURCE}, Alg. 1 / Lemma 2", **dpnoise.record_fields(draw),
    )
    return mu, rec


def _augmented_mean(mean: np.ndarray, n: int, ctx: _Context, a: float) -> tuple[np.ndarray, NoiseRecord]:
    """DP mean of the augmented rows ``[x~, y]`` (``mean``, shape ``(p + 1,)``, the mean of the
    public ``n`` rows) with the budget part
    ``"augmented_mean"``: Laplace with ``S1 = (2 sqrt(p) + 2a)/n`` or Gaussian with
    ``S2 = 2 sqrt(1 + a^2)/n`` (:func:`augmented_mean_sensitivity`). ``a = 0`` with the mean of
    ``X~`` (``(p,)``, unsupervised ``model_mean``): ``S1 = 2 sqrt(p)/n``, ``S2 = 2/n`` (``||x~|| <= 1``)."""
    k = mean.size
    s1, s2 = augmented_mean_sensitivity(ctx.p, n, a)
    statistic = "mean of the augmented rows [x~, y]" if a > 0 else "mean of the projected rows x~"
    source = (f"{SOURCE}, Alg. 4 (extension: the model's mean, so the label mean is kept)" if a > 0 else
              f"{SOURCE}, Alg. 3 (extension, model_mean: the model's mean; a = 0 in the sensitivity)")
    if ctx.noise == "gaussian":
        noisy, rec = _gaussian_statistic(
            ctx, mean, "augmented_mean", s2, k, laplace_s1=s1, statistic=statistic,
            formula=("S2 = 2 sqrt(1 + a^2)/n (||x~|| <= 1, |y| <= a, replace-one)" if a > 0 else
                     "S2 = 2/n (||x~|| <= 1, replace-one)"), source=source)
        return noisy, rec
    eps = ctx.split["augmented_mean"]
    draw = dpnoise.laplace(mean, s1, scale=laplace_scale(s1, eps), n_changed=k, bits=ctx.bits)
    rec = NoiseRecord(
        statistic=statistic, sensitivity=s1, scale=draw.scale, distribution="laplace", norm="L1",
        epsilon=eps, formula=("S1 = (2 sqrt(p) + 2a)/n (||x~||_1 <= sqrt(p), |y| <= a, replace-one)" if a > 0
                              else "S1 = 2 sqrt(p)/n (||x~||_1 <= sqrt(p), replace-one)")
        + "; b = S1/eps_augmented_mean", source=source, **dpnoise.record_fields(draw),
    )
    return draw.values, rec


def _noisy_cov(
    gram: np.ndarray, n_rows: int, ctx: _Context, statistic: str, label_bound: float | None = None,
    count: float | None = None,
) -> tuple[NoiseRecord, np.ndarray, np.ndarray]:
    """DP second moment of the projected (possibly augmented) rows ``Z`` from ``gram = Z^T Z``
    (``n_rows`` rows) with its noise record.

    The noise scale is ``S1/eps_Sigma`` with ``S1`` from the chosen calibration; the record's
    ``epsilon`` is the one actually guaranteed, ``eps_Sigma * S1_sound/S1_used``. ``count`` (a
    DP class count, labels protected): noise on the per-class *sum* ``Z^T Z`` (sensitivity with
    ``n = 1``: a replaced record changes one class's sum by ``A = z z^T - z' z'^T`` or two
    classes' sums by ``z z^T`` and ``z' z'^T``, whose upper-triangle L1 norms are at most
    ``(p + 1)/2`` each, so the same ``p + 1`` bounds both cases), divided by the count.
    """
    n = n_rows if count is None else 1
    eps = ctx.split["covariance"]
    published = ctx.calibration == "published"
    if ctx.noise == "gaussian":
        k = gram.shape[1]
        noisy, rec = _gaussian_statistic(
            ctx, gram / n, "covariance", ron_covariance_l2_sensitivity(n, label_bound),
            (1 if count is None else 2) * k * (k + 1) // 2,
            laplace_s1=ron_covariance_sensitivity(ctx.p, n, "sound", label_bound), matrix=True,
            statistic=statistic,
            formula=("S2 = sqrt(2)/n" if label_bound is None else "S2 = sqrt((1 + a^2)^2 + 1 + a^4)/n")
            + (" (upper triangle, diagonal once, replace-one; ron_covariance_l2_sensitivity)"
               if count is None else " with n = 1: per-class sums Z^T Z (a record changing class "
               "changes two classes' sums by u u^T and v v^T), divided by the DP count"),
            source=f"{SOURCE}, Alg. {3 if label_bound is None else 4} (L2 sensitivity: "
                   "ron_covariance_l2_sensitivity)")
        if count is not None:
            noisy = divide_by_count(noisy, count)
        return rec, noisy, psd_repair(noisy)
    s1_used = ron_covariance_sensitivity(ctx.p, n, ctx.calibration, label_bound)
    s1_sound = ron_covariance_sensitivity(ctx.p, n, "sound", label_bound, full_matrix=published)
    eps_true = eps * s1_sound / s1_used
    b = laplace_scale(s1_used, eps)
    noisy, draw = add_matrix_noise(gram / n, s1_used, b, ctx.bits, full_matrix=published,
                                   n_statistics_changed=1 if count is None else 2)
    if count is not None:
        noisy = divide_by_count(noisy, count)
    repaired = psd_repair(noisy)
    if label_bound is None:
        formula = ("S1 = (p + 1)/n (upper triangle, sound)" if ctx.calibration == "sound"
                   else "S1 = 2 sqrt(p)/n (Lemma 4, published; not an entrywise L1 bound)")
        src = "Lemma 4 / Alg. 3, 5 (sound value: entrywise L1 of the upper triangle)"
    else:
        formula = ("S1 = (p + 1 + 2a sqrt(p) + a^2)/n (upper triangle, sound)"
                   if ctx.calibration == "sound"
                   else "S1 = (2 sqrt(p) + 4a sqrt(p) + a^2)/n (Lemma 5, published)")
        src = "Lemma 5 / Alg. 4 (sound value: entrywise L1 of the upper triangle)"
    if count is not None:
        formula = formula.replace("/n", "") + " of the per-class sum Z^T Z, divided by the DP count"
    rec = NoiseRecord(
        statistic=statistic, sensitivity=s1_used, scale=draw.scale, distribution="laplace", norm="L1",
        epsilon=eps_true, **dpnoise.record_fields(draw),
        formula=formula + ("; b = S1/eps_Sigma on the upper triangle (mirrored)" if not published
                           else "; b = S1/eps_Sigma i.i.d. on every entry (as the paper), then "
                           f"symmetrised; guaranteed epsilon = eps_Sigma * S1_sound,full/S1 = "
                           f"{eps_true:.4g}"),
        source=f"{SOURCE}, {src}",
    )
    return rec, noisy, repaired

# private names the tests reach (their home is dpcore.mechanisms._ron_statistics)
_PRIVATE = (_RowLoader, _projected_moments, _projection_pass, _unit_rows_pass)
