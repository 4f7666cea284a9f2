"""Plain notices for pages whose content depends on what a mechanism supports."""

from __future__ import annotations

from dpcore.mechanisms import MECHANISMS

__all__ = [
    "supported_by",
]


def supported_by(capability: str | None) -> list[str]:
    """Registered mechanisms with ``capability`` (all when None)."""
    return [n for n, cls in MECHANISMS.items() if capability is None or capability in cls.capabilities]
