"""The guided tour's steps: what each one shows, its control, its data and its sentences.

No Streamlit here: ``pages/tour.py`` renders a step (control, figure, sentences) and
``app/figures/tour.py`` draws it. Every sentence that states a result is built by a ``*_claims``
function from the very data the step plots (``step_data``), so it cannot disagree with the figure;
``tests/tour_checks.py`` reads the numbers back out of the sentences and checks them against the
figure's traces, in Python and in a real browser.

Every step runs on a bundled (public) table, so its data are the same for every visitor and are
kept for the life of the server process: the cheap ones in an LRU cache, the three that take
seconds (a utility sweep, a membership attack, a comparison of mechanisms) on one background
thread started when a visitor first moves past the first step (:func:`start_precomputing`).
"""

from __future__ import annotations

import math
import threading
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from dpcore import teaching
from dpcore.data import Dataset, load_dataset
from dpcore.exceptions import PrivacyLeakWarning

__all__ = [
    "ATTACK_EPSILONS",
    "ATTACK_MECHANISM",
    "CHOICE_EPSILONS",
    "COMPOSITION",
    "STEPS",
    "Step",
    "TRADEOFF_EPSILONS",
    "heavy_ready",
    "start_precomputing",
    "step_claims",
    "step_data",
]


@dataclass(frozen=True)
class Step:
    """One step of the tour: one idea, one control."""

    key: str
    title: str
    #: the idea in plain words (shown first)
    idea: str
    #: the control's label, its values and where it starts
    control: str
    options: tuple[Any, ...]
    default: Any
    #: "How is this computed?": the formula and its source (markdown)
    how: str
    #: how the control's values are written
    unit: str = "ε = {:g}"


TRADEOFF_EPSILONS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
ATTACK_EPSILONS = (0.1, 1.0, 10.0)
ATTACK_MECHANISM = "local-gaussian"
ATTACK_TRIALS = 200
CHOICE_EPSILONS = (1.0, 2.0, 5.0)
#: (epsilon of each release, budget) of the composition step
COMPOSITION = (0.5, 2.0)
#: the bounds step: the column, its public bounds and the epsilon of the released mean
BOUNDS_COLUMN, BOUNDS_PUBLIC, BOUNDS_EPSILON = "age", (0.0, 100.0), 1.0
TRIALS = 3

