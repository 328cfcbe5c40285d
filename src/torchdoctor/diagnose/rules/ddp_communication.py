"""ddp_communication: gradient all-reduce that is not hidden behind backward."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding, Prescription, make_finding
from torchdoctor.knobs import BUCKET_CAP_MB, DDP_COMM_HOOK, GRAD_ACCUM

RULE_ID: Final = "ddp_communication"
TITLE: Final = "Exposed communication (DDP)"

#: Exposed (not overlapped with compute) communication share from which the rule fires;
#: the medium-severity share (findings.MEDIUM_SHARE).
MIN_EXPOSED_SHARE: Final = 0.10


def check(ev: Evidence) -> Finding | None:
    tr = ev.trace
    if tr is None or tr.comm_exposed_share is None:
        return None
    if ev.fsdp is not None:
        return None  # FSDP's collectives: the fsdp_* rules, whose cures are FSDP's knobs
    exposed = tr.comm_exposed_share
    if exposed < MIN_EXPOSED_SHARE:
        return None
    total = tr.comm_share or exposed
    overlap = 1.0 - exposed / total if total > 0 else 0.0
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"communication takes {total:.0%} of the window and {exposed:.0%} is not "
        f"overlapped with compute ({overlap:.0%} overlap).",
        bottleneck="communication",
        share=exposed,
        evidence={
            "comm_share": round(total, 4),
            "exposed_comm_share": round(exposed, 4),
            "overlap": round(overlap, 4),
            "world_size": ev.world_size,
        },
        prescription=Prescription(
            # Fewer, larger all-reduces, then half the bytes in each (knobs/ddp.py).
            knobs={GRAD_ACCUM.name: 2, BUCKET_CAP_MB.name: 100, DDP_COMM_HOOK.name: "fp16"},
            code_change="accumulate gradients under model.no_sync() to all-reduce less often; "
            "tune DDP bucket_cap_mb so buckets overlap backward; avoid syncs between backward "
            "and step",
        ),
        confidence=0.7,
    )
