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

import contextlib
import errno
import fcntl
import hashlib
import io
import json
import math
import os
import re
import secrets
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np
import pandas as pd

from dpcore import __version__
from dpcore.exceptions import NotPrivateError
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
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r", "\n")
#: the released CSVs' number format: 10 significant digits
CSV_FLOAT_FORMAT = "%.10g"
CSV_ESCAPE_RULE = (
    "OWASP CSV injection: a text cell or column name whose first character (after any leading "
    "single quotes) is = + - @ tab, CR or LF is written with one extra leading single quote ('); "
    "numbers are never changed. Remove one leading quote from such values to recover the originals."
)


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


def release_paths(path: str | Path) -> dict[str, Path]:
    """The files :meth:`Release.save` writes for ``path``: ``csv`` (``path``), ``card``
    (``<stem>.card.json``) and, for releases with a public map, ``transform``
    (``<stem>.transform.npz``); ``<stem>`` is ``path``'s name without a ``.csv`` ending."""
    path = Path(path)
    base = path.name[:-4] if path.name.lower().endswith(".csv") else path.name
    return {"csv": path, "card": path.with_name(base + ".card.json"),
            "transform": path.with_name(base + ".transform.npz")}


class OutputBusyError(ValueError):
    """Another release in flight (another process or thread) is writing one of the output files."""


#: Suffix of the hidden marker ``.<name>.release-lock`` beside each file of a release in flight.
#: A marker is claimed with an exclusive ``flock``, which the kernel drops when its process dies,
#: so a marker left by a killed run never blocks anything; it is hidden and named unlike any
#: output, so it is never taken for one (the next release to that path removes it).
OUTPUT_LOCK_SUFFIX = ".release-lock"
_held: dict[str, list[int]] = {}  # marker path -> [owning thread, depth] for this process's claims
_held_guard = threading.Lock()


def output_lock_path(target: str | Path) -> Path:
    """The marker claimed while a release writes ``target``: ``.<name>.release-lock`` beside the
    file ``target`` resolves to (so two spellings of one path share one marker)."""
    real = Path(os.path.realpath(target))
    return real.with_name(f".{real.name}{OUTPUT_LOCK_SUFFIX}")


@contextmanager
def output_lock(path: str | Path) -> Iterator[dict[str, Path]]:
    """Claim every file a release to ``path`` writes (:func:`release_paths`) for the block.

    Refuses at once, without waiting, when another release in flight holds one of them: two
    releases never interleave their files (``-o a.csv`` and ``-o a`` share ``a.card.json``). The
    claim is an exclusive ``flock`` on a hidden marker per file (:data:`OUTPUT_LOCK_SUFFIX`),
    taken with a non-blocking call, re-checked against the marker's path after locking (a previous
    holder may have removed it meanwhile), and removed on the way out. Re-entrant in one thread
    (the CLI holds the claim for the whole command; :meth:`Release.save` takes it again). Once
    claimed, hidden temporaries of those files left by killed runs are removed.

    Yields the targets (as :func:`release_paths`).

    Raises
    ------
    OutputBusyError
        Naming the file and the process writing it (also for a marker that is a symbolic link or
        not a regular file).
    OSError
        The marker cannot be created (missing or read-only folder).
    """
    targets = release_paths(path)
    claims: list[tuple[Path, int | None]] = []
    try:
        for target in targets.values():
            marker = output_lock_path(target)
            if all(m != marker for m, _ in claims):
                claims.append((marker, _claim(marker, target)))
        if any(fd is not None for _, fd in claims):
            for target in targets.values():
                _remove_stale_temporaries(target)
        yield targets
    finally:
        for marker, fd in reversed(claims):
            _release_claim(marker, fd)


