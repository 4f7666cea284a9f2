"""The Dask engine (issue 14): same statistics, cards and distributions as the in-memory path; checks
per partition with the in-memory errors and nothing written; the public n checked; a LocalCluster run."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from functools import partial

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpcore import dask_engine
from dpcore.data import load_dataset
from dpcore.exceptions import DataValidationError, NotPrivateError, PrivacyLeakWarning
from dpcore.mechanisms import DPMix, DPPro, JLLaplace, LocalGaussian, PCAGauss, RONGauss

COLUMNS = [f"c{j}" for j in range(6)]
BOUNDS = {c: (0.0, 1.0) for c in COLUMNS}


def _rows(n: int = 12_000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 1, (n, 3))
    return np.column_stack([base, 0.6 * base[:, :1] + 0.4 * rng.uniform(0, 1, (n, 1)),
                            rng.beta(2, 5, (n, 2))])


def _write_parquet(folder, X, n_files=4, row_group=500):
    for i, part in enumerate(np.array_split(X, n_files)):
        pd.DataFrame(part, columns=COLUMNS).to_parquet(folder / f"part{i}.parquet", row_group_size=row_group)
    return str(folder / "*.parquet")


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    folder = tmp_path_factory.mktemp("parquet")
    X = _rows()
    return X, _write_parquet(folder, X)


def _in_memory(X):
    return load_dataset(pd.DataFrame(X, columns=COLUMNS), bounds=BOUNDS)


@pytest.mark.slow
@pytest.mark.parametrize(("cls", "params", "keys"), [
    (RONGauss, {}, ("mu_dp", "sigma_dp")),
    (RONGauss, {"noise": "gaussian"}, ("mu_dp", "sigma_dp")),
    (RONGauss, {"feature_scaling": "none", "n_components": 3}, ("mu_dp", "sigma_dp")),
    (PCAGauss, {}, ("eigenvalues_dp",)),
])
def test_same_statistics_and_card_as_in_memory(table, cls, params, keys):
    """Fixed seed (a preview): the same W, the same noise bits, so the noisy statistics agree to
    rounding, and the cards agree except for where n came from."""
    X, glob = table
    lazy, lazy_diag = cls(epsilon=1.0, random_state=7, **params).explore(
        dask_engine.open_table(glob, bounds=BOUNDS, blocksize=20_000))
    memory, memory_diag = cls(epsilon=1.0, random_state=7, **params).explore(_in_memory(X))
    for key in keys:
        np.testing.assert_allclose(lazy_diag[key], memory_diag[key], rtol=1e-9, atol=1e-12)
    card_lazy, card_memory = lazy.card(b""), memory.card(b"")
    assert card_lazy["public_facts"].pop("n_source") == "Parquet metadata"
    card_memory["public_facts"].pop("n_source")
    for card in (card_lazy, card_memory):
        card.pop("created_utc")
    assert card_lazy == card_memory
    assert lazy.noise == memory.noise


def test_statistics_are_the_sums_over_partitions(table):
    """The pass-1 sum of RON-Gauss (unit-normalised scaled rows) over Dask partitions equals the
    in-memory streaming pass to rounding, whatever the partitioning."""
    from dpcore.mechanisms.ron_gauss import _RowLoader, _unit_rows_kernel, _unit_rows_pass

    X, glob = table
    lo, width = np.zeros(6), np.ones(6)
    expected = _unit_rows_pass(_RowLoader(X, lo=lo, width=width))[1]
    for blocksize in (5_000, 60_000, 10**9):
        lazy = dask_engine.prepare_input(dask_engine.open_table(glob, bounds=BOUNDS, blocksize=blocksize),
                                         mechanism="ron-gauss", supported_tasks=("unsupervised",))
        (got, _), _ = lazy.engine.sums(partial(_unit_rows_kernel, scaling={"lo": lo, "width": width}), lazy.X,
                                       keep=True)
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def _mean_cov(values):
    return values.mean(axis=0), np.cov(values, rowvar=False)


@pytest.mark.parametrize("cls", [RONGauss, PCAGauss])
def test_same_release_distribution(table, tmp_path, cls):
    """The written rows (drawn per partition, lazily) follow the same released model as the in-memory
    rows: per column, a two-sample KS test cannot tell them apart, and their covariances agree."""
    X, glob = table
    out = tmp_path / "out"
    lazy_table = dask_engine.open_table(glob, bounds=BOUNDS, blocksize=20_000)
    with dask_engine.lazy_output(2_000):
        lazy = cls(epsilon=1.0, random_state=11).release(lazy_table)
    assert dask_engine.is_lazy(lazy.data) and lazy.data.numblocks[0] == 6
    memory = cls(epsilon=1.0, random_state=11).release(_in_memory(X))
    drawn = np.asarray(lazy.data)
    assert drawn.shape == memory.data.shape
    for j in range(drawn.shape[1]):
        assert stats.ks_2samp(drawn[:, j], memory.data[:, j]).pvalue > 1e-4
    (_, c1), (_, c2) = _mean_cov(drawn), _mean_cov(memory.data)
    scale = np.sqrt(np.outer(np.diag(c2), np.diag(c2)))
    assert np.max(np.abs(c1 - c2) / scale) < 0.08
    with pytest.raises(NotPrivateError):  # a seeded preview is never written
        dask_engine.write_release(lazy, out)
    assert not out.exists()


@pytest.mark.slow
def test_write_release_partitions_card_and_transform(table, tmp_path):
    X, glob = table
    out = tmp_path / "release"
    rel, written = dask_engine.release_table(RONGauss(epsilon=1.0), glob, out,
                                             bounds=BOUNDS, blocksize=20_000)
    parts = sorted(out.glob("part-*.parquet"))
    assert len(parts) > 1
    frame = pd.concat([pd.read_parquet(p) for p in parts])
    assert frame.shape == (X.shape[0], rel.data.shape[1]) and np.isfinite(frame.to_numpy()).all()
    card = json.loads((out / "card.json").read_text())
    assert card["n_rows"] == card["n_released"] == X.shape[0] and card["engine"] == "dask"
    assert "HMAC-SHA256" in card["noise_streams"] and "never written" in card["noise_streams"]
    assert set(card["files"]) == {p.name for p in parts}
    assert card["guarantee"]["epsilon"] == pytest.approx(1.0) and card["guarantee"]["holds"]
    assert (out / "transform.npz").exists() and set(written) >= {"card", "transform"}
    # CSV parts, same columns; named as the Parquet parts, so that their names sort in row order
    out_csv = tmp_path / "csv"
    dask_engine.release_table(PCAGauss(epsilon=1.0), glob, out_csv, fmt="csv", bounds=BOUNDS)
    frame = pd.concat([pd.read_csv(p) for p in sorted(out_csv.glob("part-*.csv"))])
    assert frame.shape == (X.shape[0], 5)
    out_many = tmp_path / "csv_many"
    dask_engine.release_table(DPPro(epsilon=1.0, delta=1e-6, n_components=3), glob, out_many, fmt="csv",
                              bounds=BOUNDS, blocksize=20_000)
    names = sorted(p.name for p in out_many.glob("part-*.csv"))
    assert len(names) > 10 and names == [f"part-{i:05d}.csv" for i in range(len(names))]


@pytest.mark.slow
@pytest.mark.parametrize("chunk_mixtures", [700, 5_000, 10**6])
def test_dpmix_same_index_sets_and_noise_as_in_memory(table, monkeypatch, chunk_mixtures):
    """DPMix on Dask draws the T x ell index sets on the client from the public n with the in-memory
    stream, gathers rows per partition by sorted index and sums them into their mixtures: with a
    seed, the release equals the in-memory one to rounding, whatever the chunk of mixtures (so the
    index distribution is the one test_dpmix checks and the accountant assumes)."""
    X, glob = table
    monkeypatch.setattr(dask_engine.mixtures, "MIXTURE_CHUNK_BYTES", 8 * 6 * chunk_mixtures)
    lazy_table = dask_engine.open_table(glob, bounds=BOUNDS, blocksize=20_000)
    for params in ({"ell": 16}, {"ell": 3, "n_mixtures": 5_000}, {"ell": 1, "sigma_x": 0.3}):
        with dask_engine.lazy_output(2_000):
            lazy = DPMix(epsilon=2.0, delta=1e-6, random_state=4, **params).release(lazy_table)
        memory = DPMix(epsilon=2.0, delta=1e-6, random_state=4, **params).release(_in_memory(X))
        assert dask_engine.is_lazy(lazy.data)
        np.testing.assert_allclose(np.asarray(lazy.data), memory.data, rtol=0, atol=1e-12)
        assert lazy.noise == memory.noise and lazy.guarantee == memory.guarantee


@pytest.mark.parametrize(("cls", "params"), [(JLLaplace, {"n_components": 3}),
                                             (DPPro, {"delta": 1e-6, "n_components": 3}),
                                             (LocalGaussian, {"delta": 1e-6})])
def test_row_noise_added_on_the_client(table, cls, params):
    """JL-Laplace / DPPro / LocalGaussian: X P (or X) per partition equals the in-memory product
    (epsilon = inf: no noise), and the noise the client adds partition by partition has the card's
    distribution: the residuals of the Dask release and of the in-memory one cannot be told apart
    (KS), at the same scale."""
    X, glob = table
    lazy_table = dask_engine.open_table(glob, bounds=BOUNDS, blocksize=20_000)
    exact = {}
    for eps in (float("inf"), 1.0):
        with dask_engine.lazy_output(2_000):
            lazy = cls(epsilon=eps, random_state=4, **params).release(lazy_table)
        memory = cls(epsilon=eps, random_state=4, **params).release(_in_memory(X))
        drawn = np.asarray(lazy.data)
        if eps == float("inf"):
            np.testing.assert_allclose(drawn, memory.data, rtol=1e-12, atol=1e-12)
            exact = memory.data
            continue
        assert lazy.noise == memory.noise and lazy.guarantee == memory.guarantee
        residual_lazy, residual_memory = (drawn - exact).ravel(), (memory.data - exact).ravel()
        assert stats.ks_2samp(residual_lazy, residual_memory).pvalue > 1e-4
        assert residual_lazy.std() == pytest.approx(residual_memory.std(), rel=0.05)


def _spread_sum(parts, m: int) -> np.ndarray:
    return sum(dask_engine._spread(part, m) for part in parts)


def test_partial_sums_are_mixture_sums():
    """Gathering by sorted index per partition and summing per mixture gives the mixtures' sums;
    each partition returns only the mixtures its rows are in, each once, in increasing order."""
    from dpcore.mechanisms.dpmix import mixture_means, sample_mixture_indices

    rng = np.random.default_rng(0)
    Z = rng.normal(size=(1_000, 4))
    idx = sample_mixture_indices(1_000, 7, 300, rng)
    for offsets in (np.array([0, 333, 800, 1_000]), np.array([0, 980, 1_000])):
        rows, mixtures, cuts = dask_engine.pairs_by_partition(idx, offsets)
        assert cuts[-1] == idx.size
        parts = [dask_engine._partial_sums(Z[offsets[p]:offsets[p + 1]], rows[cuts[p]:cuts[p + 1]],
                                           mixtures[cuts[p]:cuts[p + 1]]) for p in range(len(offsets) - 1)]
        for p, (ids, sums) in enumerate(parts):
            held = np.unique(np.flatnonzero(((idx >= offsets[p]) & (idx < offsets[p + 1])).any(axis=1)))
            np.testing.assert_array_equal(ids, held)
            assert sums.shape == (ids.size, 4)
        np.testing.assert_allclose(_spread_sum(parts, 300) / 7, mixture_means(Z, idx), rtol=0, atol=1e-14)
    empty_ids, empty_sums = dask_engine._partial_sums(Z[:5], rows[:0], mixtures[:0])
    assert empty_ids.size == 0 and empty_sums.shape == (0, 4)


@pytest.mark.parametrize("offsets", [[0, 250, 500, 750, 1_000], [0, 750, 1_000, 1_750, 2_000],
                                     [0, 7, 7, 400, 401, 1_000], [0, 1_000]])
@pytest.mark.parametrize("table_max", [dask_engine.PARTITION_TABLE_MAX, 0])
def test_pairs_by_partition_groups_every_pair_once(offsets, table_max, monkeypatch):
    """Every (mixture, row) pair lands in the partition holding the row, counted from its first
    row, mixture-major within the partition: the same with the lookup table (whole units of rows)
    and with the binary search it falls back to (``table_max = 0``), empty partitions included."""
    monkeypatch.setattr(dask_engine.mixtures, "PARTITION_TABLE_MAX", table_max)
    offsets = np.array(offsets)
    idx = np.random.default_rng(4).integers(0, offsets[-1], size=(500, 6))
    rows, mixtures, cuts = dask_engine.pairs_by_partition(idx, offsets)
    assert cuts.tolist() == [0, *np.cumsum([np.count_nonzero((idx >= a) & (idx < b))
                                             for a, b in zip(offsets[:-1], offsets[1:], strict=True)])]
    for p, (a, b) in enumerate(zip(offsets[:-1], offsets[1:], strict=True)):
        t, i = np.nonzero((idx >= a) & (idx < b))  # row-major: mixture order, then position
        np.testing.assert_array_equal(mixtures[cuts[p]:cuts[p + 1]], t)
        np.testing.assert_array_equal(rows[cuts[p]:cuts[p + 1]], idx[t, i] - a)


@pytest.mark.slow
def test_local_cluster_two_workers(table, labelled, tmp_path):
    """The same statistics on a distributed LocalCluster with two workers, unsupervised and with
    the per-class kernels (RON-Gauss Alg. 5); chunks spilled on the client's disk never run on
    the workers."""
    distributed = pytest.importorskip("distributed")
    X, glob = table
    memory, memory_diag = RONGauss(epsilon=1.0, random_state=5).explore(_in_memory(X))
    table_c, memory_c, _ = _labelled_tables(labelled, "classification")
    _, memory_c_diag = RONGauss(epsilon=1.0, random_state=5).explore(memory_c)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        rel_diag: dict = {}
        rel, _ = dask_engine.release_table(RONGauss(epsilon=1.0, random_state=5), glob,
                                           None, bounds=BOUNDS, blocksize=20_000, diagnostics=rel_diag)
        drawn = np.asarray(rel.data)
        _, lazy_c_diag = RONGauss(epsilon=1.0, random_state=5).explore(table_c)
        # text labels noised on the client and spilled to its disk: written, and counted for the
        # card's CSV escaping, with local threads (a worker on another host cannot read them)
        with distributed.get_task_stream() as stream:
            _, files = dask_engine.release_table(JLLaplace(epsilon=1.0, task="classification"), table_c,
                                                 tmp_path / "jl")
        assert files and not [t for t in stream.data if dask_engine._SPILL_PREFIX in str(t["key"])]
    np.testing.assert_allclose(rel_diag["sigma_dp"], memory_diag["sigma_dp"], rtol=1e-9)
    assert drawn.shape == memory.data.shape and np.isfinite(drawn).all()
    _assert_same_diagnostics(lazy_c_diag, memory_c_diag, ("class_counts_dp", "mu_dp", "sigma_dp"))


def _in_memory_error(frame, **kwargs):
    with pytest.raises(DataValidationError) as info:
        load_dataset(frame, **kwargs)
    return str(info.value)


@pytest.mark.parametrize("fault", ["text", "nan", "missing_column"])
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("mechanism", [RONGauss(epsilon=1.0),
                                       DPMix(epsilon=1.0, delta=1e-6, ell=4, n_mixtures=5)],
                         ids=["ron-gauss", "dpmix"])
def test_bad_partition_same_error_nothing_written(tmp_path, fault, fmt, mechanism):
    """A bad value in one file gives the in-memory loader's error, naming the file, and nothing is
    written; for DPMix with 5 mixtures of 4 rows (20 of 3,000 rows used: the bad row is almost
    surely not one of them) too: every row is checked, used or not."""
    X = _rows(3_000, seed=2)
    frames = [pd.DataFrame(part, columns=COLUMNS) for part in np.array_split(X, 3)]
    bad = frames[2].copy()
    if fault == "text":
        bad["c1"] = bad["c1"].astype(str)
        bad.loc[bad.index[5], "c1"] = "n/a?"
    elif fault == "nan":
        bad.loc[bad.index[7], "c4"] = np.nan
    else:
        bad = bad.drop(columns=["c3"])
    frames[2] = bad
    for i, frame in enumerate(frames):
        if fmt == "csv":
            frame.to_csv(tmp_path / f"f{i}.csv", index=False)
        else:
            frame.to_parquet(tmp_path / f"f{i}.parquet")
    out = tmp_path / "out"
    with pytest.raises(DataValidationError) as info:
        dask_engine.release_table(mechanism, str(tmp_path / f"f*.{fmt}"), out, bounds=BOUNDS)
    message = str(info.value)
    assert f"f2.{fmt}" in message
    if fault == "missing_column":
        assert "['c3'] missing" in message
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            expected = _in_memory_error(str(tmp_path / f"f2.{fmt}"), bounds=BOUNDS)
        assert expected in message
    assert not out.exists() and not list(tmp_path.glob(".out.*"))


@pytest.mark.slow
@pytest.mark.parametrize("style", ["lf", "crlf-bom-quoted"])
def test_large_csv_file_is_read_in_blocks(tmp_path, style):
    """A CSV file larger than the block size is cut into blocks of lines (a file over the input
    limit was refused: 'use a smaller file'): every row is read exactly once, in order, with Windows
    line ends, a byte-order mark and quoted labels holding the separator; the statistics equal the
    in-memory ones; a bad value deep in the file is reported with its row number in the file, the
    block's bytes, and nothing is written."""
    X = _rows(5_000, seed=4)
    kind = np.array(["a,1", "b", 'say "c"'])[(X[:, 0] * 3).astype(int).clip(0, 2)]
    frame = pd.DataFrame(X, columns=COLUMNS).assign(kind=kind)
    path = tmp_path / "big.csv"
    if style == "lf":
        frame.to_csv(path, index=False)
    else:
        frame.to_csv(path, index=False, lineterminator="\r\n", encoding="utf-8-sig")
    options = {"label": "kind", "task": "classification", "classes": ["a,1", "b", 'say "c"'],
               "bounds": BOUNDS}
    lazy_table = dask_engine.open_table(str(path), blocksize="16KiB", **options)
    assert lazy_table.n == 5_000 and lazy_table.n_partitions == -(-path.stat().st_size // (16 << 10))
    read = lazy_table.frame.compute()
    memory_ds = load_dataset(frame, **options)
    np.testing.assert_array_equal(read[COLUMNS].to_numpy(), memory_ds.X)
    np.testing.assert_array_equal(read["label"].to_numpy(), kind)
    lazy, lazy_diag = RONGauss(epsilon=1.0, random_state=3).explore(lazy_table)
    memory, memory_diag = RONGauss(epsilon=1.0, random_state=3).explore(memory_ds)
    _assert_same_diagnostics(lazy_diag, memory_diag, ("mu_dp", "sigma_dp", "class_counts_dp"))
    frame.loc[3_456, "c2"] = np.nan
    frame.to_csv(path, index=False)
    out = tmp_path / "out"
    with pytest.raises(DataValidationError, match=r"big\.csv \(bytes [0-9,]+-[0-9,]+\): 1 rows contain "
                                                  r"missing .*first rows: \[3456\]"):
        dask_engine.release_table(PCAGauss(epsilon=1.0), str(path), out, blocksize="16KiB", **options)
    assert not out.exists()
    with pytest.raises(DataValidationError, match=r"first rows: \[3456\]"):  # blocks shorter than lines
        dask_engine.open_table(str(path), blocksize="100B", **options).frame.compute()


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["plain", "blank-lines-around", "no-final-line-feed", "crlf"])
def test_csv_blocks_of_every_size_read_each_row_once(tmp_path, layout):
    """Whatever the block size (shorter than a line, ending inside the last line, on a line feed,
    among blank lines), the blocks of a CSV file hold its rows exactly once, in order: the rows the
    in-memory reader reads, with blank lines before the header or at the end of the file, no final
    line feed, or Windows line ends."""
    X = np.round(_rows(60, seed=11), 4)
    ending = "\r\n" if layout == "crlf" else "\n"
    text = pd.DataFrame(X, columns=COLUMNS).to_csv(index=False, lineterminator=ending)
    if layout == "blank-lines-around":
        text = "\n\n" + text + "\n\n\n"
    elif layout == "no-final-line-feed":
        text = text.rstrip("\n")
    path = tmp_path / "t.csv"
    path.write_text(text, newline="")
    expected = load_dataset(str(path), bounds=BOUNDS).X
    for blocksize in [*range(20, 80, 7), *range(80, len(text) + 40, 97)]:
        lazy_table = dask_engine.open_table(str(path), bounds=BOUNDS, blocksize=blocksize)
        assert lazy_table.n == 60, blocksize
        np.testing.assert_array_equal(lazy_table.frame.compute()[COLUMNS].to_numpy(), expected)


