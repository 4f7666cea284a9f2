"""Attack page: membership inference on the training split, and the empirical epsilon it proves.

The game and its estimator live in :mod:`dpcore.attacks`; this page picks the target and the
number of trials, runs it with a progress bar and a Stop button, and shows the ROC curve, the AUC
and the empirical epsilon next to the claimed one. Results are kept per session and settings
(uploaded data never enter a cache shared between users; SPEC section 8).
"""

from __future__ import annotations

import math
import time

import streamlit as st

from app import state
from app.controls import initial, mechanism_controls
from app.explain import intro
from app.figures.attack import roc_figure, score_histogram_figure
from dpcore import attacks
from dpcore.mechanisms import get_mechanism

#: Releases per world by default: chosen so that local-gaussian on the digits training split
#: (1,347 x 64) stays well within 30 s in the browser on this project's 2-core machine while other
#: jobs run (measured: README, "Attack page").
DEFAULT_TRIALS = 300
TRIAL_CHOICES = [20, 50, 100, 200, 300, 500, 1000, 2000, 5000]
RESULTS_KEPT = 8
#: Seconds between progress-bar updates during a run (each update is where a Stop click takes effect).
PROGRESS_SECONDS = 0.25

ss = st.session_state
st.title("Attack: what can an attacker learn?")
intro("attack")
st.warning(f"**{attacks.NOT_PRIVATE_NOTICE}**", icon=":material/warning:")
ds = state.dataset()
name = ss.mechanism
mech = get_mechanism(name)
train, _ = state.split()

st.markdown(
    f"A **membership-inference game** against **{mech.title}**: the attacker knows every row of the "
    f"training split ({train.n_samples:,} rows) except whether one *target* is in it, sees one "
    "release, and must guess. We play it many times with and without the target (the two tables "
    "differ in one row, as the guarantee's neighbouring relation allows) and measure how often it "
    "is right. Differential privacy promises that no attacker beats the green curve; the **empirical "
    "ε** is what this attacker proves, with 95% confidence."
)

with st.expander("Mechanism parameters (shared with Explore)"):
    params = mechanism_controls(mech, ds)

c1, c2, c3 = st.columns([2, 1, 2])
targets = {"upper": "upper corner of the public box", "lower": "lower corner of the public box",
           "row": "a row of the training split"}
kind = c1.radio("Target", list(targets), format_func=targets.get, key="p:attack_target",
                help="Chosen from public facts: a corner of the public bounds (the most unusual "
                     "record possible), or a real row.", **initial("p:attack_target"))
target: str | int = kind
if kind == "row":
    target = int(c1.number_input("Row index (training split)", 0, train.n_samples - 1, step=1,
                                 key="p:attack_row", **initial("p:attack_row", "value", 0)))
trials = c2.select_slider("Trials (releases per world)", TRIAL_CHOICES, key="p:attack_trials",
                          help="Each trial draws one release with and one without the target. More "
                               "trials: a tighter lower bound, a longer run.",
                          **initial("p:attack_trials", "value", DEFAULT_TRIALS))
default_stat = attacks.attack_statistic(name)
stat_choices = list(dict.fromkeys([default_stat, "closest-row"]))
statistic = c3.radio("Attack statistic", stat_choices, key=f"p:attack_stat:{name}",
                     format_func=lambda s: f"{s}: {attacks.STATISTIC_TEXT[s]}",
                     **initial(f"p:attack_stat:{name}"))

key = ("attack", ds.fingerprint, ss["p:test_size"], name, repr(sorted(params.items())), repr(target),
       int(trials), statistic)
results: dict = ss.setdefault("_attack_results", {})


def game(resume: tuple[list[float], list[float]], **kwargs) -> attacks.AttackResult | None:
    try:
        res = attacks.membership_game(  # the default statistic: the library's (it may fall back)
            name, params, train, target=target, trials=int(trials),
            statistic=None if statistic == default_stat else statistic, random_state=0, resume=resume,
            **kwargs)
    except ValueError as exc:
        st.error(str(exc))
        return None
    results[key] = res
    while len(results) > RESULTS_KEPT:
        results.pop(next(iter(results)))
    return res


def request_stop() -> None:
    ss["_attack_stop"] = True


def start() -> None:
    ss["_attack_stop"] = False
    ss["_attack_partial"] = {"key": key, "scores": ([], []), "t0": time.perf_counter()}


def drawn_trials(scores: tuple[list[float], list[float]]) -> tuple[list[float], list[float]]:
    """Copies of an interrupted run's scores, cut to its complete trials (as many per world).

    With Streamlit's fast reruns (``runner.fastReruns``, on by default) a click during a run starts
    the next run at once in a NEW script thread, while the interrupted one keeps drawing until its
    next Streamlit call (the ``stop`` check before each trial): for up to one trial both threads
    hold these lists, and the old one may have appended its world-0 score but not yet its world-1
    score. Summarising the shared lists raised "resume must hold as many scores per world" (the page
    then showed no result) or mixed in scores appended afterwards; a copy cut to
    ``min(len(out), len(in))`` holds exactly the trials both worlds finished (trial t is index t).
    """
    out, inn = list(scores[0]), list(scores[1])  # each copy is atomic under the GIL
    n = min(len(out), len(inn))
    return out[:n], inn[:n]


