"""memory_headroom: peak memory near the device limit, or far below it."""

from __future__ import annotations

from typing import Final

from torchdoctor.core.gpu import sm_name
from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import EvidenceValue, Finding, Prescription, make_finding
from torchdoctor.diagnose.rules._common import pre_ampere_gpu
from torchdoctor.knobs import BATCH_SIZE, CHECKPOINTING, PRECISION

RULE_ID: Final = "memory_headroom"
TITLE: Final = "Memory headroom"

#: Peak/limit from which the job is near the limit: the caching allocator fragments, so
#: runs past ~90% of device memory see allocator retries and OOMs on a longer sequence.
NEAR_LIMIT: Final = 0.9
#: Peak/limit below which a larger batch fits with room to spare (at least 2x the batch).
FAR_BELOW: Final = 0.25


def check(ev: Evidence) -> Finding | None:
    m = ev.memory
    if m is None or not m.limit_bytes or m.peak_bytes <= 0:
        return None
    used = m.peak_bytes / m.limit_bytes
    evidence: dict[str, EvidenceValue] = {
        "peak_bytes": m.peak_bytes,
        "limit_bytes": m.limit_bytes,
        "used": round(used, 4),
    }
    if used >= NEAR_LIMIT:
        return _near_limit(ev, used, evidence)
    if used < FAR_BELOW and ev.config.batch_size and ev.is_gpu:
        # Only on an accelerator: on CPU the limit is host RAM and a larger batch does not
        # raise throughput the same way; the batch-size finding there is framework_overhead's.
        return make_finding(
            rule_id=RULE_ID,
            title="Memory far below the limit",
            summary=f"peak memory is {used:.0%} of the limit: a larger batch fits.",
            bottleneck="framework_overhead",
            share=0.0,
            severity="info",
            evidence=evidence,
            prescription=Prescription(
                knobs={BATCH_SIZE.name: ev.config.batch_size * 2},
                code_change="raise the batch size (rescale the learning rate)",
            ),
            confidence=0.7,
        )
    return None


def _near_limit(ev: Evidence, used: float, evidence: dict[str, EvidenceValue]) -> Finding:
    knobs: dict[str, int | bool | str | None] = {CHECKPOINTING.name: True}
    summary = f"peak memory is {used:.0%} of the limit: one longer batch away from OOM."
    code_change = (
        "activation checkpointing (torch.utils.checkpoint) or autocast to halve activation memory"
    )
    if ev.config.precision in (None, "fp32"):
        # bf16 and fp16 both store activations in 2 bytes; bf16 needs no loss scaling, but a
        # GPU before Ampere has no bf16 tensor cores (the precision knob refuses it there).
        old = pre_ampere_gpu(ev)
        knobs[PRECISION.name] = "bf16" if old is None else "fp16"
        if old is not None:
            sm = sm_name(old)
            summary += f" This GPU is {sm} (no native bf16 before sm_80), so fp16 is prescribed."
            code_change = (
                "activation checkpointing (torch.utils.checkpoint) or fp16 autocast with a "
                "torch.amp.GradScaler to halve activation memory (bf16 needs sm_80+; this GPU "
                f"is {sm})"
            )
            evidence = {**evidence, "cuda_capability": sm}
    return make_finding(
        rule_id=RULE_ID,
        title="Memory near the limit",
        summary=summary,
        bottleneck="compute",
        share=0.0,
        severity="medium",
        evidence=evidence,
        prescription=Prescription(knobs=knobs, code_change=code_change),
        confidence=0.9,
    )
