"""dpcore.threads: the one thread rule of releases (in memory, the CLI, the Dask engine, the app)."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from dpcore import cli, cli_release, threads
from dpcore.mechanisms import JLLaplace, RONGauss


def _blas() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def two_blas_threads(monkeypatch):
    """The process at two BLAS threads (as OpenBLAS starts on two cores), the rule's variables unset."""
    for name in (threads.BLAS_THREADS_ENV, "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    with threadpool_limits(limits=2, user_api="blas"):
        if not _blas() or min(_blas()) < 2:
            pytest.skip("the BLAS library cannot run two threads here")
        yield


def test_the_rule_is_one_thread_unless_the_environment_says_otherwise(monkeypatch):
    for name in (threads.BLAS_THREADS_ENV, "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    assert threads.blas_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "64")
    assert threads.blas_threads() == threads.cpu_count()  # never more than the CPUs
    monkeypatch.setenv(threads.BLAS_THREADS_ENV, "1")
    assert threads.blas_threads() == 1  # dpcore's own variable first
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(threads.BLAS_THREADS_ENV, bad)
        with pytest.raises(ValueError, match=threads.BLAS_THREADS_ENV):
            threads.blas_threads()


def test_blas_limit_lowers_and_restores_but_never_raises(two_blas_threads):
    with threads.blas_limit():
        assert set(_blas()) == {1}
        with threads.blas_limit(2):  # at most 2: already below, left alone
            assert set(_blas()) == {1}
    assert min(_blas()) == 2


def test_releases_fits_and_samples_run_at_the_rule(two_blas_threads, monkeypatch):
    """Mechanism.release (JL-Laplace), a generative mechanism's fit and sample (RON-Gauss): the
    linear algebra inside sees one BLAS thread; the caller's setting comes back after."""
    seen: list[list[int]] = []
    rng = np.random.default_rng(0)
    X, y = rng.uniform(0, 1, (300, 6)), rng.integers(0, 2, 300)
    real_project = JLLaplace._release

    def spy_release(self, *args, **kwargs):
        seen.append(_blas())
        return real_project(self, *args, **kwargs)

    monkeypatch.setattr(JLLaplace, "_release", spy_release)
    JLLaplace(epsilon=1.0, n_components=3, bounds=(0, 1)).release(X)
    real_fitted = RONGauss._fitted

    def spy_fitted(self, *args, **kwargs):
        seen.append(_blas())
        return real_fitted(self, *args, **kwargs)

    monkeypatch.setattr(RONGauss, "_fitted", spy_fitted)
    mech = RONGauss(epsilon=1.0, n_components=3, bounds=(0, 1), classes=[0, 1]).fit(X, y)
    real_draw = type(mech._fitted_model).draw

    def spy_draw(self, *args, **kwargs):
        seen.append(_blas())
        return real_draw(self, *args, **kwargs)

    monkeypatch.setattr(type(mech._fitted_model), "draw", spy_draw)
    mech.sample(50)
    assert seen == [[1] * len(_blas())] * 3
    assert min(_blas()) == 2


def test_the_cli_releases_at_the_rule(two_blas_threads, monkeypatch, tmp_path):
    seen: list[list[int]] = []
    real = cli_release.with_output_space  # the release command's module

    def spy(*args, **kwargs):
        seen.append(_blas())
        return real(*args, **kwargs)

    monkeypatch.setattr(cli_release, "with_output_space", spy)
    assert cli.main(["release", "jl-laplace", "digits", "-o", str(tmp_path / "out.csv")]) == 0
    assert seen and set(seen[0]) == {1}
    monkeypatch.setenv(threads.BLAS_THREADS_ENV, "none")
    assert cli.main(["release", "jl-laplace", "digits", "-o", str(tmp_path / "bad.csv")]) == 2
    assert not (tmp_path / "bad.csv").exists()
