"""App-side computations shared by pages: drawing releases and 2-D views (no widgets here)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from sklearn.decomposition import PCA

from dpcore.data import Dataset
from dpcore.evaluation import has_public_transform, to_release_space
from dpcore.exceptions import PrivacyLeakWarning
from dpcore.mechanisms import get_mechanism
from dpcore.release import Release

__all__ = [
    "DISPLAY_POINTS",
    "INTERNAL_ERROR",
    "PCA_FIT_ROWS",
    "RunResult",
    "IMAGE_ROWS",
    "displayed_rows",
    "distance_sweep",
    "draw_release",
    "fit_view",
    "kmeans_agreement",
    "preview_rows",
    "real_in_release_space",
    "rows_at",
    "two_d_view",
]

INTERNAL_ERROR = "Internal error in the mechanism, please report it"


@dataclass
class RunResult:
    """A release or the error that prevented it (shown with ``st.error``, never a traceback).

    ``diagnostics`` are the exploration facts :meth:`Mechanism.explore` returns beside the release
    (about the private rows: shown on exploration pages, never downloaded)."""

    release: Release | None
    error: str | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    #: the input positions of the released rows drawn, in order (None: every row)
    rows: np.ndarray | None = None


def draw_release(name: str, params: dict[str, Any], ds: Dataset, seed: int | None,
                 n_samples: int | None = None, rows: np.ndarray | None = None) -> RunResult:
    """Run mechanism ``name`` on ``ds``. ``seed=None`` draws OS entropy (publishable).

    ``rows``: draw only these released rows (a row-wise mechanism's preview,
    :meth:`dpcore.mechanisms.base.Mechanism.explore`); ``RunResult.rows`` keeps them."""
    try:
        mech = get_mechanism(name)(**params, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)  # shown by the Data page instead
            some = {} if rows is None else {"rows": rows}  # row-wise mechanisms only
            release, diagnostics = mech.explore(ds, n_samples=n_samples, **some)
            return RunResult(release, diagnostics=diagnostics, rows=rows)
    except (ValueError, TypeError, np.linalg.LinAlgError) as exc:
        return RunResult(None, str(exc))
    except Exception as exc:  # noqa: BLE001 - a page must show an error, never a traceback
        return RunResult(None, f"{INTERNAL_ERROR} ({type(exc).__name__}: {exc})")


#: Points per set (released, real) drawn in the Explore scatter. Display only: every computation
#: uses all rows. Each SVG point costs the browser about 0.3-0.4 ms of CPU per redraw (headless
#: Chromium, benchmarks/bench_browser.py): 2 x 600 points keep a slider move's redraw near 0.4 s.
DISPLAY_POINTS = 600
#: Rows the 2-D view's PCA is fitted on (independent of how many points are drawn).
PCA_FIT_ROWS = 4000


#: Released rows the Explore page shows as images (the first ones).
IMAGE_ROWS = 24


def preview_rows(n: int, max_points: int = DISPLAY_POINTS, seed: int = 0) -> np.ndarray:
    """The released rows :func:`two_d_view` plots, in its order (apply it to their labels too)."""
    return np.random.default_rng(seed).permutation(n)[:max_points]


def displayed_rows(n: int, n_images: int = IMAGE_ROWS) -> np.ndarray:
    """Sorted positions of the released rows the Explore page shows out of ``n``: the scatter's
    :func:`preview_rows` and the image grid's first ``n_images``. A row-wise mechanism's preview
    draws these only (``draw_release(..., rows=...)``)."""
    return np.union1d(preview_rows(n), np.arange(min(n_images, n)))


def rows_at(drawn: np.ndarray | None, wanted: np.ndarray) -> np.ndarray:
    """Where the released rows ``wanted`` (positions in the full release) sit in a release drawn
    for the rows ``drawn`` (sorted; ``None``: every row, positions unchanged).

    Raises ``ValueError`` if one of ``wanted`` was not drawn."""
    wanted = np.asarray(wanted, dtype=np.int64)
    if drawn is None:
        return wanted
    at = np.searchsorted(drawn, wanted)
    if wanted.size and (at.max() >= drawn.size or np.any(drawn[np.minimum(at, drawn.size - 1)] != wanted)):
        raise ValueError("some of the wanted rows were not drawn")
    return at


def fit_view(basis: np.ndarray, seed: int = 0) -> PCA:
    """The 2-D view's axes: a 2-component PCA fitted on ``basis`` (rows of shape (m, d), d > 2)."""
    return PCA(n_components=2, random_state=seed).fit(basis)


