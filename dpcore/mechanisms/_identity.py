"""Shared release of the projected identity query with Laplace noise (identity-laplace, pca-identity).

Common pre-processing. Features are clipped to their public bounds and mapped affinely onto
``[-1, 1]`` (:func:`~dpcore.mechanisms._box.scale_to_box`; the papers' experiments scale the
data to ``[-1, 1]``, PCA-Gauss VIII-B). A public affine map costs no budget and does not change the
signal-to-noise ratio of an identity query (PCA-Gauss Theorem 2). Feature ``l`` then ranges over an
interval of width ``w_l = 2`` (``0`` for a constant column).

Sensitivity of a projected identity query (identity-laplace, pca-identity; ours, derived here).
The release is ``z_i = (x_i - c) M`` for every row, ``M`` a public ``d x k`` matrix drawn or derived
independently of the private rows, ``c`` a public centre. Replacing row ``i`` by ``x'_i`` changes
only ``z_i``, by ``v M`` with ``v = x_i - x'_i``; inside the box every ``v`` with ``|v_l| <= w_l``
is reachable. Writing ``||u||_1 = max_{t in {-1,1}^k} <u, t>``,

    S1 = sup_v ||v M||_1 = max_t sup_v <v, M t> = max_{t in {-1,1}^k} sum_l w_l |(M t)_l|,

attained at the box vertex ``v = w * sign(M t*)``, so it is exact (tight). It is computed by
enumerating the ``2^(k-1)`` sign vectors with ``t_1 = +1`` (``t`` and ``-t`` give the same value)
while that costs at most ``ENUMERATION_BUDGET`` multiply-adds; otherwise the smaller of two proven
upper bounds is used: ``sum_l w_l ||M_l||_1`` (triangle inequality, the naive per-entry bound;
``sqrt(k) sum_l w_l`` for entries ``+-1/sqrt(k)``) and
``sqrt(k) sigma_max(M) ||w||_2`` (``||u||_1 <= sqrt(k) ||u||_2``). See
:func:`~dpcore.mechanisms._box.box_l1_sensitivity`.
Adding i.i.d. ``Lap(S1/eps)`` to every released entry is pure eps-DP (Laplace mechanism, Dwork,
McSherry, Nissim & Smith 2006; SPEC section 1).

Labels. identity-laplace and pca-identity release the labels as their own column with
``epsilon_split``'s label part (k-ary randomized response over the public class list, or the
Laplace mechanism on the clipped regression label, :func:`~dpcore.mechanisms._labels.release_labels`);
a replaced row changes its features and its label, so the parts add up (basic composition).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, ClassVar

import numpy as np

from dpcore import noise as dpnoise
from dpcore.calibration import (
    LAPLACE_SOURCE,
    EpsilonSplit,
    laplace_scale,
)
from dpcore.mechanisms._box import (
    BOX,
    box_l1_sensitivity,
    box_projection,
    box_widths,
)
from dpcore.mechanisms._labels import (
    LABEL_SPLIT,
    combine_with_labels,
    release_labels,
)
from dpcore.mechanisms._projection import (
    projected_columns,
)
from dpcore.mechanisms.base import Mechanism
from dpcore.noise import BitSource
from dpcore.preprocessing import PreparedInput
from dpcore.release import Guarantee, NoiseRecord, Release
from dpcore.schema import Param

__all__ = []




def _label_note(data: PreparedInput) -> str | None:
    if data.task == "unsupervised":
        return None
    how = ("k-ary randomized response over the public class list" if data.task == "classification"
           else "Laplace noise scaled to the public label range")
    return (f"released as their own column by {how}, with the 'labels' part of epsilon_split; a "
            "replaced row changes its features and its label, so the two parts add up")


_N_COMPONENTS_JL = Param(
    "n_components", "int", None, "Projected dimension k (1 <= k < number of features; default "
    "min(10, d - 1)). The Laplace noise grows with k.", low=1, optional=True)


_LABEL_SPLIT = LABEL_SPLIT


class _IdentityLaplaceBase(Mechanism):
    """Shared release of projected rows with Laplace noise (the identity query) and private labels.

    Not registered (no ``name``); :class:`IdentityLaplace` and :class:`PCAIdentity` differ only in
    where the projection comes from.
    """

    neighbouring = "replace-one"
    guarantee_kind = "pure"
    space = "projected"
    baseline = True

    #: name of the public matrix in the saved arrays ("B" or "W")
    matrix_name: ClassVar[str] = "M"

    @classmethod
    def transform_from_arrays(cls, arrays: Mapping[str, np.ndarray], parameters: Mapping[str, Any]
                              ) -> Callable[[np.ndarray], np.ndarray]:
        """``(scale_to_box(clip(x)) - center) @ M`` (:func:`~dpcore.mechanisms._box.box_projection`)."""
        return partial(box_projection, bounds=np.array(arrays["bounds"], dtype=float),
                       center=np.array(arrays["center"], dtype=float),
                       M=np.array(arrays[cls.matrix_name], dtype=float))

    def _identity_release(
        self, data: PreparedInput, params: dict[str, Any], bits: BitSource, *,
        M: np.ndarray, center: np.ndarray, rows: np.ndarray | None,
        statistic: str, source: str, details: dict[str, Any],
    ) -> Release:
        """Release ``(scale(x_i) - center) M + Lap(S1/eps_features)`` for the private ``rows``
        (all rows when ``None``), then the labels of those rows."""
        priv = data if rows is None else dataclasses.replace(
            data, X=data.X[rows], y=None if data.y is None else data.y[rows])
        n, k = priv.n_samples, M.shape[1]
        eps = params["epsilon"]
        has_labels = data.task != "unsupervised"
        if has_labels:
            split = EpsilonSplit.from_fractions(
                eps, dict(zip(("features", "labels"), params["epsilon_split"], strict=True)))
            eps_f, eps_l = split["features"], split["labels"]
        else:
            eps_f, eps_l = eps, None
        widths = box_widths(data.bounds)
        s1, method = box_l1_sensitivity(M, widths)
        # one replaced row moves the k outputs of its row: n_changed = k
        projected = priv.engine.map_rows(partial(box_projection, bounds=data.bounds, center=center, M=M),
                                         priv.X, k)
        draw = priv.engine.add_noise(dpnoise.laplace_plan(s1, scale=laplace_scale(s1, eps_f), n_changed=k,
                                                          bits=bits), projected)
        Z, b = draw.values, draw.scale
        labels = release_labels(priv, math.inf if eps_l is None else eps_l, bits)
        noise = [NoiseRecord(
            statistic=f"{statistic} ({n} x {k})", sensitivity=s1, scale=b, distribution="laplace",
            norm="L1", epsilon=eps_f, delta=0.0, **dpnoise.record_fields(draw),
            formula=f"S1 = sup over the public box of ||(x - x') {self.matrix_name}||_1 = max_t sum_l w_l "
                    f"|({self.matrix_name} t)_l| ({method}); b = S1 / eps_features",
            source=f"{source}; {LAPLACE_SOURCE}; sensitivity derived in dpcore.mechanisms._identity",
        )]
        if labels.noise is not None:
            noise.append(labels.noise)
        total = combine_with_labels("row", eps_f, eps_l)
        details = {
            **details,
            "n_components": k,
            "scaling": BOX,
            "sensitivity_method": method,
            "noise_variance": 2.0 * b * b,
            "epsilon_features": eps_f,
            "epsilon_labels": eps_l,
            "labels": _label_note(data),
        }
        details.setdefault("assumptions", []).insert(
            0, "n is public (bounded DP, replace-one neighbours)")
        arrays = {self.matrix_name: M, "center": center, "bounds": data.bounds}
        return self._new_release(
            data, params, values=Z, columns=projected_columns(k),
            guarantee=Guarantee(epsilon=total, delta=0.0, neighbouring="replace-one", kind="pure"),
            noise=noise, calibration="exact" if method.startswith("exact") else "bound",
            labels=labels.labels, label_columns=labels.columns, details=details,
            transform_arrays=arrays,
        )

