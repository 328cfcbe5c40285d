"""What a tuner is asked to do: its objective, the keep bar, the measurement plan, the quality
tolerances, the budget and how its arms share a GPU (`Tuner`, tune/tuner.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# `tune --min-gain`'s default (core/defaults.py, with why).
from torchdoctor.core.defaults import DEFAULT_MIN_GAIN as DEFAULT_MIN_GAIN
from torchdoctor.core.vocabulary import Objective, Safety
from torchdoctor.measure import DEFAULT_REPLICATES
from torchdoctor.tune.arms import MeasurePlan
from torchdoctor.tune.budget import DEFAULT_TRIAL_TIMEOUT_S
from torchdoctor.tune.parity import REFERENCE_RUNS, TOLERANCES
from torchdoctor.tune.turns import SharingMode


@dataclass(frozen=True)
class TuneSettings:
    objective: Objective = "throughput"
    min_gain: float = DEFAULT_MIN_GAIN
    plan: MeasurePlan = field(default_factory=MeasurePlan)
    tolerances: dict[Safety, float] = field(default_factory=lambda: dict(TOLERANCES))
    isolate: bool = True
    memory_cap_bytes: int | None = None
    budget_s: float = 600.0
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S
    #: Baseline retrainings with a no-op perturbation that the quality check is judged by.
    reference_runs: int = REFERENCE_RUNS
    #: Keep a change only when a second pair of fresh processes points the same way
    #: (`Replicates.second_pair`).
    replicate_wins: bool = True
    #: Most fresh process pairs of the final confirmation (`tune.confirm`, `tune
    #: --final-pairs`): `measure.DEFAULT_REPLICATES` says why 4; fewer, down to
    #: `measure.MIN_REPLICATES`, take less time for a wider interval.
    final_pairs: int = DEFAULT_REPLICATES
    #: How arms share a GPU (`tune.turns`): None decides from the memory the baseline's
    #: first park measured; "interleaved" or "turns" forces it. No effect on a CPU.
    device_sharing: SharingMode | None = None
