"""DPMix: index sampler, mixing, noise, calibration through the accountant, scaling, errors, figures."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from scipy import ndimage, stats
from sklearn.datasets import load_digits

from dpcore import accounting
from dpcore.data import Dataset
from dpcore.exceptions import NotPrivateError
from dpcore.mechanisms import DPMix, dpmix, get_mechanism
from dpcore.mechanisms.dpmix import (
    draw_mixtures,
    mixture_means,
    sample_mixture_indices,
    scale_to_unit,
    to_original_units,
)
from dpcore.preprocessing import prepare_input

P_MIN = 1e-3  # smallest acceptable p-value of a goodness-of-fit test (seeded, so deterministic)


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:400], y[:400]


def _release(X, y=None, **kw):
    kw.setdefault("random_state", 0)
    kw.setdefault("bounds", (0.0, 16.0))
    if y is not None:
        kw.setdefault("classes", np.arange(10))
    return DPMix(**kw).release(X, y)


# ------------------------------------------------------------------------------------ index sampler
@pytest.mark.parametrize("method", ["floyd", "keys"])
def test_sampler_rows_distinct_and_subsets_uniform(method):
    """Every row holds ell distinct indices; all C(6, 3) = 20 subsets are equally likely."""
    n, ell, size = 6, 3, 40_000
    idx = sample_mixture_indices(n, ell, size, np.random.default_rng(1), method=method)
    assert idx.shape == (size, ell) and idx.min() >= 0 and idx.max() < n
    srt = np.sort(idx, axis=1)
    assert np.all(np.diff(srt, axis=1) > 0)
    codes = (srt * np.array([n * n, n, 1])).sum(axis=1)
    subsets = [a * n * n + b * n + c for a, b, c in combinations(range(n), 3)]
    counts = np.array([np.count_nonzero(codes == s) for s in subsets])
    assert counts.sum() == size
    assert stats.chisquare(counts).pvalue > P_MIN


@pytest.mark.parametrize("method", ["floyd", "keys"])
def test_sampler_inclusion_frequencies(method):
    """Each of n = 50 rows is included with probability ell/n (chi-square over the 50 counts)."""
    n, ell, size = 50, 7, 20_000
    idx = sample_mixture_indices(n, ell, size, np.random.default_rng(2), method=method)
    counts = np.bincount(idx.ravel(), minlength=n)
    assert abs(counts.mean() / size - ell / n) < 1e-12
    assert stats.chisquare(counts).pvalue > P_MIN
    # pairs: P(i and j in one mixture) = ell (ell - 1) / (n (n - 1))
    pair = np.zeros((n, n))
    for a, b in combinations(range(ell), 2):
        np.add.at(pair, (idx[:, a], idx[:, b]), 1)
    pair = pair + pair.T
    expected = size * ell * (ell - 1) / (n * (n - 1))
    iu = np.triu_indices(n, 1)
    z = (pair[iu] - expected) / math.sqrt(expected)
    assert abs(z.mean()) < 0.1 and 0.8 < z.std() < 1.2


def _floyd_step_by_step(n: int, ell: int, u: np.ndarray) -> np.ndarray:
    """Floyd's algorithm as written, one position after another for every row (the reference)."""
    out = np.empty(u.shape, dtype=np.int64)
    for k in range(ell):
        j = n - ell + k
        t = np.minimum((u[:, k] * (j + 1)).astype(np.int64), j)
        if k:
            t[(out[:, :k] == t[:, None]).any(axis=1)] = j
        out[:, k] = t
    return out


@pytest.mark.parametrize(("n", "ell"), [(16, 16), (20, 16), (50, 7), (1_000, 16), (10**7, 16), (5, 1)])
def test_floyd_keeps_distinct_draws_and_replaces_only_in_rows_with_a_repeat(n, ell):
    """The sampler replaces step by step only in the rows whose draws repeat: its indices are
    exactly Floyd's, step by step, from the same uniforms (few repeats at large n, nearly every
    row at n close to ell)."""
    size = 20_000
    idx = sample_mixture_indices(n, ell, size, np.random.default_rng(n), method="floyd")
    u = np.random.default_rng(n).random((size, ell))
    np.testing.assert_array_equal(idx, _floyd_step_by_step(n, ell, u))


