"""What `torchdoctor diff` compares, read from either side's input: a run folder, a tuning
result (a tune or demo run folder, or its tune.json), or a profiler trace (any schema the
analyzer reads, a file or a folder of per-rank traces).

Each input becomes a `DiffSide`: per-step samples (seconds) of the step and its phases, of each
op and kernel where a trace is at hand, the diagnosis's findings, and a tuning result's
headline. Everything is read, never measured: a diff runs nothing.

A tuning result is read from its JSON form: its record class lives in `tune/`, a stage after
this one, so the fields read here are the ones its versioned form documents (as the report's
adapters read them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from torchdoctor.core import rundir
from torchdoctor.core.errors import RecordError, TraceError, UsageError
from torchdoctor.core.records import SCHEMA_PREFIX, peek_schema
from torchdoctor.core.steps import StepTiming
from torchdoctor.diagnose.diagnosis import Diagnosis

if TYPE_CHECKING:
    from torchdoctor.analyze import StepSamples

DiffKind = Literal["trace", "run", "tune"]

#: The kind of input each run-folder kind holds, in the words an error names them by.
KIND_WORDS: dict[str, str] = {
    "trace": "a profiler trace",
    "run": "a run folder",
    "tune": "a tuning result",
}
TUNE_SCHEMA = SCHEMA_PREFIX + "tune_result"
_TUNE_KINDS = ("tune", "demo")


@dataclass
class DiffSide:
    """One side of a diff: per-step samples in seconds, findings, and a tuning headline."""

    path: str
    kind: DiffKind
    steps_s: list[float] = field(default_factory=list)
    phases: dict[str, list[float]] = field(default_factory=dict)
    phase_source: str = ""  # "phases" (step records) or "trace" (the breakdown's categories)
    ops: dict[str, list[float]] = field(default_factory=dict)
    kernels: dict[str, list[float]] = field(default_factory=dict)
    findings: dict[str, tuple[str, float]] = field(default_factory=dict)  # id -> (title, share)
    primary: str | None = None
    tune: dict[str, Any] | None = None
    confirm_rates: list[float] = field(default_factory=list)  # best recipe, per fresh process


def _samples_into(side: DiffSide, samples: StepSamples, *, phases: bool) -> None:
    """A trace's per-step ops and kernels (and its categories as phases, when asked)."""
    us = 1e-6
    side.ops = {k: [v * us for v in vs] for k, vs in samples.ops.items()}
    side.kernels = {k: [v * us for v in vs] for k, vs in samples.kernels.items()}
    if phases and samples.step_us:
        side.steps_s = [v * us for v in samples.step_us]
        side.phases = {k: [v * us for v in vs] for k, vs in samples.categories.items()}
        side.phase_source = "trace"


def _steps_into(side: DiffSide, steps: list[StepTiming], phase_steps: list[StepTiming]) -> None:
    side.steps_s = [s.total_s for s in steps]
    timed = phase_steps or steps
    names = sorted({p for s in timed for p in s.phases})
    if names:
        side.phases = {p: [float(s.phases.get(p, 0.0)) for s in timed] for p in names}
        side.phase_source = "phases"


def _steady(steps: list[StepTiming]) -> list[StepTiming]:
    """A script's freely recorded steps after the warm-up `run` and the tuner would skip."""
    from torchdoctor.measure import warmup_length

    skip = warmup_length([s.total_s for s in steps])
    return steps[skip:] if len(steps) - skip >= 2 else steps


def _findings_into(side: DiffSide, diagnosis: Path) -> None:
    diag = Diagnosis.read(diagnosis)
    side.findings = {f.rule_id: (f.title, f.share) for f in diag.findings}
    side.primary = diag.primary_bottleneck


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RecordError(f"{path}: cannot read ({exc})") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: not a torchdoctor record")
    return data


