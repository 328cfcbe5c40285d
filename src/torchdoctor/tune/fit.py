"""The memory ladder: `tune --objective fit --max-memory CAP`.

From the baseline, one change at a time, each kept only when it is proven like a speed step
is: measured in a worker of its own, its peak memory per steady chunk (`Arm.chunk_peaks`)
clearly below the best's (`tune.fit_decisions.lowers_memory`), and its loss trajectory within the
baseline's own spread (`tune.parity`, the same quality check as every trial). The steps,
in the order of the memory case study the objective follows (lower precision,
checkpointing, accumulation, flash attention), cheapest in speed first:

1. `attention=sdpa`, where the workload computes attention by hand (its `attention`
   parameter "manual"; elsewhere the step does not apply and the result says so): the fused
   kernel never stores the T x T scores and their softmax that hand-written attention saves
   for backward. First because it is the one step that costs no speed (it is faster: the
   `handwritten_attention` prescription), and because what it frees grows with the square of
   the sequence, so on a long context it may fit alone, leaving the model's precision and
   its backward untouched;
2. `precision=bf16`: activations saved for backward in half the bytes;
3. `checkpointing=True`: each block's activations recomputed in backward instead of stored
   (where the workload declares its blocks);
4. accumulation that keeps the effective batch: micro-batch b/2 and twice the micro-batches
   per optimizer step, again while it saves memory and the batch divides (with a batch
   target only: see below).

Two questions, by whether the study has a batch target:

- **a batch target** (the baseline recipe names `batch_size`): make that effective batch fit.
  The ladder stops at the first recipe whose every chunk peaks under the cap, since each
  further step would cost speed for memory no longer needed.
- **no target**: the largest batch that fits. The steps that lower memory are kept (each lets
  a larger batch fit), accumulation aside (it grows the effective batch without bound, not
  what fits in one forward), then the batch is searched (`tune.fit_decisions.next_batch`): doubled
  while it fits, halved while it does not, then bisected to the edge; a batch is kept when it
  fits and trains with parity (a `semantic` change, held one-sided like the speed search's).

Nothing here is an A/B: memory is a property of one process's recipe, not of the host's speed
at a moment, so each candidate is measured alone (the baseline's `measure_alone` plan) and its
samples/s are shown as measured, indicative only. Arms run without the worker's resident-memory
watch (`--max-memory` is the cap to fit, not a limit that would kill the baseline before its
peak is known); a CUDA allocator that runs out anyway is an out-of-memory trial, recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from torchdoctor.core.errors import TuneError
from torchdoctor.core.vocabulary import Safety, check_fit_capped, check_fit_target
from torchdoctor.knobs import BATCH_SIZE, GRAD_ACCUM, IntRange, memory_steps
from torchdoctor.procs import WorkerFailure
from torchdoctor.tune.arms import measure_alone
from torchdoctor.tune.budget import BudgetExhausted
from torchdoctor.tune.config import TuneConfig
from torchdoctor.tune.fit_decisions import (
    BatchProbe,
    ChooseBatch,
    PeakMemory,
    fits,
    lowers_memory,
    mib,
    next_batch,
    no_saving_reason,
    over_cap_reason,
)
from torchdoctor.tune.fit_records import FitLadder, MemoryRung
from torchdoctor.tune.ladder import Validator
from torchdoctor.tune.outcome import Outcome, Verdict
from torchdoctor.tune.parity import first_non_finite
from torchdoctor.tune.records import TrialFigures, TrialKind, TrialResult, recipe_key
from torchdoctor.tune.tuner import Tuner

#: Accumulation that keeps the effective batch sums the same samples' gradients per optimizer
#: step in another order, and layers with batch statistics (BatchNorm) see the smaller
#: micro-batch: numerically close, not a change of dynamics (the catalogue's `semantic` class
#: of `grad_accum` is for accumulation that grows the effective batch).
ACCUMULATION_SAFETY: Final[Safety] = "close"


@dataclass(frozen=True)
class FitPlan:
    """What the memory ladder tries (module docstring). The cap is `max_memory_bytes`, or
    `max_memory_fraction` of the baseline's measured peak (`resolved`)."""

    max_memory_bytes: int | None
    #: The effective batch to make fit; None: search the largest batch that fits.
    target_batch: int | None
    default_batch: int
    max_batch: int = 4096
    validate: Validator | None = None
    #: Which batch to try next (`tune.fit_decisions.next_batch`): the seam a memory model fills.
    choose_batch: ChooseBatch = next_batch
    #: The one-knob steps, in order: (knob, value, safety class), the knobs' own
    #: (`Ladder.memory`). Accumulation follows them (`_accumulation_steps`), since its change
    #: is two knobs at once.
    steps: Sequence[tuple[str, Any, Safety]] = field(default_factory=memory_steps)
    #: Whether accumulation that keeps the effective batch is tried (with a batch target).
    accumulate: bool = True
    max_memory_fraction: float | None = None

    @property
    def cap(self) -> int:
        if self.max_memory_bytes is None:
            raise TuneError("internal: the memory cap is used before the baseline resolved it")
        return self.max_memory_bytes

    def resolved(self, baseline: PeakMemory | None) -> FitPlan:
        """This plan with its cap in bytes: a fraction taken of the baseline's median peak."""
        if self.max_memory_bytes is not None:
            return self
        if baseline is None or self.max_memory_fraction is None:
            raise TuneError("the baseline reported no peak memory to take a fraction of")
        return replace(self, max_memory_bytes=int(baseline.median * self.max_memory_fraction))


