"""Random projections shared by JL-Laplace, DPPro and the projection baselines.

The Gaussian projection matrix, the rows as a projection sees them (clipped to the public bounds,
optionally rescaled to ``[0, 1]``; :class:`ProjectionInput`), the element-wise sensitivity of
``X -> X P``, the common set-up of JL-Laplace and DPPro, ``n_components`` resolution and the
projected column names. Noise is added by each mechanism.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from dpcore.mechanisms._box import ENUMERATION_BUDGET, box_l1_sensitivity, box_l2_sensitivity, sign_vectors
from dpcore.noise import GridNoise
from dpcore.preprocessing import PreparedInput, row_blocks
from dpcore.table import IN_MEMORY, TableEngine

__all__ = [
    "ProjectionInput",
    "ProjectionSetup",
    "box_sensitivity",
    "check_one_row_per_input",
    "element_sensitivity",
    "gaussian_projection",
    "input_map",
    "projected_columns",
    "projection_setup",
    "resolve_n_components",
    "scale_rows",
]


def gaussian_projection(d: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """JL projection matrix ``(d, k)`` with i.i.d. ``N(0, 1/k)`` entries (SPEC section 1).

    Data-independent: costs no privacy budget. ``E ||x P||^2 = ||x||^2`` for every ``x``.
    """
    return rng.standard_normal((d, k)) / math.sqrt(k)


def resolve_n_components(n_components: int | None, n_features: int) -> int:
    """The projected dimension ``k``: ``1 <= k < d``; ``None`` gives ``min(10, d - 1)``.

    Raises
    ------
    ValueError
        ``n_components >= n_features``, ``n_components < 1``, or fewer than 2 features.
    """
    d = int(n_features)
    if d < 2:
        raise ValueError(f"a random projection needs at least 2 features (n_components < n_features), "
                         f"got n_features={d}")
    if n_components is None:
        return min(10, d - 1)
    k = int(n_components)
    if k < 1:
        raise ValueError(f"n_components must be >= 1, got {n_components}")
    if k >= d:
        raise ValueError(f"n_components must be < n_features = {d} (a projection reduces the "
                         f"dimension), got n_components={n_components}")
    return k


@dataclass(frozen=True)
class ProjectionInput:
    """Rows as the projection sees them.

    Attributes
    ----------
    raw : ndarray (n, d)
        The rows clipped to the public bounds, in their own units (not copied).
    X : ndarray (n, d), property
        ``raw`` mapped, when ``rescaled``, to ``[0, 1]`` per column by ``(x - lo) / (hi - lo)``
        (a public affine map: no privacy cost). A full copy, computed on access; the mechanisms
        use :meth:`project`, which never materialises it.
    widths : ndarray (d,)
        Largest possible change of each entry inside the public box, in the units of ``X``
        (1 for rescaled columns, 0 for constant ones).
    lo, scale : ndarray (d,)
        The map ``x -> (clip(x) - lo) / scale`` (``lo = 0, scale = 1`` without rescaling).
    bounds : ndarray (d, 2)
        The public bounds used for clipping.
    """

    raw: np.ndarray
    widths: np.ndarray
    lo: np.ndarray
    scale: np.ndarray
    bounds: np.ndarray
    rescaled: bool
    #: the engine of ``raw`` (:attr:`dpcore.preprocessing.PreparedInput.engine`)
    engine: TableEngine = IN_MEMORY

    @property
    def X(self) -> np.ndarray:
        return (self.raw - self.lo) / self.scale

    def project(self, P: np.ndarray, noise: GridNoise | None = None) -> Any:
        """``X @ P`` (``(n, k)``, rows rescaled) plus the grid noise of ``noise`` on every entry, on the
        engine of the rows (:meth:`dpcore.table.TableEngine.noisy_rows`): in memory
        :meth:`project_rows` with the noise drawn in the same pass; elsewhere :meth:`project_rows`
        per block, the noise added per block. ``noise=None``: no noise (NOT PRIVATE)."""
        kernel = partial(_projected_block, inp=replace(self, raw=None, engine=IN_MEMORY), P=P)
        return self.engine.noisy_rows(kernel, self.raw, P.shape[1], noise)

    def project_rows(self, P: np.ndarray, noise: GridNoise | None = None) -> np.ndarray:
        """``X @ P`` (``(n, k)``, rows rescaled) plus noise, streamed over blocks of rows of ``raw``.

        The rescaling is folded into the product, ``X @ P = raw @ (P / scale) - (lo / scale) @ P``
        (exact to rounding while ``|lo| / scale <= 4``; beyond that, where the two terms would
        cancel, each block is rescaled explicitly in cache). No copy of ``X`` is made.

        ``noise`` (a grid mechanism of :mod:`dpcore.noise`), if given, perturbs each ``(rows, k)``
        output block with the next ``rows * k`` integers of one :class:`~dpcore.noise.NoiseStream` of
        the ``n * k`` entries (C order, the layout of :func:`~dpcore.noise.noise_blocks`), taken on
        one helper thread for block ``i + 1`` while this thread computes the product of block ``i``;
        the stream draws its blocks on every core (BLAS and the samplers' NumPy work release the
        GIL), and ``noise.apply`` rounds the block to the public grid and adds the integers. The
        integers are those of ``noise.draw((n, k))``, whatever the timing and the threads.
        """
        n, d = self.raw.shape
        identity = not self.rescaled or (np.all(self.lo == 0) and np.all(self.scale == 1))
        shift = self.lo / self.scale
        fold = not identity and float(np.max(np.abs(shift))) <= 4.0
        Pf = P / self.scale[:, None] if fold else P
        offset = shift @ P if fold else None
        explicit = not identity and not fold
        k = P.shape[1]
        Z = np.empty((n, k))
        blocks = list(row_blocks(n, d))
        buf = np.empty((blocks[0].stop, d)) if explicit else None
        pool = ThreadPoolExecutor(1) if noise is not None else None
        stream = noise.stream(n * k) if noise is not None else None

        def draw(rows: int) -> np.ndarray:
            return stream.take(rows * k).reshape(rows, k)

        try:
            pending = pool.submit(draw, blocks[0].stop) if pool is not None else None
            for i, sl in enumerate(blocks):
                T = self.raw[sl]
                if buf is not None:
                    out = buf[: sl.stop - sl.start]
                    T = np.divide(np.subtract(T, self.lo, out=out), self.scale, out=out)
                block = Z[sl]
                np.matmul(T, Pf, out=block)
                if offset is not None:
                    block -= offset
                if pending is not None:
                    drawn = pending.result()
                    if i + 1 < len(blocks):
                        nxt = blocks[i + 1]
                        pending = pool.submit(draw, nxt.stop - nxt.start)
                    noise.apply(block, drawn, out=block)
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
        return Z

    @classmethod
    def from_prepared(cls, data: PreparedInput, rescale: bool) -> ProjectionInput:
        bounds = np.asarray(data.bounds, dtype=float)
        lo, scale, widths = input_map(bounds, rescale)
        return cls(raw=data.X, widths=widths, lo=lo, scale=scale, bounds=bounds,
                   rescaled=bool(rescale), engine=data.engine)


def _projected_block(block: np.ndarray, noise: GridNoise | None, *, inp: ProjectionInput, P: np.ndarray
                     ) -> np.ndarray:
    """:meth:`ProjectionInput.project_rows` of the rows ``block`` (a kernel of the table protocol)."""
    return replace(inp, raw=block).project_rows(P, noise)


def input_map(bounds: np.ndarray, rescale: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The public map of :class:`ProjectionInput`: ``(lo, scale, widths)``, each ``(d,)``.

    Rows enter the projection as ``(clip(x, bounds) - lo) / scale``: with ``rescale`` each column is
    mapped onto ``[0, 1]`` by its public bounds (``(d, 2)``; a constant column keeps scale 1), the
    largest change of an entry, ``widths``, is then 1 (0 for a constant column); without it
    ``lo = 0``, ``scale = 1`` and ``widths = hi - lo``. Depends on public facts only.
    """
    bounds = np.asarray(bounds, dtype=float)
    raw_w = bounds[:, 1] - bounds[:, 0]
    if rescale:
        return bounds[:, 0].copy(), np.where(raw_w > 0, raw_w, 1.0), (raw_w > 0).astype(float)
    return np.zeros(raw_w.size), np.ones(raw_w.size), raw_w


