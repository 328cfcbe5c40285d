"""Charts as inline SVG, drawn server-side from the view model (no JavaScript)."""

from __future__ import annotations

from dataclasses import dataclass, field

from torchdoctor.report.charts._svg import MISSING_MATPLOTLIB, pyplot
from torchdoctor.report.charts.roofline import roofline_chart
from torchdoctor.report.charts.steps import steps_chart, timeline_chart
from torchdoctor.report.charts.tune import ladder_chart, pareto_chart, parity_chart
from torchdoctor.report.model import ReportView

__all__ = ["Charts", "render_charts"]


@dataclass(frozen=True)
class Charts:
    """Chart name -> SVG markup; `note` says why there are none (matplotlib missing)."""

    svg: dict[str, str] = field(default_factory=dict)
    note: str | None = None


def render_charts(view: ReportView) -> Charts:
    plt = pyplot()
    if plt is None:
        return Charts(note=MISSING_MATPLOTLIB)
    drawn = {
        "steps": steps_chart(plt, view.steps) if view.steps else None,
        "timeline": timeline_chart(plt, view.timeline) if view.timeline else None,
        "roofline": roofline_chart(plt, view.roofline) if view.roofline else None,
        "ladder": ladder_chart(plt, view.ladder) if view.ladder else None,
        "pareto": pareto_chart(plt, view.pareto) if view.pareto else None,
        "parity": parity_chart(plt, view.parity) if view.parity else None,
    }
    return Charts(svg={k: v for k, v in drawn.items() if v is not None})
