"""The serving section (serve.json): latency percentiles, curves, predictions, the SLA."""

from __future__ import annotations

from typing import Any

from torchdoctor.core import rundir
from torchdoctor.report.adapters.serve import serve_view
from torchdoctor.report.charts.serve import serve_chart
from torchdoctor.report.registry import RecordType, Section, register_record, register_section

SERVE = register_record(
    RecordType(
        key="serve",
        file=rundir.SERVE,
        module="torchdoctor.serve",
        cls="ServeResult",
        schema="serve_result",
        feeds="request latency, curves and the SLA point",
        written_by=("serve",),
        warns_as="serve",
    )
)


def _charts(plt: Any, view: Any) -> dict[str, str | None]:
    return {"serve": serve_chart(plt, view)}


SERVING = register_section(
    Section(
        name="serving",
        reads=("serve",),
        adapter=serve_view,
        order=75,
        markdown_order=52,
        html="sections/serve.html.j2",
        charts=_charts,
    )
)
