"""The records the analyzer produces; `TraceAnalysis` is the versioned top-level one."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from torchdoctor.core.records import Record

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


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DeviceTimeline(_Part):
    """Shares of the device window; definitions in `torchdoctor.analyze.devicetime`."""

    total_us: float
    busy_pct: float
    computation_pct: float
    exposed_memcpy_pct: float
    exposed_comm_pct: float
    idle_pct: float
    memcpy_pct: float
    comm_pct: float


class StepSummary(_Part):
    """ProfilerStep windows found and how the breakdown was computed."""

    count: int
    mean_us: float
    basis: str  # "device" (GPU trace: device activity attributed) or "host" (CPU-only trace)


class OpRow(_Part):
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


class LaunchStats(_Part):
    kernels: int
    launches_matched: int
    kernels_shorter_than_launch: int
    kernels_shorter_than_launch_pct: float
    launch_delay_us: dict[str, float] | None  # p50, p90, p99, max, mean
    tiny_kernel_us: float
    tiny_kernels_pct: float  # share of kernels by count
    tiny_kernel_time_pct: float  # share of kernel time


class HostOpStats(_Part):
    """Operator calls on the host and the share of their time in tiny calls (analyze.hostops)."""

    calls: int
    op_time_us: float  # total self time of all operator calls
    tiny_op_us: float
    tiny_calls_pct: float  # share of calls shorter than tiny_op_us
    tiny_op_time_pct: float  # share of op_time_us spent in those calls


class CopyStat(_Part):
    direction: str  # HtoD, DtoH, DtoD, other
    memory: str  # pinned, pageable, unknown
    count: int
    bytes: float
    time_us: float


class SyncStats(_Part):
    total: int
    per_step: float | None
    by_name: dict[str, int]
    copies: list[CopyStat]


class IdleStats(_Part):
    """Device idle gaps inside the window and what they were waiting on."""

    gaps: int
    idle_us: float
    host_wait_us: float  # the next kernel had not been launched yet when the gap began
    between_kernels_us: float  # it was already queued: launch latency / stream dependency
    unattributed_us: float  # no launch record links the next activity to the host


class CeilingsInfo(_Part):
    device: str
    device_name: str | None
    source: str
    peak_flops: dict[str, float]
    mem_bandwidth_bytes_per_s: float | None


class RankSummary(_Part):
    rank: int | None
    source: str
    device_timeline: DeviceTimeline | None
    step_breakdown: dict[str, float] | None


class TraceAnalysis(Record):
    """Where the time of one trace (or one rank of a folder of traces) went."""

    schema_name = "trace_analysis"
    # 2: OpRow.dtype/peak_dtype (per-dtype roofline), host_ops; 3: cuda_capability.
    # Version 1 and 2 records still read.
    schema_version = 3

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
    syncs: SyncStats
    idle: IdleStats | None
    ceilings: CeilingsInfo | None
    ceilings_note: str
    warnings: list[str]
    ranks: list[RankSummary]