def test_sampler_is_chunk_invariant_and_validates():
    for method in ("floyd", "keys"):
        rng = np.random.default_rng(3)
        parts = [sample_mixture_indices(30, 5, k, rng, method=method) for k in (4, 9, 1)]
        whole = sample_mixture_indices(30, 5, 14, np.random.default_rng(3), method=method)
        assert np.array_equal(np.vstack(parts), whole)
    full = sample_mixture_indices(8, 8, 5, np.random.default_rng(0))
    assert np.array_equal(np.sort(full, axis=1), np.tile(np.arange(8), (5, 1)))
    for bad in (0, 9):
        with pytest.raises(ValueError, match="ell"):
            sample_mixture_indices(8, bad, 3, np.random.default_rng(0))


# ------------------------------------------------------------------------------------ mixing
def test_zero_noise_mixture_is_mean_of_its_rows():
    rng = np.random.default_rng(4)
    Z = rng.random((40, 6))
    out, idx = draw_mixtures(Z, 5, 300, np.zeros(6), np.random.default_rng(5), return_indices=True)
    np.testing.assert_allclose(out, Z[idx].mean(axis=1), rtol=0, atol=1e-14)
    assert np.all(np.diff(np.sort(idx, axis=1), axis=1) > 0)
    np.testing.assert_allclose(mixture_means(Z, idx[:3]), Z[idx[:3]].mean(axis=1), atol=1e-14)


