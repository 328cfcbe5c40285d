"""Memory per rank of a model sharded with FSDP2 (`fully_shard`), before any GPU is bought.

`ModelShape` is what the arithmetic needs of a model, read from its parameters without their
values (a model built on the `meta` device or under `FakeTensorMode` has the same shapes): each
`fully_shard` unit's parameters (their first dimension, the one FSDP2 shards, and their size),
the buffers (replicated, never sharded), the optimizer's kind and its state per parameter.
`RankMemory` is one rank's memory at N ranks and one batch, owner by owner; `ShardPlan` holds
it at each N asked, the activations' fit against the batch, and the largest batch per rank
under a budget. analyze/shard_memory.py computes them; collect/shard_memory.py reads the shape
and measures the activations on a fake step.

The records are here, in `core`, so the collector, the analysis, the report and the CLI share
them without importing one another. Nothing here imports torch.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from torchdoctor.core.memory_owners import LinearFit
from torchdoctor.core.records import Record, SubRecord


class ShardedParameter(SubRecord):
    """One parameter as FSDP2 shards it: along its first dimension, padded to N rows."""

    name: str
    #: Rows along dim 0 (1 for a 0-d parameter).
    rows: int
    numel: int


class ShardUnit(SubRecord):
    """The parameters one `fully_shard` call owns: all-gathered together before its forward
    and its backward, freed together after them."""

    #: The module's qualified name ("" for the root, which owns what no other unit does).
    name: str
    parameters: list[ShardedParameter]

    @property
    def numel(self) -> int:
        return sum(p.numel for p in self.parameters)

    def shard_numel(self, world_size: int) -> int:
        """Elements of this unit on one rank at `world_size`: each parameter's
        ceil(rows / N) rows (FSDP2 pads dim 0 to a multiple of N, so every rank holds as
        many)."""
        return sum(-(-p.rows // world_size) * (p.numel // max(1, p.rows)) for p in self.parameters)

    def padded_numel(self, world_size: int) -> int:
        """Elements of this unit all-gathered at `world_size` (the padding included)."""
        return self.shard_numel(world_size) * world_size


class ModelShape(SubRecord):
    """What the per-rank arithmetic needs of a model and its optimizer (bytes and counts)."""

    #: The non-root units first, in the model's order; the root last.
    units: list[ShardUnit]
    #: Bytes of one element of the sharded parameters (the model's own dtype: fp32 is 4).
    parameter_bytes: int
    #: Buffers' bytes: FSDP2 leaves buffers whole on every rank.
    buffers_bytes: int
    #: The optimizer's class name, its state tensors per parameter element (Adam 2, SGD with
    #: momentum 1), their element size, and its per-parameter scalars (Adam's `step`).
    optimizer: str
    states_per_element: int
    state_bytes: int
    scalar_states_per_parameter: int = 0
    scalar_state_bytes: int = 4

    @property
    def numel(self) -> int:
        return sum(u.numel for u in self.units)

    @property
    def parameter_count(self) -> int:
        return sum(len(u.parameters) for u in self.units)


class BackwardMoment(SubRecord):
    """One moment of the step, from the fake steps: the activations and temporaries alive then
    against the batch, and the share of the parameters' elements whose gradients had landed
    (whose shards a rank holds then under FSDP2)."""

    activations: LinearFit
    gradients_done: float


class RankMemory(SubRecord):
    """One rank's memory at `world_size` ranks and `batch` samples per rank (bytes).

    The step peaks in the forward and backward or in the optimizer's step (`peak_bytes` is the
    larger). In the backward the root's and the largest unit's parameters are unsharded (the
    latter `prefetch + 1` times at N >= 2), and at each moment the fake steps saw the
    activations alive then and the gradient shards landed by then are added (no gradient is
    held when the step begins: `zero_grad(set_to_none=True)`, the default, freed the last
    step's); the largest moment binds. In the optimizer's step every gradient shard is held
    beside the parameters and the state.
    """

    world_size: int
    batch: int
    parameters_bytes: int
    gradients_bytes: int
    optimizer_state_bytes: int
    buffers_bytes: int
    #: The root's parameters and the largest other unit's (times prefetch + 1 at N >= 2),
    #: unsharded in the mixed-precision policy's parameter dtype.
    unsharded_bytes: int
    #: Activations and the backward's temporaries at `batch`, and the gradient shards held,
    #: at the backward's binding moment.
    activations_bytes: int
    gradients_held_bytes: int = 0
    backward_peak_bytes: int
    optimizer_peak_bytes: int
    #: The larger of the two: the rank's peak.
    peak_bytes: int


#: Ways of training at N ranks that `memory --nproc` sets side by side.
Strategy = Literal["ddp", "fsdp", "fsdp_offload"]


class StrategyCost(SubRecord):
    """One way of training at N ranks: each rank's device and host memory and the bytes its
    links carry per step (scale/fsdp.py, `compare_strategies`)."""

    strategy: Strategy
    world_size: int
    batch: int
    device_bytes: int
    host_bytes: int
    #: Bytes over the network link per step and rank.
    network_bytes: float
    #: Bytes between host and device per step and rank (offload's copies).
    host_link_bytes: float


class ShardPlan(Record):
    """Memory per rank of a workload sharded over N ranks, estimated without materialising it.

    The parameters, gradients and optimizer state come from the shapes by arithmetic; the
    activations from fake steps (`FakeTensorMode`) at two batch sizes, fitted as
    fixed + per_sample * batch. With a budget, the largest batch per rank whose peak fits it.
    """

    schema_name: ClassVar[str] = "shard_plan"
    schema_version: ClassVar[int] = 1

    workload: str
    params: dict[str, int | float | str] = Field(default_factory=dict)
    #: Parameters of the model (elements), tied ones once.
    parameters: int
    shape: ModelShape
    #: The mixed-precision policy's parameter dtype (what units are all-gathered in and the
    #: forward computes in) and its element size.
    param_dtype: str
    param_dtype_bytes: int
    #: Units all-gathered ahead of the one computing (FSDP2's default backward prefetch: 1).
    prefetch: int
    #: The activations and temporaries at the fake steps' peak, against the batch.
    activations_fit: LinearFit
    #: The moments that may bind (none has fewer activations, slope and gradients than
    #: another), the peak's among them.
    moments: list[BackwardMoment] = Field(default_factory=list)
    #: Each N at the batch shown: `batch`, or the largest that fits, or 1.
    ranks: list[RankMemory]
    budget_bytes: int | None = None
    #: The largest batch per rank under the budget at each N (0: not one sample fits).
    max_batch: dict[int, int] = Field(default_factory=dict)
    #: DDP, FSDP and FSDP with CPU offload at each N, at the batch shown there.
    strategies: list[StrategyCost] = Field(default_factory=list)
    #: Seconds the estimate took (building the fake model, its fake steps, the arithmetic).
    wall_s: float

    def fits(self, world_size: int) -> bool | None:
        """Whether a batch of one fits the budget at `world_size` (None: no budget given)."""
        if self.budget_bytes is None:
            return None
        return self.max_batch.get(world_size, 0) >= 1