STEPS: tuple[Step, ...] = (
    Step("odds", "What ε means",
         "Differential privacy promises that one release changes what anyone can conclude about "
         "you by a bounded factor, whatever they knew before: the odds of any conclusion grow by at "
         "most e^ε. Move ε and watch how sure an attacker can become.",
         "ε (epsilon)", (0.1, 0.5, 1.0, 2.0, 5.0, 10.0), 1.0,
         "For any fact about one person with prior probability p, an (ε, 0)-DP release bounds the "
         "posterior by e^ε p / (e^ε p + 1 − p): the odds p/(1 − p) grow by at most e^ε "
         "(Kasiviswanathan & Smith 2014, *On the 'semantics' of differential privacy*). With δ > 0 "
         "the bound holds up to an additive δ."),
    Step("noise", "Noise and ε",
         "Privacy comes from noise, and ε sets how much: half the ε, twice the noise. Here the "
         "average of the 1,797 handwritten digits (an 8×8 picture) is released with noise; move ε "
         "and watch the picture.",
         "ε (epsilon)", (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0), 1.0,
         "The Laplace mechanism (Dwork & Roth 2014, Thm 3.6): each pixel's average gets Laplace noise "
         "of scale b = S₁/ε. S₁ is what one person can change: replacing one of the n = 1,797 rows moves "
         "a pixel's average by at most 16/n (pixels run from 0 to 16), so S₁ = 64 · 16 / n over the 64 "
         "pixels. The noise is drawn by the exact sampler every release uses (on a public grid, which "
         "makes the scale a hair above S₁/ε), with a fixed seed: a teaching picture, not a release."),
    Step("tradeoff", "The trade-off on a real model",
         "More ε, more useful data, less privacy. Here the app's default mechanism releases the "
         "digits at each ε, a classifier is trained on each release, and it is tested on real "
         "digits it never saw. Move ε along the curve.",
         "ε (epsilon)", TRADEOFF_EPSILONS, 1.0,
         "The app's default for this table (PCA-Gauss with its automatic settings, Gaussian noise, "
         "automatic δ) releases the 1,347 training rows at each ε, "
         f"{TRIALS} times; an SVM is trained on each release and tested on the 450 real held-out rows "
         "(`dpcore.evaluation.utility_sweep`). The band is the 95% interval over the releases; "
         "the dashed line is the same SVM trained on the real training rows."),
    Step("bounds", "Why bounds must be public",
         "The noise is sized from the range the values can take (the bounds). If that range is read "
         "off the data, one unusual person changes it, and the size of the noise, printed on every "
         "release, gives them away. Here: the average age of 442 diabetes patients; change one "
         "patient's age.",
         "age of the patient who replaces the first one", tuple(range(20, 121, 10)), 90,
         "The average of n ages clipped to [lo, hi] moves by at most (hi − lo)/n when one patient is "
         "replaced, so the Laplace noise has scale (hi − lo)/(n ε), here at ε = 1. Bounds from the "
         "data are the smallest and largest age in the table; public bounds are 0 to 100 "
         "(the dataset's documentation). The curves are the released average's distributions.",
         unit="{:g} years"),
    Step("budget", "Composition and the budget",
         "Every release spends some of the budget: ε's add up. A ledger keeps the sum and refuses a "
         f"release that would go past the budget. Each release here costs ε = {COMPOSITION[0]:g} and "
         f"the budget is ε = {COMPOSITION[1]:g}; ask for more releases.",
         "releases asked for", tuple(range(1, 9)), 3,
         "Basic composition (Dwork & Roth 2014, Thm 3.16): k releases with ε₁ … ε_k are together "
         "(ε₁ + … + ε_k)-DP. The totals and refusals are those of `dpcore.ledger.Ledger`, the ledger "
         "the Release page and the command line keep.",
         unit="{:g}"),
    Step("attack", "An attack",
         "The guarantee is a promise about every possible attacker. Here is one: it sees a release and "
         "guesses whether a target person was in the table. Compare how often it wins at ε = 0.1, 1 "
         "and 10.",
         "ε (epsilon)", ATTACK_EPSILONS, 1.0,
         f"A membership-inference game (`dpcore.attacks.membership_game`) against {ATTACK_MECHANISM} "
         f"(Gaussian noise on each row) on the digits training split: {ATTACK_TRIALS} releases with and "
         f"{ATTACK_TRIALS} without the target (a corner of the public box), an attacker scoring each "
         "release. The empirical ε is a 95% lower limit from the attacker's error rates (Clopper–"
         "Pearson; Jagielski et al. 2020): what this attack proves. The green curve is the best any "
         "attacker can do at the claimed ε."),
    Step("choose", "Choosing a mechanism",
         "Mechanisms differ a lot on the same table and ε. The app recommends one from public facts "
         "(the task, the number of rows and columns), never from the data. Compare them here, on the "
         "digits.",
         "ε (epsilon)", CHOICE_EPSILONS, 1.0,
         "Each mechanism that is not a paper's baseline and whose releases can be tested releases the "
         f"1,347 training rows with its automatic settings, {TRIALS - 1} times per ε; an SVM trained on "
         "each is tested on the 450 real held-out rows (`dpcore.evaluation.utility_sweep`). "
         "The recommendation is `dpcore.calibration.recommended_mechanism` (public facts only). "
         "JL-Laplace keeps its projection secret, so a model trained on it cannot be tested."),
)
_BY_KEY = {s.key: s for s in STEPS}


# ------------------------------------------------------------------------------------ data
@lru_cache(maxsize=4)
def _dataset(name: str) -> Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return load_dataset(name)


@lru_cache(maxsize=2)
def _digits_split() -> tuple[Dataset, Dataset]:
    return _dataset("digits").split(0.25, random_state=0)


