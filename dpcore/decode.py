"""Releases in the custodian's original schema and units: post-processing by public facts only.

A mechanism releases numbers in its own space: the encoded feature columns (one-hot groups as
0/1 floats), columns scaled from their public bounds to ``[0, 1]`` (DPMix) or ``[-1, 1]``
(PCA-Gauss, pca-identity), or a projection. :func:`to_original` maps a release back to the table the
custodian gave:

1. **back through the public scaling**: the released public arrays (bounds, ``lo``/``hi``, the
   released PCA basis ``W``) undo the affine scaling; a PCA release becomes its rank-``p``
   reconstruction ``x^ W^T`` (the released rows have no other component);
2. **one-hot groups decoded** to one column of categories: the category with the largest released
   indicator (argmax within the group; for DPMix mixtures the most frequent category among the mixed
   rows, plus noise). Only categories of the public list can come out; a missing value that a
   pre-encoded table stores as an all-zero group (the bundled *adult*'s ``?``) cannot come back as
   missing;
3. **clipped to the public bounds** (``clip=True``, the default for downloads): noise pushes values
   outside the box the custodian declared; clipping moves each value to the nearest bound;
4. **column names and types kept**: the original column names and order, the label where the
   table had it (``PublicSchema.label_position``; last when unknown); columns
   the schema declares integer are rounded to the nearest integer (within the bounds) and written as
   integers.

Every step reads the release and the :class:`PublicSchema` (feature names, public bounds, category
lists, integer columns, label bounds, class list), never the private rows: it is post-processing, so
the guarantee on the card is unchanged (Dwork & Roth 2014, Prop. 2.1). Mechanisms whose output cannot
return to the original space (a secret or random projection to fewer dimensions, RON-Gauss's row
normalisation) are refused by :func:`to_original` with the reason, which :func:`original_space_note`
also gives in plain words for the card and the app.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpcore.marginals import _quotas, faithful_decode, quota_assign, rr_class_rates
from dpcore.preprocessing import _index_of
from dpcore.release import Release

__all__ = [
    "DECODING_SOURCE",
    "INVERSES",
    "NOT_DECODABLE",
    "NotDecodableError",
    "OUTPUT_SPACES",
    "PublicSchema",
    "can_decode",
    "decode_features",
    "in_released_space",
    "one_hot_groups",
    "original_space_note",
    "to_original",
    "with_output_space",
]

#: ``output_space`` values: the custodian's table, or the mechanism's own numbers
OUTPUT_SPACES = ("original", "released")

DECODING_SOURCE = "post-processing of a DP release (Dwork & Roth 2014, Prop. 2.1): epsilon unchanged"


class NotDecodableError(ValueError):
    """The release cannot be mapped back to the original schema (the message says why)."""


@dataclass(frozen=True)
class PublicSchema:
    """The public description of the custodian's table that decoding may use.

    Attributes
    ----------
    feature_names : tuple of str
        The encoded feature columns the mechanisms saw (one-hot columns named ``column=value``).
    bounds : ndarray of shape (n_features, 2)
        Public ``[lo, hi]`` of every encoded feature column.
    categories : dict {column: tuple of str}
        One-hot groups: the original column and its public category values, in order; the encoded
        columns are ``f"{column}={value}"``.
    integer_columns : frozenset of str
        Original numeric columns declared integer (public schema, never read off the values).
    label_name : str or None
    task : str
    label_bounds : (lo, hi) or None
        Regression label.
    classes : ndarray or None
        Public class list of a classification label.
    label_position : int or None
        Where the label column was among the source table's columns
        (:attr:`dpcore.data.Dataset.label_position`); the decoded file puts it back there. None:
        last.
    """

    feature_names: tuple[str, ...]
    bounds: np.ndarray
    categories: dict[str, tuple[str, ...]]
    integer_columns: frozenset[str] = frozenset()
    label_name: str | None = None
    task: str = "unsupervised"
    label_bounds: tuple[float, float] | None = None
    classes: np.ndarray | None = None
    label_position: int | None = None

    @classmethod
    def from_dataset(cls, ds: Any, integer_columns: Iterable[str] = ()) -> PublicSchema:
        """The public schema of a :class:`~dpcore.data.Dataset`.

        One-hot groups come from the dataset's public category lists (``ds.categories``, given to
        :func:`~dpcore.data.load_dataset`); a table already one-hot encoded (the bundled *adult*)
        has its groups read from the public column names: two or more columns ``column=value``,
        each with public bounds ``[0, 1]``.

        Raises
        ------
        ValueError
            An integer column that is not an original numeric column of the table.
        """
        names = tuple(str(c) for c in ds.feature_names)
        bounds = np.asarray(ds.bounds, dtype=float)
        given = getattr(ds, "categories", None) or {}
        groups = {str(c): tuple(str(v) for v in vals) for c, vals in given.items()} if given \
            else one_hot_groups(names, bounds)
        schema = cls(feature_names=names, bounds=bounds, categories=groups,
                     label_name=ds.label_name, task=ds.task,
                     label_bounds=None if ds.label_bounds is None else tuple(ds.label_bounds),
                     classes=ds.classes, label_position=getattr(ds, "label_position", None))
        ints = frozenset(str(c) for c in integer_columns)
        numeric = set(schema.numeric_columns())
        unknown = sorted(ints - numeric)
        if unknown:
            raise ValueError(f"integer columns {unknown[:5]} are not numeric columns of the table "
                             f"(numeric columns: {sorted(numeric)[:8]}{' ...' if len(numeric) > 8 else ''})")
        return dataclasses.replace(schema, integer_columns=ints)

    def encoded(self, column: str) -> list[str]:
        """The encoded feature columns of original ``column`` (itself, or its one-hot group)."""
        if column in self.categories:
            return [f"{column}={v}" for v in self.categories[column]]
        return [column]

    def original_columns(self) -> list[str]:
        """Original feature columns in table order (a one-hot group where its first column is)."""
        member = {f"{c}={v}": c for c, vals in self.categories.items() for v in vals}
        # dict keys keep the first place of each column, in linear time (a membership test in the
        # list was quadratic: 115 s for 100,000 columns)
        return list(dict.fromkeys(member.get(name, name) for name in self.feature_names))

    def numeric_columns(self) -> list[str]:
        return [c for c in self.original_columns() if c not in self.categories]


def one_hot_groups(names: Iterable[str], bounds: np.ndarray | None = None) -> dict[str, tuple[str, ...]]:
    """One-hot groups read from public column names: two or more columns ``column=value`` (split at
    the first ``=``), each with bounds ``[0, 1]`` when ``bounds`` is given. ``{column: values}``."""
    names = list(names)
    groups: dict[str, list[str]] = {}
    for j, name in enumerate(names):
        if "=" not in name:
            continue
        if bounds is not None and not (bounds[j, 0] == 0 and bounds[j, 1] == 1):
            continue
        column, value = name.split("=", 1)
        groups.setdefault(column, []).append(value)
    return {c: tuple(v) for c, v in groups.items() if len(v) >= 2 and c not in names}


# ------------------------------------------------------------------------ inverse maps per space
def _features(rel: Release, schema: PublicSchema) -> np.ndarray:
    return np.asarray(rel.data, dtype=float)


def _unit(rel: Release, schema: PublicSchema) -> np.ndarray:
    """DPMix: ``x = lo + u (hi - lo)`` with the released ``lo``, ``hi``."""
    lo, hi = rel.transform_arrays["lo"], rel.transform_arrays["hi"]
    return lo + np.asarray(rel.data, dtype=float) * (hi - lo)


def _unbox(s: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Inverse of :func:`~dpcore.mechanisms.pca_gauss.scale_to_box` (``a = 1``): ``[-1, 1]`` to units."""
    lo, hi = bounds[:, 0], bounds[:, 1]
    return lo + (s + 1.0) / 2.0 * (hi - lo)


