"""Privacy ledger: the releases made from one dataset and their total cost.

Totals use **basic (sequential) composition**: epsilons add up and deltas add up (Dwork & Roth
2014, Thm 3.16). It is valid for any mix of mechanisms but loose; releases under different
neighbouring relations are summed as stated, which is only meaningful if every relation is implied
by the one the custodian cares about — the ledger says so in :meth:`Ledger.summary`.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dpcore.exceptions import DataValidationError


@dataclass(frozen=True)
class LedgerEntry:
    """One published release: mechanism, guaranteed (epsilon, delta), relation, time, CSV hash."""

    mechanism: str
    epsilon: float
    delta: float
    neighbouring: str = "replace-one"
    dataset: str = ""
    created_utc: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    sha256: str = ""

    def __post_init__(self) -> None:
        for name, hi in (("epsilon", math.inf), ("delta", 1.0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 <= v <= hi) \
                    or not math.isfinite(v):
                raise TypeError(f"ledger entry {name} must be a finite number in [0, {hi}], got {v!r}")

    @classmethod
    def from_card(cls, card: dict[str, Any], dataset: str = "") -> LedgerEntry:
        g = card["guarantee"]
        return cls(
            mechanism=card["mechanism"], epsilon=float(g["epsilon"]), delta=float(g["delta"] or 0.0),
            neighbouring=g["neighbouring"], dataset=dataset, created_utc=card["created_utc"],
            sha256=card["sha256"],
        )


@dataclass
class Ledger:
    """A list of :class:`LedgerEntry` with basic-composition totals and a budget check."""

    entries: list[LedgerEntry] = field(default_factory=list)

    @property
    def total_epsilon(self) -> float:
        return math.fsum(e.epsilon for e in self.entries)

    @property
    def total_delta(self) -> float:
        return math.fsum(e.delta for e in self.entries)

    def would_exceed(self, epsilon: float, budget: float | None, *, delta: float = 0.0,
                     delta_budget: float | None = None) -> bool:
        """True if adding a release of ``(epsilon, delta)`` pushes a total past its budget."""
        over_eps = budget is not None and self.total_epsilon + epsilon > budget * (1 + 1e-12)
        over_delta = delta_budget is not None and self.total_delta + delta > delta_budget * (1 + 1e-12)
        return bool(over_eps or over_delta)

    def add(self, entry: LedgerEntry) -> None:
        self.entries.append(entry)

    def summary(self) -> str:
        relations = sorted({e.neighbouring for e in self.entries})
        text = (f"{len(self.entries)} release(s); total epsilon = {self.total_epsilon:.4g}, "
                f"total delta = {self.total_delta:.3g} (basic composition)")
        if len(relations) > 1:
            text += (f". Releases use different neighbouring relations ({', '.join(relations)}); "
                     "their epsilons are not directly comparable and the sum is only indicative.")
        return text

    # ------------------------------------------------------------------ files
    @classmethod
    def load(cls, path: str | Path) -> Ledger:
        """Read a ledger JSON file; a missing file is an empty ledger.

        Raises
        ------
        DataValidationError
            If the file exists but is not a ledger.
        """
        path = Path(path)
        if not path.exists():
            return cls()
        try:
            raw = json.loads(path.read_text())
            return cls([LedgerEntry(**e) for e in raw["entries"]])
        except (ValueError, KeyError, TypeError) as exc:
            raise DataValidationError(f"{path} is not a dpcore ledger file: {exc}") from None

    def save(self, path: str | Path) -> None:
        payload = {
            "composition": "basic",
            "total_epsilon": self.total_epsilon,
            "total_delta": self.total_delta,
            "entries": [asdict(e) for e in self.entries],
        }
        Path(path).write_text(json.dumps(payload, indent=2))
