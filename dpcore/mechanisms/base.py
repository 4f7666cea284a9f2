"""The mechanism base class and the registry.

Every mechanism is one module that subclasses :class:`Mechanism`, declares its schema
(:class:`~dpcore.schema.Param` tuple), supported tasks, neighbouring relation and guarantee kind,
and implements ``_release``. Subclasses register themselves by ``name``; the CLI and the app
discover them through :data:`MECHANISMS`, so adding one never touches a page.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, ClassVar

import numpy as np

from dpcore import engines
from dpcore.calibration import check_random_state, resolve_noise
from dpcore.exceptions import NonFiniteNoiseError
from dpcore.limits import check_memory
from dpcore.noise import BitSource, noise_source
from dpcore.preprocessing import PreparedInput
from dpcore.release import Exploration, Guarantee, NoiseRecord, Release
from dpcore.schema import Param, validate_params
from dpcore.table import engine_of
from dpcore.threads import blas_limit

__all__ = [
    "COMMON_ARGS",
    "MECHANISMS",
    "Mechanism",
    "NOISE_FIXED_BYTES",
    "NOISE_TEMPORARIES",
    "available_mechanisms",
    "check_finite_release",
    "get_mechanism",
]

MECHANISMS: dict[str, type[Mechanism]] = {}

#: release-sized integer working arrays of the exact discrete samplers (dpcore.noise), per cell
NOISE_TEMPORARIES = 3
#: fixed memory of the samplers (digit thresholds, ChaCha20 keystream buffers)
NOISE_FIXED_BYTES = 16 * 2**20

COMMON_ARGS = ("bounds", "label_bounds", "classes", "task", "random_state")


class Mechanism:
    """Base class of all release mechanisms (scikit-learn-style estimator conventions).

    Constructor keyword arguments are the names in :attr:`params` plus

    bounds : (lo, hi) or array of shape (n_features, 2), optional
        Public per-feature bounds. ``None``: taken from the data with a
        :class:`~dpcore.exceptions.PrivacyLeakWarning`; the guarantee then does not hold and the
        card says ``bounds_source: "data"``. Ignored when ``release`` gets a ``Dataset`` that
        carries its own bounds.
    label_bounds : (lo, hi), optional
        Public bounds of a regression label.
    classes : array-like, optional
        Public class list of a classification label.
    task : {"unsupervised", "classification", "regression"}, optional
        Default: from the ``Dataset``, else guessed from ``y``.
    random_state : None, int or numpy Generator
        ``None`` (default) draws OS entropy: the only setting whose release may be saved. A seed
        makes an exploration *preview*, which :meth:`Release.save` refuses.

    ``__init__`` only stores its arguments; validation happens in :meth:`release`.
    """

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    citation: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    tasks: ClassVar[tuple[str, ...]] = ("unsupervised", "classification", "regression")
    neighbouring: ClassVar[str] = "replace-one"
    guarantee_kind: ClassVar[str] = "pure"
    space: ClassVar[str] = "features"
    #: page capabilities: "distances" (noisy projections with a known noise variance),
    #: "rdp" (an RDP accountant), "images" (released rows can be shown as images)
    capabilities: ClassVar[frozenset[str]] = frozenset()
    #: True for the papers' comparison baselines (Compare page)
    baseline: ClassVar[bool] = False
    #: d x d float64 matrices held at once (second moment, its noise, eigenvectors...), for
    #: :meth:`peak_bytes`; 0 for mechanisms that never form one
    peak_square_matrices: ClassVar[int] = 0
    #: n x d float64 working arrays held at once (clipped/scaled input, noise, products...)
    peak_row_copies: ClassVar[int] = 4
    #: d x p float64 matrices held at once for a projection basis drawn per release (RON-Gauss's
    #: Haar basis and the QR that makes it), p the ``n_components`` given, or ``d - 1`` (its
    #: largest value) when chosen automatically; 0 for mechanisms whose projections are counted in
    #: the row copies
    peak_basis_copies: ClassVar[int] = 0
    #: False when real rows cannot be mapped into the release's space (a secret projection)
    public_transform: ClassVar[bool] = True
    #: constructor arguments beyond the schema and COMMON_ARGS (e.g. ``public_data``)
    extra_args: ClassVar[tuple[str, ...]] = ()
    #: True when released row i is a function of input row i, the public facts and its own noise
    #: only (local perturbation: no statistic across rows, noise scale independent of n), so a
    #: preview may draw some rows only (:meth:`explore` ``rows``) with each row's exact law
    row_wise: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name:
            MECHANISMS[cls.name] = cls

    def __init__(self, **kwargs: Any) -> None:
        allowed = {p.name for p in self.params} | set(COMMON_ARGS) | set(self.extra_args)
        unknown = set(kwargs) - allowed
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unexpected argument(s) {sorted(unknown)}; "
                f"accepted: {sorted(allowed)}"
            )
        for p in self.params:
            setattr(self, p.name, kwargs.get(p.name, p.default))
        for name in (*COMMON_ARGS, *self.extra_args):
            setattr(self, name, kwargs.get(name))

    # ------------------------------------------------------------------ sklearn-style API
    def get_params(self) -> dict[str, Any]:
        """Schema parameters and common arguments, as given."""
        out = {p.name: getattr(self, p.name) for p in self.params}
        out.update({name: getattr(self, name) for name in (*COMMON_ARGS, *self.extra_args)})
        return out

    def set_params(self, **kwargs: Any) -> Mechanism:
        for key, value in kwargs.items():
            if key not in self.get_params():
                raise ValueError(f"{type(self).__name__} has no parameter {key!r}")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{p.name}={getattr(self, p.name)!r}" for p in self.params
            if getattr(self, p.name) != p.default
        )
        return f"{type(self).__name__}({shown})"

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """Name, parameters, tasks, neighbouring relation and guarantee kind (``dpcore describe``)."""
        return {
            "name": cls.name,
            "class": cls.__name__,
            "title": cls.title,
            "summary": cls.summary,
            "citation": cls.citation,
            "tasks": list(cls.tasks),
            "neighbouring": cls.neighbouring,
            "guarantee_kind": cls.guarantee_kind,
            "space": cls.space,
            "baseline": cls.baseline,
            "parameters": [p.describe() for p in cls.params],
        }

    @classmethod
    def param(cls, name: str) -> Param:
        for p in cls.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @classmethod
    def transform_from_arrays(
        cls, arrays: Mapping[str, np.ndarray], parameters: Mapping[str, Any]
    ) -> Callable[[np.ndarray], np.ndarray] | None:
        """The public map of real rows into a release's space, rebuilt from public facts only.

        ``arrays`` are the release's public arrays (:attr:`Release.transform_arrays`, saved as
        ``OUT.transform.npz``) and ``parameters`` its card parameters. Mechanisms with a public
        transform override this; :meth:`_new_release` builds every release's transform from its
        ``transform_arrays`` with it, so the map loaded by
        :func:`dpcore.transform.load_transform` runs the same code as the release's own
        :meth:`Release.transform`. ``None`` (the default): no public map (a release in the input's
        feature space maps rows to themselves; a secret projection has none).
        """
        return None

    # ------------------------------------------------------------------ release
    def release(self, X: Any, y: Any = None, *, n_samples: int | None = None) -> Release:
        """Draw a differentially private release.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or dpcore.data.Dataset
            Private data; clipped to the public bounds before use.
        y : array-like of shape (n_samples,), optional
            Private labels (classification or regression).
        n_samples : int, optional
            Number of synthetic rows for generative mechanisms (default: the number of input
            rows).

        Returns
        -------
        Release

        Raises
        ------
        ValueError
            Invalid parameters (named), bad input (see :func:`dpcore.preprocessing.prepare_input`)
            or parameters incompatible with the data (e.g. ``n_components >= n_features``).
        """
        return self.explore(X, y, n_samples=n_samples).release

    @blas_limit()
    def explore(self, X: Any, y: Any = None, *, n_samples: int | None = None,
                rows: np.ndarray | None = None) -> Exploration:
        """Draw a release as :meth:`release` does, and return the exploration facts beside it.

        Same parameters, errors and release as :meth:`release` (both run their linear algebra with
        :func:`dpcore.threads.blas_threads` BLAS threads). The diagnostics (clipping counts,
        the noisy statistics before sampling, DP class counts, ...) describe the PRIVATE rows and
        the mechanism's internals: they are for the custodian's exploration pages and tests, and
        cannot reach a saved file (:class:`~dpcore.release.Release` has no place for them).

        ``rows`` (row-wise mechanisms only, :attr:`row_wise`; a seeded preview of an in-memory
        input): draw only the released rows at these input positions, in this order, e.g. the
        rows a page displays.
        Each drawn row has the law it has in the full release (same sampler, same noise scale:
        the input is prepared, clipped and counted in full, then those rows are perturbed); the
        values differ from the full release's for the same seed. ``n_rows`` stays the input's
        row count and ``details["drawn_rows"]`` says how many rows were drawn.

        Returns
        -------
        Exploration
            ``(release, diagnostics)``.

        Raises
        ------
        ValueError
            As :meth:`release`; ``rows`` for a mechanism that is not row-wise, with ``n_samples``,
            without a ``random_state``, on a table larger than memory, or outside ``[0, n)``.
        """
        with engines.opened(X) as X:  # the engine is chosen here, once (dpcore.engines)
            return self._explore(X, y, n_samples, rows)

    def _explore(self, X: Any, y: Any, n_samples: int | None, rows: np.ndarray | None) -> Exploration:
        values, data, n_samples = self._prepare(X, y, n_samples)
        n_rows = data.n_samples
        if rows is not None:
            data = self._some_rows(data, rows, n_samples)
        rng = check_random_state(self.random_state)
        # noise bits: OS-keyed CSPRNG, or for a seed a stream separate from rng (public matrices)
        rel = self._guarded(values, partial(self._release, data, values, rng, n_samples,
                                            bits=noise_source(self.random_state)))
        if rows is not None:
            rel = dataclasses.replace(rel, n_rows=n_rows,
                                      details={**rel.details, "drawn_rows": data.n_samples})
        return Exploration(self._finish(rel, values, data), dict(data.diagnostics))

    def _some_rows(self, data: PreparedInput, rows: np.ndarray, n_samples: int | None) -> PreparedInput:
        """``data`` restricted to the input rows ``rows`` for :meth:`explore` (bounds, class list,
        public facts and clipping counts stay those of the whole input; the diagnostics dict is
        shared, so what the mechanism records lands in the one :meth:`explore` returns)."""
        if not self.row_wise:
            raise ValueError(f"{self.name} is not row-wise: its release cannot be drawn for some rows only")
        if n_samples is not None or not data.engine.in_memory or self.random_state is None:
            raise ValueError("rows= draws a seeded preview (random_state set) of an in-memory input with "
                             "n_samples=None: a partial release is never saved")
        rows = np.asarray(rows)
        if rows.ndim != 1 or rows.dtype.kind not in "iu" or (rows.size and (
                rows.min() < 0 or rows.max() >= data.n_samples)):
            raise ValueError(f"rows must be a 1-D integer array of positions in [0, {data.n_samples})")
        return dataclasses.replace(data, X=data.X[rows], y=None if data.y is None else data.y[rows])

    def _prepare(self, X: Any, y: Any, n_samples: int | None
                 ) -> tuple[dict[str, Any], PreparedInput, int | None]:
        """Validated parameters, the prepared input (:func:`dpcore.engines.prepare`: on the engine of
        ``X``, after the memory check of an in-memory input) and the checked ``n_samples``: the first
        half of :meth:`explore` (and of a generative mechanism's ``fit``)."""
        values = validate_params(self.params, {p.name: getattr(self, p.name) for p in self.params})
        if values.get("noise") == "auto":  # the user's delta decides (dpcore.calibration.resolve_noise)
            values = {**values, "noise": resolve_noise("auto", values.get("delta"))[0]}
        if n_samples is not None:
            n_samples = _check_n_samples(n_samples)
        return values, engines.prepare(self, X, y, values, n_samples), n_samples

    @classmethod
    def check_peak_memory(cls, n_samples: int, n_features: int, n_classes: int, params: dict[str, Any], *,
                          n_released: int | None = None) -> None:
        """Refuse a release whose :meth:`peak_bytes` (``params``: validated schema parameters) is
        over ``DPCORE_MAX_MEMORY``, before any work: :meth:`release` checks it from the input's
        shape before preparing it, and the CLI from the file's size before reading it.

        Raises
        ------
        ResourceLimitError
            Naming the mechanism, the shape, the parameters that drive the figure and the limit.
        """
        peak = cls.peak_bytes(n_samples, n_features, params, n_classes=n_classes, n_released=n_released)
        check_memory(_peak_description(cls.name, n_samples, n_features, n_classes, params, n_released), peak)

    def _guarded(self, values: dict[str, Any], work: Callable[[], Any]) -> Any:
        """``work()`` with floating-point failures inside the noisy algebra turned into a
        :class:`~dpcore.exceptions.NonFiniteNoiseError` naming the privacy parameters."""
        try:
            return work()
        except NonFiniteNoiseError as exc:
            named = _privacy_parameters(values)
            if str(exc).startswith(named):
                raise
            raise NonFiniteNoiseError(f"{named} gives an infinite noise scale: the part {exc}") from None
        except (ArithmeticError, np.linalg.LinAlgError) as exc:  # overflow inside the noisy algebra
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            if _too_large(values):
                raise NonFiniteNoiseError(_too_large_message(self.name, values, first)) from None
            raise NonFiniteNoiseError(
                f"{self.name} failed in floating-point arithmetic with {_privacy_parameters(values)} "
                f"({type(exc).__name__}: {first}); nothing is released: use a larger epsilon"
            ) from None
        except ValueError as exc:  # a calibration that degenerates: only an epsilon far too large here
            if _too_large(values) and "finite noise scale" in str(exc):
                raise ValueError(_too_large_message(self.name, values, "no finite noise scale")) from None
            raise

    def _finish(self, rel: Release, values: dict[str, Any], data: PreparedInput) -> Release:
        """Refuse a non-finite release (:func:`check_finite_release`), add the input's warnings to
        its details and mark a seeded one as a preview: the last step of :meth:`explore`."""
        check_finite_release(rel, values)
        details = {**rel.details, "warnings": [*rel.details.get("warnings", []), *data.warnings,
                                               *_label_rate_warning(rel)]}
        parameters = rel.parameters
        if getattr(self, "noise", None) == "auto":  # the card keeps noise='auto' as given, and says
            details["noise_choice"] = resolve_noise("auto", values.get("delta"))[1]  # what it chose, why
            parameters = {**parameters, "noise": "auto"}
        return dataclasses.replace(rel, seeded=self.random_state is not None, details=details,
                                   parameters=parameters)

    def _release(
        self, data: PreparedInput, params: dict[str, Any], rng: np.random.Generator,
        n_samples: int | None, *, bits: BitSource,
    ) -> Release:
        """The mechanism's work. ``rng`` draws public randomness (projection matrices, synthetic rows
        from released statistics, index sets); every noise draw uses ``bits`` through
        :mod:`dpcore.noise`. Exploration facts go into ``data.diagnostics`` (returned by
        :meth:`explore`, never part of the release)."""
        raise NotImplementedError

    @classmethod
    def peak_bytes(
        cls, n_samples: int, n_features: int, params: dict[str, Any], *, n_classes: int = 0,
        n_released: int | None = None,
    ) -> float:
        """Estimated peak memory of one release, in bytes, from public shapes and parameters only.

        Counted in float64 (8 bytes) cells: :attr:`peak_row_copies` ``n x d`` working arrays
        (clipped input, noise, products), the released table (``m (d + C + 1)`` with
        ``m = n_mixtures or n_released or n`` rows, ``C`` classes as one-hot label columns) plus
        :data:`NOISE_TEMPORARIES` times it for the exact discrete samplers' integer working arrays,
        :attr:`peak_square_matrices` ``d x d`` matrices (one set per class for per-class models),
        :attr:`peak_basis_copies` ``d x p`` projection bases, and :data:`NOISE_FIXED_BYTES` for the
        samplers' tables and keystream buffers.
        An upper estimate (``tests/test_limits.py`` checks it against tracemalloc) meant to
        refuse hopeless requests early (``--n-mixtures 1e9``, PCA on 100k columns).

        Parameters
        ----------
        n_samples, n_features : int
            Shape ``(n, d)`` of the private input.
        params : dict
            Validated schema parameters.
        n_classes : int
            Size of the public class list (0 without one).
        n_released : int, optional
            ``n_samples`` asked of :meth:`release`.
        """
        n, d = float(n_samples), float(n_features)
        m = float(params.get("n_mixtures") or n_released or n_samples)
        groups = 1 + (n_classes if cls.peak_square_matrices else 0)
        released = m * (d + n_classes + 1)
        p = float(params.get("n_components") or max(d - 1.0, 1.0))
        cells = (cls.peak_row_copies * n * d + (1 + NOISE_TEMPORARIES) * released
                 + cls.peak_square_matrices * groups * d * d + cls.peak_basis_copies * d * p)
        return 8.0 * cells + NOISE_FIXED_BYTES

    # ------------------------------------------------------------------ helpers for subclasses
    def _new_release(
        self,
        data: PreparedInput,
        params: dict[str, Any],
        *,
        values: np.ndarray,
        columns: list[str],
        guarantee: Guarantee,
        noise: list[NoiseRecord],
        calibration: str,
        n_samples: int | None = None,
        **kwargs: Any,
    ) -> Release:
        """Assemble a :class:`Release` with the fields every mechanism fills the same way."""
        parameters = dict(params)
        parameters["task"] = data.task
        if n_samples is not None:
            parameters["n_samples"] = n_samples
        if not data.holds:
            guarantee = Guarantee(**{**guarantee.__dict__, "holds": False})
        kwargs.setdefault("public_facts", data.public_facts)
        if kwargs.get("transform_arrays") and "transform_fn" not in kwargs:
            # one code path for the release's own map and dpcore.transform.load_transform
            kwargs["transform_fn"] = type(self).transform_from_arrays(kwargs["transform_arrays"], parameters)
        return Release(
            data=values,
            columns=columns,
            mechanism=self.name,
            parameters=parameters,
            guarantee=guarantee,
            noise=noise,
            calibration=calibration,
            bounds_source=data.bounds_source,
            n_rows=data.n_samples,
            space=self.space,
            **kwargs,
        )


def _label_rate_warning(rel: Release) -> list[str]:
    """A warning for a release whose class labels went through randomized response (public facts:
    the flip probability and the class count): their rates are pulled towards ``1/K``."""
    rr = next((r for r in rel.noise if str(r.distribution) == "randomized-response"), None)
    if rr is None or not rr.scale > 0:
        return []
    return [f"each row's class is released by randomized response, which reports another class for "
            f"{float(rr.scale):.2g} of the rows: the released class rates are pulled towards equal "
            "shares (a rare class looks far more common). A file written by dpcore gets class rates "
            "estimated by inverting that public probability, but each row's label stays noisy; a model "
            "of the table (PCA-Gauss) keeps far more of the label's signal"]


def _peak_description(name: str, n: int, d: int, n_classes: int, params: dict[str, Any],
                      n_released: int | None) -> str:
    """``dpmix on 30 rows x 3 features with n_mixtures = 1,000,000,000`` (the figure's drivers)."""
    drivers = {k: v for k, v in params.items()
               if k in ("n_mixtures", "n_components", "ell") and v is not None}
    if n_released is not None:
        drivers["n_samples"] = n_released
    shown = ", ".join(f"{k} = {v:,}" for k, v in drivers.items())
    return (f"{name} on {n:,} rows x {d:,} features" + (f" ({n_classes:,} classes)" if n_classes else "")
            + (f" with {shown}" if shown else ""))


#: epsilon from which a calibration failing in float64 is said to fail because epsilon is too large:
#: the noise scales shrink like 1/epsilon and the samplers' tables like exp(-epsilon), so the
#: arithmetic breaks down at both ends; below this, an infinite scale means epsilon is too small.
LARGE_EPSILON = 1e3


def _too_large(params: dict[str, Any]) -> bool:
    eps = params.get("epsilon")
    return isinstance(eps, (int, float)) and not isinstance(eps, bool) and math.isfinite(eps) and \
        eps >= LARGE_EPSILON


def _too_large_message(name: str, params: dict[str, Any], detail: str) -> str:
    return (f"epsilon = {params['epsilon']:g} is too large: {name}'s noise calibration breaks down in "
            f"float64 arithmetic ({detail[:120]}); nothing is released: use a smaller epsilon (a "
            f"guarantee at epsilon >= {LARGE_EPSILON:g} says nothing a reader can use)")


def _privacy_parameters(params: dict[str, Any]) -> str:
    """``epsilon = 1e-310, delta = 1e-05`` (the given privacy parameters, for messages)."""
    given = ", ".join(f"{k} = {params[k]:g}" for k in ("epsilon", "delta", "sigma_x", "sigma_y")
                      if isinstance(params.get(k), (int, float)) and not isinstance(params.get(k), bool))
    return given or "these parameters"


def check_finite_release(release: Release, params: dict[str, Any]) -> None:
    """Refuse to publish a release with a non-finite noise scale or a NaN/inf value.

    Applied by :meth:`Mechanism.release` to every mechanism's output (issue 17: epsilon = 1e-310
    made several mechanisms write NaN/inf tables with a noise scale of "inf" on the card).

    Raises
    ------
    NonFiniteNoiseError
        A ``ValueError`` naming the privacy parameters (``epsilon = 1e-310``) and the statistic
        or cell count.
    """
    named = _privacy_parameters(params)
    for rec in release.noise:
        for what, value in (("noise scale", rec.scale), ("sensitivity", rec.sensitivity)):
            try:
                finite = np.isfinite(np.asarray(value, dtype=float)).all()
            except (TypeError, ValueError):
                continue
            if not finite:
                raise NonFiniteNoiseError(
                    f"{named} gives an infinite {what} for {rec.statistic} ({value}); nothing is "
                    "released: use a larger epsilon (float64 cannot represent this noise)"
                )
    for what, arr in (("released table", release.data), ("released labels", release.labels),
                      *((f"public array {k}", v) for k, v in release.transform_arrays.items())):
        if arr is None or not engine_of(arr).in_memory:  # checked per partition as it is written
            continue
        arr = np.asarray(arr)
        if arr.dtype.kind not in "fc":
            continue
        bad = int(np.count_nonzero(~np.isfinite(arr)))
        if bad:
            raise NonFiniteNoiseError(
                f"{named} gives a {what} with {bad:,} NaN/inf value(s); nothing is released: the "
                "noise overflows float64 arithmetic, use a larger epsilon"
            )


def _check_n_samples(n_samples: Any, limit: int = 10_000_000) -> int:
    try:
        whole = not isinstance(n_samples, bool) and float(n_samples).is_integer()
    except (TypeError, ValueError):
        whole = False
    if not whole:
        raise ValueError(f"n_samples must be a whole number, got {n_samples!r}")
    n = int(n_samples)
    if not (1 <= n <= limit):
        raise ValueError(f"n_samples must be between 1 and {limit:,}, got {n_samples!r}")
    return n


def get_mechanism(name: str) -> type[Mechanism]:
    """The mechanism class registered under ``name`` (CLI name, e.g. ``"ron-gauss"``).

    Raises
    ------
    ValueError
        Unknown name (the message lists the known ones).
    """
    try:
        return MECHANISMS[name]
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r}; available: {sorted(MECHANISMS)}") from None


def available_mechanisms(task: str | None = None, *, baselines: bool = True) -> list[str]:
    """Registered names, optionally only those supporting ``task``."""
    return [
        name for name, cls in MECHANISMS.items()
        if (task is None or task in cls.tasks) and (baselines or not cls.baseline)
    ]
