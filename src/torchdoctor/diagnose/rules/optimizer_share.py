"""optimizer_share: the optimizer step is a large share of the step (use foreach / fused)."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding, Prescription, make_finding
from torchdoctor.knobs import OPTIMIZER_IMPL

RULE_ID: Final = "optimizer_share"
TITLE: Final = "The optimizer step is a large share of the step"

#: Optimizer share from which the rule fires (the medium-severity share, see findings.py).
MIN_SHARE: Final = 0.10
#: Assumed speedup of the multi-tensor (foreach) or fused implementation over the per-tensor
#: loop: torch.optim's docs call foreach "significantly more performant" by batching the
#: per-parameter launches; 2x is the conservative end for models with many small tensors.
IMPL_SPEEDUP: Final = 2.0


def check(ev: Evidence) -> Finding | None:
    share = ev.phase("optimizer")
    if share is None or share < MIN_SHARE or ev.config.optimizer_impl == "fused":
        return None
    target = "fused" if ev.is_gpu or ev.config.optimizer_impl == "foreach" else "foreach"
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"optimizer.step() takes {share:.0%} of each step.",
        bottleneck="optimizer",
        share=share,
        local_speedup=IMPL_SPEEDUP,
        evidence={"optimizer_share": round(share, 4), "optimizer_impl": ev.config.optimizer_impl},
        prescription=Prescription(
            knobs={OPTIMIZER_IMPL.name: target},
            code_change=f"construct the optimizer with {target}=True, e.g. "
            f"torch.optim.AdamW(params, {target}=True)",
        ),
        confidence=0.8,
    )
