"""`Evidence` from an instrumented script's `ScriptProfile` (plus its trace's analysis)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Final

from torchdoctor.diagnose.evidence import (
    CeilingEvidence,
    ConfigEvidence,
    DataLoaderEvidence,
    DistributedEvidence,
    Evidence,
    MemoryEvidence,
    SyncEvidence,
    ThreadEvidence,
    UsageEvidence,
)
from torchdoctor.diagnose.from_trace import ceiling_evidence, trace_evidence
from torchdoctor.diagnose.step_evidence import DEFAULT_WARMUP_STEPS, steady_steps, step_evidence

#: autocast dtypes (as the instrumentation records them) -> precision names.
AUTOCAST_PRECISION: Final = {"bfloat16": "bf16", "float16": "fp16"}


def script_precision(profile: ScriptProfile) -> str:
    """The precision the script's model computes in: its autocast dtype when it entered an
    autocast region inside its steps, else torch's default float32. (A model cast with
    `.to(bfloat16)` is not seen and reads as fp32.)"""
    for dtype in profile.autocast_dtypes:
        if dtype in AUTOCAST_PRECISION:
            return AUTOCAST_PRECISION[dtype]
    return "fp32"


if TYPE_CHECKING:
    from torchdoctor.analyze import TraceAnalysis
    from torchdoctor.collect import ScriptProfile


def _dataloader(profile: ScriptProfile) -> DataLoaderEvidence:
    if not profile.dataloaders:
        return DataLoaderEvidence(uses_dataloader=False)
    # The loader that fed the training loop is the one the loop fetched most batches from.
    dl = max(profile.dataloaders, key=lambda d: d.batches_fetched)
    # Its settings that the evidence keeps, by the evidence's own field names.
    settings = dl.model_dump(include=set(DataLoaderEvidence.model_fields) - {"uses_dataloader"})
    return DataLoaderEvidence(uses_dataloader=True, **settings)


def _syncs(profile: ScriptProfile, *, warmup: int) -> SyncEvidence:
    total: Counter[str] = Counter()
    for counts in profile.sync_counts:
        total.update(counts)
    n = max(1, len(profile.sync_counts))
    time_share = outside_share = None
    # Time inside sync calls as a share of the same steady steps the phase shares describe
    # (a ratio of sums, like `step_evidence.phase_fractions`).
    kept = steady_steps(profile.steps, warmup=warmup, exclude=profile.trace_steps)
    step_s = sum(s.total_s for s in kept)
    if profile.sync_seconds and step_s > 0:
        positions = {s.index: i for i, s in enumerate(profile.steps)}
        at = [positions[s.index] for s in kept if positions[s.index] < len(profile.sync_seconds)]
        time_share = min(1.0, sum(profile.sync_seconds[i] for i in at) / step_s)
        if len(profile.sync_outside_seconds) == len(profile.sync_seconds):
            outside = sum(profile.sync_outside_seconds[i] for i in at)
            outside_share = min(time_share, outside / step_s)
    return SyncEvidence(
        per_step={k: v / n for k, v in total.items()},
        sites=profile.sync_sites,
        time_share=time_share,
        outside_phases_share=outside_share,
    )


def _optimizer_impl(profile: ScriptProfile) -> str | None:
    """The optimizer implementation when one kind stepped (the slowest when several did,
    since that is the one a fix would change)."""
    for impl in ("for_loop", "foreach", "fused"):
        if impl in profile.optimizer_impls:
            return impl
    return None


def evidence_from_profile(
    profile: ScriptProfile,
    analysis: TraceAnalysis | None = None,
    *,
    ceilings: CeilingEvidence | None = None,
    warmup: int = DEFAULT_WARMUP_STEPS,
    cuda_capability: tuple[int, int] | None = None,
    memory_limit_bytes: int | None = None,
) -> Evidence:
    """What the script's instrumentation (and its profiled window, if any) showed.
    `cuda_capability`: the script's GPU's, from this machine's environment fingerprint;
    `memory_limit_bytes`: the memory the process may use (`hostinfo.memory_per_rank`), the
    limit its measured step's peak is compared with."""
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
    precision = script_precision(profile)
    notes = [f"collect: {e}" for e in profile.errors[:5]]
    if not profile.steps:
        notes.append("no training step was seen: step and phase rules cannot run")
    return Evidence(
        source="script",
        target=" ".join(profile.argv),
        device=profile.device,
        device_name=analysis.device_name if analysis is not None else None,
        cuda_capability=cuda_capability,
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
        distributed=_distributed(profile),
        copies=profile.h2d,
        syncs=_syncs(profile, warmup=warmup) if profile.steps else None,
        usage=UsageEvidence(
            forward_calls=profile.forward.calls,
            grad_forwards_without_backward=profile.forward.grad_forwards_without_backward,
            eval_mode_grad_calls=profile.forward.eval_mode_grad_calls,
            zero_grad_calls=profile.zero_grad.calls,
            zero_grad_keep_calls=profile.zero_grad.set_to_none_false_calls,
            backward_calls=profile.backward_calls,
            optimizer_steps=profile.optimizer_steps,
        ),
        config=ConfigEvidence(precision=precision, optimizer_impl=_optimizer_impl(profile)),
        trace=trace_evidence(analysis, precision=precision) if analysis is not None else None,
        ceilings=ceilings or (ceiling_evidence(analysis.ceilings) if analysis else None),
        host_lines=profile.host_lines,
        memory=_memory(profile, memory_limit_bytes),
        world_size=profile.world_size,
        rank=profile.rank,
        fsdp=analysis.fsdp if analysis is not None else None,
        notes=notes,
    )


def _memory(profile: ScriptProfile, limit_bytes: int | None) -> MemoryEvidence | None:
    """The measured step's peak (its highest phase peak, collect/probes/step_memory.py)."""
    m = profile.memory
    if m is None or not m.phase_peaks:
        return None
    return MemoryEvidence(peak_bytes=max(m.phase_peaks.values()), limit_bytes=limit_bytes)


def _distributed(profile: ScriptProfile) -> DistributedEvidence | None:
    d = profile.distributed
    if d is None:
        return None
    return DistributedEvidence(
        debug=d.debug,
        local_world_size=d.local_world_size,
        find_unused_parameters=any(d.find_unused_parameters) if d.find_unused_parameters else None,
    )
