"""The final confirmation: the ladder's best against the baseline, in fresh process pairs.

The ladder's chained product of step ratios is an estimate built from separate comparisons
of long-lived workers; the confirmation measures the end-to-end ratio directly, as a user
who re-runs the recipe would: each replicate is a pair of fresh worker processes, one per
recipe (who starts first alternates), each warmed up by the settle rule and timed over steady
steps as `torchdoctor run` times them (`Arm.steady_score`, over `run`'s default window:
`measure.steady_steps`, at least 30 steps and 3 s of them). The two processes of a pair run
their steady steps in alternating chunks (`arms.interleave_steady`), so that the host's drift
over seconds falls on both: timed one after the other, fresh pairs of the zoo's
dispatch-bound script put a 1.6x compile gain at 1.48x [0.99, 2.20], one compiled process
running at the baseline's speed while the host was slow. The speedup and its
interval come from the replicated pairs (`measure.replicated_speedup`), so the interval covers
how much one process differs from another, which the chunks of a single pair cannot show:
with one interleaved pair of live workers the cnn demo claimed [1.51, 1.62] and fresh
`torchdoctor run` pairs re-measured 1.72; a cnn recipe claimed [1.45, 1.67] and re-measured
1.35. Where the study's arms run in turns on the GPU (tune/turns.py), a pair's two
processes run one after the other instead, each timed alone (`whole_runs.steady_alone`),
who starts first alternating: whole runs in ABBA order. This is the headline speedup. What
it is expected to cost, which the ladder holds back for it, is priced from its parts by
`torchdoctor.tune.cost` (`pair_cost_s`, `confirm_cost_s`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any, Final, Literal

from torchdoctor.core.vocabulary import Clock
from torchdoctor.measure import (
    DEFAULT_REPLICATES,
    MIN_REPLICATES,
    replicated_speedup,
    steady_steps,
)
from torchdoctor.procs import WorkerFailure
from torchdoctor.tune.arms import Arm, OpenArm, Timeout, interleave_steady
from torchdoctor.tune.budget import BUDGET_GRACE_S, Budget, BudgetExhausted
from torchdoctor.tune.cost import confirm_steps, pair_cost_s
from torchdoctor.tune.outcome import BUDGET_CUT, Outcome, Verdict, failure_outcome
from torchdoctor.tune.records import Confirmation, TrialResult, recipe_key
from torchdoctor.tune.tuner import Tuner
from torchdoctor.tune.whole_runs import steady_alone

#: Fresh process pairs of the final confirmation when the budget allows
#: (`measure.DEFAULT_REPLICATES`, which says why 4), unless the study asks for fewer
#: (`TuneSettings.final_pairs`, `tune --pairs`).
CONFIRM_PAIRS: Final = DEFAULT_REPLICATES


#: What the fresh process pairs say of the ladder's claim (`confirmation_verdict`).
ConfirmVerdict = Literal["confirmed", "refuted", "inconclusive"]


def confirmation_verdict(
    confirmed: tuple[float, float], ladder: tuple[float, float]
) -> ConfirmVerdict:
    """What the fresh process pairs' interval says of the ladder's chained interval.

    - "confirmed": it lies above 1, a gain a new process sees;
    - "refuted": it holds no gain and lies wholly below the ladder's interval: the ladder's
      gain did not reproduce in new processes (a baseline worker that happened to run slow
      makes a change look like a win against it);
    - "inconclusive": it holds both no gain and the ladder's claim: processes differ by more
      than the gain (fresh `run`s of one mlp recipe spanned 0.87-1.06 of each other), and a
      few pairs cannot tell. Each rung was proven in its own paired A/B, so the recipe stands
      and the result says that the end-to-end figure is unproven.
    """
    low, high = confirmed
    if low > 1.0:
        return "confirmed"
    if high < ladder[0]:
        return "refuted"
    return "inconclusive"


def _next_pair_fits(budget: Budget, *, took_s: float, pairs: int) -> bool:
    """Whether another pair is worth starting, at the pairs' own pace: below
    `measure.MIN_REPLICATES` pairs, all the pairs still needed for an interval must fit in
    what is left of the budget (else a pair more is spent on a record without one); from
    there, one more pair."""
    needed = max(1, MIN_REPLICATES - pairs)
    return budget.remaining_s() + BUDGET_GRACE_S >= needed * took_s / pairs


def confirmation_key(baseline_recipe: dict[str, object], best_recipe: dict[str, object]) -> str:
    # "pairs": a study stored by the single-pair A/B this replaced measures it again on resume.
    return f"confirm-pairs:{recipe_key(baseline_recipe)}->{recipe_key(best_recipe)}"


def confirm_against_baseline(tuner: Tuner) -> Confirmation | None:
    """The best recipe against the baseline in fresh process pairs: the headline speedup.

    Returns None when the best is the baseline; raises BudgetExhausted when not even one pair
    fits by the estimate. A confirmation that ran out of budget before
    `measure.MIN_REPLICATES` whole pairs is recorded as a timeout, with the reason.
    """
    baseline = tuner.baseline
    if baseline is None or tuner.best_recipe == baseline.recipe:
        return None
    key = confirmation_key(baseline.recipe, tuner.best_recipe)
    return tuner.run_or_replay(
        key, Confirmation, lambda: _run_pairs(tuner, key, baseline, dict(tuner.best_recipe))
    )


def _run_pairs(
    tuner: Tuner, key: str, baseline: TrialResult, best_recipe: dict[str, Any]
) -> Confirmation:
    """Run the fresh process pairs of the final A/B; its record (see
    `confirm_against_baseline`)."""
    budget = tuner.budget
    # The reserve was held for this: from here its requests may use all that is left.
    budget.confirm_planned = False
    # The estimate charges each pair the best recipe's warm-up as the ladder saw it,
    # compilation included; a fresh process often finds its compiled code in inductor's
    # on-disk caches and warms up in a fraction of that. The ladder is over, so what is left
    # of the budget has no other use: start when one pair fits by the estimate, then decide
    # on each next pair by what the pairs so far took (`_next_pair_fits`).
    if budget.remaining_s() + BUDGET_GRACE_S < pair_cost_s(
        baseline, tuner.best_trial, tuner.trial_costs()
    ):
        raise BudgetExhausted
    # The ladder's live workers would share the machine with the fresh ones.
    tuner.close()
    return measure_fresh_pairs(
        tuner.live.open,
        baseline.recipe,
        best_recipe,
        key=key,
        step=len(tuner.trials),
        steps=confirm_steps(baseline),
        pairs=tuner.settings.final_pairs,
        timeout=budget.request_timeout,
        confidence=tuner.settings.plan.confidence,
        clock=budget.clock,
        next_pair_fits=lambda took_s, done: _next_pair_fits(budget, took_s=took_s, pairs=done),
        in_turns=tuner.in_turns,
    )


def _time_pair(
    open_arm: OpenArm,
    recipes: dict[str, dict[str, Any]],
    steps: int | None,
    timeout: Timeout,
    *,
    in_turns: bool,
) -> tuple[dict[str, float], dict[str, Arm], int]:
    """One fresh process pair of `recipes` (in the order given): each side's steady score,
    its (closed) arm, and the steps timed (`steps` None: `run`'s window at the baseline's
    step time). Live together, in alternating chunks; `in_turns`, one after the other."""
    arms: dict[str, Arm] = {}
    timed: dict[str, float] = {}
    order = list(recipes)
    try:
        for tag in order:
            arms[tag] = arm = open_arm(recipes[tag], f"confirm-{tag}")
            if steps is None and (in_turns or tag == "baseline"):
                steps = steady_steps(arm.step_s)
            if in_turns:
                timed[tag] = steady_alone(arm, steps or 0, timeout=timeout)
                arm.close()
        if not in_turns:
            first, second = interleave_steady(
                (arms[order[0]], arms[order[1]]), steps or 0, timeout=timeout
            )
            timed = {order[0]: first, order[1]: second}
    finally:
        for arm in arms.values():
            arm.close()
    return timed, arms, steps or 0


def measure_fresh_pairs(
    open_arm: OpenArm,
    baseline_recipe: dict[str, Any],
    recipe: dict[str, Any],
    *,
    key: str,
    step: int,
    steps: int | None,
    pairs: int,
    timeout: Timeout,
    confidence: float,
    clock: Clock,
    next_pair_fits: Callable[[float, int], bool] = lambda took_s, done: True,
    in_turns: bool = False,
) -> Confirmation:
    """`recipe` against `baseline_recipe` in `pairs` fresh process pairs: the one A/B that
    says what a new process sees (the tuner's final confirmation, `torchdoctor run
    --vs-baseline`).

    Each pair opens one arm of each recipe (`open_arm`; who starts first alternates) and times
    `steps` steady steps of each in alternating chunks (`interleave_steady`); `steps` None
    takes `run`'s default window at the first baseline process's step time
    (`measure.steady_steps`). Before each pair after the first, `next_pair_fits(seconds so
    far, pairs done)` may stop it. A failure, or fewer than `measure.MIN_REPLICATES` whole
    pairs, is recorded with its reason instead of a speedup. `in_turns`: the two processes
    of a pair run one after the other, each ended before the next starts (tune/turns.py).
    """
    start = clock()
    recipes = {"baseline": baseline_recipe, "best": recipe}
    scores: dict[str, list[float]] = {"baseline": [], "best": []}
    rates: dict[str, list[float]] = {"baseline": [], "best": []}
    peak: int | None = None
    verdict = Verdict("ok", Outcome.MEASURED)
    try:
        for i in range(pairs):
            if i > 0 and not next_pair_fits(clock() - start, i):
                break
            # Alternate who starts first, so start-up order favours neither side.
            order = ("baseline", "best") if i % 2 == 0 else ("best", "baseline")
            timed, arms, steps = _time_pair(
                open_arm, {t: recipes[t] for t in order}, steps, timeout, in_turns=in_turns
            )
            for tag in order:
                scores[tag].append(timed[tag])
                rates[tag].append(arms[tag].rate_of(timed[tag]))
            if arms["best"].peak_memory_bytes is not None:
                peak = max(peak or 0, arms["best"].peak_memory_bytes or 0)
    except WorkerFailure as exc:
        done = min(len(scores["baseline"]), len(scores["best"]))
        # The budget cut a pair short after enough whole pairs: those still give the interval.
        if failure_outcome(exc.kind) is not Outcome.TIMEOUT or done < MIN_REPLICATES:
            verdict = Verdict.failure(exc.kind, exc.reason)
        for tag in scores:
            del scores[tag][done:], rates[tag][done:]
    done = min(len(scores["baseline"]), len(scores["best"]))
    if verdict.outcome is Outcome.MEASURED and done < MIN_REPLICATES:
        verdict = Verdict(
            "timeout",
            Outcome.BUDGET_CUT,
            f"{BUDGET_CUT} {done} fresh process pair{'' if done == 1 else 's'}; an interval "
            f"needs {MIN_REPLICATES}",
        )
    record = Confirmation(
        key=key,
        step=step,
        baseline_recipe=dict(baseline_recipe),
        recipe=dict(recipe),
        status=verdict.status,
        outcome=verdict.outcome,
        reason=verdict.reason,
        wall_s=clock() - start,
    )
    if verdict.outcome is not Outcome.MEASURED:
        return record
    est = replicated_speedup(scores["baseline"], scores["best"], confidence=confidence)
    return record.model_copy(
        update={
            "samples_per_s": statistics.median(rates["best"]),
            "baseline_samples_per_s": statistics.median(rates["baseline"]),
            "speedup": est.speedup,
            "speedup_ci": (est.ci_low, est.ci_high),
            "peak_memory_bytes": peak,
            "rates": rates["best"],
            "baseline_rates": rates["baseline"],
            "steps": steps,
        }
    )
