"""The release card in plain words, and the command line that reproduces a release's settings.

No Streamlit import: the Release page renders what these return; tests read them directly.
"""

from __future__ import annotations

import math
import shlex
from collections import OrderedDict
from typing import Any

from app.markdown import md_escape
from dpcore.mechanisms import get_mechanism

SPACE_TEXT = {
    "features": "the columns of your table, in their own units, with noise added (clipped rows "
                "plus noise can fall outside the public bounds)",
    "projected": "projected coordinates: each column is a combination of all your columns, not a "
                 "column of your table, so the numbers are not in your table's units",
    "mixtures": "mixtures: each row is the average of several randomly chosen rows plus noise, "
                "not the row of one person",
}


def _fmt(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.4g}"


def card_in_words(card: dict[str, Any]) -> str:
    """Markdown a data custodian can read: the guarantee, what is assumed public, the noise per
    statistic and what the file's numbers are.

    Parameters
    ----------
    card : dict
        A release card (:meth:`dpcore.release.Release.card_json`, parsed).
    """
    g = card["guarantee"]
    params = card.get("parameters", {})
    details = card.get("details", {}) or {}
    lines = ["**Guarantee.** " + card.get("guarantee_text", "")]
    if not g.get("holds", True):
        lines.append("**The guarantee does NOT hold**: some bounds were computed from the private "
                     "data.")
    public = [f"the number of rows (n = {card.get('n_rows', '?'):,})",
              f"the bounds of every column (source: {card.get('bounds_source', '?')})"]
    task = params.get("task")
    if task == "classification":
        classes = details.get("classes")
        public.append("the task and the list of classes"
                      + (f" ({md_escape(', '.join(map(str, classes[:12])))}"
                         f"{', ...' if len(classes) > 12 else ''})" if classes else ""))
    elif task:
        public.append(f"the task ({task})")
    lines.append("**Assumed public** (not protected by the noise): " + "; ".join(public) + ".")
    lines.append("**Noise added** (" + _noise_summary(card.get("noise", [])) + ").")
    space = card.get("space", "features")
    units = SPACE_TEXT.get(space, space)
    extra = [details[k] for k in ("feature_units", "label_units") if isinstance(details.get(k), str)]
    lines.append(f"**The file.** {card.get('n_released', card.get('n_rows', '?')):,} rows of "
                 f"{units}." + (" " + " ".join(e[0].upper() + e[1:] + "." for e in extra) if extra else "")
                 + (" A public transform file (.npz) maps real rows into the same space."
                    if card.get("transform_file") else ""))
    return "\n\n".join(lines)


def _noise_summary(noise: list[dict[str, Any]]) -> str:
    """One clause per kind of noisy statistic: distribution, scale range and count."""
    if not noise:
        return "none"
    groups: OrderedDict[tuple[str, str], list[dict[str, Any]]] = OrderedDict()
    for rec in noise:
        kind = rec["statistic"].split(" of class ")[0].split(" (")[0]
        groups.setdefault((kind, rec["distribution"]), []).append(rec)
    parts = []
    for (kind, dist), recs in groups.items():
        scales = [float(r["scale"]) for r in recs]
        scale = _fmt(scales[0]) if max(scales) == min(scales) else f"{_fmt(min(scales))}–{_fmt(max(scales))}"
        what = "standard deviation" if dist == "gaussian" else "scale"
        count = f" ({len(recs)} statistics, e.g. one per class)" if len(recs) > 1 else ""
        parts.append(f"{kind}: {dist.capitalize()} noise, {what} {scale}{count}")
    return "; ".join(parts)


def equivalent_command(card: dict[str, Any], dataset_name: str, *, bundled: bool,
                       label: str | None = None, has_user_bounds: bool = False,
                       data_bounds: bool = False, classes: list[Any] | None = None,
                       data_classes: bool = False, missing: str = "error",
                       output: str = "release.csv") -> str:
    """The ``dpcore release`` command that draws a release with the same settings.

    Only parameters that differ from the schema default are written (the CLI's defaults are the
    same). Never a seed: the CLI has none, and every run draws fresh OS entropy.

    Parameters
    ----------
    card : dict
        The release card (its ``mechanism`` and ``parameters``).
    dataset_name : str
        Bundled dataset name, or the uploaded file's name.
    bundled : bool
        Bundled datasets carry their label, task and bounds; a file needs ``--label``, ``--task``
        and ``--bounds bounds.json`` (the public bounds, offered for download beside it).
    data_bounds : bool
        Some bounds come from the data: ``--data-bounds`` (the guarantee then does not hold).
    classes, data_classes : list, bool
        The public class list of an uploaded classification label (``--classes a,b``), or
        ``--data-classes`` when it was read from the data.
    missing : str
        How rows with missing values were handled (``--missing``; ``"error"`` is the default).
    """
    name = card["mechanism"]
    cls = get_mechanism(name)
    params = card.get("parameters", {})
    words = ["dpcore", "release", name, dataset_name, "-o", output]
    if not bundled:
        task = params.get("task")
        if label:
            words += ["--label", label]
        if task:
            words += ["--task", task]
        if task == "classification" and classes:
            words += ["--classes", ",".join(str(c) for c in classes)]
        elif task == "classification" and data_classes:
            words.append("--data-classes")
        if missing != "error":
            words += ["--missing", missing]
        if has_user_bounds:
            words += ["--bounds", "bounds.json"]
        if data_bounds:
            words.append("--data-bounds")
    for p in cls.params:
        if p.name not in params:
            continue
        value = params[p.name]
        default = list(p.default) if isinstance(p.default, tuple) else p.default
        if value == default or value is None:
            continue
        if p.kind == "bool":
            words.append(p.cli_flag if value else "--no-" + p.cli_flag[2:])
        elif p.kind == "fraction_split":
            words += [p.cli_flag, *(f"{float(v):g}" for v in value)]
        else:
            words += [p.cli_flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if params.get("n_samples") is not None:
        words += ["--n-samples", str(params["n_samples"])]
    return " ".join(shlex.quote(str(w)) for w in words)