def _pca_gauss(rel: Release, schema: PublicSchema) -> np.ndarray:
    """PCA-Gauss: rows ``x^ = W^T z / B`` of the mapped rows ``z = (x - centre) * factor``
    (:class:`~dpcore.mechanisms._box.BoxMap`: numerics onto ``[-1, 1]``, one-hot columns onto
    ``[0, 1]``); rank-``p`` reconstruction ``z = B x^ W^T + offset``, ``x = centre + z / factor``
    (``offset``: the DP mean's part outside the span of ``W``, where the release has one; a
    constant column gives its lower bound). Releases saved before ``centre`` / ``factor`` were
    published are decoded with ``B = sqrt(d)`` and the box ``[-1, 1]``."""
    arrays = rel.transform_arrays
    if "W" not in arrays:
        raise NotDecodableError("this PCA-Gauss release does not publish its basis W (the basis is "
                                "private), so its rows cannot be mapped back to your columns")
    W = arrays["W"]
    data = np.asarray(rel.data, dtype=float)
    if "centre" not in arrays or "factor" not in arrays:
        return _unbox(math.sqrt(W.shape[0]) * (data @ W.T), arrays["bounds"])
    z = float(arrays["norm_bound"]) * (data @ W.T)
    if "offset" in arrays:
        z = z + arrays["offset"]
    factor, centre = np.asarray(arrays["factor"], dtype=float), np.asarray(arrays["centre"], dtype=float)
    active = factor > 0
    x = np.tile(np.asarray(arrays["bounds"], dtype=float)[:, 0], (data.shape[0], 1))
    x[:, active] = centre[active] + z[:, active] / factor[active]
    return x


