"""Statistical privacy audits of every mechanism: empirical LOWER bounds on epsilon (issue 8).

For each mechanism we pick a pair of neighbouring datasets that is worst case under the
mechanism's OWN neighbouring relation (replace-one for local-gaussian, RON-Gauss, PCA-Gauss,
DPMix and the baselines; one element changed for JL-Laplace and DPPro), draw many seeded runs of
the real mechanism on both, reduce every run to ONE scalar statistic of what the mechanism
perturbs (a projection of a released row, or the log-likelihood ratio of a noisy statistic read
from the diagnostics of ``Mechanism.explore``), and threshold it. For an (epsilon, delta)-DP
mechanism every test
satisfies (Kairouz, Oh & Viswanath 2015; Jagielski, Ullman & Oprea 2020)::

    FPR + e^epsilon FNR >= 1 - delta     and     FNR + e^epsilon FPR >= 1 - delta,

so ``epsilon >= max(log((1 - delta - FNR) / FPR), log((1 - delta - FPR) / FNR))``. The rates are
replaced by the upper ends of two-sided 95% Clopper-Pearson intervals (each rate at 97.5% one-sided,
so both hold together with probability >= 95%). The threshold, its direction and which of the two
inequalities to use are chosen on a selection split (30% of the runs) and the bound is evaluated
on the other 70%, so choosing the best threshold does not bias the reported bound upwards.

A sound mechanism must give a lower bound at most the epsilon its release claims. To show the
audit has teeth, every mechanism is run again with its noise scale divided by 4 (the calibration
function it imports is wrapped, :func:`miscalibrated`, or the noise is given explicitly), and that
variant's lower bound must EXCEED the claimed epsilon.

Runs. Row-wise independent mechanisms (given their public or secret projection) are run ONCE on a
dataset whose first half of rows is the "before" row and second half the "after" row: each row is
an independent run of the per-row mechanism. Mechanisms with per-class statistics (RON-Gauss
Alg. 5, MODIPS) are run with many classes, spread over a few releases: class sizes are public and
every class's statistics are computed and perturbed from that class's rows only (parallel
composition), so each class is an independent run. PCA-Gauss Alg. 1 releases one statistic per
call and is called once per run. DPMix mixtures are i.i.d. given the data, so one release of
``T * runs`` mixtures cut into blocks of ``T`` gives ``runs`` independent releases of ``T``
mixtures. A projection (``W``, ``P``, ``R``, ``B``) is drawn first, before any data-dependent
randomness, so a first (noise-free or throw-away) run with the same seed shows it and the pair is
built for it; the runs are then conditional on it, which is what the exact calibrations promise
(DP for the drawn projection). RON-Gauss pools releases with different ``W`` (each with its own
worst-case pair); pooling runs of several neighbouring pairs keeps the bound valid, because both
inequalities are linear in the rates. The centres of the statistic under both datasets come from
noise-free (``epsilon = inf``) runs of the same mechanism, or from its exact statistics in
``diagnostics``.

Where the worst cases of two noisy statistics conflict (RON-Gauss, MODIPS) or the relation has no
single worst pair we can write down (DPMix), the pair is a strong one, and the table's last column
gives its "ceiling": the exact epsilon of that pair for the audited statistic (the most any test
could show), computed from the noise records (Laplace, Gaussian) or dp-accounting's privacy loss
distribution (DPMix).

Usage::

    python benchmarks/audit_table.py [--runs-scale 1.0] [--only dppro ...]

Prints a Markdown table: mechanism, relation, claimed epsilon (delta), audited lower bound (95%),
the miscalibrated variant's lower bound, and runs; plus, per row, the statistic used and the most
any test on that statistic could reveal (its exact "ceiling" epsilon for this pair).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpcore.attacks import (  # noqa: E402,F401 - re-exported for the audits' tests
    CONFIDENCE,
    SELECTION_FRACTION,
    LowerBound,
    clopper_pearson,
    epsilon_lower_bound,
)
from dpcore.calibration import gaussian_delta  # noqa: E402

MISCALIBRATION = 4.0


# ------------------------------------------------------------------------------------ statistics
# The estimator (Clopper-Pearson limits, the hypothesis-testing lower bound with its selection
# split) is shared with the app's Attack page: it lives in dpcore.attacks.


def laplace_llr(z: np.ndarray, c0: np.ndarray, c1: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    """Log-likelihood ratio ``log p1(z)/p0(z)`` of i.i.d. Laplace noise around centres ``c0``/``c1``
    (rows of ``z`` are runs). Each coordinate's term is clipped to its exact range
    ``+-|c1 - c0|/scale`` and the sum rounded (10 decimals) so the atom at the maximum stays one
    value despite round-off."""
    z = np.atleast_2d(np.asarray(z, dtype=float))
    c0, c1 = np.asarray(c0, dtype=float).ravel(), np.asarray(c1, dtype=float).ravel()
    scale = np.broadcast_to(np.asarray(scale, dtype=float).ravel(), c0.shape)
    cap = np.abs(c1 - c0) / scale
    terms = np.clip((np.abs(z - c0) - np.abs(z - c1)) / scale, -cap, cap)
    return np.round(terms.sum(axis=1), 10)


def gaussian_score(z: np.ndarray, c0: np.ndarray, c1: np.ndarray) -> np.ndarray:
    """Projection of ``z - c0`` on ``c1 - c0``: the log-likelihood ratio of isotropic Gaussian noise
    up to an increasing affine map."""
    z = np.atleast_2d(np.asarray(z, dtype=float))
    c0, c1 = np.asarray(c0, dtype=float).ravel(), np.asarray(c1, dtype=float).ravel()
    return (z - c0) @ (c1 - c0)


def laplace_ceiling(c0: np.ndarray, c1: np.ndarray, scale: np.ndarray | float) -> float:
    """The largest epsilon any test can show between two Laplace vectors: ``||(c1 - c0)/b||_1``."""
    c0, c1 = np.asarray(c0, dtype=float).ravel(), np.asarray(c1, dtype=float).ravel()
    return float(np.sum(np.abs(c1 - c0) / np.broadcast_to(np.asarray(scale, dtype=float).ravel(),
                                                          c0.shape)))


def gaussian_ceiling(shift: float, sigma: float, delta: float) -> float:
    """The exact epsilon at ``delta`` of ``N(0, sigma^2)`` vs ``N(shift, sigma^2)`` (Balle & Wang
    2018, Thm 8): the most any test between the two can show."""
    if delta <= 0:
        return math.inf
    lo, hi = 0.0, 1.0
    if float(gaussian_delta(sigma, shift, 0.0)) <= delta:
        return 0.0
    while float(gaussian_delta(sigma, shift, hi)) > delta:
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if float(gaussian_delta(sigma, shift, mid)) > delta else (lo, mid)
    return hi


# ------------------------------------------------------------------------------------ variants
@contextlib.contextmanager
def miscalibrated(module: Any, names: tuple[str, ...], factor: float | None = None) -> Iterator[None]:
    """Wrap the calibration functions ``names`` of ``module`` (as the module imported them) so
    every noise scale they return is divided by ``factor`` (default: :data:`MISCALIBRATION` at the
    time of the call); restored on exit."""
    factor = MISCALIBRATION if factor is None else factor
    saved = {name: getattr(module, name) for name in names}

    def wrap(fn: Callable[..., float]) -> Callable[..., float]:
        @functools.wraps(fn)
        def scaled(*args: Any, **kwargs: Any) -> float:
            return fn(*args, **kwargs) / factor

        return scaled

    try:
        for name, fn in saved.items():
            setattr(module, name, wrap(fn))
        yield
    finally:
        for name, fn in saved.items():
            setattr(module, name, fn)


@dataclass(frozen=True)
class Samples:
    """Scores of independent runs on the two neighbouring datasets, and what was claimed."""

    s0: np.ndarray
    s1: np.ndarray
    claimed_epsilon: float
    delta: float
    kind: str
    neighbouring: str
    ceiling: float
    checks: dict[str, Any]


@dataclass(frozen=True)
class AuditResult:
    mechanism: str
    relation: str
    setting: str
    statistic: str
    runs_source: str
    claimed_epsilon: float
    delta: float
    kind: str
    lower_bound: LowerBound
    miscalibrated_bound: LowerBound
    runs: int
    miscalibrated_runs: int
    ceiling: float
    miscalibrated_ceiling: float
    miscalibrated_reported_epsilon: float
    checks: dict[str, Any]
    seconds: float

    @property
    def sound(self) -> bool:
        return self.lower_bound.epsilon <= self.claimed_epsilon

    @property
    def has_teeth(self) -> bool:
        return self.miscalibrated_bound.epsilon > self.claimed_epsilon


@dataclass(frozen=True)
class AuditSpec:
    """One audit: how to draw scores (``sample(runs, seed, miscalibrated)``) and what it uses."""

    mechanism: str
    module: str
    class_name: str
    relation: str
    setting: str
    statistic: str
    runs_source: str
    runs: int
    miscalibrated_runs: int
    sample: Callable[[type, int, int, bool], Samples]
    requires: tuple[tuple[str, str], ...] = ()
    variant: str = ""

    @property
    def key(self) -> str:
        """Name of the audit: the mechanism's CLI name, plus the variant if any."""
        return f"{self.mechanism}-{self.variant}" if self.variant else self.mechanism

    def unavailable(self) -> str | None:
        """Why this audit cannot run yet (module or class missing), or None."""
        for mod, attr in ((self.module, self.class_name), *self.requires):
            try:
                module = importlib.import_module(mod)
            except ImportError as exc:
                return f"{mod} cannot be imported yet ({exc})"
            if not hasattr(module, attr):
                return f"{mod}.{attr} does not exist yet"
        return None

    def mechanism_class(self) -> type:
        return getattr(importlib.import_module(self.module), self.class_name)


