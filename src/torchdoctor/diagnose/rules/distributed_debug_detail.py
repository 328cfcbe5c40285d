"""distributed_debug_detail: TORCH_DISTRIBUTED_DEBUG=DETAIL left on in a training run."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding, Prescription, make_finding

RULE_ID: Final = "distributed_debug_detail"
TITLE: Final = "torch.distributed debug checks left on"

#: The level that costs time at every collective. torch's docs ("Debugging torch.distributed
#: applications"): DETAIL wraps every process group in a wrapper that checks each collective's
#: shapes and types with another collective first, and logs DDP's runtime statistics;
#: INFO only logs at construction.
COSTLY_LEVEL: Final = "DETAIL"
#: Assumed speedup of the step's communication once the checks are off: each collective is
#: preceded by a consistency check of its own, a small collective, so up to 2x fewer
#: collectives; the docs give no figure, and their latency dominates on small tensors.
CHECKS_OFF_SPEEDUP: Final = 1.5


def check(ev: Evidence) -> Finding | None:
    d = ev.distributed
    if d is None or (d.debug or "").upper() != COSTLY_LEVEL:
        return None
    # The checks run at each collective: inside backward (DDP's all-reduce) when no trace
    # says how long the collectives took.
    comm = ev.trace.comm_share if ev.trace is not None else None
    share = comm if comm is not None else ev.phase("backward")
    if share is None or share <= 0:
        return None
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary="TORCH_DISTRIBUTED_DEBUG=DETAIL is set: every collective is checked by another "
        "collective first and DDP logs statistics, a debugging aid that slows training.",
        bottleneck="communication",
        share=share,
        local_speedup=CHECKS_OFF_SPEEDUP,
        evidence={"torch_distributed_debug": d.debug, "world_size": ev.world_size},
        prescription=Prescription(
            code_change="unset TORCH_DISTRIBUTED_DEBUG (or set it to OFF) outside debugging"
        ),
        confidence=0.7,
    )