@pytest.mark.parametrize("mechanism", [
    DPPro(epsilon=1.0, delta=1e-6, n_components=3), PCAGauss(epsilon=1.0), LocalGaussian(epsilon=1.0),
], ids=["dppro", "pca-gauss", "local-gaussian"])
def test_part_sizes_are_public_whatever_the_rows(tmp_path, mechanism):
    """The release's part files hold public numbers of rows (the block size and the column count
    give them), not the input partitions': two neighbouring CSV tables, one value written with
    more digits, cut into blocks holding different numbers of rows, give parts of the same sizes."""
    X = np.round(_rows(3_000, seed=8), 2)
    path = tmp_path / "t.csv"
    sizes = []
    for i, value in enumerate((0.5, 0.123456789012345678)):
        X[10, 2] = value
        pd.DataFrame(X, columns=COLUMNS).to_csv(path, index=False)
        lazy_table = dask_engine.open_table(str(path), bounds=BOUNDS, blocksize="8KiB")
        out = tmp_path / f"out{i}"
        dask_engine.release_table(mechanism, lazy_table, out)
        sizes.append((lazy_table.lengths, [len(pd.read_parquet(p)) for p in sorted(out.glob("part-*"))]))
    (lengths0, parts0), (lengths1, parts1) = sizes
    assert lengths0 != lengths1  # the input's blocks moved
    rows = dask_engine.public_part_rows(8 << 10, len(COLUMNS))
    assert parts0 == parts1 == [rows] * (3_000 // rows) + [3_000 % rows] * bool(3_000 % rows)


def test_parquet_partitions_follow_row_counts_not_encoded_sizes(tmp_path):
    """Parquet partitions are runs of row groups cut by their row counts (footer facts, as n), not
    by their byte sizes, which depend on the values (a column of repeated values is dictionary
    encoded into almost nothing): two tables of the same row groups, one of repeated values and
    one of distinct values, get the same partitions; a release's parts are regrouped into parts of
    the public number of rows whatever the partitions (row groups may be a file per class)."""
    X = _rows(6_000, seed=9)
    repeated = np.full_like(X, 0.25)
    lengths = []
    for name, values in (("distinct", X), ("repeated", repeated)):
        folder = tmp_path / name
        folder.mkdir()
        _write_parquet(folder, values, n_files=2, row_group=400)
        lazy_table = dask_engine.open_table(str(folder / "*.parquet"), bounds=BOUNDS, blocksize="40KiB")
        dask_engine.release_table(DPPro(epsilon=1.0, delta=1e-6, n_components=3), lazy_table, folder / "out")
        lengths.append((lazy_table.lengths,
                        [len(pd.read_parquet(p)) for p in sorted((folder / "out").glob("part-*"))]))
    assert lengths[0] == lengths[1]
    assert dask_engine.public_part_rows(40 << 10, len(COLUMNS)) == 853  # 3 row groups of 400 rows
    assert lengths[0][0] == (1_200, 1_200, 600) * 2 and lengths[0][1] == [853] * 7 + [6_000 - 7 * 853]


@pytest.mark.parametrize("bounds", [BOUNDS, None], ids=["public-bounds", "data-bounds"])
def test_empty_partitions_and_row_groups(tmp_path, bounds):
    """Empty partitions of a Dask DataFrame (first or in the middle, as a filter leaves them) and
    an empty first row group of a Parquet file add no rows and break nothing: the table's first
    rows come from the first partition that has any; bounds from the data are the whole table's
    (with the warning)."""
    import dask.dataframe as dd
    import pyarrow as pa
    import pyarrow.parquet as pq

    X = _rows(3_000, seed=10)
    frame = pd.DataFrame(X, columns=COLUMNS)
    pieces = [frame.iloc[:0], frame.iloc[:1_000], frame.iloc[:0], frame.iloc[1_000:]]
    collection = dd.concat([dd.from_pandas(p, npartitions=1) for p in pieces])
    table = pa.Table.from_pandas(frame, preserve_index=False)
    with pq.ParquetWriter(tmp_path / "t.parquet", table.schema) as writer:
        writer.write_table(table.slice(0, 0))
        writer.write_table(table)
    for source in (collection, str(tmp_path / "t.parquet")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            lazy_table = dask_engine.open_table(source, bounds=bounds)
            assert lazy_table.n == 3_000
            lazy, diag = PCAGauss(epsilon=1.0, random_state=1).explore(lazy_table)
            memory, memory_diag = PCAGauss(epsilon=1.0, random_state=1).explore(
                load_dataset(frame, bounds=bounds))
        _assert_same_diagnostics(diag, memory_diag, ("eigenvalues_dp",))
        assert lazy.guarantee == memory.guarantee


def test_csv_block_errors_number_rows_in_the_file_at_block_edges(tmp_path):
    """The rows on either side of each block edge (the line crossing it belongs to the block
    before) are reported with their row numbers in the file."""
    import re

    frame = pd.DataFrame(_rows(1_500, seed=5), columns=COLUMNS)
    path = tmp_path / "f.csv"
    frame.to_csv(path, index=False)
    line_ends = np.cumsum([len(line) + 1 for line in path.read_bytes().split(b"\n")])
    edges = [int(np.searchsorted(line_ends, 4096 * k)) - 1 for k in (1, 5, 9)]  # row crossing the edge
    for row in sorted({0, 1_499, *(r + d for r in edges for d in (-1, 0, 1))}):
        bad = frame.copy()
        bad.loc[row, "c2"] = np.nan
        bad.to_csv(path, index=False)
        with pytest.raises(DataValidationError) as info:
            dask_engine.open_table(str(path), bounds=BOUNDS, blocksize=4096).frame.compute()
        assert re.search(r"first rows: \[(\d+)\]", str(info.value)).group(1) == str(row)


def test_public_n_is_checked(table, tmp_path):
    X, glob = table
    with pytest.raises(DataValidationError, match="n = 11,999 was given but the Parquet footers hold 12,000"):
        dask_engine.open_table(glob, bounds=BOUNDS, n=11_999)
    assert dask_engine.open_table(glob, bounds=BOUNDS, n=12_000).n_source.startswith("user")
    pd.DataFrame(X[:100], columns=COLUMNS).to_csv(tmp_path / "a.csv", index=False)
    with pytest.raises(DataValidationError, match="n = 101 was given but the input holds 100 rows"):
        dask_engine.open_table(str(tmp_path / "a.csv"), bounds=BOUNDS, n=101)


def test_unsupported_mechanism_or_task_is_refused(table, labelled, monkeypatch):
    """A mechanism or task the engine does not run is refused by name with the reason, before any
    pass over the table (never a silent in-memory fallback)."""
    from dpcore.mechanisms import get_mechanism

    _, glob = table
    lazy = dask_engine.open_table(glob, bounds=BOUNDS)
    monkeypatch.delitem(dask_engine.SUPPORTED, "modips", raising=False)
    monkeypatch.setitem(dask_engine.NOT_STREAMED, "modips", "a test's reason")
    with pytest.raises(ValueError, match=r"modips is not supported on the Dask engine yet \(a test's reason"):
        get_mechanism("modips")(epsilon=1.0).release(lazy)
    monkeypatch.setitem(dask_engine.SUPPORTED, "ron-gauss", ("unsupervised",))
    table_c, _, _ = _labelled_tables(labelled, "classification")
    with pytest.raises(ValueError, match="supports the task"):
        RONGauss(epsilon=1.0).release(table_c)


def test_dask_collections_are_inputs(table):
    """A Dask Array (columns x0..) and a Dask DataFrame are opened like files; n is their row count."""
    da = pytest.importorskip("dask.array")
    X, _ = table
    arr = da.from_array(X, chunks=(3_000, 6))
    rel, rel_diag = RONGauss(epsilon=1.0, random_state=1).explore(
        dask_engine.open_table(arr, bounds=(0.0, 1.0)))
    memory, memory_diag = RONGauss(epsilon=1.0, random_state=1, bounds=(0.0, 1.0)).explore(X)
    np.testing.assert_allclose(rel_diag["sigma_dp"], memory_diag["sigma_dp"], rtol=1e-9)
    assert rel.public_facts["n"] == X.shape[0]


def test_cli_engine_dask(table, tmp_path, capsys):
    """`dpcore release MECHANISM 'glob' -o out/ --engine dask`: parts + card, or exit 2 with the
    error and nothing written."""
    from dpcore.cli import main

    _, glob = table
    bounds = tmp_path / "bounds.json"
    bounds.write_text(json.dumps(BOUNDS))
    out = tmp_path / "out"
    assert main(["release", "dppro", glob, "-o", str(out), "--bounds", str(bounds), "--engine", "dask",
                 "--blocksize", "64KiB", "--n", "12000", "--format", "csv", "--n-components", "4"]) == 0
    card = json.loads((out / "card.json").read_text())
    assert card["mechanism"] == "dppro" and card["public_facts"]["n"] == 12_000 and card["format"] == "csv"
    assert sum(len(pd.read_csv(out / name)) for name in card["files"]) == 12_000
    # a glob goes to the Dask engine without --engine; a wrong n is refused, nothing written
    out2 = tmp_path / "out2"
    assert main(["release", "ron-gauss", glob, "-o", str(out2), "--bounds", str(bounds), "--n", "5"]) == 2
    assert "n = 5 was given" in capsys.readouterr().err and not out2.exists()
    assert main(["release", "ron-gauss", glob, "-o", str(out2)]) == 2
    assert "--data-bounds" in capsys.readouterr().err and not out2.exists()


class _Terminal:
    """A stand-in for a terminal's stderr: ``isatty()`` True, what is written kept."""

    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.slow
@pytest.mark.parametrize(("flag", "terminal", "shown"), [
    ([], False, False), ([], True, True), (["--progress"], False, True), (["--no-progress"], True, False),
])
def test_cli_progress_bars_only_on_a_terminal(table, tmp_path, capfd, monkeypatch, flag, terminal, shown):
    """The CLI draws its progress bars (carriage-return redraws) on stderr when it is a terminal;
    a log file (stderr redirected) gets none, unless --progress; --no-progress turns them off."""
    import sys

    from dpcore.cli import main

    _, glob = table
    bounds = tmp_path / "bounds.json"
    bounds.write_text(json.dumps(BOUNDS))
    tty = _Terminal()
    if terminal:
        monkeypatch.setattr(sys, "__stderr__", tty)
    capfd.readouterr()
    assert main(["release", "pca-gauss", glob, "-o", str(tmp_path / "out"), "--bounds", str(bounds),
                 "--engine", "dask", "--blocksize", "64KiB", *flag]) == 0
    drawn = capfd.readouterr().err + tty.text
    assert ("% Completed" in drawn) == shown
    assert (tmp_path / "out" / "card.json").exists()


def test_csv_parts_are_the_in_memory_csv_split(tmp_path):
    """--format csv: the parts, concatenated (the header once), are byte for byte the release's
    in-memory CSV (Release.to_csv_bytes: the number format, the escaping of a formula-like label
    and column name, the quoting of a label with a comma)."""
    rng = np.random.default_rng(0)
    X, y = rng.uniform(0, 1, (3_000, 3)), rng.choice(["=a", "b,c", "c"], 3_000)
    for i in range(3):
        rows = slice(1_000 * i, 1_000 * (i + 1))
        pd.DataFrame(X[rows], columns=list("abc")).assign(**{"=y": y[rows]}).to_parquet(
            tmp_path / f"p{i}.parquet", row_group_size=300)
    lazy_table = dask_engine.open_table(str(tmp_path / "*.parquet"), label="=y", task="classification",
                                        classes=["=a", "b,c", "c"], bounds={c: (0, 1) for c in "abc"},
                                        blocksize=10_000)
    release = LocalGaussian(epsilon=1.0, label_release="separate").release(lazy_table)
    dask_engine.write_release(release, tmp_path / "out", fmt="csv", part_rows=lazy_table.part_rows)
    texts = [p.read_bytes() for p in sorted((tmp_path / "out").glob("part-*.csv"))]
    assert len(texts) > 3
    header = texts[0].split(b"\n", 1)[0]
    assert header == b"a,b,c,'=y" and all(t.startswith(header + b"\n") for t in texts)
    joined = texts[0] + b"".join(t.split(b"\n", 1)[1] for t in texts[1:])
    assert joined == release.to_csv_bytes()
    assert b'"b,c"' in joined and b"\n'=a\n" not in joined and b",'=a\n" in joined


def test_cli_engine_choice_from_public_facts(tmp_path, monkeypatch, capsys):
    """`dpcore release MECHANISM big.csv -o out/` without --engine: the engine (one file, or a folder
    of parts) is chosen from the table's rows x columns (public: the line count, as n), not from
    its bytes (a neighbouring table whose values have more digits has more bytes). A CSV over the
    memory share goes to the Dask engine and is read in blocks; a CSV under it but over the
    in-memory reader's input limit is refused with the way to release it."""
    from dpcore.cli import main

    path = tmp_path / "big.csv"
    X = np.round(_rows(4_000, seed=6), 3)
    pd.DataFrame(X, columns=COLUMNS).to_csv(path, index=False)
    short = path.stat().st_size
    memory_share = 4 * 8 * 4_000 * len(COLUMNS)  # the table's float64 bytes are a quarter of it
    monkeypatch.setenv("DPCORE_MAX_MEMORY", str(memory_share))
    assert dask_engine.fits_in_memory(str(path))
    X[7, 1] = 0.123456789012345678  # more bytes, the same rows and columns
    pd.DataFrame(X, columns=COLUMNS).to_csv(path, index=False)
    assert path.stat().st_size > short and dask_engine.fits_in_memory(str(path))
    monkeypatch.setenv("DPCORE_MAX_MEMORY", str(memory_share - 8))
    assert not dask_engine.fits_in_memory(str(path))
    bounds = tmp_path / "bounds.json"
    bounds.write_text(json.dumps(BOUNDS))
    out = tmp_path / "out"
    assert main(["release", "pca-gauss", str(path), "-o", str(out), "--bounds", str(bounds),
                 "--blocksize", "32KiB"]) == 0
    assert "4,000 rows in " in capsys.readouterr().err
    assert _written_rows(out) == 4_000 and json.loads((out / "card.json").read_text())["engine"] == "dask"
    monkeypatch.setenv("DPCORE_MAX_MEMORY", str(memory_share))
    monkeypatch.setenv("DPCORE_MAX_INPUT_BYTES", str(short // 3))
    single = tmp_path / "o.csv"
    assert main(["release", "pca-gauss", str(path), "-o", str(single), "--bounds", str(bounds)]) == 2
    assert "--engine dask" in capsys.readouterr().err and not single.exists()


def test_corrupt_parquet_file_is_named(table, tmp_path):
    X, _ = table
    _write_parquet(tmp_path, X[:2_000], n_files=2)
    (tmp_path / "part9.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(DataValidationError, match="part9.parquet: truncated or corrupt Parquet"):
        dask_engine.open_table(str(tmp_path / "*.parquet"), bounds=BOUNDS)
    assert dask_engine.fits_in_memory(str(tmp_path / "part9.parquet"))  # the in-memory reader reports it


def test_bounds_from_data_are_the_whole_tables_with_a_warning(table):
    """Without public bounds, the bounds are the whole table's column ranges (not the first rows'),
    with the in-memory path's PrivacyLeakWarning, and the card says the guarantee does not hold."""
    X, glob = table
    lazy_table = dask_engine.open_table(glob, blocksize=20_000)
    with pytest.warns(PrivacyLeakWarning):
        rel = PCAGauss(epsilon=1.0, random_state=0).release(lazy_table)
    facts = rel.public_facts["bounds"]
    assert [facts[c]["lo"] for c in COLUMNS] == X.min(axis=0).tolist()
    assert [facts[c]["hi"] for c in COLUMNS] == X.max(axis=0).tolist()
    assert {facts[c]["lo_source"] for c in COLUMNS} == {"data"} and not rel.guarantee.holds


@pytest.mark.slow
def test_fused_batches_give_the_same_statistics_and_mixtures(table, monkeypatch):
    """Each partition task reads, checks, clips, maps and reduces its rows in batches of
    BATCH_BYTES: with batches of a few dozen rows (odd sizes, several per row group) the statistics
    and the DPMix mixtures equal the in-memory ones to rounding, and the input checks still run
    (a wrong n from a footer is caught)."""
    X, glob = table
    monkeypatch.setattr(dask_engine.reading, "BATCH_BYTES", 8 * 6 * 37)
    lazy_table = dask_engine.open_table(glob, bounds=BOUNDS, blocksize=20_000)
    for cls in (RONGauss, PCAGauss):
        _, lazy_diag = cls(epsilon=1.0, random_state=3).explore(lazy_table)
        _, memory_diag = cls(epsilon=1.0, random_state=3).explore(_in_memory(X))
        key = "sigma_dp" if cls is RONGauss else "eigenvalues_dp"
        np.testing.assert_allclose(lazy_diag[key], memory_diag[key], rtol=1e-9, atol=1e-12)
    with dask_engine.lazy_output(2_000):
        lazy = DPMix(epsilon=2.0, delta=1e-6, random_state=4, ell=5).release(lazy_table)
    memory = DPMix(epsilon=2.0, delta=1e-6, random_state=4, ell=5).release(_in_memory(X))
    np.testing.assert_allclose(np.asarray(lazy.data), memory.data, rtol=0, atol=1e-12)
    assert dask_engine._cuts(3, 6).tolist() == [0, 3] and min(np.diff(dask_engine._cuts(75, 6))) >= 2


def test_cli_ledger_records_the_written_card(table, tmp_path, capsys):
    """`--ledger` on the Dask engine: the release is checked against the budget, recorded with the
    written card's sha256 and epsilon, and renamed into place; over the budget, exit 2 and nothing is
    written or recorded."""
    from dpcore.cli import main
    from dpcore.ledger import Ledger

    _, glob = table
    bounds = tmp_path / "bounds.json"
    bounds.write_text(json.dumps(BOUNDS))
    ledger = tmp_path / "ledger.json"
    common = ["--bounds", str(bounds), "--engine", "dask", "--ledger", str(ledger), "--budget", "1.5"]
    out = tmp_path / "out"
    assert main(["release", "pca-gauss", glob, "-o", str(out), "--epsilon", "1", *common]) == 0
    card = json.loads((out / "card.json").read_text())
    (entry,) = Ledger.load(ledger).entries
    assert entry.sha256 == card["sha256"] and entry.epsilon == pytest.approx(card["row_level"]["epsilon"])
    out2 = tmp_path / "out2"
    assert main(["release", "pca-gauss", glob, "-o", str(out2), "--epsilon", "1", *common]) == 2
    assert "budget" in capsys.readouterr().err and not out2.exists()
    assert len(Ledger.load(ledger).entries) == 1 and not list(tmp_path.glob(".out2.*"))


@pytest.mark.parametrize("name", ["identity-laplace", "pca-identity", "rp-gaussian"])
def test_baselines_on_dask(table, name):
    """The projection baselines: (scaled X) M per partition equals the in-memory product (epsilon =
    inf), and the client's per-partition noise has the in-memory distribution and card."""
    from dpcore.mechanisms import get_mechanism

    X, glob = table
    lazy_table = dask_engine.open_table(glob, bounds=BOUNDS, blocksize=20_000)
    params = {"public_data": _in_memory(_rows(500, seed=9))} if name == "pca-identity" else {}
    cls = get_mechanism(name)
    exact = None
    for eps in (float("inf"), 1.0):
        with dask_engine.lazy_output(2_000):
            lazy = cls(epsilon=eps, random_state=3, **params).release(lazy_table)
        memory = cls(epsilon=eps, random_state=3, **params).release(_in_memory(X))
        drawn = np.asarray(lazy.data)
        assert lazy.noise == memory.noise and lazy.guarantee == memory.guarantee
        if exact is None:
            np.testing.assert_allclose(drawn, memory.data, rtol=1e-12, atol=1e-12)
            exact = memory.data
            continue
        residual_lazy, residual_memory = (drawn - exact).ravel(), (memory.data - exact).ravel()
        assert stats.ks_2samp(residual_lazy, residual_memory).pvalue > 1e-4


@pytest.fixture
def refuse_collect(monkeypatch):
    """Converting a Dask array of more than 2,000 cells to NumPy raises, and so does a NumPy function
    Dask does not implement (it computes its arguments): what a mechanism may bring to the client is
    a statistic, never the table (np.asarray, np.column_stack... on the rows)."""
    import dask.array as da

    original = da.Array.__array__

    def guarded(self, *args, **kwargs):
        if self.size > 2_000:
            raise AssertionError(f"a Dask array of shape {self.shape} was loaded into memory")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(da.Array, "__array__", guarded)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*is not implemented by Dask array", category=FutureWarning)
        yield


@pytest.mark.parametrize("name", sorted(dask_engine.SUPPORTED))
def test_no_supported_mechanism_collects_the_table(table, tmp_path, refuse_collect, name):
    """Every mechanism the engine accepts releases and writes without loading the rows into memory."""
    from dpcore.mechanisms import get_mechanism

    _, glob = table
    params = {"public_data": _in_memory(_rows(500, seed=9))} if name == "pca-identity" else {}
    if name in ("dpmix", "dppro", "rp-gaussian", "local-gaussian"):
        params["delta"] = 1e-6
    lazy_table = dask_engine.open_table(glob, bounds=BOUNDS, blocksize=20_000)
    rel, written = dask_engine.release_table(get_mechanism(name)(epsilon=1.0, **params), lazy_table,
                                             tmp_path / "out")
    card = json.loads(written["card"].read_text())
    assert card["mechanism"] == name and card["engine"] == "dask"
    assert sum(len(pd.read_parquet(tmp_path / "out" / f)) for f in card["files"]) == rel.data.shape[0]


def test_dpmix_denoise_on_dask(tmp_path):
    """DPMix's denoising filter (post-processing) runs on each noisy chunk of mixtures on the client:
    with a seed, the Dask release of 4 x 4 images equals the in-memory one to rounding."""

    rng = np.random.default_rng(5)
    images = rng.uniform(0, 1, (3_000, 16))
    columns = [f"p{j}" for j in range(16)]
    for i, part in enumerate(np.array_split(images, 3)):
        pd.DataFrame(part, columns=columns).to_parquet(tmp_path / f"img{i}.parquet", row_group_size=400)
    lazy_table = dask_engine.open_table(str(tmp_path / "img*.parquet"), bounds=(0.0, 1.0))
    lazy_table = replace(lazy_table, head=replace(lazy_table.head, image_shape=(4, 4)))
    memory_ds = replace(load_dataset(pd.DataFrame(images, columns=columns), bounds=(0.0, 1.0)),
                        image_shape=(4, 4))
    params = {"epsilon": 4.0, "delta": 1e-6, "ell": 4, "denoise": 0.8, "random_state": 2}
    with dask_engine.lazy_output(1_000):
        lazy = DPMix(**params).release(lazy_table)
    memory = DPMix(**params).release(memory_ds)
    undenoised = DPMix(**{**params, "denoise": 0.0}).release(memory_ds)
    np.testing.assert_allclose(np.asarray(lazy.data), memory.data, rtol=0, atol=1e-12)
    assert np.abs(memory.data - undenoised.data).max() > 0.01  # the filter did act


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """The table with a class label ``kind`` (strings) and a regression label ``score``."""
    folder = tmp_path_factory.mktemp("labelled")
    X = _rows(6_000, seed=3)
    kind = np.array(["a", "b", "c"])[(X[:, 0] * 3).astype(int).clip(0, 2)]
    score = 10 * X[:, 1] + X[:, 3]
    for i, part in enumerate(np.array_split(np.arange(len(X)), 3)):
        frame = pd.DataFrame(X[part], columns=COLUMNS).assign(kind=kind[part], score=score[part])
        frame.to_parquet(folder / f"part{i}.parquet", row_group_size=700)
    return X, kind, score, folder


def _labelled_tables(labelled, task):
    X, kind, score, folder = labelled
    label, other = ("kind", "score") if task == "classification" else ("score", "kind")
    options = {"classes": ["a", "b", "c"]} if task == "classification" else {"label_bounds": (0.0, 11.0)}
    for i in range(3):  # one table per label: drop the other label's column
        path = folder / f"{label}{i}.parquet"
        if not path.exists():
            frame = pd.read_parquet(folder / f"part{i}.parquet").drop(columns=[other])
            frame.to_parquet(path, row_group_size=700)
    lazy = dask_engine.open_table(str(folder / f"{label}*.parquet"), label=label, task=task, bounds=BOUNDS,
                                  blocksize=30_000, **options)
    y = kind if task == "classification" else score
    memory = load_dataset(pd.DataFrame(X, columns=COLUMNS).assign(**{label: y}), label=label, task=task,
                          bounds=BOUNDS, **options)
    return lazy, memory, y


@pytest.mark.parametrize("task", ["classification", "regression"])
@pytest.mark.parametrize("name", ["jl-laplace", "dppro", "identity-laplace", "pca-identity", "rp-gaussian",
                                  "local-gaussian"])
def test_labels_released_separately_on_dask(labelled, tmp_path, task, name):
    """Mechanisms that release labels on their own (randomized response / Laplace): at epsilon = inf
    the Dask labels are the in-memory ones exactly; at epsilon = 2 the card is the in-memory card,
    the randomized response flips the share of labels its card states, the Laplace residuals have
    the in-memory spread; the written parts carry the label column."""
    from dpcore.mechanisms import get_mechanism

    lazy_table, memory_ds, y = _labelled_tables(labelled, task)
    cls = get_mechanism(name)
    params = {"public_data": _in_memory(_rows(500, seed=9))} if name == "pca-identity" else {}
    if name in ("dppro", "rp-gaussian", "local-gaussian"):
        params["delta"] = 1e-6
    lazy = cls(epsilon=float("inf"), random_state=1, **params).release(lazy_table)
    memory = cls(epsilon=float("inf"), random_state=1, **params).release(memory_ds)
    assert lazy.label_columns == memory.label_columns
    np.testing.assert_array_equal(np.asarray(lazy.labels), memory.labels)
    lazy = cls(epsilon=2.0, random_state=1, **params).release(lazy_table)
    memory = cls(epsilon=2.0, random_state=1, **params).release(memory_ds)
    assert lazy.noise == memory.noise and lazy.guarantee == memory.guarantee
    got = np.asarray(lazy.labels)
    record = lazy.noise[-1]
    if task == "classification":
        flipped = np.mean(got != y)
        assert abs(flipped - record.scale) < 5 * np.sqrt(record.scale * (1 - record.scale) / y.size)
    else:
        assert np.std(got - y) == pytest.approx(np.std(memory.labels - y), rel=0.1)
    out = tmp_path / "out"
    dask_engine.write_release(cls(epsilon=2.0, **params).release(lazy_table), out)
    frame = pd.concat([pd.read_parquet(p) for p in sorted(out.glob("part-*.parquet"))])
    assert list(frame.columns[-1:]) == memory.label_columns and len(frame) == y.size
    if task == "classification":
        assert set(frame[memory.label_columns[0]]) <= {"a", "b", "c"}


@pytest.mark.slow
@pytest.mark.parametrize(("name", "task"), [(m, t) for m, tasks in sorted(dask_engine.SUPPORTED.items())
                                            for t in tasks if t != "unsupervised"])
def test_no_labelled_release_collects_the_table(labelled, tmp_path, refuse_collect, name, task):
    """Labelled releases on the Dask engine never load the rows or the labels into memory."""
    from dpcore.mechanisms import get_mechanism

    lazy_table, _, y = _labelled_tables(labelled, task)
    params = {"public_data": _in_memory(_rows(500, seed=9))} if name == "pca-identity" else {}
    if name in ("dpmix", "dppro", "rp-gaussian", "local-gaussian"):
        params["delta"] = 1e-6
    rel, written = dask_engine.release_table(get_mechanism(name)(epsilon=1.0, **params), lazy_table,
                                             tmp_path / "out")
    assert sum(len(pd.read_parquet(tmp_path / "out" / f)) for f in json.loads(
        written["card"].read_text())["files"]) == rel.data.shape[0]


def test_labels_need_public_facts_and_joint_rp_labels_are_refused(labelled):
    X, kind, score, folder = labelled
    _labelled_tables(labelled, "classification")
    _labelled_tables(labelled, "regression")
    no_classes = dask_engine.open_table(str(folder / "kind*.parquet"), label="kind", task="classification",
                                        bounds=BOUNDS)
    with pytest.raises(DataValidationError, match="needs the public class list"):
        DPPro(epsilon=1.0, delta=1e-6).release(no_classes)
    no_bounds = dask_engine.open_table(str(folder / "score*.parquet"), label="score", task="regression",
                                       bounds=BOUNDS)
    with pytest.raises(DataValidationError, match="needs the public label bounds"):
        DPPro(epsilon=1.0, delta=1e-6).release(no_bounds)
    from dpcore.mechanisms import get_mechanism

    table_c, _, _ = _labelled_tables(labelled, "classification")
    with pytest.raises(ValueError, match="label_release='separate'"):
        get_mechanism("rp-gaussian")(epsilon=1.0, delta=1e-6, label_release="appended").release(table_c)


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_dpmix_labels_on_dask(labelled, task):
    """DPMix mixes the encoded labels with the rows (one-hot / scaled to [0, 1]): with a seed, the
    Dask mixtures, soft labels and argmax class equal the in-memory ones."""
    lazy_table, memory_ds, _ = _labelled_tables(labelled, task)
    params = {"epsilon": 3.0, "delta": 1e-6, "ell": 6, "n_mixtures": 2_500, "random_state": 8}
    with dask_engine.lazy_output(1_000):
        lazy = DPMix(**params).release(lazy_table)
    memory = DPMix(**params).release(memory_ds)
    np.testing.assert_allclose(np.asarray(lazy.data), memory.data, rtol=0, atol=1e-12)
    assert lazy.label_columns == memory.label_columns and lazy.noise == memory.noise
    got = np.asarray(lazy.labels)
    if task == "classification":
        np.testing.assert_allclose(got[:, :-1].astype(float), memory.labels[:, :-1].astype(float), atol=1e-12)
        np.testing.assert_array_equal(got[:, -1], memory.labels[:, -1])
    else:
        np.testing.assert_allclose(got, memory.labels, atol=1e-12)


def test_cli_public_data_on_dask(table, tmp_path):
    """`--public-data` with `--engine dask`: the public rows (in memory) give pca-identity its basis;
    the card identifies them, as in memory."""
    from dpcore.cli import main

    _, glob = table
    bounds = tmp_path / "bounds.json"
    bounds.write_text(json.dumps(BOUNDS))
    public = tmp_path / "public.csv"
    pd.DataFrame(_rows(400, seed=12), columns=COLUMNS).to_csv(public, index=False)
    out = tmp_path / "out"
    assert main(["release", "pca-identity", glob, "-o", str(out), "--bounds", str(bounds), "--engine", "dask",
                 "--public-data", str(public), "--n-components", "3"]) == 0
    card = json.loads((out / "card.json").read_text())
    assert card["mechanism"] == "pca-identity" and "public_data_sha256" in json.dumps(card)
    assert sum(len(pd.read_parquet(out / name)) for name in card["files"]) == 12_000
    wrong = tmp_path / "wrong.csv"
    pd.DataFrame(_rows(50, seed=1)[:, :4], columns=COLUMNS[:4]).to_csv(wrong, index=False)
    assert main(["release", "pca-identity", glob, "-o", str(tmp_path / "o2"), "--bounds", str(bounds),
                 "--engine", "dask", "--public-data", str(wrong)]) == 2
    assert not (tmp_path / "o2").exists()


def test_ron_gauss_regression_on_dask(labelled):
    """RON-Gauss Alg. 4 (the label appended to the projected rows): with a seed, the Dask path gives
    the in-memory augmented second moment and DP means to rounding, and the same card."""
    lazy_table, memory_ds, _ = _labelled_tables(labelled, "regression")
    lazy, lazy_diag = RONGauss(epsilon=1.0, random_state=6).explore(lazy_table)
    memory, memory_diag = RONGauss(epsilon=1.0, random_state=6).explore(memory_ds)
    for key in ("mu_dp", "sigma_dp", "mean_dp_augmented"):
        np.testing.assert_allclose(lazy_diag[key], memory_diag[key], rtol=1e-9, atol=1e-12)
    assert lazy.noise == memory.noise and lazy.guarantee == memory.guarantee
    assert lazy.label_columns == memory.label_columns and dask_engine.is_lazy(lazy.data)  # rows stay lazy


@pytest.mark.parametrize(("cls", "params", "keys"), [
    (RONGauss, {}, ("mu_dp", "sigma_dp", "class_counts_dp")),
    (RONGauss, {"label_privacy": "within-class"}, ("mu_dp", "sigma_dp", "class_sizes")),
    (RONGauss, {"noise": "gaussian"}, ("mu_dp", "sigma_dp", "class_counts_dp")),
])
def test_per_class_statistics_on_dask(labelled, cls, params, keys):
    """Per-class kernels (class counts, per-class sums, per-class second moments, in two reads for
    RON-Gauss Alg. 5): with a seed, the Dask statistics equal the in-memory ones to rounding, and
    the cards and noise records are the same."""
    lazy_table, memory_ds, _ = _labelled_tables(labelled, "classification")
    lazy, lazy_diag = cls(epsilon=1.0, random_state=6, **params).explore(lazy_table)
    memory, memory_diag = cls(epsilon=1.0, random_state=6, **params).explore(memory_ds)
    _assert_same_diagnostics(lazy_diag, memory_diag, keys)
    assert lazy.noise == memory.noise and lazy.guarantee == memory.guarantee
    assert lazy.label_columns == memory.label_columns


@pytest.mark.parametrize(("task", "params"), [
    (task, params) for task in ("classification", "regression")
    for params in ({}, {"noise": "gaussian"}, {"pca_source": "analyze-gauss"}, {"pca_source": "public"},
                   *([{"label_privacy": "within-class"}, {"covariance_type": "tied"},
                      {"covariance_type": "tied", "noise": "gaussian", "pca_source": "analyze-gauss"}]
                     if task == "classification" else []))])
def test_pca_gauss_supervised_on_dask(labelled, task, params):
    """PCA-Gauss Alg. 2 / 3 (one read: the feature-space Gram matrix for the DP basis and, in the
    same pass, the label cross terms or the per-class sums and second moments; with a public basis,
    the moments of the projected rows): with a seed, the Dask statistics equal the in-memory ones
    to rounding, and the cards are the same."""
    lazy_table, memory_ds, _ = _labelled_tables(labelled, task)
    if params.get("pca_source") == "public":
        params = {**params, "public_data": _in_memory(_rows(500, seed=9))}
    lazy, lazy_diag = PCAGauss(epsilon=1.0, random_state=3, **params).explore(lazy_table)
    # a Dask release stays in the released space, so it measures no marginals for decoding
    # (dpcore.mechanisms._marginals.marginal_share): the in-memory twin is the one without them
    memory, memory_diag = PCAGauss(epsilon=1.0, random_state=3, marginals="off", **params).explore(memory_ds)
    keys = ("mu_dp", "second_moment_dp") + (("class_counts_dp",) if "label_privacy" not in params
                                           else ("class_sizes",)) if task == "classification" \
        else ("mean_dp", "second_moment_dp", "covariance_dp_repaired")
    _assert_same_diagnostics(lazy_diag, memory_diag, keys)
    assert lazy.noise == memory.noise and lazy.guarantee == memory.guarantee


def _assert_same_diagnostics(got, expected, keys):
    for key in keys:
        if isinstance(expected[key], dict):
            assert got[key].keys() == expected[key].keys()
            for k in expected[key]:
                np.testing.assert_allclose(got[key][k], expected[key][k], rtol=1e-9, atol=1e-12)
        else:
            np.testing.assert_allclose(got[key], expected[key], rtol=1e-9, atol=1e-12)


def _written_rows(out):
    """Rows in the parts an output folder's card lists."""
    card = json.loads((out / "card.json").read_text())
    return sum(len(pd.read_parquet(out / name)) for name in card["files"])


def test_table_sorted_by_class_one_file_per_class(labelled, tmp_path):
    """A table split by its label (one file per class, as a registry exported class by class):
    each partition holds one class, which the loader refuses for a whole table but not for a
    part of one. RON-Gauss Alg. 5's per-class statistics equal the in-memory ones on the same rows;
    DPMix releases its T mixtures."""
    X, kind, _, _ = labelled
    order = np.argsort(kind, kind="stable")
    for c in ("a", "b", "c"):
        rows = order[kind[order] == c]
        pd.DataFrame(X[rows], columns=COLUMNS).assign(kind=kind[rows]).to_parquet(tmp_path / f"{c}.parquet")
    options = {"label": "kind", "task": "classification", "classes": ["a", "b", "c"], "bounds": BOUNDS}
    lazy_table = dask_engine.open_table(str(tmp_path / "*.parquet"), **options)
    assert lazy_table.n_partitions == 3
    memory_ds = load_dataset(pd.DataFrame(X[order], columns=COLUMNS).assign(kind=kind[order]), **options)
    lazy, lazy_diag = RONGauss(epsilon=1.0, random_state=6).explore(lazy_table)
    memory, memory_diag = RONGauss(epsilon=1.0, random_state=6).explore(memory_ds)
    _assert_same_diagnostics(lazy_diag, memory_diag, ("mu_dp", "sigma_dp", "class_counts_dp"))
    assert lazy.guarantee == memory.guarantee
    release, _ = dask_engine.release_table(DPMix(epsilon=1.0, delta=1e-6, ell=4, n_mixtures=300), lazy_table,
                                           tmp_path / "out")
    assert _written_rows(tmp_path / "out") == 300
    # a row-wise release's parts do not follow the files: their sizes would be the class counts
    dask_engine.release_table(LocalGaussian(epsilon=1.0), lazy_table, tmp_path / "rows")
    sizes = [len(pd.read_parquet(p)) for p in sorted((tmp_path / "rows").glob("part-*"))]
    rows = lazy_table.part_rows
    assert sizes == [rows] * (len(X) // rows) + [len(X) % rows] * bool(len(X) % rows)
    assert lazy_table.lengths == tuple(np.unique(kind, return_counts=True)[1]) != tuple(sizes)


def test_one_row_and_empty_parts(table, tmp_path):
    """A one-row partition is checked as one row (its error counts 1 row and gives its row number
    in its file; before, it was checked as two copies of the row); empty Parquet parts (as Spark
    writes them) hold no rows and are left out; a table of fewer than 2 rows, or of empty files
    only, is refused when opened, with nothing written."""
    X, _ = table
    frame = pd.DataFrame(X[:50], columns=COLUMNS)
    frame.iloc[:0].to_parquet(tmp_path / "p0.parquet")
    frame.iloc[:49].to_parquet(tmp_path / "p1.parquet")
    frame.iloc[49:].to_parquet(tmp_path / "p2.parquet")
    lazy_table = dask_engine.open_table(str(tmp_path / "p*.parquet"), bounds=BOUNDS)
    assert lazy_table.n == 50 and lazy_table.n_partitions == 2
    release, _ = dask_engine.release_table(PCAGauss(epsilon=1.0), lazy_table, tmp_path / "out")
    assert _written_rows(tmp_path / "out") == 50
    bad = frame.iloc[49:].copy()
    bad.iloc[0, 2] = np.nan
    bad.to_parquet(tmp_path / "p2.parquet")
    one_row = r"p2\.parquet .*: 1 rows contain missing .*first rows: \[0\]"
    with pytest.raises(DataValidationError, match=one_row):
        dask_engine.release_table(PCAGauss(epsilon=1.0), dask_engine.open_table(
            str(tmp_path / "p*.parquet"), bounds=BOUNDS), tmp_path / "out2")
    assert not (tmp_path / "out2").exists()
    frame.iloc[49:].to_parquet(tmp_path / "single.parquet")
    with pytest.raises(DataValidationError, match="the table has 1 row"):
        dask_engine.open_table(str(tmp_path / "single.parquet"), bounds=BOUNDS)
    with pytest.raises(DataValidationError, match="hold no rows"):
        dask_engine.open_table(str(tmp_path / "p0.parquet"), bounds=BOUNDS)


@pytest.mark.parametrize(("task", "params"), [
    (task, params) for task in ("unsupervised", "classification", "regression")
    for params in ({}, {"noise": "gaussian"},
                   *([{"label_privacy": "within-class"}] if task == "classification" else []))])
def test_modips_on_dask(table, labelled, task, params):
    """MODIPS (one read: per class the rows, sums and second moments of the box-mapped rows, with
    the label for regression): with a seed, the exact and noisy statistics equal the in-memory ones
    to rounding, the cards are the same, and the synthetic rows are drawn lazily."""
    from dpcore.mechanisms import get_mechanism

    if task == "unsupervised":
        X, glob = table
        lazy_table, memory_ds = dask_engine.open_table(glob, bounds=BOUNDS, blocksize=20_000), _in_memory(X)
    else:
        lazy_table, memory_ds, _ = _labelled_tables(labelled, task)
    cls = get_mechanism("modips")
    lazy, lazy_diag = cls(epsilon=1.0, random_state=2, **params).explore(lazy_table)
    # no marginals on Dask (released space): the in-memory twin is the one without them
    memory, memory_diag = cls(epsilon=1.0, random_state=2, marginals="off", **params).explore(memory_ds)
    _assert_same_diagnostics(lazy_diag, memory_diag, ("mean", "second_moment", "mean_dp", "second_moment_dp")
                             + (("class_counts_dp",) if task == "classification" and not params else ()))
    assert lazy.noise == memory.noise and lazy.guarantee == memory.guarantee
    with dask_engine.lazy_output(1_000):
        rel = cls(epsilon=1.0, random_state=2, **params).release(lazy_table)
    assert dask_engine.is_lazy(rel.data) and rel.data.shape == memory.data.shape


@pytest.mark.parametrize("fault", ["unknown_class", "nan"])
@pytest.mark.parametrize("name", ["ron-gauss", "pca-gauss", "modips"])
def test_bad_labelled_partition_same_error_nothing_written(tmp_path, fault, name):
    """The per-class kernels read rows and labels through the in-memory loader: a label outside the
    public class list or a NaN feature in one file gives the in-memory error, prefixed with the
    file, and nothing is written."""
    from dpcore.mechanisms import get_mechanism

    X = _rows(3_000, seed=4)
    kind = np.array(["a", "b", "c"])[(X[:, 0] * 3).astype(int).clip(0, 2)]
    frames = [pd.DataFrame(X[part], columns=COLUMNS).assign(kind=kind[part])
              for part in np.array_split(np.arange(3_000), 3)]
    bad = frames[1]
    if fault == "unknown_class":
        bad.loc[bad.index[3], "kind"] = "z"
    else:
        bad.loc[bad.index[9], "c2"] = np.nan
    for i, frame in enumerate(frames):
        frame.to_parquet(tmp_path / f"f{i}.parquet")
    options = {"label": "kind", "task": "classification", "classes": ["a", "b", "c"], "bounds": BOUNDS}
    out = tmp_path / "out"
    with pytest.raises(DataValidationError) as info:
        dask_engine.release_table(get_mechanism(name)(epsilon=1.0), str(tmp_path / "f*.parquet"), out,
                                  **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        expected = _in_memory_error(str(tmp_path / "f1.parquet"), **options)
    assert "f1.parquet" in str(info.value) and expected in str(info.value)
    assert not out.exists() and not list(tmp_path.glob(".out.*"))


@pytest.mark.parametrize("classes", [["a", "b", "c"], ["c", "a", "b"]])  # sorted, and not
@pytest.mark.parametrize("name", ["pca-gauss", "ron-gauss", "dpmix", "jl-laplace"])
def test_the_mechanisms_class_list_is_checked_on_every_partition(tmp_path, name, classes):
    """A class list given to the mechanism only (the table opened without one) was checked against
    the first rows only: a label outside it further on was mapped silently to a class (the last
    one, or by sort position), or crashed with an IndexError. Now every batch's labels are checked
    against it: the in-memory error, and nothing written."""
    from dpcore.mechanisms import get_mechanism

    X = _rows(3_000, seed=5)
    kind = np.array(["a", "b", "c"])[(X[:, 0] * 3).astype(int).clip(0, 2)]
    kind[2_500] = "z"  # past the first rows the table's options are resolved from
    pd.DataFrame(X, columns=COLUMNS).assign(kind=kind).to_parquet(tmp_path / "t.parquet", row_group_size=400)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        table = dask_engine.open_table(str(tmp_path / "t.parquet"), label="kind", task="classification",
                                       bounds=BOUNDS, blocksize=20_000)
    params = {"task": "classification"} if name == "jl-laplace" else {}
    mech = get_mechanism(name)(epsilon=1.0, classes=classes, **params)
    out = tmp_path / "out"
    with pytest.raises(DataValidationError, match=r"1 labels are not in the public class list .*'z'"):
        dask_engine.release_table(mech, table, out)
    assert not out.exists() and not list(tmp_path.glob(".out.*"))
    with pytest.raises(ValueError, match=r"1 labels are not in the public class list .*'z'"):
        mech.release(load_dataset(pd.DataFrame(X, columns=COLUMNS).assign(kind=kind), label="kind",
                                  task="classification", bounds=BOUNDS, classes=sorted(set(kind))))


@pytest.mark.slow
def test_dpmix_checks_every_partition_whatever_index_sets_are_drawn(tmp_path):
    """DPMix reads the partitions its index sets name; one its first chunk misses was never read,
    so a NaN there was refused or not depending on the secret index sets (here 20 mixtures of 2
    rows out of 40 files: most files are missed). The first chunk reads every partition: always
    the in-memory error."""
    rng = np.random.default_rng(0)
    for i in range(40):
        frame = pd.DataFrame(rng.uniform(0, 1, (100, 2)), columns=["a", "b"])
        if i == 39:
            frame.loc[50, "a"] = np.nan
        frame.to_parquet(tmp_path / f"p{i:02d}.parquet")
    bounds = {"a": (0, 1), "b": (0, 1)}
    table = dask_engine.open_table(str(tmp_path / "p*.parquet"), bounds=bounds)
    assert table.n_partitions == 40
    for seed in range(4):
        with pytest.raises(DataValidationError, match="p39.parquet.*missing or infinite"):
            DPMix(epsilon=1.0, ell=2, n_mixtures=20, random_state=seed).release(table)


def test_csv_category_codes_are_read_as_text_in_memory_and_in_every_block(tmp_path):
    """A category column is read as text from a CSV: codes such as "01" were read as the number 1
    wherever no other value of the file (or of the Dask block, or file) was text, and then missed
    their public list ("values outside its public category list: ['1', '2']"), so whether a table
    loaded depended on its rows. Now the file, its blocks and a file without any text code are all
    read as the in-memory table."""
    from dpcore.preprocessing import prepare_input

    rng = np.random.default_rng(0)
    a = pd.DataFrame({"v": rng.uniform(0, 1, 500), "zip": rng.choice(["01", "02", "x"], 500)})
    b = pd.DataFrame({"v": rng.uniform(0, 1, 500), "zip": rng.choice(["01", "02"], 500)})  # no 'x'
    (tmp_path / "two").mkdir()
    a.to_csv(tmp_path / "two" / "a.csv", index=False)
    b.to_csv(tmp_path / "two" / "b.csv", index=False)
    pd.concat([a, b]).to_csv(tmp_path / "all.csv", index=False)
    categories, bounds = {"zip": ["01", "02", "x"]}, {"v": (0.0, 1.0)}
    only_codes = load_dataset(str(tmp_path / "two" / "b.csv"), categories=categories, bounds=bounds)
    assert only_codes.feature_names == ["v", "zip=01", "zip=02", "zip=x"]
    np.testing.assert_array_equal(only_codes.X[:, 1], (b["zip"] == "01").to_numpy(float))
    memory = prepare_input(load_dataset(str(tmp_path / "all.csv"), categories=categories, bounds=bounds)).X
    for source, blocksize in ((tmp_path / "two" / "*.csv", None), (tmp_path / "all.csv", 4_000)):
        table = dask_engine.open_table(str(source), categories=categories, bounds=bounds,
                                       **({"blocksize": blocksize} if blocksize else {}))
        assert table.n_partitions >= 2
        data = dask_engine.prepare_input(table, mechanism="local-gaussian", supported_tasks=("unsupervised",))
        np.testing.assert_array_equal(np.asarray(data.X.compute()), memory)


def test_a_lazy_synthetic_release_gives_the_rows_it_wrote(table, tmp_path):
    """The synthetic rows of a release on Dask are drawn per output partition from generators in
    the task graph; each task draws from a copy, so the Release returned is the table written,
    however many times it is computed (before, the threaded scheduler advanced the generators in
    place: each compute gave other rows)."""
    _, glob = table
    rel, files = dask_engine.release_table(PCAGauss(epsilon=1.0), glob, tmp_path / "out", bounds=BOUNDS,
                                           blocksize=60_000)
    written = pd.concat([pd.read_parquet(files[k]) for k in sorted(files) if k != "card"]).to_numpy()
    first, second = np.asarray(rel.data.compute()), np.asarray(rel.data.compute())
    assert len(files) > 3 and written.shape == first.shape
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, written)


@pytest.mark.parametrize("cls", [RONGauss, PCAGauss, DPPro])
def test_release_called_on_a_table_draws_its_rows_lazily(table, cls):
    """``Mechanism.release(table)`` outside :func:`release_table` (the README's Python API) keeps the
    rows lazy, the drawn ones in parts of the table's public size; the generative mechanisms drew
    all n rows in memory there (and the memory check is not made for a table larger than memory)."""
    _, glob = table
    lazy = dask_engine.open_table(glob, bounds=BOUNDS, blocksize=60_000)
    rel = cls(epsilon=1.0).release(lazy)
    assert dask_engine.is_lazy(rel.data) and rel.data.shape[0] == lazy.n
    if cls is not DPPro:  # drawn rows; a row-wise release keeps its input's partitions until written
        assert set(rel.data.chunks[0][:-1]) == {lazy.part_rows}
    assert dask_engine.output_rows() is None  # the lazy output ends with the call


def test_missing_drop_is_refused_with_the_reason(table, tmp_path):
    """missing='drop' would make n the private count of complete rows: refused before anything is
    read, naming what to do instead; the CLI exits 2 and writes nothing."""
    from dpcore.cli import main

    _, glob = table
    with pytest.raises(DataValidationError, match="missing='drop' is not available on the Dask engine: n "
                                                  "would be the private count.*missing='impute'"):
        dask_engine.open_table(glob, bounds=BOUNDS, missing="drop")
    out = tmp_path / "out"
    assert main(["release", "pca-gauss", glob, "-o", str(out), "--engine", "dask", "--missing", "drop"]) == 2
    assert not out.exists()


@pytest.mark.parametrize("flags", [["--output-space", "original"], ["--no-clip"],
                                   ["--integer-columns", "c0"]])
def test_cli_refuses_the_decoding_flags_on_dask(table, tmp_path, capsys, flags):
    """The original-space options decode an in-memory release; the Dask parts are written in the
    mechanism's released space. They were ignored in silence (the file was not what was asked for):
    now refused, exit 2, nothing written. ``--n`` in memory is checked against the rows (it was
    ignored there)."""
    from dpcore.cli import main

    _, glob = table
    bounds = tmp_path / "b.json"
    bounds.write_text(json.dumps({c: list(b) for c, b in BOUNDS.items()}))
    out = tmp_path / "out"
    assert main(["release", "dpmix", glob, "-o", str(out), "--engine", "dask", "--bounds", str(bounds),
                 *flags]) == 2
    assert "not available with --engine dask" in capsys.readouterr().err and not out.exists()
    assert main(["release", "dpmix", glob, "-o", str(out), "--engine", "dask", "--bounds", str(bounds)]) == 0
    card = json.loads((out / "card.json").read_text())  # the card says what the parts hold
    assert card["output_space"] == "released" and card["output_note"].startswith(
        "Released space: every feature scaled from its public bounds to [0, 1]")
    first = glob.replace("*", "part0")
    assert main(["release", "dpmix", first, "-o", str(tmp_path / "m.csv"), "--engine", "memory", "--bounds",
                 str(bounds), "--n", "99999"]) == 2
    assert "--n 99,999 was given but the input holds 3,000 rows" in capsys.readouterr().err
    assert not (tmp_path / "m.csv").exists()


def _lazy_rows(values, rows_per_partition):
    import dask.array as da

    return da.from_array(values, chunks=(rows_per_partition, -1))


@pytest.mark.parametrize("distribution", ["gaussian", "laplace"])
def test_partition_noise_scale_per_cell(distribution):
    """Per-row grid noise drawn inside the partitions' tasks (partition_noise) has the plan's exact
    distribution in every cell: the residuals on each partition and on the whole table pass a KS
    test against the plan's continuous law at its scale (the grid is 2^-24 sigma or finer), and the
    values are on the plan's grid."""
    from dpcore import noise as dpnoise

    bits = dpnoise.SecureBits()
    if distribution == "gaussian":
        sigma = 0.7
        plan = dpnoise.gaussian_plan(sigma, grid=2.0**-30, l2_sensitivity=1.0, n_changed=1, bits=bits)
        law = stats.norm(scale=sigma)
    else:
        plan = dpnoise.laplace_plan(1.0, 2.0, n_changed=1, bits=bits)
        law = stats.laplace(scale=plan.scale)
    values = np.random.default_rng(0).uniform(0, 1, (20_000, 3))
    noisy = dask_engine.partition_noise(plan, _lazy_rows(values, 4_000))
    assert noisy.numblocks[0] == 5 and noisy.name.startswith("dpcore-noise-")
    drawn = np.asarray(noisy.compute())
    residual = drawn - values
    np.testing.assert_array_equal(drawn / plan.grid, np.rint(drawn / plan.grid))  # on the grid
    assert stats.kstest(residual.ravel(), law.cdf).pvalue > 1e-4
    for p in range(5):
        part = residual[4_000 * p:4_000 * (p + 1)].ravel()
        assert stats.kstest(part, law.cdf).pvalue > 1e-4
        assert part.std() == pytest.approx(law.std(), rel=0.05)


def test_partition_noise_streams_are_independent_per_partition():
    """No two partitions share a stream: the noise of equal partitions differs and is uncorrelated
    (|r| within 5 standard errors), the streams' first words differ for 1,000 indices; two
    secure releases draw fresh secrets (different noise), a partition computed twice gets the same
    noise, and a seeded preview gives the same noise for the same seed."""
    from dpcore import noise as dpnoise

    zeros = np.zeros((6 * 5_000, 2))
    plan = dpnoise.gaussian_plan(1.0, grid=2.0**-30, l2_sensitivity=1.0, n_changed=1,
                                 bits=dpnoise.SecureBits())
    noisy = dask_engine.partition_noise(plan, _lazy_rows(zeros, 5_000))
    first = np.asarray(noisy.compute())
    np.testing.assert_array_equal(first, np.asarray(noisy.compute()))  # deterministic per partition
    parts = first.reshape(6, -1)
    corr = np.corrcoef(parts)
    off = corr[~np.eye(6, dtype=bool)]
    assert np.all(np.abs(off) < 5 / np.sqrt(parts.shape[1]))
    again = np.asarray(dask_engine.partition_noise(plan, _lazy_rows(zeros, 5_000)).compute())
    assert not np.any(again == first)  # a fresh secret per call
    secret, secure = dpnoise.stream_secret(plan.bits)
    assert secure and len(secret) == 32
    heads = {dpnoise.DerivedBits(secret, i, secure=True).words(2).tobytes() for i in range(1_000)}
    assert len(heads) == 1_000
    seeded = [np.asarray(dask_engine.partition_noise(
        dpnoise.gaussian_plan(1.0, grid=2.0**-30, l2_sensitivity=1.0, n_changed=1,
                              bits=dpnoise.noise_source(seed)), _lazy_rows(zeros, 5_000)).compute())
        for seed in (3, 3, 4)]
    np.testing.assert_array_equal(seeded[0], seeded[1])
    assert not np.any(seeded[0] == seeded[2])
    assert not dpnoise.stream_secret(dpnoise.noise_source(3))[1]


def test_derived_bits_rekey_and_secret_checks():
    """A DerivedBits stream re-keys (a new HMAC key) after 2^36 bytes, as SecureBits; a secret that
    is not 256 bits is refused."""
    from dpcore import noise as dpnoise

    bits = dpnoise.DerivedBits(bytes(32), 7, secure=False)
    a = bits.words(4)
    bits._left = 0  # as if 2^36 bytes had been drawn
    b = bits.words(4)
    assert bits._rekeys == 2 and not np.array_equal(a, b)
    np.testing.assert_array_equal(dpnoise.DerivedBits(bytes(32), 7, secure=False).words(4), a)
    with pytest.raises(ValueError, match="32 bytes"):
        dpnoise.DerivedBits(bytes(16), 0, secure=True)


@pytest.mark.slow
@pytest.mark.parametrize("csv", [False, True])
def test_piece_partial_sums_read_the_partition_batch_by_batch(table, tmp_path, monkeypatch, csv):
    """A partition's partial sums, its rows read in many batches (Parquet row groups, or a CSV
    file whose row count only the read gives), equal the mixtures' sums of its rows clipped to
    the source's bounds and mapped by its row map, although only the rows the pairs name are
    clipped and mapped: bit for bit the sums of the whole partition clipped, mapped, then
    gathered. Unused rows are left out (T small: most rows unused), and the sums are checked
    to the last bit."""
    from dpcore.mechanisms.dpmix import sample_mixture_indices
    from dpcore.preprocessing import scale_to_unit

    X, glob = table
    if csv:
        glob = str(tmp_path / "t.csv")
        pd.DataFrame(X, columns=COLUMNS).to_csv(glob, index=False)
    lazy_table = dask_engine.open_table(glob, bounds=BOUNDS, blocksize="1MiB" if csv else 20_000)
    piece, rows_p = lazy_table.pieces[-1], lazy_table.lengths[-1]
    start = X.shape[0] - rows_p
    # narrower than the data, so clipping changes values; the map is DPMix's scaling to [0, 1]
    lo, hi = np.full(X.shape[1], 0.2), np.full(X.shape[1], 0.7)
    scale = partial(scale_to_unit, bounds=np.column_stack([lo, hi]))
    source = dask_engine._Source(lazy_table.options, lo=lo, hi=hi, maps=(scale,))
    monkeypatch.setattr(dask_engine.reading, "BATCH_BYTES", 8 * 6 * 41)
    block = np.concatenate(list(dask_engine._source_batches(piece, source)))  # every row, mapped
    np.testing.assert_array_equal(block, scale(np.clip(X[start:], lo, hi)))
    assert len(list(dask_engine._source_batches(piece, source))) > 10
    for n_mixtures in (400, 3):  # most rows used; almost none (whole batches without a used row)
        idx = sample_mixture_indices(rows_p, 5, n_mixtures, np.random.default_rng(1))
        rows, mixtures, _ = dask_engine.pairs_by_partition(idx, np.array([0, rows_p]))
        ids, sums = dask_engine._piece_partial_sums(piece, source, rows, mixtures)
        np.testing.assert_array_equal(ids, np.unique(mixtures))
        np.testing.assert_array_equal(sums, dask_engine._partial_sums(block, rows, mixtures)[1])
        expected = np.zeros((n_mixtures, block.shape[1]))
        np.add.at(expected, mixtures, block[rows])
        np.testing.assert_allclose(dask_engine._spread((ids, sums), n_mixtures), expected, rtol=0, atol=1e-12)


@pytest.mark.slow
def test_partition_noise_written_by_cluster_workers(table, tmp_path):
    """DPPro's per-row noise drawn in the partitions' tasks is computed and written by the workers
    of a distributed LocalCluster (its graph pickles: the plan travels without its bit source),
    whereas DPMix's client-spilled mixtures are written with local threads (_spilled)."""
    distributed = pytest.importorskip("distributed")
    import cloudpickle

    _, glob = table
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        rel, written = dask_engine.release_table(DPPro(epsilon=1.0, delta=1e-6, n_components=3), glob,
                                                 tmp_path / "dppro", bounds=BOUNDS, blocksize=20_000)
        assert not dask_engine._spilled(rel.data)
        cloudpickle.dumps(dict(rel.data.__dask_graph__()))
        mixed, _ = dask_engine.release_table(DPMix(epsilon=2.0, delta=1e-6, ell=5, n_mixtures=500), glob,
                                             tmp_path / "dpmix", bounds=BOUNDS, blocksize=20_000)
        assert dask_engine._spilled(mixed.data)
        # the pairs reach the workers scattered as data; a seeded preview equals the local scheduler's
        seeded = DPMix(epsilon=2.0, delta=1e-6, ell=5, n_mixtures=500, random_state=3)
        on_cluster = np.asarray(dask_engine.release_table(seeded, glob, None, bounds=BOUNDS,
                                                          blocksize=20_000)[0].data)
    local, _ = dask_engine.release_table(seeded, glob, None, bounds=BOUNDS, blocksize=20_000)
    np.testing.assert_allclose(on_cluster, np.asarray(local.data), rtol=0, atol=1e-12)
    card = json.loads(written["card"].read_text())
    assert card["mechanism"] == "dppro" and card["noise"][0]["scale"] == rel.noise[0].scale
    assert card["noise"][0]["distribution"] == "gaussian"
    frames = [pd.read_parquet(tmp_path / "dppro" / f) for f in card["files"]]
    assert sum(map(len, frames)) == 12_000 and all(np.isfinite(f.to_numpy()).all() for f in frames)


def test_release_table_runs_its_tasks_with_one_blas_thread(tmp_path, monkeypatch):
    """OpenBLAS's threads inside the threaded scheduler's tasks spin against its worker threads:
    the release runs with one BLAS thread per task, and the process's setting comes back after."""
    from threadpoolctl import threadpool_info

    def blas_threads() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    before = blas_threads()
    seen: list[list[int]] = []
    real_write = dask_engine.write_release

    def spying_write(*args, **kwargs):
        seen.append(blas_threads())
        return real_write(*args, **kwargs)

    monkeypatch.setattr(dask_engine.releasing, "write_release", spying_write)
    X = np.random.default_rng(0).uniform(0, 1, (2_000, 4))
    path = tmp_path / "t.parquet"
    pd.DataFrame(X, columns=list("abcd")).to_parquet(path)
    dask_engine.release_table(PCAGauss(epsilon=1.0), str(path), tmp_path / "out",
                              bounds={c: (0.0, 1.0) for c in "abcd"})
    assert seen and seen[0] and all(t == 1 for t in seen[0])
    assert blas_threads() == before


@pytest.mark.parametrize("fault", ["nan", "inf", "null", "text"])
def test_bad_value_in_a_later_batch_gives_the_loader_error(tmp_path, monkeypatch, fault):
    """A bad value deep in a file (a later batch of a later row group) gives the in-memory
    loader's error for that file, with the file's row number (1,400, not its place in the
    batch), and nothing is written."""
    X = _rows(3_000, seed=4)
    frames = [pd.DataFrame(part, columns=COLUMNS) for part in np.array_split(X, 2)]
    frames[1]["c2"] = frames[1]["c2"].astype({"null": object, "text": str}.get(fault, float))
    frames[1].loc[frames[1].index[1_400], "c2"] = {"null": None, "nan": np.nan, "inf": -np.inf,
                                                   "text": "n/a?"}[fault]
    for i, frame in enumerate(frames):
        frame.to_parquet(tmp_path / f"f{i}.parquet", row_group_size=500)
    monkeypatch.setattr(dask_engine.reading, "BATCH_BYTES", 8 * 6 * 101)
    out = tmp_path / "out"
    with pytest.raises(DataValidationError) as info:
        dask_engine.release_table(PCAGauss(epsilon=1.0, delta=1e-6, n_components=2),
                                  str(tmp_path / "f*.parquet"), out, bounds=BOUNDS)
    assert "f1.parquet" in str(info.value) and "1400" in str(info.value)
    assert _in_memory_error(str(tmp_path / "f1.parquet"), bounds=BOUNDS) in str(info.value)
    assert not out.exists() and not list(tmp_path.glob(".out.*"))


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_text_beyond_the_first_rows_gives_the_file_error(tmp_path, fmt):
    """A column that is numeric except for one text value far into the first file: opening the
    table (whose first rows alone hold only numbers, as text in Parquet) gives the in-memory
    error for the file, naming the value and its row."""
    frame = pd.DataFrame(_rows(3_000, seed=6), columns=COLUMNS)
    frame["c1"] = frame["c1"].astype(str)
    frame.loc[2_500, "c1"] = "n/a?"
    path = tmp_path / f"f.{fmt}"
    frame.to_csv(path, index=False) if fmt == "csv" else frame.to_parquet(path, row_group_size=1_000)
    with pytest.raises(DataValidationError) as info:
        dask_engine.open_table(str(path), bounds=BOUNDS)
    expected = _in_memory_error(str(path), bounds=BOUNDS)
    assert "'n/a?' (row 2500)" in expected and expected in str(info.value)
    numeric_text = frame.drop(index=2_500)
    with pytest.raises(DataValidationError, match="'c1' holds only numbers, but stored as text"):
        load_dataset(numeric_text.to_parquet(), filename="t.parquet", bounds=BOUNDS)


@pytest.mark.slow
def test_dpmix_partition_sums_show_one_bar_and_bypass_dask_callbacks(table, tmp_path, capfd):
    """DPMix's partitions, summed on the client's pool, are shown by one bar reaching 100% (with
    progress) and run without Dask's global callbacks: one callback start per partition meant a
    Dask progress bar per partition (each waiting for its timer) whose starts and stops from two
    threads swapped the global callback set."""
    from dask.callbacks import Callback

    _, glob = table
    lazy_table = dask_engine.open_table(glob, bounds=BOUNDS, blocksize=20_000)
    assert lazy_table.n_partitions >= 8
    starts = []
    with Callback(start=lambda dsk: starts.append(1)):
        dask_engine.release_table(DPMix(epsilon=1.0, delta=1e-6, ell=4, n_mixtures=500), lazy_table,
                                  tmp_path / "quiet")
    assert len(starts) < lazy_table.n_partitions
    capfd.readouterr()
    dask_engine.release_table(DPMix(epsilon=1.0, delta=1e-6, ell=4, n_mixtures=500), lazy_table,
                              tmp_path / "shown", progress=True)
    bars = capfd.readouterr().err.replace("\n", "\r").split("\r")
    steps = [b for b in bars if b.startswith("[") and "Completed" in b]
    assert any(b.startswith("[" + "#" * 40 + "] | 100% Completed") for b in steps)
    percents = {int(b.split("| ")[1].split("%")[0]) for b in steps}
    assert len(percents) > lazy_table.n_partitions // 2  # the bar moves partition by partition