def _pca_identity(rel: Release, schema: PublicSchema) -> np.ndarray:
    """pca-identity: rows ``z = (s(x) - c) W``; rank-k reconstruction ``s = z W^T + c``."""
    W, c = rel.transform_arrays["W"], rel.transform_arrays["center"]
    return _unbox(np.asarray(rel.data, dtype=float) @ W.T + c, rel.transform_arrays["bounds"])


#: mechanism -> (inverse map to the encoded feature units, what the rows are in words)
INVERSES: dict[str, tuple[Callable[[Release, PublicSchema], np.ndarray], str]] = {
    "local-gaussian": (_features, "each row is one record of your table with Gaussian noise added"),
    "modips": (_features, "synthetic rows drawn from a DP Gaussian model of your table"),
    "dpmix": (_unit, "each row is the average of ell randomly chosen records plus noise, mapped back "
                     "from [0, 1] to your units; a category column holds the category most frequent "
                     "among the mixed records (largest mixed indicator)"),
    "pca-gauss": (_pca_gauss, "synthetic rows of a DP model of the top principal components, mapped "
                              "back through the released basis W (a rank-p reconstruction: what the "
                              "p components do not capture is not in the file)"),
    "pca-identity": (_pca_identity, "noisy projections onto a basis from public data, mapped back "
                                    "through that basis (a rank-k reconstruction)"),
}

#: PCA-Gauss with ``pca_source="identity"`` (p = d): what its rows are
PCA_GAUSS_IDENTITY = ("synthetic rows of a DP Gaussian model of every feature (no projection: the "
                      "basis is the identity), mapped back to your units")

#: mechanisms whose output cannot return to the original space, and why (plain words)
NOT_DECODABLE = {
    "ron-gauss": "RON-Gauss normalises every row to length 1 before projecting, so the row lengths (a "
                 "record's overall size) are not in the release: its rows cannot be put back in your "
                 "units. The file is in the projected space (columns ron1..ronp) or, with reconstruct, "
                 "in the unit-length pre-processed space.",
    "jl-laplace": "JL-Laplace keeps its projection matrix secret, so the projected rows cannot be "
                  "mapped back to your columns.",
    "dppro": "DPPro projects onto k < d random directions: the rows cannot be mapped back to your d "
             "columns (the projection loses d - k dimensions).",
    "rp-gaussian": "a random projection onto k < d directions cannot be inverted: the rows stay in "
                   "the projected space.",
    "identity-laplace": "a random Bernoulli projection onto k < d directions cannot be inverted: the "
                        "rows stay in the projected space.",
}


def original_space_note(release: Release) -> str | None:
    """Why ``release`` cannot be returned to the original schema, or ``None`` if it can."""
    if release.mechanism in INVERSES:
        if release.mechanism == "pca-gauss" and "W" not in release.transform_arrays:
            return ("this PCA-Gauss release does not publish its basis W, so its rows cannot be "
                    "mapped back to your columns")
        return None
    return NOT_DECODABLE.get(release.mechanism, f"{release.mechanism} has no map back to the original "
                             "columns: the file stays in the mechanism's released space")


def can_decode(release: Release) -> bool:
    return original_space_note(release) is None


