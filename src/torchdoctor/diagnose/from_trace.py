"""`TraceEvidence` and `CeilingEvidence` from a `TraceAnalysis` (the analyzer's record)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np

from torchdoctor.diagnose.evidence import (
    CeilingEvidence,
    DataLoaderEvidence,
    Evidence,
    OpBound,
    OpEvidence,
    TraceEvidence,
)

if TYPE_CHECKING:
    from torchdoctor.analyze import CeilingsInfo, OpRow, TraceAnalysis

#: aten ops that are pointwise (one output element from the same element of each input):
#: the chains torch.compile fuses into one kernel. Names from native_functions.yaml.
ELEMENTWISE_OPS: Final = frozenset(
    (
        "add",
        "add_",
        "sub",
        "sub_",
        "mul",
        "mul_",
        "div",
        "div_",
        "neg",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "pow",
        "relu",
        "relu_",
        "gelu",
        "silu",
        "sigmoid",
        "tanh",
        "threshold_backward",
        "gelu_backward",
        "silu_backward",
        "sigmoid_backward",
        "tanh_backward",
        "mish",
        "hardtanh",
        "leaky_relu",
        "clamp",
        "clamp_",
        "where",
        "masked_fill",
        "dropout",
        "native_dropout",
        "addcmul_",
        "addcdiv_",
        "lerp_",
        "copy_",
        "fill_",
        "zero_",
        "abs",
        "sin",
        "cos",
        "erf",
        "reciprocal",
        "maximum",
        "minimum",
        "eq",
        "ne",
        "gt",
        "lt",
        "ge",
        "le",
    )
)
#: Substrings that mark a convolution op (aten, cuDNN, oneDNN, MIOpen variants).
CONV_MARKERS: Final = ("conv", "cudnn_convolution", "mkldnn_convolution", "miopen_convolution")
#: Top ops kept in the evidence (the rules only read the heaviest).
TOP_OPS: Final = 20
_BOUNDS: Final[tuple[OpBound, ...]] = ("compute", "memory", "overhead")
#: Precision names (knob catalogue and recipes) -> the dtype keys of measured ceilings.
PRECISION_DTYPES: Final[dict[str, str]] = {
    "fp32": "float32",
    "float32": "float32",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
}


#: Ideal time per call (at the roofs: max(FLOPs / peak, bytes / bandwidth)) under which an
#: op's work is too small to matter: an order of magnitude below the ~10 µs of per-op eager
#: overhead (analyze.ops.OVERHEAD_CALL_US; "Making Deep Learning Go Brrrr", H. He, 2022). Such
#: an op's time is dispatch however long it measured (a loaded machine stretches it).
TINY_WORK_US: Final = 1.0
#: Op-name prefixes of autograd's own bookkeeping: the engine's per-node wrapper. Its self
#: time is the engine's, the math is in the aten ops it calls.
AUTOGRAD_WRAPPERS: Final = ("autograd::engine::evaluate_function",)


@dataclass(frozen=True)
class Roofs:
    """The roofline of one precision: its matmul peak and the memory bandwidth."""

    peak_flops: float
    bandwidth: float

    @property
    def ridge(self) -> float:
        """FLOP per byte where the two roofs meet."""
        return self.peak_flops / self.bandwidth

    def ideal_us(self, flops: float | None, nbytes: float | None) -> float | None:
        if flops is None and nbytes is None:
            return None
        return max((flops or 0.0) / self.peak_flops, (nbytes or 0.0) / self.bandwidth) * 1e6


def roofs_for(ceilings: CeilingsInfo | None, precision: str | None) -> Roofs | None:
    """The roofs of `precision` on the traced device, or None when unknown.

    The analyzer places ops against the highest peak the ceilings list, because a trace does
    not say each op's dtype. A job whose precision is known must be placed against the peak
    of that precision: on a CPU with AMX, the bf16 peak is ~8x the fp32 one, and an fp32
    GEMM measured against it would read as memory-bound at any size.
    """
    if ceilings is None or precision is None or not ceilings.mem_bandwidth_bytes_per_s:
        return None
    peak = ceilings.peak_flops.get(PRECISION_DTYPES.get(precision, precision))
    return Roofs(peak, ceilings.mem_bandwidth_bytes_per_s) if peak else None


def _row_bound(row: OpRow, roofs: Roofs | None) -> OpBound:
    """The op's roofline class under the job's own roofs (the analyzer's when unknown)."""
    bound: OpBound = row.bound if row.bound in _BOUNDS else "unknown"
    if roofs is None:
        return bound
    if row.name.startswith(AUTOGRAD_WRAPPERS):
        return "overhead"
    ideal = roofs.ideal_us(row.flops, row.bytes)
    if ideal is not None and row.count and ideal / row.count < TINY_WORK_US:
        return "overhead"
    # An analyzer that read the op's dtype from the trace placed it under that dtype's own
    # roof (`peak_dtype`): better evidence than the job-wide precision, so it stands.
    placed_by_dtype = getattr(row, "peak_dtype", None) is not None
    if bound in ("compute", "memory") and row.intensity is not None and not placed_by_dtype:
        return "compute" if row.intensity >= roofs.ridge else "memory"
    return bound


def _short(name: str) -> str:
    return name.split("::", 1)[-1]


def _op_time(row: OpRow, on_device: bool) -> float:
    """Device time on a GPU trace (where the math runs), host self time on a CPU trace."""
    return row.device_us if on_device else row.self_host_us


def _count_weighted_median(values: Sequence[float], weights: Sequence[int]) -> float | None:
    if not values or sum(weights) == 0:
        return None
    order = np.argsort(values)
    v, w = np.asarray(values)[order], np.asarray(weights)[order]
    cum = np.cumsum(w)
    return float(v[int(np.searchsorted(cum, cum[-1] / 2.0))])


def trace_evidence(ta: TraceAnalysis, *, precision: str | None = None) -> TraceEvidence:
    """The trace's evidence; with the job's `precision` known (a script or workload run
    here), ops are placed on the roofline of that precision (see `roofs_for`)."""
    on_device = ta.device_timeline is not None
    roofs = roofs_for(ta.ceilings, precision)
    bounds = [_row_bound(r, roofs) for r in ta.ops]
    times = [_op_time(r, on_device) for r in ta.ops]
    total = sum(times)
    frac = [t / total if total > 0 else 0.0 for t in times]
    by_bound: dict[OpBound, float] = {b: 0.0 for b in _BOUNDS}
    elementwise = conv = 0.0
    for row, f, bound in zip(ta.ops, frac, bounds, strict=True):
        by_bound[bound] = by_bound.get(bound, 0.0) + f
        name = _short(row.name)
        if name in ELEMENTWISE_OPS and bound in ("memory", "overhead"):
            elementwise += f
        if any(m in name for m in CONV_MARKERS):
            conv += f
    steps = ta.steps.count if ta.steps is not None and ta.steps.count > 0 else None
    calls = sum(r.count for r in ta.ops)
    per_call = [r.self_host_us / r.count for r in ta.ops if r.count]
    dt = ta.device_timeline
    breakdown = {k: v / 100.0 for k, v in (ta.step_breakdown or {}).items()}
    comm_share = dt.comm_pct / 100.0 if dt else breakdown.get("Communication")
    comm_exposed = dt.exposed_comm_pct / 100.0 if dt else breakdown.get("Communication")
    pinned = pageable = 0
    for c in ta.syncs.copies:
        if c.direction == "HtoD":
            pinned += c.count if c.memory == "pinned" else 0
            pageable += c.count if c.memory == "pageable" else 0
    ranked = sorted(zip(ta.ops, times, frac, bounds, strict=True), key=lambda t: -t[1])[:TOP_OPS]
    sync = ta.syncs
    step_us = sync.step_us if sync.step_us else None
    mix = ta.kernels if on_device else None
    kernel_us = mix.kernel_us if mix is not None and mix.kernel_us > 0 else None
    return TraceEvidence(
        has_device=on_device,
        steps=steps,
        total_us=dt.total_us if dt else None,
        busy_pct=dt.busy_pct if dt else None,
        computation_pct=dt.computation_pct if dt else None,
        exposed_memcpy_pct=dt.exposed_memcpy_pct if dt else None,
        exposed_comm_pct=dt.exposed_comm_pct if dt else None,
        idle_pct=dt.idle_pct if dt else None,
        step_breakdown=breakdown,
        ops=[
            OpEvidence(
                name=r.name,
                count=r.count,
                total_us=t,
                time_frac=f,
                flops=r.flops,
                bytes=r.bytes,
                intensity=r.intensity,
                bound=b,
            )
            for r, t, f, b in ranked
        ],
        time_by_bound={k: v for k, v in by_bound.items() if v > 0},
        elementwise_time_frac=elementwise,
        conv_time_frac=conv,
        ops_per_step=calls / steps if steps else None,
        median_op_us=_count_weighted_median(per_call, [r.count for r in ta.ops if r.count]),
        launches_per_step=(ta.launches.kernels / steps if ta.launches and steps else None),
        short_kernel_frac=(
            ta.launches.kernels_shorter_than_launch_pct / 100.0 if ta.launches else None
        ),
        sync_points_per_step=ta.syncs.per_step,
        pinned_copies=pinned,
        pageable_copies=pageable,
        comm_share=comm_share if comm_share else None,
        comm_exposed_share=comm_exposed if comm_exposed else None,
        sync_blocked_share=_ratio(sync.blocked_us, step_us),
        sync_cost_share=_ratio(sync.cost_us, step_us) if on_device else None,
        tensor_core_kernel_frac=_ratio(mix.tensor_core_us, kernel_us) if mix else None,
        fp32_cuda_core_math_frac=_ratio(mix.fp32_cuda_core_math_us, kernel_us) if mix else None,
        gpu_generation=mix.generation if mix else None,
        handwritten_attention_per_step=ta.attention.per_step if ta.attention else None,
        handwritten_attention_share=_attention_share(ta, on_device),
    )


def _attention_share(ta: TraceAnalysis, on_device: bool) -> float | None:
    """The step share of the hand-written attention's ops: their host time over the profiled
    steps' on CPU, where the host runs them; None on a device, where host time is launches."""
    att, steps = ta.attention, ta.steps
    if att is None or on_device or steps is None or steps.count <= 0:
        return None
    return _ratio(att.time_us, steps.count * steps.mean_us)


def _ratio(part: float | None, whole: float | None) -> float | None:
    return min(1.0, part / whole) if part is not None and whole else None


def ceiling_evidence(info: CeilingsInfo | None) -> CeilingEvidence | None:
    if info is None:
        return None
    return CeilingEvidence(
        device=info.device,
        device_name=info.device_name,
        peak_flops=dict(info.peak_flops),
        mem_bandwidth_bytes_per_s=info.mem_bandwidth_bytes_per_s,
        source=info.source,
    )


def device_of_trace(ta: TraceAnalysis) -> str:
    """'cuda' for a trace with device activity (ROCm traces use the cuda device type too)."""
    return "cuda" if ta.device_timeline is not None else "cpu"


def trace_cuda_capability(ta: TraceAnalysis) -> tuple[int, int] | None:
    """The traced GPU's NVIDIA compute capability, as the analyzer read it from the trace's
    `deviceProperties` (computeMajor/computeMinor), or inferred from its kernel names when
    the trace has no deviceProperties (`cuda_capability_source`); None on CPU-only and ROCm
    traces and in analyses written before it was recorded (schema < 3)."""
    return ta.cuda_capability if ta.device_timeline is not None else None


def evidence_from_trace(ta: TraceAnalysis, *, target: str | None = None) -> Evidence:
    """Evidence from a trace alone (recorded here or elsewhere): only what the trace shows."""
    notes = [f"trace analysis: {w}" for w in ta.warnings[:5]]
    if ta.ceilings is None or "inferred" in ta.ceilings_note:
        notes.append(ta.ceilings_note)
    if ta.cuda_capability_source == "kernel names" and ta.cuda_capability is not None:
        generation = ta.kernels.generation if ta.kernels is not None else None
        notes.append(
            f"compute capability {ta.cuda_capability[0]}.{ta.cuda_capability[1]} "
            f"({generation}) is inferred from kernel names: the trace has no deviceProperties"
        )
    return Evidence(
        source="trace",
        target=target or ta.source,
        device=device_of_trace(ta),
        device_name=ta.device_name,
        cuda_capability=trace_cuda_capability(ta),
        cuda_capability_inferred=ta.cuda_capability_source == "kernel names",
        trace=trace_evidence(ta),
        # The iterator the DataLoader spans name says whether it loads in worker processes.
        dataloader=DataLoaderEvidence(uses_dataloader=True, num_workers=0)
        if ta.dataloader_iter == "_SingleProcessDataLoaderIter"
        else None,
        ceilings=ceiling_evidence(ta.ceilings),
        world_size=ta.world_size,
        rank=ta.rank,
        fsdp=ta.fsdp,
        notes=notes,
    )