def _svm_accuracy(factory: Any, epsilons: tuple[float, ...], trials: int) -> dict[str, np.ndarray | float]:
    """Accuracy on the real held-out digits of the papers' SVM (the sweep's ``svm_accuracy``, RBF,
    after standardisation) trained on ``trials`` releases of ``factory(epsilon)`` per epsilon: mean
    and 95% interval (:func:`dpcore.evaluation.metric_interval`), the same SVM trained on the real
    training rows, and the majority-class rate. Seeded previews (never releases). The sweep's
    logistic regression, most of its time here, is left out."""
    from dpcore.evaluation import (
        fit_on_real,
        majority_rate,
        metric_interval,
        sweep_models,
        train_on_release,
    )

    train, test = _digits_split()
    rows = 5000  # EvalSettings().max_train: every training row here

    def svm() -> Any:
        return sweep_models("classification", 0)["svm_accuracy"]

    seeds = np.random.SeedSequence(0).generate_state(len(epsilons) * trials)
    mean, lo, hi = [], [], []
    for i, eps in enumerate(epsilons):
        scores = []
        for t in range(trials):
            mech = factory(eps)
            mech.set_params(random_state=int(seeds[i * trials + t]))
            rel = mech.release(train)
            scores.append(train_on_release(rel, svm(), max_rows=rows, random_state=0).score(test.X, test.y))
        m, low, high = metric_interval(scores, n_test=test.n_samples)
        mean.append(m)
        lo.append(low)
        hi.append(high)
    baseline = fit_on_real(train.X, train.y, bounds=train.bounds, model=svm(), max_rows=rows,
                           random_state=0).score(test.X, test.y)
    return {"epsilon": np.asarray(epsilons, dtype=float), "accuracy": np.asarray(mean), "lo": np.asarray(lo),
            "hi": np.asarray(hi), "baseline": float(baseline), "chance": float(majority_rate(test.y))}


def _recommended() -> dict[str, Any]:
    from dpcore.calibration import recommended_mechanism

    ds = _dataset("digits")
    return recommended_mechanism(ds.task, ds.n_samples, ds.n_features, epsilon=1.0,
                                 image_shape=ds.image_shape, n_classes=len(ds.classes))


def _tradeoff() -> dict[str, Any]:
    from dpcore.mechanisms import get_mechanism

    rec = _recommended()["mechanism"]
    mech = get_mechanism(rec)  # its automatic settings: the app's untouched default
    return {"mechanism": rec, "title": mech.title,
            **_svm_accuracy(lambda e: mech(epsilon=e), TRADEOFF_EPSILONS, TRIALS)}


def _attacks() -> dict[float, Any]:
    from dpcore import attacks

    train, _ = _digits_split()
    return {e: attacks.membership_game(ATTACK_MECHANISM, {"epsilon": e}, train, target="upper",
                                       trials=ATTACK_TRIALS, random_state=0) for e in ATTACK_EPSILONS}


def _choices() -> dict[str, Any]:
    from dpcore.evaluation import evaluation_problem
    from dpcore.mechanisms import MECHANISMS, available_mechanisms

    task = _dataset("digits").task
    names = [n for n in available_mechanisms(task) if not MECHANISMS[n].baseline
             and evaluation_problem(MECHANISMS[n], task) is None]
    rec = _recommended()
    acc, chance = {}, 0.0
    for name in names:
        cls = MECHANISMS[name]
        res = _svm_accuracy(lambda e, cls=cls: cls(epsilon=e), CHOICE_EPSILONS, TRIALS - 1)
        acc[name], chance = res["accuracy"], res["chance"]
    return {"names": names, "accuracy": acc, "epsilon": np.asarray(CHOICE_EPSILONS), "chance": chance,
            "recommended": rec["mechanism"], "reason": rec["reason"],
            "titles": {n: MECHANISMS[n].title for n in names}}


#: the steps whose data take seconds: computed once per server process, on one background thread
_HEAVY = {"tradeoff": _tradeoff, "attack": _attacks, "choose": _choices}
_executor: ThreadPoolExecutor | None = None
_futures: dict[str, Future] = {}
_lock = threading.Lock()


def _future(key: str) -> Future:
    global _executor
    with _lock:
        done = _futures.get(key)
        if done is not None and done.done() and done.exception() is not None:
            del _futures[key]  # failed: try again
        if key not in _futures:
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dp-explorer-tour")
            _futures[key] = _executor.submit(_HEAVY[key])
        return _futures[key]


def start_precomputing() -> None:
    """Queue the slow steps' data (in the tour's order) on the background thread, once per process."""
    for key in _HEAVY:
        _future(key)


def heavy_ready(key: str) -> bool:
    """True when step ``key``'s data are at hand (a cheap step, or a slow one already computed)."""
    return key not in _HEAVY or (key in _futures and _futures[key].done())