def _claim(marker: Path, target: Path) -> int | None:
    """Lock ``marker``; the descriptor holding the lock, or None for a re-entrant claim."""
    key = str(marker)
    with _held_guard:
        held = _held.get(key)
        if held is not None and held[0] == threading.get_ident():
            held[1] += 1
            return None
    while True:
        try:
            fd = os.open(marker, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # the marker is a symbolic link
                raise OutputBusyError(f"{marker} (the in-flight marker of {target}) is a symbolic "
                                      "link; remove it or choose another output path") from None
            raise
        locked = False
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OutputBusyError(f"{marker} (the in-flight marker of {target}) is not a regular "
                                      "file; remove it or choose another output path")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                raise OutputBusyError(
                    f"{target} is being written by another release in flight"
                    + (f" (process {owner})" if owner.isdigit() else "")
                    + "; wait for it to finish or choose another output path") from None
            try:
                now = os.stat(marker, follow_symlinks=False)
            except FileNotFoundError:
                now = None
            if now is None or (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
                os.close(fd)  # the holder removed this marker as we locked it: claim a fresh one
                continue
            locked = True
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            if locked:  # ours (locked, checked to be the file at that path): leave no marker behind
                with contextlib.suppress(OSError):
                    marker.unlink()
            os.close(fd)
            raise
        with _held_guard:
            _held[key] = [threading.get_ident(), 1]
        return fd


def _release_claim(marker: Path, fd: int | None) -> None:
    key = str(marker)
    with _held_guard:
        held = _held.get(key)
        if held is not None and held[1] > 1:
            held[1] -= 1
            return
        _held.pop(key, None)
    if fd is not None:
        try:
            marker.unlink(missing_ok=True)  # removed while still locked (see _claim's re-check)
        finally:
            os.close(fd)


def _remove_stale_temporaries(target: Path) -> None:
    """Hidden temporaries of ``target`` (:func:`_write_temp` names) left by killed runs; only the
    claim holder writes them, so none is live."""
    real = Path(os.path.realpath(target))
    pattern = re.compile(rf"\.{re.escape(real.name)}\.[0-9a-f]{{12}}\.tmp")
    try:
        names = os.listdir(real.parent)
    except OSError:
        return
    for name in names:
        if pattern.fullmatch(name):
            tmp = real.parent / name
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.lstat(tmp).st_mode):
                    tmp.unlink()


def _hidden_temporary(target: Path) -> Path:
    """A new hidden name ``.<name>.<12 hex>.tmp`` beside ``target``: never taken for an output, and
    removed as a killed run's leftover by the next release to that path."""
    return target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")


def _write_temp(target: Path, payload: bytes) -> Path:
    """``payload`` in a new temporary file in ``target``'s folder (same file system: atomic rename)."""
    # "x": never reuse an existing file; created with the usual permissions (umask), like the
    # target would be (tempfile.mkstemp would make it owner-only).
    tmp = _hidden_temporary(target)
    try:
        with open(tmp, "xb") as fh:
            fh.write(payload)
    except BaseException:  # also KeyboardInterrupt / SystemExit from a signal handler
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _hard_link_backup(target: Path) -> Path | None:
    """A hidden hard link to the regular file ``target`` (named like :func:`_write_temp`'s
    temporaries, so a killed run's link is removed as theirs are), or None if there is no file or
    the file system has no hard links."""
    if not target.is_file() or target.is_symlink():
        return None
    backup = _hidden_temporary(target)
    try:
        os.link(target, backup)
    except OSError:
        return None
    return backup


@dataclass
class StagedFiles:
    """Complete temporary files (``temps``) waiting to be renamed onto their ``targets``."""

    targets: dict[str, Path]
    temps: dict[str, Path]
    #: Files of an earlier release to the same path that this release does not write (e.g. its
    #: ``<stem>.transform.npz`` when this release has no public map): removed on publish.
    stale: list[Path] = field(default_factory=list)

    def publish(self) -> dict[str, Path]:
        """Rename every temporary file into place and remove the :attr:`stale` files, or do
        nothing: if a rename fails (rare: the temporary files are complete), the targets already
        renamed are put back as they were (the previous files, kept meanwhile as hidden hard
        links, or nothing) and the stale files are restored, so a release is never left
        half-written, never mixed with an older release's files, and a failed one destroys
        nothing. Returns the targets."""
        backups = {key: _hard_link_backup(target) for key, target in self.targets.items()}
        placed: list[str] = []
        moved: dict[Path, Path] = {}  # stale file -> its hidden name until the release is in place
        try:
            for target in self.stale:
                if target.is_file() or target.is_symlink():
                    hidden = _hidden_temporary(target)
                    os.replace(target, hidden)
                    moved[target] = hidden  # only once moved: a failed move has nothing to restore
            for key, target in self.targets.items():
                os.replace(self.temps[key], target)
                del self.temps[key]
                placed.append(key)
        except BaseException:
            self.discard()
            for key in placed:
                backup = backups.pop(key)
                if backup is not None:
                    os.replace(backup, self.targets[key])
                else:
                    self.targets[key].unlink(missing_ok=True)
            for target, hidden in moved.items():
                os.replace(hidden, target)
            moved.clear()
            raise
        finally:
            for backup in backups.values():
                if backup is not None:
                    backup.unlink(missing_ok=True)
            for hidden in moved.values():
                hidden.unlink(missing_ok=True)
        return dict(self.targets)

    def discard(self) -> None:
        """Remove the temporary files not yet published."""
        for tmp in self.temps.values():
            tmp.unlink(missing_ok=True)
        self.temps.clear()

    def __enter__(self) -> StagedFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


def _stage_all(files: dict[str, tuple[Path, bytes]]) -> StagedFiles:
    """Write every ``key: (target, payload)`` to a temporary file; if one fails, the others are
    removed and no target is touched."""
    staged = StagedFiles({key: target for key, (target, _) in files.items()}, {})
    try:
        for key, (target, payload) in files.items():
            staged.temps[key] = _write_temp(target, payload)
    except BaseException:
        staged.discard()
        raise
    return staged


def _escaped(value: Any) -> bool:
    """True for a text cell that :func:`escape_formula` changes."""
    return isinstance(value, str) and escape_formula(value) != value


def escape_formula(text: str) -> str:
    """Neutralise one string for spreadsheets: prefix ``'`` if it would be read as a formula.

    Column names and class labels are user strings that end up in released CSVs; a custodian who
    opens ``=HYPERLINK(...)`` in Excel runs it. The OWASP fix is a leading single quote, which
    spreadsheets show as text. Leading quotes are skipped before the test (``"'=a"`` becomes
    ``"''=a"``) so that escaping is one-to-one: ``"=a"`` and ``"'=a"`` never collide into one
    header, and removing one quote from escaped values recovers every original exactly.
    """
    return "'" + text if text.lstrip("'").startswith(FORMULA_TRIGGERS) else text


def _escape_cell(value: Any) -> Any:
    return escape_formula(value) if isinstance(value, str) else value


def _is_text_column(column: pd.Series) -> bool:
    return _is_text_dtype(column.dtype)


def _is_text_dtype(dtype: Any) -> bool:
    return (pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype)
            or isinstance(dtype, pd.CategoricalDtype))


