"""The tuner's state and its one decision: keep a change or not.

`Tuner.try_change` measures a candidate (the current best plus one change) against the current
best by the sequential interleaved A/B (`torchdoctor.measure.SequentialTest`) and keeps it
only when `torchdoctor.tune.decision.judge` says so:

1. its loss trajectory has no NaN/inf and stays within the baseline's own spread for the
   change's safety class (`torchdoctor.tune.parity`), and
2. the lower end of the confidence interval of the speedup (the median over interleaved
   rounds of best_i / candidate_i, in seconds per sample, or per step for the latency
   objective) is above ``1 + min_gain``.

Each trial has a deterministic key (kind, best recipe, candidate recipe). A trial already in
the study (a resumed run, or another worker sharing the study) is read back and replayed
through the same decision bookkeeping instead of being run again. The budget lives in
`torchdoctor.tune.budget`, the final A/B against the baseline in `torchdoctor.tune.confirm`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

from torchdoctor.core.errors import TuneError
from torchdoctor.core.vocabulary import Clock, Objective, Safety
from torchdoctor.measure import PairedSpeedup
from torchdoctor.procs import SessionSpec, WorkerFailure
from torchdoctor.tune.arms import (
    REPLICATE_THRESHOLD,
    Arm,
    MeasurePlan,
    interleave_fresh_pair,
    interleave_until_clear,
    measure_alone,
)
from torchdoctor.tune.budget import (
    DEFAULT_TRIAL_TIMEOUT_S,
    Budget,
    BudgetExhausted,
)
from torchdoctor.tune.confirm import confirm_cost_s
from torchdoctor.tune.decision import SpeedCheck, Verdict, judge
from torchdoctor.tune.parity import (
    REFERENCE_RUNS,
    TOLERANCES,
    QualityReference,
    check_parity,
    first_non_finite,
    loosest,
)
from torchdoctor.tune.records import (
    Confirmation,
    Decision,
    Rejection,
    Rung,
    Trial,
    TrialKind,
    TrialResult,
    recipe_key,
)
from torchdoctor.tune.sources import ArmSource, WorkloadArms
from torchdoctor.tune.study import Study

__all__ = [
    "DOES_NOT_APPLY",
    "NOT_REPRODUCED",
    "BudgetExhausted",
    "TuneSettings",
    "Tuner",
    "recipe_key",
]

T = TypeVar("T", TrialResult, Confirmation)

#: Keep a change only when the CI's lower bound of its speedup exceeds 1 + this. 2% sits above
#: the run-to-run drift of identical code on a shared CPU (about 1%, see
#: torchdoctor.measure's DEFAULT_MIN_EFFECT) and below the gain any knob is worth keeping for.
DEFAULT_MIN_GAIN: Final = 0.02

#: A candidate whose warm-up steps (after the first, which carries compilation) run this many
#: times slower than the current best is rejected without being scored. The interleaved A/B
#: would reject it too, but only after settle + min_rounds chunks of at least chunk_steps
#: steps each: fp16 autocast on a CPU without fp16 units runs ~100x slower than fp32 here, and
#: that A/B cost 6 minutes of a 7-minute budget. 10x leaves room for warm-up effects that do
#: fade (allocator growth, CUDA graph capture, cudnn autotuning) and is far below the slowdown
#: of a hopeless candidate. Stopping never accepts, so it adds nothing to the false-accept rate.
FUTILE_SLOWDOWN: Final = 10.0


#: Study attribute holding the baseline's own settings (`Tuner.own_settings`).
OWN_SETTINGS_ATTR: Final = "own_settings"

#: Reason prefix of a trial whose changed knob did not act in the script (`_does_not_apply`).
DOES_NOT_APPLY: Final = "does not apply"

#: Reason prefix of a win the second pair of fresh processes did not bear out (`_replicate`).
NOT_REPRODUCED: Final = "not reproduced in fresh processes"
#: Reason of a win kept on its first pair alone (`_replicate` cut by the budget).
FIRST_PAIR_ONLY: Final = "kept on its first pair of processes"


@dataclass(frozen=True)
class TuneSettings:
    objective: Objective = "throughput"
    min_gain: float = DEFAULT_MIN_GAIN
    plan: MeasurePlan = field(default_factory=MeasurePlan)
    tolerances: dict[Safety, float] = field(default_factory=lambda: dict(TOLERANCES))
    isolate: bool = True
    memory_cap_bytes: int | None = None
    budget_s: float = 600.0
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S
    #: Baseline retrainings with a no-op perturbation that the quality check is judged by.
    reference_runs: int = REFERENCE_RUNS
    #: Keep a change only when a second pair of fresh processes points the same way
    #: (`_replicate`).
    replicate_wins: bool = True


class Tuner:
    def __init__(
        self,
        base_spec: SessionSpec,
        settings: TuneSettings,
        study: Study,
        *,
        log_dir: Path | None = None,
        on_trial: Callable[[Trial], None] | None = None,
        clock: Clock = time.monotonic,
        arms: ArmSource | None = None,
    ) -> None:
        self.base_spec = base_spec
        self.settings = settings
        #: where arms come from (tune/sources.py): the spec's workload unless given
        self.arms: ArmSource = arms or WorkloadArms(
            base_spec,
            settings.plan,
            settings.objective,
            isolate=settings.isolate,
            memory_cap_bytes=settings.memory_cap_bytes,
        )
        self.study = study
        self.log_dir = log_dir
        self.on_trial = on_trial
        self.budget = Budget(
            settings.budget_s,
            trial_timeout_s=settings.trial_timeout_s,
            clock=clock,
            confirm_cost_s=self.confirm_cost_s,
        )
        self.stored = study.completed()
        self.trials: list[Trial] = []
        self.reused = 0
        self.best_recipe: dict[str, Any] = dict(base_spec.recipe)
        self.best_arm: Arm | None = None
        self.baseline: TrialResult | None = None
        self.rungs: list[Rung] = []
        self.rejected: list[Rejection] = []
        #: The trial that made the current best (None while the best is the baseline).
        self.best_trial: TrialResult | None = None
        #: Safety classes of the kept changes: a candidate's loss is compared with the fp32
        #: eager baseline, so its tolerance is the loosest class of everything it differs by
        #: (threads=1 on top of a kept compile is not held to "exact" against eager).
        self.kept_safety: list[Safety] = []
        #: knob -> the value the baseline runs with of its own (a script's DataLoader
        #: settings, `Arm.own_settings`): the ladder's "current value" where the recipe is silent
        self.own_settings: dict[str, Any] = {}

    # budget

    def confirm_cost_s(self) -> float:
        return confirm_cost_s(self.baseline, self.best_trial)

    def estimated_trial_s(self) -> float:
        walls = [t.wall_s for t in self.trials if t.kind != "baseline" and t.ok]
        if walls:
            return float(statistics.median(walls))
        # Before any A/B trial: about one baseline measurement (one new arm and its warm-up;
        # the best arm is already warm, and the sequential A/B often stops at its first look).
        return self.baseline.wall_s if self.baseline else 0.0

    # arms

    def open_arm_for(
        self,
        recipe: dict[str, Any],
        tag: str,
        *,
        give_up_above: float | None = None,
        changed: tuple[str, ...] = (),
    ) -> Arm:
        """A live, warmed-up arm of `recipe` from this tuner's `ArmSource` (see `changed`
        there: a script arm whose changed knob did not act is not warmed up)."""
        log = self.log_dir / f"worker-{len(self.trials):03d}-{tag}.log" if self.log_dir else None
        return self.arms.open(
            recipe,
            timeout=self.budget.request_timeout,
            log_path=log,
            give_up_above=give_up_above,
            changed=changed,
        )

    def close(self) -> None:
        if self.best_arm is not None:
            self.best_arm.close()
            self.best_arm = None

    # recording

    def record(self, result: T, *, reused: bool, store: bool = True) -> T:
        if reused:
            self.reused += 1
            self.budget.reused_wall_s += result.wall_s
        elif store:
            self.study.add(result)
        self.trials.append(result)
        if self.on_trial is not None:
            self.on_trial(result)
        return result

    # the baseline

    def run_baseline(self) -> TrialResult:
        key = "baseline:" + recipe_key(self.best_recipe)
        stored = self.stored.get(key)
        if isinstance(stored, TrialResult):
            result = stored
            self.own_settings = dict(self.study.attr(OWN_SETTINGS_ATTR) or {})
            self.baseline = result
            self._add_baseline_rung(result)
            return self.record(result, reused=True)
        start = self.budget.clock()
        plan = self.settings.plan
        try:
            arm = self.open_arm_for(self.best_recipe, "baseline")
            self.own_settings = dict(arm.own_settings)
            if self.own_settings:  # a resumed study reuses the baseline without its arm
                self.study.set_attr(OWN_SETTINGS_ATTR, self.own_settings)
            measure_alone(arm, plan, timeout=self.budget.request_timeout)
            arm.fill_losses(plan.parity_steps, timeout=self.budget.request_timeout)
            measured_s = self.budget.clock() - start
            # The quality check's yardstick, paid once per study (see tune.parity).
            references = [
                arm.reference_losses(i, plan.parity_steps, timeout=self.budget.request_timeout)
                for i in range(1, self.settings.reference_runs + 1)
            ]
        except WorkerFailure as exc:
            if exc.kind == "timeout" and self.budget.remaining_s() <= 0:
                raise self._budget_too_small() from None
            raise TuneError(
                f"the baseline recipe failed ({exc.kind}): {exc.reason}",
                hint="check that it runs on its own (`torchdoctor run`; a script: plain python)",
            ) from None
        bad = first_non_finite(arm.losses)
        if bad is not None or self.budget.remaining_s() <= 0:
            arm.close()
            if bad is None:
                raise self._budget_too_small()
            raise TuneError(f"the baseline's loss is not finite at step {bad}")
        result = TrialResult(
            key=key,
            kind="baseline",
            step=0,
            recipe=dict(self.best_recipe),
            status="ok",
            decision="baseline",
            samples_per_s=arm.rate(),
            step_time_s=statistics.median(arm.chunk_scores) * arm.per_step(),
            peak_memory_bytes=arm.peak_memory_bytes,
            losses=list(arm.losses[: plan.parity_steps]),
            compile_s=arm.compile_s,
            warmup_s=arm.warmup_s,
            # The measurement alone: later trials and the final A/B are sized from it.
            wall_s=measured_s,
            chunk_times_s=list(arm.chunk_scores),
            reference_losses=references,
        )
        self.best_arm = arm
        self.baseline = result
        self._add_baseline_rung(result)
        return self.record(result, reused=False)

    def quality_reference(self) -> QualityReference:
        """The baseline's late-window losses and their spread under no-op perturbations."""
        if self.baseline is None:
            raise TuneError("internal: a quality check before the baseline")
        return QualityReference.from_trajectories(
            self.baseline.losses,
            self.baseline.reference_losses,
            steps=self.settings.plan.parity_steps,
        )

    def _budget_too_small(self) -> TuneError:
        return TuneError(
            f"the budget of {self.settings.budget_s:g} s is too small to measure even the "
            f"baseline (it took more than {self.budget.elapsed_s():.1f} s)",
            hint="give a larger --budget (e.g. 10m)",
        )

    def _add_baseline_rung(self, result: TrialResult) -> None:
        self.rungs.append(
            Rung(
                step=0,
                change={},
                samples_per_s=result.samples_per_s or 0.0,
                speedup_vs_previous=1.0,
                speedup_vs_previous_ci=(1.0, 1.0),
                speedup_vs_baseline=1.0,
                speedup_vs_baseline_ci=(1.0, 1.0),
                peak_memory_bytes=result.peak_memory_bytes,
                loss_deviation=0.0,
                verdict="baseline",
            )
        )

    # one change

    def try_change(self, change: dict[str, Any], *, kind: TrialKind, safety: Safety) -> TrialResult:
        if self.baseline is None:
            raise TuneError("internal: try_change before the baseline")
        candidate = {**self.best_recipe, **change}
        key = f"{kind}:{recipe_key(self.best_recipe)}->{recipe_key(candidate)}"
        stored = self.stored.get(key)
        if isinstance(stored, TrialResult):
            self._apply(stored, change, safety)
            return self.record(stored, reused=True)
        budget = self.budget
        if budget.remaining_s() < self.estimated_trial_s() + budget.reserve_s():
            raise BudgetExhausted
        start = budget.clock()
        fields, cand_arm = self._measure(
            candidate, loosest([*self.kept_safety, safety]), changed=tuple(change)
        )
        if fields["status"] == "timeout" and budget.past_deadline():
            # Cut by the budget, not a property of the recipe: not stored, so a resumed study
            # with more budget runs it again.
            raise BudgetExhausted(cut=change, cut_after_s=budget.clock() - start)
        result = TrialResult.model_validate(
            {
                "key": key,
                "kind": kind,
                "step": len(self.trials),
                "change": change,
                "recipe": candidate,
                "best_samples_per_s": self.rungs[-1].samples_per_s,
                **fields,
                "wall_s": budget.clock() - start,
            }
        )
        if result.decision == "kept" and cand_arm is not None:
            self.close()
            self.best_arm = cand_arm
        elif cand_arm is not None:
            cand_arm.close()
        self._apply(result, change, safety)
        return self.record(result, reused=False)

    def _measure(
        self, recipe: dict[str, Any], safety: Safety, *, changed: tuple[str, ...] = ()
    ) -> tuple[dict[str, Any], Arm | None]:
        """The measured fields of a trial record (status, decision, figures) and its arm."""
        plan = self.settings.plan
        speed: SpeedCheck | None = None
        cand: Arm | None = None
        try:
            if self.best_arm is None:
                self.best_arm = self.open_arm_for(self.best_recipe, "best")
            limit = self._futile_score(self.best_arm)
            cand = self.open_arm_for(recipe, "candidate", give_up_above=limit, changed=changed)
            inapplicable = self._does_not_apply(cand, recipe, changed)
            if inapplicable is not None:
                return inapplicable, cand
            futile = self._futile(cand, limit)
            if futile is not None:
                return futile, cand
            est = interleave_until_clear(
                self.best_arm,
                cand,
                plan,
                threshold=1.0 + self.settings.min_gain,
                timeout=self.budget.request_timeout,
            )
            speed = SpeedCheck(est, 1.0 + self.settings.min_gain)
            if speed.faster:
                # Only a proven speed win needs the full parity trajectory: a change already
                # rejected for speed is not run further (fp16 on a CPU is ~100x slower, and
                # 32 parity steps of it cost minutes of budget).
                cand.fill_losses(plan.parity_steps, timeout=self.budget.request_timeout)
        except WorkerFailure as exc:
            if cand is not None:
                # The failure came while both arms ran and either may have died: start the
                # best afresh for the next trial rather than guess.
                cand.close()
                self.close()
            return {"status": exc.kind, "decision": "failed", "reason": exc.reason}, None
        best = self.best_arm
        losses = list(cand.losses[: plan.parity_steps])
        verdict = self.judge(losses, safety, speed=speed, accepted="kept")
        replicate: dict[str, Any] = {}
        ends_with: Arm | None = cand
        if verdict.decision == "kept" and self.settings.replicate_wins:
            replicate, ends_with = self._replicate(recipe, cand, first=est)
        return {
            **verdict.fields(),
            **replicate,
            "samples_per_s": cand.rate(),
            "best_samples_per_s": best.rate(),
            "step_time_s": statistics.median(cand.chunk_scores) * cand.per_step(),
            "speedup_vs_best": est.speedup,
            "speedup_vs_best_ci": (est.ci_low, est.ci_high),
            "peak_memory_bytes": cand.peak_memory_bytes,
            "losses": losses,
            "compile_s": cand.compile_s,
            "warmup_s": cand.warmup_s,
            "chunk_times_s": list(cand.chunk_scores),
            "best_chunk_times_s": list(best.chunk_scores),
            "machine_load": est.load,
            "remeasured": est.remeasured,
        }, ends_with

    def _replicate(
        self, recipe: dict[str, Any], cand: Arm, *, first: PairedSpeedup
    ) -> tuple[dict[str, Any], Arm | None]:
        """The same A/B again on a second pair of fresh processes: a win is kept only when
        this pair points the same way (`arms.REPLICATE_CONFIDENCE` says how sure, and why
        the direction rather than the first pair's bar).

        Two live processes of one recipe can differ by a few percent, steadily enough that
        paired chunks prove the difference (`benchmarks/bench_script_noop.py` measures how
        often a do-nothing change clears the ladder's bar; benchmarks/RESULTS.md, "A win is
        proven twice"): the first A/B compares two processes as much as two recipes. A new
        process of each recipe draws that difference afresh, so a do-nothing change must be
        lucky twice.

        Returns the record fields this adds and the arm the trial ends with: the fresh
        candidate when the win holds (the next best), else None, with the fresh best as the
        live best. The first pair's arms are closed first, so at most two processes run.
        """
        cand.close()
        self.close()
        try:
            est, best2, cand2 = interleave_fresh_pair(
                self.open_arm_for, self.best_recipe, recipe, self.settings.plan,
                timeout=self.budget.request_timeout,
            )  # fmt: skip
        except WorkerFailure as exc:
            if exc.kind == "timeout" and self.budget.past_deadline():
                # The budget ran out, not the recipe: the win stands on its first pair, and
                # the final A/B against the baseline (in its reserve) still checks it.
                return {"reason": f"{FIRST_PAIR_ONLY}: the budget ran out during the second"}, None
            return {
                "status": exc.kind,
                "decision": "failed",
                "reason": f"a second pair of fresh processes failed: {exc.reason}",
            }, None
        fields: dict[str, Any] = {
            "replicate_speedup_vs_best": est.speedup,
            "replicate_speedup_vs_best_ci": (est.ci_low, est.ci_high),
        }
        check = SpeedCheck(est, REPLICATE_THRESHOLD)
        if check.faster:
            best2.close()
            return fields, cand2
        cand2.close()
        self.best_arm = best2
        reason = check.reason().removeprefix("not a proven win: ")
        fields.update(
            decision="rejected",
            reason=f"{NOT_REPRODUCED}: {reason} (the first pair: {first.speedup:.3f}x "
            f"[{first.ci_low:.3f}, {first.ci_high:.3f}])",
        )
        return fields, None

    def judge(
        self,
        losses: list[float | None],
        safety: Safety,
        *,
        speed: SpeedCheck | None,
        accepted: Decision,
    ) -> Verdict:
        """`tune.decision.judge` against this study's quality reference."""
        return judge(
            losses,
            speed=speed,
            parity=lambda losses: check_parity(
                self.quality_reference(), losses, safety, tolerances=self.settings.tolerances
            ),
            accepted=accepted,
        )

    def _futile_score(self, best: Arm) -> float | None:
        """The warm-up score (s/sample, or s/step) past which a candidate is futile."""
        rate = self.rungs[-1].samples_per_s
        if rate <= 0 or best.samples_per_step <= 0:
            return None
        # The best's score at the rung's rate, in the candidate's units (see `Arm.rate_of`).
        score = best.samples_per_step / rate if best.objective == "latency" else 1.0 / rate
        return score * FUTILE_SLOWDOWN

    @staticmethod
    def _does_not_apply(
        cand: Arm, recipe: dict[str, Any], changed: tuple[str, ...]
    ) -> dict[str, Any] | None:
        """A rejection without an A/B when a changed knob did not act in the candidate (a
        script whose code the knob cannot reach: no DataLoader for num_workers, ...)."""
        missing = [k for k in changed if k in cand.not_applied]
        if not missing:
            return None
        why = "; ".join(f"{k}={recipe.get(k)}: {cand.not_applied[k]}" for k in missing)
        return {"status": "ok", "decision": "rejected", "reason": f"{DOES_NOT_APPLY}: {why}"}

    def _futile(self, cand: Arm, limit: float | None) -> dict[str, Any] | None:
        """A rejection when the candidate's warm-up score is past `limit` (`_futile_score`)."""
        if limit is None or cand.warm_score is None or cand.warm_score <= limit:
            return None
        best_rate = self.rungs[-1].samples_per_s
        rate = cand.rate_of(cand.warm_score)
        reason = (
            f"futile: its warm-up ran at {rate:.3g}/s, {best_rate / rate:.0f}x slower than the "
            f"current best ({best_rate:.3g}/s); not measured further"
        )
        return {
            "status": "ok",
            "decision": "rejected",
            "samples_per_s": rate,
            "speedup_vs_best": rate / best_rate,
            "peak_memory_bytes": cand.peak_memory_bytes,
            "compile_s": cand.compile_s,
            "warmup_s": cand.warmup_s,
            "reason": reason,
        }

    def _apply(self, result: TrialResult, change: dict[str, Any], safety: Safety) -> None:
        """Update the ladder from a (new or replayed) trial result."""
        if result.decision != "kept":
            self.rejected.append(
                Rejection(
                    change=change,
                    status=result.status,
                    reason=result.reason,
                    speedup_vs_best=result.speedup_vs_best,
                    speedup_vs_best_ci=result.speedup_vs_best_ci,
                )
            )
            return
        if self.best_arm is not None and self.best_arm.recipe != result.recipe:
            self.close()  # a replayed keep: the live best arm is stale
        self.best_recipe = dict(result.recipe)
        self.best_trial = result
        self.kept_safety.append(safety)
        prev = self.rungs[-1]
        ratio = result.speedup_vs_best or 1.0
        low, high = result.speedup_vs_best_ci or (ratio, ratio)
        self.rungs.append(
            Rung(
                step=len(self.rungs),
                change=change,
                samples_per_s=result.samples_per_s or 0.0,
                speedup_vs_previous=ratio,
                speedup_vs_previous_ci=(low, high),
                # Chained: the product of the step ratios; its interval is the product of the
                # bounds, a conservative (Bonferroni-style) interval for the product.
                speedup_vs_baseline=prev.speedup_vs_baseline * ratio,
                speedup_vs_baseline_ci=(
                    prev.speedup_vs_baseline_ci[0] * low,
                    prev.speedup_vs_baseline_ci[1] * high,
                ),
                peak_memory_bytes=result.peak_memory_bytes,
                loss_deviation=result.loss_deviation,
                verdict="kept",
            )
        )
