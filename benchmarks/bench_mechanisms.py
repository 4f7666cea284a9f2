"""RON-Gauss, PCA-Gauss, JL-Laplace and DPPro against the work they cannot avoid.

Each release is timed against a baseline timed in the same run, interleaved with it:

* RON-Gauss and PCA-Gauss: ``X.T @ X + X @ W`` (a Gram matrix and a projection to ``p`` columns;
  goal 1.6);
* JL-Laplace: ``X @ P`` plus ``n k`` float Laplace draws (``Generator.laplace``; goal 1.5); DPPro:
  ``X @ P`` plus ``n k`` normal draws (goal 2.0). The releases draw exact discrete noise from a
  CSPRNG on every core (``dpcore.noise.NoiseStream``), the baseline NumPy's float draws on one.

Beside them: the mechanism's own work on a prepared input ("mechanism only"), the input check
``prepare_input``, the exact noise alone against the float draws, and each release with the BLAS
libraries at their default thread count (``DEFAULT_BLAS_THREADS``, recorded by ``run.py`` before
any limit) against one thread (goal 1.1: a release applies ``dpcore.threads``' rule itself, so it
must not get slower when the caller leaves BLAS at its default). Peak extra memory (tracemalloc)
is a multiple of ``X.nbytes``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import bench_common
import numpy as np
from bench_common import Row, at_blas_threads, peak_memory, ratio_row, row_blocks, time_pair


def _callables(cls: type, X: np.ndarray, y: np.ndarray | None = None, **kwargs: Any
               ) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """``(release, mechanism-only)`` closures for a mechanism class on ``X`` (seeded previews)."""
    from dpcore.mechanisms._gaussian_model import GaussianGenerator
    from dpcore.noise import noise_source
    from dpcore.preprocessing import prepare_input
    from dpcore.schema import validate_params

    mech = cls(random_state=0, **kwargs)
    data = prepare_input(X, y, bounds=mech.bounds, label_bounds=mech.label_bounds,
                         classes=mech.classes, task=mech.task, supported_tasks=mech.tasks)
    params = validate_params(mech.params, {p.name: getattr(mech, p.name) for p in mech.params})

    def release() -> Any:
        return mech.release(X, y)

    def own() -> Any:
        rng = np.random.default_rng(0)
        if isinstance(mech, GaussianGenerator):  # the DP model (every noise draw), then its n rows
            n = data.n_samples
            return mech._fit(data, params, rng, bits=noise_source(0), n_samples=n).release(n, rng, None)
        return mech._release(data, params, rng, None, bits=noise_source(0))

    return release, own


def _blocked(draw: Callable[[int], Any], n: int, d: int) -> Callable[[], None]:
    """Call ``draw(rows)`` for the row blocks the mechanisms use (results dropped)."""
    def run() -> None:
        for sl in row_blocks(n, d):
            draw(sl.stop - sl.start)

    return run


def run(n: int, d: int, repeats: int, log: Callable[[str], None], threads_rows: bool = True) -> list[Row]:
    from dpcore import noise
    from dpcore.mechanisms import DPPro, JLLaplace, PCAGauss, RONGauss
    from dpcore.preprocessing import prepare_input

    rng = np.random.default_rng(0)
    X = rng.random((n, d))
    y_reg = rng.random(n)
    p, k = 10, 20
    W = np.linalg.qr(rng.standard_normal((d, p)))[0]
    P = rng.standard_normal((d, k)) / np.sqrt(k)
    size = f"n={n:,}, d={d}"
    draw = np.random.default_rng(1)
    rows: list[Row] = []

    def gram_and_projection() -> Any:
        return X.T @ X, X @ W

    def xp_laplace() -> Any:  # the product and n k float Laplace draws, block by block as a release
        for sl in row_blocks(n, d):
            X[sl] @ P
            draw.laplace(0.0, 1.0, (sl.stop - sl.start, k))

    def xp_normal() -> Any:
        for sl in row_blocks(n, d):
            X[sl] @ P
            draw.standard_normal((sl.stop - sl.start, k))

    def add(group: str, name: str, base_name: str, base: Callable[[], Any], fn: Callable[[], Any],
            goal: str, memory: bool = True, note: str = "") -> Row:
        log(f"  {name} ...")
        tb, tt = time_pair(base, fn, repeats)
        extra: dict[str, Any] = {}
        if memory:
            peak = peak_memory(fn) / X.nbytes
            memory_note = f"peak extra memory {peak:.2f} x X"
            note = f"{note}; {memory_note}" if note else memory_note
            extra["peak_memory_x"] = peak
        rows.append(ratio_row(group, name, base_name, tb, tt, goal, note, **extra))
        log(f"    ratio {rows[-1].ratio:.2f} (CPU {rows[-1].ratio_cpu:.2f})")
        return rows[-1]

    releases: list[tuple[str, Callable[[], Any]]] = []
    # ---------------------------------------------------------------------- RON-Gauss, PCA-Gauss
    base = f"X.T @ X + X @ W (d x {p})"
    rel, own = _callables(RONGauss, X, n_components=p, bounds=(0, 1))
    add("ron", f"RON-Gauss release, Alg. 3, {size}, p={p}", base, gram_and_projection, rel, "<= 1.6")
    releases.append(("RON-Gauss", rel))
    add("ron", "RON-Gauss mechanism only (after prepare_input)", base, gram_and_projection, own, "")
    add("ron", "prepare_input alone (one blocked min/max pass; no copy when inside the bounds)",
        base, gram_and_projection, lambda: prepare_input(X, bounds=(0, 1)), "")
    add("ron", f"floor: n x p = {n * p:,} normal draws (the synthetic rows)", base, gram_and_projection,
        lambda: draw.standard_normal((n, p)), "", memory=False)
    rel, own = _callables(PCAGauss, X, n_components=p, bounds=(0, 1))
    add("pca", f"PCA-Gauss release, Alg. 1, {size}, p={p}", base, gram_and_projection, rel, "<= 1.6")
    releases.append(("PCA-Gauss", rel))
    add("pca", "PCA-Gauss mechanism only, Alg. 1", base, gram_and_projection, own, "")
    _, own_lap = _callables(PCAGauss, X, y_reg, n_components=p, bounds=(0, 1), pca_source="lap",
                            label_bounds=(0, 1), task="regression")
    add("pca", "PCA-Gauss mechanism only, Alg. 2 with LapPCA (regression)", base, gram_and_projection,
        own_lap, "")

    # ---------------------------------------------------------------------- projections
    base_lap = f"X @ P (d x {k}) + {n * k:,} float Laplace draws"
    base_normal = f"X @ P (d x {k}) + {n * k:,} normal draws"
    rel, own = _callables(JLLaplace, X, n_components=k, bounds=(0, 1))
    add("proj", f"JL-Laplace release, {size}, k={k}", base_lap, xp_laplace, rel, "<= 1.5")
    releases.append(("JL-Laplace", rel))
    add("proj", "JL-Laplace mechanism only", base_lap, xp_laplace, own, "")
    rel, own = _callables(DPPro, X, n_components=k, bounds=(0, 1))
    add("proj", f"DPPro release, {size}, k={k}", base_normal, xp_normal, rel, "<= 2.0")
    releases.append(("DPPro", rel))
    add("proj", "DPPro mechanism only", base_normal, xp_normal, own, "")
    if not hasattr(noise, "NoiseStream"):  # a checkout (--root) from before the parallel noise
        return _threads_rows(rows, releases, gram_and_projection, add, threads_rows)
    lap = noise.laplace_plan(1.0, 1.0, n_changed=k, bits=noise.SecureBits())
    gauss = noise.gaussian_plan(1.0, grid=2.0**-30, l2_sensitivity=1.0, n_changed=k, bits=noise.SecureBits())
    add("noise", f"exact discrete Laplace, {n * k:,} draws on every core (NoiseStream)",
        "as many rng.laplace draws", lambda: draw.laplace(0.0, 1.0, n * k), lambda: lap.draw(n * k), "",
        memory=False, note=f"t = {lap.t:.3g} grid units")
    add("noise", f"exact discrete Gaussian, {n * k:,} draws on every core (NoiseStream)",
        "as many rng.normal draws", lambda: draw.standard_normal(n * k), lambda: gauss.draw(n * k), "",
        memory=False, note=f"sigma = {gauss.sigma_grid:.3g} grid units")
    add("noise", f"exact discrete Gaussian, {n * k:,} draws on one thread", "as many rng.normal draws",
        lambda: draw.standard_normal(n * k), lambda: gauss.draw(n * k, workers=1), "<= 2.5", memory=False)

    return _threads_rows(rows, releases, gram_and_projection, add, threads_rows)


def _threads_rows(rows: list[Row], releases: list[tuple[str, Callable[[], Any]]],
                  gram_and_projection: Callable[[], Any], add: Callable[..., Row], threads_rows: bool
                  ) -> list[Row]:
    """Each release with the BLAS libraries at their default thread count against one thread."""
    default = bench_common.DEFAULT_BLAS_THREADS
    if threads_rows and default and default > 1:
        for name, fn in releases:
            add("threads", f"{name} release: BLAS at its default {default} threads / at one thread",
                "the same release, one BLAS thread", at_blas_threads(fn, 1), at_blas_threads(fn, default),
                "<= 1.1", memory=False)
        add("threads", f"for comparison: X.T @ X + X @ W at {default} BLAS threads / at one", "one thread",
            at_blas_threads(gram_and_projection, 1), at_blas_threads(gram_and_projection, default), "",
            memory=False)
    return rows
