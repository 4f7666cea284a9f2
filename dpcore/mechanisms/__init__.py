"""Release mechanisms. Each module defines one mechanism and registers it by name.

>>> from dpcore.mechanisms import LocalGaussian, get_mechanism
"""

# ruff: noqa: I001  (the import order is the registration order, which menus follow)
from dpcore.mechanisms.base import MECHANISMS, Mechanism, available_mechanisms, get_mechanism
from dpcore.mechanisms.jl_laplace import JLLaplace
from dpcore.mechanisms.dppro import DPPro
from dpcore.mechanisms.ron_gauss import RONGauss
from dpcore.mechanisms.pca_gauss import PCAGauss
from dpcore.mechanisms.identity_laplace import IdentityLaplace
from dpcore.mechanisms.pca_identity import PCAIdentity
from dpcore.mechanisms.modips import MODIPS
from dpcore.mechanisms.rp_gaussian import RPGaussian
from dpcore.mechanisms.dpmix import DPMix
from dpcore.mechanisms.local_gaussian import LocalGaussian

# Mechanism modules register themselves on import; add one line per new module here.

__all__ = [
    "MECHANISMS",
    "MODIPS",
    "IdentityLaplace",
    "PCAIdentity",
    "RPGaussian",
    "DPMix",
    "DPPro",
    "JLLaplace",
    "LocalGaussian",
    "Mechanism",
    "PCAGauss",
    "RONGauss",
    "available_mechanisms",
    "get_mechanism",
]
