"""The record types of the stages so far, registered in the order the loader reads them.

Besides these single files a run folder holds `env.json` (the machine's fingerprint and
ceilings, two records in one file) and `trials/` (one file per trial), which the loader reads
on their own; `ENV` and `TRIALS` describe them for "What is missing".
"""

from __future__ import annotations

from typing import Final

from torchdoctor.core import rundir
from torchdoctor.report.registry import RecordType, register_record

DIAGNOSIS: Final = register_record(
    RecordType(
        key="diagnosis",
        file=rundir.DIAGNOSIS,
        module="torchdoctor.diagnose",
        cls="Diagnosis",
        schema="diagnosis",
        feeds="verdict and findings",
        written_by=("diagnose", "demo"),
        warns_as="diagnosis",
    )
)
ANALYSIS: Final = register_record(
    RecordType(
        key="analysis",
        file=rundir.ANALYSIS,
        module="torchdoctor.analyze",
        cls="TraceAnalysis",
        schema="trace_analysis",
        feeds="timeline summary and roofline",
        written_by=("profile", "analyze"),
    )
)
PROFILE: Final = register_record(
    RecordType(
        key="profile",
        file=rundir.PROFILE,
        module="torchdoctor.collect.script_profile",
        cls="ScriptProfile",
        schema="script_profile",
        feeds="step breakdown",
    )
)
RUN_RESULT: Final = register_record(
    RecordType(
        key="run_result",
        file=rundir.RUN_RESULT,
        module="torchdoctor.engine",
        cls="RunResult",
        schema="run_result",
        feeds="step breakdown",
        written_by=("run",),
        warns_as="run",
    )
)
TUNE: Final = register_record(
    RecordType(
        key="tune",
        file=rundir.TUNE,
        module="torchdoctor.tune.records",
        cls="TuneResult",
        schema="tune_result",
        feeds="ladder, Pareto front and best recipe",
        written_by=("tune", "demo"),
        warns_as="tune",
    )
)
#: The study's settings: the confidence of the headline's interval, and a script tune's command
#: (what re-checks the claim). Never required: the page says "level not recorded" without it.
TUNE_CONFIG: Final = register_record(
    RecordType(
        key="tune_config",
        file=rundir.TUNE_CONFIG,
        module="torchdoctor.tune.config",
        cls="TuneConfig",
        schema="tune_config",
        feeds="the headline interval's confidence level and the re-check command",
        strict=False,
    )
)

#: env.json (read by `load._read_env`). It is never required: a diagnosis carries the
#: environment and ceilings it used.
ENV: Final = RecordType(
    key="env",
    file=rundir.ENV,
    module="torchdoctor.core.env",
    cls="EnvFingerprint",
    schema="env_fingerprint",
    feeds="environment and measured ceilings",
)
#: trials/ (read by `load.read_run_dir`, one `TrialResult` or `Confirmation` per file).
TRIALS: Final = RecordType(
    key="trials",
    file=rundir.TRIALS + "/",
    module="torchdoctor.tune.records",
    cls="TrialResult",
    schema="tune_trial",
    feeds="trial table and loss-parity curves",
    written_by=("tune", "demo"),
)
