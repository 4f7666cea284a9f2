"""A row-wise mechanism's preview of some rows (``Mechanism.explore(..., rows=...)``, issue 16 item 7).

The Explore page draws only the released rows it shows for LocalGaussian (each row's noise depends
on that row only). These tests check that such a partial release is the full release restricted to
those rows in law: same noise records, guarantee, public facts and clipping counts, rows at the
right positions, noise of the stated scale; and that anything else is refused.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpcore.data import load_dataset
from dpcore.mechanisms import LocalGaussian, get_mechanism


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


def test_some_rows_carry_the_full_release_facts(digits):
    rows = np.arange(3, digits.n_samples, 7)
    full, full_diag = LocalGaussian(epsilon=0.5, random_state=1).explore(digits)
    some, some_diag = LocalGaussian(epsilon=0.5, random_state=1).explore(digits, rows=rows)
    assert some.data.shape == (rows.size, digits.X.shape[1]) and some.labels.shape == (rows.size,)
    assert some.n_rows == full.n_rows == digits.n_samples  # private input rows, not the rows drawn
    assert some.details["drawn_rows"] == rows.size and "drawn_rows" not in full.details
    assert some.noise == full.noise and some.guarantee == full.guarantee
    assert some.public_facts == full.public_facts and some_diag == full_diag
    assert some.seeded and not some.downloadable


def test_rows_are_the_input_rows_at_those_positions_without_noise(digits):
    rows = np.array([5, 0, 1796, 42])  # any order: the release follows it
    rel, _ = LocalGaussian(epsilon=np.inf, random_state=0).explore(digits, rows=rows)
    np.testing.assert_array_equal(rel.data, np.clip(digits.X[rows], 0, 16))
    np.testing.assert_array_equal(rel.labels, digits.classes[digits.y[rows]])


def test_noise_of_the_drawn_rows_has_the_stated_scale(digits):
    """Per-coordinate noise ~ N(0, sigma^2) (discrete Gaussian on a fine grid): a chi-square test of
    its variance at the 1e-4 level on 898 x 64 draws, and a t-test of its mean."""
    rows = np.arange(1, digits.n_samples, 2)  # 898 rows
    rel, _ = LocalGaussian(epsilon=1.0, delta=1e-5, random_state=3).explore(digits, rows=rows)
    noise = (rel.data - digits.X[rows]).ravel()
    sigma = rel.noise[0].scale
    chi2 = float(np.sum(noise**2) / sigma**2)
    dof = noise.size
    assert stats.chi2.ppf(5e-5, dof) < chi2 < stats.chi2.ppf(1 - 5e-5, dof)
    assert abs(noise.mean()) < 4.5 * sigma / np.sqrt(dof)


@pytest.mark.parametrize("rows", [np.array([0, 1797]), np.array([-1]), np.array([[0, 1]]), np.array([0.5])])
def test_rows_outside_the_input_are_refused(digits, rows):
    with pytest.raises(ValueError, match="rows must be"):
        LocalGaussian(epsilon=1.0, random_state=0).explore(digits, rows=rows)


def test_rows_are_refused_unless_a_seeded_preview_of_a_row_wise_mechanism(digits):
    mech = get_mechanism("dppro")
    assert not mech.row_wise and LocalGaussian.row_wise
    with pytest.raises(ValueError, match="not row-wise"):
        mech(epsilon=1.0, random_state=0).explore(digits, rows=np.arange(10))
    with pytest.raises(ValueError, match="n_samples=None"):
        LocalGaussian(epsilon=1.0, random_state=0).explore(digits, rows=np.arange(10), n_samples=1797)
    with pytest.raises(ValueError, match="seeded preview"):  # a partial release is never published
        LocalGaussian(epsilon=1.0).explore(digits, rows=np.arange(10))
