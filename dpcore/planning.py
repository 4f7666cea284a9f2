"""Noise plans from public facts only: what a release would add, before any private data is read.

Every noise scale of every mechanism is a function of public facts (``n``, the number of features,
the task and class list, the public bounds, the mechanism's parameters) and of epsilon and delta:
that is what makes the scales safe to print on the card. :func:`noise_plan` makes this usable
before a release: it runs the mechanism once on a *placeholder table* built from those public facts
alone (rows drawn uniformly in ``[0, 1]^d`` by a fixed public seed, labels cycling over the classes)
and returns the guarantee and the noise records (statistic, sensitivity, scale) the card would
carry. The placeholder's values never reach a scale, so the plan equals the plan of a release of
any table with the same public facts. :func:`epsilon_for_scale` inverts it: the epsilon at which a
named statistic gets a given noise scale (monotone in epsilon; bisection in log epsilon).

Caveat, stated on the plan: with ``label_privacy="within-class"`` the class sizes are public facts
of the real table; the placeholder uses equal class sizes (``n / K`` each), so per-class scales
are those of a balanced table.

These back ``dpcore calibrate MECH`` and ``dpcore epsilon MECH`` (issue 16) for every registered
mechanism; DPMix keeps its own Renyi-DP accountant commands (:mod:`dpcore.accounting`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from dpcore.data import Dataset, load_dataset
from dpcore.limits import check_cells, check_memory, check_n_classes
from dpcore.mechanisms import get_mechanism
from dpcore.release import Guarantee, NoiseRecord
from dpcore.schema import validate_params
from dpcore.validation import check_integer

__all__ = ["NoisePlan", "placeholder_table", "placeholder_like", "noise_plan", "epsilon_for_scale"]

#: the placeholder's rows come from this fixed, public seed (they never shape a scale)
PLACEHOLDER_SEED = 0
TASKS = ("unsupervised", "classification", "regression")


@dataclass(frozen=True)
class NoisePlan:
    """The guarantee and the noise records a release with these public facts would carry.

    Attributes
    ----------
    mechanism : str
        Registered name.
    parameters : dict
        The mechanism's parameters as the card would state them.
    guarantee : Guarantee
        The guarantee actually provided (the card's ``guarantee``).
    noise : tuple of NoiseRecord
        One record per noisy statistic: sensitivity, norm, scale (Laplace ``b`` or Gaussian
        ``sigma``), distribution, source.
    facts : dict
        The public facts used: ``n``, ``n_features``, ``task``, ``n_classes``.
    varies : tuple of str
        Statistics whose scale depends on the drawn public random matrix (one draw shown).
    """

    mechanism: str
    parameters: dict[str, Any]
    guarantee: Guarantee
    noise: tuple[NoiseRecord, ...]
    facts: dict[str, Any]
    varies: tuple[str, ...] = ()

    def record(self, statistic: str) -> NoiseRecord:
        """The noise record named ``statistic``.

        Raises
        ------
        KeyError
            No record has that name (the message lists the names).
        """
        return _record(self.noise, statistic)

    def scale_of(self, statistic: str) -> float:
        """The noise scale of the record named ``statistic`` (:meth:`record`)."""
        return float(self.record(statistic).scale)


def _record(noise: tuple[NoiseRecord, ...] | list[NoiseRecord], statistic: str) -> NoiseRecord:
    for rec in noise:
        if rec.statistic == statistic:
            return rec
    names = ", ".join(r.statistic for r in noise) or "none"
    raise KeyError(f"no noisy statistic named {statistic!r}; this plan has: {names}")


def placeholder_table(n: int, n_features: int, task: str = "unsupervised", n_classes: int = 2) -> Dataset:
    """A table that carries only public facts: ``n`` rows of ``n_features`` numeric columns with
    public bounds ``[0, 1]``, uniform values from the fixed seed :data:`PLACEHOLDER_SEED`, and for
    classification labels ``0..n_classes-1`` cycling (public class list), for regression labels in
    the public ``label_bounds`` ``(0, 1)``.

    Raises
    ------
    ValueError
        ``n < 2``, ``n_features < 1``, an unknown task, or fewer than 2 classes.
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    if int(n) < 2 or int(n_features) < 1:
        raise ValueError(f"need n >= 2 rows and at least 1 feature, got n = {n}, n_features = {n_features}")
    if task == "classification" and int(n_classes) < 2:
        raise ValueError(f"classification needs at least 2 classes, got {n_classes}")
    # the public skeleton (zeros inside the bounds); placeholder_like draws the values
    names = [f"x{j + 1}" for j in range(int(n_features))]
    frame = pd.DataFrame(np.zeros((int(n), len(names))), columns=names)
    kw: dict[str, Any] = {"bounds": (0.0, 1.0), "label": ""}
    if task == "classification":
        frame["y"] = np.arange(int(n)) % int(n_classes)
        kw.update(label="y", task=task, classes=list(range(int(n_classes))))
    elif task == "regression":
        frame["y"] = 0.0
        kw.update(label="y", task=task, label_bounds=(0.0, 1.0))
    return placeholder_like(load_dataset(frame, **kw))


def placeholder_like(data: Dataset) -> Dataset:
    """``data``'s public facts (columns, bounds and their sources, one-hot groups, task, class list,
    label bounds, ``n``) with every private value replaced: features uniform within the public
    bounds and labels cycling over the class list (or uniform in the label bounds), from the fixed
    seed :data:`PLACEHOLDER_SEED`. Nothing of ``data.X`` or ``data.y`` is kept."""
    rng = np.random.default_rng(PLACEHOLDER_SEED)
    n = data.n_samples
    lo, hi = data.bounds[:, 0], data.bounds[:, 1]
    X = lo + (hi - lo) * rng.random((n, data.n_features))
    y = None
    if data.task == "classification":
        y = np.arange(n) % len(data.classes)
    elif data.task == "regression" and data.label_bounds is not None:
        a, b = data.label_bounds
        y = a + (b - a) * rng.random(n)
    elif data.y is not None:
        raise ValueError("a regression label needs public label bounds (--label-bounds) for a noise plan")
    return replace(data, X=X, y=y)


def noise_plan(mechanism: str, parameters: dict[str, Any], *, n: int | None = None,
               n_features: int | None = None, task: str = "unsupervised", n_classes: int = 2,
               like: Dataset | None = None) -> NoisePlan:
    """The noise a release of ``mechanism`` with ``parameters`` would add to a table with these
    public facts (module docstring). Nothing private is read and nothing is written.

    Parameters
    ----------
    mechanism : str
        A registered name (``dpcore.mechanisms.MECHANISMS``).
    parameters : dict
        The mechanism's parameters (epsilon, delta, n_components, ...); ``random_state`` is
        ignored (the plan is drawn as a seeded preview: only its scales are returned).
    n, n_features : int
        Public row count and number of features (after one-hot encoding), features with public
        bounds ``[0, 1]`` (:func:`placeholder_table`).
    task, n_classes
        The public task and, for classification, the number of public classes.
    like : Dataset, optional
        Instead of ``n``/``n_features``/``task``: take every public fact of this table
        (:func:`placeholder_like`; its bounds and units matter to mechanisms that add noise in
        data units, such as local-gaussian).

    Notes
    -----
    Records whose scale depends on a public random matrix (the row-level calibration of
    JL-Laplace, DPPro, rp-gaussian on the drawn matrix) change from draw to draw: the plan is
    computed for two public seeds and those records are listed in ``varies``.

    Raises
    ------
    ValueError
        Unknown mechanism, bad facts, or parameters the mechanism refuses (its own message).
    """
    return _plan(mechanism, parameters, _table(mechanism, n, n_features, task, n_classes, like, parameters))


def _table(mechanism: str, n: int | None, n_features: int | None, task: str, n_classes: int,
           like: Dataset | None, parameters: dict[str, Any] | None = None) -> Dataset:
    """The placeholder :func:`noise_plan` releases from (checked against the mechanism's tasks),
    after the limits its shape must fit, checked before it is built: the classes
    (``DPCORE_MAX_CLASSES``), the cells (``DPCORE_MAX_CELLS``) and the memory of the placeholder and
    of the mechanism's release of it (:meth:`~dpcore.mechanisms.base.Mechanism.check_peak_memory`)."""
    cls = get_mechanism(mechanism)
    if like is not None:
        shape = (like.n_samples, like.n_features, 0 if like.classes is None else len(like.classes))
    elif n is None or n_features is None:
        raise ValueError("give n and n_features, or a table whose public facts to use (like=)")
    else:
        n, n_features = check_integer("n", n, 2), check_integer("n_features", n_features, 1)
        if task == "classification":
            n_classes = check_integer("n_classes", n_classes, 2)
            check_n_classes(n_classes)
        check_cells(n, n_features, "the placeholder table (n x n_features)")
        shape = (n, n_features, n_classes if task == "classification" else 0)
    given = parameters or {}
    values = validate_params(cls.params, {p.name: given.get(p.name, p.default) for p in cls.params})
    # the placeholder (its frame, the loader's array, the drawn values) besides the release's own peak
    check_memory(f"the placeholder table of {shape[0]:,} rows x {shape[1]:,} features",
                 3 * 8.0 * shape[0] * shape[1])
    cls.check_peak_memory(*shape, values)
    if like is not None:
        table = placeholder_like(like)
    else:
        table = placeholder_table(n, n_features, task, n_classes)
    tasks = get_mechanism(mechanism).tasks
    if table.task not in tasks:
        raise ValueError(f"{mechanism} does not support the {table.task} task "
                         f"(it supports {', '.join(tasks)})")
    return table


def _release_noise(mechanism: str, parameters: dict[str, Any], table: Dataset, seed: int = PLACEHOLDER_SEED):
    params = {k: v for k, v in parameters.items() if k != "random_state"}
    return get_mechanism(mechanism)(**params, random_state=seed).release(table)


def _plan(mechanism: str, parameters: dict[str, Any], table: Dataset) -> NoisePlan:
    rel, other = (_release_noise(mechanism, parameters, table, seed)
                  for seed in (PLACEHOLDER_SEED, PLACEHOLDER_SEED + 1))
    varies = tuple(a.statistic for a, b in zip(rel.noise, other.noise, strict=False)
                   if a.statistic != b.statistic or a.scale != b.scale)
    return NoisePlan(mechanism=mechanism, parameters=dict(rel.parameters), guarantee=rel.guarantee,
                     noise=tuple(rel.noise), varies=varies,
                     facts={"n": table.n_samples, "n_features": table.n_features, "task": table.task,
                            "n_classes": len(table.classes) if table.task == "classification" else None})


def epsilon_for_scale(mechanism: str, parameters: dict[str, Any], statistic: str, scale: float, *,
                      lo: float = 1e-4, hi: float = 1e4, **facts: Any) -> tuple[float, NoisePlan]:
    """The epsilon at which ``statistic`` gets noise of scale ``scale`` (Laplace ``b`` or Gaussian
    ``sigma``), every other parameter as given, and the plan at that epsilon.

    The scale of a statistic is decreasing in epsilon for every mechanism here (its budget share
    grows with epsilon); the root is found by Brent's method on ``log(scale(eps)) - log(scale)``
    over ``[lo, hi]``. Parameters whose automatic value depends on epsilon (an empty
    ``n_components``) may change the statistic's sensitivity along the way: give them explicitly for
    a clean inverse.

    ``facts`` are :func:`noise_plan`'s (``n``, ``n_features``, ``task``, ``n_classes`` or ``like``).

    Raises
    ------
    ValueError
        ``scale <= 0``, a statistic the plan does not have, or a scale outside what epsilon in
        ``[lo, hi]`` gives.
    """
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive number, got {scale}")
    table = _table(mechanism, facts.get("n"), facts.get("n_features"), facts.get("task", "unsupervised"),
                   facts.get("n_classes", 2), facts.get("like"), parameters)

    def gap(log_eps: float) -> float:  # one release per step: the table is built once
        noise = _release_noise(mechanism, {**parameters, "epsilon": math.exp(log_eps)}, table).noise
        try:
            rec = _record(noise, statistic)
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        if rec.distribution not in ("laplace", "gaussian"):
            raise ValueError(f"{statistic!r} is not a Laplace or Gaussian statistic: its 'scale' is not a "
                             "noise scale to invert")
        return math.log(rec.scale) - math.log(scale)

    a, b = math.log(lo), math.log(hi)
    ga, gb = gap(a), gap(b)
    if ga < 0 or gb > 0:
        raise ValueError(f"a scale of {scale:g} for {statistic!r} needs epsilon outside [{lo:g}, {hi:g}] "
                         f"(scales there: {math.exp(ga) * scale:.4g} to {math.exp(gb) * scale:.4g})")
    eps = math.exp(brentq(gap, a, b, xtol=1e-10, rtol=1e-10))
    return eps, _plan(mechanism, {**parameters, "epsilon": eps}, table)
