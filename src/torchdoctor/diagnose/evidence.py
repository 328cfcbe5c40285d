"""`Evidence`: the one typed, source-neutral input every diagnosis rule reads.

A diagnosis can start from an instrumented script (`ScriptProfile`), a built-in workload run
(`RunResult`), or a profiler trace someone recorded elsewhere (`TraceAnalysis`). Adapters in
`adapters.py` turn each into `Evidence`; rules never see the source. A part that the source
could not observe is `None`, and a rule whose evidence is `None` does not fire: that is how
`diagnose TRACE` uses only the rules the trace holds evidence for.

Torch-free on purpose: rules and their tests run on plain records.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from torchdoctor.analyze import FsdpAnalysis
from torchdoctor.core.copies import CopyCounts
from torchdoctor.core.hostlines import HostLineProfile
from torchdoctor.core.records import Record, SubRecord
from torchdoctor.core.steps import Phase

EvidenceSource = Literal["script", "workload", "trace"]
OpBound = Literal["compute", "memory", "overhead", "unknown"]


class StepEvidence(SubRecord):
    """Per-step wall times (after warm-up) and each phase's share of their sum."""

    count: int = Field(ge=0, description="every step seen, warm-up included")
    measured: int = Field(ge=0, description="steps the statistics below summarize")
    median_s: float | None = None
    p95_s: float | None = None
    phase_fractions: dict[Phase, float] = Field(default_factory=dict)
    timing_method: str = "host_clock"


class DataLoaderEvidence(SubRecord):
    """The input pipeline. `uses_dataloader` False: the script batches tensors itself."""

    uses_dataloader: bool
    num_workers: int | None = None
    pin_memory: bool | None = None
    persistent_workers: bool | None = None
    prefetch_factor: int | None = None
    batch_size: int | None = None


class ThreadEvidence(SubRecord):
    torch_threads: int
    interop_threads: int | None = None
    usable_cores: int | None = None
    omp_num_threads: str | None = None


#: Host-to-device copies: how many came from pinned memory, how many were async (the record
#: the collector fills, `core.copies.CopyCounts`).
CopyEvidence = CopyCounts


class SyncEvidence(SubRecord):
    """Host synchronization points per step, by kind (item, cpu, print, ...)."""

    per_step: dict[str, float] = Field(default_factory=dict)
    sites: dict[str, int] = Field(default_factory=dict)
    time_share: float | None = Field(
        default=None, description="share of step time spent inside the sync calls (measured)"
    )
    outside_phases_share: float | None = Field(
        default=None, description="the part of time_share outside every named phase"
    )

    @property
    def total_per_step(self) -> float:
        return sum(self.per_step.values())


class UsageEvidence(SubRecord):
    """How the script used the model and optimizer (instrumented scripts only)."""

    forward_calls: int = 0
    grad_forwards_without_backward: int = 0
    eval_mode_grad_calls: int = 0
    zero_grad_calls: int = 0
    zero_grad_keep_calls: int = Field(0, description="zero_grad(set_to_none=False) calls")
    backward_calls: int = 0
    optimizer_steps: int = 0


class ConfigEvidence(SubRecord):
    """Settings known from a recipe or a trace; None where the source does not say."""

    batch_size: int | None = None
    precision: str | None = None
    compiled: bool | None = None
    channels_last: bool | None = None
    cudnn_benchmark: bool | None = None
    optimizer_impl: str | None = None
    set_to_none: bool | None = None
    checkpointing: bool | None = None
    fixed_shapes: bool | None = None


class OpEvidence(SubRecord):
    """One row of the op table: an operator's time, work and roofline class."""

    name: str
    count: int
    total_us: float
    time_frac: float = Field(description="share of all op time in the window")
    flops: float | None = None
    bytes: float | None = None
    intensity: float | None = None
    bound: OpBound = "unknown"


class TraceEvidence(SubRecord):
    """What a profiler trace says about the window it covers."""

    has_device: bool
    steps: int | None = None
    total_us: float | None = None
    busy_pct: float | None = None
    computation_pct: float | None = None
    exposed_memcpy_pct: float | None = None
    exposed_comm_pct: float | None = None
    idle_pct: float | None = None
    step_breakdown: dict[str, float] = Field(default_factory=dict)
    ops: list[OpEvidence] = Field(default_factory=list)
    time_by_bound: dict[OpBound, float] = Field(default_factory=dict)
    elementwise_time_frac: float = 0.0
    conv_time_frac: float = 0.0
    ops_per_step: float | None = None
    median_op_us: float | None = None
    launches_per_step: float | None = None
    median_kernel_us: float | None = None
    short_kernel_frac: float | None = None
    sync_points_per_step: float | None = None
    pinned_copies: int = 0
    pageable_copies: int = 0
    comm_share: float | None = None
    comm_exposed_share: float | None = None
    # Schema 3. Sync points inside the steps as shares of step time (analyze.syncs): the host
    # blocked in them, and their cost on a GPU (the device idle they leave, at most the
    # blocked time); None where the trace cannot tell.
    sync_blocked_share: float | None = None
    sync_cost_share: float | None = None
    # Shares of kernel time (analyze.kernels): on tensor/matrix cores, and fp32 GEMM or
    # convolution on the CUDA cores (what autocast would move to tensor cores).
    tensor_core_kernel_frac: float | None = None
    fp32_cuda_core_math_frac: float | None = None
    gpu_generation: str | None = Field(
        default=None, description="GPU generation read from kernel names (Volta, Ampere, ...)"
    )
    # Schema 4. Attention written by hand (analyze.attention): blocks per profiled step, and
    # the share of step time their matmul, softmax, matmul took (CPU traces only).
    handwritten_attention_per_step: float | None = None
    handwritten_attention_share: float | None = None


