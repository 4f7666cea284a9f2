"""pca-identity: rows times a PCA basis ``W`` from a public split of rows, plus Laplace noise;
pure epsilon-DP.

The PCA baseline of PCA-Gauss (section VIII-B4), after Jiang et al. (2013, PubPCA). Neighbouring
relation: replace-one over the private rows (the public split is not protected: it is the public
reference the basis comes from). Pre-processing, sensitivity and labels as derived in
:mod:`dpcore.mechanisms._identity`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpcore.mechanisms._box import (
    scale_to_box,
    top_eigvecs,
)
from dpcore.mechanisms._gaussian_model import (
    check_n_components,
)
from dpcore.mechanisms._identity import _LABEL_SPLIT, _IdentityLaplaceBase
from dpcore.mechanisms._projection import (
    check_one_row_per_input,
)
from dpcore.mechanisms._public import public_rows
from dpcore.noise import BitSource
from dpcore.preprocessing import PreparedInput
from dpcore.release import Release
from dpcore.schema import EPSILON, Param

__all__ = ['PCAIdentity']


JIANG_CITATION = ("X. Jiang, Z. Ji, S. Wang, N. Mohammed, S. Cheng & L. Ohno-Machado, "
                  "Differential-private data publishing through component analysis, Transactions on "
                  "Data Privacy 6(1), 2013 (PubPCA variant of PCA-Gauss section VIII-B4)")


class PCAIdentity(_IdentityLaplaceBase):
    """PCA from a public split of rows + Laplace noise on every projected entry (pure eps-DP).

    The baseline "Jiang et al. [52]: PCA on the identity query" in its PubPCA form (PCA-Gauss
    section VIII-B4: PCA derived from a small public data set, "for the best performance"; RON-Gauss
    section 5.2.4). ``public_data`` is a separate table of PUBLIC rows (never a part of the private
    input: :mod:`dpcore.mechanisms._public`): their mean ``c`` and top-``p`` principal directions
    ``W`` (``d x p``, orthonormal, of their covariance in the ``[-1, 1]``-scaled units) are computed
    without noise. Every private row is released as ``(x - c) W + Lap(S1/eps)``
    with ``S1 = max_{t in {-1,1}^p} sum_l w_l |(W t)_l|`` (exact, module docstring; at most
    ``sqrt(p) ||w||_2 = 2 sqrt(p d)`` because ``sigma_max(W) = 1``).

    Parameters
    ----------
    epsilon : float, default 1.0
        Total budget for the private rows (> 0; ``inf`` = NOT PRIVATE, explore only).
    n_components : int, optional
        ``p``, ``1 <= p < n_features``; default ``floor(2 ln d / ln ln d)``
        (:func:`~dpcore.mechanisms._gaussian_model.default_n_components`, as PCA-Gauss).
    epsilon_split : (float, float), default (0.5, 0.5)
        Supervised tasks: fractions for the features and the labels.
    public_data : array-like of shape (n_public, n_features) or Dataset
        Public rows with the private data's columns (clipped to the same public bounds), recorded
        on the card by their SHA-256. Required.
    bounds, label_bounds, classes, task, random_state
        See :class:`~dpcore.mechanisms.base.Mechanism`.

    Notes
    -----
    Released table: the ``n`` private rows, ``z1..zp``, plus their privately released
    labels. ``transform_arrays``: ``W``, ``center`` (``c``), ``bounds``;
    ``transform(x) = (scale_to_box(clip(x)) - c) @ W``.

    Guarantee: pure eps-DP for the private rows (replace-one). The public rows get NO protection:
    the custodian asserts they are public (the card says so). Deviation from Jiang et al.: their
    DPPCA derives ``W`` privately; the papers'
    comparison (and this baseline) uses the public-data variant.

    Raises
    ------
    ValueError
        ``n_components >= n_features``, missing or malformed ``public_data``, bad parameters.
    """

    name = "pca-identity"
    matrix_name = "W"
    title = "Public PCA + Laplace (Jiang et al. baseline)"
    summary = ("Baseline: PCA basis from a separate public table, then every private row's PCA "
               "coordinates released with Laplace noise (the identity query).")
    citation = JIANG_CITATION
    params = (
        EPSILON,
        Param("n_components", "int", None, "Number of principal components p (< number of "
              "features); empty = 2 ln d / ln ln d.", low=1, optional=True),
        _LABEL_SPLIT,
    )
    peak_square_matrices = 3  # covariance of the public split, eigenvectors, workspace
    extra_args = ("public_data",)

    def _release(
        self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator,
        n_samples: int | None, *, bits: BitSource,
    ) -> Release:
        n, d = data.X.shape
        p = check_n_components(params["n_components"], d)
        pub = public_rows(getattr(self, "public_data", None), data.bounds, mechanism="pca-identity")
        check_one_row_per_input(n_samples, n, "pca-identity")
        Xpub = scale_to_box(pub.X, data.bounds)
        center = Xpub.mean(axis=0)
        W = top_eigvecs((Xpub - center).T @ (Xpub - center), p)
        return self._identity_release(
            data, params, bits, M=W, center=center, rows=None,
            statistic="PCA coordinates Z = (scale(X) - c) W of the private rows",
            source=JIANG_CITATION,
            details={
                "projection": "top-p principal directions of the public rows (PubPCA)",
                **pub.card(),
                "assumptions": [
                    "the public_data rows (identified by public_data_sha256) are PUBLIC: W and c "
                    "are computed from them without noise and they get no protection",
                ],
            },
        )

