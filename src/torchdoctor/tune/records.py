"""The tuner's typed records: one trial, one rung of the ladder, the whole result.

Every record is a frozen `Record` with a versioned JSON form, so a run folder can be read back
(by `--resume`, by the report) without recomputing anything.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from pydantic import Field, model_validator

from torchdoctor.core.load import MachineLoad
from torchdoctor.core.records import Record, peek_schema
from torchdoctor.core.vocabulary import Objective
from torchdoctor.tune.band_records import QualityBand
from torchdoctor.tune.fit_records import FitLadder, MemoryRung
from torchdoctor.tune.outcome import (
    Decision,
    Outcome,
    TrialStatus,
    Verdict,
    check_consistent,
    legacy_confirmation_outcome,
    legacy_trial_outcome,
)
from torchdoctor.tune.turns import DeviceSharing, SharingMode


def recipe_key(recipe: dict[str, Any]) -> str:
    """A recipe's part of a trial's deterministic key."""
    return json.dumps(recipe, sort_keys=True, default=str)


__all__ = [
    "Confirmation",
    "Decision",
    "FitLadder",
    "Ladder",
    "MemoryRung",
    "Outcome",
    "ParetoPoint",
    "Rejection",
    "Rung",
    "Trial",
    "TrialFigures",
    "TrialKind",
    "TrialResult",
    "TrialStatus",
    "TuneResult",
    "read_trial",
    "recipe_key",
    "trial_from_json_dict",
]

#: "confirm" only in run folders written before the `Confirmation` record; "memory": a step
#: of the memory ladder (`tune --objective fit`, torchdoctor.tune.fit).
TrialKind = Literal["baseline", "ladder", "batch", "joint", "confirm", "memory"]


@dataclass(frozen=True)
class TrialFigures:
    """What a trial measured of its candidate, as `TrialResult` records it under the same
    names (each figure None or empty when the trial did not get that far)."""

    samples_per_s: float | None = None
    best_samples_per_s: float | None = None
    step_time_s: float | None = None
    speedup_vs_best: float | None = None
    speedup_vs_best_ci: tuple[float, float] | None = None
    replicate_speedup_vs_best: float | None = None
    replicate_speedup_vs_best_ci: tuple[float, float] | None = None
    peak_memory_bytes: int | None = None
    chunk_peak_memory_bytes: list[int] = field(default_factory=list)
    losses: list[float | None] = field(default_factory=list)
    compile_s: float | None = None
    warmup_s: float | None = None
    chunk_times_s: list[float] = field(default_factory=list)
    best_chunk_times_s: list[float] = field(default_factory=list)
    machine_load: MachineLoad | None = None
    remeasured: int = 0
    device_switch_s: float | None = None
    sharing_mode: SharingMode | None = None


class TrialResult(Record):
    """One candidate recipe measured against the current best (or alone, for the baseline).

    Throughput fields are samples per second from steady-state chunks only; `compile_s` (the
    first step) and `warmup_s` (all warm-up steps) are kept apart because a user with short
    jobs pays them on every launch. `machine_load` is the other work on the machine during the
    comparison that was used; `remeasured` how many comparisons before it were discarded
    because the machine was disturbed (version 2). The baseline carries `reference_losses`,
    the trajectories its quality check is judged against (version 3). A ladder win carries
    the A/B of a second pair of fresh processes that had to bear it out,
    `replicate_speedup_vs_best` and its interval (version 4; `Replicates.second_pair`). `outcome`
    is what became of it, which the tuner decides by (version 5; earlier versions read back
    with the outcome their status, decision and reason imply: `tune.outcome`).
    `chunk_peak_memory_bytes` is the peak memory of each steady chunk, whose spread the
    memory ladder decides by (version 6; empty in earlier records).
    `device_switch_s` is what parking the idle arm off the GPU and bringing it back cost in
    the trial (tune/turns.py), counted in its wall time and in no step's (None: nothing was
    parked; an optional field, so earlier records read back unchanged). `sharing_mode` says
    how its arms shared the GPU (`tune.turns.DeviceSharing`): "interleaved" chunks of two
    live processes, or "turns", whole runs one process at a time, the speedup's interval
    then from pairs of runs (None: a CPU job, or a record from before; optional likewise).
    """

    schema_name: ClassVar[str] = "tune_trial"
    schema_version: ClassVar[int] = 6

    key: str
    kind: TrialKind
    step: int = Field(ge=0)
    change: dict[str, Any] = Field(default_factory=dict)
    recipe: dict[str, Any]
    status: TrialStatus
    decision: Decision
    outcome: Outcome
    reason: str = ""
    samples_per_s: float | None = None
    best_samples_per_s: float | None = None
    step_time_s: float | None = None
    speedup_vs_best: float | None = None
    speedup_vs_best_ci: tuple[float, float] | None = None
    replicate_speedup_vs_best: float | None = None
    replicate_speedup_vs_best_ci: tuple[float, float] | None = None
    peak_memory_bytes: int | None = None
    chunk_peak_memory_bytes: list[int] = Field(default_factory=list)
    loss_deviation: float | None = None
    losses: list[float | None] = Field(default_factory=list)
    compile_s: float | None = None
    warmup_s: float | None = None
    wall_s: float = Field(ge=0, default=0.0)
    chunk_times_s: list[float] = Field(default_factory=list)
    best_chunk_times_s: list[float] = Field(default_factory=list)
    machine_load: MachineLoad | None = None
    remeasured: int = Field(ge=0, default=0)
    device_switch_s: float | None = None
    sharing_mode: SharingMode | None = None
    #: The baseline only: loss trajectories of the baseline recipe retrained with a no-op
    #: weight perturbation, the yardstick of the quality check (`torchdoctor.tune.parity`).
    reference_losses: list[list[float | None]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _outcome_agrees(self) -> Self:
        check_consistent(self.status, self.decision, self.outcome)
        return self

    @classmethod
    def upgrade(cls, fields: dict[str, Any], version: int) -> dict[str, Any]:
        if version < 5 and "outcome" not in fields:
            outcome = legacy_trial_outcome(
                str(fields.get("status")),
                str(fields.get("decision")),
                str(fields.get("reason", "")),
            )
            fields = {**fields, "outcome": outcome}
        return fields

    @classmethod
    def of(
        cls,
        *,
        key: str,
        kind: TrialKind,
        step: int,
        recipe: dict[str, Any],
        verdict: Verdict,
        figures: TrialFigures,
        wall_s: float,
        change: dict[str, Any] | None = None,
    ) -> TrialResult:
        """A measured trial's record: what it was, its verdict and its figures."""
        return cls(
            key=key,
            kind=kind,
            step=step,
            change=dict(change or {}),
            recipe=dict(recipe),
            status=verdict.status,
            decision=verdict.decision,
            outcome=verdict.outcome,
            reason=verdict.reason,
            loss_deviation=verdict.loss_deviation,
            wall_s=wall_s,
            # Every figure under its own name (copied: the record owns its lists).
            **{f.name: copy.copy(getattr(figures, f.name)) for f in fields(TrialFigures)},
        )

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def disturbed(self) -> bool:
        return self.machine_load is not None and self.machine_load.disturbed


