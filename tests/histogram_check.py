"""Shared statistical check of the DP class histogram (label_privacy="protected"), used by the
RON-Gauss, PCA-Gauss and MODIPS tests (tests/ is on sys.path under pytest)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats


def check_histogram_noise(mech, X: np.ndarray, y: np.ndarray, eps_h: float, releases: int = 40) -> None:
    """Over ``releases`` seeded releases, the noisy class counts minus the true ones are Laplace with
    scale ``2/eps_h`` (KS test), a 1.5x wrong scale either way is rejected, and the card's record
    states sensitivity 2, that scale and the histogram's epsilon ``eps_h``."""
    sizes = np.bincount(y, minlength=len(mech.classes))
    noise = []
    for seed in range(releases):
        rel, rel_diag = mech.set_params(random_state=seed).explore(X, y, n_samples=1)
        noise.append(rel_diag["class_counts_dp"] - sizes)
    assert rel.details["epsilon_parts"]["histogram"] == pytest.approx(eps_h)
    (rec,) = [r for r in rel.noise if r.statistic.startswith("class histogram")]
    assert (rec.distribution, rec.sensitivity) == ("laplace", 2.0)
    assert rec.scale == pytest.approx(2 / eps_h) and rec.epsilon == pytest.approx(eps_h)
    z = np.concatenate(noise) / (2 / eps_h)
    assert stats.kstest(z, stats.laplace().cdf).pvalue > 1e-3
    for wrong in (1.5, 1 / 1.5):
        assert stats.kstest(z, stats.laplace(scale=wrong).cdf).pvalue < 1e-4
