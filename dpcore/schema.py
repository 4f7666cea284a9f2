"""Parameter schema: what a mechanism accepts, declared once, used by validation, CLI and app.

A mechanism lists its :class:`Param` objects; :func:`validate_params` checks values against them
(clear ``ValueError`` naming the parameter), the CLI turns them into ``--dashed-options`` and the
Streamlit app renders one widget per parameter. Adding a mechanism therefore never touches a page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "DELTA",
    "EPSILON",
    "Param",
    "ParamKind",
    "validate_params",
]

ParamKind = Literal["float", "int", "choice", "bool", "fraction_split"]


@dataclass(frozen=True)
class Param:
    """One constructor parameter of a mechanism.

    Attributes
    ----------
    name : str
        Keyword argument name (SPEC section 9 names: ``epsilon``, ``delta``, ``n_components``...).
    kind : {"float", "int", "choice", "bool", "fraction_split"}
        ``fraction_split`` is a tuple of budget fractions (e.g. ``(0.3, 0.7)``) summing to 1.
    default : Any
        Default value (``None`` allowed when ``optional``).
    help : str
        One sentence for the CLI ``--help`` and the app tooltip.
    low, high : float, optional
        Inclusive range for numbers (``low_open``/``high_open`` make an end exclusive).
    log : bool
        Show as a log-scale control (epsilon, delta, sigma).
    choices : tuple, optional
        Allowed values for ``choice``.
    privacy : bool
        True if the parameter changes the privacy guarantee (epsilon, delta, split, calibration).
    allow_inf : bool
        Accept ``inf`` (only epsilon: NOT PRIVATE explore runs).
    optional : bool
        ``None`` is accepted (meaning "derive it", e.g. ``n_components=None``).
    split_names : tuple[str, ...]
        Names of the budget parts for ``fraction_split`` (e.g. ``("mean", "covariance")``).
    """

    name: str
    kind: ParamKind
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    log: bool = False
    choices: tuple[Any, ...] | None = None
    privacy: bool = False
    allow_inf: bool = False
    optional: bool = False
    split_names: tuple[str, ...] = field(default_factory=tuple)

    @property
    def cli_flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def validate(self, value: Any) -> Any:
        """Return the value converted to the declared kind; raise ``ValueError`` naming ``name``."""
        if value is None:
            if self.optional:
                return None
            raise ValueError(f"{self.name} is required")
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            raise ValueError(f"{self.name} must be True or False, got {value!r}")
        if self.kind == "choice":
            if value not in (self.choices or ()):
                raise ValueError(f"{self.name} must be one of {list(self.choices or ())}, got {value!r}")
            return value
        if self.kind == "fraction_split":
            return self._validate_split(value)
        return self._validate_number(value)

    def _validate_number(self, value: Any) -> float | int:
        if isinstance(value, bool):
            raise ValueError(f"{self.name} must be a number, got {value!r}")
        try:
            num = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{self.name} must be a number, got {value!r}") from None
        if math.isnan(num):
            raise ValueError(f"{self.name} must be a number, got NaN")
        if math.isinf(num) and not (self.allow_inf and num > 0):
            raise ValueError(f"{self.name} must be finite, got {value!r}")
        if self.kind == "int" and not math.isinf(num):
            if num != int(num):
                raise ValueError(f"{self.name} must be a whole number, got {value!r}")
            num = int(num)
        if self.low is not None and (num < self.low or (self.low_open and num == self.low)):
            op = ">" if self.low_open else ">="
            raise ValueError(f"{self.name} must be {op} {self.low}, got {value!r}")
        if self.high is not None and not math.isinf(num) and (
            num > self.high or (self.high_open and num == self.high)
        ):
            op = "<" if self.high_open else "<="
            raise ValueError(f"{self.name} must be {op} {self.high}, got {value!r}")
        return num

    def _validate_split(self, value: Any) -> tuple[float, ...]:
        try:
            parts = tuple(float(v) for v in value)
        except (TypeError, ValueError):
            raise ValueError(f"{self.name} must be a sequence of fractions, got {value!r}") from None
        if self.split_names and len(parts) != len(self.split_names):
            raise ValueError(
                f"{self.name} needs {len(self.split_names)} fractions "
                f"({', '.join(self.split_names)}), got {len(parts)}"
            )
        if any(not (0 < p < 1) or math.isnan(p) for p in parts) and len(parts) > 1:
            raise ValueError(f"each fraction of {self.name} must lie in (0, 1), got {value!r}")
        if not abs(math.fsum(parts) - 1.0) <= 1e-6:
            raise ValueError(f"the fractions of {self.name} must sum to 1, got {sum(parts):.6g}")
        return parts

    def describe(self) -> dict[str, Any]:
        """JSON-friendly description (``dpcore describe``)."""
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "default": self.default,
                               "help": self.help, "privacy": self.privacy}
        if self.low is not None or self.high is not None:
            out["range"] = [self.low, self.high]
        if self.choices:
            out["choices"] = list(self.choices)
        if self.split_names:
            out["parts"] = list(self.split_names)
        return out


def validate_params(params: tuple[Param, ...], values: dict[str, Any]) -> dict[str, Any]:
    """Validate ``values`` against ``params``; unknown names raise ``ValueError``."""
    known = {p.name: p for p in params}
    unknown = set(values) - set(known)
    if unknown:
        raise ValueError(f"unknown parameter(s) {sorted(unknown)}; known: {sorted(known)}")
    return {name: known[name].validate(values.get(name, known[name].default)) for name in known}


# Parameters that almost every mechanism shares; declared once here.
EPSILON = Param(
    "epsilon", "float", 1.0, "Privacy budget: the release is epsilon-DP (inf = NOT PRIVATE, "
    "explore only).", low=0.0, low_open=True, log=True, privacy=True, allow_inf=True,
)
DELTA = Param(
    "delta", "float", 1e-5, "Failure probability of (epsilon, delta)-DP; keep it well below 1/n.",
    low=0.0, high=1.0, low_open=True, high_open=True, log=True, privacy=True,
)
