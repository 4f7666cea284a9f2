"""Small computations behind the app's guided tour (each well under a second on bundled data).

Pure functions returning numbers and arrays; the tour's words are built from them in
``app/tour.py`` and its figures in ``app/figures/tour.py``. The noise drawn here goes through the
same exact samplers as every release (:mod:`dpcore.noise`), seeded: teaching pictures, never
releases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpcore.ledger import Ledger, LedgerEntry

__all__ = [
    "average_noise_scale",
    "bounds_leak",
    "composition",
    "noisy_average",
    "posterior_bound",
]


def posterior_bound(prior: np.ndarray, epsilon: float, delta: float = 0.0) -> np.ndarray:
    """Largest posterior belief an attacker can reach about one person from an (ε, δ)-DP release.

    For any event about an individual with prior probability ``p``, (ε, 0)-DP bounds the posterior
    by ``e^ε p / (e^ε p + 1 - p)`` (the odds grow by at most ``e^ε``; Kasiviswanathan & Smith 2014,
    "On the 'semantics' of differential privacy"); with δ > 0 the bound holds up to an additive δ.

    Parameters
    ----------
    prior : array of probabilities in [0, 1]
    epsilon : float >= 0
    delta : float in [0, 1)
    """
    p = np.clip(np.asarray(prior, dtype=float), 0.0, 1.0)
    e = math.exp(min(epsilon, 700.0))
    return np.minimum(1.0, e * p / (e * p + 1.0 - p) + delta)


def _average_sensitivity(bounds: np.ndarray, n: int) -> float:
    """L1 sensitivity of the column means of ``n`` rows clipped to ``bounds`` (d, 2) when one row is
    replaced by any other row of the box: each mean moves by at most ``(hi_j - lo_j) / n``."""
    b = np.asarray(bounds, dtype=float)
    return float(np.sum(b[:, 1] - b[:, 0]) / int(n))


def average_noise_scale(bounds: np.ndarray, n: int, epsilons: Sequence[float]) -> np.ndarray:
    """The Laplace scale :func:`noisy_average` adds at each epsilon (the exact sampler's scale
    ``t g >= S1 / epsilon`` on its public grid, :func:`dpcore.noise.laplace_plan`), shape
    ``(len(epsilons),)``; ``S1`` as in :func:`noisy_average`."""
    from dpcore.noise import SeededBits, laplace_plan

    s1 = _average_sensitivity(bounds, n)
    d = np.asarray(bounds).shape[0]
    bits = SeededBits(np.random.default_rng(0))  # a plan draws nothing
    return np.array([laplace_plan(s1, float(e), n_changed=d, bits=bits).scale for e in epsilons])


def noisy_average(X: np.ndarray, bounds: np.ndarray, epsilon: float,
                  random_state: int = 0) -> dict[str, Any]:
    """The column means of ``X`` (rows clipped to the public ``bounds``) released with the Laplace
    mechanism at ``epsilon`` (Dwork & Roth 2014, Thm 3.6), replace-one neighbours, ``n`` public.

    Sensitivity: ``S1 = sum_j (hi_j - lo_j) / n`` (one replaced row moves mean ``j`` by at most
    ``(hi_j - lo_j) / n``). Noise from :func:`dpcore.noise.laplace` (exact, on a public grid), on a
    seeded stream: a teaching picture, not a release.

    Returns
    -------
    dict
        ``mean`` and ``noisy`` (arrays of shape (d,)), ``scale`` (the Laplace scale drawn with),
        ``sensitivity`` (``S1``), ``n``.
    """
    from dpcore.noise import SeededBits, laplace

    b = np.asarray(bounds, dtype=float)
    Z = np.clip(np.asarray(X, dtype=float), b[:, 0], b[:, 1])
    n, d = Z.shape
    s1 = _average_sensitivity(b, n)
    draw = laplace(Z.mean(axis=0), s1, float(epsilon), n_changed=d,
                   bits=SeededBits(np.random.default_rng(random_state)))
    return {"mean": Z.mean(axis=0), "noisy": draw.values, "scale": float(draw.scale), "sensitivity": s1,
            "n": n}


def bounds_leak(values: np.ndarray, public_bounds: tuple[float, float], new_value: float,
                epsilon: float, replaced: int = 0) -> dict[str, dict[str, dict[str, float]]]:
    """Why bounds must be public: the mean of one column released with Laplace noise whose scale
    comes from the bounds, ``(hi - lo) / (n epsilon)`` (replace-one, ``n`` public), on the table and
    on its neighbour where row ``replaced`` is replaced by ``new_value``.

    With bounds read from the data (its minimum and maximum) the scale itself depends on the rows:
    a new value outside ``[min, max]`` widens the bounds, so the scale, printed on every release
    card, tells whether that person is in the table (whatever the noise). With public bounds it is
    the same for both tables.

    Returns
    -------
    dict
        ``{"data" | "public": {"without" | "with": {"lo", "hi", "centre", "scale"}}}``: the bounds
        used, the clipped mean the noise is centred on and the Laplace scale, for each table.
    """
    x = np.asarray(values, dtype=float)
    neighbour = x.copy()
    neighbour[int(replaced)] = float(new_value)
    out: dict[str, dict[str, dict[str, float]]] = {"data": {}, "public": {}}
    for name, table in (("without", x), ("with", neighbour)):
        for source, (lo, hi) in (("data", (float(table.min()), float(table.max()))),
                                 ("public", (float(public_bounds[0]), float(public_bounds[1])))):
            out[source][name] = {"lo": lo, "hi": hi, "centre": float(np.clip(table, lo, hi).mean()),
                                 "scale": (hi - lo) / (table.size * float(epsilon))}
    return out


def composition(n_releases: int, epsilon: float, budget: float) -> dict[str, np.ndarray]:
    """``n_releases`` releases of ``epsilon`` each booked in a :class:`~dpcore.ledger.Ledger` with
    ``budget``: basic composition (the epsilons add up) and the ledger's refusal past the budget.

    Returns
    -------
    dict of arrays, one entry per release asked for
        ``release`` (1, 2, ...), ``total`` (the ledger's epsilon total after it, refused ones not
        added) and ``refused`` (bool: the ledger refused it, nothing was spent).
    """
    ledger = Ledger(budget=float(budget))
    totals, refused = [], []
    for i in range(int(n_releases)):
        entry = LedgerEntry("release", float(epsilon), 0.0, "replace-one", created_utc=f"#{i + 1}")
        no = ledger.refusal(entry) is not None
        if not no:
            ledger.add(entry)
        refused.append(no)
        totals.append(ledger.total("replace-one").epsilon)
    return {"release": np.arange(1, int(n_releases) + 1), "total": np.asarray(totals, dtype=float),
            "refused": np.asarray(refused, dtype=bool)}
