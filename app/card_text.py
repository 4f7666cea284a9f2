"""The release card in plain words, and the command line that reproduces a release's settings.

No Streamlit import: the Release page renders what these return; tests read them directly.
"""

from __future__ import annotations

import math
import re
import shlex
from collections import OrderedDict
from typing import Any

from app.markdown import html_escape, md_escape
from dpcore.mechanisms import get_mechanism

__all__ = [
    "SPACE_TEXT",
    "automatic_choices",
    "budget_shares",
    "noise_parts",
    "plain_part",
    "noise_savings",
    "card_in_words",
    "card_rules",
    "equivalent_command",
    "fidelity_html",
    "python_snippet",
    "report_html",
]

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


def card_in_words(card: dict[str, Any], *, rules: bool = True) -> str:
    """Markdown a data custodian can read: the guarantee, what is assumed public, the noise per
    statistic and what the file's numbers are.

    Parameters
    ----------
    card : dict
        A release card (:meth:`dpcore.release.Release.card_json`, parsed).
    rules : bool
        Include the rules behind the automatic choices and the Gaussian-against-Laplace noise
        comparison (formulas). The Release page leaves them out of its main text and shows them
        behind "How is this computed?" (:func:`card_rules`); the HTML report keeps them.
    """
    g = card["guarantee"]
    params = card.get("parameters", {})
    details = card.get("details", {}) or {}
    lines = ["**Guarantee.** " + card.get("guarantee_text", "")]
    if not g.get("holds", True):
        lines.append("**NOT differentially private: the guarantee does NOT hold.** A fact that shapes "
                     "the release (bounds, class list or the number of rows) was taken from the private "
                     "data; the ledger books this release as unbounded (ε = ∞).")
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
    if text := _dp_bounds_text(details):
        lines.append("**DP bounds.** " + md_escape(text))
    per_column = details.get("noise_per_column")
    lines.append("**Noise added** (" + _noise_summary(card.get("noise", []))
                 + ("; the standard deviation of a column with noise share 1, each column's below"
                    if isinstance(per_column, dict) and len(set(per_column.values())) > 1 else "") + ").")
    space = card.get("space", "features")
    units = ("your original columns, categories and units" if card.get("output_space") == "original"
             else SPACE_TEXT.get(space, space))
    extra = [details[k] for k in ("feature_units", "label_units") if isinstance(details.get(k), str)]
    lines.append(f"**The file.** {card.get('n_released', card.get('n_rows', '?')):,} rows of "
                 f"{units}." + (" " + " ".join(e[0].upper() + e[1:] + "." for e in extra) if extra else "")
                 + (" A public transform file (.npz) maps real rows into the same space."
                    if card.get("transform_file") else ""))
    if card.get("output_note"):
        lines.append("**Output space.** " + md_escape(card["output_note"]))
    if rules:
        lines += card_rules(card)
    elif parts := _automatic_parts(params, details):
        lines.append(f"**Chosen automatically** (left empty, from public facts only): {md_escape(parts[0])}.")
    if isinstance(per_column, dict) and per_column:
        shown = ", ".join(f"{md_escape(c)} {_fmt(float(v))}" for c, v in list(per_column.items())[:8])
        lines.append("**Noise per column** (standard deviation): " + shown
                     + (f", ... ({len(per_column)} columns)" if len(per_column) > 8 else "") + ".")
    return "\n\n".join(lines)


def card_rules(card: dict[str, Any]) -> list[str]:
    """Markdown paragraphs of the rules behind a card's numbers: what the automatic settings became
    and the public rule that chose them (:func:`automatic_choices`), and how much noise the Gaussian
    variant saves against the papers' Laplace noise (:func:`noise_savings`). Possibly empty."""
    details = card.get("details", {}) or {}
    return [t for t in (automatic_choices(card.get("parameters", {}), details), noise_savings(details)) if t]


def _dp_bounds_text(details: dict[str, Any]) -> str | None:
    """How the DP bounds were paid for (``details.epsilon_split`` / ``details.dp_bounds``), or None."""
    split = details.get("epsilon_split")
    if isinstance(split, dict) and split.get("text"):
        return f"Bounds without a public value were estimated with DP: {split['text']}."
    dpb = details.get("dp_bounds")
    if isinstance(dpb, dict) and "epsilon" in dpb:
        return (f"The bounds of {len(dpb.get('columns', {}))} column(s) are DP estimates that cost epsilon = "
                f"{dpb['epsilon']:g}, charged to the dataset's ledger as their own release (not included in "
                "this card's epsilon).")
    return None