b1, b2, _ = st.columns([1, 1, 4])
run = b1.button("Run attack", type="primary", on_click=start)
b2.button("Stop the attack", on_click=request_stop,
          help="Stop the running attack and show what it has so far.")
partial = ss.get("_attack_partial")
if not run and partial and partial["key"] == key and key not in results:
    # A run with these settings was interrupted (our Stop button, or Streamlit's own Stop in the
    # header): Streamlit ended it; finish from the scores it had drawn (the game draws up to its
    # minimum of 10 trials per world first, so a stop always ends with a result)
    # (partial is cleared only once the result is stored: another click can end this run at the
    # spinner, and the next run then finishes the same scores). The interrupted run's thread may
    # still be drawing its last trial into partial["scores"]: summarise a copy (drawn_trials).
    ss["_attack_stop"] = False
    with st.spinner("Stopping: summarising the trials drawn so far..."):
        stopped = game(drawn_trials(partial["scores"]), stop=lambda: True)
    ss["_attack_partial"] = None
    if stopped is not None and "t0" in partial:  # the whole run, not only this last step
        stopped.seconds = time.perf_counter() - partial["t0"]
elif run:
    bar = st.progress(0.0, "Drawing releases...")
    t0 = ss["_attack_partial"]["t0"]
    shown = {"at": 0.0}

    def progress(done: int, total: int, s0, s1) -> None:
        # A click on Stop (or any widget) ends this run at its next Streamlit call, and the bar is
        # the only one inside the game: update it by time (every PROGRESS_SECONDS), not every k
        # trials, so a Stop lands within a fraction of a second however slow the trials are.
        now = time.perf_counter()
        if now - shown["at"] >= PROGRESS_SECONDS or done == total:
            shown["at"] = now
            left = (now - t0) / done * (total - done)
            bar.progress(done / total, f"{done} of {total} trials (2 releases each), about "
                                       f"{left:.0f} s left — Stop keeps what is drawn")

    game(ss["_attack_partial"]["scores"], progress=progress, stop=lambda: bool(ss.get("_attack_stop")))
    bar.empty()

res: attacks.AttackResult | None = results.get(key)
if res is None:
    st.info("Choose a target and the number of trials, then press **Run attack** (results are kept "
            "for this session).")
    st.stop()

lb = res.lower_bound
point = attacks.point_epsilon(lb, res.delta)
m1, m2, m3 = st.columns(3)
m1.metric("AUC", f"{res.auc:.3f}", help="Area under the ROC curve: 0.5 is a coin flip, 1 a perfect attack.")
m2.metric("Empirical ε (95% lower limit)", f"{lb.epsilon:.3f}",
          help="What this attack proves: ε is at least this, with 95% confidence (Clopper-Pearson "
               "limits of the false-positive and false-negative rates).")
m3.metric("Claimed ε (release card)", f"{res.claimed_epsilon:.3g}"
          + (f" (δ = {res.delta:.0e})" if res.delta else ""))
interval = f"[{lb.epsilon:.3f}, ∞)"
st.caption(f"Empirical ε: 95% confidence interval {interval}; at the measured rates (no margin) "
           f"ε̂ = {'∞' if math.isinf(point) else f'{point:.3f}'}. "
           f"{res.trials} trials per world"
           + (f" (stopped early; {res.requested} asked)" if res.stopped else "")
           + f", {res.seconds:.1f} s.")
if res.stopped:
    st.info(f"Stopped after {res.trials} trials per world.")
if res.exceeds_claim:
    st.error(f"The attack proves ε ≥ {lb.epsilon:.2f}, MORE than the claimed ε = "
             f"{res.claimed_epsilon:.3g}: the claim does not hold for these settings.")
if not res.extra.get("holds", True):
    st.warning("The bounds come from the data: the release's guarantee does not hold anyway.")
st.markdown(attacks.plain_summary(res))

left, right = st.columns([3, 2])
left.plotly_chart(roc_figure(res), key="attack_roc")
right.plotly_chart(score_histogram_figure(res), key="attack_hist")
with st.expander("The test behind the number"):
    st.markdown(
        f"- Target: {res.target}.\n"
        f"- Attack statistic: {res.extra['statistic_text']}.\n"
        f"- Neighbouring relation: {res.neighbouring}; every release is a seeded exploration preview "
        "(never saveable).\n"
        f"- Best test (chosen on 30% of the runs, evaluated on the other {lb.n0} + {lb.n1}): say IN "
        f"when the score is {'≥' if lb.direction > 0 else '≤'} {lb.threshold:.4g}; FPR {lb.fpr:.3f} "
        f"(95% upper {lb.fpr_upper:.3f}), FNR {lb.fnr:.3f} (95% upper {lb.fnr_upper:.3f}); bound from "
        f"{lb.inequality}.\n"
        "- Estimator shared with the project's statistical audits (`dpcore.attacks."
        "epsilon_lower_bound`; Jagielski et al. 2020, Nasr et al. 2021)."
    )
