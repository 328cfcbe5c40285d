"""`Evidence` from a built-in workload run (`RunResult`, plus its trace's analysis)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.diagnose.evidence import (
    BatchScalingEvidence,
    CeilingEvidence,
    ConfigEvidence,
    DataLoaderEvidence,
    Evidence,
    MemoryEvidence,
    ThreadEvidence,
)
from torchdoctor.diagnose.from_trace import ceiling_evidence, trace_evidence
from torchdoctor.diagnose.step_evidence import step_evidence
from torchdoctor.knobs import (
    CHANNELS_LAST,
    CHECKPOINTING,
    CUDNN_BENCHMARK,
    NUM_WORKERS,
    OPTIMIZER_IMPL,
    PERSISTENT_WORKERS,
    PIN_MEMORY,
    PRECISION,
    SET_TO_NONE,
)

if TYPE_CHECKING:
    from torchdoctor.analyze import TraceAnalysis
    from torchdoctor.engine import RunResult


def _config(run: RunResult) -> ConfigEvidence:
    r = run.recipe

    def flag(name: str) -> bool | None:
        v = r.get(name)
        return v if isinstance(v, bool) else None

    precision = r.get(PRECISION.name)
    impl = r.get(OPTIMIZER_IMPL.name)
    set_to_none = flag(SET_TO_NONE.name)
    return ConfigEvidence(
        batch_size=run.batch_size,
        precision=precision if isinstance(precision, str) else "fp32",
        compiled=run.compiled,
        channels_last=bool(flag(CHANNELS_LAST.name)),
        cudnn_benchmark=bool(flag(CUDNN_BENCHMARK.name)),
        # The engine builds optimizers with torch's default implementation unless told.
        optimizer_impl=impl if isinstance(impl, str) else None,
        set_to_none=set_to_none if set_to_none is not None else True,
        checkpointing=flag(CHECKPOINTING.name),
        fixed_shapes=True,  # built-in workloads feed fixed-shape synthetic batches
    )


def _memory(run: RunResult, limit_bytes: int | None) -> MemoryEvidence | None:
    m = run.memory
    peak = m.cuda_max_reserved_bytes if run.device.startswith("cuda") else m.cpu_peak_rss_bytes
    if not peak:
        return None
    return MemoryEvidence(peak_bytes=peak, limit_bytes=limit_bytes)


def evidence_from_run(
    run: RunResult,
    analysis: TraceAnalysis | None = None,
    *,
    workload_kind: str | None = None,
    ceilings: CeilingEvidence | None = None,
    usable_cores: int | None = None,
    memory_limit_bytes: int | None = None,
    batch_scaling: dict[int, float] | None = None,
    cuda_capability: tuple[int, int] | None = None,
) -> Evidence:
    """RunResult steps are steady state already (the engine drops its warm-up).
    `cuda_capability`: the run's GPU's, from this machine's environment fingerprint."""
    r = run.recipe
    workers = r.get(NUM_WORKERS.name)
    config = _config(run)
    return Evidence(
        source="workload",
        target=run.workload,
        device=run.device,
        device_name=analysis.device_name if analysis is not None else None,
        cuda_capability=cuda_capability,
        workload_kind=workload_kind,
        steps=step_evidence(run.steps, warmup=0, phases_from=run.phase_steps or None)
        if run.steps
        else None,
        dataloader=DataLoaderEvidence(
            uses_dataloader=True,
            num_workers=workers if isinstance(workers, int) else 0,
            pin_memory=bool(r.get(PIN_MEMORY.name)),
            persistent_workers=bool(r.get(PERSISTENT_WORKERS.name)),
        ),
        threads=ThreadEvidence(torch_threads=run.threads, usable_cores=usable_cores),
        config=config,
        trace=trace_evidence(analysis, precision=config.precision)
        if analysis is not None
        else None,
        memory=_memory(run, memory_limit_bytes),
        batch_scaling=BatchScalingEvidence(points=batch_scaling) if batch_scaling else None,
        ceilings=ceilings or (ceiling_evidence(analysis.ceilings) if analysis else None),
        host_lines=run.host_lines,
    )