@pytest.mark.parametrize("ell", [1, 3, 64, 300])  # 300: counts summed in uint32
def test_compiled_mixing_gives_the_bits_of_the_numpy_path(ell, monkeypatch):
    """The numba kernels (rows added straight into one accumulator) return the NumPy gather-and-sum's
    values bit for bit: float32 and float64 rows, uint8 counts into float32 and float64."""
    pytest.importorskip("numba")
    from dpcore.mechanisms import _mixing_kernels

    rng = np.random.default_rng(ell)
    counts = rng.integers(0, 256, (400, 37), dtype=np.uint8)
    unit = rng.uniform(0.001, 0.01, 37)
    idx = sample_mixture_indices(400, ell, 150, rng)
    cases = [(counts.astype(np.float32) / 255, None, np.float32), (counts / 255.0, None, np.float64),
             (counts, unit, np.float32), (counts, unit, np.float64)]
    for Z, u, dtype in cases:
        assert _mixing_kernels.kernels() is not None
        compiled = mixture_means(Z, idx, out=np.empty((150, 37), dtype=dtype), unit=u)
        with monkeypatch.context() as m:
            m.setenv("DPCORE_NO_NUMBA", "1")
            assert _mixing_kernels.kernels() is None
            plain = mixture_means(Z, idx, out=np.empty((150, 37), dtype=dtype), unit=u)
        assert np.array_equal(compiled, plain)
        reference = (Z[idx].astype(float) * (1.0 if u is None else u)).mean(axis=1)
        np.testing.assert_allclose(compiled, reference, rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("ell", [3, 40])  # 40 of 50 rows uses the uniform-keys sampler
def test_chunked_equals_unchunked(dtype, ell):
    """Any chunk size gives the very same release (indices and noise streams are chunk-invariant)."""
    Z = np.random.default_rng(6).random((50, 16)).astype(dtype)
    sigma = np.r_[np.full(12, 0.3), np.full(4, 0.1)]
    kw = dict(image_shape=(3, 4), n_image_columns=12, denoise=0.8)
    ref = draw_mixtures(Z, ell, 101, sigma, np.random.default_rng(7), chunk_rows=10**9, **kw)
    for rows in (1, 7, 50):
        out = draw_mixtures(Z, ell, 101, sigma, np.random.default_rng(7), chunk_rows=rows, **kw)
        assert out.dtype == dtype
        assert np.array_equal(out, ref)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_thread_count_does_not_change_the_release(dtype, monkeypatch):
    """Mixing runs on worker threads; indices and noise are drawn in one order whatever n_jobs.

    The gather blocks are made tiny so every worker sums several blocks per chunk.
    """
    monkeypatch.setattr(dpmix, "GATHER_BYTES", 512)
    Z = np.random.default_rng(10).random((300, 9)).astype(dtype)
    sigma = np.full(9, 0.2)
    ref, idx = draw_mixtures(Z, 17, 500, sigma, np.random.default_rng(11), n_jobs=1,
                             chunk_rows=64, return_indices=True)
    for jobs in (2, 3, -1):
        out = draw_mixtures(Z, 17, 500, sigma, np.random.default_rng(11), n_jobs=jobs, chunk_rows=64)
        assert np.array_equal(out, ref)
    clean = draw_mixtures(Z, 17, 500, np.zeros(9), np.random.default_rng(11), n_jobs=3, chunk_rows=64)
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(clean, Z[idx].astype(float).mean(axis=1), rtol=0, atol=tol)
    with pytest.raises(ValueError, match="n_jobs"):
        draw_mixtures(Z, 17, 5, sigma, np.random.default_rng(0), n_jobs=0)


@pytest.mark.slow
def test_mixing_input_equals_scale_to_unit_next_to_the_labels():
    """Filled by threads over >= 8 row blocks; equal to the plain formula, labels in place."""
    rng = np.random.default_rng(12)
    n, d = 4000, 1200
    X = rng.uniform(-3, 7, size=(n, d))
    X[:, 2] = 1.5  # a constant column with hi == lo maps to 0
    bounds = np.tile([-3.0, 7.0], (d, 1))
    bounds[2] = 1.5
    data = prepare_input(X, bounds=bounds)
    labels = rng.random((n, 2))
    for dtype in (np.float64, np.float32):
        Z, unit = dpmix._mixing_input(data, labels, np.dtype(dtype))
        assert unit is None  # non-integer values: the float rows
        expected = np.hstack([scale_to_unit(X, bounds), labels]).astype(dtype)
        assert Z.dtype == dtype and np.array_equal(Z, expected)
    assert np.all(Z[:, 2] == 0)


@pytest.mark.parametrize("ell", [16, 300])  # 16-bit and 32-bit integer sums
def test_counts_path_equals_float_path(ell):
    """uint8 counts summed exactly then scaled by unit/ell == the float rows' means."""
    rng = np.random.default_rng(13)
    counts = rng.integers(0, 256, size=(400, 12)).astype(np.uint8)
    counts[:, 10:] = rng.integers(0, 2, size=(400, 2))  # 0/1 label columns, unit 1
    unit = np.r_[np.full(10, 1 / 255), 1.0, 1.0]
    sigma = np.full(12, 0.05)
    ref, idx = draw_mixtures(counts * unit, ell, 250, sigma, np.random.default_rng(14),
                             return_indices=True, chunk_rows=64)
    for jobs in (1, 2):
        out = draw_mixtures(counts, ell, 250, sigma, np.random.default_rng(14), unit=unit,
                            n_jobs=jobs, chunk_rows=64)
        assert out.dtype == np.float64
        np.testing.assert_allclose(out, ref, rtol=0, atol=1e-13)
    out32 = draw_mixtures(counts, ell, 250, sigma, np.random.default_rng(14), unit=unit,
                          dtype=np.float32, chunk_rows=7)
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, ref, rtol=0, atol=1e-6)
    exact = (counts[idx].astype(np.int64).sum(axis=1) * unit) / ell
    clean = draw_mixtures(counts, ell, 250, np.zeros(12), np.random.default_rng(14), unit=unit,
                          chunk_rows=64)
    np.testing.assert_allclose(clean, exact, rtol=1e-15, atol=0)


def test_mixing_input_uses_counts_for_integer_pixels_and_one_hot_labels():
    rng = np.random.default_rng(15)
    X = rng.integers(0, 256, size=(3000, 20)).astype(float)
    X[:, 3] = 7.0  # constant column, bounds (7, 7): count 0, unit 0
    bounds = np.tile([0.0, 255.0], (20, 1))
    bounds[3] = 7.0
    bounds[5] = [-10.0, 245.0]  # integer lower bound: counts x + 10, in 10..255 after clipping
    data = prepare_input(np.clip(X, bounds[:, 0], bounds[:, 1]), bounds=bounds)
    labels = np.eye(3)[rng.integers(0, 3, 3000)]
    Z, unit = dpmix._mixing_input(data, labels, np.dtype(np.float32))
    assert Z.dtype == np.uint8 and unit is not None
    np.testing.assert_allclose(Z * unit, np.hstack([scale_to_unit(data.X, bounds), labels]),
                               rtol=1e-15, atol=0)
    assert unit[3] == 0 and np.all(Z[:, 3] == 0)
    # a width over 255 or a fractional bound falls back to the float rows
    for b in ([0.0, 256.0], [0.5, 255.5]):
        wide = np.tile(b, (20, 1))
        Zf, unit_f = dpmix._mixing_input(prepare_input(np.clip(X, *b), bounds=wide), labels,
                                         np.dtype(np.float32))
        assert unit_f is None and Zf.dtype == np.float32


