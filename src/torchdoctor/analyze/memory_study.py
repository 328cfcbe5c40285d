"""Measure a workload's memory at a few batch sizes and plan from it; find the measured edge.

`study_memory` is what `torchdoctor memory` runs: one steady step at each batch size
(collect/memory_owners.py), then the owners and the fit (analyze/memory_fit.py). `measured_edge`
checks a prediction: it bisects over real batch sizes for the largest whose measured
footprint stays under a cap. On a GPU that footprint is the caching allocator's reserved
peak, the memory an out-of-memory error is raised against; on the CPU, where no allocator
refuses, the edge is defined by the same rule over the live tensors' peak.

`oom_edge` measures the real out-of-memory edge on the CPU: each batch's steady step runs in a
child process whose data size is capped (procs/_capped.py: RLIMIT_DATA, with glibc's mmap
threshold fixed), so a step over the budget fails with the allocator's own out-of-memory error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from torchdoctor.analyze.memory_fit import phase_footprints, plan_memory
from torchdoctor.collect import measure_step_memory
from torchdoctor.core.errors import TorchDoctorError, UsageError
from torchdoctor.core.memory_owners import CappedStep, MemoryPlan, OomEdge, StepMemory
from torchdoctor.knobs import Recipe
from torchdoctor.procs import FailureKind, run_capped_step
from torchdoctor.workloads import Workload

#: measure(batch_size) -> the step's memory (`measure_step_memory` bound to a workload).
Measure = Callable[[int], StepMemory]


def default_batch_sizes(workload: Workload) -> list[int]:
    """Three small batches: a quarter, a half and all of the workload's default batch."""
    base = max(1, workload.default_batch_size // 4)
    return [base, 2 * base, 4 * base]


def study_memory(
    workload: Workload,
    *,
    batch_sizes: Sequence[int] | None = None,
    budget_bytes: int | None = None,
    device: str = "cpu",
    recipe: Recipe | None = None,
    seed: int = 0,
) -> MemoryPlan:
    """The owners of `workload`'s steps at `batch_sizes`, their fit, the largest batch."""
    sizes = sorted(set(batch_sizes or default_batch_sizes(workload)))
    if len(sizes) < 2 or sizes[0] < 1:
        raise UsageError(
            f"cannot fit memory from batch sizes {sizes}",
            hint="give two or three distinct positive batch sizes, e.g. --batch-sizes 8,16,32",
        )
    steps = [
        measure_step_memory(workload, b, device=device, recipe=recipe, seed=seed) for b in sizes
    ]
    return plan_memory(workload.name, steps, budget_bytes=budget_bytes)


def footprint(step: StepMemory) -> int:
    """The step's footprint: the largest of its phases'."""
    return max(phase_footprints(step).values())


def under_cap(measure: Measure, cap_bytes: int) -> Callable[[int], bool]:
    """fits(batch): whether the measured footprint of a step at `batch` is at most the cap."""
    return lambda batch: footprint(measure(batch)) <= cap_bytes


def measured_edge(
    fits: Callable[[int], bool], *, low: int, high: int, resolution: float = 0.0
) -> int:
    """The largest batch in [low, high] that `fits` (a measurement under a cap, or a real
    step that does not run out of memory under an allocator's limit).

    Bisection, so it assumes that what fits at a batch fits at every smaller one. Returns
    `low - 1` when even `low` does not fit and `high` when `high` fits. With `resolution` > 0
    it stops once the first batch known not to fit is within that fraction of the returned
    one (which fits): the edge to that precision, for probes too costly to bisect to one.
    """
    if fits(high):
        return high
    return _bisect(fits, low - 1, high, resolution)


def _bisect(fits: Callable[[int], bool], good: int, bad: int, resolution: float) -> int:
    # invariant: `good` fits (or is below the range), `bad` does not
    while bad - good > max(1, int(good * resolution)):
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good


#: The first step away from a guess of the edge, a fraction of the guess, doubled at each
#: step: a guess within 5% (half the claim's 10%) is bracketed by the guess and one probe.
GALLOP_FIRST_STEP = 0.05


def edge_from_guess(
    fits: Callable[[int], bool],
    *,
    guess: int,
    low: int,
    high: int,
    resolution: float = 0.0,
) -> int:
    """`measured_edge`, started from a guess (a prediction): probe the guess, then step away
    from it by 5%, 10%, 20%, ... of it until the edge is bracketed, then bisect. Each probe
    near a good guess halves the bracket a plain bisection over [low, high] would narrow from
    its far ends, and the far ends (a step twice the edge) are the costliest probes."""
    guess = min(max(guess, low), high)
    step = GALLOP_FIRST_STEP
    if fits(guess):
        good = guess
        while True:
            if good >= high:
                return high
            probe = min(high, max(good + 1, math.ceil(guess * (1 + step))))
            if not fits(probe):
                return _bisect(fits, good, probe, resolution)
            good, step = probe, 2 * step
    bad = guess
    while True:
        probe = min(bad - 1, math.floor(guess * (1 - step)))
        if probe < low:
            return _bisect(fits, low - 1, bad, resolution)
        if fits(probe):
            return _bisect(fits, probe, bad, resolution)
        bad, step = probe, 2 * step


#: The real edge's precision: bisection stops once the smallest batch seen to run out of
#: memory is within 1% of the largest seen to fit, a tenth of the 10% the prediction is held
#: to (issue 31), so the edge's own uncertainty cannot decide the claim; each probe is a
#: process of its own, and the last few batches to the exact edge would double their number.
OOM_EDGE_RESOLUTION = 0.01


#: probe(batch) -> one capped step (`run_capped_step` bound to a workload and a budget).
Probe = Callable[[int], CappedStep]


def oom_edge(
    workload: str,
    budget_bytes: int,
    *,
    high: int,
    low: int = 1,
    guess: int | None = None,
    params: dict[str, Any] | None = None,
    recipe: dict[str, Any] | None = None,
    seed: int = 0,
    resolution: float = OOM_EDGE_RESOLUTION,
    probe: Probe | None = None,
) -> OomEdge:
    """Bisect [low, high] for the largest batch whose real step fits `budget_bytes` (CPU).

    With `guess` (the predicted largest batch) the search starts there (`edge_from_guess`).
    A probe that fails for another reason than memory (an error, a timeout) stops the search
    with `TorchDoctorError`: it says nothing about the edge. A probe that dies without an
    answer under the cap counts as out of memory (an allocation refused where a library does
    not check), and is kept with its reason.
    """
    run = probe or (
        lambda batch: run_capped_step(
            workload, batch, budget_bytes, params=params, recipe=recipe, seed=seed
        )
    )
    probes: list[CappedStep] = []

    def fits(batch: int) -> bool:
        step = run(batch)
        probes.append(step)
        if step.outcome in (FailureKind.ERROR, FailureKind.TIMEOUT):
            raise TorchDoctorError(
                f"the capped step at batch {batch} failed for another reason than memory "
                f"({step.outcome}): {step.reason}"
            )
        return step.fits

    if guess is None:
        edge = measured_edge(fits, low=low, high=high, resolution=resolution)
    else:
        edge = edge_from_guess(fits, guess=guess, low=low, high=high, resolution=resolution)
    over = [p.batch for p in probes if not p.fits]
    return OomEdge(
        budget_bytes=budget_bytes,
        edge=edge,
        first_over=min(over) if over else None,
        high=high,
        probes=probes,
    )