@dataclass
class FitOutcome:
    """How the memory ladder ended, in the shape of the speed ladder's `ClimbOutcome` (no
    final A/B: each recipe is measured alone)."""

    budget_exhausted: bool = False
    #: Why -> the knobs skipped for that reason.
    skipped: dict[str, list[str]] = field(default_factory=dict)
    cut: dict[str, Any] | None = None
    cut_after_s: float = 0.0
    confirmation: None = None
    #: The plan the ladder ran, its cap in bytes (`FitPlan.resolved`).
    plan: FitPlan | None = None


def check_fit_config(config: TuneConfig) -> None:
    """A fit study names its cap, and tunes a workload (a script's batch is its own)."""
    capped = config.max_memory_bytes is not None or config.max_memory_fraction is not None
    check_fit_capped(config.objective, capped=capped)
    check_fit_target(config.objective, is_script=config.is_script)


def fit_plan(config: TuneConfig, validate: Validator | None, *, default_batch: int) -> FitPlan:
    """The memory ladder of `config` (`--objective fit`): its cap, and the effective batch to
    hold when the baseline recipe names a batch (else the largest batch that fits, from
    `default_batch`, the workload's own)."""
    check_fit_config(config)
    recipe = config.baseline_recipe
    target = None
    if recipe.get(BATCH_SIZE.name) is not None:
        target = int(recipe[BATCH_SIZE.name]) * int(recipe.get(GRAD_ACCUM.name) or 1)
    wanted = set(config.knobs) if config.knobs is not None else None  # --knobs: only these
    return FitPlan(
        max_memory_bytes=config.max_memory_bytes,
        max_memory_fraction=config.max_memory_fraction,
        target_batch=target,
        default_batch=default_batch,
        max_batch=config.max_batch,
        validate=validate,
        steps=[step for step in memory_steps() if wanted is None or step[0] in wanted],
        accumulate=wanted is None or GRAD_ACCUM.name in wanted,
    )


def best_peak(tuner: Tuner) -> PeakMemory | None:
    """The current best's chunk peaks (the trial that made it, else the baseline's)."""
    trial = tuner.best_trial or tuner.baseline
    if trial is None:
        return None
    return PeakMemory.of(trial.chunk_peak_memory_bytes, trial.peak_memory_bytes)


def _batch(tuner: Tuner, plan: FitPlan) -> tuple[int, int]:
    recipe = tuner.best_recipe
    batch = int(recipe.get(BATCH_SIZE.name) or plan.default_batch)
    return batch, int(recipe.get(GRAD_ACCUM.name) or 1)


def _best_fits(tuner: Tuner, plan: FitPlan) -> bool:
    peak = best_peak(tuner)
    return peak is not None and fits(peak, plan.cap)


def try_memory_change(
    tuner: Tuner,
    change: dict[str, Any],
    *,
    kind: TrialKind,
    safety: Safety,
    plan: FitPlan,
) -> TrialResult:
    """Measure best + `change` alone and decide it: a "memory" step is kept when it lowers
    peak memory and trains with parity, a "batch" step when it fits and trains with parity."""
    candidate = {**tuner.best_recipe, **change}
    key = f"{kind}:{recipe_key(tuner.best_recipe)}->{recipe_key(candidate)}"

    def run() -> TrialResult:
        return tuner.timed_trial(
            key,
            kind,
            change,
            candidate,
            lambda: _measure(tuner, candidate, change, kind=kind, safety=safety, plan=plan),
        )

    return tuner.run_or_replay(
        key, TrialResult, run, apply=lambda result, _: tuner.apply_result(result, change, safety)
    )


