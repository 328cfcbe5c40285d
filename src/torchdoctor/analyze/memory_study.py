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


def measured_edge(measure: Measure, cap_bytes: int, *, low: int, high: int) -> int:
    """The largest batch in [low, high] whose measured footprint is at most `cap_bytes`.

    Bisection, so it assumes the footprint grows with the batch. Returns `low - 1` when even
    `low` does not fit and `high` when `high` fits.
    """
    if footprint(measure(high)) <= cap_bytes:
        return high
    fits, over = low - 1, high  # invariant: fits fits (or is below low), over does not
    while over - fits > 1:
        mid = (fits + over) // 2
        if footprint(measure(mid)) <= cap_bytes:
            fits = mid
        else:
            over = mid
    return fits
