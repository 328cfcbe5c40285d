"""Joint refinement: Optuna's multi-objective search over the knobs that interact.

One change at a time misses interactions (torch.compile with channels_last, a larger batch
with reduced precision). Within what is left of the budget, NSGA-II (Optuna's default
multi-objective sampler) proposes whole recipes around the ladder's best, each measured on its
own (steady-state chunks after warm-up) for throughput and peak memory, and quality-checked
like a ladder step. The non-dominated recipes (the Pareto front: nothing else is both faster
and smaller) are reported; the ladder's best recipe is not replaced, because these are not
A/B-proven against it.

Trials are asked from and told to the same persistent study, so several workers sharing a
storage URL split the search, and a resumed study counts the joint trials it already has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from torchdoctor.core.vocabulary import Safety
from torchdoctor.knobs import BATCH_SIZE, joint_knobs
from torchdoctor.procs import WorkerFailure
from torchdoctor.tune.arms import measure_alone
from torchdoctor.tune.claims import END_ATTR, KEY_ATTR, RECORD_ATTR
from torchdoctor.tune.outcome import Outcome, Verdict
from torchdoctor.tune.parity import loosest
from torchdoctor.tune.records import ParetoPoint, Trial, TrialFigures, TrialResult, recipe_key
from torchdoctor.tune.space import KnobSpec
from torchdoctor.tune.tuner import Tuner


def _choices(spec: KnobSpec, best: dict[str, Any]) -> list[Any]:
    if spec.name != BATCH_SIZE.name:
        return list(spec.values)
    current = int(best.get(BATCH_SIZE.name) or spec.default or 32)
    return [max(1, current // 2), current, current * 2]


def pareto_front(records: Sequence[Trial]) -> list[ParetoPoint]:
    """Non-dominated (samples/s up, peak memory down) among measured, quality-passing trials."""
    points = [
        ParetoPoint(
            recipe=r.recipe, samples_per_s=r.samples_per_s, peak_memory_bytes=r.peak_memory_bytes
        )
        for r in records
        if isinstance(r, TrialResult)
        and r.ok
        and r.outcome in (Outcome.BASELINE, Outcome.KEPT, Outcome.MEASURED)
        and r.kind != "confirm"
        and r.samples_per_s is not None
        and r.peak_memory_bytes is not None
    ]

    def dominated(p: ParetoPoint) -> bool:
        return any(
            q.samples_per_s >= p.samples_per_s
            and q.peak_memory_bytes <= p.peak_memory_bytes
            and (q.samples_per_s > p.samples_per_s or q.peak_memory_bytes < p.peak_memory_bytes)
            for q in points
        )

    return sorted((p for p in points if not dominated(p)), key=lambda p: -p.samples_per_s)


def refine_jointly(
    tuner: Tuner,
    space: Sequence[KnobSpec],
    n_trials: int,
    validate: Callable[[dict[str, Any]], str | None] | None,
) -> list[ParetoPoint]:
    import optuna

    study = tuner.study.optuna_study
    # the knobs whose effects interact (each changes what the others cost): `Ladder.joint`
    interacting = joint_knobs()
    specs = [s for s in space if s.name in interacting and len(s.values) > 1]
    done = [r for r in tuner.stored.values() if isinstance(r, TrialResult) and r.kind == "joint"]
    for record in done:
        tuner.run_or_replay(record.key, TrialResult, None)
    safety = loosest([s.safety for s in specs])
    for _ in range(max(0, n_trials - len(done))):
        if not specs or tuner.budget.remaining_s() < tuner.estimated_trial_s():
            break
        trial = study.ask()
        while trial.user_attrs.get(KEY_ATTR) is not None:
            # Optuna's queue gave a shared study's ladder claim (tune/claims.py), which
            # another tuner enqueued for its step: withdrawn, and that tuner enqueues again.
            trial.set_user_attr(END_ATTR, "withdrawn")
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            trial = study.ask()
        recipe = dict(tuner.best_recipe)
        for spec in specs:
            recipe[spec.name] = trial.suggest_categorical(
                spec.name, _choices(spec, tuner.best_recipe)
            )
        reason = validate(recipe) if validate else None
        if reason is not None:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        key = f"joint:{trial.number}:{recipe_key(recipe)}"
        run = partial(_measure_joint, tuner, key, recipe, safety)
        # Told to the study below, with the trial Optuna asked for: not stored a second time.
        result = tuner.run_or_replay(key, TrialResult, run, store=False)
        trial.set_user_attr(KEY_ATTR, result.key)
        trial.set_user_attr(RECORD_ATTR, result.to_json_dict())
        if result.ok and result.samples_per_s is not None:
            study.tell(trial, [result.samples_per_s, float(result.peak_memory_bytes or 0)])
        else:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
    return pareto_front(tuner.trials)


def _measure_joint(tuner: Tuner, key: str, recipe: dict[str, Any], safety: Safety) -> TrialResult:
    """One joint-search trial: `recipe` measured alone and quality-checked."""
    budget = tuner.budget
    plan = tuner.settings.plan
    start = budget.clock()
    figures = TrialFigures()
    arm = None
    try:
        arm = tuner.live.open(recipe, "joint")
        measure_alone(arm, plan, timeout=budget.request_timeout)
        arm.fill_losses(plan.parity_steps, timeout=budget.request_timeout)
        losses = list(arm.losses[: plan.parity_steps])
        # Measured alone, so no speed verdict: the ladder's decision on the rest.
        verdict = tuner.judging.verdict(losses, safety, speed=None, accepted=Outcome.MEASURED)
        # The arm's figures as every trial records them (its chunk peaks too), and its rate.
        figures = replace(arm.figures(losses), samples_per_s=arm.rate())
    except WorkerFailure as exc:
        verdict = Verdict.failure(exc.kind, exc.reason)
    finally:
        if arm is not None:
            arm.close()
    return TrialResult.of(
        key=key,
        kind="joint",
        step=len(tuner.trials),
        recipe=recipe,
        verdict=verdict,
        figures=figures,
        wall_s=budget.clock() - start,
    )
