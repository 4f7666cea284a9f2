"""Load a saved release's public transform: map real rows into the release's space.

A release in a projected space (RON-Gauss, PCA-Gauss, DPPro, DPMix, the projection baselines) is
saved with ``OUT.transform.npz`` (its public arrays) beside ``OUT.card.json`` (its mechanism and
parameters). An analyst holding those files maps real rows into the release's space with::

    from dpcore.transform import load_transform
    transform = load_transform("out.csv")        # or "out.card.json" / "out.transform.npz"
    Z = transform(X_real)                       # (m, n_features) -> (m, n_columns)

The map is rebuilt by the mechanism's own :meth:`~dpcore.mechanisms.Mechanism.transform_from_arrays`,
the function that built the release's :meth:`~dpcore.release.Release.transform` when it was drawn, so
the two cannot disagree. Only public facts are read: the arrays in the ``.npz`` (loaded without
pickles) and the card's mechanism name and parameters.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dpcore.mechanisms import get_mechanism
from dpcore.release import release_paths

__all__ = ["LoadedTransform", "load_transform"]


@dataclass(frozen=True)
class LoadedTransform:
    """A release's public map of real rows, loaded from its saved files.

    Attributes
    ----------
    mechanism : str
        Registry name of the mechanism that drew the release.
    parameters : dict
        The card's parameters (public; never a seed).
    arrays : dict[str, ndarray]
        The public arrays of ``OUT.transform.npz``.
    """

    mechanism: str
    parameters: dict[str, Any]
    arrays: dict[str, np.ndarray]
    _fn: Callable[[np.ndarray], np.ndarray] = field(repr=False)

    def __call__(self, X: Any) -> np.ndarray:
        """Map real rows ``(m, n_features)`` into the release's space, ``(m, n_columns)``.

        Raises
        ------
        ValueError
            ``X`` is not 2-D with the release's number of input features.
        """
        return self._fn(np.asarray(X, dtype=float))


def _paths(path: str | Path) -> tuple[Path, Path]:
    path = Path(path)
    name = path.name
    for suffix in (".card.json", ".transform.npz"):
        if name.endswith(suffix):
            path = path.with_name(name[: -len(suffix)] + ".csv")
            break
    files = release_paths(path)
    return files["card"], files["transform"]


def load_transform(path: str | Path) -> LoadedTransform:
    """Rebuild a saved release's public transform from ``OUT.card.json`` and ``OUT.transform.npz``.

    Parameters
    ----------
    path : str or Path
        The released CSV, its card (``<stem>.card.json``) or its transform (``<stem>.transform.npz``);
        both the card and the transform must sit beside it under the names :meth:`Release.save` uses.

    Returns
    -------
    LoadedTransform
        Callable on real rows ``(m, n_features)``.

    Raises
    ------
    FileNotFoundError
        The card or the transform file is missing (a release without a public map, e.g.
        JL-Laplace's secret projection or a release in the input's feature space, has no
        ``.transform.npz``).
    ValueError
        The card is not a release card, names an unknown mechanism, or the mechanism has no public
        transform; or the ``.npz`` is not a plain array archive.
    """
    card_path, npz_path = _paths(path)
    for p, what in ((card_path, "release card"), (npz_path, "public transform")):
        if not p.is_file():
            raise FileNotFoundError(f"{what} {p} not found (a release without a public map has none)")
    try:
        card = json.loads(card_path.read_text(encoding="utf-8"))
        name, parameters = card["mechanism"], dict(card["parameters"])
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"{card_path} is not a release card ({type(exc).__name__}: {exc})") from None
    cls = get_mechanism(name)
    try:
        with np.load(npz_path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise ValueError(f"{npz_path} is not a saved public transform ({exc})") from None
    fn = cls.transform_from_arrays(arrays, parameters)
    if fn is None:
        raise ValueError(f"{name} releases have no public transform")
    return LoadedTransform(name, parameters, arrays, fn)