class Confirmation(Record):
    """The final A/B of the ladder's best recipe against the baseline recipe (and of `torchdoctor
    run --recipe R --vs-baseline`: a recipe against a script as it is, `tune.recheck`).

    The headline speedup: `speedup` is the geometric mean of baseline_i / best_i over fresh
    process pairs with Student's t interval (`torchdoctor.measure.replicated_speedup`), at
    the study's confidence; `rates` and `baseline_rates` are each process's samples/s over
    `steps` steady steps, as `torchdoctor run --steps` would report it. Version 1 measured
    one interleaved pair of live workers (its chunk scores in `chunk_times_s`,
    `baseline_chunk_times_s`). `outcome` (version 3) is `Outcome.MEASURED` when the pairs gave
    an interval, else why not (a failure, or `Outcome.BUDGET_CUT`). Run folders
    written before this record hold it as a `TrialResult` of kind "confirm", which
    `from_trial` reads.
    """

    schema_name: ClassVar[str] = "tune_confirmation"
    schema_version: ClassVar[int] = 3
    kind: ClassVar[Literal["confirm"]] = "confirm"

    key: str
    step: int = Field(ge=0)
    baseline_recipe: dict[str, Any]
    recipe: dict[str, Any]
    status: TrialStatus
    outcome: Outcome
    reason: str = ""
    samples_per_s: float | None = None
    baseline_samples_per_s: float | None = None
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None
    peak_memory_bytes: int | None = None
    chunk_times_s: list[float] = Field(default_factory=list)
    baseline_chunk_times_s: list[float] = Field(default_factory=list)
    rates: list[float] = Field(default_factory=list)
    baseline_rates: list[float] = Field(default_factory=list)
    #: Steady steps each process timed (`torchdoctor run --steps` re-measures the same way).
    steps: int | None = None
    wall_s: float = Field(ge=0, default=0.0)

    @model_validator(mode="after")
    def _outcome_agrees(self) -> Self:
        if self.outcome not in (Outcome.MEASURED, Outcome.BUDGET_CUT) and not self.outcome.failed:
            raise ValueError(f"a confirmation cannot be {self.outcome.value}")
        check_consistent(self.status, None, self.outcome)
        return self

    @classmethod
    def upgrade(cls, fields: dict[str, Any], version: int) -> dict[str, Any]:
        if version < 3 and "outcome" not in fields:
            outcome = legacy_confirmation_outcome(
                str(fields.get("status")), str(fields.get("reason", ""))
            )
            fields = {**fields, "outcome": outcome}
        return fields

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def from_trial(cls, old: TrialResult, baseline_recipe: dict[str, Any]) -> Confirmation:
        """A confirmation stored the old way: a TrialResult whose "best" was the baseline."""
        return cls(
            key=old.key,
            step=old.step,
            baseline_recipe=dict(baseline_recipe),
            recipe=dict(old.recipe),
            status=old.status,
            outcome=legacy_confirmation_outcome(old.status, old.reason),
            reason=old.reason,
            samples_per_s=old.samples_per_s,
            baseline_samples_per_s=old.best_samples_per_s,
            speedup=old.speedup_vs_best,
            speedup_ci=old.speedup_vs_best_ci,
            peak_memory_bytes=old.peak_memory_bytes,
            chunk_times_s=list(old.chunk_times_s),
            baseline_chunk_times_s=list(old.best_chunk_times_s),
            wall_s=old.wall_s,
        )