@lru_cache(maxsize=64)
def _cheap(key: str, value: Any) -> dict[str, Any]:
    if key == "odds":
        prior = np.linspace(0.0, 1.0, 201)
        return {"prior": prior, "posterior": teaching.posterior_bound(prior, float(value)),
                "epsilon": float(value)}
    if key == "noise":
        ds = _dataset("digits")
        grid = np.unique(np.concatenate([np.geomspace(0.01, 100.0, 41), _BY_KEY["noise"].options]))
        return {**teaching.noisy_average(ds.X, ds.bounds, float(value), random_state=0),
                "epsilon": float(value), "grid": grid,
                "scales": teaching.average_noise_scale(ds.bounds, ds.n_samples, grid),
                "bounds": ds.bounds, "image_shape": ds.image_shape}
    if key == "bounds":
        ds = _dataset("diabetes")
        column = ds.X[:, ds.feature_names.index(BOUNDS_COLUMN)]
        return {"leak": teaching.bounds_leak(column, BOUNDS_PUBLIC, float(value), BOUNDS_EPSILON),
                "new": float(value), "n": int(column.size), "replaced": float(column[0]),
                "epsilon": BOUNDS_EPSILON, "public": BOUNDS_PUBLIC}
    if key == "budget":
        eps, budget = COMPOSITION
        return {**teaching.composition(int(value), eps, budget), "epsilon": eps, "budget": budget}
    raise KeyError(key)


def step_data(key: str, value: Any) -> dict[str, Any]:
    """The data step ``key`` shows at control value ``value`` (waits for a slow step's computation)."""
    if key in _HEAVY:
        return {"value": value, "all": _future(key).result()}
    return _cheap(key, value)


# ------------------------------------------------------------------------------- sentences
def _pct(x: float) -> str:
    """A share as a percentage, to the nearest point; near 100% with the decimals that keep it below
    100 (99.995%, not 100%)."""
    if x < 0.995 or x >= 1.0:
        return f"{100 * x:.0f}%"
    return f"{100 * x:.{math.ceil(-math.log10(1 - x)) - 2}f}%"


def _odds_claims(d: dict[str, Any]) -> list[str]:
    e = d["epsilon"]
    p50 = float(teaching.posterior_bound(np.array([0.5]), e)[0])
    p01 = float(teaching.posterior_bound(np.array([0.01]), e)[0])
    return [f"At ε = {e:g}, an attacker who thought a fact about you was a coin flip (50%) can end up "
            f"at most {_pct(p50)} sure of it.",
            f"One who thought it was a 1-in-100 chance can reach at most {100 * p01:.1f}%.",
            f"Whatever they knew before, their odds grow by a factor of at most e^ε = {math.exp(e):.3g}."]


def _noise_claims(d: dict[str, Any]) -> list[str]:
    e, b = d["epsilon"], d["scale"]
    lo, hi = float(d["bounds"][:, 0].min()), float(d["bounds"][:, 1].max())
    out = [f"At ε = {e:g}, each pixel's average gets Laplace noise of scale {b:.3g}, "
           f"{100 * b / (hi - lo):.1f}% of a pixel's range ({lo:g} to {hi:g})."]
    other = e * 10 if e * 10 <= float(d["grid"].max()) else e / 10
    b_other = float(np.interp(np.log(other), np.log(d["grid"]), d["scales"]))
    word = "a tenth of" if other > e else "ten times"
    out.append(f"At ε = {other:g} it would be {word} that: {b_other:.3g}.")
    return out


def _tradeoff_claims(d: dict[str, Any]) -> list[str]:
    a = d["all"]
    x, y = a["epsilon"], a["accuracy"]
    i = int(np.argmin(np.abs(x - float(d["value"]))))
    steps = np.diff(y)
    way = "rises" if y[-1] > y[0] else "falls"
    steady = np.all(steps >= 0) if way == "rises" else np.all(steps <= 0)
    return [f"At ε = {x[i]:g}, a classifier trained on the release is right {_pct(y[i])} of the time on "
            f"real digits it never saw; trained on the real rows it is right {_pct(a['baseline'])}, and "
            f"guessing gives {_pct(a['chance'])}.",
            f"Accuracy {way} {'steadily' if steady else 'unevenly'} from {_pct(y[0])} at ε = {x[0]:g} to "
            f"{_pct(y[-1])} at ε = {x[-1]:g}."]


