"""pageable_h2d: host-to-device copies from pageable (not pinned) memory."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding, Prescription, make_finding
from torchdoctor.knobs import NON_BLOCKING, PIN_MEMORY

RULE_ID: Final = "pageable_h2d"
TITLE: Final = "Host-to-device copies from pageable memory"

#: Share of copies from pageable memory from which the rule fires.
MIN_PAGEABLE_FRACTION: Final = 0.5
#: Assumed copy speedup from pinned memory: pageable copies are staged through a pinned
#: bounce buffer, roughly halving bandwidth (NVIDIA, "How to Optimize Data Transfers in
#: CUDA C/C++", 2012), and pinned copies can overlap compute with non_blocking=True.
PINNED_SPEEDUP: Final = 2.0


def check(ev: Evidence) -> Finding | None:
    if ev.copies is not None and ev.copies.calls > 0 and ev.is_gpu:
        total, pageable = ev.copies.calls, ev.copies.pageable_calls
        share = ev.phase("h2d") or 0.0
    elif ev.trace is not None and ev.trace.has_device:
        total = ev.trace.pinned_copies + ev.trace.pageable_copies
        pageable = ev.trace.pageable_copies
        share = (ev.trace.exposed_memcpy_pct or 0.0) / 100.0
    else:
        return None
    if total == 0 or pageable / total < MIN_PAGEABLE_FRACTION:
        return None
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"{pageable} of {total} host-to-device copies come from pageable memory; "
        f"copies take {share:.0%} of the step.",
        bottleneck="host_device_transfer",
        share=share,
        local_speedup=PINNED_SPEEDUP,
        evidence={"pageable_copies": pageable, "copies": total, "copy_share": round(share, 4)},
        prescription=Prescription(
            knobs={PIN_MEMORY.name: True, NON_BLOCKING.name: True},
            code_change="DataLoader(..., pin_memory=True) and x.to(device, non_blocking=True)",
        ),
        confidence=0.8,
    )
