"""The memory ladder's records (`tune --objective fit`): each step's measured peak and the
batch that fits, as `TuneResult.fit` carries them into the report and `--json`."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from torchdoctor.core.records import Record

#: What a memory-ladder row was: the baseline, a step that saves memory, or a batch tried.
MemoryRowKind = Literal["baseline", "memory", "batch"]


class MemoryRung(Record):
    """One trial of the memory ladder, kept or not, with the memory it measured.

    `peak_memory_bytes` is the median of the trial's chunk peaks (each a steady step's peak),
    `peak_spread_bytes` their lowest and highest; `fits` whether the highest is under the cap.
    """

    schema_name: ClassVar[str] = "tune_memory_rung"

    step: int = Field(ge=0)
    kind: MemoryRowKind
    change: dict[str, Any] = Field(default_factory=dict)
    #: The micro-batch each forward sees and the micro-batches per optimizer step.
    batch_size: int | None = None
    grad_accum: int = 1
    peak_memory_bytes: int | None = None
    peak_spread_bytes: tuple[int, int] | None = None
    fits: bool | None = None
    kept: bool
    #: The trial's outcome (`tune.outcome.Outcome`'s value) and why, for people.
    outcome: str
    reason: str = ""
    #: Measured alone (no A/B: the memory ladder decides by memory), so indicative only.
    samples_per_s: float | None = None
    loss_deviation: float | None = None


class FitLadder(Record):
    """The memory ladder of one study: the cap, every step tried, and where it ended.

    `target_batch` is the effective batch (samples per optimizer step) held while the ladder
    lowers memory; None when the study looks for the largest batch that fits instead.
    """

    schema_name: ClassVar[str] = "tune_fit_ladder"

    max_memory_bytes: int = Field(gt=0)
    #: The cap as given when it was a fraction of the baseline's peak (`--max-memory 75%`).
    max_memory_fraction: float | None = None
    target_batch: int | None = None
    baseline_peak_bytes: int | None = None
    baseline_fits: bool = False
    #: Whether the recommended recipe fits under the cap.
    fits: bool = False
    #: The recommended recipe's micro-batch and accumulation (its effective batch is their
    #: product).
    batch_size: int | None = None
    grad_accum: int = 1
    peak_memory_bytes: int | None = None
    rows: list[MemoryRung] = Field(default_factory=list)

    @property
    def effective_batch(self) -> int | None:
        return self.batch_size * self.grad_accum if self.batch_size is not None else None