#: Anything the tuner records as one step of a study.
Trial = TrialResult | Confirmation


def trial_from_json_dict(data: Any, *, source: str = "record") -> Trial:
    """A trial's record from its JSON form: a `Confirmation` or a `TrialResult`, by schema."""
    if isinstance(data, dict) and data.get("schema") == Confirmation.schema_id():
        return Confirmation.from_json_dict(data, source=source)
    return TrialResult.from_json_dict(data, source=source)


def read_trial(path: Path) -> Trial:
    """Read one file of a run folder's trials/: a `Confirmation` or a `TrialResult`."""
    peeked = peek_schema(path)
    if peeked is not None and peeked[0] == Confirmation.schema_id():
        return Confirmation.read(path)
    return TrialResult.read(path)


class Rung(Record):
    """One kept change on the ladder (step 0 is the baseline)."""

    schema_name: ClassVar[str] = "tune_rung"

    step: int = Field(ge=0)
    change: dict[str, Any]
    #: As measured in the rung's own trial; with `best_samples_per_s`, both arms of the A/B
    #: that kept it. Rungs' trials run minutes apart on a host whose speed drifts, so these
    #: raw rates do not compare down the ladder; `scaled_samples_per_s` does.
    samples_per_s: float
    #: The previous best's samples/s in the same A/B (None: the baseline, or an old record).
    best_samples_per_s: float | None = None
    #: The baseline's measured samples/s times `speedup_vs_baseline`: every rung on one scale
    #: (None in records written before it).
    scaled_samples_per_s: float | None = None
    speedup_vs_previous: float
    speedup_vs_previous_ci: tuple[float, float]
    speedup_vs_baseline: float
    speedup_vs_baseline_ci: tuple[float, float]
    peak_memory_bytes: int | None = None
    loss_deviation: float | None = None
    verdict: str

    @classmethod
    def baseline(cls, result: TrialResult) -> Rung:
        """Step 0: the baseline's own figures, every ratio 1."""
        return cls(
            step=0,
            change={},
            samples_per_s=result.samples_per_s or 0.0,
            speedup_vs_previous=1.0,
            speedup_vs_previous_ci=(1.0, 1.0),
            speedup_vs_baseline=1.0,
            speedup_vs_baseline_ci=(1.0, 1.0),
            peak_memory_bytes=result.peak_memory_bytes,
            loss_deviation=0.0,
            verdict="baseline",
            scaled_samples_per_s=result.samples_per_s,
        )

    @classmethod
    def kept(cls, prev: Rung, result: TrialResult, change: dict[str, Any]) -> Rung:
        """The rung after `prev` that a kept trial's `change` makes."""
        ratio = result.speedup_vs_best or 1.0
        low, high = result.speedup_vs_best_ci or (ratio, ratio)
        return cls(
            step=prev.step + 1,
            change=change,
            samples_per_s=result.samples_per_s or 0.0,
            best_samples_per_s=result.best_samples_per_s,
            speedup_vs_previous=ratio,
            speedup_vs_previous_ci=(low, high),
            # Chained: the product of the step ratios; its interval is the product of the
            # bounds, a conservative (Bonferroni-style) interval for the product.
            speedup_vs_baseline=prev.speedup_vs_baseline * ratio,
            speedup_vs_baseline_ci=(
                prev.speedup_vs_baseline_ci[0] * low,
                prev.speedup_vs_baseline_ci[1] * high,
            ),
            peak_memory_bytes=result.peak_memory_bytes,
            loss_deviation=result.loss_deviation,
            verdict="kept",
            scaled_samples_per_s=prev.scaled(ratio),
        )

    def scaled(self, ratio: float | None) -> float | None:
        """Samples/s on the baseline's scale of a recipe `ratio` times faster than this rung."""
        if self.scaled_samples_per_s is None or ratio is None:
            return None
        return self.scaled_samples_per_s * ratio