def test_release_on_integer_images_matches_the_float_computation():
    """The whole DPMix release on 0..255 pixels: counts path vs float rows, same noise."""
    rng = np.random.default_rng(16)
    X = rng.integers(0, 256, size=(500, 16)).astype(float)
    y = rng.integers(0, 3, 500)
    kw = dict(ell=8, sigma_x=0.1, classes=np.arange(3), random_state=3)
    counts_rel = DPMix(bounds=(0, 255), **kw).release(X, y)
    # bounds (0, 255) + 1e-9 width: not integer, so the float rows are mixed instead
    float_rel = DPMix(bounds=(0, 255 + 1e-9), **kw).release(X, y)
    np.testing.assert_allclose(counts_rel.data, float_rel.data, rtol=0, atol=1e-9)


def test_mixture_mean_and_variance_match_sampling_formulas():
    """E[mixture] = column mean; Var = s^2/ell (n - ell)/(n - 1) + sigma^2 (finite population)."""
    rng = np.random.default_rng(8)
    n, ell, T, sigma = 60, 12, 40_000, 0.2
    Z = rng.random((n, 3))
    out = draw_mixtures(Z, ell, T, np.full(3, sigma), np.random.default_rng(9))
    pop_var = Z.var(axis=0)  # population variance (ddof=0)
    var = pop_var * n / (n - 1) / ell * (n - ell) / n + sigma**2
    assert np.all(np.abs(out.mean(axis=0) - Z.mean(axis=0)) < 4 * np.sqrt(var / T))
    # sample variance of T draws: relative s.e. ~ sqrt(2/T) = 0.7 %; allow 4 %
    np.testing.assert_allclose(out.var(axis=0, ddof=1), var, rtol=0.04)


def test_noise_spread_matches_sigma_in_the_release(digits):
    """Same seed, same indices: noisy minus noiseless release is the noise, std sigma_x / sigma_y."""
    X, y = digits
    noisy = _release(X, y, ell=4, sigma_x=0.5, sigma_y=0.25, random_state=11)
    clean = _release(X, y, ell=4, sigma_x=0.0, sigma_y=0.0, random_state=11)
    res_x = noisy.data - clean.data
    res_y = noisy.labels[:, :10] - clean.labels[:, :10]
    # 400 x 64 and 400 x 10 draws: relative s.e. of the std 0.18 % and 1.1 %; allow 2 % and 5 %
    assert abs(res_x.std() / 0.5 - 1) < 0.02 and abs(res_x.mean()) < 0.01
    assert abs(res_y.std() / 0.25 - 1) < 0.05
    assert stats.kstest(res_x.ravel()[:5000] / 0.5, "norm").pvalue > P_MIN
    assert [r.scale for r in noisy.noise] == [0.5, 0.25]


