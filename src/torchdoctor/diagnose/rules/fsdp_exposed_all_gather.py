"""fsdp_exposed_all_gather: FSDP2's parameter all-gathers that the rank waits for."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding, Prescription, make_finding
from torchdoctor.knobs import FSDP_PREFETCH

RULE_ID: Final = "fsdp_exposed_all_gather"
TITLE: Final = "Exposed all-gather (FSDP)"

#: The knob that sets how many units ahead fully_shard's all-gathers are issued (knobs/fsdp.py).
#: Exposed all-gather share from which the rule fires: the medium-severity share
#: (findings.MEDIUM_SHARE), ddp_communication's cut for exposed gradient all-reduce.
MIN_EXPOSED_SHARE: Final = 0.10
#: Below this share of all-gathers issued by a prefetch, prefetch is taken as off: with it on,
#: every unit but the first of each pass is prefetched (7 of 9 in tests/zoo/fsdp2_train.py).
PREFETCH_ON_SHARE: Final = 0.5


def check(ev: Evidence) -> Finding | None:
    f = ev.fsdp
    if f is None or len(f.units) < 2:
        return None  # one unit: fsdp_root_only_wrap's finding
    share = f.share(f.exposed_all_gather_ms)
    if share < MIN_EXPOSED_SHARE:
        return None
    worst = max(f.units, key=lambda u: u.forward_exposed_ms + u.backward_exposed_ms)
    hidden = 1.0 - f.exposed_all_gather_ms / f.all_gather_ms if f.all_gather_ms > 0 else 0.0
    prefetching = f.prefetched_all_gathers >= PREFETCH_ON_SHARE
    if prefetching:
        knobs: dict[str, int | bool | str | None] = {}
        cure = (
            "the all-gathers are prefetched yet still waited for: a unit's compute is shorter "
            "than the next unit's all-gather; make fewer, larger units (fully_shard two or more "
            "blocks together) or give each rank more work per step, so compute covers the "
            "transfer"
        )
    else:
        knobs = {FSDP_PREFETCH.name: 1}
        cure = (
            "issue each unit's all-gather one unit ahead: "
            "block.set_modules_to_forward_prefetch([next_block]) and "
            "block.set_modules_to_backward_prefetch([previous_block]); on a device without "
            "streams (CPU, gloo) also make the unshard asynchronous "
            "(block._set_unshard_async_op(True)) so the transfer runs while this unit computes"
        )
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"the ranks wait for FSDP's parameter all-gathers {f.exposed_all_gather_ms:.1f} "
        f"ms per step ({share:.0%} of the step; {hidden:.0%} of their transfer is hidden behind "
        f"compute); {f.prefetched_all_gathers:.0%} are prefetched, and {worst.name} leaves the "
        f"most exposed ({worst.forward_exposed_ms + worst.backward_exposed_ms:.1f} ms).",
        bottleneck="communication",
        share=share,
        evidence={
            "exposed_all_gather_ms": round(f.exposed_all_gather_ms, 3),
            "exposed_forward_ms": round(f.exposed_forward_all_gather_ms, 3),
            "exposed_backward_ms": round(f.exposed_backward_all_gather_ms, 3),
            "all_gather_ms": round(f.all_gather_ms, 3),
            "hidden": round(max(0.0, hidden), 4),
            "prefetched": round(f.prefetched_all_gathers, 4),
            "units": len(f.units),
            "worst_unit": worst.name,
            "world_size": f.world_size,
        },
        # Perfect overlap hides the whole exposed share: the limit 1/(1-f).
        prescription=Prescription(knobs=knobs, code_change=cure),
        # Exposure is measured on the rank's own timeline; whether prefetch can hide it depends
        # on each unit's compute against its transfer, which the trace shows only per unit.
        confidence=0.7 if not prefetching else 0.6,
    )