class Rejection(Record):
    """A change that was tried and not kept, with why."""

    schema_name: ClassVar[str] = "tune_rejection"

    change: dict[str, Any]
    status: TrialStatus
    reason: str
    speedup_vs_best: float | None = None
    speedup_vs_best_ci: tuple[float, float] | None = None
    #: Both arms of the A/B that decided it, as measured then (candidate, best).
    samples_per_s: float | None = None
    best_samples_per_s: float | None = None
    #: On the ladder's one scale: the best's `Rung.scaled_samples_per_s` times
    #: `speedup_vs_best`.
    scaled_samples_per_s: float | None = None

    @classmethod
    def of(cls, best: Rung, result: TrialResult, change: dict[str, Any]) -> Rejection:
        """`change`'s trial (`result`), not kept, against the ladder's best rung then."""
        return cls(
            change=change,
            status=result.status,
            reason=result.reason,
            speedup_vs_best=result.speedup_vs_best,
            speedup_vs_best_ci=result.speedup_vs_best_ci,
            samples_per_s=result.samples_per_s,
            best_samples_per_s=result.best_samples_per_s,
            scaled_samples_per_s=best.scaled(result.speedup_vs_best),
        )


class Ladder(Record):
    """The kept changes in the order they were kept, and every rejected change."""

    schema_name: ClassVar[str] = "tune_ladder"

    rungs: list[Rung] = Field(default_factory=list)
    rejected: list[Rejection] = Field(default_factory=list)