def _setting_text(value: Any) -> str:
    """A parameter value in plain words: on/off, ``0.3 / 0.7`` for a split, numbers with ``:g``."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return " / ".join(_setting_text(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def _automatic_parts(parameters: dict[str, Any], details: dict[str, Any] | None) -> tuple[str, str] | None:
    """``(settings, reason)`` in plain text for :func:`automatic_choices` (unescaped), or None."""
    rec = (details or {}).get("recommended")
    if not isinstance(rec, dict):
        return None
    chosen = rec.get("chosen")
    if isinstance(chosen, dict):
        values = {k: chosen[k] for k in chosen.get("automatic", []) if k in chosen}
        why = "Why: " + str(chosen.get("why") or rec.get("reason", ""))
    else:
        values = {k: rec[k] for k in ("n_components", "pca_fraction")
                  if rec.get(k) is not None and k in parameters and parameters[k] is None}
        why = "The public rule: " + str(rec.get("rule", ""))
    if not values:
        return None
    return ", ".join(f"{k} = {_setting_text(v)}" for k, v in values.items()), why


def automatic_choices(parameters: dict[str, Any], details: dict[str, Any] | None) -> str | None:
    """Markdown saying what the parameters left empty ("automatic") became and why, from the
    card's ``details["recommended"]``: its ``chosen`` record (what the rule set, and why) when the
    mechanism writes one, else the ``n_components`` / ``pca_fraction`` the rule chose for a
    parameter the card lists as empty. None when nothing was chosen automatically.

    Parameters
    ----------
    parameters, details : dict
        A release card's ``parameters`` and ``details`` (or a :class:`~dpcore.release.Release`'s).
    """
    parts = _automatic_parts(parameters, details)
    if parts is None:
        return None
    return (f"**Chosen automatically** (left empty, from public facts only): {md_escape(parts[0])}. "
            f"{md_escape(parts[1])}.")


def _savings_text(details: dict[str, Any] | None) -> str | None:
    """Plain text (unescaped) of the card's ``laplace_over_gaussian_variance``: for each statistic,
    how many times the variance of the papers' Laplace noise (pure epsilon, same epsilon share) the
    Gaussian noise actually drawn saves. None when the release has no such comparison."""
    ratios = (details or {}).get("laplace_over_gaussian_variance")
    if not isinstance(ratios, dict):
        return None
    parts = [f"{k} {float(v):.3g}x" for k, v in ratios.items() if k != "note" and isinstance(v, (int, float))]
    if not parts:
        return None
    return ("Laplace noise with the same epsilon shares would have this many times the Gaussian noise's "
            "variance per coordinate (above 1: Gaussian noise saves that much; below 1: Laplace would "
            "add less there): " + ", ".join(parts))


def noise_savings(details: dict[str, Any] | None) -> str | None:
    """Markdown of :func:`_savings_text` for the app (Explore page, the card in words), or None.

    Parameters
    ----------
    details : dict
        A release card's ``details`` (or a :class:`~dpcore.release.Release`'s).
    """
    text = _savings_text(details)
    return None if text is None else f"**Gaussian against Laplace noise.** {md_escape(text)}."


#: Plain names of the parts of a model, by how a noise record's statistic starts (first match wins;
#: ``\\1`` keeps the word matched). The statistic itself, with its symbols and sizes, stays in the
#: full table ("How is this computed?") and the card.
_PARTS: tuple[tuple[str, str], ...] = (
    (r"class histogram", "class counts"),
    (r"top-p eigenvalues", "PCA eigenvalues"),
    (r"(LapPCA|DP PCA|Analyze Gauss)\b", "PCA basis"),
    (r"second moment of PCA features", "second moments of the PCA features"),
    (r"second moment of \[x\^, y\]", "second moments of the features and the label"),
    (r"second moment", "second moments"),
    (r"(sum|mean) of PCA features", r"\1s of the PCA features"),
    (r"sum of unit rows", "sums of the rows"),
    (r"mean\b", "means"),
    (r"projected (data|rows)", "projected rows"),
    (r"PCA coordinates", "PCA coordinates of each row"),
    (r"each mixture's (features|labels)", r"each mixture's \1"),
    (r"(class )?label of each row", "each row's label"),
    (r"each row", "each row"),
    (r"DP bound", "DP bounds"),
)


def plain_part(statistic: str) -> str:
    """The part of the model a noisy statistic is, in plain words: ``"LapPCA: (1/n) Z^T Z (d x d)"``
    -> ``"PCA basis"``, ``"sum of PCA features of class 3"`` -> ``"sums of the PCA features"``. A
    statistic no rule knows loses its class, its sizes in brackets, a leading ``"name: "`` and any
    symbols (``=``, ``^``, ``/``)."""
    text = statistic.split(" of class ")[0].strip()
    for pattern, plain in _PARTS:
        m = re.match(pattern, text)
        if m:
            return m.expand(plain)
    def clean(part: str) -> str:
        part = re.sub(r"\s*\([^()]*(\([^()]*\)[^()]*)*\)", "", part)  # (sizes), ((p+1) x (p+1))
        return " ".join(w for w in part.split() if not re.search(r"[=^/\\:]", w))

    # "name: formula" reads as the formula's words if it has any, else as the name
    for part in reversed(text.split(": ", 1)):
        words = clean(part)
        if re.search(r"[A-Za-z]{3}", words):
            return words
    return "noisy statistics"


def _record(rec: Any) -> dict[str, Any]:
    """A noise record as a dict (a card's entry, or a :class:`~dpcore.release.NoiseRecord`)."""
    return rec if isinstance(rec, dict) else rec.as_card()


def _spread(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.3g}" if f"{lo:.3g}" == f"{hi:.3g}" else f"{lo:.3g}–{hi:.3g}"


def noise_parts(noise: list[Any]) -> list[str]:
    """One plain sentence per part of the model (:func:`plain_part`): its noise and how large it is
    against the most one row can change that part (its sensitivity, which the public bounds, the
    data's range, set), e.g. "class counts (10): Gaussian noise of standard deviation 18.1, 12.8
    times the most one row can change them." Unescaped text; ``noise`` as in :func:`_noise_summary`.

    Standard deviations throughout: a Gaussian's sigma, a Laplace scale b times sqrt(2).
    """
    groups: OrderedDict[tuple[str, str], list[dict[str, Any]]] = OrderedDict()
    for rec in map(_record, noise):
        groups.setdefault((plain_part(rec["statistic"]), rec["distribution"]), []).append(rec)
    out = []
    for (part, dist), recs in groups.items():
        count = f" ({len(recs)})" if len(recs) > 1 else ""
        if dist == "randomized-response":
            out.append(f"{part}{count}: randomized response, each replaced with probability "
                       f"{_spread([float(r['scale']) for r in recs])}.")
            continue
        if dist == "exponential-mechanism":
            out.append(f"{part}{count}: chosen by the exponential mechanism among public candidates.")
            continue
        if dist == "none":
            out.append(f"{part}{count}: no noise.")
            continue
        sd = [float(r["scale"]) * (math.sqrt(2) if dist == "laplace" else 1.0) for r in recs]
        times = [v / float(r["sensitivity"]) for v, r in zip(sd, recs, strict=True)
                 if float(r["sensitivity"]) > 0]
        name = "Gaussian" if dist == "gaussian" else "Laplace" if dist == "laplace" else dist
        them = "it" if not count and part.endswith(("basis", "row")) else "them"
        out.append(f"{part}{count}: {name} noise of standard deviation {_spread(sd)}"
                   + (f", {_spread(times)} times the most one row can change {them}" if times else "") + ".")
    return out


def budget_shares(details: dict[str, Any] | None) -> str | None:
    """How a release's epsilon is shared between its parts, in plain words (unescaped), from its
    ``details``: ``epsilon_parts`` as percentages ("histogram 10%, mean 64%, covariance 26%") or the
    features' and labels' epsilons. None when the release records neither."""
    d = details or {}
    parts = d.get("epsilon_parts")
    if isinstance(parts, dict) and parts and sum(float(v) for v in parts.values()) > 0:
        total = sum(float(v) for v in parts.values())
        return "ε is shared between " + ", ".join(f"the {k} {100 * float(v) / total:.0f}%"
                                                  for k, v in parts.items()) + "."
    keys = (("the features", "epsilon_features"), ("the labels", "epsilon_labels"))
    shown = [(what, d.get(k)) for what, k in keys if isinstance(d.get(k), (int, float))]
    if shown:
        return "ε is shared between " + " and ".join(f"{w} (ε = {float(v):.4g})" for w, v in shown) + "."
    return None


def _noise_summary(noise: list[dict[str, Any]]) -> str:
    """One clause per part of the model (:func:`plain_part`): distribution, scale range and count."""
    if not noise:
        return "none"
    groups: OrderedDict[tuple[str, str], list[dict[str, Any]]] = OrderedDict()
    for rec in noise:
        groups.setdefault((plain_part(rec["statistic"]), rec["distribution"]), []).append(rec)
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
                       output: str = "release.csv", has_categories: bool = False,
                       output_space: str | None = None, clip: bool = True,
                       integer_columns: list[str] | None = None) -> str:
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
    has_categories : bool
        An uploaded table with public category lists: ``--categories categories.json``.
    output_space, clip, integer_columns
        The file's output space (``--output-space``; ``None`` = the CLI's default: original where
        possible), ``--no-clip`` and ``--integer-columns``.
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
        if has_categories:
            words += ["--categories", "categories.json"]
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
    if output_space is not None:
        words += ["--output-space", output_space]
    if not clip:
        words.append("--no-clip")
    if integer_columns:
        words += ["--integer-columns", ",".join(integer_columns)]
    return " ".join(shlex.quote(str(w)) for w in words)


