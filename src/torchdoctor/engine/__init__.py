"""Stage: engine. Run a workload under a recipe; time each step's phases.

`prepare()` builds a `TrainingSession` whose `run_steps()` the tuner calls in chunks;
`run_workload()` does warm-up + steady state and returns a `RunResult`.
"""

from torchdoctor.engine.park import CudaMover, DeviceMover, Moved, Parking, trained_state
from torchdoctor.engine.peak_memory import MemoryStats
from torchdoctor.engine.perturb import PERTURBATION_SCALE, perturb_weights
from torchdoctor.engine.result import RunResult
from torchdoctor.engine.run import mean_phase_fractions, run_workload
from torchdoctor.engine.session import (
    CUDAGRAPH_COMPILE_MODES,
    TrainingSession,
    prepare,
    resolve_device,
)

__all__ = [
    "CUDAGRAPH_COMPILE_MODES",
    "PERTURBATION_SCALE",
    "CudaMover",
    "DeviceMover",
    "MemoryStats",
    "Moved",
    "Parking",
    "RunResult",
    "TrainingSession",
    "mean_phase_fractions",
    "perturb_weights",
    "prepare",
    "resolve_device",
    "run_workload",
    "trained_state",
]
