"""`RunResult`: what one run of a workload under a recipe measured."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from torchdoctor.core.hostlines import HostLineProfile
from torchdoctor.core.load import MachineLoad
from torchdoctor.core.records import Record
from torchdoctor.core.steps import Phase, StepTiming
from torchdoctor.engine.peak_memory import MemoryStats
from torchdoctor.measure import Measurement

RecipeValue = bool | int | str | None


class RunResult(Record):
    """Steady-state throughput, per-step phases, warm-up/compile cost, memory and losses.

    - `steps`: steady-state steps only (after warm-up), timed without per-phase syncs: the
      throughput (`samples_per_s`, the median over chunks of at least 0.3 s, as the tuner
      measures it; see `torchdoctor.engine.steady`) and `step_time` come from them.
    - `phase_steps`: further steps timed with a sync at every phase boundary; the phase split
      (`phase_fractions`) comes from them (version 3; before, from `steps`).
    - `warmup_steps`: steps run before the steady state: at least the requested minimum, more
      until step times settled.
    - `first_step_s`: the first step's wall time (torch.compile compiles during it).
    - `warmup_s`: wall time of all warm-up steps, the first included.
    - `compile_s`: the warm-up's excess over steady state, sum of (warm-up step - steady
      median) over warm-up steps: the one-off cost of compilation and first-touch allocation.
    - `losses`: the loss of every step, warm-up first, in order; `None` where the loss was not
      finite (NaN or +-inf: JSON has no such numbers). The same holds for each `steps[i].loss`.
    - `nonfinite_loss_step`: index into `losses` of the first non-finite loss (None if every
      loss was finite), `nonfinite_loss_value` its kind ("nan", "inf" or "-inf"). A run that
      diverged still reports its timings; `torchdoctor run` then exits with an error.
    """

    schema_name: ClassVar[str] = "run_result"
    #: Version 2: `machine_load`, other work on the machine during the run (set by callers).
    #: Version 3: `phase_steps`; `steps` no longer carry phases; throughput is a chunk median.
    #: Version 4: `host_lines`, the host time by Python line (set by a workload's diagnosis).
    schema_version: ClassVar[int] = 4

    workload: str
    workload_params: dict[str, RecipeValue | float] = Field(default_factory=dict)
    recipe: dict[str, RecipeValue] = Field(default_factory=dict)
    device: str
    seed: int
    compiled: bool
    batch_size: int
    grad_accum: int
    samples_per_step: int
    warmup_steps: int
    first_step_s: float | None
    warmup_s: float
    compile_s: float
    steps: list[StepTiming]
    phase_steps: list[StepTiming] = Field(default_factory=list)
    samples_per_s: float
    tokens_per_s: float | None = None
    step_time: Measurement
    phase_fractions: dict[Phase, float] | None = None
    memory: MemoryStats
    losses: list[float | None]
    threads: int
    nonfinite_loss_step: int | None = None
    nonfinite_loss_value: Literal["nan", "inf", "-inf"] | None = None
    machine_load: MachineLoad | None = None
    host_lines: HostLineProfile | None = None

    @property
    def diverged(self) -> bool:
        """True when some step's loss was NaN or infinite."""
        return self.nonfinite_loss_step is not None

    def divergence_message(self) -> str | None:
        """One line saying where the loss stopped being finite (None when it never did)."""
        step = self.nonfinite_loss_step
        if step is None:
            return None
        measured = len(self.steps) + len(self.phase_steps)
        where = (
            f"warm-up step {step + 1} of {self.warmup_steps}"
            if step < self.warmup_steps
            else f"measured step {step - self.warmup_steps + 1} of {measured}"
        )
        return f"the loss became {self.nonfinite_loss_value} at {where} (step index {step})"