def scale_rows(X: np.ndarray, lo: np.ndarray, scale: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """``(clip(X, bounds) - lo) / scale``: the map :class:`ProjectionInput` applies, as a function."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != np.size(lo):
        raise ValueError(f"X must have shape (m, {np.size(lo)}), got {X.shape}")
    return (np.clip(X, bounds[:, 0], bounds[:, 1]) - lo) / scale


def element_sensitivity(P: np.ndarray, widths: np.ndarray, element_bound: float, ord: int = 1) -> float:
    """Sensitivity of ``X -> X P`` when one entry of ``X`` changes by at most ``element_bound``.

    A change of entry ``(m, i)`` by ``t`` changes the output by ``t P_i`` (row ``i`` of ``P``), so
    the exact sensitivity in the norm ``ord`` (1 for Laplace, 2 for Gaussian) is
    ``max_i min(element_bound, widths_i) ||P_i||_ord``. ``widths_i`` is the largest change possible
    inside the public box. ``ord=1``: JL paper Lemma 1 (before its Cauchy-Schwarz step);
    ``ord=2``: DPPro Definition 3, ``theta_2(R)`` times the element bound.
    """
    P = np.asarray(P, dtype=float)
    eff = np.minimum(float(element_bound), np.asarray(widths, dtype=float))
    norms = np.linalg.norm(P, ord=ord, axis=1)
    return float(np.max(eff * norms))


def _max_vertex_l2(Rw: np.ndarray, chunk: int = 1 << 12) -> float:
    """``max_{t in {-1,1}^d} ||t^T Rw||_2`` over the ``2^(d-1)`` sign vectors with ``t_1 = 1``."""
    d, k = Rw.shape
    if d == 1:
        return float(np.linalg.norm(Rw))
    return max(float(np.linalg.norm(T @ Rw, axis=1).max()) for T in sign_vectors(d, chunk))


def box_sensitivity(P: np.ndarray, widths: np.ndarray, ord: int = 1,
                    budget: int = ENUMERATION_BUDGET) -> tuple[float, str]:
    """Row-level (replace-one) sensitivity of ``X -> X P``: one row moves anywhere in the public box.

    A replaced row changes its output row by ``v P`` with ``|v_i| <= w_i`` (``widths``, the side
    lengths of the box in the units ``X`` is projected in); every such ``v`` is reachable.

    * ``ord=1`` (Laplace): ``sup_v ||v P||_1 = max_{s in {-1,1}^k} sum_i w_i |(P s)_i|`` — exact by
      enumeration of the ``2^(k-1)`` sign vectors, else the smaller of two proven upper bounds
      (:func:`~dpcore.mechanisms._box.box_l1_sensitivity`, derivation in
      :mod:`dpcore.mechanisms._identity`).
    * ``ord=2`` (Gaussian): ``v -> ||v P||_2`` is convex, so its supremum over the box is attained
      at a vertex ``v = w * t``, ``t in {-1,1}^d``: exact by enumerating the ``2^(d-1)`` vertices
      (``t`` and ``-t`` give the same norm) while ``2^(d-1) d k <= budget``; otherwise
      ``min(sigma_max(P) ||w||_2, sum_i w_i ||P_i||_2)``
      (:func:`~dpcore.mechanisms._box.box_l2_sensitivity`, both proven upper bounds).

    This is the sensitivity of the DRAWN matrix: ``P`` is data-independent, so calibrating to it
    is exact (SPEC section 4, "exact calibration"). Compare with the element relation, where one
    entry changes: ``max_i min(Delta, w_i) ||P_i||`` (:func:`element_sensitivity`), about
    ``sqrt(d)`` (L2) to ``d`` (L1) times smaller.

    Returns
    -------
    (float, str)
        The sensitivity and how it was obtained (``"exact: ..."`` or ``"bound: ..."``).
    """
    P = np.asarray(P, dtype=float)
    w = np.asarray(widths, dtype=float)
    if ord == 1:
        return box_l1_sensitivity(P, w, budget)
    if ord != 2:
        raise ValueError(f"ord must be 1 or 2, got {ord}")
    d, k = P.shape
    if (1 << max(d - 1, 0)) * d * k <= budget:
        return _max_vertex_l2(P * w[:, None]), f"exact: max over 2^{d - 1} box vertices of ||v P||_2"
    sound, spectral = box_l2_sensitivity(P, w)
    how = "sigma_max(P) ||w||_2" if sound == spectral else "sum_i w_i ||P_i||_2 (triangle inequality)"
    return sound, f"bound: {how}"


def check_one_row_per_input(n_samples: int | None, n: int, what: str) -> None:
    """Projection mechanisms release exactly one noisy row per input row."""
    if n_samples is not None and n_samples != n:
        raise ValueError(f"{what} releases exactly one projected row per input row; n_samples must be "
                         f"None or {n}, got {n_samples}")


@dataclass(frozen=True)
class ProjectionSetup:
    """What both projection mechanisms start from: the rows, ``k`` and the secret matrix."""

    inp: ProjectionInput
    P: np.ndarray  # (d, k), drawn from the release's generator (secret)
    n: int
    d: int
    k: int


def projection_setup(data: PreparedInput, params: dict[str, Any], rng: np.random.Generator,
                     n_samples: int | None, what: str) -> ProjectionSetup:
    """Check ``n_samples``, resolve ``n_components``, map the rows, draw the Gaussian matrix.

    Shared by JL-Laplace and DPPro (in this order, so the generator's draws are the same).
    """
    check_one_row_per_input(n_samples, data.n_samples, what)
    n, d = data.X.shape
    k = resolve_n_components(params["n_components"], d)
    inp = ProjectionInput.from_prepared(data, params["rescale"])
    return ProjectionSetup(inp, gaussian_projection(d, k, rng), n, d, k)


def projected_columns(k: int) -> list[str]:
    return [f"z{j + 1}" for j in range(k)]
