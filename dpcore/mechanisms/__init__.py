"""Release mechanisms. Each module defines one mechanism and registers it by name.

>>> from dpcore.mechanisms import LocalGaussian, get_mechanism
"""

from dpcore.mechanisms.base import MECHANISMS, Mechanism, available_mechanisms, get_mechanism
from dpcore.mechanisms.local_gaussian import LocalGaussian

# Mechanism modules register themselves on import; add one line per new module here.

__all__ = [
    "MECHANISMS",
    "LocalGaussian",
    "Mechanism",
    "available_mechanisms",
    "get_mechanism",
]
