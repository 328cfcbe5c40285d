"""cpu_threads: more busy threads than cores, or intra-op threads left below the cores."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import EvidenceValue, Finding, Prescription, make_finding
from torchdoctor.diagnose.rules._common import bound_share, compute_share
from torchdoctor.knobs import THREADS

RULE_ID: Final = "cpu_threads"
TITLE: Final = "CPU threads do not match the cores"

#: Assumed slowdown of compute from oversubscription (threads preempting each other and
#: OpenMP barriers spinning); PyTorch's CPU performance tuning guide warns of it without a
#: figure, so a modest 1.2x keeps the bound conservative.
OVERSUBSCRIPTION_SPEEDUP: Final = 1.2


def check(ev: Evidence) -> Finding | None:
    """Each training process has `cores // processes` cores; its intra-op threads and its
    DataLoader workers share them. Threads above that share are oversubscription, threads
    below it leave cores idle; both prescribe the one count that fills the share. Where the
    workers alone fill it, one thread is all there is to give, and the rest is the loader's
    (`ranks_oversubscribed` for a job of ranks, `dataloader_wait` where the input waits)."""
    t = ev.threads
    if t is None or t.usable_cores is None or ev.is_gpu:
        return None
    cores = t.usable_cores
    procs = max(1, ev.world_size or 1)
    fair = max(1, cores // procs)  # cores each training process may use
    workers = (ev.dataloader.num_workers or 0) if ev.dataloader else 0
    target = max(1, fair - workers)  # intra-op threads that fill the share beside the workers
    if target == t.torch_threads:
        return None  # the threads are right, or as few as they go: nothing to prescribe
    base = compute_share(ev)
    if base is None:
        return None
    evidence: dict[str, EvidenceValue] = {
        "torch_threads": t.torch_threads,
        "usable_cores": cores,
        "processes": procs,
        "dataloader_workers": workers,
        "omp_num_threads": t.omp_num_threads,
    }
    if t.torch_threads > target:
        return make_finding(
            rule_id=RULE_ID,
            title=TITLE,
            summary=f"{t.torch_threads} intra-op threads x {procs} process(es) + {workers} "
            f"loader workers compete for {cores} cores.",
            bottleneck="compute",
            share=base,
            local_speedup=OVERSUBSCRIPTION_SPEEDUP,
            evidence=evidence,
            prescription=Prescription(
                knobs={THREADS.name: target},
                code_change="torch.set_num_threads(N) so threads + workers <= cores "
                "(or set OMP_NUM_THREADS)",
            ),
            confidence=0.6,
        )
    # More intra-op threads split an op's arithmetic and memory traffic, not its
    # dispatch: op time the roofline calls overhead-bound gains nothing from them.
    splittable = base * (1.0 - bound_share(ev, "overhead"))
    evidence["overhead_bound_op_share"] = round(bound_share(ev, "overhead"), 4)
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"only {t.torch_threads} intra-op thread(s) on {target} available cores "
        "(OMP_NUM_THREADS left at a launcher's default?).",
        bottleneck="compute",
        share=splittable,
        local_speedup=target / t.torch_threads,
        evidence=evidence,
        prescription=Prescription(
            knobs={THREADS.name: target}, code_change=f"torch.set_num_threads({target})"
        ),
        confidence=0.6,
    )
