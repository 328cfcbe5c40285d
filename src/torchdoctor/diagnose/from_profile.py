"""`Evidence` from an instrumented script's `ScriptProfile` (plus its trace's analysis)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from torchdoctor.diagnose.evidence import (
    CeilingEvidence,
    CopyEvidence,
    DataLoaderEvidence,
    Evidence,
    SyncEvidence,
    ThreadEvidence,
    UsageEvidence,
)
from torchdoctor.diagnose.from_trace import ceiling_evidence, trace_evidence
from torchdoctor.diagnose.stepstats import DEFAULT_WARMUP_STEPS, step_evidence

if TYPE_CHECKING:
    from torchdoctor.analyze.records import TraceAnalysis
    from torchdoctor.collect.script_profile import ScriptProfile


def _dataloader(profile: ScriptProfile) -> DataLoaderEvidence:
    if not profile.dataloaders:
        return DataLoaderEvidence(uses_dataloader=False)
    # The loader that fed the training loop is the one the loop fetched most batches from.
    dl = max(profile.dataloaders, key=lambda d: d.batches_fetched)
    return DataLoaderEvidence(
        uses_dataloader=True,
        num_workers=dl.num_workers,
        pin_memory=dl.pin_memory,
        persistent_workers=dl.persistent_workers,
        prefetch_factor=dl.prefetch_factor,
        batch_size=dl.batch_size,
    )


def _syncs(profile: ScriptProfile) -> SyncEvidence:
    total: Counter[str] = Counter()
    for counts in profile.sync_counts:
        total.update(counts)
    n = max(1, len(profile.sync_counts))
    return SyncEvidence(per_step={k: v / n for k, v in total.items()}, sites=profile.sync_sites)


def evidence_from_profile(
    profile: ScriptProfile,
    analysis: TraceAnalysis | None = None,
    *,
    ceilings: CeilingEvidence | None = None,
    warmup: int = DEFAULT_WARMUP_STEPS,
) -> Evidence:
    """What the script's instrumentation (and its profiled window, if any) showed."""
    t = profile.threads
    threads = (
        ThreadEvidence(
            torch_threads=t.torch_num_threads,
            interop_threads=t.torch_num_interop_threads,
            usable_cores=t.usable_cores or t.cpu_count,
            omp_num_threads=t.omp_num_threads,
        )
        if t is not None
        else None
    )
    h = profile.h2d
    notes = [f"collect: {e}" for e in profile.errors[:5]]
    if not profile.steps:
        notes.append("no training step was seen: step and phase rules cannot run")
    return Evidence(
        source="script",
        target=" ".join(profile.argv),
        device=profile.device,
        device_name=analysis.device_name if analysis is not None else None,
        steps=step_evidence(
            profile.steps,
            warmup=warmup,
            exclude=profile.trace_steps,
            timing_method=profile.timing_method,
        )
        if profile.steps
        else None,
        dataloader=_dataloader(profile),
        threads=threads,
        copies=CopyEvidence(
            calls=h.calls,
            pinned_calls=h.pinned_calls,
            non_blocking_calls=h.non_blocking_calls,
            bytes=h.bytes,
            seconds=h.seconds,
        ),
        syncs=_syncs(profile) if profile.steps else None,
        usage=UsageEvidence(
            forward_calls=profile.forward.calls,
            grad_forwards_without_backward=profile.forward.grad_forwards_without_backward,
            eval_mode_grad_calls=profile.forward.eval_mode_grad_calls,
            zero_grad_calls=profile.zero_grad.calls,
            zero_grad_keep_calls=profile.zero_grad.set_to_none_false_calls,
            backward_calls=profile.backward_calls,
            optimizer_steps=profile.optimizer_steps,
        ),
        trace=trace_evidence(analysis) if analysis is not None else None,
        ceilings=ceilings or (ceiling_evidence(analysis.ceilings) if analysis else None),
        world_size=profile.world_size,
        rank=profile.rank,
        notes=notes,
    )
