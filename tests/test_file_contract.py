"""Contract: at a very large epsilon the downloaded file converges to what its model family can
represent of the data.

Every mechanism whose release returns to the original schema (dpcore.decode.INVERSES) on bundled
tables, each task it supports, at epsilon = 10^6, decoded as the CLI and the app write the file. The
tolerances follow from the model family, not from a fit to these tables:

- generative models with DP marginals (PCA-Gauss, MODIPS): each column's marginal is the DP
  histogram's (64 cells at this noise), so means and standard deviations match to the cells'
  resolution, category rates and the label rate exactly; the dependence is a Gaussian copula of
  the model, so pairwise correlations match only to what a Gaussian copula of the data keeps
  (here within 0.2);
- local perturbation (LocalGaussian): every row plus noise of about 10^-6 of its range: everything
  matches, correlations within 0.05;
- mixtures (DPMix): each row averages ``ell`` records, so means and the label rate are kept and a
  column's standard deviation shrinks to about ``1/sqrt(ell)`` of the data's (not more than its own);
  categories are the most frequent among the mixed records, so their rates are not kept;
- a rank-p reconstruction (PCA-Gauss without marginals, a given p): the file's numeric columns span
  at most ``p`` directions around the DP mean (what the other ``d - p`` components held is not in
  the file).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from dpcore.data import load_dataset
from dpcore.decode import INVERSES, PublicSchema, to_original, with_output_space
from dpcore.evaluation.fidelity import private_frame
from dpcore.mechanisms import PCAGauss, get_mechanism

EPSILON = 1e6

TABLES = {"adult": lambda: load_dataset("adult").subset(np.arange(8000)),
          "diabetes": lambda: load_dataset("diabetes"),
          "breast-cancer": lambda: load_dataset("breast-cancer")}


@pytest.fixture(scope="module")
def tables():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: make() for name, make in TABLES.items()}


def _file(name: str, ds, **kw) -> pd.DataFrame:
    if name == "pca-identity":
        kw["public_data"] = ds.subset(np.arange(min(300, ds.n_samples)))
    # one fixed draw per case: the contract is about the model family, and an unseeded draw made
    # the test fail in about 1.5 % of runs per breast-cancer case (a heavy-tailed column's Pearson
    # correlation in the tail of its decoding; see the utility docs' limits)
    rel = get_mechanism(name)(epsilon=EPSILON, random_state=0, **kw).release(ds)
    return with_output_space(rel, PublicSchema.from_dataset(ds), None).to_frame()


_NOISE_SD: dict = {}


def _noise_sd(file: pd.DataFrame, ds, column: str) -> float:
    """LocalGaussian's noise standard deviation on ``column`` (its card's ``noise_per_column``)."""
    key = (ds.name, ds.n_samples)
    if key not in _NOISE_SD:
        rel = get_mechanism("local-gaussian")(epsilon=EPSILON, random_state=0).release(ds)
        _NOISE_SD[key] = rel.details["noise_per_column"]
    return float(_NOISE_SD[key][column])


def _category_tv(file: pd.DataFrame, real: pd.DataFrame, schema) -> float:
    worst = 0.0
    for column, values in schema.categories.items():
        known = real[column][real[column] != ""]  # a missing value has no category
        a = known.astype(str).value_counts(normalize=True).reindex(values, fill_value=0.0)
        b = file[column].astype(str).value_counts(normalize=True).reindex(values, fill_value=0.0)
        worst = max(worst, 0.5 * float(np.abs(a - b).sum()))
    return worst


def _label_gap(file: pd.DataFrame, real: pd.DataFrame, ds) -> float:
    name = ds.label_name
    if ds.task == "classification":
        last = str(ds.classes[-1])
        return abs(float(np.mean(file[name].astype(str) == last) - np.mean(real[name].astype(str) == last)))
    width = ds.label_bounds[1] - ds.label_bounds[0]
    return abs(float(file[name].mean() - real[name].mean())) / width


#: (mechanism, noise) -> what its family keeps; the papers' Laplace variant of the models at
#: epsilon = 10^6 has noise ~1e-6, the default Gaussian ~1e-3 of a statistic (its scale goes like
#: 1/sqrt(epsilon)), which the small tables' narrow columns still see
CASES = [("pca-gauss", {}), ("modips", {}), ("pca-gauss", {"noise": "laplace"}),
         ("modips", {"noise": "laplace"}), ("local-gaussian", {}), ("dpmix", {}), ("pca-identity", {})]


def _copula_correlations(real: pd.DataFrame, numeric: list[str], groups: np.ndarray, seed: int = 0
                         ) -> np.ndarray:
    """The correlations a Gaussian copula of the data gives once its margins are the data's own,
    within each group (class) and pooled: what a Gaussian model with exact marginals can represent."""
    rng = np.random.default_rng(seed)
    parts = []
    for g in np.unique(groups):
        rows = real.loc[groups == g, numeric].to_numpy(float)
        if len(rows) < 3:
            continue
        spread = rows.std(axis=0) > 0
        corr = np.eye(len(numeric))
        corr[np.ix_(spread, spread)] = np.corrcoef(rows[:, spread], rowvar=False)
        z = rng.multivariate_normal(np.zeros(len(numeric)), corr, size=8 * len(rows), method="eigh")
        u = (np.argsort(np.argsort(z, axis=0), axis=0) + 0.5) / len(z)
        parts.append(np.column_stack([np.quantile(rows[:, j], u[:, j]) for j in range(len(numeric))]))
    return np.corrcoef(np.vstack(parts), rowvar=False)


IDS = [f"{n}-{'-'.join(k.values()) or 'default'}" for n, k in CASES]


@pytest.mark.slow
@pytest.mark.parametrize("table", list(TABLES))
@pytest.mark.parametrize(("name", "kw"), CASES, ids=IDS)
def test_the_file_converges_to_its_model_family(tables, table, name, kw):
    assert name in INVERSES
    ds = tables[table]
    if name == "pca-identity" and table == "adult":
        pytest.skip("pca-identity on 105 one-hot columns: its public basis of 300 rows is the point, "
                    "not the contract")
    schema = PublicSchema.from_dataset(ds)
    real = private_frame(ds, schema)
    file = _file(name, ds, **kw)
    assert list(file.columns) == list(real.columns) and len(file) == len(real)
    numeric = schema.numeric_columns()
    index = [schema.feature_names.index(c) for c in numeric]
    width = schema.bounds[index, 1] - schema.bounds[index, 0]
    mean_gap = np.abs(file[numeric].mean().to_numpy() - real[numeric].mean().to_numpy()) / width
    sd_ratio = file[numeric].std().to_numpy() / np.maximum(real[numeric].std().to_numpy(), 1e-12)
    small_table = ds.n_samples < 1000 and not kw  # the default Gaussian noise on 400-600 rows
    if name in ("pca-gauss", "modips"):
        assert mean_gap.max() <= 0.02, mean_gap
        assert _label_gap(file, real, ds) <= 0.01
        assert _category_tv(file, real, schema) <= 0.02
        if not small_table:
            # a column's spread to the cells' resolution: a few hundred rows leave the tail cells of a
            # narrow column with too few model rows to shape them (spread across the cell instead)
            slack = 0.15 if ds.n_samples >= 1000 else 0.3
            assert 1 - slack <= sd_ratio.min() and sd_ratio.max() <= 1 + slack, sd_ratio
            groups = real[ds.label_name].to_numpy() if ds.task == "classification" else np.zeros(len(real))
            copula = _copula_correlations(real, numeric, groups)
            gap = np.nanmax(np.abs(file[numeric].corr().to_numpy() - copula))
            # the Gaussian copula's correlations, to the sampling noise of the largest of many
            # correlations of n rows (about 4.5 standard errors 1/sqrt(n)) and the model's own noise
            assert gap <= 0.05 + 5 / np.sqrt(ds.n_samples), gap
    elif name == "local-gaussian":
        # every row plus Gaussian noise of sd sigma_j (its scale falls like 1/sqrt(epsilon), not
        # 1/epsilon), clipped to the bounds: the same, simulated on the real rows
        sigma = np.array([_noise_sd(file, ds, c) for c in numeric])
        rng = np.random.default_rng(1)
        lo, hi = schema.bounds[index, 0], schema.bounds[index, 1]
        sim = np.clip(real[numeric].to_numpy(float) + rng.normal(size=(len(real), len(numeric))) * sigma,
                      lo, hi)
        expected_sd = sim.std(axis=0, ddof=1) / np.maximum(real[numeric].std().to_numpy(), 1e-12)
        assert mean_gap.max() <= 0.01
        assert np.all(np.abs(sd_ratio - expected_sd) <= 0.1 * expected_sd), (sd_ratio, expected_sd)
        expected = np.corrcoef(sim, rowvar=False)
        assert np.nanmax(np.abs(file[numeric].corr().to_numpy() - expected)) <= 0.05 + 5 / np.sqrt(len(real))
        assert _label_gap(file, real, ds) <= 0.01
        # a row with no category (a missing value of a pre-encoded table) comes back as one of them
        missing = max([float(np.mean(real[c] == "")) for c in schema.categories] or [0.0])
        assert _category_tv(file, real, schema) <= missing + 0.01
    elif name == "dpmix":
        ell = 16  # the default mixture degree
        assert mean_gap.max() <= 0.03, mean_gap
        assert _label_gap(file, real, ds) <= 0.02
        shrunk = sd_ratio[real[numeric].std().to_numpy() > 0]
        # at most the data's own spread; about 1/sqrt(ell) of it where the column is not point masses
        assert np.median(shrunk) <= 1.0 and np.median(shrunk) >= 0.5 / np.sqrt(ell), shrunk
    else:  # pca-identity: a rank-k reconstruction in a public basis of noisy rows
        assert mean_gap.max() <= 0.02 and sd_ratio.max() <= 1.05
        assert _label_gap(file, real, ds) <= 0.01


def test_a_rank_p_reconstruction_holds_p_directions_around_its_mean(tables):
    ds = tables["diabetes"]
    p = 3
    rel = PCAGauss(epsilon=EPSILON, n_components=p, marginals="off", noise="laplace",
                   random_state=0).release(ds)  # one fixed draw: its sample spread can pass 1.0
    schema = PublicSchema.from_dataset(ds)
    file = to_original(rel, schema, clip=False, marginals=False).to_frame()
    lo, hi = ds.bounds[:, 0], ds.bounds[:, 1]
    box = 2 * (file[ds.feature_names].to_numpy(float) - lo) / (hi - lo) - 1  # back to the box
    centred = box - box.mean(axis=0)
    singular = np.linalg.svd(centred, compute_uv=False)
    assert singular[p] <= 1e-8 * singular[0], singular  # what the other components held is gone
    # and the p directions it keeps are the top of the data's: they hold most of its spread
    data_box = 2 * (ds.X - lo) / (hi - lo) - 1
    kept = np.sum(singular[:p] ** 2) / np.sum(np.linalg.svd(data_box - data_box.mean(axis=0),
                                                            compute_uv=False) ** 2)
    assert 0.5 < kept <= 1.0 + 1e-9
