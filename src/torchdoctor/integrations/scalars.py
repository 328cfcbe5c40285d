"""The figures of torchdoctor's results as (tag, value, step) scalars, for any logger.

One list of what each record contributes, read by every sink (TensorBoard, Weights & Biases,
MLflow). A source is a run folder or one of its records:

- a run (`RunResult`): throughput, step time and loss per step, phase shares, peak memory;
- a script's steps (`ScriptProfile`, what the callbacks record): step time and each phase per
  step;
- a diagnosis: phase shares, the median step, each finding's Amdahl bound;
- a tuning result (`TuneResult`): throughput and speedup over the baseline along the ladder
  (the rung's number is the step), the headline speedup and its interval;
- a serving result (`ServeResult`): the batch-1 latency's percentiles, the service time per
  batch size, each curve's throughput and p99 (the batch size or thread count is the step),
  and the SLA search's best rate.

Scalars are copied from the records, never computed anew.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torchdoctor.collect import ScriptProfile
from torchdoctor.core import rundir
from torchdoctor.core.records import Record, peek_schema
from torchdoctor.diagnose import Diagnosis
from torchdoctor.engine import RunResult
from torchdoctor.serve import ServeResult
from torchdoctor.tune import TuneResult

Scalar = tuple[str, float, int]  # tag, value, step


def _run(result: RunResult) -> Iterator[Scalar]:
    yield "run/samples_per_s", result.samples_per_s, 0
    yield "run/step_time_median_s", result.step_time.median, 0
    memory = result.memory
    yield "run/peak_rss_bytes", float(memory.cpu_peak_rss_bytes), 0
    if memory.cuda_max_allocated_bytes is not None:
        yield "run/cuda_max_allocated_bytes", float(memory.cuda_max_allocated_bytes), 0
    for phase, share in (result.phase_fractions or {}).items():
        yield f"run/phase_share/{phase}", share, 0
    for step in result.steps:
        yield "run/step_time_s", step.total_s, step.index
    for i, loss in enumerate(result.losses):
        if loss is not None:
            yield "run/loss", loss, i


def _profile(profile: ScriptProfile) -> Iterator[Scalar]:
    for step in profile.steps:
        yield "steps/step_time_s", step.total_s, step.index
        for phase, seconds in step.phases.items():
            yield f"steps/{phase}_s", seconds, step.index
        if step.loss is not None:
            yield "steps/loss", step.loss, step.index


def _diagnosis(diag: Diagnosis) -> Iterator[Scalar]:
    if diag.median_step_s is not None:
        yield "diagnosis/median_step_s", diag.median_step_s, 0
    for phase, share in diag.phase_fractions.items():
        yield f"diagnosis/phase_share/{phase}", share, 0
    yield "diagnosis/primary_share", diag.primary_share, 0
    for finding in diag.findings:
        yield f"diagnosis/amdahl_bound/{finding.rule_id}", finding.amdahl_bound, 0


def _tune(result: TuneResult) -> Iterator[Scalar]:
    yield "tune/baseline_samples_per_s", result.baseline_samples_per_s, 0
    yield "tune/best_samples_per_s", result.best_samples_per_s, 0
    yield "tune/speedup", result.speedup, 0
    yield "tune/speedup_ci_low", result.speedup_ci[0], 0
    yield "tune/speedup_ci_high", result.speedup_ci[1], 0
    for rung in result.ladder.rungs:
        yield "tune/ladder/samples_per_s", rung.samples_per_s, rung.step
        yield "tune/ladder/speedup_vs_baseline", rung.speedup_vs_baseline, rung.step


def _serve(result: ServeResult) -> Iterator[Scalar]:
    summary = result.latency.summary
    yield "serve/latency_mean_s", summary.mean_s, 0
    for p in summary.percentiles:
        yield f"serve/latency_p{p.percentile:g}_s", p.value_s, 0
    for row in result.service_table:
        yield "serve/service_time_s", row.seconds, row.batch_size
    for curve in result.curves:
        for point in curve.points:
            step = point.batch_size if curve.axis == "batch_size" else (point.threads or 0)
            yield f"serve/{curve.axis}/samples_per_s", point.samples_per_s, step
            yield f"serve/{curve.axis}/p99_s", point.p99_s, step
    best = result.sla_search.best if result.sla_search is not None else None
    if best is not None:
        yield "serve/sla_best_rate", best.achieved_rate, 0


_WRITERS: list[tuple[type[Any], Any]] = [
    (RunResult, _run),
    (ScriptProfile, _profile),
    (Diagnosis, _diagnosis),
    (TuneResult, _tune),
    (ServeResult, _serve),
]
_FILES: list[tuple[str, type[Record]]] = [
    (rundir.RUN_RESULT, RunResult),
    (rundir.PROFILE, ScriptProfile),
    (rundir.DIAGNOSIS, Diagnosis),
    (rundir.TUNE, TuneResult),
    (rundir.SERVE, ServeResult),
]


def scalars(record: Record) -> list[Scalar]:
    """The scalars of one record (empty for a record that has none)."""
    for cls, write in _WRITERS:
        if isinstance(record, cls):
            return list(write(record))
    return []


def records_of(source: Record | str | Path) -> list[Record]:
    if isinstance(source, Record):
        return [source]
    path = Path(source)
    if path.is_file():
        schema = peek_schema(path)
        for _, cls in _FILES:
            if schema is not None and schema[0] == cls.schema_id():
                return [cls.read(path)]
        return []
    folder = path
    rundir.read_manifest(folder)  # RecordError for a path that is not a run folder
    return [cls.read(folder / name) for name, cls in _FILES if (folder / name).is_file()]


def scalars_of(source: Record | str | Path) -> list[Scalar]:
    """Every scalar of `source`: a record, or every record of a run folder."""
    return [s for record in records_of(source) for s in scalars(record)]


__all__ = ["Scalar", "records_of", "scalars", "scalars_of"]
