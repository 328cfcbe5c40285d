"""lower_precision_available: compute-bound fp32 work where a lower precision is measured faster.

The gain is read from the measured ceilings (`torchdoctor env`), never from a datasheet
assumption: on a CPU whose bf16 matmul is slower than fp32 the rule stays silent.
"""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding, Prescription, make_finding
from torchdoctor.diagnose.rules._common import bound_share, compute_share, pre_ampere_gpu

RULE_ID: Final = "lower_precision_available"
TITLE: Final = "Compute-bound fp32 where lower precision is faster"

#: Measured lower-precision peak over fp32 peak from which switching is worth a trial: under
#: 1.2x the autocast casts eat most of the gain (AMP adds a cast per op input).
MIN_PEAK_RATIO: Final = 1.2
#: Share of op time that must be compute-bound (roofline) for peak FLOP/s to matter.
MIN_COMPUTE_BOUND_SHARE: Final = 0.5
LOWER_PRECISIONS: Final = ("bf16", "fp16")


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
    compute_bound = bound_share(ev, "compute")
    base = compute_share(ev)
    if base is None or compute_bound < MIN_COMPUTE_BOUND_SHARE:
        return None
    share = base * compute_bound
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=(
            f"{compute_bound:.0%} of op time is compute-bound in fp32, and this device's "
            f"measured {best} peak is {ratio:.1f}x its fp32 peak."
        ),
        bottleneck="compute",
        share=share,
        local_speedup=ratio,
        evidence={
            "compute_bound_op_share": round(compute_bound, 4),
            f"{best}_over_fp32_peak": round(ratio, 3),
            "ceilings_source": ev.ceilings.source,
        },
        prescription=Prescription(
            knobs={"precision": best},
            code_change=f"run forward/backward under torch.autocast(device_type, dtype={best})"
            + (" with a GradScaler" if best == "fp16" else ""),
        ),
        confidence=0.7 if ev.ceilings.source.startswith("measured") else 0.5,
    )
