"""The settings of one tuning study, saved in its run folder so `--resume` can continue it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar, Final

from pydantic import Field, field_validator

from torchdoctor.core import rundir
from torchdoctor.core.records import Record
from torchdoctor.core.redact import redact_argv
from torchdoctor.core.vocabulary import Objective, Safety
from torchdoctor.measure import DEFAULT_REPLICATES, MIN_REPLICATES
from torchdoctor.procs import ENGINE_FACTORY, canonical_factory
from torchdoctor.tune.arms import MeasurePlan
from torchdoctor.tune.budget import DEFAULT_TRIAL_TIMEOUT_S
from torchdoctor.tune.claims import HEARTBEAT_S
from torchdoctor.tune.settings import DEFAULT_MIN_GAIN
from torchdoctor.tune.space import KnobSpec
from torchdoctor.tune.storage import public_url
from torchdoctor.tune.turns import SharingMode

#: The default budget of `torchdoctor tune`: ten minutes, the issue's "--budget 10m".
DEFAULT_BUDGET_S: Final = 600.0

CONFIG_FILE: Final = rundir.TUNE_CONFIG
STUDY_FILE: Final = rundir.STUDY


class KnobSpecModel(Record):
    """A `KnobSpec` in JSON form (for studies over an explicit knob space)."""

    schema_name: ClassVar[str] = "tune_knob_spec"

    name: str
    values: list[Any]
    safety: Safety
    default: Any = None

    def spec(self) -> KnobSpec:
        return KnobSpec(self.name, tuple(self.values), self.safety, self.default)


#: A `MeasurePlan`'s settings: a version-1 config held the first eight as fields of its own.
_PLAN_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(MeasurePlan))


class TuneConfig(Record):
    """A study's settings. How its trials measure is its `plan` (version 2; version 1 held the
    plan's first eight settings as fields of the config itself, and reads back into `plan`)."""

    schema_name: ClassVar[str] = "tune_config"
    schema_version: ClassVar[int] = 2

    workload: str
    objective: Objective = "throughput"
    device: str = "cpu"
    seed: int = 0
    budget_s: float = Field(gt=0, default=DEFAULT_BUDGET_S)
    min_gain: float = Field(ge=0, default=DEFAULT_MIN_GAIN)
    #: A ladder win is kept only when a second pair of fresh processes points the same way
    #: (`Replicates.second_pair`); off, a win rests on its first pair and the final A/B alone.
    replicate_wins: bool = True
    #: Most fresh process pairs of the final confirmation (`tune --pairs`): fewer than
    #: the default take less time, and their interval, from the pairs run, is wider.
    final_pairs: int = Field(ge=MIN_REPLICATES, default=DEFAULT_REPLICATES)
    #: How the arms share a GPU (tune/turns.py): None decides from the memory the baseline's
    #: park measured; "interleaved" or "turns" forces it. No effect on a CPU.
    device_sharing: SharingMode | None = None
    max_memory_bytes: int | None = None
    #: `--objective fit --max-memory 75%`: the cap as this fraction of the baseline's measured
    #: peak ("fit in three quarters of what it takes now"), resolved once the baseline ran.
    max_memory_fraction: float | None = Field(gt=0, le=1, default=None)
    #: The shared study's storage URL, never with its password (tune/storage.py): a resume
    #: takes the password from PGPASSWORD / ~/.pgpass, or from `--storage` again.
    storage: str | None = None
    #: Seconds between a shared study's heartbeats of a running step (tune/claims.py).
    heartbeat_s: int = Field(gt=0, default=HEARTBEAT_S)
    baseline_recipe: dict[str, Any] = Field(default_factory=dict)
    prescribed: list[str] = Field(default_factory=list)
    knobs: list[str] | None = None
    space: list[KnobSpecModel] | None = None
    factory: str = ENGINE_FACTORY
    factory_options: dict[str, Any] = Field(default_factory=dict)
    isolate: bool = True
    search_batch: bool = True
    #: Whether the ladder tries a knob's other values once one of them is kept (bf16 kept,
    #: then fp16 against it). `demo --quick` does not: there a knob is one trial where it
    #: wins, and its budget holds the knobs it names (`ladder.LadderPlan.values_after_keep`).
    values_after_keep: bool = True
    hold_effective_batch: bool = False
    max_batch: int = 4096
    joint_trials: int = Field(ge=0, default=0)
    trial_timeout_s: float = Field(gt=0, default=DEFAULT_TRIAL_TIMEOUT_S)
    plan: MeasurePlan = Field(default_factory=MeasurePlan)
    #: A user's script tuned instead of a workload (`tune -- python train.py ARGS`): its argv
    #: (script path or module name first), whether it is `-m`, and the folder it runs in.
    #: The study is keyed by it: a resume continues this command. None: a workload.
    command: list[str] | None = None
    module: bool = False
    cwd: str | None = None
    #: What the caller says of this study, first among the result's notes (`demo --quick`:
    #: what its smaller budget costs).
    notes: list[str] = Field(default_factory=list)

    @classmethod
    def upgrade(cls, fields: dict[str, Any], version: int) -> dict[str, Any]:
        if version < 2 and "plan" not in fields:
            plan = {k: fields[k] for k in _PLAN_FIELDS if k in fields}
            rest = {k: v for k, v in fields.items() if k not in _PLAN_FIELDS}
            fields = {**rest, "plan": plan}
        return fields

    @field_validator("storage")
    @classmethod
    def _without_password(cls, value: str | None) -> str | None:
        return public_url(value)

    @field_validator("factory")
    @classmethod
    def _current_factory_name(cls, value: str) -> str:
        # A study stored on disk may name the engine's factory by a module it has left.
        return canonical_factory(value)

    @property
    def is_script(self) -> bool:
        return self.command is not None

    def write(self, path: str | Path) -> Path:
        """The study's settings on disk, the script's command with its secrets masked
        (core/redact.py): a `--db postgresql://user:PASSWORD@host/db` the script takes stays in
        memory only, and a resume takes the command from the caller again (tune/resume.py)."""
        if self.command is None:
            return super().write(path)
        shown = self.model_copy(update={"command": redact_argv(self.command)})
        return Record.write(shown, path)
