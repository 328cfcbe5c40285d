"""lower_precision_available: fp32 math where a lower precision runs on faster units.

Two kinds of evidence, one verdict:
- the roofline: most op time compute-bound in fp32, and the ceilings' lower-precision peak
  well above the fp32 one (measured by `torchdoctor env` on this machine, so on a CPU whose
  bf16 matmul is slower than fp32 the rule stays silent);
- on a GPU trace, the kernels themselves (analyze.kernels): most kernel time in fp32 GEMMs and
  convolutions on the CUDA cores (`volta_sgemm_*`, `implicit_convolve_sgemm`, cuDNN's fp32
  engines) on a GPU with tensor cores, where autocast moves them onto the tensor cores. This
  is how the TensorBoard profiler plugin recommended AMP, and it needs no shapes in the trace.
  A trace whose matrix kernels already run on tensor cores (bf16/fp16, TF32) gets no finding.

The gain bound uses the ceilings' peak ratio (datasheet ones for a trace from elsewhere, said
so in the evidence) as the local speedup of the share it applies to.
"""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import EvidenceValue, Finding, Prescription, make_finding
from torchdoctor.diagnose.rules._common import bound_share, compute_share, pre_ampere_gpu
from torchdoctor.knobs import PRECISION

RULE_ID: Final = "lower_precision_available"
TITLE: Final = "Compute-bound fp32 where lower precision is faster"

#: Measured lower-precision peak over fp32 peak from which switching is worth a trial: under
#: 1.2x the autocast casts eat most of the gain (AMP adds a cast per op input).
MIN_PEAK_RATIO: Final = 1.2
#: Share of op time that must be compute-bound (roofline) for peak FLOP/s to matter.
MIN_COMPUTE_BOUND_SHARE: Final = 0.5
LOWER_PRECISIONS: Final = ("bf16", "fp16")
#: Share of kernel time in fp32 CUDA-core GEMM/convolution from which that work dominates the
#: device: the same majority as MIN_COMPUTE_BOUND_SHARE.
MIN_FP32_MATH_KERNEL_SHARE: Final = 0.5
#: First compute capability with tensor cores (Volta, sm_70; NVIDIA CUDA C++ Programming
#: Guide, "Warp Matrix Functions": wmma needs compute capability 7.0 or higher).
FIRST_TENSOR_CORE_CAPABILITY: Final = (7, 0)


def check(ev: Evidence) -> Finding | None:
    if ev.ceilings is None or ev.config.precision not in (None, "fp32"):
        return None
    peaks = ev.ceilings.peak_flops
    fp32 = peaks.get("fp32") or peaks.get("float32")
    if not fp32:
        return None
    best, ratio = None, 0.0
    # A GPU known to be older than Ampere has no bf16 tensor cores (the precision knob refuses
    # bf16 there): only fp16 is a candidate, whatever peak an emulated bf16 measured.
    candidates = LOWER_PRECISIONS if pre_ampere_gpu(ev) is None else ("fp16",)
    for name in candidates:
        peak = peaks.get(name) or peaks.get({"bf16": "bfloat16", "fp16": "float16"}[name])
        if peak and peak / fp32 > ratio:
            best, ratio = name, peak / fp32
    if best is None or ratio < MIN_PEAK_RATIO:
        return None
    base = compute_share(ev)
    if base is None:
        return None
    evidence: dict[str, EvidenceValue] = {}
    kernels = _fp32_kernel_share(ev)
    compute_bound = bound_share(ev, "compute")
    if kernels is not None:
        fraction = kernels
        evidence["fp32_cuda_core_math_kernel_share"] = round(kernels, 4)
        if ev.trace is not None and ev.trace.tensor_core_kernel_frac is not None:
            evidence["tensor_core_kernel_share"] = round(ev.trace.tensor_core_kernel_frac, 4)
        seen = f"{kernels:.0%} of kernel time is fp32 GEMM/convolution on the CUDA cores"
    elif compute_bound >= MIN_COMPUTE_BOUND_SHARE and not _on_tensor_cores(ev):
        fraction = compute_bound
        evidence["compute_bound_op_share"] = round(compute_bound, 4)
        seen = f"{compute_bound:.0%} of op time is compute-bound in fp32"
    else:
        return None
    where = "measured" if ev.ceilings.source.startswith("measured") else ev.ceilings.source
    if ev.cuda_capability is not None:
        evidence["cuda_capability"] = f"{ev.cuda_capability[0]}.{ev.cuda_capability[1]}"
        evidence["cuda_capability_inferred"] = ev.cuda_capability_inferred
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=(f"{seen}, and this device's {where} {best} peak is {ratio:.1f}x its fp32 peak."),
        bottleneck="compute",
        share=base * fraction,
        local_speedup=ratio,
        evidence={
            **evidence,
            f"{best}_over_fp32_peak": round(ratio, 3),
            "ceilings_source": ev.ceilings.source,
        },
        prescription=Prescription(
            knobs={PRECISION.name: best},
            code_change=f"run forward/backward under torch.autocast(device_type, dtype={best})"
            + (" with a GradScaler" if best == "fp16" else ""),
        ),
        confidence=0.7 if ev.ceilings.source.startswith("measured") else 0.5,
    )


def _has_tensor_cores(ev: Evidence) -> bool:
    """A GPU whose capability (deviceProperties, or inferred from kernel names) is Volta or
    newer, or one whose kernels already use tensor/matrix cores (ROCm: MFMA)."""
    if ev.cuda_capability is not None:
        return tuple(ev.cuda_capability) >= FIRST_TENSOR_CORE_CAPABILITY
    tr = ev.trace
    return tr is not None and bool(tr.tensor_core_kernel_frac)


def _fp32_kernel_share(ev: Evidence) -> float | None:
    """The share of kernel time autocast would move onto tensor cores, when it dominates on a
    GPU that has them; None when the kernels do not show such work."""
    tr = ev.trace
    if tr is None or not tr.has_device or tr.fp32_cuda_core_math_frac is None:
        return None
    if tr.fp32_cuda_core_math_frac < MIN_FP32_MATH_KERNEL_SHARE or not _has_tensor_cores(ev):
        return None
    return tr.fp32_cuda_core_math_frac


def _on_tensor_cores(ev: Evidence) -> bool:
    """The trace's matrix math already runs on tensor cores (more of it than on CUDA cores)."""
    tr = ev.trace
    if tr is None or tr.tensor_core_kernel_frac is None or tr.fp32_cuda_core_math_frac is None:
        return False
    return tr.tensor_core_kernel_frac > tr.fp32_cuda_core_math_frac
