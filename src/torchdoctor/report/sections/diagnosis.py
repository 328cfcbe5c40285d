"""The verdict (diagnosis.json, and the tune's headline) and the findings (diagnosis.json)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters.diagnosis import findings, verdict_section
from torchdoctor.report.adapters.tune import ladder_section
from torchdoctor.report.load import RunRecords
from torchdoctor.report.markdown import kv_lines, md
from torchdoctor.report.registry import Section, register_section
from torchdoctor.report.views import FindingView, KeyValue, VerdictView

if TYPE_CHECKING:
    from rich.console import Console

    from torchdoctor.diagnose import Diagnosis


def verdict_view(found: RunRecords) -> VerdictView:
    diagnosis = found.records.get("diagnosis")
    tune = found.records.get("tune")
    return VerdictView(
        diagnosis=verdict_section(diagnosis) if diagnosis else None,
        tuned=ladder_section(tune) if tune else None,
    )


def verdict_markdown(view: VerdictView) -> list[str]:
    # After a tune the result leads the report; the diagnosis is what ordered its ladder.
    out = ["## Diagnosis before tuning" if view.tuned else "## Verdict", ""]
    if view.diagnosis:
        d = view.diagnosis
        out += [f"> {md(d.verdict or 'No verdict recorded.')}", ""]
        out += kv_lines(
            [
                KeyValue("primary bottleneck", d.primary_bottleneck or fmt.NA),
                KeyValue("regime", d.regime or fmt.NA),
                KeyValue("confidence", fmt.percent(d.confidence, 0)),
                *d.facts,
                *d.regime_evidence,
            ]
        )
    return out if view.diagnosis or not view.tuned else []


def findings_view(found: RunRecords) -> list[FindingView] | None:
    """The findings (an empty list: a diagnosis that found nothing; None: no diagnosis)."""
    diagnosis = found.records.get("diagnosis")
    return findings(diagnosis) if diagnosis else None


def findings_markdown(view: list[FindingView] | None) -> list[str]:
    if not view:
        return []
    out = ["## Findings, ranked by bound on gain", ""]
    for f in view:
        out += [
            f"### {md(f.title)} ({md(f.rule_id)}, {md(f.severity)}; at most "
            f"{md(fmt.speedup(f.bound))} faster; addresses {md(fmt.percent(f.share))} of step "
            f"time; confidence {md(fmt.percent(f.confidence, 0))})",
            "",
            *([md(f.summary), ""] if f.summary else []),
            *kv_lines(f.evidence),
        ]
        out += [f"Prescription: {md(f.prescription)}", ""] if f.prescription else []
    return out


def diagnosis_terminal_view(found: RunRecords) -> Diagnosis | None:
    """The terminal view of the verdict and the findings: diagnosis.json as its record."""
    from torchdoctor.report.terminal.diagnosis import diagnosis_view

    return diagnosis_view(found.records.get("diagnosis"))


def verdict_terminal(console: Console, diagnosis: Diagnosis) -> None:
    """The diagnosis: its primary bottleneck, the findings within, the phases, the notes."""
    from torchdoctor.report.terminal.diagnosis import render_diagnosis

    render_diagnosis(diagnosis, console)


def findings_terminal(console: Console, diagnosis: Diagnosis) -> None:
    from torchdoctor.report.terminal.diagnosis import render_findings

    render_findings(console, diagnosis)


# On a terminal the verdict prints the findings within it (report/terminal/diagnosis.py).
VERDICT = register_section(
    Section(
        name="verdict",
        reads=("diagnosis", "tune"),
        adapter=verdict_view,
        order=10,
        markdown_order=10,
        markdown=verdict_markdown,
        html="sections/verdict.html.j2",
        terminal=verdict_terminal,
        terminal_view=diagnosis_terminal_view,
    )
)
FINDINGS = register_section(
    Section(
        name="findings",
        reads=("diagnosis",),
        adapter=findings_view,
        order=20,
        markdown_order=30,
        markdown=findings_markdown,
        html="sections/findings.html.j2",
        terminal=findings_terminal,
        terminal_view=diagnosis_terminal_view,
        within="verdict",
    )
)
