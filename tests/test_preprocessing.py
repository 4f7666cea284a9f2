"""``prepare_input``'s one-pass check: finiteness, data bounds and clipping from one column range."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dpcore.exceptions import PrivacyLeakWarning
from dpcore.preprocessing import (
    clip_to_bounds,
    column_range,
    map_row_blocks,
    prepare_input,
    row_blocks,
)


def test_row_blocks_cover_every_row_once():
    for n, d in [(1, 5), (64, 10_000), (100_001, 3), (5_000, 100)]:
        slices = list(row_blocks(n, d))
        covered = np.concatenate([np.arange(n)[sl] for sl in slices])
        np.testing.assert_array_equal(covered, np.arange(n))


@pytest.mark.parametrize("n, d", [(3, 7), (70_000, 7), (6_000, 1_000)])  # 1, 2 and 12 blocks
def test_column_range_matches_numpy_and_propagates_nan_and_inf(n, d):
    """Several blocks are reduced on threads (>= 8 blocks): same result as NumPy's."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    lo, hi = column_range(X)
    np.testing.assert_array_equal(lo, X.min(axis=0))
    np.testing.assert_array_equal(hi, X.max(axis=0))
    X[n - 1, 2] = np.nan
    X[n // 2, 4] = np.inf
    X[0, 5] = -np.inf
    lo, hi = column_range(X)
    assert np.isnan(lo[2]) and np.isnan(hi[2])
    assert hi[4] == np.inf and lo[5] == -np.inf
    assert np.isfinite(lo[[0, 1, 3, 6]]).all()


def test_map_row_blocks_keeps_block_order_on_threads():
    n, d = 10_000, 1_000
    blocks = list(row_blocks(n, d))
    assert len(blocks) >= 8
    for jobs in (1, 2, 4):
        got = map_row_blocks(lambda sl: (sl.start, sl.stop), n, d, n_jobs=jobs)
        assert got == [(sl.start, sl.stop) for sl in blocks]


def test_inside_bounds_is_a_read_only_view_not_a_copy():
    X = np.random.default_rng(1).random((1000, 4))
    data = prepare_input(X, bounds=(0, 1))
    assert np.shares_memory(data.X, X)
    assert not data.X.flags.writeable
    assert data.diagnostics["n_clipped_entries"] == 0
    with pytest.raises(ValueError):
        data.X[0, 0] = 5.0
    assert X.flags.writeable  # the caller's array is untouched


def test_outside_bounds_gives_a_clipped_copy_with_the_exact_count():
    rng = np.random.default_rng(2)
    X = rng.uniform(-0.5, 1.5, size=(20_000, 6))
    before = X.copy()
    data = prepare_input(X, bounds=(0, 1))
    assert not np.shares_memory(data.X, X)
    np.testing.assert_array_equal(X, before)
    np.testing.assert_array_equal(data.X, np.clip(before, 0, 1))
    assert data.diagnostics["n_clipped_entries"] == int(((before < 0) | (before > 1)).sum())
    assert data.diagnostics["n_clipped_entries"] > 0


def test_clip_to_bounds_per_column_bounds():
    X = np.array([[0.0, 10.0], [1.0, 20.0], [2.0, 30.0]])
    out, count = clip_to_bounds(X, np.array([[0.0, 2.0], [15.0, 30.0]]))
    np.testing.assert_array_equal(out, [[0, 15], [1, 20], [2, 30]])
    assert count == 1
    out, count = clip_to_bounds(X, np.array([[0.0, 2.0], [10.0, 30.0]]))
    assert count == 0 and np.shares_memory(out, X)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("bounds", [None, (0, 1)])
def test_non_finite_entries_are_rejected_with_counts(bad, bounds):
    X = np.random.default_rng(3).random((50_000, 3))
    X[[7, 40_000], 1] = bad
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        with pytest.raises(ValueError, match=r"2 NaN/inf entries in 2 rows \(first rows: \[7, 40000\]\)"):
            prepare_input(X, bounds=bounds)


def test_data_bounds_are_the_column_range_and_warn():
    X = np.random.default_rng(4).normal(size=(30_000, 3))
    with pytest.warns(PrivacyLeakWarning):
        data = prepare_input(X)
    np.testing.assert_array_equal(data.bounds, np.column_stack([X.min(axis=0), X.max(axis=0)]))
    assert data.bounds_source == "data"
    assert np.shares_memory(data.X, X) and data.diagnostics["n_clipped_entries"] == 0


def test_integer_and_float32_input_is_converted_to_float64():
    X = np.arange(12, dtype=np.int32).reshape(6, 2)
    data = prepare_input(X, bounds=(0, 11))
    assert data.X.dtype == np.float64
    np.testing.assert_array_equal(data.X, X)