class StragglerEvidence(SubRecord):
    """A rank this rank waits for at the collectives (analyze.ranks), and its cause.

    `wait_share` is this rank's own wait for it, as a share of its step: time its phases
    count (inside backward, where DDP waits for the all-reduce) and its trace counts as
    communication, though no network would make it shorter (see diagnose/ranks.py).
    """

    rank: int
    cause: str = Field(description="data, compute, optimizer or other (analyze.ranks)")
    phrase: str
    wait_share: float = Field(ge=0, le=1)
    imposed_wait_ms: float
    last_fraction: float = Field(ge=0, le=1)
    excess_ms: float = Field(
        description="the straggler's time in its cause per step, minus the other ranks' median"
    )
    world_size: int


class DistributedEvidence(SubRecord):
    """A distributed rank's own settings (an instrumented torchrun rank; collect/probes/ddp.py)."""

    #: TORCH_DISTRIBUTED_DEBUG as the rank ran; None when unset (torch's OFF)
    debug: str | None = None
    #: ranks on this host; None when the launcher did not say
    local_world_size: int | None = None
    #: whether a DistributedDataParallel module searched for unused parameters every step
    find_unused_parameters: bool | None = None
    #: the world size the job's baseline ran at (a recipe tuned at another N), when known
    baseline_world_size: int | None = None


class MemoryEvidence(SubRecord):
    peak_bytes: int
    limit_bytes: int | None = None


class CompileEvidence(SubRecord):
    graph_breaks: int = 0
    recompiles: int = 0


class BatchScalingEvidence(SubRecord):
    """Median step time at two or more batch sizes (batch -> seconds)."""

    points: dict[int, float]


class CeilingEvidence(SubRecord):
    """Measured (or datasheet) peaks of the device the job ran on."""

    device: str
    device_name: str | None = None
    peak_flops: dict[str, float] = Field(default_factory=dict)
    mem_bandwidth_bytes_per_s: float | None = None
    source: str = "unknown"


class Evidence(Record):
    """Everything the rules may read; None where the source could not observe it."""

    schema_name: ClassVar[str] = "evidence"
    # 2: cuda_capability; 3: cuda_capability_inferred, TraceEvidence sync costs and kernel
    # mix; 4: straggler, host_lines, hand-written attention; 5: fsdp. Older records still
    # read.
    schema_version: ClassVar[int] = 5

    source: EvidenceSource
    target: str = ""
    device: str = "cpu"
    device_name: str | None = None
    cuda_capability: tuple[int, int] | None = Field(
        default=None,
        description="(major, minor) NVIDIA compute capability of the CUDA device; None off "
        "CUDA, on ROCm (whose numbers are gfx architectures) and when the source does not say",
    )
    cuda_capability_inferred: bool = Field(
        default=False,
        description="cuda_capability was inferred from kernel names (no deviceProperties)",
    )
    workload_kind: str | None = None
    steps: StepEvidence | None = None
    dataloader: DataLoaderEvidence | None = None
    threads: ThreadEvidence | None = None
    copies: CopyEvidence | None = None
    syncs: SyncEvidence | None = None
    usage: UsageEvidence | None = None
    config: ConfigEvidence = Field(default_factory=ConfigEvidence)
    trace: TraceEvidence | None = None
    memory: MemoryEvidence | None = None
    compile: CompileEvidence | None = None
    batch_scaling: BatchScalingEvidence | None = None
    ceilings: CeilingEvidence | None = None
    host_lines: HostLineProfile | None = Field(
        default=None, description="the steady steps' host time by Python line (sampled)"
    )
    world_size: int | None = None
    rank: int | None = None
    straggler: StragglerEvidence | None = None
    distributed: DistributedEvidence | None = None
    fsdp: FsdpAnalysis | None = Field(
        default=None, description="the rank's FSDP2 communication, from its trace (analyze.fsdp)"
    )
    notes: list[str] = Field(default_factory=list)

    @property
    def is_gpu(self) -> bool:
        return self.device.split(":", 1)[0] in ("cuda", "hip", "rocm", "gpu")

    def phase(self, name: Phase) -> float | None:
        """A phase's fraction of step time, or None when no step phases were measured."""
        if self.steps is None or not self.steps.phase_fractions:
            return None
        return self.steps.phase_fractions.get(name, 0.0)