# ------------------------------------------------------------------------------------ privacy
def test_calibrated_sigma_achieves_target_epsilon(digits):
    X, y = digits
    n = len(X)
    rel = _release(X, y, epsilon=3.0, ell=8)
    d = rel.details
    delta = min(1e-5, n ** -1.5)  # DPMix's default delta (its rule is checked below)
    common = dict(ell=8, n=n, n_mixtures=n, d_x=64, d_y=10, delta=delta)
    sigma = accounting.dpmix_calibrate_sigma(epsilon=3.0, **common)
    # calibrated at (3, 1/n) minus the discrete Gaussian sampler's reserve (dpcore.noise): the card
    # states (3, 1/n), the ideal mechanism is calibrated at calibrated_at
    assert d["sigma_x"] == pytest.approx(sigma, rel=1e-7) and d["sigma_y"] == d["sigma_x"]
    at = d["noise_slack"]["calibrated_at"]
    assert 3.0 - 1e-7 < at["epsilon"] < 3.0 and at["delta"] < 1 / n
    got = accounting.dpmix_epsilon(sigma_x=d["sigma_x"], sigma_y=d["sigma_x"],
                                   **{**common, "delta": at["delta"]})
    assert got.epsilon <= at["epsilon"]
    assert rel.guarantee.epsilon == 3.0
    # a slightly smaller sigma would break the target (calibration is the smallest sigma)
    worse = accounting.dpmix_epsilon(sigma_x=0.99 * sigma, sigma_y=0.99 * sigma, **common)
    assert worse.epsilon > 3.0
    assert rel.guarantee.delta == pytest.approx(delta) and d["delta_rule"] == "min(1e-5, n^-1.5)"
    assert rel.guarantee.neighbouring == "replace-one" and rel.guarantee.kind == "approx"
    assert rel.noise[0].sensitivity == pytest.approx(math.sqrt(64) / 8)
    assert rel.noise[1].sensitivity == pytest.approx(math.sqrt(10) / 8)


@pytest.mark.parametrize("bound", ["tight", "paper"])
def test_explicit_sigma_reports_the_accountants_epsilon(digits, bound):
    X, y = digits
    rel = _release(X, y, ell=16, sigma_x=0.8, sigma_ratio=2.0, delta=1e-4, bound=bound,
                   n_mixtures=200)
    got = accounting.dpmix_epsilon(sigma_x=0.8, sigma_y=1.6, ell=16, n=400, n_mixtures=200,
                                   d_x=64, d_y=10, delta=1e-4, bound=bound)
    slack = rel.details["noise_slack"]["extra_epsilon"]  # the discrete Gaussian sampler's (dpcore.noise)
    assert 0 < slack < 1e-7
    assert rel.guarantee.epsilon == pytest.approx(got.epsilon + slack, rel=1e-12)
    assert rel.details["sigma_y"] == pytest.approx(1.6) and rel.data.shape == (200, 64)
    assert rel.details["alpha_star"] == got.alpha
    assert rel.calibration == bound and rel.parameters["epsilon"] == 10.0
    assert "ignored" in rel.details["note"]


def test_paper_bound_is_never_below_tight(digits):
    X, y = digits
    eps = {b: _release(X, y, ell=4, sigma_x=1.5, bound=b).guarantee.epsilon for b in ("tight", "paper")}
    assert eps["tight"] <= eps["paper"]


def test_infinite_epsilon_and_zero_sigma_are_not_private(digits, tmp_path):
    X, y = digits
    for kw in ({"epsilon": math.inf}, {"sigma_x": 0.0}, {"sigma_x": 1.0, "sigma_y": 0.0}):
        rel = _release(X, y, random_state=None, **kw)
        assert math.isinf(rel.guarantee.epsilon) and not rel.is_private
        with pytest.raises(NotPrivateError):
            rel.save(tmp_path / "out.csv")


def test_private_release_saves_without_seed_or_indices(digits, tmp_path):
    X, y = digits
    rel = _release(X, y, ell=8, sigma_x=1.0, random_state=None)
    assert rel.is_private and rel.downloadable
    files = rel.save(tmp_path / "mix.csv")
    card = (tmp_path / "mix.card.json").read_text()
    assert "random_state" not in card and "seed" not in card
    assert set(np.load(files["transform"]).files) == {"lo", "hi"}
    assert get_mechanism("dpmix") is DPMix and DPMix.space == "mixtures"
    assert DPMix.capabilities == frozenset({"rdp", "images"})


# ------------------------------------------------------------------------------------ units, tasks
def test_scaling_uses_public_bounds_not_the_data_range():
    rng = np.random.default_rng(12)
    X = rng.uniform(2.0, 6.0, size=(30, 3))
    X[0, 0] = 50.0  # outside the public bounds: clipped to hi
    rel = DPMix(ell=1, sigma_x=0.0, bounds=(0.0, 10.0), random_state=1).release(X)
    scaled = np.clip(X, 0, 10) / 10.0
    np.testing.assert_allclose(rel.transform(X), scaled)
    # every released row (ell = 1, no noise) is one of the scaled rows
    dist = np.abs(rel.data[:, None, :] - scaled[None, :, :]).max(axis=2).min(axis=1)
    assert dist.max() < 1e-12
    assert rel.data.min() >= 0.2 - 1e-12 and rel.data.max() <= 1.0
    np.testing.assert_allclose(to_original_units(rel, rel.transform(X)), np.clip(X, 0, 10))
    assert rel.labels is None and len(rel.noise) == 1 and rel.details["d_y"] == 0
    np.testing.assert_array_equal(scale_to_unit(np.ones((2, 2)), np.array([[1, 1], [0, 2]])),
                                  [[0.0, 0.5], [0.0, 0.5]])  # constant column -> 0


