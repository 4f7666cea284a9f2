"""Checks of the guided tour's sentences against the data its figures plot (tests/test_tour.py,
and tests/test_browser.py in a real browser).

Each check reads the numbers and words back out of a step's sentences and compares them with the
traces of the step's figure, found by their names: the x and y values a person sees plotted. It
never calls the code that wrote the sentences; a sentence that says "rises" about a falling curve,
or a number that is not the one plotted, fails.
"""

from __future__ import annotations

import base64
import math
import re
from typing import Any

import numpy as np

from dpcore.attacks import dp_tradeoff_curve  # what (epsilon, delta)-DP allows: the definition

__all__ = [
    "check_step",
    "figure_traces",
]

NUM = r"(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)"  # a number, not the full stop after it
D = r"(\d+(?:\.\d+)?)"  # a decimal number


def _array(values: Any) -> np.ndarray:
    """Plotly trace values as an array: a list, a NumPy array, or the browser's base64 ``{dtype,
    bdata}`` (Plotly's typed-array JSON)."""
    if values is None:
        return np.array([])
    if isinstance(values, dict) and "bdata" in values:
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=np.dtype(values["dtype"])).astype(float)
    arr = np.asarray(values)
    return arr.astype(float) if arr.dtype.kind in "iufb" else arr


