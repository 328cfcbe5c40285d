"""`run_workload`: warm up, run the steady state, and summarize it as a `RunResult`."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Literal

from torchdoctor.core.errors import EngineError
from torchdoctor.core.steps import PHASES, Phase, StepTiming
from torchdoctor.engine.result import RunResult
from torchdoctor.engine.session import prepare
from torchdoctor.knobs import Recipe
from torchdoctor.measure import (
    DEFAULT_STEADY_STEPS,
    MAX_EXTRA_WARMUP_STEPS,
    MIN_WARMUP_STEPS,
    steady_rate,
    steady_steps,
    summarize,
    warm_up,
)
from torchdoctor.workloads import Workload

#: progress(done_steps, total_steps), called after every step (warm-up included; the total
#: grows when warm-up needs more steps to settle).
Progress = Callable[[int, int], None]

#: Steps timed with per-phase synchronization for the phase split, after the throughput steps
#: (at most `steps` of them). Ten give each phase's share within a few percent on the built-in
#: workloads, and their syncs never touch the throughput figure.
DEFAULT_PHASE_STEPS = 10


def run_workload(
    workload: Workload,
    recipe: Recipe,
    *,
    steps: int | None = DEFAULT_STEADY_STEPS,
    warmup_steps: int = MIN_WARMUP_STEPS,
    measure_phases: bool = True,
    phase_steps: int | None = None,
    settle_warmup: bool = True,
    device: str = "cpu",
    seed: int = 0,
    progress: Progress | None = None,
) -> RunResult:
    """Warm up (at least `warmup_steps`, until step times settle), time `steps` steady steps
    without per-phase syncs, then, with `measure_phases`, `phase_steps` more for the phase
    split (see `torchdoctor.measure.warm_up`). `settle_warmup=False` runs exactly
    `warmup_steps` warm-up steps.

    `steps=None` times `torchdoctor run`'s default window, the one each process of the
    tuner's confirmation times: `DEFAULT_STEADY_STEPS` steps, then more until they make
    `measure.MIN_STEADY_S` at their median step time (`measure.steady_steps`)."""
    by_time = steps is None
    planned: int = DEFAULT_STEADY_STEPS if steps is None else steps
    if planned < 1:
        raise EngineError(f"cannot measure {planned} steps", hint="give --steps 1 or more")
    if warmup_steps < 0:
        raise EngineError(f"invalid warm-up of {warmup_steps} steps", hint="give 0 or more")
    if phase_steps is not None and phase_steps < 0:
        raise EngineError(f"invalid phase steps {phase_steps}", hint="give 0 or more")
    if not measure_phases:
        n_phased = 0
    else:
        n_phased = min(planned, DEFAULT_PHASE_STEPS) if phase_steps is None else phase_steps
    total = planned + warmup_steps + n_phased
    done = 0
    warming = True

    def tick() -> None:
        nonlocal done, total
        done += 1
        if warming:  # warm-up may run past its minimum: the measured steps still lie ahead
            total = max(total, done + planned + n_phased)
        if progress is not None:
            progress(done, total)

    with prepare(workload, recipe, device=device, seed=seed) as session:
        # Warm-up never measures phases: the first step holds compilation.
        warm = warm_up(
            session,
            min_steps=warmup_steps,
            max_extra=MAX_EXTRA_WARMUP_STEPS if settle_warmup else 0,
            on_step=tick,
        )
        warming = False
        # Peaks cover the steady state: warm-up holds one-off workspaces (cuDNN benchmark
        # trying algorithms, autotuning, compilation) that the job does not keep using.
        session.reset_peak_memory()
        # Throughput from steps without per-phase syncs: on a GPU a sync at every phase
        # boundary serializes launch and execution, which the real job never does.
        steady = session.run_steps(planned, measure_phases=False, on_step=tick)
        if by_time:
            more = steady_steps(statistics.median(s.total_s for s in steady)) - planned
            if more > 0:
                total += more
                steady += session.run_steps(more, measure_phases=False, on_step=tick)
        phased = session.run_steps(n_phased, measure_phases=True, on_step=tick)
        memory = session.read_memory()
        compiled = session.compiled
        batch_size, grad_accum, threads = session.batch_size, session.grad_accum, session.threads

    losses, first_bad, bad_kind = _losses_for_json([s.loss for s in (*warm, *steady, *phased)])
    steady = [_without_nonfinite_loss(s) for s in steady]
    phased = [_without_nonfinite_loss(s) for s in phased]
    steady_times = [s.total_s for s in steady]
    median = statistics.median(steady_times)
    samples_per_s = steady_rate(steady)
    tokens = workload.tokens_per_sample
    return RunResult(
        workload=workload.name,
        workload_params=dict(getattr(workload, "params", {}) or {}),
        recipe=recipe.to_dict(),
        device=device,
        seed=seed,
        compiled=compiled,
        batch_size=batch_size,
        grad_accum=grad_accum,
        samples_per_step=batch_size * grad_accum,
        warmup_steps=len(warm),
        first_step_s=warm[0].total_s if warm else None,
        warmup_s=sum(s.total_s for s in warm),
        compile_s=sum(max(0.0, s.total_s - median) for s in warm),
        steps=steady,
        phase_steps=phased,
        samples_per_s=samples_per_s,
        tokens_per_s=samples_per_s * tokens if tokens else None,
        step_time=summarize(steady_times, label=f"{workload.name} step"),
        phase_fractions=mean_phase_fractions(phased) if phased else None,
        memory=memory,
        losses=losses,
        threads=threads,
        nonfinite_loss_step=first_bad,
        nonfinite_loss_value=bad_kind,
    )


def _loss_kind(loss: float) -> Literal["nan", "inf", "-inf"]:
    if math.isnan(loss):
        return "nan"
    return "inf" if loss > 0 else "-inf"


def _losses_for_json(
    raw: list[float | None],
) -> tuple[list[float | None], int | None, Literal["nan", "inf", "-inf"] | None]:
    """Losses with non-finite values as None (JSON forbids NaN), and where the first one was.

    The engine records a loss for every step, so a None in the result always means
    "not finite", the convention the tuner's parity check (`first_non_finite`) reads too.
    """
    losses: list[float | None] = []
    first_bad: int | None = None
    kind: Literal["nan", "inf", "-inf"] | None = None
    for i, loss in enumerate(raw):
        if loss is not None and not math.isfinite(loss):
            if first_bad is None:
                first_bad, kind = i, _loss_kind(loss)
            loss = None
        losses.append(loss)
    return losses, first_bad, kind


def _without_nonfinite_loss(step: StepTiming) -> StepTiming:
    if step.loss is not None and not math.isfinite(step.loss):
        return step.model_copy(update={"loss": None})
    return step


def mean_phase_fractions(steps: list[StepTiming]) -> dict[Phase, float]:
    """Each phase's share of the total steady-state time (time-weighted, so sums to 1)."""
    total = sum(s.total_s for s in steps)
    if total <= 0:
        return dict.fromkeys(PHASES, 0.0)
    return {p: sum(s.phases.get(p, 0.0) for s in steps) / total for p in PHASES}