def _measure(
    tuner: Tuner,
    candidate: dict[str, Any],
    change: dict[str, Any],
    *,
    kind: TrialKind,
    safety: Safety,
    plan: FitPlan,
) -> tuple[Verdict, TrialFigures]:
    measure_plan = tuner.settings.plan
    timeout = tuner.budget.request_timeout
    try:
        arm = tuner.live.open(candidate, "candidate", changed=tuple(change))
        try:
            measure_alone(arm, measure_plan, timeout=timeout)
            arm.fill_losses(measure_plan.parity_steps, timeout=timeout)
        finally:
            arm.close()  # one process at a time: the next trial's memory is its own
    except WorkerFailure as exc:
        return Verdict.failure(exc.kind, exc.reason), TrialFigures()
    losses = list(arm.losses[: measure_plan.parity_steps])
    peak = PeakMemory.of(arm.chunk_peaks, arm.peak_memory_bytes)
    before = best_peak(tuner)
    best_rate = tuner.rungs[-1].samples_per_s
    rate = arm.rate()
    figures = replace(
        arm.figures(losses),
        samples_per_s=rate,
        best_samples_per_s=best_rate,
        step_time_s=arm.samples_per_step / rate if rate else None,
        # Measured alone, minutes apart: a ratio of two processes, not a paired A/B.
        speedup_vs_best=rate / best_rate if best_rate else None,
    )
    return judge_memory(tuner, losses, peak, before, kind=kind, safety=safety, plan=plan), figures


def judge_memory(
    tuner: Tuner,
    losses: Sequence[float | None],
    peak: PeakMemory | None,
    before: PeakMemory | None,
    *,
    kind: TrialKind,
    safety: Safety,
    plan: FitPlan,
) -> Verdict:
    """In order: a non-finite loss fails; a memory step that does not lower the peak, or a
    batch over the cap, is rejected; then the quality check (`tune.decision.judge`)."""
    bad = first_non_finite(losses)
    if bad is not None:
        return Verdict("nan", Outcome.NAN, f"loss is NaN/inf at step {bad}")
    if peak is None:
        return Verdict("error", Outcome.ERROR, "the worker reported no peak memory")
    if kind == "memory" and before is not None and not lowers_memory(before, peak):
        return Verdict("ok", Outcome.NO_MEMORY_SAVING, no_saving_reason(before, peak))
    if kind == "batch" and not fits(peak, plan.cap):
        return Verdict("ok", Outcome.OVER_CAP, over_cap_reason(peak, plan.cap))
    judging = tuner.judging
    return judging.verdict(losses, judging.held_to(safety), speed=None, accepted=Outcome.KEPT)


def _skip(outcome: FitOutcome, reason: str, knob: str) -> None:
    knobs = outcome.skipped.setdefault(reason, [])
    if knob not in knobs:
        knobs.append(knob)


def _one_knob_steps(tuner: Tuner, plan: FitPlan, outcome: FitOutcome) -> None:
    for name, value, safety in plan.steps:
        if plan.target_batch is not None and _best_fits(tuner, plan):
            return
        if tuner.best_recipe.get(name) == value:
            continue  # the baseline has it already
        change = {name: value}
        reason = plan.validate({**tuner.best_recipe, **change}) if plan.validate else None
        if reason is not None:
            _skip(outcome, reason, name)
            continue
        try_memory_change(tuner, change, kind="memory", safety=safety, plan=plan)


def _max_accumulation() -> int:
    """The catalogue's largest `grad_accum`."""
    domain = GRAD_ACCUM.domain
    return domain.upper if isinstance(domain, IntRange) else 1


