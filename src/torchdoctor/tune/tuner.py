"""The tuner's state and its one decision: keep a change or not.

`Tuner.try_change` measures a candidate (the current best plus one change) against the current
best by interleaved A/B and keeps it only when

1. its loss trajectory has no NaN/inf and stays within the parity tolerance of the change's
   safety class, relative to the fp32 eager baseline trained from the same seed, and
2. the lower end of the confidence interval of the speedup (the median over interleaved
   rounds of best_i / candidate_i, in seconds per sample, or per step for the latency
   objective; see `torchdoctor.tune.arms`) is above ``1 + min_gain``.

Each trial has a deterministic key (kind, best recipe, candidate recipe). A trial already in
the study (a resumed run, or another worker sharing the study) is read back and replayed
through the same decision bookkeeping instead of being run again.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal

from torchdoctor.core.errors import TuneError
from torchdoctor.tune.arms import (
    Arm,
    MeasurePlan,
    interleave,
    interleave_until_clear,
    measure_alone,
    open_arm,
    paired_speedup,
)
from torchdoctor.tune.parity import (
    REFERENCE_RUNS,
    TOLERANCES,
    QualityReference,
    Safety,
    check_parity,
    first_non_finite,
    loosest,
)
from torchdoctor.tune.records import Rejection, Rung, TrialKind, TrialResult
from torchdoctor.tune.sessions import SessionSpec
from torchdoctor.tune.study import Study
from torchdoctor.tune.trial import TrialFailure

#: Keep a change only when the CI's lower bound of its speedup exceeds 1 + this. 2% sits above
#: the run-to-run drift of identical code on a shared CPU (about 1%, see
#: torchdoctor.measure's DEFAULT_MIN_EFFECT) and below the gain any knob is worth keeping for.
DEFAULT_MIN_GAIN: Final = 0.02

#: Longest any single worker request may take (a torch.compile of a large model included).
DEFAULT_TRIAL_TIMEOUT_S: Final = 600.0

#: A request may run this far past its deadline before it is cut (so a trial's last chunk is
#: not discarded a second before its end). Every request of a trial shares one deadline (see
#: `torchdoctor.tune.arms.Timeout`): the budget, less the reserve for the final A/B.
BUDGET_GRACE_S: Final = 5.0

#: The final confirmation A/B costs about this many baseline measurements: a fresh baseline arm
#: with its warm-up (as the baseline had), then the full interleaved rounds against the best
#: arm, about twice the baseline's chunks. Re-opening the best arm (when a failed trial took it
#: down) adds that recipe's own warm-up, compilation included.
CONFIRM_COST_BASELINES: Final = 2.0

#: Rounds of the final confirmation A/B (a fixed design, not sequential: it measures the
#: headline rather than deciding a keep). 12 paired rounds put the cnn demo's headline
#: interval within about +-7% of its estimate; CONFIRM_COST_BASELINES is sized for them.
CONFIRM_ROUNDS: Final = 12

#: A candidate whose warm-up steps (after the first, which carries compilation) run this many
#: times slower than the current best is rejected without being scored. The interleaved A/B
#: would reject it too, but only after settle + min_rounds chunks of at least chunk_steps
#: steps each: fp16 autocast on a CPU without fp16 units runs ~100x slower than fp32 here, and
#: that A/B cost 6 minutes of a 7-minute budget. 10x leaves room for warm-up effects that do
#: fade (allocator growth, CUDA graph capture, cudnn autotuning) and is far below the slowdown
#: of a hopeless candidate. Stopping never accepts, so it adds nothing to the false-accept rate.
FUTILE_SLOWDOWN: Final = 10.0


class BudgetExhausted(Exception):
    """Not enough budget left for another trial; the tuner stops and reports what it has."""


@dataclass(frozen=True)
class TuneSettings:
    objective: Literal["throughput", "latency"] = "throughput"
    min_gain: float = DEFAULT_MIN_GAIN
    plan: MeasurePlan = field(default_factory=MeasurePlan)
    tolerances: dict[Safety, float] = field(default_factory=lambda: dict(TOLERANCES))
    isolate: bool = True
    memory_cap_bytes: int | None = None
    budget_s: float = 600.0
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S
    #: Baseline retrainings with a no-op perturbation that the quality check is judged by.
    reference_runs: int = REFERENCE_RUNS


def recipe_key(recipe: dict[str, Any]) -> str:
    return json.dumps(recipe, sort_keys=True, default=str)


def _rate(arm: Arm, objective: str) -> float:
    return _rate_of(statistics.median(arm.chunk_scores), arm)


def _rate_of(score: float, arm: Arm) -> float:
    """Samples per second from a chunk score (s/sample, or s/step for latency)."""
    return arm.samples_per_step / score if arm.objective == "latency" else 1.0 / score


class Tuner:
    def __init__(
        self,
        base_spec: SessionSpec,
        settings: TuneSettings,
        study: Study,
        *,
        log_dir: Path | None = None,
        on_trial: Callable[[TrialResult], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_spec = base_spec
        self.settings = settings
        self.study = study
        self.log_dir = log_dir
        self.on_trial = on_trial
        self.clock = clock
        self.started = clock()
        self.stored = study.completed()
        self.trials: list[TrialResult] = []
        self.reused = 0
        self.reused_wall_s = 0.0
        self.best_recipe: dict[str, Any] = dict(base_spec.recipe)
        self.best_arm: Arm | None = None
        self.baseline: TrialResult | None = None
        self.rungs: list[Rung] = []
        self.rejected: list[Rejection] = []
        #: The trial that made the current best (None while the best is the baseline).
        self.best_trial: TrialResult | None = None
        #: Whether budget is held back from ladder trials for the final confirmation A/B.
        self.confirm_planned = False
        #: Safety classes of the kept changes: a candidate's loss is compared with the fp32
        #: eager baseline, so its tolerance is the loosest class of everything it differs by
        #: (threads=1 on top of a kept compile is not held to "exact" against eager).
        self.kept_safety: list[Safety] = []

    # budget

    def elapsed_s(self) -> float:
        return self.clock() - self.started + self.reused_wall_s

    def remaining_s(self) -> float:
        return self.settings.budget_s - self.elapsed_s()

    def reserve_s(self) -> float:
        """Budget held back from ladder trials for the final A/B (0 once it runs).

        The ladder's own grace period comes out of its side: a ladder trial cut at its
        deadline leaves the whole confirmation cost, which may itself run into the grace.
        """
        return self.confirm_cost_s() + BUDGET_GRACE_S if self.confirm_planned else 0.0

    def request_timeout(self) -> float:
        """Seconds the next worker request may take: to the shared deadline, plus grace."""
        left = self.remaining_s() - self.reserve_s() + BUDGET_GRACE_S
        return max(min(self.settings.trial_timeout_s, left), 1.0)

    def past_deadline(self) -> bool:
        return self.remaining_s() - self.reserve_s() <= 0

    def confirm_cost_s(self) -> float:
        if self.baseline is None:
            return 0.0
        cost = CONFIRM_COST_BASELINES * self.baseline.wall_s
        if self.best_trial is not None:
            cost += self.best_trial.warmup_s or 0.0
        return cost

    def estimated_trial_s(self) -> float:
        walls = [t.wall_s for t in self.trials if t.kind != "baseline" and t.ok]
        if walls:
            return float(statistics.median(walls))
        # Before any A/B trial: about one baseline measurement (one new arm and its warm-up;
        # the best arm is already warm, and the sequential A/B often stops at its first look).
        return self.baseline.wall_s if self.baseline else 0.0

    # arms

    def open_arm_for(
        self, recipe: dict[str, Any], tag: str, *, give_up_above: float | None = None
    ) -> Arm:
        log = self.log_dir / f"worker-{len(self.trials):03d}-{tag}.log" if self.log_dir else None
        return open_arm(
            self.base_spec.with_recipe(recipe),
            self.settings.plan,
            objective=self.settings.objective,
            isolate=self.settings.isolate,
            timeout=self.request_timeout,
            memory_cap_bytes=self.settings.memory_cap_bytes,
            log_path=log,
            give_up_above=give_up_above,
        )

    def close(self) -> None:
        if self.best_arm is not None:
            self.best_arm.close()
            self.best_arm = None

    # recording

    def record(self, result: TrialResult, *, reused: bool, store: bool = True) -> TrialResult:
        if reused:
            self.reused += 1
            self.reused_wall_s += result.wall_s
        elif store:
            self.study.add(result)
        self.trials.append(result)
        if self.on_trial is not None:
            self.on_trial(result)
        return result

    # the baseline

    def run_baseline(self) -> TrialResult:
        key = "baseline:" + recipe_key(self.best_recipe)
        if key in self.stored:
            result = self.stored[key]
            self.baseline = result
            self._add_baseline_rung(result)
            return self.record(result, reused=True)
        start = self.clock()
        plan = self.settings.plan
        try:
            arm = self.open_arm_for(self.best_recipe, "baseline")
            measure_alone(arm, plan, timeout=self.request_timeout)
            arm.fill_losses(plan.parity_steps, timeout=self.request_timeout)
            measured_s = self.clock() - start
            # The quality check's yardstick, paid once per study (see tune.parity).
            references = [
                arm.reference_losses(i, plan.parity_steps, timeout=self.request_timeout)
                for i in range(1, self.settings.reference_runs + 1)
            ]
        except TrialFailure as exc:
            if exc.status == "timeout" and self.remaining_s() <= 0:
                raise self._budget_too_small() from None
            raise TuneError(
                f"the baseline recipe failed ({exc.status}): {exc.reason}",
                hint="check that the workload runs with `torchdoctor run`",
            ) from None
        bad = first_non_finite(arm.losses)
        if bad is not None or self.remaining_s() <= 0:
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
            samples_per_s=_rate(arm, self.settings.objective),
            step_time_s=statistics.median(arm.chunk_scores) * _per_step(arm),
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
            f"baseline (it took more than {self.elapsed_s():.1f} s)",
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

    def try_change(
        self, change: dict[str, Any], *, kind: TrialKind, safety: Safety
    ) -> TrialResult:
        if self.baseline is None:
            raise TuneError("internal: try_change before the baseline")
        candidate = {**self.best_recipe, **change}
        key = f"{kind}:{recipe_key(self.best_recipe)}->{recipe_key(candidate)}"
        if key in self.stored:
            result = self.stored[key]
            self._apply(result, change, safety)
            return self.record(result, reused=True)
        if self.remaining_s() < self.estimated_trial_s() + self.reserve_s():
            raise BudgetExhausted
        start = self.clock()
        base = TrialResult(
            key=key,
            kind=kind,
            step=len(self.trials),
            change=change,
            recipe=candidate,
            status="ok",
            decision="rejected",
            best_samples_per_s=self.rungs[-1].samples_per_s,
        )
        result, cand_arm = self._measure(base, loosest([*self.kept_safety, safety]))
        if result.status == "timeout" and self.past_deadline():
            # Cut by the budget, not a property of the recipe: not stored, so a resumed study
            # with more budget runs it again.
            raise BudgetExhausted
        result = result.model_copy(update={"wall_s": self.clock() - start})
        if result.decision == "kept" and cand_arm is not None:
            self.close()
            self.best_arm = cand_arm
        elif cand_arm is not None:
            cand_arm.close()
        self._apply(result, change, safety)
        return self.record(result, reused=False)

    def _measure(self, base: TrialResult, safety: Safety) -> tuple[TrialResult, Arm | None]:
        plan = self.settings.plan
        threshold = 1.0 + self.settings.min_gain
        cand: Arm | None = None
        try:
            if self.best_arm is None:
                self.best_arm = self.open_arm_for(self.best_recipe, "best")
            limit = self._futile_score(self.best_arm)
            cand = self.open_arm_for(base.recipe, "candidate", give_up_above=limit)
            futile = self._futile(base, cand, limit)
            if futile is not None:
                return futile, cand
            est = interleave_until_clear(
                self.best_arm, cand, plan, threshold=threshold, timeout=self.request_timeout
            )
            if est.ci_low > threshold:
                # Only a proven speed win needs the full parity trajectory: a change already
                # rejected for speed is not run further (fp16 on a CPU is ~100x slower, and
                # 32 parity steps of it cost minutes of budget).
                cand.fill_losses(plan.parity_steps, timeout=self.request_timeout)
        except TrialFailure as exc:
            if cand is not None:
                # The failure came while both arms ran and either may have died: start the
                # best afresh for the next trial rather than guess.
                cand.close()
                self.close()
            return base.model_copy(
                update={"status": exc.status, "decision": "failed", "reason": exc.reason}
            ), None
        best = self.best_arm
        losses = list(cand.losses[: plan.parity_steps])
        measured = base.model_copy(
            update={
                "samples_per_s": _rate(cand, self.settings.objective),
                "best_samples_per_s": _rate(best, self.settings.objective),
                "step_time_s": statistics.median(cand.chunk_scores) * _per_step(cand),
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
            }
        )
        bad = first_non_finite(losses)
        if bad is not None:
            reason = f"loss is NaN/inf at step {bad}"
            return measured.model_copy(
                update={"status": "nan", "decision": "failed", "reason": reason}
            ), cand
        if est.ci_low <= threshold:
            reason = (
                f"not a proven win: speedup {est.speedup:.3f}x, {est.confidence:.0%} CI "
                f"[{est.ci_low:.3f}, {est.ci_high:.3f}] does not clear {threshold:.2f}x"
            )
            return measured.model_copy(update={"reason": reason}), cand
        parity = check_parity(
            self.quality_reference(), losses, safety, tolerances=self.settings.tolerances
        )
        measured = measured.model_copy(update={"loss_deviation": parity.deviation})
        if not parity.passed:
            return measured.model_copy(update={"reason": "quality: " + parity.reason}), cand
        return measured.model_copy(update={"decision": "kept"}), cand

    def _futile_score(self, best: Arm) -> float | None:
        """The warm-up score (s/sample, or s/step) past which a candidate is futile."""
        rate = self.rungs[-1].samples_per_s
        if rate <= 0 or best.samples_per_step <= 0:
            return None
        # The best's score at the rung's rate, in the candidate's units (see `_rate_of`).
        score = best.samples_per_step / rate if best.objective == "latency" else 1.0 / rate
        return score * FUTILE_SLOWDOWN

    def _futile(self, base: TrialResult, cand: Arm, limit: float | None) -> TrialResult | None:
        """A rejection when the candidate's warm-up score is past `limit` (`_futile_score`)."""
        if limit is None or cand.warm_score is None or cand.warm_score <= limit:
            return None
        best_rate = self.rungs[-1].samples_per_s
        rate = _rate_of(cand.warm_score, cand)
        reason = (
            f"futile: its warm-up ran at {rate:.3g}/s, {best_rate / rate:.0f}x slower than the "
            f"current best ({best_rate:.3g}/s); not measured further"
        )
        return base.model_copy(
            update={
                "samples_per_s": rate,
                "speedup_vs_best": rate / best_rate,
                "peak_memory_bytes": cand.peak_memory_bytes,
                "compile_s": cand.compile_s,
                "warmup_s": cand.warmup_s,
                "reason": reason,
            }
        )

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


