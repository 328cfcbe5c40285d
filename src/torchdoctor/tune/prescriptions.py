"""From a diagnosis to the ladder's order: prescribed knobs, largest bound on gain first."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Final

from torchdoctor.core import rundir

#: Sub-folder of a tune run folder holding the diagnosis run that ordered its ladder.
DIAGNOSIS_SUBDIR: Final = "diagnosis"
#: A short diagnosis: enough steady-state steps for stable phase fractions on small workloads.
DIAGNOSIS_STEPS: Final = 12
DIAGNOSIS_WARMUP: Final = 3
#: Profiled steps: the roofline rules (lower precision, memory-bound elementwise) need the op
#: table of a trace, and two steps give it at the cost of a few seconds (cnn: about 3 s here).
DIAGNOSIS_PROFILE_STEPS: Final = 2


def prescribed_knobs(diagnosis: Any) -> list[str]:
    """Knob names from the diagnosis's findings, in order of their Amdahl bound on gain."""
    from torchdoctor.diagnose import rank_findings

    names: list[str] = []
    for finding in rank_findings(diagnosis.findings):
        for knob in finding.prescription.knobs:
            if knob not in names:
                names.append(knob)
    return names


def diagnose_before_tuning(workload: str, run_dir: Path, *, device: str = "cpu") -> list[str]:
    """Diagnose `workload` on `device` into RUN_DIR/diagnosis/ (and RUN_DIR/diagnosis.json).

    Returns its prescribed knobs. The device is the one the trials run on: a CPU diagnosis
    of a GPU job names other bottlenecks (threads and data loading, not precision or launch
    overhead) and would order the GPU trials by them.
    """
    from torchdoctor.diagnose.runs import examine_workload

    exam = examine_workload(
        workload,
        {},
        steps=DIAGNOSIS_STEPS,
        warmup=DIAGNOSIS_WARMUP,
        profile_steps=DIAGNOSIS_PROFILE_STEPS,
        out=run_dir / DIAGNOSIS_SUBDIR,
        device=device,
    )
    if not exam.diagnoses:
        return []
    source = run_dir / DIAGNOSIS_SUBDIR / rundir.DIAGNOSIS
    if source.is_file():
        shutil.copyfile(source, run_dir / rundir.DIAGNOSIS)
    return prescribed_knobs(exam.diagnoses[-1])
