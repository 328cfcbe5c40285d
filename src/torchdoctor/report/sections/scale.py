"""Scaling (scaling.json): per N against linear and the model, the waterfall, the projections."""

from __future__ import annotations

from typing import Final

from torchdoctor.core import rundir
from torchdoctor.report.adapters.scale import scaling_view
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
SCALING_SECTION: Final = register_section(
    Section(
        name="scale_study", reads=("scaling",), adapter=scaling_view, order=55, markdown_order=55
    )
)
