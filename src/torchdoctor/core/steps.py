"""The shared vocabulary of a training step: its phases and one step's timing record.

Both the engine (built-in workloads) and the collectors (a user's unmodified script) break a
step into the same phases, so that diagnosis rules read one shape of data whatever produced
it.
"""

from __future__ import annotations

from typing import ClassVar, Final, Literal

from pydantic import Field

from torchdoctor.core.records import Record

Phase = Literal["data_wait", "h2d", "forward", "backward", "optimizer", "other"]

#: The phases of a step, in the order they happen. `other` is whatever the step's wall time
#: holds beyond the named phases (Python between calls, logging, schedulers, zero_grad).
PHASES: Final[tuple[Phase, ...]] = ("data_wait", "h2d", "forward", "backward", "optimizer", "other")


class StepTiming(Record):
    """One training step: its wall time, the seconds spent in each phase, and its loss."""

    schema_name: ClassVar[str] = "step"

    index: int = Field(ge=0)
    total_s: float = Field(ge=0)
    phases: dict[Phase, float] = Field(default_factory=dict)
    loss: float | None = None
    samples: int | None = None

    def fractions(self) -> dict[Phase, float]:
        """Each phase's share of the step's wall time (0 when the step took no time)."""
        if self.total_s <= 0:
            return {p: 0.0 for p in PHASES}
        return {p: self.phases.get(p, 0.0) / self.total_s for p in PHASES}