def _accumulation_steps(tuner: Tuner, plan: FitPlan, outcome: FitOutcome) -> None:
    """Halve the micro-batch and double the accumulation (the effective batch held) until
    the best fits, a halving saves nothing, or the batch no longer divides."""
    while not _best_fits(tuner, plan):
        batch, accum = _batch(tuner, plan)
        if batch % 2 or accum * 2 > _max_accumulation():
            return
        change = {BATCH_SIZE.name: batch // 2, GRAD_ACCUM.name: accum * 2}
        reason = plan.validate({**tuner.best_recipe, **change}) if plan.validate else None
        if reason is not None:
            _skip(outcome, reason, GRAD_ACCUM.name)
            return
        result = try_memory_change(
            tuner, change, kind="memory", safety=ACCUMULATION_SAFETY, plan=plan
        )
        if result.outcome is not Outcome.KEPT:
            return


def _largest_batch(tuner: Tuner, plan: FitPlan) -> None:
    """The batch search (module docstring); each probe a "batch" trial of its own."""
    batch, _ = _batch(tuner, plan)
    start = best_peak(tuner)
    tried = [BatchProbe(batch, _best_fits(tuner, plan), start.high if start else None)]
    while True:
        nxt = plan.choose_batch(tried, plan.cap, plan.max_batch)
        if nxt is None or any(p.batch == nxt for p in tried):
            return
        result = try_memory_change(
            tuner, {BATCH_SIZE.name: nxt}, kind="batch", safety=BATCH_SIZE.safety, plan=plan
        )
        peak = PeakMemory.of(result.chunk_peak_memory_bytes, result.peak_memory_bytes)
        high = peak.high if peak else None
        if result.outcome is Outcome.KEPT:
            tried.append(BatchProbe(nxt, True, high))
        elif result.outcome in (Outcome.OVER_CAP, Outcome.OUT_OF_MEMORY):
            tried.append(BatchProbe(nxt, False, high))
        else:
            return  # it fits but does not train alike, or failed: larger ones will not help


def climb_fit(tuner: Tuner, plan: FitPlan) -> FitOutcome:
    """Run the memory ladder on `tuner` (the baseline first). Stops cleanly on the budget."""
    outcome = FitOutcome()
    tuner.run_baseline()
    tuner.close()  # each candidate is measured alone, in a process of its own
    plan = outcome.plan = plan.resolved(best_peak(tuner))
    try:
        _one_knob_steps(tuner, plan, outcome)
        if plan.target_batch is not None:
            if plan.accumulate:
                _accumulation_steps(tuner, plan, outcome)
        else:
            _largest_batch(tuner, plan)
    except BudgetExhausted as exc:
        outcome.budget_exhausted = True
        outcome.cut, outcome.cut_after_s = exc.cut, exc.cut_after_s
    return outcome


def fit_ladder(tuner: Tuner, plan: FitPlan | None) -> FitLadder | None:
    """The study's memory ladder as `TuneResult.fit` records it: every trial in order (None
    when it stopped before the baseline resolved its cap)."""
    if plan is None or plan.max_memory_bytes is None:
        return None
    rows: list[MemoryRung] = []
    for trial in tuner.trials:
        if not isinstance(trial, TrialResult) or trial.kind not in ("baseline", "memory", "batch"):
            continue
        peak = PeakMemory.of(trial.chunk_peak_memory_bytes, trial.peak_memory_bytes)
        rows.append(
            MemoryRung(
                step=len(rows),
                kind=trial.kind,  # filtered just above: baseline, memory or batch
                change=dict(trial.change),
                batch_size=int(trial.recipe.get(BATCH_SIZE.name) or plan.default_batch),
                grad_accum=int(trial.recipe.get(GRAD_ACCUM.name) or 1),
                peak_memory_bytes=peak.median if peak else None,
                peak_spread_bytes=(peak.low, peak.high) if peak else None,
                fits=fits(peak, plan.cap) if peak else None,
                kept=trial.outcome in (Outcome.BASELINE, Outcome.KEPT),
                outcome=trial.outcome.value,
                reason=trial.reason,
                samples_per_s=trial.samples_per_s,
                loss_deviation=trial.loss_deviation,
            )
        )
    base = tuner.baseline
    base_peak = None
    if base is not None:
        base_peak = PeakMemory.of(base.chunk_peak_memory_bytes, base.peak_memory_bytes)
    peak = best_peak(tuner)
    batch, accum = _batch(tuner, plan)
    return FitLadder(
        max_memory_bytes=plan.cap,
        max_memory_fraction=plan.max_memory_fraction,
        target_batch=plan.target_batch,
        baseline_peak_bytes=base_peak.median if base_peak else None,
        baseline_fits=base_peak is not None and fits(base_peak, plan.cap),
        fits=peak is not None and fits(peak, plan.cap),
        batch_size=batch,
        grad_accum=accum,
        peak_memory_bytes=peak.median if peak else None,
        rows=rows,
    )


def fit_notes(ladder: FitLadder) -> list[str]:
    """What a person should know of the memory ladder's end, in words."""
    cap = mib(ladder.max_memory_bytes)
    notes = []
    if not ladder.baseline_fits and ladder.baseline_peak_bytes is not None:
        notes.append(
            f"the baseline peaks at {mib(ladder.baseline_peak_bytes)}, over the cap of {cap}"
        )
    if ladder.fits:
        what = (
            f"the effective batch of {ladder.target_batch}"
            if ladder.target_batch is not None
            else f"a batch of {ladder.batch_size}"
        )
        notes.append(
            f"{what} fits under {cap} as micro-batches of {ladder.batch_size} x "
            f"{ladder.grad_accum} per optimizer step, peaking at "
            f"{mib(ladder.peak_memory_bytes or 0)}"
        )
    else:
        notes.append(
            f"no recipe the memory ladder tried fits under {cap}; the best it found peaks at "
            f"{mib(ladder.peak_memory_bytes or 0)}"
        )
    notes.append(
        "the memory ladder measures each recipe alone (memory is the recipe's, not the host's "
        "moment): its samples/s are as measured, not a paired A/B"
    )
    return notes
