"""Host time by Python line: what the line sampler saw the main thread run during the steady
steps, as a record the collector writes and the diagnosis and the report read.

Torch-free on purpose: the launcher's parent process, the rules and the report read it as
plain data. The sampler itself is `collect/line_sampler.py`.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field

from torchdoctor.core.records import SubRecord
from torchdoctor.core.steps import Phase

#: Samples from which the lines are evidence a rule may act on: a share p estimated from n
#: samples has a binomial standard error sqrt(p(1-p)/n), at most 0.5/sqrt(n): 0.11 at 20
#: samples, so a line holding half the step is known to be a large part of it. Fewer (a run of
#: a few millisecond steps) are shown, not acted on.
MIN_SAMPLES: Final = 20


class HostLine(SubRecord):
    """One line of user code, the innermost user frame of the samples that name it."""

    file: str
    line: int = Field(ge=0)
    function: str
    share: float = Field(ge=0, le=1, description="share of the sampled steady step time")
    seconds_per_step: float = Field(ge=0)
    phases: dict[Phase, float] = Field(
        default_factory=dict, description="share of this line's time in each step phase"
    )
    callers: list[str] = Field(
        default_factory=list,
        description="`file:line in function` of its most frequent user callers, innermost first",
    )

    @property
    def site(self) -> str:
        """`file:line`, the form findings point at."""
        return f"{self.file}:{self.line}"

    @property
    def main_phase(self) -> Phase:
        """The phase most of this line's time fell in (`other` when none was recorded)."""
        if not self.phases:
            return "other"
        return max(self.phases, key=lambda p: self.phases[p])


class HostFunction(SubRecord):
    """One user function: the share of sampled time it was anywhere on the user stack."""

    file: str
    function: str
    first_line: int = Field(ge=0)
    share: float = Field(ge=0, le=1, description="inclusive: itself and what it called")


class HostLineProfile(SubRecord):
    """The line sampler's summary of one process's steady steps (versioned with its parent)."""

    sampler: str = Field(description="how the stacks were sampled (see collect/line_sampler)")
    interval_s: float = Field(gt=0, description="the sampling period asked for")
    last_interval_s: float | None = Field(
        None,
        gt=0,
        description="the period at the end: it grows past the samples a share needs "
        "(collect/line_sampler `SAMPLES_NEEDED`); None where not recorded",
    )
    samples: int = Field(ge=0, description="samples kept: steady steps only")
    steps: int = Field(ge=0, description="steady steps the samples fall in")
    sampled_s: float = Field(ge=0, description="the steady steps' time the shares divide")
    phase_shares: dict[Phase, float] = Field(
        default_factory=dict, description="each phase's measured share of that time"
    )
    outside_user_share: float = Field(
        0.0, ge=0, le=1, description="share of time whose samples had no user frame"
    )
    unsampled_share: float = Field(
        0.0, ge=0, le=1, description="share of time in phases no sample fell in"
    )
    lines: list[HostLine] = Field(default_factory=list, description="largest share first")
    functions: list[HostFunction] = Field(default_factory=list, description="largest first")

    @property
    def enough(self) -> bool:
        """Whether there are enough samples for a rule to act on (`MIN_SAMPLES`)."""
        return self.samples >= MIN_SAMPLES

    def top(self, phase: Phase | None = None) -> HostLine | None:
        """The line with the most time (in `phase` when given), None when there is none."""
        if phase is None:
            return self.lines[0] if self.lines else None
        best = max(self.lines, key=lambda h: h.share * h.phases.get(phase, 0.0), default=None)
        if best is None or best.phases.get(phase, 0.0) <= 0.0:
            return None
        return best
