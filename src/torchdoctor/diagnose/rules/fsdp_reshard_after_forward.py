"""fsdp_reshard_after_forward: units gathered again in backward though memory is to spare."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import LOW_SHARE, Finding, Prescription, make_finding
from torchdoctor.knobs import RESHARD_AFTER_FORWARD

RULE_ID: Final = "fsdp_reshard_after_forward"
TITLE: Final = "Parameters gathered twice (FSDP reshard after forward)"

#: fully_shard's keyword and the knob of the same name (knobs/fsdp.py).
#: The re-gathers' exposed share from which the rule fires: the low-severity share
#: (findings.LOW_SHARE, the smallest effect the tuner can prove on a quiet machine).
MIN_SHARE: Final = LOW_SHARE
#: Memory is to spare when the peak plus every re-gathered unit held from forward to backward
#: stays under this share of the limit: memory_headroom's NEAR_LIMIT (past ~90% the caching
#: allocator fragments and retries).
SPARE_BELOW: Final = 0.9


def check(ev: Evidence) -> Finding | None:
    f, m = ev.fsdp, ev.memory
    if f is None or f.backward_all_gathers <= 0 or m is None or not m.limit_bytes:
        return None
    regathered = [u for u in f.units if u.backward_all_gathers > 0]
    if any(u.unsharded_bytes is None for u in regathered):
        return None
    # Kept unsharded from forward to backward, every re-gathered unit is held at once at
    # worst: the peak grows by at most their sum.
    extra = sum(int(u.unsharded_bytes or 0) for u in regathered)
    after = (m.peak_bytes + extra) / m.limit_bytes
    if after >= SPARE_BELOW:
        return None
    share = f.share(f.exposed_backward_all_gather_ms)
    if share < MIN_SHARE:
        return None
    regather_ms = sum(u.backward_all_gather_ms for u in regathered)
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"{len(regathered)} of {len(f.units)} units are resharded after forward and "
        f"all-gathered again in backward ({f.backward_all_gathers:.0f} all-gathers, "
        f"{regather_ms:.1f} ms per step, {share:.0%} of the step exposed), though keeping them "
        f"unsharded would add at most {extra / 2**20:.1f} MiB to a peak of "
        f"{m.peak_bytes / 2**20:.1f} MiB ({after:.0%} of the {m.limit_bytes / 2**30:.1f} GiB "
        "this rank may use).",
        bottleneck="communication",
        share=share,
        evidence={
            "backward_all_gathers": round(f.backward_all_gathers, 3),
            "regathered_units": len(regathered),
            "units": len(f.units),
            "exposed_backward_all_gather_ms": round(f.exposed_backward_all_gather_ms, 3),
            "backward_all_gather_ms": round(regather_ms, 3),
            "extra_bytes": extra,
            "peak_bytes": m.peak_bytes,
            "limit_bytes": m.limit_bytes,
            "used_after": round(after, 4),
        },
        # Without the re-gathers their exposed time is gone: the limit 1/(1-f).
        prescription=Prescription(
            knobs={RESHARD_AFTER_FORWARD.name: False},
            code_change="fully_shard(block, reshard_after_forward=False) for the blocks: "
            "keep the unsharded parameters from forward to backward instead of gathering "
            "them twice",
        ),
        # The re-gathers are counted in the trace; the memory they would add is the units'
        # unsharded bytes, an upper bound on the peak's growth.
        confidence=0.8,
    )