def _changed_params(card: dict[str, Any]) -> dict[str, Any]:
    """The card's parameters that differ from the schema default (what reproduces the settings)."""
    cls = get_mechanism(card["mechanism"])
    params = card.get("parameters", {})
    out = {}
    for p in cls.params:
        value = params.get(p.name)
        default = list(p.default) if isinstance(p.default, tuple) else p.default
        if p.name in params and value is not None and value != default:
            out[p.name] = tuple(value) if isinstance(value, list) else value
    return out


def python_snippet(card: dict[str, Any], dataset_name: str, *, bundled: bool, label: str | None = None,
                   classes: list[Any] | None = None, missing: str = "error",
                   has_user_bounds: bool = False, has_categories: bool = False,
                   output_space: str | None = None, clip: bool = True,
                   integer_columns: list[str] | None = None, output: str = "release.csv") -> str:
    """Python code that draws a release with the same settings as ``card`` (the arguments as in
    :func:`equivalent_command`). Never a seed: ``random_state`` is left at ``None`` (OS entropy).
    User strings (file, column and class names) are written as Python literals (``repr``)."""
    name = card["mechanism"]
    params = card.get("parameters", {})
    lines = ["from dpcore.data import load_dataset, load_bounds_file" if has_user_bounds and not bundled
             else "from dpcore.data import load_dataset",
             "from dpcore.decode import PublicSchema, with_output_space",
             "from dpcore.mechanisms import get_mechanism", ""]
    if has_categories and not bundled:
        lines.insert(0, "import json")
    if bundled:
        lines.append(f"ds = load_dataset({dataset_name!r})")
    else:
        args = [repr(dataset_name)]
        if label:
            args.append(f"label={label!r}")
        if params.get("task"):
            args.append(f"task={params['task']!r}")
        if classes:
            args.append(f"classes={list(classes)!r}")
        if has_user_bounds:
            args.append('bounds=load_bounds_file("bounds.json")')
        if has_categories:
            args.append('categories=json.load(open("categories.json"))')
        if missing != "error":
            args.append(f"missing={missing!r}")
        lines.append("ds = load_dataset(" + ", ".join(args) + ")")
    kwargs = ", ".join(f"{k}={v!r}" for k, v in _changed_params(card).items())
    lines.append(f"mechanism = get_mechanism({name!r})({kwargs})  # no random_state: fresh OS entropy")
    lines.append("release = mechanism.release(ds" + (f", n_samples={params['n_samples']}"
                                                     if params.get("n_samples") is not None else "") + ")")
    schema = "PublicSchema.from_dataset(ds" + (f", integer_columns={list(integer_columns)!r}"
                                               if integer_columns else "") + ")"
    lines.append(f"release = with_output_space(release, {schema}, {output_space!r}"
                 + (", clip=False" if not clip else "") + ")")
    lines.append(f"release.save({output!r})  # the CSV, its card (.card.json) and any transform (.npz)")
    return "\n".join(lines)


