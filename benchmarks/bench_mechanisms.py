"""Issue 7 items 1-3: RON-Gauss, PCA-Gauss, JL-Laplace and DPPro against their physical baselines.

Each mechanism is timed twice: the public ``release(X)`` (end to end, including the shared input
preparation ``dpcore.preprocessing.prepare_input``: one blocked pass of column min/max that proves
the input finite and inside the bounds; a clipped copy only when some entry is outside)
and the mechanism's own work on the prepared input (``_release``), each against a product timed in
the same run: ``X @ W`` (d x p) for RON-Gauss, ``X.T @ X`` for PCA-Gauss, ``X @ P`` (d x k) for the
projections. Peak extra memory is measured with tracemalloc, as a multiple of ``X.nbytes``.
Floors: the random draws every release must make (``n x p`` normals for the synthetic rows,
``n x k`` noise entries for the projections) are timed against the same baselines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from bench_common import Row, peak_memory, ratio_row, row_blocks, time_pair


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


def _memory_note(fn: Callable[[], Any], X: np.ndarray) -> tuple[str, float]:
    peak = peak_memory(fn) / X.nbytes
    return f"peak extra memory {peak:.2f} x X", peak


def run(n: int, d: int, repeats: int, log: Callable[[str], None]) -> list[Row]:
    from dpcore.mechanisms import DPPro, JLLaplace, PCAGauss, RONGauss
    from dpcore.preprocessing import prepare_input

    rng = np.random.default_rng(0)
    X = rng.random((n, d))
    y_reg = rng.random(n)
    p, k = 10, 20
    W = np.linalg.qr(rng.standard_normal((d, p)))[0]
    P = rng.standard_normal((d, k)) / np.sqrt(k)
    size = f"n={n:,}, d={d}"
    rows: list[Row] = []

    def xw() -> Any:
        return X @ W

    def xtx() -> Any:
        return X.T @ X

    def xp() -> Any:
        return X @ P

    def add(group: str, name: str, base_name: str, base: Callable[[], Any], fn: Callable[[], Any],
            goal: str, memory: bool = True, note: str = "") -> None:
        log(f"  {name} ...")
        tb, tt = time_pair(base, fn, repeats)
        extra: dict[str, Any] = {}
        if memory:
            mnote, peak = _memory_note(fn, X)
            note = f"{note}; {mnote}" if note else mnote
            extra["peak_memory_x"] = peak
        rows.append(ratio_row(group, name, base_name, tb, tt, goal, note, **extra))
        log(f"    ratio {rows[-1].ratio:.2f} (CPU {rows[-1].ratio_cpu:.2f})")

    # ---------------------------------------------------------------------- 1. RON-Gauss
    base = f"X @ W (d x {p})"
    rel, own = _callables(RONGauss, X, n_components=p, bounds=(0, 1))
    add("ron", f"RON-Gauss release, Alg. 3, {size}, p={p}", base, xw, rel, "<= 3")
    add("ron", "RON-Gauss mechanism only (after prepare_input)", base, xw, own, "<= 3")
    _, own_scaled = _callables(RONGauss, X * 2 - 1, n_components=p, bounds=(-1, 1))
    add("ron", "RON-Gauss mechanism only, bounds (-1, 1) (scaling folded)", base, xw, own_scaled,
        "<= 3", memory=False)
    add("ron", "prepare_input alone (one blocked min/max pass; no copy when inside the bounds)",
        base, xw, lambda: prepare_input(X, bounds=(0, 1)), "", memory=True)
    Xout = X.copy()
    Xout[::1000, 0] = 1.5  # 500 entries outside the bounds: the clipping copy is needed
    add("ron", "prepare_input, some entries outside the bounds (clipped copy + exact count)",
        base, xw, lambda: prepare_input(Xout, bounds=(0, 1)), "", memory=True)
    draw = np.random.default_rng(1)
    add("ron", f"floor: n x p = {n * p:,} normal draws (the synthetic rows)", base, xw,
        lambda: draw.standard_normal((n, p)), "", memory=False)

    # ---------------------------------------------------------------------- 2. PCA-Gauss
    base = "X.T @ X"
    rel, own = _callables(PCAGauss, X, n_components=p, bounds=(0, 1))
    add("pca", f"PCA-Gauss release, Alg. 1, {size}, p={p}", base, xtx, rel, "<= 2")
    add("pca", "PCA-Gauss mechanism only, Alg. 1", base, xtx, own, "<= 2")
    _, own_lap = _callables(PCAGauss, X, y_reg, n_components=p, bounds=(0, 1), pca_source="lap",
                            label_bounds=(0, 1), task="regression")
    add("pca", "PCA-Gauss mechanism only, Alg. 2 with LapPCA (regression)", base, xtx, own_lap,
        "<= 2")

    # ---------------------------------------------------------------------- 3. projections
    base = f"X @ P (d x {k})"
    rel, own = _callables(JLLaplace, X, n_components=k, bounds=(0, 1))
    add("proj", f"JL-Laplace release, {size}, k={k}", base, xp, rel, "<= 1.5")
    add("proj", "JL-Laplace mechanism only", base, xp, own, "<= 1.5")
    rel, own = _callables(DPPro, X, n_components=k, bounds=(0, 1))
    add("proj", f"DPPro release, {size}, k={k}", base, xp, rel, "<= 1.5")
    add("proj", "DPPro mechanism only", base, xp, own, "<= 1.5")
    add("proj", f"floor: n x k = {n * k:,} normal draws (DPPro noise), by blocks", base, xp,
        _blocked(lambda m: draw.standard_normal((m, k)), n, d), "", memory=False)
    add("proj", f"floor: n x k = {n * k:,} Laplace draws, Generator.laplace, by blocks", base, xp,
        _blocked(lambda m: draw.laplace(0.0, 1.0, (m, k)), n, d), "", memory=False)
    add("proj", f"floor: n x k = {n * k:,} Laplace draws as E1 - E2 (JL-Laplace), by blocks", base,
        xp, _blocked(lambda m: draw.standard_exponential((m, k)) - draw.standard_exponential((m, k)),
                     n, d), "", memory=False)
    return rows