def _per_step(arm: Arm) -> float:
    return 1.0 if arm.objective == "latency" else arm.samples_per_step


def confirm_against_baseline(tuner: Tuner) -> TrialResult | None:
    """A final interleaved A/B of the best recipe against the baseline: the headline speedup.

    The ladder's chained product is an estimate built from separate comparisons; this one
    measures the end-to-end ratio directly, with its own interval. Returns None when the best
    is the baseline; raises BudgetExhausted when there is no time left for it.
    """
    baseline = tuner.baseline
    if baseline is None or tuner.best_recipe == baseline.recipe:
        return None
    key = f"confirm:{recipe_key(baseline.recipe)}->{recipe_key(tuner.best_recipe)}"
    if key in tuner.stored:
        return tuner.record(tuner.stored[key], reused=True)
    # The reserve was held for this: from here its requests may use all that is left.
    tuner.confirm_planned = False
    if tuner.remaining_s() + BUDGET_GRACE_S < tuner.confirm_cost_s():
        raise BudgetExhausted
    start = tuner.clock()
    plan = tuner.settings.plan
    base_arm: Arm | None = None
    record = TrialResult(
        key=key,
        kind="confirm",
        step=len(tuner.trials),
        recipe=dict(tuner.best_recipe),
        status="ok",
        decision="measured",
    )
    try:
        if tuner.best_arm is None:
            tuner.best_arm = tuner.open_arm_for(tuner.best_recipe, "best")
        base_arm = tuner.open_arm_for(baseline.recipe, "baseline")
        confirm_plan = replace(plan, rounds=min(plan.rounds, CONFIRM_ROUNDS))
        interleave(base_arm, tuner.best_arm, confirm_plan, timeout=tuner.request_timeout)
    except TrialFailure as exc:
        tuner.close()
        record = record.model_copy(
            update={"status": exc.status, "decision": "failed", "reason": exc.reason}
        )
    else:
        est = paired_speedup(base_arm, tuner.best_arm, confidence=plan.confidence)
        record = record.model_copy(
            update={
                "samples_per_s": _rate(tuner.best_arm, tuner.settings.objective),
                "best_samples_per_s": _rate(base_arm, tuner.settings.objective),
                "speedup_vs_best": est.speedup,
                "speedup_vs_best_ci": (est.ci_low, est.ci_high),
                "peak_memory_bytes": tuner.best_arm.peak_memory_bytes,
                "chunk_times_s": list(tuner.best_arm.chunk_scores),
                "best_chunk_times_s": list(base_arm.chunk_scores),
            }
        )
    finally:
        if base_arm is not None:
            base_arm.close()
    record = record.model_copy(update={"wall_s": tuner.clock() - start})
    return tuner.record(record, reused=False)