def figure_traces(traces: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{trace name: {"x", "y", "color"}}`` from Plotly trace dicts (``fig.to_plotly_json()["data"]``
    in Python, ``gd.data`` in the browser)."""
    out = {}
    for t in traces:
        marker = t.get("marker") or {}
        colour = marker.get("color")
        out[str(t.get("name"))] = {"x": _array(t.get("x")), "y": _array(t.get("y")),
                                   "color": list(colour) if isinstance(colour, (list, tuple, np.ndarray))
                                   else colour}
    return out


def _find(pattern: str, text: str) -> re.Match:
    m = re.search(pattern, text)
    assert m, f"no sentence matches {pattern!r} in: {text}"
    return m


def _trace(traces: dict[str, dict[str, Any]], start: str) -> dict[str, Any]:
    """The trace named ``start``, or the one trace whose name starts with it."""
    if start in traces:
        return traces[start]
    found = [v for k, v in traces.items() if k.startswith(start)]
    assert len(found) == 1, f"one trace named {start!r}... expected, got {sorted(traces)}"
    return found[0]


def _at(tr: dict[str, Any], x: float, *, log: bool = False) -> float:
    xs, ys = tr["x"], tr["y"]
    order = np.argsort(xs)
    xs, ys = xs[order], ys[order]
    assert xs[0] - 1e-12 <= x <= xs[-1] + 1e-12, f"{x} is outside the plotted range [{xs[0]}, {xs[-1]}]"
    if log:
        return float(np.exp(np.interp(np.log(x), np.log(xs), np.log(ys))))
    return float(np.interp(x, xs, ys))


def _same(stated: str, value: float, *, sig: int | None = None, decimals: int | None = None) -> None:
    """``stated`` is ``value`` written with ``sig`` significant digits or ``decimals`` decimals."""
    v = float(stated)
    if decimals is not None:
        assert abs(v - value) <= 0.5 * 10 ** -decimals + 1e-9, f"says {stated}, the plot shows {value}"
    else:
        assert math.isclose(v, float(f"{value:.{sig}g}"), rel_tol=1e-9, abs_tol=1e-12) \
            or abs(v - value) <= 0.5 * 10 ** (math.floor(math.log10(abs(value))) - sig + 1) + 1e-12, \
            f"says {stated}, the plot shows {value}"


def _percent(stated: str, share: float) -> None:
    decimals = len(stated.split(".")[1]) if "." in stated else 0
    _same(stated, 100 * share, decimals=decimals)


def _odds(text: str, tr: dict[str, dict[str, Any]]) -> None:
    m = _find(rf"At ε = {D}, an attacker who thought .* coin flip \(50%\) can end up at most "
              rf"{D}% sure", text)
    eps, curve = float(m[1]), _trace(tr, f"ε = {m[1]}")
    _percent(m[2], _at(curve, 0.5))
    _percent(_find(rf"1-in-100 chance can reach at most {D}%", text)[1], _at(curve, 0.01))
    y = _at(curve, 0.5)
    factor = _find(rf"odds grow by a factor of at most e\^ε = {NUM}", text)[1]
    _same(factor, y / (1 - y), sig=3)
    assert math.isclose(y / (1 - y), math.exp(eps), rel_tol=1e-6)  # the curve is the stated ε's


def _noise(text: str, tr: dict[str, dict[str, Any]]) -> None:
    m = _find(rf"At ε = {D}, each pixel's average gets Laplace noise of scale {NUM}, {D}% of a "
              rf"pixel's range \({D} to {D}\)", text)
    eps, curve = float(m[1]), _trace(tr, "noise scale")
    _same(m[2], _at(curve, eps, log=True), sig=3)
    point = _trace(tr, "this ε")
    assert math.isclose(point["x"][0], eps) and math.isclose(point["y"][0], _at(curve, eps, log=True),
                                                              rel_tol=1e-6)
    span = float(m[5]) - float(m[4])
    assert math.isclose(_trace(tr, "a pixel's range")["y"][0], span)
    _percent(m[3], float(m[2]) / span)
    m2 = _find(rf"At ε = {D} it would be (a tenth of|ten times) that: {NUM}", text)
    other = _at(curve, float(m2[1]), log=True)
    _same(m2[3], other, sig=3)
    ratio = other / _at(curve, eps, log=True)
    assert math.isclose(ratio, 0.1 if m2[2] == "a tenth of" else 10.0, rel_tol=0.02), ratio


def _tradeoff(text: str, tr: dict[str, dict[str, Any]]) -> None:
    m = _find(rf"At ε = {D}, a classifier trained on the release is right (\d+)% .* trained on the real "
              r"rows it is right (\d+)%, and guessing gives (\d+)%", text)
    curve = _trace(tr, "trained on the release")
    i = int(np.argmin(np.abs(curve["x"] - float(m[1]))))
    assert math.isclose(curve["x"][i], float(m[1]))
    _percent(m[2], curve["y"][i])
    _percent(m[3], _trace(tr, "trained on the real rows")["y"][0])
    _percent(m[4], _trace(tr, "guessing")["y"][0])
    m = _find(rf"Accuracy (rises|falls) (steadily|unevenly) from (\d+)% at ε = {D} to (\d+)% at ε = "
              rf"{D}", text)
    order = np.argsort(curve["x"])
    x, y = curve["x"][order], curve["y"][order]
    assert (m[1] == "rises") == (y[-1] > y[0]), (m[1], y)
    steps = np.diff(y) if m[1] == "rises" else -np.diff(y)
    assert (m[2] == "steadily") == bool(np.all(steps >= 0)), (m[2], y)
    _percent(m[3], y[0])
    _percent(m[5], y[-1])
    assert math.isclose(float(m[4]), x[0]) and math.isclose(float(m[6]), x[-1])


def _peak(curve: dict[str, Any]) -> tuple[float, float]:
    """Centre and Laplace scale of a plotted Laplace density: where it peaks, and 1 / (2 peak)."""
    i = int(np.argmax(curve["y"]))
    return float(curve["x"][i]), 1.0 / (2.0 * float(curve["y"][i]))


def _bounds(text: str, tr: dict[str, dict[str, Any]]) -> None:
    cases = ("without", "with ")
    (_, data_without), (_, data_with) = (_peak(_trace(tr, f"data bounds, {c}")) for c in cases)
    (c0, pub_without), (c1, pub_with) = (_peak(_trace(tr, f"public bounds, {c}")) for c in cases)
    inside = re.search(rf"is inside the range of the others .* the noise scale stays {NUM}", text)
    if inside:
        assert math.isclose(data_without, data_with, rel_tol=1e-9)
        _same(inside[1], data_without, sig=3)
    else:
        m = _find(rf"moves them from {D}–{D} to {D}–{D}, so the noise scale printed on "
                  rf"the release goes from {NUM} to {NUM}", text)
        _same(m[5], data_without, sig=3)
        _same(m[6], data_with, sig=3)
        assert not math.isclose(data_without, data_with)
        widths = (float(m[2]) - float(m[1]), float(m[4]) - float(m[3]))
        assert math.isclose(data_with / data_without, widths[1] / widths[0], rel_tol=1e-9)  # scale ~ width
    m = _find(rf"With the public bounds {D} to {D}, the scale is {NUM} with or without them; "
              rf"only the average moves, by {NUM} years, (less|more) than", text)
    assert math.isclose(pub_without, pub_with, rel_tol=1e-9)
    _same(m[3], pub_without, sig=3)
    _same(m[4], abs(c1 - c0), sig=2)
    assert (m[5] == "less") == (abs(c1 - c0) < pub_without)


def _budget(text: str, tr: dict[str, dict[str, Any]]) -> None:
    spent, refused = _trace(tr, "spent"), _trace(tr, "refused")
    total = float(_trace(tr, "total spent")["y"][-1])
    budget = float(_trace(tr, "budget")["y"][0])
    each = set(spent["y"].tolist()) | set(refused["y"].tolist())
    assert len(each) == 1
    m = re.search(rf"(\d+) release\(s\) at ε = {NUM} each: the ledger adds them up to ε = {NUM} \(basic "
                  rf"composition\), within the budget of ε = {NUM}", text)
    if m:
        assert int(m[1]) == spent["x"].size and refused["x"].size == 0
        _same(m[3], total, sig=6)
        _same(m[4], budget, sig=6)
        assert total <= budget
    else:
        m = _find(rf"The first (\d+) releases at ε = {NUM} each add up to ε = {NUM}, (the whole budget|{NUM} "
                  r"short of the budget, too little for another); the ledger refused the other (\d+)", text)
        assert int(m[1]) == spent["x"].size and int(m[6]) == refused["x"].size > 0
        _same(m[3], total, sig=6)
        left = budget - total
        assert (m[4] == "the whole budget") == (abs(left) < 1e-9)
        if m[5]:
            _same(m[5], left, sig=6)
            assert left < float(m[2])  # another release would not fit
    assert math.isclose(float(m[2]), each.pop())
    assert math.isclose(total, float(m[2]) * spent["x"].size)  # basic composition: the sum


def _attack(text: str, tr: dict[str, dict[str, Any]]) -> None:
    m = _find(rf"At ε = {D}, the attacker's best guess is right {D}% of the time .* AUC is {D}",
              text)
    roc = _trace(tr, "this attack")
    fpr, tpr = roc["x"], roc["y"]
    _percent(m[2], 0.5 + float(np.max(tpr - fpr)) / 2)
    _same(m[3], float(np.trapezoid(tpr, fpr)), decimals=2)
    claimed = _trace(tr, "most any attack can reach")
    delta = float(claimed["y"][0])  # the curve starts at (0, delta)
    assert np.allclose(claimed["y"], dp_tradeoff_curve(claimed["x"], float(m[1]), delta), atol=1e-9), \
        "the green curve is not the claimed ε's"
    empirical = _trace(tr, "curve of the empirical")
    proved = re.search(rf"It proves ε ≥ {D} with 95% confidence: (within|MORE than) the claimed ε = "
                       rf"{D}", text)
    lb = float(proved[1]) if proved else 0.0
    if not proved:
        _find(r"It proves nothing with 95% confidence \(ε ≥ 0\)", text)
    x, y = empirical["x"], empirical["y"]  # the stated lower limit, to its 2 decimals
    assert np.all(y >= dp_tradeoff_curve(x, max(lb - 0.005, 0.0), delta) - 1e-9)
    assert np.all(y <= dp_tradeoff_curve(x, lb + 0.005, delta) + 1e-9)
    if proved:
        assert (proved[2] == "within") == (lb <= float(proved[3]))


def _choose(text: str, tr: dict[str, dict[str, Any]]) -> None:
    bars = _trace(tr, "accuracy at this ε")
    acc = dict(zip([str(n) for n in bars["y"]], bars["x"].astype(float), strict=True))
    m = _find(rf"At ε = {D} on the digits, the most accurate release here is ([\w-]+)'s \((\d+)%\); "
              r"guessing gives (\d+)%", text)
    assert m[2] == max(acc, key=acc.get), (m[2], acc)
    _percent(m[3], acc[m[2]])
    _percent(m[4], _trace(tr, "guessing")["x"][0])
    colours = dict(zip(acc, bars["color"], strict=True))
    best = re.search(r"The app recommends ([\w-]+) from public facts only, and here it is the best", text)
    rec = best[1] if best else _find(r"The app recommends ([\w-]+) from public facts only", text)[1]
    assert all(colours[n] != colours[rec] for n in acc if n != rec)  # the recommended bar stands out
    if best:
        assert rec == m[2]
    else:
        m2 = _find(r"here it reaches (\d+)%, (\d+) points below ([\w-]+)", text)
        _percent(m2[1], acc[rec])
        assert m2[3] == m[2] and int(m2[2]) == round(100 * (acc[m[2]] - acc[rec]))


CHECKS = {"odds": _odds, "noise": _noise, "tradeoff": _tradeoff, "bounds": _bounds, "budget": _budget,
          "attack": _attack, "choose": _choose}


def check_step(key: str, text: str, traces: list[dict[str, Any]]) -> None:
    """Assert that step ``key``'s sentences (``text``) say what its figure (``traces``) plots."""
    CHECKS[key](" ".join(text.split()), figure_traces(traces))
