"""memory_bound_elementwise: chains of elementwise ops that each read and write memory."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding, Prescription, make_finding
from torchdoctor.diagnose.rules._common import compute_share
from torchdoctor.knobs import COMPILE

RULE_ID: Final = "memory_bound_elementwise"
TITLE: Final = "Memory-bound elementwise chains (fuse them)"

#: Share of operator time in memory-bound elementwise ops from which fusion pays. Below a
#: fifth the best case (s = 2 on that share) is under a 1.1x step speedup.
MIN_ELEMENTWISE_SHARE: Final = 0.2
#: Assumed speedup of a fused chain: a chain of k elementwise ops moves ~k reads+writes
#: unfused and ~1 fused, so k >= 2 gives >= 2x on memory traffic; 2 is the conservative end.
FUSION_SPEEDUP: Final = 2.0


def check(ev: Evidence) -> Finding | None:
    tr = ev.trace
    if tr is None or ev.config.compiled:
        return None
    frac = tr.elementwise_time_frac
    base = compute_share(ev)
    if frac < MIN_ELEMENTWISE_SHARE or base is None:
        return None
    share = base * frac
    top = [o.name for o in tr.ops if o.bound == "memory"][:3]
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=(
            f"{frac:.0%} of operator time is memory-bound elementwise work that torch.compile "
            "can fuse into fewer passes over memory."
        ),
        bottleneck="memory_bandwidth",
        share=share,
        local_speedup=FUSION_SPEEDUP,
        evidence={
            "elementwise_op_time_share": round(frac, 4),
            "compute_share": round(base, 4),
            "top_memory_bound_ops": ", ".join(top) or None,
        },
        prescription=Prescription(
            knobs={COMPILE.name: "default"},
            code_change="model = torch.compile(model) to fuse elementwise chains",
        ),
        confidence=0.6,
    )