# ------------------------------------------------------------------------ decoding
def decode_features(X: np.ndarray, schema: PublicSchema, *, clip: bool = True) -> pd.DataFrame:
    """Encoded feature values ``(m, n_features)`` as the original columns.

    One-hot groups become one column of category values (argmax within the group); numeric columns
    are clipped to their public bounds (``clip``); integer columns rounded (then kept within the
    integers of their bounds when ``clip``) and typed ``int64``.

    Raises
    ------
    ValueError
        ``X`` does not have one column per encoded feature.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != len(schema.feature_names):
        raise ValueError(f"expected {len(schema.feature_names)} encoded feature columns, got shape {X.shape}")
    index = {n: j for j, n in enumerate(schema.feature_names)}
    columns = schema.original_columns()
    if not schema.categories and not schema.integer_columns:  # one block, clipped at once
        values = np.clip(X, schema.bounds[:, 0], schema.bounds[:, 1]) if clip else X
        return pd.DataFrame(values, columns=columns)
    out: dict[str, Any] = {}
    for col in columns:
        if col in schema.categories:
            js = [index[n] for n in schema.encoded(col)]
            values = np.asarray(schema.categories[col], dtype=object)
            out[col] = values[np.argmax(X[:, js], axis=1)]
            continue
        j = index[col]
        lo, hi = schema.bounds[j]
        v = X[:, j]
        if col in schema.integer_columns:
            v = np.rint(v)
            if clip:
                v = np.clip(v, math.ceil(lo), math.floor(hi)) if math.ceil(lo) <= math.floor(hi) \
                    else np.clip(v, lo, hi)
            out[col] = v.astype(np.int64) if np.all(np.abs(v) < 2**62) else v
        else:
            out[col] = np.clip(v, lo, hi) if clip else v
    return pd.DataFrame(out)


def _decoded_labels(release: Release, schema: PublicSchema, clip: bool,
                    labels: np.ndarray | None = None) -> dict[str, Any]:
    """The release's label column in the original schema (soft DPMix label columns dropped);
    ``labels``: the release's labels after :func:`_faithful` (default: ``release.labels``)."""
    if release.labels is None or not release.label_columns:
        return {}
    lab = np.asarray(release.labels if labels is None else labels)
    name = schema.label_name or release.label_columns[-1]
    col = lab if lab.ndim == 1 else lab[:, release.label_columns.index(name)
                                       if name in release.label_columns else -1]
    if schema.task == "classification" and schema.classes is not None:
        classes = np.asarray(schema.classes)
        if classes.dtype.kind in "biuf" and col.dtype.kind in "fO":
            col = np.asarray(col, dtype=float).astype(classes.dtype)
        return {name: col}
    if schema.task == "regression":
        y = np.asarray(col, dtype=float)
        if release.mechanism == "dpmix" and "label_lo" in release.transform_arrays:
            arrays = release.transform_arrays
            lo, hi = float(arrays["label_lo"][0]), float(arrays["label_hi"][0])
            y = lo + y * (hi - lo)
        if clip and schema.label_bounds is not None:
            y = np.clip(y, *schema.label_bounds)
        return {name: y}
    return {name: col}


def _faithful(release: Release, schema: PublicSchema, X: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray | None]:
    """``X`` (encoded units) and the release's labels mapped onto its DP marginals
    (:func:`dpcore.marginals.faithful_decode`); class labels go through their index in the public
    class list and come back as values."""
    marg = release.marginals
    assert marg is not None
    # the unique variance is drawn from a generator keyed by the released rows (public)
    rng = _decode_rng(release)
    labels = None if release.labels is None else np.asarray(release.labels)
    if labels is not None and labels.ndim != 1:
        labels = None
    if marg.plan.conditional:
        if labels is None or schema.classes is None:
            raise NotDecodableError("class-conditional marginals need the release's class labels and "
                                    "the public class list")
        X, _ = faithful_decode(X, _index_of(np.asarray(schema.classes), labels), marg, rng)
        return X, labels
    return faithful_decode(X, labels, marg, rng)


def _decode_rng(release: Release) -> np.random.Generator:
    """A generator keyed by the released rows (public), so a release always decodes to the same file."""
    digest = hashlib.sha256(np.ascontiguousarray(release.data, dtype=float).tobytes()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))


