"""The final confirmation: the ladder's best against the baseline, in one direct A/B.

The ladder's chained product of step ratios is an estimate built from separate comparisons;
the confirmation measures the end-to-end ratio directly, with its own interval, and is the
headline speedup of a study.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Final

from torchdoctor.measure import paired_speedup
from torchdoctor.tune.arms import Arm, interleave
from torchdoctor.tune.budget import BUDGET_GRACE_S, BudgetExhausted
from torchdoctor.tune.records import Confirmation, TrialResult, recipe_key
from torchdoctor.tune.trial import TrialFailure

if TYPE_CHECKING:
    from torchdoctor.tune.tuner import Tuner

#: The final confirmation A/B costs about this many baseline measurements: a fresh baseline arm
#: with its warm-up (as the baseline had), then the full interleaved rounds against the best
#: arm, about twice the baseline's chunks. Re-opening the best arm (when a failed trial took it
#: down) adds that recipe's own warm-up, compilation included.
CONFIRM_COST_BASELINES: Final = 2.0

#: Rounds of the final confirmation A/B (a fixed design, not sequential: it measures the
#: headline rather than deciding a keep). 12 paired rounds put the cnn demo's headline
#: interval within about +-7% of its estimate; CONFIRM_COST_BASELINES is sized for them.
CONFIRM_ROUNDS: Final = 12


def confirm_cost_s(baseline: TrialResult | None, best_trial: TrialResult | None) -> float:
    """Seconds the final A/B is expected to take (the reserve the ladder leaves for it)."""
    if baseline is None:
        return 0.0
    cost = CONFIRM_COST_BASELINES * baseline.wall_s
    if best_trial is not None:
        cost += best_trial.warmup_s or 0.0
    return cost


def confirmation_key(baseline_recipe: dict[str, object], best_recipe: dict[str, object]) -> str:
    return f"confirm:{recipe_key(baseline_recipe)}->{recipe_key(best_recipe)}"


def confirm_against_baseline(tuner: Tuner) -> Confirmation | None:
    """A final interleaved A/B of the best recipe against the baseline: the headline speedup.

    Returns None when the best is the baseline; raises BudgetExhausted when there is no time
    left for it.
    """
    baseline = tuner.baseline
    if baseline is None or tuner.best_recipe == baseline.recipe:
        return None
    key = confirmation_key(baseline.recipe, tuner.best_recipe)
    stored = tuner.stored.get(key)
    if stored is not None:
        if isinstance(stored, TrialResult):  # a run folder from before `Confirmation`
            stored = Confirmation.from_trial(stored, baseline.recipe)
        return tuner.record(stored, reused=True)
    budget = tuner.budget
    # The reserve was held for this: from here its requests may use all that is left.
    budget.confirm_planned = False
    if budget.remaining_s() + BUDGET_GRACE_S < tuner.confirm_cost_s():
        raise BudgetExhausted
    start = budget.clock()
    plan = tuner.settings.plan
    base_arm: Arm | None = None
    fields: dict[str, object] = {"status": "ok"}
    try:
        if tuner.best_arm is None:
            tuner.best_arm = tuner.open_arm_for(tuner.best_recipe, "best")
        base_arm = tuner.open_arm_for(baseline.recipe, "baseline")
        confirm_plan = replace(plan, rounds=min(plan.rounds, CONFIRM_ROUNDS))
        interleave(base_arm, tuner.best_arm, confirm_plan, timeout=budget.request_timeout)
    except TrialFailure as exc:
        tuner.close()
        fields = {"status": exc.status, "reason": exc.reason}
    else:
        best = tuner.best_arm
        est = paired_speedup(base_arm.chunk_scores, best.chunk_scores, confidence=plan.confidence)
        fields.update(
            samples_per_s=best.rate(),
            baseline_samples_per_s=base_arm.rate(),
            speedup=est.speedup,
            speedup_ci=(est.ci_low, est.ci_high),
            peak_memory_bytes=best.peak_memory_bytes,
            chunk_times_s=list(best.chunk_scores),
            baseline_chunk_times_s=list(base_arm.chunk_scores),
        )
    finally:
        if base_arm is not None:
            base_arm.close()
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