def _text_positions(frame: pd.DataFrame) -> list[int]:
    """Positions of the text columns of ``frame``, from its dtypes (each distinct dtype looked at
    once: a table of 100,000 float columns is not walked column by column)."""
    text = {id(dt): _is_text_dtype(dt) for dt in frame.dtypes}
    return [j for j, dt in enumerate(frame.dtypes) if text[id(dt)]]


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` with formula-like column names and text cells escaped.

    Only ``str`` values are touched (object, string and categorical columns, and the header):
    numeric columns keep their dtype and a negative number stays a number, because the
    spreadsheet reads ``-1.5`` as a value, never as a formula, and escaping it would corrupt the
    release. Object columns that mix numbers and text (DPMix mixed labels) keep their numbers.
    """
    out = frame.copy(deep=False)  # copy-on-write: untouched (numeric) columns are not copied
    for j in _text_positions(out):
        out.isetitem(j, out.iloc[:, j].map(_escape_cell))
    out.columns = [_escape_cell(name) for name in out.columns]
    return out


def spreadsheet_safe_csv(frame: pd.DataFrame, *, float_format: str | None = None) -> bytes:
    """UTF-8 CSV bytes of ``frame`` (no index) after :func:`spreadsheet_safe`.

    The one CSV writer for anything a user downloads (releases, the Compare and Utility tables),
    so no download path can forget the escaping.
    """
    return b"".join(spreadsheet_safe_csv_chunks(frame, float_format=float_format))


def spreadsheet_safe_csv_chunks(frame: pd.DataFrame, *, float_format: str | None = None,
                                lineterminator: str | None = None) -> Iterator[bytes]:
    """:func:`spreadsheet_safe_csv` in pieces of a few MiB (a file is written piece by piece).

    ``lineterminator``: ``None`` chooses as :func:`spreadsheet_safe_csv` does (below); a table
    written in parts passes the one of the whole table, so that every part has the same.
    """
    safe = spreadsheet_safe(frame)
    if lineterminator is None:
        # Python's csv writer quotes a field only for the characters of its line terminator, so with
        # "\n" a bare CR inside a label or name is written unquoted and a spreadsheet (or csv.reader)
        # splits the row there. Such tables are written with RFC 4180's "\r\n", which quotes them;
        # every other table keeps the usual "\n" byte for byte.
        has_cr = any(isinstance(v, str) and "\r" in v for v in safe.columns) or any(
            safe.iloc[:, j].map(lambda v: isinstance(v, str) and "\r" in v).any()
            for j in _text_positions(safe))
        lineterminator = "\r\n" if has_cr else "\n"
    for text in csv_chunks(safe, float_format=float_format, lineterminator=lineterminator):
        yield text.encode("utf-8")


#: rows formatted per ``%`` operation by :func:`csv_chunks` (a few MiB of text)
_CSV_BLOCK_ROWS = 8192


def csv_text(frame: pd.DataFrame, *, float_format: str | None, lineterminator: str = "\n") -> str:
    """``frame.to_csv(index=False, float_format=float_format, lineterminator=lineterminator)``:
    the same text, about 4x faster for float columns (:func:`csv_chunks`, joined)."""
    return "".join(csv_chunks(frame, float_format=float_format, lineterminator=lineterminator))


def csv_chunks(frame: pd.DataFrame, *, float_format: str | None, lineterminator: str = "\n"
               ) -> Iterator[str]:
    """The text of ``frame.to_csv(index=False, float_format=float_format,
    lineterminator=lineterminator)`` in pieces: the header, then blocks of
    :data:`_CSV_BLOCK_ROWS` rows.

    pandas formats each float with a Python call (``float_format % value``, holding the GIL: 19.9 s
    for 10^6 x 20 values). Here the rows of a block are formatted by one ``%`` operation of a
    row format repeated per row, in C (3.8x faster); columns pandas formats otherwise (text,
    integers, dates, NaN) are formatted by pandas column by column and inserted as ``%s``. Where
    that would not give pandas' text (a quoted cell holding a line break, a ``float_format`` that is
    not a plain ``%`` format), pandas writes the whole frame. Tested byte for byte against pandas
    (``tests/test_csv_injection.py``).
    """
    fast = _csv_columns(frame, float_format, lineterminator)
    if fast is None:
        yield frame.to_csv(index=False, float_format=float_format, lineterminator=lineterminator)
        return
    formats, columns = fast
    n = frame.shape[0]
    row = ",".join(formats) + lineterminator.replace("%", "%%")
    yield frame.iloc[:0].to_csv(index=False, lineterminator=lineterminator)  # the header, as pandas
    for start in range(0, n, _CSV_BLOCK_ROWS):
        stop = min(n, start + _CSV_BLOCK_ROWS)
        block = np.empty((stop - start, len(columns)), dtype=object)  # a block's Python objects only
        for j, values in enumerate(columns):
            block[:, j] = values[start:stop]
        yield (row * block.shape[0]) % tuple(block.ravel().tolist())


def _csv_columns(frame: pd.DataFrame, float_format: Any, lineterminator: str
                 ) -> tuple[list[str], list[Any]] | None:
    """For :func:`csv_chunks`: each column's ``%`` format (``float_format`` for a float64 column
    without NaN, ``%s`` for the others) and its values (the floats, or the cells as pandas writes
    them); ``None`` where pandas must write the frame (no float column to speed up, a format that is
    not a plain ``%`` format, a quoted cell holding the line terminator)."""
    n = frame.shape[0]
    if not isinstance(float_format, str) or set(float_format) & set(',"\r\n') or n == 0:
        return None
    formats: list[str] = []
    columns: list[Any] = []
    dtypes = list(frame.dtypes)
    floats = [j for j, dt in enumerate(dtypes) if dt == np.float64]
    values = frame.iloc[:, floats].to_numpy() if floats else np.empty((n, 0))  # one block, not per column
    plain = dict(zip(floats, ~np.isnan(values).any(axis=0), strict=True))  # pandas writes NaN as ""
    at = {j: k for k, j in enumerate(floats)}
    for j in range(frame.shape[1]):
        if plain.get(j, False):
            formats.append(float_format)
            columns.append(values[:, at[j]])
            continue
        column = frame.iloc[:, j]
        cells = column.to_frame().to_csv(index=False, header=False, float_format=float_format,
                                         lineterminator=lineterminator).split(lineterminator)[:-1]
        if len(cells) != n:  # a quoted cell holds the line terminator
            return None
        # a row of one empty field is written '""' by the csv module, an empty field of a longer row ''
        formats.append("%s")
        columns.append(np.array(["" if c == '""' else c for c in cells], dtype=object))
    return (formats, columns) if any(c.dtype == np.float64 for c in columns) else None


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
