"""zero_grad_set_to_none: gradients are zero-filled instead of dropped each step."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding, Prescription, make_finding
from torchdoctor.knobs import SET_TO_NONE

RULE_ID: Final = "zero_grad_set_to_none"
TITLE: Final = "zero_grad fills gradients with zeros"

#: Assumed speedup of the time around the named phases (where zero_grad runs): dropping the
#: memset per parameter removes part of it; PyTorch's performance tuning guide lists
#: set_to_none as a modest win, so a small local factor keeps the bound honest.
LOCAL_SPEEDUP: Final = 1.25


def check(ev: Evidence) -> Finding | None:
    kept = ev.usage.zero_grad_keep_calls if ev.usage is not None else 0
    if kept == 0 and ev.config.set_to_none is not False:
        return None
    share = ev.phase("other") or 0.0
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"zero_grad(set_to_none=False) ran {kept} times: every step writes zeros "
        "into every gradient and backward then adds into them.",
        bottleneck="other_host",
        share=share,
        local_speedup=LOCAL_SPEEDUP,
        evidence={"zero_grad_keep_calls": kept, "share_outside_phases": round(share, 4)},
        prescription=Prescription(
            knobs={SET_TO_NONE.name: True}, code_change="optimizer.zero_grad(set_to_none=True)"
        ),
        confidence=0.8,
    )