def _bounds_claims(d: dict[str, Any]) -> list[str]:
    leak, new = d["leak"], d["new"]
    dw, dn = leak["data"]["without"], leak["data"]["with"]
    pw, pn = leak["public"]["without"], leak["public"]["with"]
    if (dw["lo"], dw["hi"]) == (dn["lo"], dn["hi"]):
        first = (f"Age {new:g} is inside the range of the others ({dw['lo']:g} to {dw['hi']:g}): with "
                 f"bounds read from the data the noise scale stays {dw['scale']:.3g}. Try an age above "
                 f"{dw['hi']:g}.")
    else:
        first = (f"With bounds read from the data, this one patient moves them from {dw['lo']:g}–"
                 f"{dw['hi']:g} to {dn['lo']:g}–{dn['hi']:g}, so the noise scale printed on the release goes "
                 f"from {dw['scale']:.3g} to {dn['scale']:.3g}: the release itself tells whether they are in "
                 "the table.")
    shift = abs(pn["centre"] - pw["centre"])
    return [first,
            f"With the public bounds {pw['lo']:g} to {pw['hi']:g}, the scale is {pw['scale']:.3g} with or "
            f"without them; only the average moves, by {shift:.2g} years, "
            + ("less than" if shift < pw["scale"] else "more than") + " the noise's scale."]


def _budget_claims(d: dict[str, Any]) -> list[str]:
    k, eps, budget = int(d["release"].size), d["epsilon"], d["budget"]
    spent = int((~d["refused"]).sum())
    total = float(d["total"][-1])
    if spent == k:
        return [f"{k} release(s) at ε = {eps:g} each: the ledger adds them up to ε = {total:g} "
                f"(basic composition), within the budget of ε = {budget:g}."]
    left = budget - total
    return [f"The first {spent} releases at ε = {eps:g} each add up to ε = {total:g}, "
            + ("the whole budget" if left <= 1e-12 else f"{left:g} short of the budget, too little for "
               "another") + f"; the ledger refused the other {k - spent} release(s): nothing of them was "
            "released."]


def _attack_claims(d: dict[str, Any]) -> list[str]:
    res = d["all"][float(d["value"])]
    acc = 0.5 + float(np.max(res.tpr - res.fpr)) / 2
    lb, claim = res.lower_bound.epsilon, res.claimed_epsilon
    first = (f"At ε = {claim:g}, the attacker's best guess is right {_pct(acc)} of the time (a coin flip: "
             f"50%); its AUC is {res.auc:.2f} (0.5: no better than chance).")
    if lb <= 0:
        return [first, f"It proves nothing with 95% confidence (ε ≥ 0), consistent with the claimed "
                       f"ε = {claim:g}."]
    return [first, f"It proves ε ≥ {lb:.2f} with 95% confidence: "
                   + ("within" if lb <= claim else "MORE than") + f" the claimed ε = {claim:g}"
                   + (" (one attacker proves less than the worst case the guarantee covers)." if lb <= claim
                      else ": the claim is wrong.")]


def _choose_claims(d: dict[str, Any]) -> list[str]:
    a = d["all"]
    i = int(np.argmin(np.abs(a["epsilon"] - float(d["value"]))))
    acc = {n: float(a["accuracy"][n][i]) for n in a["names"]}
    best = max(acc, key=acc.get)
    rec = a["recommended"]
    out = [f"At ε = {a['epsilon'][i]:g} on the digits, the most accurate release here is {best}'s "
           f"({_pct(acc[best])}); guessing gives {_pct(a['chance'])}."]
    if rec == best:
        out.append(f"The app recommends {rec} from public facts only, and here it is the best.")
    elif rec in acc:
        out.append(f"The app recommends {rec} from public facts only; here it reaches {_pct(acc[rec])}, "
                   f"{100 * (acc[best] - acc[rec]):.0f} points below {best}.")
    return out


_CLAIMS = {"odds": _odds_claims, "noise": _noise_claims, "tradeoff": _tradeoff_claims,
           "bounds": _bounds_claims, "budget": _budget_claims, "attack": _attack_claims,
           "choose": _choose_claims}


def step_claims(key: str, data: dict[str, Any]) -> list[str]:
    """The sentences stating what step ``key`` shows, computed from its ``data`` (:func:`step_data`)."""
    return _CLAIMS[key](data)
