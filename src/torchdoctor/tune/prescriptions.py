"""From a diagnosis to the ladder's order: prescribed knobs, largest bound on gain first."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from torchdoctor.core import rundir

#: Sub-folder of a tune run folder holding the diagnosis run that ordered its ladder.
DIAGNOSIS_SUBDIR: Final = rundir.DIAGNOSIS_SUBDIR
#: A short diagnosis: enough steady-state steps for stable phase fractions on small workloads.
DIAGNOSIS_STEPS: Final = 12
DIAGNOSIS_WARMUP: Final = 3
#: Profiled steps: the roofline rules (lower precision, memory-bound elementwise) need the op
#: table of a trace, and two steps give it at the cost of a few seconds (cnn: about 3 s here).
DIAGNOSIS_PROFILE_STEPS: Final = 2


def _ranked(diagnoses: Sequence[Any]) -> list[Any]:
    """The findings of `diagnoses`, by severity, then the Amdahl bound on gain."""
    from torchdoctor.diagnose import SEVERITY_ORDER

    findings = [f for d in diagnoses for f in d.findings]
    return sorted(findings, key=lambda f: (-SEVERITY_ORDER[f.severity], -f.amdahl_bound, f.rule_id))


def prescribed_knobs(*diagnoses: Any) -> list[str]:
    """Knob names from the findings of `diagnoses` (a job's and its ranks'): by severity,
    then the Amdahl bound on gain.

    Not the diagnosis's own "what to fix first" order (`diagnose.rank_findings`), which puts
    the cheap, exact fix first for a person: the ladder keeps each change that proves itself,
    and trying the largest possible gain first keeps a smaller one from locking in a worse
    local optimum (on `cnn`, bf16 before compile: 2.0x against 1.66x).
    """
    names: list[str] = []
    for finding in _ranked(diagnoses):
        for knob in finding.prescription.knobs:
            if knob not in names:
                names.append(knob)
    return names


def _read_diagnosis(run_dir: Path) -> Any:
    """The diagnosis in `run_dir` (its `diagnosis.json`), or None without a readable one."""
    from torchdoctor.core.errors import RecordError
    from torchdoctor.diagnose import Diagnosis

    path = run_dir / rundir.DIAGNOSIS
    if not path.is_file():
        return None
    try:
        return Diagnosis.read(path)
    except RecordError:
        return None  # a diagnosis this version cannot read says nothing here


def _read_diagnoses(run_dir: Path) -> list[Any]:
    """The diagnosis in `run_dir` and, for a job of ranks, each rank's (the diagnosis run's
    `diagnosis.rank<N>.json`, in RUN_DIR/diagnosis/); empty without one.

    The ladder is ordered by all of them: a job's diagnosis is the one seen from the rank
    that waits most (diagnose/ranks.py), whose own exposed communication went to the
    straggler's finding, so a cure such as an FSDP knob can be prescribed by another rank
    only (the 2-rank FSDP studies of tests/integration/test_diagnose_fsdp.py)."""
    from torchdoctor.core.errors import RecordError
    from torchdoctor.diagnose import Diagnosis

    job = _read_diagnosis(run_dir)
    if job is None:
        return []
    ranks = []
    for path in sorted((run_dir / DIAGNOSIS_SUBDIR).glob(rundir.of_ranks(rundir.DIAGNOSIS))):
        try:
            ranks.append(Diagnosis.read(path))
        except RecordError:
            continue  # a rank this version cannot read says nothing here
    return [job, *ranks]


def diagnosed_step_s(run_dir: Path) -> float | None:
    """The median step the diagnosis in `run_dir` measured on the device the trials run on
    (None without one): a study's budget can be sized from it (`tune.study_budget_s`). On a
    busy machine it is the busy step, which the trials that follow will see too (a cnn step
    read 1.2 s on a 2-core host at load 6, 3.6 s at load 11, against ~0.1 s quiet), so a
    caller caps what it sizes from it."""
    diagnosis = _read_diagnosis(run_dir)
    step_s = diagnosis.median_step_s if diagnosis is not None else None
    return float(step_s) if step_s else None


def diagnosed_values(run_dir: Path) -> dict[str, Any]:
    """Knob -> the value the diagnosis in `run_dir` (a job's: its ranks' too) prescribes, from
    the first finding to name the knob in `prescribed_knobs`' order; empty without one.

    The ladder tries these among its candidates: the H200's cnn diagnosis prescribed 4 loader
    workers, and a ladder that never tried 4 ran 32 instead."""
    values: dict[str, Any] = {}
    for finding in _ranked(_read_diagnoses(run_dir)):
        for knob, value in finding.prescription.knobs.items():
            if value is not None:
                values.setdefault(knob, value)
    return values


def diagnosed_bounds(run_dir: Path) -> dict[str, float]:
    """Knob -> the largest Amdahl bound on gain among the findings of the diagnosis in
    `run_dir` (a job's: its ranks' too) that prescribe it; empty without one."""
    bounds: dict[str, float] = {}
    for finding in (f for d in _read_diagnoses(run_dir) for f in d.findings):
        for knob in finding.prescription.knobs:
            bounds[knob] = max(bounds.get(knob, 1.0), float(finding.amdahl_bound))
    return bounds


def diagnose_script_before_tuning(command: tuple[list[str], bool], run_dir: Path) -> list[str]:
    """Diagnose a script's or a torchrun job's command (argv, module) into RUN_DIR/diagnosis/
    (and RUN_DIR/diagnosis.json), as `diagnose_before_tuning` does a workload: the same short
    run, ended after `DIAGNOSIS_STEPS` steps, its prints in RUN_DIR/diagnosis/script.log.
    Returns the prescribed knobs (a job's: those of its ranks too)."""
    from torchdoctor.diagnose import examine_script

    argv, module = command
    exam = examine_script(
        list(argv),
        module=module,
        steps=DIAGNOSIS_STEPS,
        warmup=DIAGNOSIS_WARMUP,
        profile_steps=DIAGNOSIS_PROFILE_STEPS,
        out=run_dir / DIAGNOSIS_SUBDIR,
        output=SCRIPT_DIAGNOSIS_LOG,
    )
    return _prescribed_into(run_dir, exam.diagnosis)


#: The script's own output while it is diagnosed before a tune, in RUN_DIR/diagnosis/.
SCRIPT_DIAGNOSIS_LOG: Final = "script.log"


def _prescribed_into(run_dir: Path, diagnosis: Any) -> list[str]:
    """The diagnosis run's record copied up into the tune's run folder (what the ladder's
    values and bounds are read from); its prescribed knobs, or none without a diagnosis."""
    if diagnosis is None:
        return []
    source = run_dir / DIAGNOSIS_SUBDIR / rundir.DIAGNOSIS
    if source.is_file():
        shutil.copyfile(source, run_dir / rundir.DIAGNOSIS)
    return prescribed_knobs(*(_read_diagnoses(run_dir) or [diagnosis]))


def diagnose_before_tuning(
    workload: str,
    run_dir: Path,
    *,
    device: str = "cpu",
    settings: dict[str, str] | None = None,
    params: dict[str, Any] | None = None,
) -> list[str]:
    """Diagnose `workload` on `device` into RUN_DIR/diagnosis/ (and RUN_DIR/diagnosis.json).

    Returns its prescribed knobs. The device is the one the trials run on: a CPU diagnosis
    of a GPU job names other bottlenecks (threads and data loading, not precision or launch
    overhead) and would order the GPU trials by them. `settings` are the baseline's (`tune
    --set knob=value`): the diagnosis is of the job the ladder starts from, or it prescribes
    what the baseline already has and misses what it lacks.
    """
    from torchdoctor.diagnose import examine_workload

    exam = examine_workload(
        workload,
        dict(settings or {}),
        steps=DIAGNOSIS_STEPS,
        warmup=DIAGNOSIS_WARMUP,
        profile_steps=DIAGNOSIS_PROFILE_STEPS,
        out=run_dir / DIAGNOSIS_SUBDIR,
        device=device,
        params=params,
    )
    return _prescribed_into(run_dir, exam.diagnoses[-1] if exam.diagnoses else None)
