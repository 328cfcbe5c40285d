"""DDP, FSDP and FSDP with CPU offload compared in step time for one FSDP2 job, at N ranks and
a bandwidth: should it shard, and from what size does sharding pay?

All three are projected from the same N = 1 step and the same microbenchmark, so they differ
only in what the strategy changes:

- FSDP: the job as it runs (`fsdp.project_fsdp` through `runner.fsdp_at`): its all-gathers and
  reduce-scatters, the optimizer on a rank's shard;
- DDP: the same model replicated (`projection.project`): every rank steps the whole model's
  optimizer, and the gradients are all-reduced in DDP's buckets (`buckets.ddp_buckets`, at
  DDP's default cap, over the parameters in the units' order: the record keeps no finer
  order) in the parameters' own dtype (DDP reduces the gradients as the parameters hold them),
  overlapped with the backward as DDP does. The forward and backward are N = 1's, computed
  as the FSDP job computed them (its mixed-precision policy's dtype: a DDP job under autocast
  computes in the same). Both are weak-scaling projections (each rank keeps N = 1's batch, as
  `fsdp_at` does), each with the same wait for the slowest rank (`projection.rank_skew`);
- FSDP with CPU offload: the shards, their gradients and the optimizer's state in host
  memory, each unit's shard copied to the device before its all-gather and its gradient
  shard back after its reduce-scatter, the optimizer stepping on the host. On a CPU job the
  device is the host: offload moves nothing and leaves the step as FSDP's, so it is not
  projected as a strategy of its own. On GPUs its copies need the host link's bandwidth and
  its optimizer the host's speed, which the study does not measure: not projected either,
  and the comparison says why. Its memory is in `memory WORKLOAD --nproc N`
  (`fsdp.compare_strategies`).

Which is faster at a world size and bandwidth is decided on the projections' 95% bands: one
strategy is faster when its band lies wholly below the other's, else neither is told apart.
"""

from __future__ import annotations

from typing import Final, Literal

from torchdoctor.core.records import SubRecord
from torchdoctor.core.shard_memory import Strategy
from torchdoctor.scale._fsdp_units import FsdpJob
from torchdoctor.scale.buckets import DEFAULT_BUCKET_CAP_MB, ddp_buckets
from torchdoctor.scale.collectives import CollectiveBench
from torchdoctor.scale.fsdp import FsdpProjection
from torchdoctor.scale.projection import ScalingModel, project
from torchdoctor.scale.worlds import MeasuredWorld

Faster = Literal["ddp", "fsdp", "neither"]
#: Why offload's step is not projected, by the job's device.
OFFLOAD_ON_CPU: Final = (
    "on the CPU the parameters already live in host memory: offload moves nothing"
)
OFFLOAD_UNMEASURED: Final = (
    "the host link's bandwidth and the optimizer's speed on the host are not measured"
)


class StrategyStep(SubRecord):
    """One strategy's step at `world_size` and a bandwidth, seconds with a 95% band; None
    with `why_not` where it is not projected."""

    strategy: Strategy
    step_s: float | None
    low_s: float | None = None
    high_s: float | None = None
    #: Communication left on the step (not hidden under the compute).
    exposed_s: float | None = None
    optimizer_s: float | None = None
    why_not: str | None = None


class StrategyComparison(SubRecord):
    """DDP, FSDP and FSDP with CPU offload at one world size and bandwidth (see the module)."""

    world_size: int
    busbw_bytes_per_s: float
    #: Whether the bandwidth is the one measured (else one asked for: another network).
    measured_bandwidth: bool
    steps: list[StrategyStep]
    faster: Faster
    #: FSDP's step over DDP's.
    fsdp_over_ddp: float


def ddp_model(base: MeasuredWorld, job: FsdpJob, bench: CollectiveBench) -> ScalingModel:
    """The job's model under DDP: its gradients in DDP's buckets, the all-reduce fitted around
    their sizes at the bench's N, the co-location slowdown and the collectives' CPU."""
    sizes = [p.numel * job.shape.parameter_bytes for u in job.shape.units for p in u.parameters]
    buckets = ddp_buckets(sizes, bucket_cap_mb=DEFAULT_BUCKET_CAP_MB)
    probe = bench.colocation
    return ScalingModel(
        mode="weak",
        base=base,
        gradient_bytes=sum(sizes),
        buckets=buckets,
        ring=bench.fit_near("all_reduce", buckets),
        ring_cpu=bench.cpu_fit_near("all_reduce", buckets),
        threads_per_core=bench.threads_per_core,
        colocation_slowdown=probe.slowdown if probe else 1.0,
        colocation_ci=probe.slowdown_ci if probe else (1.0, 1.0),
    )


def _faster(ddp: StrategyStep, fsdp: StrategyStep) -> Faster:
    if ddp.low_s is None or ddp.high_s is None or fsdp.low_s is None or fsdp.high_s is None:
        return "neither"
    if fsdp.high_s < ddp.low_s:
        return "fsdp"
    if ddp.high_s < fsdp.low_s:
        return "ddp"
    return "neither"


def compare_steps(
    fsdp: FsdpProjection, ddp: ScalingModel, backend: str, busbw: float | None
) -> StrategyComparison:
    """The three strategies at `fsdp`'s world size and bandwidth (`busbw`: the one `fsdp` was
    projected at; None: the measured one, each collective at its own fit's); `ddp` the same
    job's model under DDP (`ddp_model`)."""
    n = fsdp.world_size
    replicated = project(ddp, n, architecture="ring", busbw=busbw)
    ddp_step = StrategyStep(
        strategy="ddp",
        step_s=replicated.step_s,
        low_s=replicated.low_s,
        high_s=replicated.high_s,
        exposed_s=replicated.exposed_s + replicated.stolen_s,
        optimizer_s=replicated.optimizer_s,
    )
    fsdp_step = StrategyStep(
        strategy="fsdp",
        step_s=fsdp.step_s,
        low_s=fsdp.low_s,
        high_s=fsdp.high_s,
        exposed_s=fsdp.exposed_s,
        optimizer_s=fsdp.optimizer_s,
    )
    offload = StrategyStep(
        strategy="fsdp_offload",
        step_s=None,
        why_not=OFFLOAD_ON_CPU if backend == "gloo" else OFFLOAD_UNMEASURED,
    )
    return StrategyComparison(
        world_size=n,
        busbw_bytes_per_s=fsdp.communication.busbw_bytes_per_s,
        measured_bandwidth=busbw is None,
        steps=[ddp_step, fsdp_step, offload],
        faster=_faster(ddp_step, fsdp_step),
        fsdp_over_ddp=fsdp.step_s / ddp_step.step_s if ddp_step.step_s else float("inf"),
    )


def fsdp_pays_from(comparisons: list[StrategyComparison]) -> int | None:
    """The smallest world size from which FSDP's step is faster than DDP's at the measured
    bandwidth at every larger projected size too (None: at none of them)."""
    measured = sorted((c for c in comparisons if c.measured_bandwidth), key=lambda c: c.world_size)
    start: int | None = None
    for c in measured:
        if c.faster != "fsdp":
            start = None  # a size where FSDP is not the faster ends the run
        elif start is None:
            start = c.world_size
    return start
