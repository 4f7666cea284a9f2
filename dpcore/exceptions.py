"""Exceptions and warnings raised by dpcore."""

from __future__ import annotations

__all__ = [
    "DataValidationError",
    "NonFiniteNoiseError",
    "NotPrivateError",
    "PrivacyLeakWarning",
]


class PrivacyLeakWarning(RuntimeWarning):
    """A parameter that must be public was taken from the private data.

    Raised (as a warning) whenever bounds, norms or category lists are computed from the data
    themselves. The differential-privacy guarantee written on a release does **not** hold in that
    case; the release card records it (``bounds_source: "data"``). Same idea as diffprivlib's
    ``PrivacyLeakWarning``.
    """


class DataValidationError(ValueError):
    """The input table cannot be used as it is; the message says which column/rows and what to do."""


class NotPrivateError(ValueError):
    """An operation that needs a private release (download, save, CLI) got a NOT PRIVATE one
    (epsilon = infinity, zero noise) or a seeded exploration preview."""


class NonFiniteNoiseError(ValueError):
    """A noise scale (or a released value) would not be a finite float64: nothing is released.

    The message names the parameters that caused it (``epsilon = 1e-310 gives an infinite noise
    scale``)."""