_REPORT_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;"
    "line-height:1.45;color:#222}table{border-collapse:collapse;margin:.5rem 0 1rem}"
    "td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}pre{background:#f6f6f6;padding:.75rem;overflow-x:auto;white-space:pre-wrap}"
    ".bad{color:#a00;font-weight:bold}.small{color:#555;font-size:.9em}"
)


def _num(value: Any) -> Any:
    """A number as in :func:`_fmt`; anything else (``"inf"`` on a card, None) unchanged."""
    return _fmt(float(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _table(header: list[str], rows: list[list[Any]]) -> str:
    """An HTML table with every cell escaped."""
    head = "".join(f"<th>{html_escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html_escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def fidelity_html(report: Any) -> str:
    """The fidelity report (:class:`dpcore.evaluation.fidelity.FidelityReport`) as an HTML section,
    headed NOT differentially private: it was computed on the private rows and belongs to the
    custodian, never beside the published file."""
    e = html_escape
    parts = ["<h2>Fidelity of the file to your data (NOT differentially private)</h2>",
             f"<p class='bad'><b>{e(report.notice)}</b> These figures were computed on the private rows: "
             "keep them with you, do not publish them with the file.</p>"]
    if summary := report.summary():
        parts.append(f"<p>{e(summary)}</p>")
    if report.model:
        m = report.model
        parts.append(_table([f"{m['model']} ({m['metric']})", "value"],
                            [["trained on the file", _fmt(m["file"])],
                             [m["baseline_name"], _fmt(m["baseline"])],
                             ["trained on your data", _fmt(m["private"])],
                             ["scored on", m["scored_on"]]]))
    if lab := report.label:
        rows = ([[k, _fmt(v), _fmt(lab["file"].get(k, 0.0))] for k, v in lab["private"].items()]
                if isinstance(lab["private"], dict)
                else [[lab["kind"], _fmt(lab["private"]), _fmt(lab["file"])]])
        parts.append(_table(["label", "your data", "the file"], rows))
    parts.append(_table(["column", "kind", "distance", "measure", "your data", "the file"],
                        [[r["column"], r["kind"], _fmt(r["distance"]), r["measure"], r["private"], r["file"]]
                         for r in report.columns.to_dict("records")]))
    return "".join(parts)


def report_html(card: dict[str, Any], *, dataset: str, command: str = "", snippet: str = "",
                fidelity: Any = None) -> str:
    """A self-contained, human-readable HTML report of a release: the guarantee, what is assumed
    public (n, task, classes, every bound with its source), the noise per statistic (and per column
    when the mechanism records it), the units and columns of the file, warnings, and the CLI command
    and Python code that reproduce the settings (never a seed). ``fidelity``: the custodian's
    fidelity report, appended as a section headed NOT differentially private (:func:`fidelity_html`).

    Every value from the card, the dataset name and the code is HTML-escaped (:func:`html_escape`):
    column names, class labels and file names are user strings. No script, no external resource.
    """
    g = card.get("guarantee", {})
    facts = card.get("public_facts", {}) or {}
    details = card.get("details", {}) or {}
    e = html_escape
    not_dp = " (NOT differentially private)" if not g.get("holds", True) else ""
    parts = [f"<h1>Release report: {e(card.get('mechanism', '?'))} on {e(dataset)}{not_dp}</h1>",
             f"<p class='small'>dpcore {e(card.get('dpcore_version', ''))}, created "
             f"{e(card.get('created_utc', ''))} UTC; SHA-256 of the CSV: <code>{e(card.get('sha256', ''))}"
             "</code></p>", "<h2>Guarantee</h2>"]
    if not g.get("holds", True):
        parts.append("<p class='bad'><b>NOT differentially private.</b> The guarantee does NOT hold: a "
                     "fact that shapes the release (bounds, class list or the number of rows) was taken "
                     "from the private data. A ledger books this release as unbounded (epsilon = inf).</p>")
    parts.append(f"<p>{e(card.get('guarantee_text', ''))}</p>")
    parts.append(_table(["epsilon", "delta", "kind", "neighbouring relation"],
                        [[_num(g.get("epsilon")), g.get("delta"), g.get("kind"), g.get("neighbouring")]]))
    if text := _dp_bounds_text(details):
        parts.append(f"<p><b>DP bounds.</b> {e(text)}</p>")
    parts.append("<h2>What is assumed public</h2><p>These facts shape the release and are not "
                 "protected by the noise: they must come from documentation or the data's definition, "
                 "never from the private rows.</p>")
    public_rows = [["number of rows n", facts.get("n", card.get("n_rows")), facts.get("n_source", "")],
                   ["task", facts.get("task", ""), ""]]
    if facts.get("classes") is not None:
        public_rows.append(["class list", ", ".join(map(str, facts["classes"])),
                            facts.get("classes_source", "")])
    if facts.get("label_bounds") is not None:
        public_rows.append(["label bounds", facts["label_bounds"], facts.get("label_bounds_source", "")])
    parts.append(_table(["fact", "value", "source"], public_rows))
    bounds = facts.get("bounds", {}) or {}
    if bounds:
        parts.append(f"<p>Public bounds of the {len(bounds)} columns (values are clipped to them before "
                     "any noise is calibrated):</p>")
        parts.append(_table(["column", "lo", "hi", "source (lo / hi)"],
                            [[c, b.get("lo"), b.get("hi"), f"{b.get('lo_source')} / {b.get('hi_source')}"]
                             for c, b in bounds.items()]))
    parts.append("<h2>Noise per statistic</h2>")
    parts.append(_table(["statistic", "distribution", "sensitivity (norm)", "scale", "formula", "source"],
                        [[r.get("statistic"), r.get("distribution"),
                          f"{_num(r.get('sensitivity'))} ({r.get('norm', '')})", _num(r.get("scale")),
                          r.get("formula", ""), r.get("source", "")] for r in card.get("noise", [])]))
    per_column = details.get("noise_per_column")
    if isinstance(per_column, dict) and per_column:
        parts.append("<p>Noise standard deviation added to each column, in the column's units:</p>")
        parts.append(_table(["column", "standard deviation"],
                            [[c, _fmt(float(v))] for c, v in per_column.items()]))
    parts.append("<h2>The file</h2>")
    units = ("your original columns, categories and units" if card.get("output_space") == "original"
             else SPACE_TEXT.get(card.get("space", ""), card.get("space", "")))
    parts.append(f"<p>{e(card.get('n_released', ''))} rows of {e(units)}.</p>")
    if card.get("output_note"):
        parts.append(f"<p>{e(card['output_note'])}</p>")
    parts.append("<p>Columns: " + e(", ".join(map(str, card.get("columns", [])))) + "</p>")
    escaping = card.get("csv_escaping", {}) or {}
    if escaping.get("renamed_columns") or escaping.get("escaped_label_cells"):
        parts.append(f"<p class='small'>{e(escaping.get('rule', ''))}</p>")
    if chosen := _automatic_parts(card.get("parameters", {}), details):
        parts.append("<h2>Settings chosen automatically</h2><p>Left empty (automatic), set from public "
                     f"facts only: <b>{e(chosen[0])}</b>. {e(chosen[1])}.</p>")
    if saved := _savings_text(details):
        parts.append(f"<h2>Gaussian against Laplace noise</h2><p>{e(saved)}.</p>")
    if card.get("warnings"):
        parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{e(w)}</li>" for w in card["warnings"])
                     + "</ul>")
    if command or snippet:
        parts.append("<h2>Reproduce these settings</h2><p>Each run draws fresh noise from OS entropy: "
                     "there is no seed, and a second run is a second release (it spends budget "
                     "again).</p>")
        if command:
            parts.append(f"<p>Command line:</p><pre>{e(command)}</pre>")
        if snippet:
            parts.append(f"<p>Python:</p><pre>{e(snippet)}</pre>")
    if fidelity is not None:
        parts.append(fidelity_html(fidelity))
    title = e(f"Release report: {card.get('mechanism', '')} on {dataset}{not_dp}")
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width'><title>{title}</title>"
            f"<style>{_REPORT_CSS}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n")
