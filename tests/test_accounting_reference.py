"""Cross-check of the fast DPMix accountant against a plain, independent reference implementation
(tests/dpmix_reference.py: mpmath alternating sums for B(m), an explicit sum over j per order) at
orders far above the 256 where dp-accounting stops using the tight bound."""

import numpy as np
import pytest
from dpmix_reference import epsilon as ref_epsilon  # tests/ is on sys.path under pytest
from dpmix_reference import per_mixture_rdp

from dpcore import accounting

N = 10**6


@pytest.mark.parametrize(("ell", "sigma", "bound"), [(64, 8.0, "tight"), (64, 8.0, "paper"),
                                                      (256, 32.0, "tight")])
def test_per_order_rdp_matches_reference_around_alpha_star(ell, sigma, bound):
    res = accounting.dpmix_epsilon(sigma_x=sigma, sigma_y=sigma, ell=ell, n=N, n_mixtures=N, d_x=50,
                                   d_y=50, delta=1 / N, bound=bound)
    alphas = np.arange(max(2, int(res.alpha) - 20), int(res.alpha) + 21)
    ours = accounting.dpmix_rdp(alphas, sigma_x=sigma, sigma_y=sigma, ell=ell, n=N, d_x=50, d_y=50,
                                bound=bound)
    ref = per_mixture_rdp(alphas, ell / N, (100 / sigma**2) / ell**2, bound, jmax=40)
    np.testing.assert_allclose(ours, ref, rtol=1e-8)
    # the reported epsilon is the minimum of the reference objective over this window
    eps_ref, alpha_ref = ref_epsilon(sigma, ell, N, N, 50, 50, 1 / N, bound, alphas, jmax=40)
    assert float(res.epsilon) == pytest.approx(eps_ref, rel=1e-9)
    assert int(res.alpha) == alpha_ref


def test_small_order_case_matches_reference_scan():
    alphas = np.arange(2, 60)
    eps_ref, alpha_ref = ref_epsilon(4.0, 1, N, N, 50, 50, 1 / N, "tight", alphas)
    res = accounting.dpmix_epsilon(sigma_x=4.0, sigma_y=4.0, ell=1, n=N, n_mixtures=N, d_x=50, d_y=50,
                                   delta=1 / N)
    assert float(res.epsilon) == pytest.approx(eps_ref, rel=1e-9) and int(res.alpha) == alpha_ref
