"""What changed between two runs, tuning results or traces (diff.json, `torchdoctor diff`)."""

from __future__ import annotations

from typing import Final

from torchdoctor.core import rundir
from torchdoctor.report.adapters.diff import diff_view
from torchdoctor.report.registry import RecordType, Section, register_record, register_section

DIFF_RECORD: Final = register_record(
    RecordType(
        key="diff",
        file=rundir.DIFF,
        module="torchdoctor.diagnose.diff",
        cls="RunDiff",
        schema="run_diff",
        feeds="what changed between two runs",
        written_by=("diff",),
    )
)
DIFF: Final = register_section(
    Section(name="diff", reads=("diff",), adapter=diff_view, order=5, markdown_order=5)
)