def test_regression_label_scaled_with_public_label_bounds():
    rng = np.random.default_rng(13)
    X = rng.random((50, 4))
    yv = rng.uniform(10, 20, 50)
    rel = DPMix(ell=5, sigma_x=0.0, bounds=(0, 1), label_bounds=(0, 40), task="regression",
                random_state=2).release(X, yv)
    assert rel.label_columns == ["label"] and rel.labels.shape == (50,)
    assert 10 / 40 - 1e-12 <= rel.labels.min() and rel.labels.max() <= 20 / 40 + 1e-12
    assert rel.noise[1].sensitivity == pytest.approx(1 / 5) and rel.details["d_y"] == 1


def test_classification_columns_soft_labels_and_argmax(digits):
    X, y = digits
    rel = _release(X, y, ell=1, sigma_x=0.0)
    # the argmax column is named for what it is (issue 13): one trains on the soft labels
    assert rel.label_columns == [f"label={c}" for c in range(10)] + ["label_argmax"]
    soft = rel.labels[:, :10]
    assert np.all(np.isin(soft, [0.0, 1.0])) and np.all(soft.sum(axis=1) == 1)
    np.testing.assert_array_equal(rel.labels[:, 10], np.argmax(soft, axis=1))
    frame = rel.to_frame()
    assert list(frame.columns[-11:]) == rel.label_columns and frame.shape == (400, 64 + 11)
    strings = _release(X, np.array([f"c{v}" for v in y]), classes=[f"c{v}" for v in range(10)], ell=2,
                       sigma_x=0.0)
    assert set(strings.labels[:, -1]) <= {f"c{v}" for v in range(10)}


def test_float32_matches_float64(digits):
    X, y = digits
    a = _release(X, y, ell=4, sigma_x=0.3, dtype="float64", random_state=5)
    b = _release(X, y, ell=4, sigma_x=0.3, dtype="float32", random_state=5)
    assert b.data.dtype == np.float32
    np.testing.assert_allclose(b.data, a.data, atol=1e-5)


def test_denoise_is_a_gaussian_filter_of_the_same_release(digits):
    X, y = digits
    ds = Dataset(X=X, y=y, feature_names=[f"p{i}" for i in range(64)], label_name="digit",
                 task="classification", bounds=np.tile([0.0, 16.0], (64, 1)),
                 bounds_source="metadata", classes=np.arange(10), image_shape=(8, 8))
    raw = DPMix(ell=4, sigma_x=0.4, random_state=3).release(ds)
    den = DPMix(ell=4, sigma_x=0.4, denoise=1.0, random_state=3).release(ds)
    expect = ndimage.gaussian_filter(raw.data.reshape(-1, 8, 8), sigma=(0, 1.0, 1.0)).reshape(-1, 64)
    np.testing.assert_allclose(den.data, expect, atol=1e-12)
    np.testing.assert_array_equal(den.labels, raw.labels)  # labels untouched
    assert den.guarantee == raw.guarantee and den.label_columns[-1] == "digit_argmax"
    # denoising removes noise: closer to the noiseless mixtures
    clean = DPMix(ell=4, sigma_x=0.0, random_state=3).release(ds)
    assert np.mean((den.data - clean.data) ** 2) < 0.5 * np.mean((raw.data - clean.data) ** 2)


