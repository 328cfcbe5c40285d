"""Stage: tune. Trials in isolated subprocesses, the ladder, batch-size search, joint search,
quality parity and persistent, resumable studies (see docs/DESIGN.md).

`tune(workload)` is the entry point; it returns a `TuneResult` whose `ladder` credits each kept
change with its own measured gain.
"""

from torchdoctor.tune.api import check_script_job, tune
from torchdoctor.tune.arms import MeasurePlan
from torchdoctor.tune.config import CONFIG_FILE, TuneConfig
from torchdoctor.tune.cost import study_budget_s
from torchdoctor.tune.demo import DEFAULT_DEMO_BUDGET, QUICK_KNOBS, demo_config, demo_story
from torchdoctor.tune.fit_decisions import PeakMemory
from torchdoctor.tune.outcome import Outcome
from torchdoctor.tune.parity import TOLERANCES, check_parity
from torchdoctor.tune.prescriptions import (
    diagnose_before_tuning,
    diagnose_script_before_tuning,
    diagnosed_step_s,
)
from torchdoctor.tune.recheck import recheck_script, recheck_workload
from torchdoctor.tune.records import (
    Confirmation,
    FitLadder,
    Ladder,
    MemoryRung,
    ParetoPoint,
    Rejection,
    Rung,
    SpeedupFrom,
    Trial,
    TrialResult,
    TuneResult,
)
from torchdoctor.tune.rescale import world_size_note
from torchdoctor.tune.sources import ScriptCommand
from torchdoctor.tune.space import KnobSpec
from torchdoctor.tune.storage import StorageURL, cleartext_note
from torchdoctor.tune.study import Study
from torchdoctor.tune.torchrun import check_tunable, is_torchrun, job_world_size
from torchdoctor.tune.tuner import Tuner

__all__ = [
    "CONFIG_FILE",
    "DEFAULT_DEMO_BUDGET",
    "QUICK_KNOBS",
    "TOLERANCES",
    "Confirmation",
    "FitLadder",
    "KnobSpec",
    "Ladder",
    "MeasurePlan",
    "MemoryRung",
    "Outcome",
    "ParetoPoint",
    "PeakMemory",
    "Rejection",
    "Rung",
    "ScriptCommand",
    "SpeedupFrom",
    "StorageURL",
    "Study",
    "Trial",
    "TrialResult",
    "TuneConfig",
    "TuneResult",
    "Tuner",
    "check_parity",
    "check_script_job",
    "check_tunable",
    "cleartext_note",
    "demo_config",
    "demo_story",
    "diagnose_before_tuning",
    "diagnose_script_before_tuning",
    "diagnosed_step_s",
    "is_torchrun",
    "job_world_size",
    "recheck_script",
    "recheck_workload",
    "study_budget_s",
    "tune",
    "world_size_note",
]