def corrected_labels(release: Release, schema: PublicSchema) -> tuple[np.ndarray | None, str | None]:
    """Class labels of a row-wise release whose rates follow the release's own DP estimate of the
    class rates, and a sentence saying so; ``(None, None)`` where there is nothing to correct.

    Row-wise mechanisms release each row's class with noise: k-ary randomized response (JL-Laplace,
    DPPro, rp-gaussian, identity-laplace, LocalGaussian with separate labels) reports another class
    with the public probability ``flip``, and DPMix's labels are noisy averages of ``ell`` one-hot
    labels. Taken at face value their class rates are pulled towards ``1/K`` (36-40% positives where
    3-6% are real) and a model trained on the file predicts the minority class far too often. Both
    carry an unbiased estimate of the class rates: the reported counts with the randomized response
    inverted (:func:`dpcore.marginals.rr_class_rates`), or the mean of DPMix's soft labels. Each row
    then gets a class by :func:`dpcore.marginals.quota_assign` so that the counts follow that
    estimate, keeping the released class (randomized response; ties broken by a generator keyed by
    the released rows) or the largest soft label where it can. Post-processing of DP outputs: the
    guarantee is unchanged.
    """
    if schema.task != "classification" or schema.classes is None or release.labels is None:
        return None, None
    classes = np.asarray(schema.classes)
    k = classes.size
    labels = np.asarray(release.labels)
    rr = next((r for r in release.noise if str(r.distribution) == "randomized-response"), None)
    rng = _decode_rng(release)
    if rr is not None and labels.ndim == 1:
        index = _index_of(classes, labels)
        if np.any(index < 0):
            return None, None
        rates = rr_class_rates(np.bincount(index, minlength=k), float(rr.scale))
        scores = np.eye(k)[index] + 1e-6 * rng.random((index.size, k))
        how = (f"randomized response reports another class for {float(rr.scale):.3g} of the rows; the "
               "class rates were estimated by inverting that public probability")
    elif labels.ndim == 2 and labels.shape[1] >= k and release.label_columns[:k] == [
            f"{schema.label_name or release.label_columns[0].split('=')[0]}={c}" for c in classes.tolist()]:
        scores = np.asarray(labels[:, :k], dtype=float)
        mean = np.clip(scores.mean(axis=0), 0.0, None)
        rates = mean / mean.sum() if mean.sum() > 0 else np.full(k, 1.0 / k)
        how = "the class rates are the mean of the mixtures' noisy one-hot labels (an unbiased estimate)"
    else:
        return None, None
    choice = quota_assign(scores, _quotas(scores.shape[0], rates))
    shown = ", ".join(f"{c}: {r:.3f}" for c, r in zip(classes.tolist()[:6], rates, strict=False))
    return classes[choice], (f"Labels assigned so that the class rates follow the release's own estimate "
                             f"({shown}{', ...' if k > 6 else ''}): {how}")


def to_original(release: Release, schema: PublicSchema, *, clip: bool = True,
                marginals: bool = True) -> Release:
    """``release`` with its table in the original schema and units (a copy; the card's epsilon,
    noise records and every other field unchanged).

    Parameters
    ----------
    release : Release
    schema : PublicSchema
        The public schema of the table the release was drawn from (:meth:`PublicSchema.from_dataset`).
    clip : bool, default True
        Clip every numeric value to its public bounds (the regression label to its label bounds).
    marginals : bool, default True
        Map the rows onto the release's DP marginals when it has some (:mod:`dpcore.marginals`:
        numeric columns by quantile mapping, categories by counts following the DP counts); False
        decodes the model's rows as they are (argmax within each one-hot group).

    Returns
    -------
    Release
        ``to_frame()`` / the CSV hold the original columns (one column per one-hot group, category
        values from the public list, integer columns as ``int64``), the label where the table had
        it (last when the schema does not say);
        ``output_space == "original"`` and ``output_note`` says what the rows are.

    Raises
    ------
    NotDecodableError
        The mechanism's output cannot return to the original space (:func:`original_space_note`),
        or the release's columns are not those of ``schema``.
    """
    note = original_space_note(release)
    if note is not None:
        raise NotDecodableError(note)
    inverse, what = INVERSES[release.mechanism]
    if release.mechanism == "pca-gauss" and release.details.get("pca_source") == "identity":
        what = PCA_GAUSS_IDENTITY  # no projection: nothing is lost to a rank-p reconstruction
    X = inverse(release, schema)
    if X.shape[1] != len(schema.feature_names) or (
            inverse is _features and list(release.columns) != list(schema.feature_names)):
        raise NotDecodableError("the release's columns are not those of the schema given: decode it "
                                "with the schema of the table it was drawn from")
    faithful = marginals and release.marginals is not None
    labels, relabelled = corrected_labels(release, schema)
    if faithful:
        X, labels = _faithful(release, schema, X)
    frame = decode_features(X, schema, clip=clip)
    for name, col in _decoded_labels(release, schema, clip, labels).items():
        if schema.label_position is not None and name not in frame.columns:  # where the file had it
            frame.insert(min(schema.label_position, frame.shape[1]), name, col)
        else:
            frame[name] = col
    steps = [what]
    if faithful:
        steps.append("each column then mapped onto its DP marginal"
                     + (" within each class" if release.marginals.plan.conditional else "")
                     + " (measured with a share of the budget, on the card): numeric columns by their "
                       "ranks (quantile mapping; values at a bound come out as the bound), categories "
                       "assigned so their counts follow the DP counts, each row taking the category the "
                       "model scores highest")
    if schema.categories and not faithful:
        steps.append(f"one-hot groups decoded to one column each ({', '.join(list(schema.categories)[:6])}"
                     f"{', ...' if len(schema.categories) > 6 else ''}): the category with the largest "
                     "released value, always one of the public categories")
    if relabelled:
        steps.append(relabelled[0].lower() + relabelled[1:])
    steps.append("every value clipped to its public bounds" if clip
                 else "values NOT clipped: noise can put them outside the public bounds")
    if schema.integer_columns:
        shown = ", ".join(sorted(schema.integer_columns)[:8])
        steps.append(f"integer columns rounded to whole numbers: {shown}")
    note = ("Original schema and units (post-processing: the guarantee is unchanged). "
            + ". ".join(s[0].upper() + s[1:] for s in steps) + ".")
    return dataclasses.replace(release, table=frame, output_space="original", output_note=note,
                               details={**release.details, "output": {
                                   "space": "original", "clipped": bool(clip),
                                   "integer_columns": sorted(schema.integer_columns),
                                   "marginals": bool(faithful),
                                   "categories": {c: list(v) for c, v in schema.categories.items()},
                                   "source": DECODING_SOURCE}})


