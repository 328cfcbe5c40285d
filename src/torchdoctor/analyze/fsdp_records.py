"""The records of the FSDP2 analysis (`analyze.fsdp`): one rank's all-gathers and
reduce-scatters, per sharded unit (each `fully_shard` module) and in total.

Torch-free: the diagnosis rules read them as plain data.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field

from torchdoctor.core.records import SubRecord

#: The root unit's name: fully_shard's ranges name no module for it.
ROOT: Final = "root"


class FsdpUnit(SubRecord):
    """One `fully_shard` unit (its module's name; "root" for the root) over the steps.

    Times are per step, in milliseconds. A collective's time is its execution (the
    communication thread's span on gloo); its exposed time is the part of the span from its
    issue to its end during which the rank's main thread ran no compute (it waited, or did
    FSDP's own bookkeeping); its hidden time is the part of its execution under compute.
    """

    name: str
    unsharded_bytes: int | None = Field(
        default=None, description="the unit's parameters unsharded, in the all-gathered dtype"
    )
    param_dtype: str | None = Field(default=None, description="the dtype all-gathered")
    reduce_dtype: str | None = Field(default=None, description="the dtype gradients reduce in")
    reduce_bytes: int | None = Field(
        default=None, description="the unit's unsharded gradients as reduced, in reduce_dtype"
    )
    forward_all_gathers: float = Field(ge=0, description="per step")
    backward_all_gathers: float = Field(
        ge=0, description="per step: a re-gather after a reshard in forward"
    )
    forward_prefetched: float = Field(
        ge=0, le=1, description="share of its forward all-gathers issued by a prefetch"
    )
    backward_prefetched: float = Field(ge=0, le=1)
    forward_all_gather_ms: float = 0.0
    forward_exposed_ms: float = 0.0
    forward_hidden_ms: float = 0.0
    backward_all_gather_ms: float = 0.0
    backward_exposed_ms: float = 0.0
    backward_hidden_ms: float = 0.0
    reduce_scatter_ms: float = 0.0
    reduce_scatter_exposed_ms: float = 0.0
    reduce_scatter_hidden_ms: float = 0.0


class FsdpAnalysis(SubRecord):
    """One rank's FSDP2 communication: per unit, and the step's exposed shares.

    The totals are unions over the step (an instant two collectives both leave exposed counts
    once), so they are shares of the step an Amdahl bound may use; a unit's own figures may
    overlap another's.
    """

    steps: int = Field(ge=0)
    step_ms: float
    world_size: int | None = None
    collective_events: str = Field(
        description="what timed the collectives: 'gloo:/nccl: annotations' (the communication "
        "thread's span) or 'c10d:: operators' (the issuing call only)"
    )
    units: list[FsdpUnit] = Field(default_factory=list)
    all_gather_ms: float = 0.0
    exposed_all_gather_ms: float = 0.0
    exposed_forward_all_gather_ms: float = 0.0
    exposed_backward_all_gather_ms: float = 0.0
    reduce_scatter_ms: float = 0.0
    exposed_reduce_scatter_ms: float = 0.0
    exposed_comm_ms: float = 0.0
    compute_ms: float = 0.0
    backward_all_gathers: float = Field(0.0, ge=0, description="per step, all units")
    prefetched_all_gathers: float = Field(
        0.0, ge=0, le=1, description="share of all-gathers issued by a prefetch"
    )
    unsharded_peak_bytes: int | None = Field(
        default=None,
        description="the most unsharded parameter bytes held at once (units between their "
        "all-gather and their reshard)",
    )
    notes: list[str] = Field(default_factory=list)

    def share(self, ms: float) -> float:
        """`ms` per step as a share of the mean step."""
        return min(1.0, max(0.0, ms / self.step_ms)) if self.step_ms > 0 else 0.0

    def unit(self, name: str) -> FsdpUnit | None:
        return next((u for u in self.units if u.name == name), None)
