"""Statistical audit of the row-level (replace-one) calibration of JL-Laplace and DPPro (issue 13,
item 1): ``c`` / ``S2`` is the sensitivity of the DRAWN projection over the public box.

The audits are ``jl-laplace-replace-one`` and ``dppro-replace-one`` of ``benchmarks/audit_table.py``
(also run by ``tests/test_audit.py`` with the noise scale divided by 4). Their pair is the worst
case for the drawn matrix: two opposite vertices of the public box found by enumerating the
box's sign vectors (:func:`audit_table.box_worst_pair`), and every run is one row of a single
release through the mechanism's own sampler (the discrete Laplace / Gaussian on its grid). Here:

* the pair attains the sensitivity the release states, and that sensitivity is the maximum over
  the box's vertices for the drawn matrix (a search in the ``d``-dimensional box, independent of
  JL-Laplace's enumeration over the ``k`` outputs; DPPro's own enumeration is re-done with
  another code path), in every relation's ``row_level_sensitivity``;
* the empirical lower bound (95%) never exceeds the card's epsilon, and the same audit against
  the noise scale divided by 1.5 DOES prove an epsilon above it (so a 1.5x mis-calibration of the
  row-level unit is caught).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_audit import audit  # benchmarks/audit_table.py, loaded once (tests/ is on sys.path)

from dpcore.mechanisms import DPPro, JLLaplace

AUDIT_KEYS = ("jl-laplace-replace-one", "dppro-replace-one")
RUNS = 1_000_000


# ------------------------------------------------------------------------------- worst-case search
@pytest.mark.parametrize(("cls", "ord"), [(JLLaplace, 1), (DPPro, 2)], ids=["jl-laplace", "dppro"])
@pytest.mark.parametrize(("k", "seed"), [(1, 0), (2, 1), (3, 2), (5, 3)])
@pytest.mark.parametrize("relation", ["replace-one", "element"])
def test_stated_row_level_sensitivity_is_the_maximum_over_the_box_vertices(cls, ord, k, seed, relation):
    # d = 7 unequal ranges, one of them constant (width 0: no change possible in that column)
    bounds = np.vstack([audit.BOX_BOUNDS, [[-1.0, 3.0], [2.0, 2.0], [0.0, 0.5]]])
    d = bounds.shape[0]
    kw = dict(n_components=k, relation=relation, random_state=seed)
    if cls is DPPro:
        kw["delta"] = 1e-6
    M = audit._probe_projection(cls, bounds, **kw)
    before, after, best = audit.box_worst_pair(M, bounds, ord)
    rng = np.random.default_rng(seed)
    X = rng.uniform(bounds[:, 0], bounds[:, 1], size=(50, d))
    rel = cls(epsilon=1.0, bounds=bounds, **kw).release(X)
    stated = rel.details["row_level_sensitivity"]
    assert stated == pytest.approx(best, rel=1e-9)
    if relation == "replace-one":
        assert rel.noise[0].sensitivity == pytest.approx(best, rel=1e-9)
    # the pair found is a pair of raw rows inside the box whose released rows move by exactly that
    assert np.all((before >= bounds[:, 0]) & (before <= bounds[:, 1]))
    assert np.all((after >= bounds[:, 0]) & (after <= bounds[:, 1]))
    lo, width = bounds[:, 0], np.where(bounds[:, 1] > bounds[:, 0], bounds[:, 1] - bounds[:, 0], 1.0)
    move = ((after - lo) / width - (before - lo) / width) @ M
    assert float(np.linalg.norm(move, ord=ord)) == pytest.approx(best, rel=1e-9)
    # no other pair of rows of the box does better: random pairs, and every pair of vertices
    U = rng.uniform(bounds[:, 0], bounds[:, 1], size=(2, 20_000, d))
    moves = ((U[1] - U[0]) / width) @ M
    assert np.linalg.norm(moves, ord=ord, axis=1).max() <= best * (1 + 1e-12)
    V = np.array(np.meshgrid(*[[0.0, 1.0]] * d)).reshape(d, -1).T * (bounds[:, 1] > bounds[:, 0])
    vm = V @ M
    assert np.linalg.norm(vm[:, None, :] - vm[None, :, :], ord=ord, axis=2).max() == pytest.approx(best,
                                                                                                   rel=1e-9)


# ------------------------------------------------------------------------------- statistical audits
@pytest.mark.slow
@pytest.mark.parametrize("key", AUDIT_KEYS)
def test_row_level_audit_is_sound_and_catches_a_1_5x_miscalibration(key, monkeypatch):
    spec = audit.AUDITS[key]
    monkeypatch.setattr(audit, "MISCALIBRATION", 1.5)
    res = audit.run_audit(spec, runs=RUNS, miscalibrated_runs=RUNS)
    assert res.relation == "replace-one" and res.claimed_epsilon == pytest.approx(1.0)
    # the worst pair for the drawn matrix, and the release's stated sensitivity is what it attains
    assert all(v for v in res.checks.values() if isinstance(v, bool)), res.checks
    # the pair attains the claim: the most any test can show is the card's epsilon (up to the
    # sampler's grid and slack)
    assert res.ceiling == pytest.approx(res.claimed_epsilon, rel=0.02)
    # (i) sound: the lower bound (95%) does not exceed the card's epsilon
    assert 0 < res.lower_bound.epsilon <= res.claimed_epsilon, res.lower_bound
    # (ii) teeth: the noise scale divided by 1.5 proves an epsilon above the card's
    assert res.miscalibrated_bound.epsilon > res.claimed_epsilon, res.miscalibrated_bound
    assert res.miscalibrated_reported_epsilon == pytest.approx(res.claimed_epsilon)
    if math.isfinite(res.miscalibrated_ceiling):
        assert res.miscalibrated_bound.epsilon <= res.miscalibrated_ceiling + 1e-9
