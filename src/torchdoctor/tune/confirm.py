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
1.35. This is the headline speedup.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Final, Literal

from torchdoctor.measure import MIN_REPLICATES, replicated_speedup, steady_steps
from torchdoctor.procs import WorkerFailure
from torchdoctor.tune.arms import Arm, interleave_steady
from torchdoctor.tune.budget import BUDGET_GRACE_S, Budget, BudgetExhausted
from torchdoctor.tune.records import Confirmation, TrialResult, recipe_key

if TYPE_CHECKING:
    from torchdoctor.tune.tuner import Tuner

#: Fresh process pairs of the final confirmation when the budget allows (at least
#: `measure.MIN_REPLICATES`). Student's t quantile falls from 4.30 (3 pairs) to 3.18 (4) and
#: 2.78 (5) at 95%: the fourth pair narrows the interval by a quarter, a fifth by another
#: eighth for a quarter more time.
CONFIRM_PAIRS: Final = 4


def confirm_steps(baseline: TrialResult) -> int:
    """Steady steps each confirmation process times: `run`'s default window at the
    baseline's step time (`measure.steady_steps`: at least 30 steps and 3 s)."""
    return steady_steps(baseline.step_time_s or 0.0)


def pair_cost_s(baseline: TrialResult | None, best_trial: TrialResult | None) -> float:
    """Seconds one fresh process pair is expected to take.

    Each process costs about what the baseline's own measurement did (a worker start, its
    warm-up, a few chunks: `wall_s`) plus the steady steps the confirmation times; the best
    recipe's process adds its own warm-up, compilation included.
    """
    if baseline is None:
        return 0.0
    per_process = baseline.wall_s + confirm_steps(baseline) * (baseline.step_time_s or 0.0)
    best_warmup_s = (best_trial.warmup_s or 0.0) if best_trial is not None else 0.0
    return 2 * per_process + best_warmup_s


def confirm_cost_s(baseline: TrialResult | None, best_trial: TrialResult | None) -> float:
    """Seconds the ladder leaves for the final confirmation: its fewest pairs.

    `measure.MIN_REPLICATES` pairs, not `CONFIRM_PAIRS`: a ladder that runs to its deadline
    leaves the least that still gives an interval, and one that finishes early leaves the
    confirmation time for all its pairs.
    """
    return MIN_REPLICATES * pair_cost_s(baseline, best_trial)


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
    """Whether another pair fits in what is left of the budget, at the pairs' own pace."""
    return budget.remaining_s() + BUDGET_GRACE_S >= took_s / pairs


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
    stored = tuner.stored.get(key)
    if isinstance(stored, Confirmation):
        return tuner.record(stored, reused=True)
    budget = tuner.budget
    # The reserve was held for this: from here its requests may use all that is left.
    budget.confirm_planned = False
    # The estimate charges each pair the best recipe's warm-up as the ladder saw it,
    # compilation included; a fresh process often finds its compiled code in inductor's
    # on-disk caches and warms up in a fraction of that. The ladder is over, so what is left
    # of the budget has no other use: start when one pair fits by the estimate, then decide
    # on each next pair by what the pairs so far took (`_next_pair_fits`).
    if budget.remaining_s() + BUDGET_GRACE_S < pair_cost_s(baseline, tuner.best_trial):
        raise BudgetExhausted
    # The ladder's live workers would share the machine with the fresh ones.
    tuner.close()
    start = budget.clock()
    recipes = {"baseline": baseline.recipe, "best": tuner.best_recipe}
    scores: dict[str, list[float]] = {"baseline": [], "best": []}
    rates: dict[str, list[float]] = {"baseline": [], "best": []}
    peak: int | None = None
    fields: dict[str, object] = {"status": "ok"}
    timeout = budget.request_timeout
    steps = confirm_steps(baseline)
    try:
        for i in range(CONFIRM_PAIRS):
            if i > 0 and not _next_pair_fits(budget, took_s=budget.clock() - start, pairs=i):
                break
            # Alternate who starts first, so start-up order favours neither side.
            order = ("baseline", "best") if i % 2 == 0 else ("best", "baseline")
            arms: dict[str, Arm] = {}
            try:
                for tag in order:
                    arms[tag] = tuner.open_arm_for(recipes[tag], f"confirm-{tag}")
                first, second = interleave_steady(
                    (arms[order[0]], arms[order[1]]), steps, timeout=timeout
                )
                timed = {order[0]: first, order[1]: second}
            finally:
                for arm in arms.values():
                    arm.close()
            for tag in order:
                scores[tag].append(timed[tag])
                rates[tag].append(arms[tag].rate_of(timed[tag]))
            if arms["best"].peak_memory_bytes is not None:
                peak = max(peak or 0, arms["best"].peak_memory_bytes or 0)
    except WorkerFailure as exc:
        done = min(len(scores["baseline"]), len(scores["best"]))
        # The budget cut a pair short after enough whole pairs: those still give the interval.
        if exc.kind != "timeout" or done < MIN_REPLICATES:
            fields = {"status": exc.kind, "reason": exc.reason}
        for tag in scores:
            del scores[tag][done:], rates[tag][done:]
    done = min(len(scores["baseline"]), len(scores["best"]))
    if fields["status"] == "ok" and done < MIN_REPLICATES:
        fields = {
            "status": "timeout",
            "reason": f"the budget left time for {done} fresh process pairs; an interval "
            f"needs {MIN_REPLICATES}",
        }
    if fields["status"] == "ok":
        confidence = tuner.settings.plan.confidence
        est = replicated_speedup(scores["baseline"], scores["best"], confidence=confidence)
        fields.update(
            samples_per_s=statistics.median(rates["best"]),
            baseline_samples_per_s=statistics.median(rates["baseline"]),
            speedup=est.speedup,
            speedup_ci=(est.ci_low, est.ci_high),
            peak_memory_bytes=peak,
            rates=rates["best"],
            baseline_rates=rates["baseline"],
            steps=steps,
        )
    record = Confirmation.model_validate(
        {
            "key": key,
            "step": len(tuner.trials),
            "baseline_recipe": dict(baseline.recipe),
            "recipe": dict(tuner.best_recipe),
            **fields,
            "wall_s": budget.clock() - start,
        }
    )
    return tuner.record(record, reused=False)