class ParetoPoint(Record):
    """One non-dominated recipe of the joint refinement (throughput vs peak memory)."""

    schema_name: ClassVar[str] = "tune_pareto_point"

    recipe: dict[str, Any]
    samples_per_s: float
    peak_memory_bytes: int


#: Where a study's headline speedup comes from: "final_ab", the final A/B's fresh process
#: pairs of the best and the baseline (`tune.confirm`); "ladder", the ladder's step ratios
#: chained, where no final A/B gave an interval (the budget dropped or cut it, or the memory
#: ladder of `--objective fit`); "none", no change is recommended (none was kept, or the final
#: A/B refuted the ladder's best) and the speedup is 1.0.
SpeedupFrom = Literal["final_ab", "ladder", "none"]


class TuneResult(Record):
    """What `torchdoctor tune` hands back (also its `--json` output)."""

    schema_name: ClassVar[str] = "tune_result"
    # 2: quality_bands. 3: speedup_from. Older records still read.
    schema_version: ClassVar[int] = 3

    workload: str
    objective: Objective
    device: str
    run_dir: str
    baseline_recipe: dict[str, Any]
    best_recipe: dict[str, Any]
    baseline_samples_per_s: float
    best_samples_per_s: float
    speedup: float
    speedup_ci: tuple[float, float]
    #: Where `speedup` and `speedup_ci` come from (`SpeedupFrom`), for a job that gates on
    #: them; None in records written before it was kept.
    speedup_from: SpeedupFrom | None = None
    ladder: Ladder
    pareto_front: list[ParetoPoint] = Field(default_factory=list)
    n_trials: int
    n_failed: int
    n_reused: int = 0
    budget_s: float
    elapsed_s: float
    budget_exhausted: bool = False
    notes: list[str] = Field(default_factory=list)
    #: The band each safety class's late loss was held to, and which bound set it
    #: (tune.parity.quality_bands); empty in records written before it was kept.
    quality_bands: list[QualityBand] = Field(default_factory=list)
    #: `--objective fit`: the memory ladder (the cap, the baseline's peak, each step's peak
    #: and the batch that fits); None for the speed objectives.
    fit: FitLadder | None = None
    #: How the study's arms shared the GPU and why (`tune.turns.DeviceSharing`); None on a
    #: CPU, where no arm shares a device.
    device_sharing: DeviceSharing | None = None

    def _repr_html_(self) -> str:
        """What `torchdoctor tune` prints, in a notebook: the headline and the ladder."""
        from torchdoctor.core import notebook

        ladder = notebook.table(
            ["#", "change", "samples/s", "speedup", "interval"],
            [
                (
                    r.step,
                    r.change or "baseline",
                    r.samples_per_s,
                    f"{r.speedup_vs_baseline:.2f}x",
                    f"{r.speedup_vs_baseline_ci[0]:.2f}-{r.speedup_vs_baseline_ci[1]:.2f}",
                )
                for r in self.ladder.rungs
            ],
        )
        rejected = notebook.table(
            ["rejected", "why"], [(r.change, r.reason) for r in self.ladder.rejected]
        )
        low, high = self.speedup_ci
        return notebook.facts(
            f"Tuning of {self.workload}",
            [
                ("best recipe", self.best_recipe or "the baseline"),
                ("speedup", f"{self.speedup:.2f}x [{low:.2f}, {high:.2f}]"),
                (
                    "samples/s",
                    f"{self.baseline_samples_per_s:.1f} -> {self.best_samples_per_s:.1f}",
                ),
                ("trials", f"{self.n_trials} ({self.n_failed} failed)"),
            ],
            ladder,
            rejected if self.ladder.rejected else "",
        )
