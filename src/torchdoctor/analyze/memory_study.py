"""Measure a workload's memory at a few batch sizes and plan from it; find the measured edge.

`study_memory` is what `torchdoctor memory` runs: one steady step at each batch size
(collect/memory_owners.py), then the owners and the fit (analyze/memory.py). `measured_edge`
checks a prediction: it bisects over real batch sizes for the largest whose measured
footprint stays under a cap. On a GPU that footprint is the caching allocator's reserved
peak, the memory an out-of-memory error is raised against; on the CPU, where no allocator
refuses, the edge is defined by the same rule over the live tensors' peak.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torchdoctor.analyze.memory import phase_footprints, plan_memory
from torchdoctor.collect import measure_step_memory
from torchdoctor.core.errors import UsageError
from torchdoctor.core.memory_owners import MemoryPlan, StepMemory
from torchdoctor.knobs import Recipe
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


def measured_edge(fits: Callable[[int], bool], *, low: int, high: int) -> int:
    """The largest batch in [low, high] that `fits` (a measurement under a cap, or a real
    step that does not run out of memory under an allocator's limit).

    Bisection, so it assumes that what fits at a batch fits at every smaller one. Returns
    `low - 1` when even `low` does not fit and `high` when `high` fits.
    """
    if fits(high):
        return high
    good, bad = low - 1, high  # invariant: `good` fits (or is below low), `bad` does not
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good
