"""`Diagnosis`: the versioned record of one examination, and `diagnose_evidence` to make it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from pydantic import Field

from torchdoctor.core.load import MachineLoad
from torchdoctor.core.records import Record
from torchdoctor.core.steps import Phase
from torchdoctor.diagnose.evidence import CeilingEvidence, Evidence, EvidenceSource
from torchdoctor.diagnose.findings import (
    BOTTLENECKS,
    SEVERITY_ORDER,
    Bottleneck,
    EvidenceValue,
    Finding,
)
from torchdoctor.diagnose.primary import candidate_shares, select_primary
from torchdoctor.diagnose.regime import Regime, classify_regime
from torchdoctor.diagnose.rules import RULES, Rule


class Diagnosis(Record):
    """Which regime a job is in, its primary bottleneck, and the findings behind it."""

    schema_name: ClassVar[str] = "diagnosis"
    #: Version 2: `machine_load`, the other work on the machine while the job was measured.
    #: Version 3: a finding's prescription may carry a `site` and a `snippet`.
    schema_version: ClassVar[int] = 3

    source: EvidenceSource
    target: str
    device: str
    device_name: str | None = None
    environment: dict[str, Any] | None = None
    ceilings: CeilingEvidence | None = None
    step_count: int
    median_step_s: float | None = None
    p95_step_s: float | None = None
    phase_fractions: dict[Phase, float] = Field(default_factory=dict)
    regime: Regime
    regime_evidence: dict[str, EvidenceValue] = Field(default_factory=dict)
    primary_bottleneck: Bottleneck
    primary_share: float = Field(ge=0, le=1)
    bottleneck_shares: dict[Bottleneck, float] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)
    rules_run: list[str] = Field(default_factory=list)
    rank: int | None = None
    world_size: int | None = None
    notes: list[str] = Field(default_factory=list)
    machine_load: MachineLoad | None = None

    def with_load(self, load: MachineLoad | None) -> Diagnosis:
        """A copy carrying `load`; a disturbed machine's warning leads the notes."""
        warning = [f"warning: {load.warning}"] if load is not None and load.warning else []
        return self.model_copy(update={"machine_load": load, "notes": [*warning, *self.notes]})

    def _repr_html_(self) -> str:
        """What `torchdoctor diagnose` prints, in a notebook: the verdict and the findings."""
        from torchdoctor.core import notebook

        findings = notebook.table(
            ["finding", "severity", "share of step", "at most", "fix"],
            [
                (
                    f.title,
                    f.severity,
                    f"{f.share:.0%}",
                    f"{f.amdahl_bound:.2f}x",
                    f.prescription.code_change,
                )
                for f in self.findings
            ],
        )
        return notebook.facts(
            f"Diagnosis of {self.target}",
            [
                ("primary bottleneck", f"{self.primary_bottleneck} ({self.primary_share:.0%})"),
                ("regime", self.regime),
                ("steps", self.step_count),
                ("median step (s)", self.median_step_s),
                ("phases", {k: f"{v:.0%}" for k, v in self.phase_fractions.items()}),
            ],
            findings,
        )

    @property
    def high_findings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "high"]

    def finding(self, rule_id: str) -> Finding | None:
        return next((f for f in self.findings if f.rule_id == rule_id), None)


def rank_findings(findings: Iterable[Finding]) -> list[Finding]:
    """What to fix first: by severity; within one severity, the cheaper and surer fix first
    (the order of `findings.BOTTLENECKS`: the device waiting on data, copies, syncs or
    communication before the device's own work); then the larger bound; then rule id.

    Bounds order findings only across severities: they are upper bounds from different
    assumptions (a data wait removed entirely, a datasheet peak ratio), so 1.5x against 1.9x
    says less than which fix is a line of exact code and which changes the numerics. And a
    device that waits for its input a third of the step gains from faster math only on the
    other two thirds until the wait is gone.
    """
    return sorted(
        findings,
        key=lambda f: (
            -SEVERITY_ORDER[f.severity],
            BOTTLENECKS.index(f.bottleneck),
            -f.amdahl_bound,
            f.rule_id,
        ),
    )


def diagnose_evidence(
    ev: Evidence,
    *,
    environment: Mapping[str, Any] | None = None,
    rules: Mapping[str, Rule] | None = None,
) -> Diagnosis:
    """Run every rule on `ev`, classify the regime, and choose the primary bottleneck."""
    chosen = RULES if rules is None else rules
    findings = rank_findings(f for f in (rule(ev) for rule in chosen.values()) if f is not None)
    regime, regime_evidence = classify_regime(ev)
    shares = candidate_shares(ev, findings)
    primary = select_primary(shares, findings)
    steps = ev.steps
    return Diagnosis(
        source=ev.source,
        target=ev.target,
        device=ev.device,
        device_name=ev.device_name,
        environment=dict(environment) if environment is not None else None,
        ceilings=ev.ceilings,
        step_count=steps.count if steps else (ev.trace.steps or 0 if ev.trace else 0),
        median_step_s=steps.median_s if steps else None,
        p95_step_s=steps.p95_s if steps else None,
        phase_fractions=dict(steps.phase_fractions) if steps else {},
        regime=regime,
        regime_evidence=regime_evidence,
        primary_bottleneck=primary,
        primary_share=min(1.0, max(0.0, shares.get(primary, 0.0))),
        bottleneck_shares={k: round(v, 6) for k, v in shares.items()},
        findings=findings,
        rules_run=list(chosen),
        rank=ev.rank,
        world_size=ev.world_size,
        notes=list(ev.notes),
    )