def two_d_view(real: np.ndarray | None, released: np.ndarray, max_points: int = DISPLAY_POINTS,
               seed: int = 0, fit: Callable[[np.ndarray], PCA] | None = None,
               plotted: np.ndarray | None = None) -> tuple[np.ndarray | None, np.ndarray, str]:
    """First two principal axes of the real data (mapped into the release space), applied to both.

    Exploration only: the PCA is fitted on real rows and never leaves the custodian's browser.
    Returns (real_2d or None, released_2d, axis description). The released rows are
    ``released[preview_rows(len(released), max_points, seed)]``; the real ones the first
    ``max_points``. ``fit(basis)`` returns the fitted axes (default :func:`fit_view` with
    ``seed``; a page passes a memoised one: the real rows, hence the axes, rarely change).
    ``plotted``: the positions in ``released`` of the rows to plot instead (a release drawn for
    some rows only: ``rows_at(drawn, preview_rows(n))``).
    """
    rel = released[preview_rows(released.shape[0], max_points, seed) if plotted is None else plotted]
    if released.shape[1] <= 2:
        pad = np.zeros((rel.shape[0], 2 - released.shape[1]))
        r2 = None if real is None else np.hstack([real[:max_points], np.zeros((min(
            max_points, real.shape[0]), 2 - real.shape[1]))])
        return r2, np.hstack([rel, pad]), "released coordinates"
    basis = real if real is not None else released[preview_rows(released.shape[0], PCA_FIT_ROWS, seed)]
    pca = (fit or partial(fit_view, seed=seed))(np.ascontiguousarray(basis[:PCA_FIT_ROWS]))
    real2 = None if real is None else pca.transform(real[:max_points])
    axis = "first two principal axes of the real data" if real is not None else \
        "first two principal axes of the release (no public map for real data)"
    return real2, pca.transform(rel), axis


def real_in_release_space(release: Release, X: np.ndarray) -> np.ndarray | None:
    """Real rows mapped with the release's public transform, or None if it has none."""
    return to_release_space(release, X) if has_public_transform(release) else None


def distance_sweep(name: str, params: dict[str, Any], ds: Dataset, ks: list[int], seed: int,
                   n_pairs: int = 500) -> dict[str, np.ndarray]:
    """Measured and expected L2 error (DPPro eq. 12) of recovered distances for each ``k``.

    One seeded release per ``k`` on the same sampled pairs; exploration only. Returns arrays
    ``k``, ``l2_error``, ``expected``, ``noise_variance`` (per k) and ``true_sq`` (of the pairs).
    """
    from dpcore.distances import distance_experiment, expected_l2_error

    rows = {"k": [], "l2_error": [], "expected": [], "noise_variance": []}
    true_sq = np.empty(0)
    for k in ks:
        res = draw_release(name, {**params, "n_components": int(k)}, ds, seed)
        if res.release is None:
            continue
        exp = distance_experiment(res.release, ds.X, n_pairs=n_pairs, random_state=seed)
        true_sq = exp.true_sq
        rows["k"].append(k)
        rows["l2_error"].append(exp.l2_error)
        rows["expected"].append(float(expected_l2_error(exp.true_sq, k, exp.noise_variance, exp.noise)))
        rows["noise_variance"].append(exp.noise_variance)
    out = {key: np.asarray(v, dtype=float) for key, v in rows.items()}
    out["true_sq"] = true_sq
    return out


def kmeans_agreement(released: np.ndarray, real: np.ndarray, k: int, seed: int = 0,
                     max_rows: int = 3000) -> dict[str, float]:
    """K-means on the release vs K-means on the real rows it came from (row-aligned releases).

    Returns the adjusted Rand index between the two clusterings of the same rows and the ARI of
    each against the real labels when given. Exploration only.
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score

    n = min(released.shape[0], real.shape[0], max_rows)
    on_release = KMeans(k, n_init=4, random_state=seed).fit_predict(released[:n])
    on_real = KMeans(k, n_init=4, random_state=seed).fit_predict(real[:n])
    return {"ari": float(adjusted_rand_score(on_real, on_release)), "n": float(n), "k": float(k)}
