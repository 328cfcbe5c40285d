"""What a recipe injected into a script did: the `InjectionRecord`, and the `ScriptRun` of
`torchdoctor run --recipe R -- python train.py`.

Torch-free on purpose, like `ScriptProfile`: the launching process reads these records
without importing torch.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from torchdoctor.core.records import Record, SubRecord

#: `applied`: the value acted at least once (`applied_at` says where); `not_applied`: it never
#: did (`reason` says why); `unchanged`: the value asks for no change (None, or a default that
#: adds nothing: precision=fp32, compile=off), so the script's own setting stands.
KnobStatus = Literal["applied", "not_applied", "unchanged"]
#: Most places one knob lists in `applied_at` (a loop that builds a DataLoader per epoch would
#: otherwise grow the record without bound); `applied_count` keeps the total.
MAX_APPLIED_AT = 8
INJECTION_STEM = "injection"


class KnobOutcome(SubRecord):
    """One knob of the recipe in one process: whether and where it acted."""

    knob: str
    value: int | bool | str | None
    status: KnobStatus
    #: why it did not act (not_applied), or why somewhere it could not while it did elsewhere
    reason: str | None = None
    applied_at: list[str] = Field(default_factory=list)
    applied_count: int = 0


class InjectionRecord(Record):
    """Every knob of a recipe injected into one process of a script, in catalogue order."""

    schema_name: ClassVar[str] = "injection"

    recipe: dict[str, Any]
    knobs: list[KnobOutcome] = Field(default_factory=list)
    #: the trained top-level module the model knobs acted on (its class), if one was found
    model: str | None = None
    device_type: str | None = None

    def outcome(self, knob: str) -> KnobOutcome | None:
        return next((k for k in self.knobs if k.knob == knob), None)

    @property
    def applied(self) -> list[str]:
        return [k.knob for k in self.knobs if k.status == "applied"]

    @property
    def not_applied(self) -> dict[str, str]:
        return {k.knob: k.reason or "" for k in self.knobs if k.status == "not_applied"}


class ScriptRun(Record):
    """`torchdoctor run --recipe R -- python train.py`: what the script did under the recipe."""

    schema_name: ClassVar[str] = "script_run"

    argv: list[str]
    module: bool = False
    recipe: dict[str, Any]
    run_dir: str
    exit_code: int | None = None
    ended_by: str = "completed"
    error: str | None = None
    device: str = "cpu"
    steps: int = 0
    #: steps after warm-up (and outside any profiled window) the figures below come from
    steady_steps: int = 0
    step_s_median: float | None = None
    samples_per_s: float | None = None
    injection: InjectionRecord | None = None
