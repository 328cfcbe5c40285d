"""ranks_oversubscribed: a CPU job's ranks, with their DataLoader workers, exceed the cores."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import EvidenceValue, Finding, Prescription, make_finding
from torchdoctor.diagnose.rules._common import compute_share
from torchdoctor.knobs import NUM_WORKERS

RULE_ID: Final = "ranks_oversubscribed"
TITLE: Final = "More busy processes than cores"

#: Assumed slowdown of compute from oversubscription: cpu_threads' figure (the PyTorch CPU
#: tuning guide warns without one), and here each extra process also waits at every
#: all-reduce for the rank the scheduler left out, so it is a floor.
OVERSUBSCRIPTION_SPEEDUP: Final = 1.2


def check(ev: Evidence) -> Finding | None:
    if ev.is_gpu or ev.threads is None or ev.threads.usable_cores is None:
        return None
    d = ev.distributed
    ranks = (d.local_world_size if d is not None else None) or ev.world_size
    if d is None or ranks is None or ranks < 2:
        return None
    cores = ev.threads.usable_cores
    workers = (ev.dataloader.num_workers or 0) if ev.dataloader else 0
    busy = ranks * (1 + workers)  # each rank's main process and its loader workers
    if busy <= cores:
        return None
    share = compute_share(ev)
    if share is None:
        return None
    evidence: dict[str, EvidenceValue] = {
        "ranks_on_host": ranks,
        "dataloader_workers_per_rank": workers,
        "usable_cores": cores,
    }
    if ranks > cores:
        summary = f"{ranks} ranks share {cores} cores: they take turns, and every all-reduce "
        summary += "waits for the rank the scheduler left out."
        prescription = Prescription(
            code_change=f"torchrun --nproc_per_node {cores} (at most one rank per core)"
        )
    else:
        fair = max(0, cores // ranks - 1)
        summary = f"{ranks} ranks x (1 + {workers} DataLoader workers) = {busy} processes "
        summary += f"compete for {cores} cores."
        prescription = Prescription(
            knobs={NUM_WORKERS.name: fair},
            code_change=f"DataLoader(num_workers={fair}) per rank, so ranks x (1 + workers) "
            "<= cores",
        )
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=summary,
        bottleneck="compute",
        share=share,
        local_speedup=OVERSUBSCRIPTION_SPEEDUP,
        evidence=evidence,
        prescription=prescription,
        confidence=0.6,
    )