def _confirm_rates(folder: Path) -> list[float]:
    """The best recipe's rate in each fresh process of the final A/B (trials/*confirm*)."""
    trials = folder / rundir.TRIALS
    for path in sorted(trials.glob("*.json")) if trials.is_dir() else []:
        data = _read_json(path)
        if data.get("schema") == SCHEMA_PREFIX + "tune_confirmation":
            rates = data.get("rates") or []
            return [float(r) for r in rates if isinstance(r, int | float)]
    return []


def _tune_into(side: DiffSide, tune_json: Path) -> None:
    data = _read_json(tune_json)
    if data.get("schema") != TUNE_SCHEMA:
        raise RecordError(f"{tune_json}: not a tuning result (schema {data.get('schema')!r})")
    side.tune = data
    side.confirm_rates = _confirm_rates(tune_json.parent)


def _folder_side(folder: Path) -> DiffSide:
    manifest = rundir.read_manifest(folder)
    if manifest.kind == "diff":
        raise UsageError(
            f"{folder}: a diff's own folder is not something to diff",
            hint="pass the two run folders it compared",
        )
    kind: DiffKind = "tune" if manifest.kind in _TUNE_KINDS else "run"
    side = DiffSide(path=str(folder), kind=kind)
    if kind == "tune" and (folder / rundir.TUNE).is_file():
        _tune_into(side, folder / rundir.TUNE)
    if (folder / rundir.RUN_RESULT).is_file():
        from torchdoctor.engine import RunResult

        result = RunResult.read(folder / rundir.RUN_RESULT)
        _steps_into(side, result.steps, result.phase_steps)
    elif (folder / rundir.PROFILE).is_file():
        from torchdoctor.collect import ScriptProfile

        profile = ScriptProfile.read(folder / rundir.PROFILE)
        _steps_into(side, _steady(profile.steps), [])
    trace = folder / rundir.TRACE
    if trace.is_file():
        from torchdoctor.analyze import trace_step_samples

        _samples_into(side, trace_step_samples(trace), phases=not side.steps_s)
    if (folder / rundir.DIAGNOSIS).is_file():
        _findings_into(side, folder / rundir.DIAGNOSIS)
    if kind == "tune" and side.tune is None:
        raise RecordError(
            f"{folder}: a {manifest.kind} folder without {rundir.TUNE}",
            hint="was the tuning run interrupted? pass a finished one",
        )
    return side


def _trace_side(path: Path) -> DiffSide:
    """A trace (the lowest rank of a folder of traces), diagnosed from the trace alone."""
    from torchdoctor.analyze import analyze_timeline, load_rank_traces, timeline_step_samples
    from torchdoctor.diagnose.api import diagnose_trace_analysis

    timeline = load_rank_traces(path)[0]
    side = DiffSide(path=str(path), kind="trace")
    _samples_into(side, timeline_step_samples(timeline), phases=True)
    diag = diagnose_trace_analysis(analyze_timeline(timeline), target=str(path))
    side.findings = {f.rule_id: (f.title, f.share) for f in diag.findings}
    side.primary = diag.primary_bottleneck
    return side


def read_side(path: Path) -> DiffSide:
    """One input of a diff, whatever it is; `UsageError`/`RecordError`/`TraceError` (exit 2)
    for a path that is missing or holds nothing a diff can read."""
    if not path.exists():
        raise UsageError(
            f"{path}: no such file or folder",
            hint="pass two run folders, two tuning results or two traces",
        )
    if path.is_dir() and (path / rundir.MANIFEST).is_file():
        return _folder_side(path)
    if path.is_file() and peek_schema(path) is not None:
        schema = peek_schema(path)
        if schema is not None and schema[0] == TUNE_SCHEMA:
            side = DiffSide(path=str(path), kind="tune")
            _tune_into(side, path)
            return side
        raise UsageError(
            f"{path}: a {schema[0] if schema else 'record'} file is not what diff compares",
            hint="pass its run folder, a tune.json, or a trace",
        )
    try:
        return _trace_side(path)
    except TraceError as exc:
        raise TraceError(f"{path}: neither a run folder nor a readable trace ({exc})") from None
