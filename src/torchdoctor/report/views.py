"""The report's view model: what the page shows, already formatted where formatting is all.

Adapters (`report/adapters/`) build these from records, one view per registered section
(report/registry.py); the HTML, Markdown, terminal and chart renderers read only these.
Nothing here is computed from raw measurements: every number is copied from a record. Numbers
stay numbers (charts need them); display strings are made in `report/format.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchdoctor.core.steps import PHASES


@dataclass(frozen=True)
class KeyValue:
    """One labelled fact (a table row of two cells)."""

    label: str
    value: str


@dataclass(frozen=True)
class MissingRecord:
    """A record the page would show but the run folder does not hold, and what that means."""

    file: str
    section: str
    why: str


@dataclass(frozen=True)
class Header:
    """What made the run folder, and whether it finished (`status` from run.json)."""

    title: str
    kind: str
    target: str
    status: str
    created: str | None = None
    finished: str | None = None
    error: str | None = None
    command: str | None = None
    torchdoctor_version: str | None = None
    #: An unfinished tune's command that continues it (`torchdoctor tune --resume RUN`).
    resume: str | None = None


@dataclass(frozen=True)
class EnvSection:
    facts: list[KeyValue]
    peak_flops: dict[str, float]
    """Measured peak FLOP/s per dtype (the roofline's compute roofs)."""
    mem_bandwidth_bytes_per_s: float | None
    ceilings_source: str | None = None
    device_name: str | None = None


@dataclass(frozen=True)
class VerdictSection:
    verdict: str | None
    primary_bottleneck: str | None
    regime: str | None
    confidence: float | None
    regime_evidence: list[KeyValue] = field(default_factory=list)
    facts: list[KeyValue] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PhaseBar:
    """One stacked bar of the step breakdown: a source's share of step time per phase."""

    label: str
    fractions: dict[str, float]
    total_s: float | None = None


@dataclass(frozen=True)
class StepSection:
    bars: list[PhaseBar]
    facts: list[KeyValue] = field(default_factory=list)
    losses: list[float | None] = field(default_factory=list)


@dataclass(frozen=True)
class TimelineSection:
    """Device timeline shares (percent of the window) and the per-step category breakdown."""

    device: list[KeyValue]
    step_breakdown: dict[str, float]
    """Average percent of step time per category (Kernel, Memcpy, CPU Exec, ...)."""
    facts: list[KeyValue] = field(default_factory=list)
    note: str | None = None


@dataclass(frozen=True)
class RooflineOp:
    name: str
    count: int | None
    time_us: float | None
    time_share: float | None
    flops: float | None
    intensity: float | None
    """FLOPs per byte moved."""
    achieved_flops_per_s: float | None
    achieved_bytes_per_s: float | None
    bound: str | None


@dataclass(frozen=True)
class RooflineSection:
    ops: list[RooflineOp]
    peak_flops: dict[str, float]
    mem_bandwidth_bytes_per_s: float | None
    ceilings_note: str | None = None


@dataclass(frozen=True)
class FindingView:
    rule_id: str
    title: str
    summary: str
    severity: str
    share: float | None
    """Fraction of step time the fix addresses."""
    bound: float | None
    """Amdahl upper bound on the speedup from fixing this (x, e.g. 1.4)."""
    confidence: float | None
    evidence: list[KeyValue]
    prescription: str
    knobs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RungView:
    step: int
    change: str
    #: As measured in the rung's own trial (raw; the trials ran minutes apart)
    samples_per_s: float
    speedup: float
    ci_low: float
    ci_high: float
    speedup_vs_previous: float | None
    peak_memory_bytes: int | None
    loss_deviation: float | None
    verdict: str
    #: On the baseline's scale: one scale down the whole ladder (`Rung.scaled_samples_per_s`)
    scaled_samples_per_s: float | None = None
    #: The previous best's rate in the A/B that kept it (with `samples_per_s`, its two arms)
    best_samples_per_s: float | None = None


@dataclass(frozen=True)
class RejectedView:
    change: str
    status: str
    reason: str
    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    #: On the ladder's one scale (`Rejection.scaled_samples_per_s`)
    scaled_samples_per_s: float | None = None
    #: Both arms of the A/B that decided it, as measured then
    samples_per_s: float | None = None
    best_samples_per_s: float | None = None


@dataclass(frozen=True)
class TrialView:
    key: str
    kind: str
    step: int
    change: str
    status: str
    decision: str
    reason: str
    samples_per_s: float | None
    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    peak_memory_bytes: int | None
    compile_s: float | None
    #: Its samples/s as the table shows it: the final A/B's both arms, baseline -> best
    throughput: str = ""
    #: Its id as a reader's label (`format.trial_label`)
    label: str = ""


@dataclass(frozen=True)
class LadderSection:
    workload: str
    objective: str
    baseline_samples_per_s: float
    best_samples_per_s: float
    speedup: float
    ci_low: float
    ci_high: float
    rungs: list[RungView]
    rejected: list[RejectedView]
    facts: list[KeyValue] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: What the throughput columns mean
    caption: str = ""


@dataclass(frozen=True)
class ParetoPointView:
    recipe: str
    samples_per_s: float
    peak_memory_bytes: int


@dataclass(frozen=True)
class LossCurve:
    label: str
    losses: list[float | None]


@dataclass(frozen=True)
class ReproduceSection:
    commands: list[str]
    recipe_code: str | None


@dataclass(frozen=True)
class ResultView:
    """A tune's result, first in every form: one sentence, one small table, why its two
    speedups differ, the levels of its intervals, every note of tune.json, and the command
    that re-checks the claim."""

    sentence: str
    rows: list[KeyValue]
    speedups: str
    legend: str
    notes: list[str] = field(default_factory=list)
    recheck: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class VerdictView:
    """The verdict section: the diagnosis's verdict and, after a tune, its headline."""

    diagnosis: VerdictSection | None
    tuned: LadderSection | None


@dataclass(frozen=True)
class TuneView:
    """The ladder section: the ladder of a tune and the table of its trials."""

    ladder: LadderSection | None
    trials: list[TrialView] | None


@dataclass(frozen=True)
class BreakdownView:
    """Where each step's time goes: the phases of the timed steps and the trace's timeline."""

    steps: StepSection | None
    timeline: TimelineSection | None

    @property
    def phases(self) -> list[str]:
        """The phases of the bars: the training phases in their order, then any others."""
        bars = self.steps.bars if self.steps else []
        seen = {k for b in bars for k in b.fractions}
        return [p for p in PHASES if p in seen] + sorted(seen - set(PHASES))


@dataclass(frozen=True)
class ReportView:
    """The whole report: the header, then each registered section's view by its name.

    A section's view is None where its records are absent (the section says so, or is left
    out); `missing` lists the records a run of this kind should have written.
    """

    header: Header
    sections: dict[str, Any] = field(default_factory=dict)
    missing: list[MissingRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The machine was disturbed while these records were measured (shown first).
    warnings: list[str] = field(default_factory=list)

    def section(self, name: str) -> Any:
        """The view of section `name` (None where its records are absent)."""
        return self.sections.get(name)