def run_audit(spec: AuditSpec, *, runs: int | None = None, miscalibrated_runs: int | None = None,
              seed: int = 2024) -> AuditResult:
    """Run ``spec`` (correct and miscalibrated) and compute both lower bounds."""
    start = time.perf_counter()
    cls = spec.mechanism_class()
    runs = runs or spec.runs
    mis_runs = miscalibrated_runs or spec.miscalibrated_runs
    good = spec.sample(cls, runs, seed, False)
    bad = spec.sample(cls, mis_runs, seed + 1, True)
    lb = epsilon_lower_bound(good.s0, good.s1, good.delta, random_state=seed)
    lb_bad = epsilon_lower_bound(bad.s0, bad.s1, good.delta, random_state=seed + 1)
    return AuditResult(
        mechanism=spec.mechanism, relation=good.neighbouring, setting=spec.setting,
        statistic=spec.statistic, runs_source=spec.runs_source,
        claimed_epsilon=good.claimed_epsilon, delta=good.delta, kind=good.kind, lower_bound=lb,
        miscalibrated_bound=lb_bad, runs=int(min(good.s0.size, good.s1.size)),
        miscalibrated_runs=int(min(bad.s0.size, bad.s1.size)), ceiling=good.ceiling,
        miscalibrated_ceiling=bad.ceiling, miscalibrated_reported_epsilon=bad.claimed_epsilon,
        checks={**good.checks, **{f"miscalibrated {k}": v for k, v in bad.checks.items()}},
        seconds=time.perf_counter() - start,
    )