def released_space_note(release: Release, *, original: str = "available (output space 'original')"
                        ) -> str:
    """The card's ``output_note`` of ``release`` in the mechanism's own space: what its columns
    hold, and why it cannot return to the original space, or that it can (``original`` says how)."""
    if release.space == "features":
        note = ("Released space: the encoded columns of your table (one-hot groups as 0/1 columns) "
                "with noise, not clipped to the bounds.")
    elif release.space == "mixtures":
        note = ("Released space: every feature scaled from its public bounds to [0, 1] "
                "(0 = lower bound, 1 = upper bound); each row is a noisy mixture of ell records.")
    else:
        note = ("Released space: projected coordinates (each column combines all of your columns), "
                "not in your table's units.")
    why = original_space_note(release)
    return f"{note} {why or f'The same release in your original columns and units is {original}.'}"


def in_released_space(release: Release, schema: PublicSchema | None = None) -> Release:
    """``release`` as the mechanism produced it, with an ``output_note`` saying which space it is in.

    DPMix keeps the original column names for values scaled to ``[0, 1]``: here they are renamed
    ``column [0-1 scaled]`` so the file says what its numbers are. With the table's ``schema``, a
    class label released by randomized response gets class rates that follow the release's own
    estimate (:func:`corrected_labels`; post-processing).
    """
    note = released_space_note(release)
    table = None
    if release.space == "mixtures":
        frame = release.to_frame()
        frame.columns = [f"{c} [0-1 scaled]" if i < len(release.columns) else c
                         for i, c in enumerate(frame.columns)]
        table = frame
    labels, relabelled = (None, None) if schema is None or release.space == "mixtures" else \
        corrected_labels(release, schema)
    details = release.details
    if labels is not None and relabelled:
        table = release.to_frame()
        table[release.label_columns[-1]] = labels
        note = f"{note} {relabelled}."
        details = {**details, "output": {"space": "released", "labels": relabelled,
                                         "source": DECODING_SOURCE}}
    return dataclasses.replace(release, table=table, output_space="released", output_note=note,
                               details=details)


def with_output_space(release: Release, schema: PublicSchema | None, output_space: str | None,
                      *, clip: bool = True) -> Release:
    """``release`` in ``output_space``: ``"original"`` (:func:`to_original`), ``"released"``
    (:func:`in_released_space`) or ``None`` = original where possible, else released.

    Raises
    ------
    ValueError
        Unknown ``output_space``; :class:`NotDecodableError` for ``"original"`` when impossible.
    """
    if output_space not in (None, *OUTPUT_SPACES):
        raise ValueError(f"output space must be one of {OUTPUT_SPACES}, got {output_space!r}")
    if output_space == "original" or (output_space is None and schema is not None and can_decode(release)):
        if schema is None:
            raise ValueError("the original output space needs the table's public schema")
        return to_original(release, schema, clip=clip)
    return in_released_space(release, schema)
