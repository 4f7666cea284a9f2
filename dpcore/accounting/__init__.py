"""Privacy accounting, by concern (after dp-accounting's split of events, accountants, calibration).

* :mod:`dpcore.accounting.rdp` -- general Rényi DP: the Gaussian mechanism's RDP, the RDP ->
  ``(epsilon, delta)`` conversion term and its minimisation over orders, zCDP.
* :mod:`dpcore.accounting.dpmix` -- the DPMix accountant (subsampled Gaussian mixtures):
  per-mixture RDP, the epsilon of ``T`` mixtures, the sigma for a target epsilon, and
  :func:`dpmix_noise`, which resolves a release's noise from DPMix's parameters.
* :mod:`dpcore.accounting._rdp_terms` and :mod:`dpcore.accounting._order_search` -- the numerics
  behind the DPMix accountant (exact log-space moments and proven truncation; branch-and-bound over
  every integer order). Private.

Every public name is importable from ``dpcore.accounting`` directly, as before the split.
"""

from __future__ import annotations

from dpcore.accounting._rdp_terms import _log_B, _log_B_quadrature  # noqa: F401  (tests)
from dpcore.accounting.dpmix import (
    BOUNDS,
    DPMixNoise,
    dpmix_calibrate_sigma,
    dpmix_epsilon,
    dpmix_noise,
    dpmix_rdp,
)
from dpcore.accounting.rdp import (
    CONVERSIONS,
    RDPEpsilon,
    gaussian_rdp,
    rdp_conversion_term,
    rdp_to_dp,
    zcdp_epsilon,
    zcdp_rho,
)

__all__ = [
    "BOUNDS",
    "CONVERSIONS",
    "DPMixNoise",
    "RDPEpsilon",
    "dpmix_calibrate_sigma",
    "dpmix_epsilon",
    "dpmix_noise",
    "dpmix_rdp",
    "gaussian_rdp",
    "rdp_conversion_term",
    "rdp_to_dp",
    "zcdp_epsilon",
    "zcdp_rho",
]
