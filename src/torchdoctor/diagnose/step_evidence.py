"""Step statistics for `Evidence`: which steps count, their median/p95, and phase shares."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from torchdoctor.core.steps import PHASES, Phase, StepTiming
from torchdoctor.diagnose.evidence import StepEvidence
from torchdoctor.measure import summarize

#: Steps skipped at the start when no warm-up count is given: the first step pays for lazy
#: initialization (allocator growth, DataLoader worker start-up, cuDNN autotuning).
DEFAULT_WARMUP_STEPS: Final = 1


def steady_steps(
    steps: Sequence[StepTiming], *, warmup: int = DEFAULT_WARMUP_STEPS, exclude: Iterable[int] = ()
) -> list[StepTiming]:
    """Steps after warm-up and outside the profiled window (the profiler slows its steps).

    Never drops more than half the steps: a short run still gets statistics, noisier ones.
    """
    skip = min(max(warmup, 0), len(steps) // 2)
    kept = list(steps[skip:])
    excluded = set(exclude)
    outside = [s for s in kept if s.index not in excluded]
    return outside if len(outside) >= max(1, len(kept) // 2) else kept


def phase_fractions(steps: Sequence[StepTiming]) -> dict[Phase, float]:
    """Each phase's share of the summed step time: a ratio of sums, so long steps weigh more,
    which is what an Amdahl bound on total time needs."""
    total = sum(s.total_s for s in steps)
    if total <= 0:
        return {}
    return {p: sum(s.phases.get(p, 0.0) for s in steps) / total for p in PHASES}


def step_evidence(
    steps: Sequence[StepTiming],
    *,
    warmup: int = DEFAULT_WARMUP_STEPS,
    exclude: Iterable[int] = (),
    timing_method: str = "host_clock",
    phases_from: Sequence[StepTiming] | None = None,
) -> StepEvidence:
    """Step-time statistics of `steps`; the phase split of `phases_from` when given (steps
    timed with per-phase syncs apart from the throughput steps, as the engine runs them)."""
    kept = steady_steps(steps, warmup=warmup, exclude=exclude)
    if not kept:
        return StepEvidence(count=len(steps), measured=0, timing_method=timing_method)
    stats = summarize([s.total_s for s in kept], label="step")
    return StepEvidence(
        count=len(steps),
        measured=len(kept),
        median_s=stats.median,
        p95_s=stats.p95,
        phase_fractions=phase_fractions(kept if phases_from is None else phases_from),
        timing_method=timing_method,
    )
