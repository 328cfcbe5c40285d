"""The records the analyzer produces; `TraceAnalysis` is the versioned top-level one."""

from __future__ import annotations

from pydantic import Field

from torchdoctor.analyze.fsdp_records import FsdpAnalysis
from torchdoctor.analyze.rank_records import CrossRankAnalysis
from torchdoctor.core.records import Record, SubRecord

# Step-breakdown categories, in attribution priority: an instant of a step covered by
# several activities counts once, for the first category in this tuple (as the PyTorch
# profiler's TensorBoard "step time breakdown" does).
STEP_CATEGORIES: tuple[str, ...] = (
    "Kernel",
    "Memcpy",
    "Memset",
    "Communication",
    "Runtime",
    "DataLoader",
    "CPU Exec",
    "Other",
)


class DeviceTimeline(SubRecord):
    """Shares of the device window; definitions in `torchdoctor.analyze.devicetime`."""

    total_us: float
    busy_pct: float
    computation_pct: float
    exposed_memcpy_pct: float
    exposed_comm_pct: float
    idle_pct: float
    memcpy_pct: float
    comm_pct: float


class StepSummary(SubRecord):
    """ProfilerStep windows found and how the breakdown was computed."""

    count: int
    mean_us: float
    basis: str  # "device" (GPU trace: device activity attributed) or "host" (CPU-only trace)


class OpRow(SubRecord):
    """One operator name aggregated over the trace."""

    name: str
    count: int
    self_host_us: float
    total_host_us: float
    device_us: float
    flops: float | None
    bytes: float | None
    intensity: float | None  # FLOPs per byte moved
    achieved_flops_per_s: float | None
    achieved_bytes_per_s: float | None
    bound: str | None  # "compute", "memory", "overhead", or None when it cannot be told
    # The dtype of its calls from the trace's "Input type" ("mixed" if they differ; None when
    # not recorded) and the ceilings peak the roofline placed it against (see analyze.ops).
    dtype: str | None = None
    peak_dtype: str | None = None


class LaunchStats(SubRecord):
    kernels: int
    launches_matched: int
    kernels_shorter_than_launch: int
    kernels_shorter_than_launch_pct: float
    launch_delay_us: dict[str, float] | None  # p50, p90, p99, max, mean
    tiny_kernel_us: float
    tiny_kernels_pct: float  # share of kernels by count
    tiny_kernel_time_pct: float  # share of kernel time


class HostOpStats(SubRecord):
    """Operator calls on the host and the share of their time in tiny calls (analyze.hostops)."""

    calls: int
    op_time_us: float  # total self time of all operator calls
    tiny_op_us: float
    tiny_calls_pct: float  # share of calls shorter than tiny_op_us
    tiny_op_time_pct: float  # share of op_time_us spent in those calls


class CopyStat(SubRecord):
    direction: str  # HtoD, DtoH, DtoD, other
    memory: str  # pinned, pageable, unknown
    count: int
    bytes: float
    time_us: float


class SyncStats(SubRecord):
    total: int
    per_step: float | None
    by_name: dict[str, int]
    copies: list[CopyStat]
    # Schema 4 (analyze.syncs): what the sync points inside the steps cost. None where the
    # trace has no steps or no device. `blocked_us`: host time inside them (on a GPU-bound
    # job, the queue draining: not lost time); `idle_after_us`: the device idle gaps they
    # leave (from the sync's return to the next device activity); `cost_us`: per sync point
    # the smaller of the two, the device time removing the sync could give back.
    step_us: float | None = None
    blocked_us: float | None = None
    idle_after_us: float | None = None
    cost_us: float | None = None
    grad_scaler_reads: int = 0  # GradScaler's found_inf reads, not counted as sync points
    # Schema 6. Scalar reads that waited for no device (host tensors, e.g. AdamW's CPU step
    # counters), not counted as sync points; 0 where the trace records no runtime calls.
    host_scalar_reads: int = 0
    # Schema 6. torchdoctor's own syncs (inside its TOOL_SYNC_RANGE annotation) by name, not
    # counted as the job's.
    tool_by_name: dict[str, int] = Field(default_factory=dict)


class KernelMix(SubRecord):
    """Kernel time by the units that ran it, and the GPU generation the names reveal
    (analyze.kernels). Communication kernels are left out."""

    kernel_us: float
    tensor_core_us: float  # kernels using tensor/matrix cores (any dtype, TF32 included)
    fp32_cuda_core_math_us: float  # fp32 GEMM/convolution on CUDA cores: autocast-eligible
    generation: str | None = None  # "Volta", "Ampere", ... from kernel names
    capability: tuple[int, int] | None = None
    generation_evidence: str | None = None  # a kernel name it was read from
    vendor: str | None = None  # "nvidia" or "amd" when the names tell


class IdleStats(SubRecord):
    """Device idle gaps inside the window and what they were waiting on."""

    gaps: int
    idle_us: float
    host_wait_us: float  # the next kernel had not been launched yet when the gap began
    between_kernels_us: float  # it was already queued: launch latency / stream dependency
    unattributed_us: float  # no launch record links the next activity to the host


class CeilingsInfo(SubRecord):
    device: str
    device_name: str | None
    source: str
    peak_flops: dict[str, float]
    mem_bandwidth_bytes_per_s: float | None


class AttentionStats(SubRecord):
    """Attention written by hand (matmul, softmax, matmul of matching size; analyze.attention):
    the blocks found, per profiled step, and the host time and FLOPs of their three ops."""

    blocks: int
    per_step: float | None
    time_us: float
    flops: float


class RankSummary(SubRecord):
    rank: int | None
    source: str
    device_timeline: DeviceTimeline | None
    step_breakdown: dict[str, float] | None


class TraceAnalysis(Record):
    """Where the time of one trace (or one rank of a folder of traces) went."""

    schema_name = "trace_analysis"
    # 2: OpRow.dtype/peak_dtype (per-dtype roofline), host_ops; 3: cuda_capability;
    # 4: kernels (KernelMix), cuda_capability_source, SyncStats costs; 5: cross_rank, attention;
    # 6: SyncStats.host_scalar_reads, tool_by_name; 7: fsdp. Older records still read.
    schema_version = 7

    source: str
    device_name: str | None
    rank: int | None
    world_size: int | None
    events: int
    device_timeline: DeviceTimeline | None
    step_breakdown: dict[str, float] | None
    steps: StepSummary | None
    ops: list[OpRow]
    launches: LaunchStats | None
    host_ops: HostOpStats | None = None  # schema 2
    cuda_capability: tuple[int, int] | None = None  # schema 3
    # schema 4: "deviceProperties", or "kernel names" when inferred from them (no
    # deviceProperties, as in traces before torch 1.9); None when unknown.
    cuda_capability_source: str | None = None
    kernels: KernelMix | None = None  # schema 4
    # schema 4: the DataLoader iterator class its __next__ spans name
    # ("_SingleProcessDataLoaderIter": num_workers=0; "_MultiProcessingDataLoaderIter").
    dataloader_iter: str | None = None
    syncs: SyncStats
    attention: AttentionStats | None = None  # schema 5
    idle: IdleStats | None
    ceilings: CeilingsInfo | None
    ceilings_note: str
    warnings: list[str]
    ranks: list[RankSummary]
    # schema 5: a folder of two or more ranks' traces compared (analyze.ranks); else None.
    cross_rank: CrossRankAnalysis | None = None
    # schema 7: a rank's FSDP2 all-gathers and reduce-scatters (analyze.fsdp); else None.
    fsdp: FsdpAnalysis | None = None
