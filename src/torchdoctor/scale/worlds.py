"""What was measured at one world size: the job's step time, its phases, its throughput.

Built from the per-rank step records the launcher's instrumentation writes
(`collect.read_profiles`: one `ScriptProfile` per rank, each with its `StepTiming`s). The
ranks of a DDP job meet in every step's all-reduce, so the job's step is the slowest rank's:
the step time of world N is, step by step, the maximum over ranks. The phases are averaged
over the ranks, in means so that they add up to the mean step (the waterfall splits that sum).

The waits for other ranks: DDP waits for its all-reduce inside the backward pass, and an
all-reduce ends on every rank only when the last rank has joined it, so a rank that arrives
early waits there, and its backward holds that wait on top of its own compute and the
communication. The rank that arrives last at a step waits for no one: its backward is the
step's compute and exposed communication alone. So a rank's wait at a step is its backward
minus the shortest backward of that step over the ranks (`rank_wait_s`: its mean over ranks
and steps). A rank whose own backward computes slower is not told apart this way (its excess
stays with the others' backward); the cross-rank diagnosis, from traces, does that.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

import numpy as np

from torchdoctor.core.errors import ScaleError
from torchdoctor.core.records import SubRecord
from torchdoctor.core.steps import PHASES, Phase, StepTiming
from torchdoctor.measure import summarize, warmup_length

ScalingMode = Literal["strong", "weak"]
SCALING_MODES: Final[tuple[ScalingMode, ...]] = ("strong", "weak")
#: Steady steps a world needs for a median and its interval (measure/_measurement.py's
#: MIN_SAMPLES_FOR_STATS is the bar for a trustworthy interval; fewer still give a number).
MIN_STEADY_STEPS: Final = 3


class MeasuredWorld(SubRecord):
    """One world size's measured steps.

    `step_s`, `step_ci`: the median of the job's per-step time (the slowest rank's) and its
    95% bootstrap interval; `step_times`: those steady per-step times; `phases`: each phase's
    mean seconds per step, averaged over ranks; `rank_step_s`: the ranks' mean step, whose gap
    to the job's mean step is the skew (the time ranks wait for the slowest).
    """

    world_size: int
    per_rank_batch: int | None = None
    step_s: float
    step_ci: tuple[float, float]
    step_times: list[float]
    phases: dict[Phase, float]
    rank_step_s: float
    job_step_mean_s: float
    samples_per_s: float | None = None
    rank_step_medians: list[float]
    rank_wait_s: float = 0.0


def _steady(steps: Sequence[StepTiming]) -> list[StepTiming]:
    """The steps after the warm-up (`measure.warmup_length`'s rule); on a host noisy enough
    that the rule never settles, at least the later half of them."""
    times = [s.total_s for s in steps]
    return list(steps[min(warmup_length(times), len(times) // 2) :])


def measured_world(
    rank_steps: Sequence[Sequence[StepTiming]], *, per_rank_batch: int | None = None
) -> MeasuredWorld:
    """Summarize the steps of each rank of one job (rank order)."""
    if not rank_steps:
        raise ScaleError("the job left no rank with recorded steps")
    steady = [_steady(s) for s in rank_steps]
    count = min(len(s) for s in steady)
    if count < MIN_STEADY_STEPS:
        raise ScaleError(
            f"only {count} steady step(s) were recorded on some rank "
            f"(at least {MIN_STEADY_STEPS} are needed)",
            hint="give the job more steps (--steps)",
        )
    totals = np.array([[s.total_s for s in r[-count:]] for r in steady])
    job = totals.max(axis=0)
    stats = summarize(job.tolist(), label=f"step at N={len(steady)}")
    phases: dict[Phase, float] = {
        p: float(np.mean([np.mean([s.phases.get(p, 0.0) for s in r[-count:]]) for r in steady]))
        for p in PHASES
    }
    rank_mean = float(totals.mean())
    backward = np.array([[s.phases.get("backward", 0.0) for s in r[-count:]] for r in steady])
    wait = float((backward - backward.min(axis=0)).mean())
    samples = [s.samples for r in steady for s in r[-count:] if s.samples]
    per_batch = per_rank_batch or (int(np.median(samples)) if samples else None)
    world = len(steady)
    rate = world * per_batch / stats.median if per_batch and stats.median > 0 else None
    return MeasuredWorld(
        world_size=world,
        per_rank_batch=per_batch,
        step_s=stats.median,
        step_ci=(stats.ci_low, stats.ci_high),
        step_times=[float(t) for t in job],
        phases=phases,
        rank_step_s=rank_mean,
        job_step_mean_s=float(job.mean()),
        samples_per_s=rate,
        rank_step_medians=[float(np.median(r)) for r in totals],
        rank_wait_s=wait,
    )


def karp_flatt(speedup: float, world_size: int) -> float | None:
    """The experimentally determined serial fraction (A. Karp and H. Flatt, "Measuring
    parallel processor performance", CACM 33(5), 1990): `(1/S - 1/N) / (1 - 1/N)`, Amdahl's
    serial fraction solved from a measured speedup S at N; None at N=1."""
    if world_size <= 1 or speedup <= 0:
        return None
    return (1.0 / speedup - 1.0 / world_size) / (1.0 - 1.0 / world_size)


def speedup(base: float, step_s: float, world_size: int, mode: ScalingMode) -> float:
    """Throughput at N over throughput at 1: strong scaling splits one global batch (the
    speedup is the step-time ratio); weak scaling gives every rank a whole batch (N of them
    per step)."""
    ratio = base / step_s
    return ratio if mode == "strong" else world_size * ratio
