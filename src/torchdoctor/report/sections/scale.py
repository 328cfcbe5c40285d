"""Scaling (scaling.json): per N against linear and the model, the waterfall, the projections."""

from __future__ import annotations

from typing import Any, Final

from torchdoctor.core import rundir
from torchdoctor.report.adapters.scale import ScalingView, scaling_view
from torchdoctor.report.registry import RecordType, Section, register_record, register_section

SCALING_RECORD: Final = register_record(
    RecordType(
        key="scaling",
        file=rundir.SCALING,
        module="torchdoctor.scale",
        cls="ScalingStudy",
        schema="scaling_study",
        feeds="scaling per world size and its projections",
        written_by=("scale",),
        warns_as="scaling",
    )
)


def scaling_charts(plt: Any, view: ScalingView | None) -> dict[str, str | None]:
    from torchdoctor.report.charts.scale import waterfall_chart

    return {"scale_waterfall": waterfall_chart(plt, view.waterfall) if view else None}


SCALING_SECTION: Final = register_section(
    Section(
        name="scale_study",
        reads=("scaling",),
        adapter=scaling_view,
        order=55,
        markdown_order=55,
        html="sections/scale.html.j2",
        charts=scaling_charts,
    )
)
