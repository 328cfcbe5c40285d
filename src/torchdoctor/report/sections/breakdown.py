"""Where the time goes: the step breakdown and trace timeline (diagnosis.json, run_result.json,
profile.json, analysis.json) and the roofline (analysis.json against the ceilings)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters.analysis import roofline_section, timeline_section
from torchdoctor.report.adapters.env import environment
from torchdoctor.report.adapters.steps import step_section
from torchdoctor.report.load import RunRecords
from torchdoctor.report.markdown import kv_lines, table_lines
from torchdoctor.report.registry import Section, register_section
from torchdoctor.report.views import BreakdownView, KeyValue, RooflineSection

if TYPE_CHECKING:
    from rich.console import Console

    from torchdoctor.analyze import TraceAnalysis
    from torchdoctor.report.terminal.steps import StepRecords


def breakdown_view(found: RunRecords) -> BreakdownView:
    analysis = found.records.get("analysis")
    return BreakdownView(
        steps=step_section(found.records),
        timeline=timeline_section(analysis) if analysis else None,
    )


def breakdown_markdown(view: BreakdownView) -> list[str]:
    out: list[str] = []
    if view.steps:
        out += ["## Where each step's time goes", ""]
        phases = sorted({k for b in view.steps.bars for k in b.fractions})
        rows = [
            [b.label, *(fmt.percent(b.fractions.get(p)) for p in phases)] for b in view.steps.bars
        ]
        out += table_lines(["source", *phases], rows) if rows else []
        out += kv_lines(view.steps.facts)
    if view.timeline:
        t = view.timeline
        out += ["### Trace timeline", "", *kv_lines(t.device)]
        out += kv_lines([KeyValue(k, fmt.pct_value(p)) for k, p in t.step_breakdown.items()])
        out += kv_lines(t.facts)
    return out


def breakdown_charts(plt: Any, view: BreakdownView) -> dict[str, str | None]:
    from torchdoctor.report.charts.steps import steps_chart, timeline_chart

    return {
        "steps": steps_chart(plt, view.steps) if view.steps else None,
        "timeline": timeline_chart(plt, view.timeline) if view.timeline else None,
    }


def roofline_view(found: RunRecords) -> RooflineSection | None:
    """The op table against the ceilings the analysis used, else the run's measured ones."""
    analysis = found.records.get("analysis")
    if not analysis:
        return None
    env = environment(found)
    peak = env.peak_flops if env else {}
    bandwidth = env.mem_bandwidth_bytes_per_s if env else None
    return roofline_section(analysis, peak, bandwidth)


def roofline_markdown(view: RooflineSection | None) -> list[str]:
    if not view or not view.ops:
        return []
    return [
        "## Roofline (top ops)",
        "",
        *table_lines(
            [
                "op",
                "calls",
                "time",
                "FLOP/byte",
                "achieved FLOP/s",
                "achieved bandwidth",
                "bound by",
            ],
            [
                (
                    o.name,
                    fmt.number(o.count),
                    fmt.micros(o.time_us),
                    fmt.number(o.intensity),
                    fmt.flops(o.achieved_flops_per_s),
                    fmt.bandwidth(o.achieved_bytes_per_s),
                    fmt.roofline_class(o.bound),
                )
                for o in view.ops
            ],
        ),
    ]


def roofline_charts(plt: Any, view: RooflineSection | None) -> dict[str, str | None]:
    from torchdoctor.report.charts.roofline import roofline_chart

    return {"roofline": roofline_chart(plt, view) if view else None}


def steps_terminal_view(found: RunRecords) -> StepRecords | None:
    from torchdoctor.report.terminal.steps import steps_view

    return steps_view(found)


def steps_terminal(console: Console, view: StepRecords) -> None:
    from torchdoctor.report.terminal.steps import render_steps

    render_steps(console, view)


def roofline_terminal_view(found: RunRecords) -> TraceAnalysis | None:
    from torchdoctor.report.terminal.steps import analysis_view

    return analysis_view(found)


def roofline_terminal(console: Console, analysis: TraceAnalysis) -> None:
    from torchdoctor.report.terminal.analysis import render_top_ops

    render_top_ops(console, analysis)


# On a terminal the steps of a trace print its roofline within them (report/terminal/steps.py).
STEPS = register_section(
    Section(
        name="steps",
        reads=("diagnosis", "run_result", "profile", "analysis"),
        adapter=breakdown_view,
        order=60,
        markdown_order=70,
        markdown=breakdown_markdown,
        html="sections/steps.html.j2",
        terminal=steps_terminal,
        terminal_view=steps_terminal_view,
        charts=breakdown_charts,
    )
)
ROOFLINE = register_section(
    Section(
        name="roofline",
        reads=("analysis", "env", "diagnosis"),
        adapter=roofline_view,
        order=70,
        markdown_order=80,
        markdown=roofline_markdown,
        html="sections/roofline.html.j2",
        terminal=roofline_terminal,
        terminal_view=roofline_terminal_view,
        within="steps",
        charts=roofline_charts,
    )
)
