"""fsdp_root_only_wrap: fully_shard at the root only, one unit gathered whole."""

from __future__ import annotations

from typing import Final

from torchdoctor.analyze import FSDP_ROOT
from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import LOW_SHARE, Finding, Prescription, make_finding
from torchdoctor.knobs import FSDP_WRAP

RULE_ID: Final = "fsdp_root_only_wrap"
TITLE: Final = "One FSDP unit (root-only wrap)"

#: The exposed communication share from which the rule fires: the low-severity share
#: (findings.LOW_SHARE). With one unit nothing can overlap its all-gather or its reduce.
MIN_SHARE: Final = LOW_SHARE


def check(ev: Evidence) -> Finding | None:
    f = ev.fsdp
    if f is None or len(f.units) != 1 or f.units[0].name != FSDP_ROOT:
        return None
    share = f.share(f.exposed_comm_ms)
    if share < MIN_SHARE:
        return None
    root = f.units[0]
    whole = f"{root.unsharded_bytes / 2**20:.1f} MiB" if root.unsharded_bytes else "all"
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"only the root is sharded: the whole model ({whole} unsharded) is gathered "
        f"in one all-gather before the first layer runs and its gradients reduced after the "
        f"last, with nothing to overlap them ({f.exposed_comm_ms:.1f} ms per step exposed, "
        f"{share:.0%} of the step), and the unsharded peak is the whole model.",
        bottleneck="communication",
        share=share,
        evidence={
            "units": 1,
            "unsharded_bytes": root.unsharded_bytes,
            "unsharded_peak_bytes": f.unsharded_peak_bytes,
            "exposed_comm_ms": round(f.exposed_comm_ms, 3),
            "all_gather_ms": round(f.all_gather_ms, 3),
            "reduce_scatter_ms": round(f.reduce_scatter_ms, 3),
        },
        # Per-block units with prefetch can hide all but the first all-gather and the last
        # reduce: the limit 1/(1-f) bounds that.
        # fsdp_wrap=block makes the change at the root's call (knobs/fsdp.py), where the
        # model's repeated blocks are found; the code change is the same, written by hand.
        prescription=Prescription(
            knobs={FSDP_WRAP.name: "block"},
            code_change="fully_shard each repeated block (transformer layer) before the root: "
            "for block in model.blocks: fully_shard(block); then fully_shard(model), so each "
            "block's all-gather overlaps the previous block's compute and only one block is "
            "unsharded at a time",
        ),
        confidence=0.7,
    )