# ------------------------------------------------------------------------------------ helpers
def _vertices(d: int, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    """All ``2^d`` corners of the box ``[lo, hi]^d``."""
    bits = (np.arange(1 << d)[:, None] >> np.arange(d)) & 1
    return np.where(bits == 1, hi, lo).astype(float)


def _farthest_pair(Z: np.ndarray, ord: int) -> tuple[int, int, float]:
    """Indices of the two rows of ``Z`` farthest apart in the ``ord`` norm, and the distance."""
    diff = Z[:, None, :] - Z[None, :, :]
    dist = np.linalg.norm(diff, ord=ord, axis=2)
    i, j = np.unravel_index(int(np.argmax(dist)), dist.shape)
    return int(i), int(j), float(dist[i, j])


def _two_blocks(a: np.ndarray, b: np.ndarray, runs: int) -> np.ndarray:
    """``runs`` copies of row ``a`` followed by ``runs`` copies of row ``b``."""
    return np.vstack([np.tile(a, (runs, 1)), np.tile(b, (runs, 1))])


def _patch(module_name: str, names: tuple[str, ...], on: bool) -> contextlib.AbstractContextManager:
    return miscalibrated(importlib.import_module(module_name), names) if on else contextlib.nullcontext()


# ------------------------------------------------------------------------------------ audits
EPS = 1.0
DELTA = 1e-5


def _local_gaussian(cls: type, runs: int, seed: int, bad: bool) -> Samples:
    # replace-one: one row moves between opposite corners of the public box [0, 1]^2 (L2 = sqrt 2)
    lo, hi = np.zeros(2), np.ones(2)
    X = _two_blocks(lo, hi, runs)
    with _patch("dpcore.mechanisms.local_gaussian", ("analytic_gaussian_sigma",), bad):
        rel = cls(epsilon=EPS, delta=DELTA, bounds=(0.0, 1.0), random_state=seed).release(X)
    s = gaussian_score(rel.data, lo, hi)
    rec = rel.noise[0]
    return Samples(s[:runs], s[runs:], rel.guarantee.epsilon, rel.guarantee.delta, rel.guarantee.kind,
                   rel.guarantee.neighbouring,
                   gaussian_ceiling(float(np.linalg.norm(hi - lo)), rec.scale, DELTA),
                   {"sensitivity attained": math.isclose(rec.sensitivity, float(np.linalg.norm(hi - lo)))})


def _jl_laplace(cls: type, runs: int, seed: int, bad: bool) -> Samples:
    # element relation, Delta = 1 on [0, 1]^3: entry j* (largest row L1 norm of P) goes 0 -> 1.
    d, k = 3, 2
    kw = dict(n_components=k, relation="element", bounds=(0.0, 1.0), random_state=seed)
    # P is secret; a noise-free run on {0, e_1..e_d} with the same seed (P is drawn first) shows it
    probe = cls(epsilon=math.inf, **kw).release(np.vstack([np.zeros(d), np.eye(d)])).data
    moves = probe[1:] - probe[0]
    j = int(np.argmax(np.abs(moves).sum(axis=1)))
    before, after = np.zeros(d), np.eye(d)[j]
    with _patch("dpcore.mechanisms.jl_laplace", ("laplace_scale",), bad):
        rel = cls(epsilon=EPS, **kw).release(_two_blocks(before, after, runs))
    rec = rel.noise[0]
    c0, c1 = probe[0], probe[0] + moves[j]
    s = laplace_llr(rel.data, c0, c1, rec.scale)
    return Samples(s[:runs], s[runs:], rel.guarantee.epsilon, 0.0, rel.guarantee.kind,
                   rel.guarantee.neighbouring, laplace_ceiling(c0, c1, rec.scale),
                   {"sensitivity attained": math.isclose(rec.sensitivity, float(np.abs(moves[j]).sum()))})


def _jl_laplace_row(cls: type, runs: int, seed: int, bad: bool) -> Samples:
    # row relation, alpha = 1 on [0, 1]^3: the row moves by v = P s*/||P s*|| (||v||^2 = alpha), s*
    # the sign vector maximising ||P s||, which maximises ||v P||_1 (the exact sensitivity). The
    # row starts at the corner from which x + v stays inside the box.
    d, k, alpha = 3, 2, 1.0
    kw = dict(n_components=k, relation="row", row_bound=alpha, bounds=(0.0, 1.0), random_state=seed)
    probe = cls(epsilon=math.inf, **kw).release(np.vstack([np.zeros(d), np.eye(d)])).data
    P = probe[1:] - probe[0]
    signs = _vertices(k)
    s_best = signs[int(np.argmax(np.linalg.norm(signs @ P.T, axis=1)))]
    v = math.sqrt(alpha) * (P @ s_best) / np.linalg.norm(P @ s_best)
    before = np.where(v < 0, 1.0, 0.0)
    after = before + v
    with _patch("dpcore.mechanisms.jl_laplace", ("laplace_scale",), bad):
        rel = cls(epsilon=EPS, **kw).release(_two_blocks(before, after, runs))
    rec = rel.noise[0]
    c0, c1 = before @ P, after @ P
    s = laplace_llr(rel.data, c0, c1, rec.scale)
    return Samples(s[:runs], s[runs:], rel.guarantee.epsilon, 0.0, rel.guarantee.kind,
                   rel.guarantee.neighbouring, laplace_ceiling(c0, c1, rec.scale),
                   {"sensitivity attained": math.isclose(rec.sensitivity, float(np.abs(c1 - c0).sum())),
                    "pair inside the box": bool(np.all((after >= 0) & (after <= 1)))})


def _dppro(cls: type, runs: int, seed: int, bad: bool) -> Samples:
    # element relation, Delta = 1 on [0, 1]^3: entry j* (largest row L2 norm of R) goes 0 -> 1.
    d, k = 3, 2
    kw = dict(n_components=k, relation="element", delta=DELTA, bounds=(0.0, 1.0), random_state=seed)
    probe = cls(epsilon=math.inf, **kw).release(np.vstack([np.zeros(d), np.eye(d)]))
    R = probe.transform_arrays["R"]
    j = int(np.argmax(np.linalg.norm(R, axis=1)))
    before, after = np.zeros(d), np.eye(d)[j]
    with _patch("dpcore.mechanisms.dppro", ("analytic_gaussian_sigma",), bad):
        rel = cls(epsilon=EPS, **kw).release(_two_blocks(before, after, runs))
    rec = rel.noise[0]
    same_r = bool(np.array_equal(rel.transform_arrays["R"], R))
    c0, c1 = before @ R, after @ R
    s = gaussian_score(rel.data, c0, c1)
    return Samples(s[:runs], s[runs:], rel.guarantee.epsilon, rel.guarantee.delta, rel.guarantee.kind,
                   rel.guarantee.neighbouring,
                   gaussian_ceiling(float(np.linalg.norm(c1 - c0)), rec.scale, DELTA),
                   {"same R as the probe": same_r,
                    "sensitivity attained": math.isclose(rec.sensitivity, float(np.linalg.norm(R[j])))})


#: replace-one audits of the projections: a public box with unequal column ranges (the
#: mechanisms rescale each column to [0, 1] by its bounds, so every width is 1 after rescaling)
BOX_BOUNDS = np.array([[0.0, 1.0], [-5.0, 5.0], [10.0, 20.0], [0.0, 100.0]])


def box_worst_pair(M: np.ndarray, bounds: np.ndarray, ord: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The replace-one pair over the public box that moves ``x -> rescale(x) @ M`` the most.

    A replaced row changes the rescaled row by ``v`` with ``|v_i| <= w_i`` (``w_i = 1``, 0 for a
    constant column); ``v -> ||v M||_ord`` is convex, so its supremum is attained at a vertex
    ``v = w * t``, ``t in {-1, 1}^d``. The ``2^(d-1)`` sign vectors (``t`` and ``-t`` give the same
    norm) are enumerated with :func:`dpcore.mechanisms._box.sign_vectors` -- a search over the
    ``d``-dimensional box, independent of the mechanisms' own computation (JL-Laplace enumerates
    sign vectors of the ``k`` outputs). Returns the raw rows ``(before, after)`` (opposite corners
    of the box: ``after - before = w * t*`` after rescaling) and the attained ``||v M||_ord``.
    """
    from dpcore.mechanisms._box import sign_vectors

    lo, hi = bounds[:, 0], bounds[:, 1]
    w = (hi > lo).astype(float)
    Mw = M * w[:, None]
    best, t_best = -1.0, None
    for T in sign_vectors(M.shape[0], 1 << 12):
        norms = np.linalg.norm(T @ Mw, ord=ord, axis=1)
        i = int(np.argmax(norms))
        if norms[i] > best:
            best, t_best = float(norms[i]), T[i]
    before, after = np.where(t_best > 0, lo, hi), np.where(t_best > 0, hi, lo)
    return before, after, best


def _probe_projection(cls: type, bounds: np.ndarray, **kw: Any) -> np.ndarray:
    """The drawn ``(d, k)`` matrix (in rescaled units) of a seeded release of a projection mechanism:
    a noise-free run with the same seed (the matrix is drawn first) on the rows ``lo`` and
    ``lo + (hi_i - lo_i) e_i`` (JL-Laplace keeps ``P`` secret; this shows it)."""
    lo, width = bounds[:, 0], bounds[:, 1] - bounds[:, 0]
    rows = np.vstack([lo, lo + np.diag(width)])
    out = np.asarray(cls(epsilon=math.inf, bounds=bounds, **kw).release(rows).data, dtype=float)
    return out[1:] - out[0]


def _noise_free_rows(cls: type, rows: np.ndarray, **kw: Any) -> np.ndarray:
    """The centres of the released rows: a noise-free run (``epsilon = inf``) with the same seed."""
    return np.asarray(cls(epsilon=math.inf, bounds=BOX_BOUNDS, **kw).release(rows).data, dtype=float)


def _dppro_box(cls: type, runs: int, seed: int, bad: bool) -> Samples:
    # replace-one (the default relation) on the same box, d = 4, k = 2: the drawn R's worst pair of
    # box vertices in L2, whose change must equal the stated S2 = sup over the box of ||v R||_2
    kw = dict(n_components=2, delta=DELTA, random_state=seed)
    R = _probe_projection(cls, BOX_BOUNDS, **kw)
    before, after, l2 = box_worst_pair(R, BOX_BOUNDS, 2)
    with _patch("dpcore.mechanisms.dppro", ("analytic_gaussian_sigma",), bad):
        rel = cls(epsilon=EPS, bounds=BOX_BOUNDS, **kw).release(_two_blocks(before, after, runs))
    rec = rel.noise[0]
    c0, c1 = _noise_free_rows(cls, np.vstack([before, after]), **kw)
    s = gaussian_score(rel.data, c0, c1)
    return Samples(s[:runs], s[runs:], rel.guarantee.epsilon, rel.guarantee.delta, rel.guarantee.kind,
                   rel.guarantee.neighbouring,
                   gaussian_ceiling(float(np.linalg.norm(c1 - c0)), rec.scale, DELTA),
                   {"same R as the probe": bool(np.allclose(rel.transform_arrays["R"], R)),
                    "stated sensitivity = max over the box's vertices": math.isclose(rec.sensitivity, l2,
                                                                                      rel_tol=1e-9),
                    "pair attains it": math.isclose(float(np.linalg.norm(c1 - c0)), l2, rel_tol=1e-9)})


def _jl_laplace_box(cls: type, runs: int, seed: int, bad: bool) -> Samples:
    # replace-one (the default relation) on a public box of d = 4 unequal column ranges, k = 3:
    # the drawn P's worst pair of box vertices (box_worst_pair), whose L1 change must equal the
    # release's stated sensitivity max_s sum_i w_i |(P s)_i|
    kw = dict(n_components=3, random_state=seed)
    P = _probe_projection(cls, BOX_BOUNDS, **kw)
    before, after, l1 = box_worst_pair(P, BOX_BOUNDS, 1)
    with _patch("dpcore.mechanisms.jl_laplace", ("laplace_scale",), bad):
        rel = cls(epsilon=EPS, bounds=BOX_BOUNDS, **kw).release(_two_blocks(before, after, runs))
    rec = rel.noise[0]
    c0, c1 = _noise_free_rows(cls, np.vstack([before, after]), **kw)
    s = laplace_llr(rel.data, c0, c1, rec.scale)
    return Samples(s[:runs], s[runs:], rel.guarantee.epsilon, 0.0, rel.guarantee.kind,
                   rel.guarantee.neighbouring, laplace_ceiling(c0, c1, rec.scale),
                   {"stated sensitivity = max over the box's vertices": math.isclose(rec.sensitivity, l1,
                                                                                      rel_tol=1e-9),
                    "pair attains it": math.isclose(float(np.abs(c1 - c0).sum()), l1, rel_tol=1e-9)})


def _identity_laplace(cls: type, runs: int, seed: int, bad: bool) -> Samples:
    # replace-one on [-1, 1]^4: the two corners whose projections are farthest apart in L1
    d, k = 4, 2
    kw = dict(n_components=k, bounds=(-1.0, 1.0), random_state=seed)
    V = _vertices(d)
    probe = cls(epsilon=math.inf, **kw).release(V).data
    i, j, dist = _farthest_pair(probe, 1)
    with _patch("dpcore.mechanisms._identity", ("laplace_scale",), bad):
        rel = cls(epsilon=EPS, **kw).release(_two_blocks(V[i], V[j], runs))
    rec = rel.noise[0]
    s = laplace_llr(rel.data, probe[i], probe[j], rec.scale)
    return Samples(s[:runs], s[runs:], rel.guarantee.epsilon, 0.0, rel.guarantee.kind,
                   rel.guarantee.neighbouring, laplace_ceiling(probe[i], probe[j], rec.scale),
                   {"sensitivity attained": math.isclose(rec.sensitivity, dist)})


def _rp_gaussian(cls: type, runs: int, seed: int, bad: bool) -> Samples:
    # replace-one on [-1, 1]^2, k = 1: the two corners whose projections are farthest apart
    d, k = 2, 1
    kw = dict(n_components=k, delta=DELTA, bounds=(-1.0, 1.0), random_state=seed)
    V = _vertices(d)
    probe = cls(epsilon=math.inf, **kw).release(V).data
    i, j, dist = _farthest_pair(probe, 2)
    with _patch("dpcore.mechanisms.rp_gaussian", ("analytic_gaussian_sigma",), bad):
        rel = cls(epsilon=EPS, **kw).release(_two_blocks(V[i], V[j], runs))
    rec = rel.noise[0]
    s = gaussian_score(rel.data, probe[i], probe[j])
    return Samples(s[:runs], s[runs:], rel.guarantee.epsilon, rel.guarantee.delta,
                   rel.guarantee.kind, rel.guarantee.neighbouring,
                   gaussian_ceiling(dist, rec.scale, DELTA),
                   {"sensitivity attained": math.isclose(rec.sensitivity, dist),
                    "reported epsilon": rel.guarantee.epsilon})


def _pca_identity(cls: type, runs: int, seed: int, bad: bool) -> Samples:
    # replace-one on [-1, 1]^2, p = 1: private rows at the corners -1 and +1. The public rows (a
    # separate table at both corners) put W along (1, 1)/sqrt 2, for which this pair is worst case.
    d = 2
    a, b = -np.ones(d), np.ones(d)
    public = np.vstack([a, b, a, b])
    with _patch("dpcore.mechanisms._identity", ("laplace_scale",), bad):
        rel = cls(epsilon=EPS, n_components=1, bounds=(-1.0, 1.0), public_data=public,
                  random_state=seed).release(_two_blocks(a, b, runs))
    rec = rel.noise[0]
    c0, c1 = rel.transform(a[None, :])[0], rel.transform(b[None, :])[0]
    s = laplace_llr(rel.data, c0, c1, rec.scale)
    return Samples(s[:runs], s[runs:], rel.guarantee.epsilon, 0.0, rel.guarantee.kind,
                   rel.guarantee.neighbouring, laplace_ceiling(c0, c1, rec.scale),
                   {"sensitivity attained": math.isclose(rec.sensitivity, float(np.abs(c1 - c0).sum()),
                                                          rel_tol=1e-9)})


def _class_data(before: np.ndarray, after: np.ndarray, runs: int) -> tuple[np.ndarray, np.ndarray]:
    """``runs`` classes holding the rows ``before`` and ``runs`` classes holding ``after``."""
    X = np.vstack([np.tile(before, (runs, 1)), np.tile(after, (runs, 1))])
    y = np.repeat(np.arange(2 * runs), before.shape[0])
    return X, y


MODIPS_N_C, MODIPS_CLASSES_PER_RELEASE = 10, 1000


def _modips(cls: type, runs: int, seed: int, bad: bool) -> Samples:
    # replace-one within a class of n_c = 10 rows in [-1, 1] (d = 1): one row 0 -> 1. Audited:
    # the class's noisy mean and second moment (diagnostics), jointly by their Laplace LLR. The
    # classes are spread over releases of 1000 classes (the class loop costs O(classes x rows)).
    n_c, half = MODIPS_N_C, MODIPS_CLASSES_PER_RELEASE // 2
    before = np.zeros((n_c, 1))
    after = before.copy()
    after[0] = 1.0
    X, y = _class_data(before, after, half)
    kw = dict(noise="laplace", bounds=(-1.0, 1.0), classes=np.arange(2 * half), task="classification",
              label_privacy="within-class")
    s0, s1 = [], []
    for r in range(math.ceil(runs / half)):
        with _patch("dpcore.mechanisms.modips", ("laplace_scale",), bad):
            rel, dg = cls(epsilon=EPS, random_state=seed * 100_003 + r, **kw).explore(
                X, y, n_samples=2 * half)
        z = np.array([[dg["mean_dp"][c][0], dg["second_moment_dp"][c][0, 0]] for c in range(2 * half)])
        c0 = np.array([dg["mean"][0][0], dg["second_moment"][0][0, 0]])
        c1 = np.array([dg["mean"][half][0], dg["second_moment"][half][0, 0]])
        scale = np.array([rel.noise[0].scale, rel.noise[1].scale])
        s = laplace_llr(z, c0, c1, scale)
        s0.append(s[:half])
        s1.append(s[half:])
    return Samples(np.concatenate(s0), np.concatenate(s1), rel.guarantee.epsilon, 0.0,
                   rel.guarantee.kind, rel.guarantee.neighbouring, laplace_ceiling(c0, c1, scale),
                   {"sensitivities are 2/n_c and 1/n_c": math.isclose(rel.noise[0].sensitivity, 2 / n_c)
                    and math.isclose(rel.noise[1].sensitivity, 1 / n_c)})


RON_N_C, RON_CLASSES_PER_RELEASE = 500, 100


def _ron_gauss(cls: type, runs: int, seed: int, bad: bool) -> Samples:
    # Alg. 5 (one Gaussian per class), d = 2, p = 1, raw rows (feature_scaling="none"). W = w is
    # drawn first, so a first run with the same seed shows it. Each class: n_c/2 rows +u and n_c/2
    # rows -u with u orthogonal to w (class mean 0, projected second moment 0); the neighbour
    # replaces one +u row by w. Audited: the class's noisy mean (2 coordinates) and noisy second
    # moment (1 x 1) from diagnostics, jointly by their Laplace LLR. Classes are spread over
    # several releases (the class loop costs O(classes x rows)); each release has its own seed, W
    # and worst-case pair, and pooling runs of several neighbouring pairs keeps the bound valid
    # (the two inequalities are linear in the rates).
    n_c, half = RON_N_C, RON_CLASSES_PER_RELEASE // 2
    s0, s1, ceilings, same_w = [], [], [], True
    for r in range(math.ceil(runs / half)):
        kw = dict(noise="laplace", n_components=1, feature_scaling="none", bounds=(-1.0, 1.0),
                  random_state=seed * 100_003 + r)
        w = cls(epsilon=EPS, **kw).release(np.eye(2)).transform_arrays["W"][:, 0]
        u = np.array([-w[1], w[0]])
        before = np.vstack([np.tile(u, (n_c // 2, 1)), np.tile(-u, (n_c // 2, 1))])
        after = before.copy()
        after[0] = w
        X, y = _class_data(before, after, half)
        kw.update(classes=np.arange(2 * half), task="classification", label_privacy="within-class")
        exact, exact_diag = cls(epsilon=math.inf, **kw).explore(np.vstack([before, after]),
                                                   np.repeat([0, half], n_c))
        with _patch("dpcore.mechanisms.ron_gauss", ("laplace_scale",), bad):
            rel, rel_diag = cls(epsilon=EPS, **kw).explore(X, y, n_samples=2 * half)
        same_w &= bool(np.allclose(rel.transform_arrays["W"][:, 0], w))

        def stat(diag: dict[str, Any], c: int) -> np.ndarray:
            return np.concatenate([diag["mu_dp"][c], diag["sigma_dp"][c].ravel()])

        z = np.array([stat(rel_diag, c) for c in range(2 * half)])
        c0, c1 = stat(exact_diag, 0), stat(exact_diag, half)
        scale = np.array([rel.noise[0].scale] * 2 + [rel.noise[1].scale])
        s = laplace_llr(z, c0, c1, scale)
        s0.append(s[:half])
        s1.append(s[half:])
        ceilings.append(laplace_ceiling(c0, c1, scale))
    return Samples(np.concatenate(s0), np.concatenate(s1), rel.guarantee.epsilon, 0.0,
                   rel.guarantee.kind, rel.guarantee.neighbouring, max(ceilings),
                   {"same W": same_w, "ceiling range": (round(min(ceilings), 3), round(max(ceilings), 3))})


def _pca_gauss(cls: type, runs: int, seed: int, bad: bool) -> Samples:
    # Alg. 1 (unsupervised), d = 4, p = 2, n = 10 rows in [-1, 1]^4 from the orthogonal corners
    # x = (1, 1, 1, 1) and x' = (1, 1, -1, -1): 6 x + 4 x' vs 5 x + 5 x' (one x replaced by x').
    # Top-2 eigenvalues of X^T X/(n d): (0.6, 0.4) vs (0.5, 0.5), an L1 change of 2/n, exactly the
    # "tight" (Lidskii-Mirsky) sensitivity min(p, 2)/n. One call per run (n_samples = 1).
    x, xp = np.ones(4), np.array([1.0, 1.0, -1.0, -1.0])
    D0 = np.vstack([np.tile(x, (6, 1)), np.tile(xp, (4, 1))])
    D1 = np.vstack([np.tile(x, (5, 1)), np.tile(xp, (5, 1))])
    kw = dict(noise="laplace", n_components=2, bounds=(-1.0, 1.0))
    c0 = cls(epsilon=math.inf, random_state=0, **kw).explore(D0, n_samples=1).diagnostics["eigenvalues_dp"]
    c1 = cls(epsilon=math.inf, random_state=0, **kw).explore(D1, n_samples=1).diagnostics["eigenvalues_dp"]
    out = []
    with _patch("dpcore.mechanisms.pca_gauss", ("laplace_scale",), bad):
        for b, D in enumerate((D0, D1)):
            mech = cls(epsilon=EPS, random_state=np.random.default_rng([seed, b]), **kw)
            runs_b = [mech.explore(D, n_samples=1) for _ in range(runs)]
            rels = [rel for rel, _ in runs_b]
            out.append(np.array([dg["eigenvalues_dp"] for _, dg in runs_b]))
    rec = rels[-1].noise[0]
    s0, s1 = (laplace_llr(z, c0, c1, rec.scale) for z in out)
    return Samples(s0, s1, rels[-1].guarantee.epsilon, 0.0, rels[-1].guarantee.kind,
                   rels[-1].guarantee.neighbouring, laplace_ceiling(c0, c1, rec.scale),
                   {"sensitivity attained": math.isclose(rec.sensitivity, float(np.abs(c1 - c0).sum()))})


DPMIX_N, DPMIX_ELL, DPMIX_T = 4, 2, 4


def subsampled_gaussian_ceiling(sigma: float, shift: float, q: float, T: int, delta: float) -> float:
    """Exact epsilon at ``delta`` between ``N(0, sigma^2)^T`` and ``((1-q) N(0, sigma^2) + q N(shift,
    sigma^2))^T`` (both directions), from dp-accounting's privacy loss distribution (pessimistic,
    so an upper bound within its discretisation); ``nan`` if dp-accounting is not installed."""
    try:
        from dp_accounting.pld import privacy_loss_distribution as pld
    except ImportError:
        return math.nan
    dist = pld.from_gaussian_mechanism(standard_deviation=sigma, sensitivity=shift, sampling_prob=q,
                                       value_discretization_interval=1e-3)
    return float(dist.self_compose(T).get_epsilon_for_delta(delta))


def _dpmix(cls: type, runs: int, seed: int, bad: bool) -> Samples:
    # replace-one, n = 4 rows in [0, 1] (d_X = 1, unsupervised), ell = 2 (q = 1/2), T = 4 mixtures:
    # row 0 goes 0 -> 1 (the other rows stay at 0), the largest move of a row. Mixtures are i.i.d.
    # given the data (independent index draws and noise), so one release of T * runs mixtures, cut
    # into blocks of T, is `runs` independent releases of T mixtures. The score of a block is the
    # exact log-likelihood ratio of its T mixtures (each contains row 0 with probability q; its
    # mean then moves by 1/ell). The miscalibrated variant passes sigma_x / 4 explicitly.
    n, ell, T = DPMIX_N, DPMIX_ELL, DPMIX_T
    kw = dict(delta=DELTA, ell=ell, bounds=(0.0, 1.0))
    D0 = np.zeros((n, 1))
    D1 = D0.copy()
    D1[0] = 1.0
    claim = cls(epsilon=EPS, n_mixtures=T, random_state=seed, **kw).release(D0)
    sigma = float(claim.details["sigma_x"]) / (MISCALIBRATION if bad else 1.0)
    q, mu = ell / n, 1.0 / ell
    scores = []
    for b, D in enumerate((D0, D1)):
        rel = cls(sigma_x=sigma, n_mixtures=T * runs, random_state=np.random.default_rng([seed, b]),
                  **kw).release(D)
        m = np.asarray(rel.data, dtype=float)[:, 0].reshape(runs, T)
        per = np.logaddexp(math.log1p(-q) if q < 1 else -math.inf,
                           math.log(q) + (m * mu - mu * mu / 2) / sigma**2)
        scores.append(per.sum(axis=1))
    return Samples(scores[0], scores[1], claim.guarantee.epsilon, claim.guarantee.delta,
                   claim.guarantee.kind, claim.guarantee.neighbouring,
                   subsampled_gaussian_ceiling(sigma, mu, q, T, DELTA),
                   {"sigma_x": sigma, "noise scale as calibrated": math.isclose(
                       claim.noise[0].scale * (1 / MISCALIBRATION if bad else 1.0), sigma)})


AUDITS: dict[str, AuditSpec] = {spec.key: spec for spec in (
    AuditSpec("local-gaussian", "dpcore.mechanisms.local_gaussian", "LocalGaussian", "replace-one",
              "d = 2, [0, 1]^2, analytic", "projection of a released row on (1, 1)",
              "rows of one release", 1_000_000, 200_000, _local_gaussian),
    AuditSpec("ron-gauss", "dpcore.mechanisms.ron_gauss", "RONGauss",
              "replace-one-within-class",
              f"Alg. 5 (within-class), d = 2, p = 1, n_c = {RON_N_C}, sound",
              "LLR of noisy class mean + second "
              "moment (diagnostics)", "classes of several releases", 3000, 400, _ron_gauss),
    AuditSpec("pca-gauss", "dpcore.mechanisms.pca_gauss", "PCAGauss", "replace-one",
              "Alg. 1, d = 4, p = 2, n = 10, tight", "LLR of the noisy top-2 eigenvalues "
              "(diagnostics)", "releases", 4000, 600, _pca_gauss),
    AuditSpec("jl-laplace", "dpcore.mechanisms.jl_laplace", "JLLaplace", "element",
              "d = 3, k = 2, exact", "LLR of a released row", "rows of one release",
              1_000_000, 200_000, _jl_laplace),
    AuditSpec("jl-laplace", "dpcore.mechanisms.jl_laplace", "JLLaplace", "row-l2",
              "d = 3, k = 2, alpha = 1, exact", "LLR of a released row", "rows of one release",
              1_000_000, 200_000, _jl_laplace_row, variant="row"),
    AuditSpec("jl-laplace", "dpcore.mechanisms.jl_laplace", "JLLaplace", "replace-one",
              "d = 4 unequal ranges, k = 3, exact box sensitivity", "LLR of a released row",
              "rows of one release", 1_000_000, 200_000, _jl_laplace_box, variant="replace-one"),
    AuditSpec("dppro", "dpcore.mechanisms.dppro", "DPPro", "replace-one",
              "d = 4 unequal ranges, k = 2, exact box sensitivity",
              "projection of a released row on (x' - x) R", "rows of one release", 1_000_000, 200_000,
              _dppro_box, variant="replace-one"),
    AuditSpec("dppro", "dpcore.mechanisms.dppro", "DPPro", "element", "d = 3, k = 2, exact",
              "projection of a released row on R_j*", "rows of one release", 1_000_000, 200_000,
              _dppro),
    AuditSpec("dpmix", "dpcore.mechanisms.dpmix", "DPMix", "replace-one",
              f"n = {DPMIX_N}, ell = {DPMIX_ELL}, T = {DPMIX_T}, d_X = 1, tight",
              "LLR of T mixtures", "blocks of T mixtures of one release", 500_000, 100_000, _dpmix,
              requires=(("dpcore.accounting", "dpmix_epsilon"),
                        ("dpcore.accounting", "dpmix_calibrate_sigma"))),
    AuditSpec("identity-laplace", "dpcore.mechanisms.identity_laplace", "IdentityLaplace", "replace-one",
              "d = 4, k = 2", "LLR of a released row", "rows of one release", 1_000_000, 200_000,
              _identity_laplace),
    AuditSpec("pca-identity", "dpcore.mechanisms.pca_identity", "PCAIdentity", "replace-one",
              "d = 2, p = 1, public_data at both corners", "LLR of a released row", "private rows of one "
              "release", 1_000_000, 200_000, _pca_identity),
    AuditSpec("modips", "dpcore.mechanisms.modips", "MODIPS",
              "replace-one-within-class",
              f"classification (within-class), d = 1, n_c = {MODIPS_N_C}",
              "LLR of noisy class mean + second moment "
              "(diagnostics)", "classes of several releases", 4000, 600, _modips),
    AuditSpec("rp-gaussian", "dpcore.mechanisms.rp_gaussian", "RPGaussian", "replace-one",
              "d = 2, k = 1, analytic", "projection of a released row", "rows of one release",
              1_000_000, 200_000, _rp_gaussian),
)}


# ------------------------------------------------------------------------------------ table
def _fmt_claim(r: AuditResult) -> str:
    return f"{r.claimed_epsilon:.4g}" + (f" ({r.delta:.0e})" if r.delta else " (0, pure)")


def markdown_table(results: list[AuditResult], skipped: dict[str, str]) -> str:
    head = ("| mechanism | relation | claimed ε (δ) | audited lower bound (95%) | miscalibrated (scale/4) "
            "lower bound | runs (correct / miscalibrated) | statistic | ceiling of the statistic |")
    lines = [head, "|" + "---|" * 8]
    for r in results:
        flag = "" if r.sound else " **ABOVE CLAIM**"
        teeth = "" if r.has_teeth else " (no teeth)"
        if r.miscalibrated_reported_epsilon != r.claimed_epsilon:
            teeth += f" (its release reports ε = {r.miscalibrated_reported_epsilon:.3g})"
        ceiling = "n/a" if not math.isfinite(r.ceiling) else f"{r.ceiling:.3f}"
        lines.append(
            f"| {r.mechanism} ({r.setting}) | {r.relation} | {_fmt_claim(r)} | "
            f"{r.lower_bound.epsilon:.3f}{flag} | {r.miscalibrated_bound.epsilon:.3f}{teeth} | "
            f"{r.runs:,} / {r.miscalibrated_runs:,} ({r.runs_source}) | {r.statistic} | {ceiling} |")
    for name, reason in skipped.items():
        lines.append(f"| {name} | — | — | skipped: {reason} | — | — | — | — |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-scale", type=float, default=1.0, help="multiply every run count")
    parser.add_argument("--only", nargs="*", default=None, help="mechanism names to audit")
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args(argv)
    results, skipped = [], {}
    for name, spec in AUDITS.items():
        if args.only and name not in args.only:
            continue
        reason = spec.unavailable()
        if reason:
            skipped[name] = reason
            continue
        res = run_audit(spec, runs=max(50, int(spec.runs * args.runs_scale)),
                        miscalibrated_runs=max(50, int(spec.miscalibrated_runs * args.runs_scale)),
                        seed=args.seed)
        results.append(res)
        print(f"{name}: lb {res.lower_bound.epsilon:.3f} / claim {res.claimed_epsilon:.4g}, "
              f"miscalibrated lb {res.miscalibrated_bound.epsilon:.3f}, {res.seconds:.1f} s, "
              f"checks {res.checks}", file=sys.stderr)
    print(markdown_table(results, skipped))
    return 0 if all(r.sound and r.has_teeth for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
