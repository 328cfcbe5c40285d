"""One call per input: diagnose a ScriptProfile, a trace, or a RunResult."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchdoctor.core.errors import TraceError
from torchdoctor.diagnose.diagnosis import Diagnosis, diagnose_evidence
from torchdoctor.diagnose.evidence import CeilingEvidence, Evidence
from torchdoctor.diagnose.from_profile import evidence_from_profile
from torchdoctor.diagnose.from_run import evidence_from_run
from torchdoctor.diagnose.from_trace import evidence_from_trace
from torchdoctor.diagnose.hostinfo import cuda_capability_in, cuda_memory_in, memory_per_rank
from torchdoctor.diagnose.step_evidence import DEFAULT_WARMUP_STEPS

if TYPE_CHECKING:
    from torchdoctor.analyze import TraceAnalysis
    from torchdoctor.collect import ScriptProfile
    from torchdoctor.engine import RunResult


def analyze_if_present(
    trace_path: str | Path | None, ceilings: Any | None = None
) -> tuple[TraceAnalysis | None, str | None]:
    """The trace's analysis, or (None, why) when there is no usable trace."""
    if trace_path is None or not Path(trace_path).exists():
        return None, None
    from torchdoctor.analyze import analyze_trace

    try:
        return analyze_trace(trace_path, ceilings=ceilings), None
    except TraceError as exc:
        return None, f"trace not analyzed: {exc}"


def diagnose_profile(
    profile: ScriptProfile,
    analysis: TraceAnalysis | None = None,
    *,
    ceilings: CeilingEvidence | None = None,
    environment: dict[str, Any] | None = None,
    warmup: int = DEFAULT_WARMUP_STEPS,
) -> Diagnosis:
    """Diagnose one process of an instrumented script (and its profiled window's analysis)."""
    ev = profile_evidence(
        profile, analysis, ceilings=ceilings, environment=environment, warmup=warmup
    )
    return diagnose_evidence(ev, environment=environment)


def profile_evidence(
    profile: ScriptProfile,
    analysis: TraceAnalysis | None = None,
    *,
    ceilings: CeilingEvidence | None = None,
    environment: dict[str, Any] | None = None,
    warmup: int = DEFAULT_WARMUP_STEPS,
) -> Evidence:
    """The evidence `diagnose_profile` diagnoses (a job's ranks are diagnosed together)."""
    local = profile.distributed.local_world_size if profile.distributed is not None else None
    return evidence_from_profile(
        profile,
        analysis,
        ceilings=ceilings,
        warmup=warmup,
        cuda_capability=cuda_capability_in(environment, profile.device),
        memory_limit_bytes=memory_per_rank(environment, profile.device, local)
        if profile.memory is not None
        else None,
    )


def diagnose_trace_analysis(analysis: TraceAnalysis, *, target: str | None = None) -> Diagnosis:
    """Diagnose from a trace alone: only the rules the trace holds evidence for can fire."""
    return diagnose_evidence(evidence_from_trace(analysis, target=target))


def diagnose_run(
    run: RunResult,
    analysis: TraceAnalysis | None = None,
    *,
    workload_kind: str | None = None,
    ceilings: CeilingEvidence | None = None,
    environment: dict[str, Any] | None = None,
    **extra: Any,
) -> Diagnosis:
    extra.setdefault("cuda_capability", cuda_capability_in(environment, run.device))
    # The device's memory is the limit the memory-headroom rule compares the peak with; off
    # CUDA there is none (host RAM is shared, and a larger batch is not the cure there).
    extra.setdefault("memory_limit_bytes", cuda_memory_in(environment, run.device))
    ev = evidence_from_run(run, analysis, workload_kind=workload_kind, ceilings=ceilings, **extra)
    return diagnose_evidence(ev, environment=environment)
