"""constant_to_device: the same host tensor is copied to the device again every step."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import EvidenceValue, Finding, Prescription, make_finding

RULE_ID: Final = "constant_to_device"
TITLE: Final = "A constant tensor is moved to the device inside the loop"

#: Copies of constants per step from which the rule fires: the collector already asks a
#: source to repeat over `collect.probes.constants.CONSTANT_MIN_STEPS` steps, so any is the
#: pattern; its severity follows from the time it costs.
MIN_COPIES_PER_STEP: Final = 1.0
CONFIDENCE: Final = 0.9  # the same unchanged tensor object, seen copied step after step

SNIPPET: Final = """\
table = table.to(device)  # once, before the loop
for batch in loader:
    ...  # use `table` here as is: no table.to(device) inside the loop
"""


def check(ev: Evidence) -> Finding | None:
    copies = ev.copies
    if copies is None or not copies.constant_copies or ev.steps is None or not ev.steps.count:
        return None
    per_step = copies.constant_copies / ev.steps.count
    if per_step < MIN_COPIES_PER_STEP:
        return None
    # Their part of the copy time, by bytes: the host-to-device phase is what copies cost.
    h2d = ev.phase("h2d") or 0.0
    share = h2d * copies.constant_bytes / copies.bytes if copies.bytes else 0.0
    top = max(copies.constant_sites.items(), key=lambda kv: kv[1], default=None)
    evidence: dict[str, EvidenceValue] = {
        "constant_tensors": copies.constant_sources,
        "constant_copies_per_step": round(per_step, 2),
        "constant_bytes_per_step": round(copies.constant_bytes / ev.steps.count),
        "h2d_share": round(h2d, 4),
    }
    if top is not None:
        evidence["top_site"] = top[0]
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=(
            f"{copies.constant_sources} unchanged host tensor(s) are copied to the device "
            f"{per_step:.1f} times per step" + (f", at {top[0]}." if top else ".")
        ),
        bottleneck="host_device_transfer",
        share=share,
        evidence=evidence,
        prescription=Prescription(
            code_change="move the constant tensor to the device once, before the loop",
            site=top[0] if top else None,
            snippet=SNIPPET,
        ),
        confidence=CONFIDENCE,
    )
