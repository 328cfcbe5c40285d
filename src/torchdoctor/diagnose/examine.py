"""The whole examination for each input, leaving a run folder behind (core.rundir layout).

Each `examine_*` writes whatever was measured even when the job fails, marks the folder
complete or failed, and returns an `Examination`; the caller decides the exit code.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchdoctor.core import rundir
from torchdoctor.core.errors import DiagnoseError, TorchDoctorError, TraceError
from torchdoctor.diagnose.api import analyze_if_present, diagnose_run, profile_evidence
from torchdoctor.diagnose.diagnosis import Diagnosis, diagnose_evidence
from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.from_trace import evidence_from_trace
from torchdoctor.diagnose.hostinfo import (
    ceilings_as_evidence,
    ceilings_for_device,
    local_ceilings,
    local_environment,
)
from torchdoctor.diagnose.ranks import JobDiagnosis, diagnose_ranks, job_diagnosis
from torchdoctor.measure import watch_load

if TYPE_CHECKING:
    from torchdoctor.analyze import CrossRankAnalysis

log = logging.getLogger(__name__)

COLLECT_SUBDIR = "collect"


@dataclass
class Examination:
    """What one `diagnose` produced: the folder, one diagnosis per rank, the job's when it
    had several ranks, and how it ended."""

    run_dir: Path
    diagnoses: list[Diagnosis] = field(default_factory=list)
    exit_code: int | None = None
    error: str | None = None
    job: JobDiagnosis | None = None
    #: Memory to its owners in a script's step (`core.memory_owners.MemoryPlan`), written to
    #: the run folder's memory.json; None when none was measured.
    memory: Any | None = None

    @property
    def diagnosis(self) -> Diagnosis | None:
        if self.job is not None:
            return self.job.job
        return self.diagnoses[0] if self.diagnoses else None


def _finish(exam: Examination) -> Examination:
    rundir.finish_run_dir(exam.run_dir, error=exam.error)
    return exam


def examine_script(
    argv: list[str],
    *,
    module: bool = False,
    steps: int | None = None,
    warmup: int = 5,
    profile_steps: int = 5,
    out: Path | None = None,
    ceilings: Any | None = None,
    stdout_to_stderr: bool = False,
    output: str | None = None,
) -> Examination:
    """Run an unmodified script under instrumentation and diagnose every process that trained.

    `stdout_to_stderr`: the script's prints go to stderr (`--json` keeps stdout for the record).
    `output`: the script's own stdout and stderr go to this file in the run folder instead (a
    diagnosis the user did not ask to watch, as the one before a tune).
    """
    from torchdoctor.collect import check_command, read_profiles, refuse_mixed_fsdp
    from torchdoctor.procs import run_script

    # Before the run folder: bad input (a missing script, mixed FSDP) leaves nothing behind.
    check_command(argv, module)
    refuse_mixed_fsdp(argv, module)
    target = " ".join(argv) if argv else "script"
    run_dir = rundir.new_run_dir("diagnose", argv[-1] if module and argv else target, out=out)
    with rundir.marking_interruption(run_dir):
        exam = Examination(run_dir=run_dir)
        collect_dir = run_dir / COLLECT_SUBDIR
        try:
            with watch_load() as load:
                main = run_script(
                    argv,
                    module=module,
                    steps=steps,
                    warmup=warmup,
                    profile_steps=profile_steps,
                    out_dir=collect_dir,
                    stdout_to_stderr=stdout_to_stderr,
                    output=run_dir / output if output is not None else None,
                    memory_owners=True,
                )
        except TorchDoctorError as exc:
            exam.error = str(exc)
            _finish(exam)
            raise
        main.write(run_dir / rundir.PROFILE)
        exam.exit_code = main.exit_code
        profiles = (
            [p for p in read_profiles(collect_dir) if p.steps] if collect_dir.exists() else []
        )
        ranked = [p for p in profiles if p.rank is not None]
        to_diagnose = ranked or ([main] if main.steps else [])
        _diagnose_profiles(
            exam,
            to_diagnose,
            ranked,
            ceilings=ceilings,
            warmup=warmup,
            load=load.reading,
            target=" ".join(argv),
        )
        _write_memory(exam, to_diagnose, target=" ".join(argv))
        if not main.steps and not exam.diagnoses:
            exam.error = _never_trained_reason(main.ended_by, main.error, main.exit_code)
        elif main.exit_code:
            exam.error = f"the script exited with code {main.exit_code}"
        return _finish(exam)


def _write_memory(exam: Examination, profiles: list[Any], *, target: str) -> None:
    """Each process's step memory (collect/probes/step_memory.py) as a one-step `MemoryPlan`: the
    first one's as the run folder's memory.json (the report's memory section), the other
    ranks' as memory.rankN.json."""
    from torchdoctor.analyze import owners_plan

    first = True
    for prof in profiles:
        if prof.memory is None:
            continue
        plan = owners_plan(target, prof.memory)
        if first:
            plan.write(exam.run_dir / rundir.MEMORY)
            exam.memory, first = plan, False
        else:
            plan.write(exam.run_dir / rundir.of_rank(rundir.MEMORY, prof.rank))


def _diagnose_profiles(
    exam: Examination,
    to_diagnose: list[Any],
    ranked: list[Any],
    *,
    ceilings: Any | None,
    warmup: int,
    load: Any | None,
    target: str,
) -> None:
    """Diagnose each process's profile (the ranks compared when there are several) and write
    the diagnoses into `exam.run_dir`: the first one's analysis and trace under the run
    folder's own names, the others' by rank."""
    run_dir = exam.run_dir
    by_device: dict[str, Any] = {}
    env = local_environment()
    evidence: list[Evidence] = []
    whys: list[str | None] = []
    for i, prof in enumerate(to_diagnose):
        used = ceilings if ceilings is not None else _device_ceilings(prof.device, by_device)
        analysis, why = analyze_if_present(prof.trace_path, used)
        if analysis is not None:
            name = rundir.ANALYSIS if i == 0 else rundir.of_rank(rundir.ANALYSIS, prof.rank)
            analysis.write(run_dir / name)
            trace = Path(prof.trace_path) if prof.trace_path else None
            if i == 0 and trace is not None and trace != run_dir / rundir.TRACE:
                shutil.copyfile(trace, run_dir / rundir.TRACE)
        evidence.append(
            profile_evidence(
                prof,
                analysis,
                ceilings=_evidence_ceilings(used, analysis, prof.device),
                environment=env,
                warmup=warmup,
            )
        )
        whys.append(why)
    cross, cross_why = (
        _cross_rank([p.trace_path for p in ranked]) if len(ranked) > 1 else (None, None)
    )
    for diag, why in zip(diagnose_ranks(evidence, cross, environment=env), whys, strict=True):
        if why:
            diag = diag.model_copy(update={"notes": [*diag.notes, why]})
        exam.diagnoses.append(diag.with_load(load))
    _write_diagnoses(exam, cross, target=target, note=cross_why)


def examine_profile(
    profile: Any, run_dir: Path, *, warmup: int = 5, ceilings: Any | None = None
) -> Examination:
    """Diagnose a profile recorded in this process (a training framework's callback) into a
    run folder made for it (`core.rundir.new_run_dir`), as `examine_script` diagnoses a
    script's: the same record, analysis, diagnosis and ceilings."""
    exam = Examination(run_dir=run_dir)
    profile.write(run_dir / rundir.PROFILE)
    if profile.steps:
        target = " ".join(profile.argv) or "training"
        _diagnose_profiles(
            exam, [profile], [], ceilings=ceilings, warmup=warmup, load=None, target=target
        )
    else:
        exam.error = _never_trained_reason(profile.ended_by, profile.error, profile.exit_code)
    return _finish(exam)


def _cross_rank(paths: list[str | None]) -> tuple[CrossRankAnalysis | None, str | None]:
    """The ranks' traces compared, or (None, why not)."""
    from torchdoctor.analyze import cross_rank_analysis, load_trace

    if any(p is None or not Path(p).exists() for p in paths):
        return None, "ranks not compared: a rank left no trace"
    try:
        return cross_rank_analysis([load_trace(p) for p in paths if p is not None]), None
    except TraceError as exc:
        return None, f"ranks not compared: {exc}"


def _write_diagnoses(
    exam: Examination, cross: CrossRankAnalysis | None, *, target: str, note: str | None = None
) -> None:
    """One diagnosis: `diagnosis.json`. Several ranks: the job's diagnosis there, each rank's
    in `diagnosis.rank<N>.json`, the ranks compared in `cross_rank.json` (when they could
    be), and the whole in `job_diagnosis.json`: one record of the job, as `--json` prints."""
    run_dir = exam.run_dir
    if len(exam.diagnoses) < 2:
        for diag in exam.diagnoses:
            diag.write(run_dir / rundir.DIAGNOSIS)
        return
    exam.job = job_diagnosis(exam.diagnoses, cross, target=target, notes=[note] if note else [])
    for i, diag in enumerate(exam.diagnoses):
        rank = diag.rank if diag.rank is not None else i
        diag.write(run_dir / rundir.of_rank(rundir.DIAGNOSIS, rank))
    if cross is not None:
        cross.write(run_dir / rundir.CROSS_RANK)
    exam.job.job.write(run_dir / rundir.DIAGNOSIS)
    exam.job.write(run_dir / rundir.JOB_DIAGNOSIS)


def _device_ceilings(device: str, cache: dict[str, Any]) -> Any | None:
    """This machine's ceilings for the job's device kind, measured or read once per kind."""
    kind = device.split(":", 1)[0].lower()
    if kind not in cache:
        found, why = ceilings_for_device(kind)
        if why:
            log.info(why)
        cache[kind] = found
    return cache[kind]


def _evidence_ceilings(used: Any | None, analysis: Any | None, device: str) -> Any | None:
    """The ceilings the rules read: `used` when they describe the job's device (the trace's
    analysis kept them); else None, so the evidence takes the ones the analysis chose (the
    datasheet of the traced GPU when this machine's ceilings are another device's)."""
    if used is None:
        return None
    if analysis is not None:
        kept = analysis.ceilings
        same = kept is not None and (kept.source, kept.device) == (used.source, used.device)
        return ceilings_as_evidence(used) if same else None
    same_kind = used.device.split(":", 1)[0] == device.split(":", 1)[0].lower()
    return ceilings_as_evidence(used) if same_kind else None


def _never_trained_reason(ended_by: str, error: str | None, code: int | None) -> str:
    if ended_by == "exception" and error:
        return f"the script raised before its first training step: {error}"
    if ended_by == "sys_exit" or (code not in (None, 0)):
        return f"the script exited with code {code} before its first training step"
    return (
        "the script ran to the end without a training step (no optimizer step and no "
        "backward call was seen)"
    )


def examine_trace(
    path: Path, *, out: Path | None = None, ceilings: Any | None = None
) -> Examination:
    """Diagnose a profiler trace (file or folder of per-rank traces) from any machine."""
    from torchdoctor.analyze import analyze_ranks

    # TraceError for bad input, before a folder
    analysis, per_rank = analyze_ranks(path, ceilings=ceilings)
    run_dir = rundir.new_run_dir("diagnose", str(path), out=out)
    exam = Examination(run_dir=run_dir)
    analysis.write(run_dir / rundir.ANALYSIS)
    if path.is_file() and path.name.endswith(".json.gz"):
        shutil.copyfile(path, run_dir / rundir.TRACE)
    cross = analysis.cross_rank
    if cross is None:
        exam.diagnoses.append(diagnose_evidence(evidence_from_trace(analysis, target=str(path))))
    else:
        evidence = [evidence_from_trace(a, target=a.source) for a in per_rank]
        exam.diagnoses.extend(diagnose_ranks(evidence, cross))
    _write_diagnoses(exam, cross, target=str(path))
    return _finish(exam)


def examine_workload(
    name: str,
    settings: dict[str, str],
    *,
    steps: int = 20,
    warmup: int = 5,
    profile_steps: int = 3,
    out: Path | None = None,
    device: str = "cpu",
    params: Mapping[str, Any] | None = None,
) -> Examination:
    """Run a built-in or user workload with phase timing, then a short profiled window.
    `params`: the workload's own parameters (`diagnose WORKLOAD --param name=value`)."""
    from torchdoctor.diagnose.workload_profile import check_workload, profile_workload

    # A bad name, parameter or knob leaves no run folder behind.
    check_workload(name, settings, device, params=params)
    run_dir = rundir.new_run_dir("diagnose", name, out=out)
    with rundir.marking_interruption(run_dir):
        exam = Examination(run_dir=run_dir)
        try:
            ceilings, why = local_ceilings("cuda" if device.startswith("cuda") else "cpu")
            with watch_load() as load:
                run, kind, trace, cores = profile_workload(
                    name,
                    settings,
                    params=params,
                    steps=steps,
                    warmup=warmup,
                    profile_steps=profile_steps,
                    trace_path=run_dir / rundir.TRACE,
                    device=device,
                )
            run = run.model_copy(update={"machine_load": load.reading})
            run.write(run_dir / rundir.RUN_RESULT)
            analysis, twhy = analyze_if_present(trace, ceilings)
            if analysis is not None:
                analysis.write(run_dir / rundir.ANALYSIS)
            diag = diagnose_run(
                run,
                analysis,
                workload_kind=kind,
                ceilings=ceilings_as_evidence(ceilings),
                environment=local_environment(),
                usable_cores=cores,
            )
            notes = [n for n in (why, twhy) if n]
            if notes:
                diag = diag.model_copy(update={"notes": [*diag.notes, *notes]})
            diag = diag.with_load(load.reading)
            diag.write(run_dir / rundir.DIAGNOSIS)
            exam.diagnoses.append(diag)
        except TorchDoctorError as exc:
            exam.error = str(exc)
            with contextlib.suppress(TorchDoctorError):
                _finish(exam)
            raise
        return _finish(exam)


def require_diagnosis(exam: Examination) -> Diagnosis:
    if exam.diagnosis is None:
        raise DiagnoseError(exam.error or "nothing was diagnosed")
    return exam.diagnosis
