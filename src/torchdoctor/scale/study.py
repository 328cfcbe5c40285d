"""The scaling study's record (`ScalingStudy`) and how it is assembled from what each world
size's jobs left in the run folder.

Per world size N: the measured step (the slowest rank's), its speedup and efficiency, the
Karp-Flatt serial fraction, the step the model projects from N=1 and the collectives measured
at N (ratio projected/measured), and the gap to linear scaling split into its parts (the
waterfall). The waterfall is made of per-step means, so its parts add up to the gap exactly:
ideal is the N=1 step (weak scaling) or the N=1 step over N (strong scaling), and each phase's
excess over its ideal share is one bar. Where the microbenchmark measured how much slower ranks
compute all at once than alone (the co-location slowdown, `collectives.ColocationProbe`), that
share of every phase's excess is taken out of the phase's bar into a bar of its own: ranks
sharing a machine's cores and memory is neither communication nor the phase's own fault. The
backward's excess, less that and less the ranks' waits for a later rank
(`MeasuredWorld.rank_wait_s`: DDP waits for the all-reduce inside the backward pass, and a
rank that arrives early waits there for the last), is the exposed communication. Those waits go
to the skew bar, with the job's mean step (the slowest rank's, step by step) over the ranks'
mean step: waiting for a straggler is the straggler's cost, not the network's.
"""

from __future__ import annotations

from typing import ClassVar, Final

from pydantic import Field

from torchdoctor.core.load import MachineLoad
from torchdoctor.core.records import Record, SubRecord
from torchdoctor.core.steps import Phase
from torchdoctor.scale.collectives import CollectiveBench
from torchdoctor.scale.fsdp import FsdpProjection
from torchdoctor.scale.projection import Projection, ScalingModel, project
from torchdoctor.scale.strategy_steps import StrategyComparison
from torchdoctor.scale.worlds import MeasuredWorld, ScalingMode, karp_flatt, speedup

#: The waterfall's bars that others read (benchmarks, the report): compute, co-location,
#: exposed communication, optimizer, data, skew, in that order.
COMPUTE_BAR: Final = "compute (forward, other)"
COLOCATION_BAR: Final = "ranks sharing the machine (co-location slowdown)"
COMMUNICATION_BAR: Final = "exposed communication (in backward, waits excluded)"
SKEW_BAR: Final = "skew and waits for the slowest rank"


class GapPart(SubRecord):
    """One bar of the gap-to-linear waterfall: seconds per step above the ideal."""

    label: str
    seconds: float


class WorldResult(SubRecord):
    """One measured world size against linear scaling and against the model."""

    world_size: int
    step_s: float
    step_ci: tuple[float, float]
    samples_per_s: float | None
    speedup: float
    efficiency: float
    serial_fraction: float | None
    ideal_s: float
    waterfall: list[GapPart]
    projected: Projection | None = None
    projected_over_measured: float | None = None


class ScalingStudy(Record):
    """`torchdoctor scale`: every world size measured, the model, and its projections."""

    schema_name: ClassVar[str] = "scaling_study"

    target: str
    kind: str
    mode: ScalingMode
    backend: str
    threads_per_rank: int
    nnodes: int = 1
    worlds: list[WorldResult]
    benches: list[CollectiveBench]
    model: ScalingModel | None = None
    projections: list[Projection]
    #: An FSDP2 job's steps projected from N = 1 and the all-gather/reduce-scatter fits: at
    #: each measured N with a microbenchmark, then at the sizes and bandwidths asked.
    fsdp: list[FsdpProjection] = Field(default_factory=list)
    #: Beside each FSDP projection, the same job under DDP and under FSDP with CPU offload in
    #: step time (`strategy_steps`); and the smallest N from which FSDP is the faster at the
    #: measured bandwidth (None: at no size projected).
    strategies: list[StrategyComparison] = Field(default_factory=list)
    fsdp_pays_from: int | None = None
    warnings: list[str]
    machine_load: MachineLoad | None = None


def waterfall(
    base: MeasuredWorld, world: MeasuredWorld, mode: ScalingMode, slowdown: float = 1.0
) -> tuple[float, list[GapPart]]:
    """(the ideal mean step, the parts of the gap to it): see the module. `slowdown`: the
    co-location slowdown measured at this world size (1: none measured)."""
    share = 1.0 / world.world_size if mode == "strong" else 1.0
    b, w = base.phases, world.phases
    slow = slowdown - 1.0 if world.world_size > 1 else 0.0

    def excess(*phases: Phase) -> float:
        return sum(w.get(p, 0.0) - (1.0 + slow) * share * b.get(p, 0.0) for p in phases)

    ideal = share * sum(b.values())
    parts = [
        GapPart(label=COMPUTE_BAR, seconds=excess("forward", "other")),
        GapPart(label=COLOCATION_BAR, seconds=slow * ideal),
        GapPart(label=COMMUNICATION_BAR, seconds=excess("backward") - world.rank_wait_s),
        GapPart(label="optimizer", seconds=excess("optimizer")),
        GapPart(label="data", seconds=excess("data_wait", "h2d")),
        GapPart(
            label=SKEW_BAR,
            seconds=world.job_step_mean_s - world.rank_step_s + world.rank_wait_s,
        ),
    ]
    return ideal, parts


def world_result(
    base: MeasuredWorld, world: MeasuredWorld, mode: ScalingMode, model: ScalingModel | None
) -> WorldResult:
    up = speedup(base.step_s, world.step_s, world.world_size, mode)
    slowdown = model.colocation_slowdown if model is not None else 1.0
    ideal, parts = waterfall(base, world, mode, slowdown)
    projected = project(model, world.world_size) if model is not None else None
    return WorldResult(
        world_size=world.world_size,
        step_s=world.step_s,
        step_ci=world.step_ci,
        samples_per_s=world.samples_per_s,
        speedup=up,
        efficiency=up / world.world_size,
        serial_fraction=karp_flatt(up, world.world_size),
        ideal_s=ideal,
        waterfall=parts,
        projected=projected,
        projected_over_measured=projected.step_s / world.step_s if projected else None,
    )