# ------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"ell": 401}, "ell"),
        ({"ell": 0}, "ell"),
        ({"ell": 2.5}, "ell"),
        ({"n_mixtures": 0}, "n_mixtures"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"delta": 1.5}, "delta"),
        ({"sigma_x": -0.1}, "sigma_x"),
        ({"sigma_y": 1.0}, "sigma_y"),
        ({"sigma_ratio": 0.0}, "sigma_ratio"),
        ({"bound": "loose"}, "bound"),
        ({"denoise": 1.0}, "denoise"),
    ],
)
def test_bad_parameters_raise_named_value_errors(digits, kw, match):
    X, y = digits
    with pytest.raises(ValueError, match=match):
        _release(X, y, **kw)


def test_n_samples_is_the_number_of_mixtures(digits):
    X, y = digits
    m = DPMix(ell=2, sigma_x=1.0, bounds=(0, 16), classes=np.arange(10), random_state=0)
    assert m.release(X, y, n_samples=123).data.shape == (123, 64)
    with pytest.raises(ValueError, match="n_mixtures"):
        m.set_params(n_mixtures=50).release(X, y, n_samples=123)


# ------------------------------------------------------------------------------------ figures
def test_privacy_figures_agree_with_the_accountant():
    from app.figures.privacy import epsilon_at_order_figure, epsilon_vs_sigma_figure

    n, common = 10**6, dict(d_x=50, d_y=50, delta=1e-6)
    fig = epsilon_vs_sigma_figure(n=n, n_mixtures=n, ells=(1, 64), sigma_range=(2.0, 32.0), n_points=5,
                                  current={"sigma": 8.0, "epsilon": 0.008358, "ell": 64}, **common)
    by_name = {t.name: t for t in fig.data}
    assert set(by_name) == {"ℓ = 1, tight", "ℓ = 1, paper", "ℓ = 64, tight", "ℓ = 64, paper",
                            "this release"}
    tr = by_name["ℓ = 64, paper"]
    k = int(np.argmin(np.abs(np.asarray(tr.x) - 8.0)))
    assert tr.x[k] == pytest.approx(8.0)
    # SPEC 6.1 reference value (d = 50 + 50, n = T = 1e6, delta = 1/n): paper 0.01316 at ell 64, sigma 8
    assert tr.y[k] == pytest.approx(0.01316, rel=1e-3)
    order = epsilon_at_order_figure(sigma_x=8.0, sigma_y=8.0, ell=64, n=n, n_mixtures=n, **common)
    for col, bound, ref in ((0, "paper", 0.01316), (1, "tight", 0.008358)):
        best = accounting.dpmix_epsilon(sigma_x=8.0, sigma_y=8.0, ell=64, n=n, n_mixtures=n,
                                        bound=bound, **common)
        assert best.epsilon == pytest.approx(ref, rel=1e-3)
        totals = [t for t in order.data if t.name == "ε(α) = sum"][col]
        # the plotted objective (RDP + conversion) is minimised at alpha*, where it IS the epsilon
        j = int(np.argmin(totals.y))
        assert totals.x[j] == best.alpha and totals.y[j] == pytest.approx(best.epsilon, rel=1e-9)


def test_image_grid_places_every_image_in_its_tile():
    from app.figures.images import image_grid_figure, image_mosaic, real_vs_released_figure

    imgs = np.arange(5 * 6, dtype=float).reshape(5, 6) + 100 * np.arange(5)[:, None]
    mosaic, index = image_mosaic(imgs, (2, 3), ncols=2, gap=1)
    assert mosaic.shape == (3 * 3 - 1, 2 * 4 - 1)
    for k in range(5):
        r, c = divmod(k, 2)
        np.testing.assert_array_equal(mosaic[3 * r:3 * r + 2, 4 * c:4 * c + 3], imgs[k].reshape(2, 3))
        assert np.all(index[3 * r:3 * r + 2, 4 * c:4 * c + 3] == k)
    assert np.isnan(mosaic[6:, 4:]).all() and np.isnan(mosaic[2]).all()  # empty tile, gap row
    fig = image_grid_figure(imgs, (2, 3), titles=list("abcde"), ncols=2, zmin=0, zmax=1)
    assert fig.data[0].zmin == 0 and list(fig.data[1].text) == list("abcde")
    both = real_vs_released_figure(imgs[:3], imgs[2:], (2, 3), n=3)
    assert list(both.data[1].text) == ["real"] * 3 + ["released"] * 3
    with pytest.raises(ValueError, match="shape"):
        image_mosaic(imgs, (4, 4))
