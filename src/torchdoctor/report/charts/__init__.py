"""Charts as inline SVG, drawn server-side from the view model (no JavaScript).

Each registered section draws its own charts (`Section.charts`); the page places them by
name (`m.chart(charts, name, ...)` in the section's fragment).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchdoctor.report.charts._svg import MISSING_MATPLOTLIB, pyplot
from torchdoctor.report.registry import sections
from torchdoctor.report.views import ReportView

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
    drawn: dict[str, str | None] = {}
    for section in sections():
        if section.charts is not None:
            drawn.update(section.charts(plt, view.section(section.name)))
    return Charts(svg={k: v for k, v in drawn.items() if v is not None})
