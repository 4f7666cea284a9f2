"""Bounds files for wide tables: rules (glob patterns) and a template with empty values.

A bounds file (``--bounds FILE``, the app's "Import a bounds file") maps columns to public
``[lo, hi]``. For a table of 85 columns named ``f0`` ... ``f84``, one **rule** says it::

    {"f*": [0, 640], "age": [17, 90], "income": null}

- a key with ``*``, ``?`` or ``[...]`` is a pattern (:func:`fnmatch.fnmatchcase`: case-sensitive,
  ``*`` matches any text, ``=`` included, so ``"workclass=*"`` names one-hot columns);
- a column named exactly takes its own entry, whatever pattern also matches it;
- a column matched by two patterns with different bounds is refused (naming both), as is a
  pattern that matches no column and an exact name the table does not have (a typo must not leave
  a column on data bounds);
- ``null`` (JSON) or empty cells (CSV ``income,,``) mean "no public bound here": the column is
  treated as if it were not listed (refused by ``release`` unless ``--dp-bounds`` estimates it or
  ``--data-bounds`` is given).

:func:`template` writes a bounds file of a table's columns with empty values, to fill from
documentation (``dpcore bounds-template FILE -o bounds.json``): never the data's minimum and
maximum, which are not public bounds.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
from typing import Any

from dpcore.exceptions import DataValidationError

__all__ = ["PATTERN_CHARS", "is_pattern", "resolve_bound_rules", "template"]

PATTERN_CHARS = "*?["


def is_pattern(key: str) -> bool:
    """True if the bounds-file key ``key`` is a glob pattern rather than a column name."""
    return any(ch in key for ch in PATTERN_CHARS)


def resolve_bound_rules(rules: dict[str, Any], columns: list[str], *, what: str = "bounds"
                        ) -> dict[str, Any]:
    """The bounds of each column of ``columns`` that ``rules`` gives (module docstring).

    Parameters
    ----------
    rules : dict {column name or pattern: (lo, hi) or None}
    columns : list of str
        The table's columns (features; a name that is itself a column is never a pattern).
    what : str
        For messages (``"bounds"``, ``"candidate range"``).

    Returns
    -------
    dict {column: (lo, hi)}
        In ``columns`` order; columns whose entry is ``None`` (or that no rule covers) are absent.

    Raises
    ------
    DataValidationError
        An exact name the table does not have, a pattern matching no column, a column matched by
        two patterns with different values.
    """
    names = set(columns)
    exact = {k: v for k, v in rules.items() if k in names or not is_pattern(k)}
    unknown = sorted(k for k in exact if k not in names)
    if unknown:
        raise DataValidationError(
            f"{what} given for unknown column(s) {unknown[:10]}; the columns are {columns[:10]}"
            f"{' ...' if len(columns) > 10 else ''} (a pattern such as \"f*\" matches many)")
    patterns = [(k, v) for k, v in rules.items() if k not in exact]
    out: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for pattern, value in patterns:
        matched = [c for c in columns if fnmatch.fnmatchcase(c, pattern)]
        if not matched:
            raise DataValidationError(f"the {what} pattern {pattern!r} matches no column; the columns are "
                                      f"{columns[:10]}{' ...' if len(columns) > 10 else ''}")
        for c in matched:
            if c in exact:
                continue
            if c in origin and _key(out[c]) != _key(value):
                raise DataValidationError(
                    f"column {c!r} is matched by the {what} patterns {origin[c]!r} and {pattern!r} with "
                    f"different values ({out[c]} and {value}): give it by name, or make the patterns "
                    "disjoint")
            out.setdefault(c, value)
            origin.setdefault(c, pattern)
    out.update(exact)
    return {c: out[c] for c in columns if out.get(c) is not None}


def _key(value: Any) -> Any:
    return None if value is None else tuple(float(v) for v in value)


def template(columns: list[str], fmt: str = "json") -> str:
    """A bounds file listing ``columns`` with empty values (JSON ``null``, CSV empty cells).

    Raises
    ------
    ValueError
        ``fmt`` is not ``"json"`` or ``"csv"``.
    """
    if fmt == "json":
        return json.dumps({c: None for c in columns}, indent=1) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["column", "lo", "hi"])
        writer.writerows([c, "", ""] for c in columns)
        return buf.getvalue()
    raise ValueError(f"a bounds template is 'json' or 'csv', not {fmt!r}")
