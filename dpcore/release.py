"""The :class:`Release` object and its machine-readable release card.

A release is what leaves the custodian: the sanitised table, its card (``OUT.card.json``) and,
for releases living in a projected space, the public transform (``OUT.transform.npz``). The card
keys are an interface (SPEC section 9). A release never contains the RNG seed, the RNG state or
the noise itself (SPEC section 8).

The privacy boundary is a type. :class:`Release` is frozen and holds only what may be published;
exploration facts computed from the private rows (clipping counts, the noisy statistics before
sampling, ...) never live on it: :meth:`dpcore.mechanisms.Mechanism.explore` returns them beside
the release as an :class:`Exploration`, which has no way to be saved.

Column names and class labels are user strings: every CSV a user downloads is written by
:func:`spreadsheet_safe_csv`, which neutralises spreadsheet formulas.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np
import pandas as pd

from dpcore import __version__
from dpcore.exceptions import NotPrivateError
from dpcore.spreadsheet import (  # re-exported: their home was this module
    _CSV_BLOCK_ROWS,
    CSV_ESCAPE_RULE,
    CSV_FLOAT_FORMAT,
    FORMULA_TRIGGERS,
    _escaped,
    _text_positions,
    csv_chunks,
    csv_text,
    escape_formula,
    spreadsheet_safe,
    spreadsheet_safe_csv,
    spreadsheet_safe_csv_chunks,
)
from dpcore.staging import (  # re-exported: their home was this module
    OUTPUT_LOCK_SUFFIX,
    OutputBusyError,
    StagedFiles,
    _stage_all,
    _write_temp,
    output_lock,
    output_lock_path,
    release_paths,
)
from dpcore.table import engine_of

if TYPE_CHECKING:
    from dpcore.marginals import DPMarginals

__all__ = [
    "CSV_ESCAPE_RULE",
    "CSV_FLOAT_FORMAT",
    "Exploration",
    "FORMULA_TRIGGERS",
    "Guarantee",
    "GuaranteeKind",
    "KIND_TEXT",
    "NEIGHBOURING_TEXT",
    "NOT_DP_TEXT",
    "Neighbouring",
    "NoiseRecord",
    "OUTPUT_LOCK_SUFFIX",
    "OutputBusyError",
    "Release",
    "StagedFiles",
    "escape_formula",
    "output_lock",
    "output_lock_path",
    "release_paths",
    "spreadsheet_safe",
    "spreadsheet_safe_csv",
    "spreadsheet_safe_csv_chunks",
    "csv_chunks",
    "csv_text",
]

Neighbouring = Literal["replace-one", "replace-one-within-class", "element", "row-l2"]
GuaranteeKind = Literal["pure", "approx", "probabilistic"]

NEIGHBOURING_TEXT = {
    "replace-one": "two datasets are neighbours if they have the same number of rows n (public) and "
    "differ in one row, replaced by any row of the public domain (bounded DP)",
    "replace-one-within-class": "two datasets are neighbours if they have the same number of rows "
    "n and the same class sizes (public), and differ in one row, replaced by another row of the "
    "SAME class: the class sizes and each record's label are NOT protected",
    "element": "two datasets are neighbours if one entry differs, by at most the public element "
    "bound Delta",
    "row-l2": "two datasets are neighbours if one row differs by at most alpha in squared L2 norm",
}
KIND_TEXT = {
    "pure": "pure epsilon-DP",
    "approx": "(epsilon, delta)-DP",
    "probabilistic": "DP for all but a fraction beta of the random projection draws",
}

#: The first warning of a card whose guarantee does not hold (``holds: false``).
NOT_DP_TEXT = ("NOT differentially private: a fact that shapes this release (bounds, class list or the "
               "number of rows) was taken from the private data, so the epsilon stated here describes "
               "the noise calibration only; a ledger books this release as unbounded (epsilon = inf)")

#: First characters that make Excel, LibreOffice Calc or Google Sheets read a CSV cell as a formula
#: (OWASP "CSV injection"; line feed added as newer OWASP guidance does).
@dataclass(frozen=True)
class NoiseRecord:
    """One noisy statistic: what was perturbed, its sensitivity and the noise scale.

    ``scale`` is the Laplace ``b`` or the Gaussian standard deviation ``sigma`` actually drawn (discrete
    Laplace / discrete Gaussian on the public ``grid``, :mod:`dpcore.noise`); ``norm`` is the
    norm the sensitivity is measured in ("L1" for Laplace, "L2" for Gaussian); ``formula`` and
    ``source`` say where the numbers come from (paper, equation).
    """

    statistic: str
    sensitivity: float
    scale: float
    distribution: Literal["laplace", "gaussian", "randomized-response", "exponential-mechanism", "none"]
    norm: str = "L1"
    epsilon: float | None = None
    delta: float | None = None
    formula: str = ""
    source: str = ""
    #: floating-point-safe noise (dpcore.noise): the public power-of-two grid the value was rounded
    #: to, the sampler and bit source, and the sensitivity including the rounding
    grid: float | None = None
    sampler: str = ""
    sensitivity_used: float | None = None
    #: zCDP parameter of this statistic's Gaussian noise, ``S2'^2/(2 sigma^2)`` (Bun & Steinke 2016),
    #: when the release composes its Gaussian statistics in zCDP; None otherwise
    rho: float | None = None

    def as_card(self) -> dict[str, Any]:
        return {k: _jsonable(v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Guarantee:
    """The guarantee actually provided (not necessarily the nominal epsilon asked for).

    Attributes
    ----------
    epsilon, delta : float
        ``delta = 0`` for pure DP; ``epsilon = inf`` means NOT PRIVATE.
    neighbouring : {"replace-one", "element", "row-l2"}
    kind : {"pure", "approx", "probabilistic"}
    beta : float or None
        Failure probability over the projection draw for ``probabilistic`` guarantees.
    holds : bool
        False when a public fact (bounds, label bounds, class list) was taken from the data: the
        numbers above then describe the calibration only, not a guarantee.
    """

    epsilon: float
    delta: float
    neighbouring: Neighbouring
    kind: GuaranteeKind
    beta: float | None = None
    holds: bool = True

    @property
    def is_private(self) -> bool:
        return math.isfinite(self.epsilon)

    def plain_language(self) -> str:
        """A sentence a data custodian can read."""
        if not self.is_private:
            return "NOT PRIVATE: epsilon is infinite, the data are released without protection."
        odds = math.exp(min(self.epsilon, 700))
        text = (
            f"{KIND_TEXT[self.kind]} with epsilon = {self.epsilon:.4g}"
            + (f", delta = {self.delta:.3g}" if self.delta else "")
            + (f", except with probability beta = {self.beta:.3g}" if self.beta else "")
            + f". Neighbouring relation: {NEIGHBOURING_TEXT[self.neighbouring]}. "
            f"Whatever an attacker knew beforehand, seeing this release changes the odds of any "
            f"conclusion about one individual by a factor of at most e^epsilon = {odds:.3g}"
            + (" (up to probability delta)." if self.delta else ".")
        )
        if not self.holds:
            text += (" WARNING: a public fact (bounds, class list or the number of rows) was taken "
                     "from the private data, so this guarantee does NOT hold: the release is NOT "
                     "differentially private.")
        return text

    def as_card(self) -> dict[str, Any]:
        return {
            "epsilon": _jsonable(self.epsilon),
            "delta": self.delta,
            "neighbouring": self.neighbouring,
            "kind": self.kind,
            "beta": self.beta,
            "holds": self.holds,
        }


@dataclass(frozen=True)
class Release:
    """A sanitised dataset and everything needed to describe it.

    Attributes
    ----------
    data : ndarray of shape (n_released, n_columns)
        The released values (synthetic rows, noisy projections, noisy mixtures...).
    columns : list[str]
        Column names of ``data``.
    labels : ndarray of shape (n_released,) or (n_released, n_label_columns), optional
        Released labels (themselves private outputs of the mechanism).
    label_columns : list[str]
    mechanism : str
        Registry name (``ron-gauss``...).
    parameters : dict
        Parameters as given (nominal epsilon included); never ``random_state``.
    guarantee : Guarantee
        What is actually guaranteed.
    noise : list[NoiseRecord]
    calibration : str
    bounds_source : {"metadata", "user", "data"}
    n_rows : int
        Number of private input rows.
    space : str
        "features" (same columns as the input), "projected" or "mixtures".
    seeded : bool
        Drawn with a fixed ``random_state``: an exploration preview, refused by :meth:`save`.
    transform_arrays : dict[str, ndarray]
        Public arrays (e.g. ``W``, ``mean``) saved to ``OUT.transform.npz``.
    transform_fn : callable, optional
        Maps real rows ``(m, n_features)`` into the release's space (not serialised).
    details : dict
        Extra JSON-able facts for the card (e.g. the nominal epsilon of a published calibration,
        assumptions such as public class sizes).
    public_facts : dict
        What the guarantee assumes public: n, the task, every feature bound with the source of
        each side, the class list and its source (card key ``public_facts``).
    table : DataFrame, optional
        The file's table when it differs from ``data`` + ``labels``: a post-processed view such as
        the original schema and units (:func:`dpcore.decode.to_original`). :meth:`to_frame`, the CSV
        and the card's ``columns`` follow it; ``data`` stays the mechanism's output.
    output_space : {"released", "original"}
        Which space the file is in (card key ``output_space``); ``output_note`` says it in words.
    marginals : DPMarginals, optional
        DP one-way marginals measured with a share of this release's budget (their noise is in
        ``noise``, their counts on the card's ``details["marginals"]``), onto which
        :func:`dpcore.decode.to_original` maps the file (:mod:`dpcore.marginals`).
    row_level : Guarantee, optional
        For a release whose ``guarantee`` is under another relation (the papers' ``element`` or
        ``row-l2`` modes): the row-level equivalent for the drawn randomness, i.e. the guarantee
        under ``replace-one`` with the label included (card key ``row_level``, see
        :meth:`row_guarantee`).
    """

    data: np.ndarray
    columns: list[str]
    mechanism: str
    parameters: dict[str, Any]
    guarantee: Guarantee
    noise: list[NoiseRecord]
    calibration: str
    bounds_source: str
    n_rows: int
    labels: np.ndarray | None = None
    label_columns: list[str] = field(default_factory=list)
    space: str = "features"
    seeded: bool = False
    transform_arrays: dict[str, np.ndarray] = field(default_factory=dict)
    transform_fn: Callable[[np.ndarray], np.ndarray] | None = field(default=None, repr=False)
    details: dict[str, Any] = field(default_factory=dict)
    public_facts: dict[str, Any] = field(default_factory=dict)
    row_level: Guarantee | None = None
    created_utc: str = field(
        default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds")
    )
    table: pd.DataFrame | None = field(default=None, repr=False)
    output_space: str = "released"
    output_note: str = ""
    marginals: DPMarginals | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ privacy status
    @property
    def is_private(self) -> bool:
        """True unless epsilon is infinite or some noise scale is zero (NOT PRIVATE)."""
        return self.guarantee.is_private and all(
            rec.scale > 0 for rec in self.noise if rec.distribution != "none"
        )

    @property
    def differentially_private(self) -> bool:
        """Private (:attr:`is_private`) and its guarantee holds (card key ``differentially_private``):
        False for a release built on a public fact taken from the private data."""
        return self.is_private and self.guarantee.holds

    @property
    def downloadable(self) -> bool:
        """Private and drawn from OS entropy (not a seeded preview)."""
        return self.is_private and not self.seeded

    def check_downloadable(self) -> None:
        """Raise :class:`NotPrivateError` if this release must not leave the custodian."""
        if not self.is_private:
            raise NotPrivateError(
                "this release is NOT PRIVATE (epsilon = inf or zero noise); it can be explored "
                "but not saved or downloaded"
            )
        if self.seeded:
            raise NotPrivateError(
                "this release was drawn with a fixed random_state (an exploration preview): "
                "anyone with the seed can regenerate its noise. Draw it again with "
                "random_state=None to publish it"
            )

    def row_guarantee(self) -> Guarantee | None:
        """The row-level guarantee: replace-one (one row, label included, replaced by any row of
        the public domain; ``n`` public), the one unit every release is compared in.

        The release's own guarantee when it is already replace-one; the row-level equivalent the
        mechanism computed for the drawn randomness (``row_level``) for the papers' element and
        row-l2 modes; ``None`` when there is none (the papers' per-class algorithms with public
        class sizes, ``replace-one-within-class``: one record's label is not protected at all).
        """
        if self.guarantee.neighbouring == "replace-one":
            return self.guarantee
        if self.row_level is not None:
            holds = self.row_level.holds and self.guarantee.holds
            return Guarantee(**{**self.row_level.__dict__, "holds": holds})
        return None

    def row_level_card(self) -> dict[str, Any]:
        """The card's ``row_level`` entry: :meth:`row_guarantee` with ``same_as_guarantee`` and a
        sentence, or ``epsilon = "inf"`` with the reason when no row-level guarantee exists."""
        g = self.row_guarantee()
        if g is None:
            return {"epsilon": "inf", "delta": None, "neighbouring": "replace-one", "kind": None,
                    "beta": None, "holds": False, "same_as_guarantee": False,
                    "text": f"no row-level guarantee: under the {self.guarantee.neighbouring} relation "
                            "the class sizes and each record's label are public, so replacing one "
                            "row together with its label is not covered by any epsilon"}
        return {**g.as_card(), "same_as_guarantee": g.neighbouring == self.guarantee.neighbouring,
                "text": g.plain_language()}

    # ------------------------------------------------------------------ mapping real data
    def public_bounds(self) -> np.ndarray:
        """The public feature bounds the release assumed, ``(n_features, 2)`` (from ``public_facts``).

        Raises
        ------
        ValueError
            The release carries no bounds.
        """
        bounds = self.public_facts.get("bounds")
        if not bounds:
            raise ValueError(f"the {self.mechanism} release carries no public bounds")
        return np.array([[b["lo"], b["hi"]] for b in bounds.values()], dtype=float)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Map real rows ``(m, n_features)`` into the release's space ``(m, n_columns)``.

        Raises
        ------
        ValueError
            If this release has no public transform (e.g. PCA-Gauss Alg. 1, where ``W`` is private).
        """
        if self.transform_fn is None:
            if self.space == "features":
                return np.asarray(X, dtype=float)
            raise ValueError(f"the {self.mechanism} release has no public transform")
        return self.transform_fn(np.asarray(X, dtype=float))

    # ------------------------------------------------------------------ serialisation
    def to_frame(self) -> pd.DataFrame:
        """The released table as a DataFrame (labels appended as the last columns), or :attr:`table`."""
        if self.table is not None:
            return self.table.copy(deep=False)
        frame = pd.DataFrame(np.asarray(self.data), columns=list(self.columns))
        if self.labels is not None:
            lab = np.asarray(self.labels)
            if lab.ndim == 1:
                frame[self.label_columns[0] if self.label_columns else "label"] = lab
            else:
                for j, name in enumerate(self.label_columns):
                    frame[name] = lab[:, j]
        return frame

    def to_csv_frame(self) -> pd.DataFrame:
        """The table exactly as the CSV holds it: :meth:`to_frame` after :func:`spreadsheet_safe`.

        Show this one wherever a user could export the table (Streamlit's own dataframe toolbar
        writes a CSV without any formula escaping).
        """
        return spreadsheet_safe(self.to_frame())

    def to_csv_bytes(self) -> bytes:
        """The released CSV: the single serialiser of the CLI (:meth:`save`) and the app download.

        Column names and text cells (class labels) are escaped against spreadsheet formula
        injection (:func:`escape_formula`); the card's ``csv_escaping`` says which names changed.
        """
        return spreadsheet_safe_csv(self.to_frame(), float_format=CSV_FLOAT_FORMAT)

    def csv_escaping(self) -> dict[str, Any]:
        """What :meth:`to_csv_bytes` escaped: renamed columns and the number of label cells.

        The card keeps the original names under ``columns``; this maps them to the CSV header so
        a reader can match the two. Only labels can hold text (``data`` is numeric).
        """
        if self.table is not None:
            text = [self.table.iloc[:, j] for j in _text_positions(self.table)]
            names = list(self.table.columns)
            cells = sum(int(col.map(lambda v: isinstance(v, str) and escape_formula(v) != v).sum())
                        for col in text)
            renamed = {str(n): escape_formula(n) for n in names if isinstance(n, str)
                       and escape_formula(n) != n}
            return {"rule": CSV_ESCAPE_RULE, "renamed_columns": renamed, "escaped_label_cells": cells}
        names = [*self.columns, *self.label_columns]
        renamed = {str(n): escape_formula(n) for n in names if isinstance(n, str)
                   and escape_formula(n) != n}
        n_cells = 0
        if self.labels is not None:
            engine = engine_of(self.labels)
            lab = np.asarray(self.labels) if engine.in_memory else self.labels
            if lab.dtype.kind in "OUS":  # text cells, counted on the labels' engine (per block)
                n_cells = engine.count_cells(_escaped, lab)
        return {"rule": CSV_ESCAPE_RULE, "renamed_columns": renamed, "escaped_label_cells": n_cells}

    def card(self, csv_bytes: bytes | None = None) -> dict[str, Any]:
        """The release card (SPEC section 9 keys plus descriptive extras)."""
        if csv_bytes is None:
            csv_bytes = self.to_csv_bytes()
        warnings = list(self.details.get("warnings", []))
        if self.bounds_source == "data":
            warnings.insert(0, "bounds were computed from the private data: the privacy guarantee "
                               "stated here does NOT hold")
        if self.public_facts.get("classes_source") == "data":
            warnings.insert(0, "the class list was read from the private data: the privacy "
                               "guarantee stated here does NOT hold")
        if not self.guarantee.holds:
            warnings.insert(0, NOT_DP_TEXT)
        return {
            "mechanism": self.mechanism,
            "parameters": {k: _jsonable(v) for k, v in self.parameters.items()},
            "guarantee": self.guarantee.as_card(),
            "guarantee_text": self.guarantee.plain_language(),
            "row_level": self.row_level_card(),
            "private": self.is_private,
            "differentially_private": self.differentially_private,
            "noise": [rec.as_card() for rec in self.noise],
            "calibration": self.calibration,
            "bounds_source": self.bounds_source,
            "classes_source": self.public_facts.get("classes_source"),
            "public_facts": _jsonable(self.public_facts),
            "n_rows": int(self.n_rows),
            "n_released": len(self.data),
            "columns": (list(self.columns) + list(self.label_columns) if self.table is None
                        else [str(c) for c in self.table.columns]),
            "csv_escaping": self.csv_escaping(),
            "space": self.space,
            "output_space": self.output_space,
            "output_note": self.output_note,
            "transform_file": bool(self.transform_arrays),
            "details": {k: _jsonable(v) for k, v in self.details.items() if k != "warnings"},
            "warnings": warnings,
            "dpcore_version": __version__,
            "created_utc": self.created_utc,
            "sha256": hashlib.sha256(csv_bytes).hexdigest(),
        }

    def card_json(self, csv_bytes: bytes | None = None) -> str:
        return json.dumps(self.card(csv_bytes), indent=2, allow_nan=False)

    def transform_npz_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez(buf, **self.transform_arrays)
        return buf.getvalue()

    def save(self, path: str | Path) -> dict[str, Path]:
        """Write ``path`` (CSV), ``<stem>.card.json`` and, if any, ``<stem>.transform.npz``.

        Everything is serialised in memory first, then written to temporary files beside the
        targets, which are renamed into place only once all of them are written (:meth:`stage`,
        then :meth:`StagedFiles.publish`): a failure (disk full, permissions, a target that is a
        directory) leaves neither a partial file nor a partial set of files.

        The files are claimed with :func:`output_lock` for the duration, so two releases never
        write the same file at once.

        Raises
        ------
        NotPrivateError
            For NOT PRIVATE releases and seeded previews (nothing is written).
        OutputBusyError
            Another release in flight is writing one of these files (nothing is written).
        OSError
            A file could not be written (nothing is left behind).
        """
        with output_lock(path), self.stage(path) as staged:
            return staged.publish()

    def stage(self, path: str | Path) -> StagedFiles:
        """The files of :meth:`save`, complete in temporary files beside their targets but not yet
        in place: :meth:`StagedFiles.publish` renames them, :meth:`StagedFiles.discard` (or leaving
        a ``with`` block) removes them. Lets a caller record the release in a ledger between the
        two (:func:`dpcore.ledger.ledger_transaction`). Raises as :meth:`save`."""
        self.check_downloadable()
        targets = release_paths(path)
        csv_bytes = self.to_csv_bytes()
        files = {"csv": (targets["csv"], csv_bytes),
                 "card": (targets["card"], self.card_json(csv_bytes).encode())}
        if self.transform_arrays:
            files["transform"] = (targets["transform"], self.transform_npz_bytes())
        staged = _stage_all(files)
        # A release without a public map must not leave an older release's map beside its CSV:
        # load_transform would pair the new card with a transform that does not belong to it.
        staged.stale = [target for key, target in targets.items() if key not in files]
        return staged


class Exploration(NamedTuple):
    """A release and the exploration facts computed beside it (:meth:`Mechanism.explore`).

    ``diagnostics`` are facts about the PRIVATE rows and the mechanism's internals (clipping counts,
    noisy statistics before sampling, DP class counts, ...): for the custodian's own exploration,
    never for publication. Only ``release`` can be saved; this tuple has no ``save``.
    Unpacks as ``release, diagnostics = mech.explore(X)``.
    """

    release: Release
    diagnostics: dict[str, Any]


def _jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays and non-finite floats into JSON-safe values."""
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    return value


# private names the tests reach (their homes are dpcore.spreadsheet and dpcore.staging)
_PRIVATE = (_CSV_BLOCK_ROWS, _write_temp)
