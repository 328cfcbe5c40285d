"""rank_straggler: the other ranks wait at the collectives for one rank that is late."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Bottleneck, Finding, Prescription, make_finding
from torchdoctor.knobs import NUM_WORKERS

RULE_ID: Final = "rank_straggler"
TITLE: Final = "One rank holds the others back"

#: The wait share from which the rule fires: the straggler cut of analyze.ranks
#: (STRAGGLER_MIN_WAIT_SHARE, 5%, the dataloader_wait rule's cut: the others wait on the
#: straggler as a step waits on its input). Repeated here so the rule reads evidence only.
MIN_WAIT_SHARE: Final = 0.05

#: The straggler's cause (analyze.rank_records.StragglerCause) -> the bottleneck it is.
CAUSE_BOTTLENECK: Final[dict[str, Bottleneck]] = {
    "data": "data_loading",
    "compute": "compute",
    "optimizer": "optimizer",
    "other": "other_host",
}
_CURES: Final[dict[str, str]] = {
    "data": "make rank {r}'s input as fast as the others': more DataLoader workers on it, its "
    "shard on storage as fast as theirs, no extra per-batch work on it alone",
    "compute": "give rank {r} the same work and the same device speed as the others: an even "
    "shard (same batch and sequence lengths), no extra work on it alone, no slower or "
    "shared device or core under it",
    "optimizer": "give rank {r} the same optimizer work as the others (no extra parameters, "
    "logging or checkpointing on it alone)",
    "other": "move rank {r}'s extra host work (logging, evaluation, checkpoints) out of the "
    "step, or do it on every rank in the same step",
}


def check(ev: Evidence) -> Finding | None:
    s = ev.straggler
    if s is None or s.wait_share < MIN_WAIT_SHARE:
        return None
    cure = _CURES.get(s.cause, _CURES["other"]).format(r=s.rank)
    knobs: dict[str, int | bool | str | None] = {}
    if s.cause == "data":
        knobs[NUM_WORKERS.name] = 2
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"{s.phrase}: the other ranks wait {s.imposed_wait_ms:.1f} ms per step for it "
        f"at the collectives ({s.wait_share:.0%} of their step), time that looks like "
        "communication but that no faster network would remove.",
        bottleneck=CAUSE_BOTTLENECK.get(s.cause, "other_host"),
        share=s.wait_share,
        evidence={
            "straggler_rank": s.rank,
            "cause": s.cause,
            "wait_share": round(s.wait_share, 4),
            "imposed_wait_ms": round(s.imposed_wait_ms, 3),
            "last_at_collectives": round(s.last_fraction, 4),
            "excess_ms": round(s.excess_ms, 3),
            "world_size": s.world_size,
        },
        prescription=Prescription(knobs=knobs, code_change=cure),
        # Who is late is measured at every collective; the cause is inferred from which of
        # its phases exceeds the others', which a busy host can blur.
        confidence=0.8,
    )
