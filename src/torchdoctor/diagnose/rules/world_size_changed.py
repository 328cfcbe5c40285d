"""world_size_changed: a recipe run at another world size than its baseline's, whose effective
batch (and so its learning rate's meaning) changed with it."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import EvidenceValue, Finding, Prescription, make_finding

RULE_ID: Final = "world_size_changed"
TITLE: Final = "The effective batch changed with the world size"

#: Goyal et al. 2017 ("Accurate, Large Minibatch SGD", section 2.1): "when the minibatch size
#: is multiplied by k, multiply the learning rate by k", with a gradual warm-up over the first
#: epochs (their 5) when k is large. Adam-type optimizers scale closer to sqrt(k) (Malladi et
#: al. 2022); the finding names both and measures neither.
WARMUP_EPOCHS: Final = 5


def check(ev: Evidence) -> Finding | None:
    d = ev.distributed
    if d is None or d.baseline_world_size is None or ev.world_size is None:
        return None
    was, now = d.baseline_world_size, ev.world_size
    if was == now or was < 1:
        return None
    k = now / was
    batch = ev.dataloader.batch_size if ev.dataloader is not None else None
    evidence: dict[str, EvidenceValue] = {
        "baseline_world_size": was,
        "world_size": now,
        "batch_scale": round(k, 4),
        "batch_per_rank": batch,
    }
    effective = (
        f"{batch} x {was} = {batch * was} to {batch} x {now} = {batch * now} samples"
        if batch is not None
        else f"{k:g}x"
    )
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"the job runs on {now} ranks where its baseline ran on {was}: each optimizer "
        f"step averages the gradients of {effective}, so the same learning rate takes a "
        f"{'smaller' if k > 1 else 'larger'} step per sample.",
        bottleneck="other_host",
        share=0.0,  # a training-quality finding: it bounds no speed
        evidence=evidence,
        prescription=Prescription(
            code_change=f"scale the learning rate by {k:g} (linear scaling rule, Goyal et al. "
            f"2017; about sqrt({k:g}) for Adam) with a warm-up over the first "
            f"{WARMUP_EPOCHS} epochs, or keep the global batch: per-rank batch x {was}/{now}"
        ),
        confidence=0.8,
        severity="medium",
    )
