"""Memory to its owners (memory.json): the owners per batch size, the fit, the largest batch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from torchdoctor.core import rundir
from torchdoctor.report.adapters.memory import memory_line, memory_view
from torchdoctor.report.registry import RecordType, Section, register_record, register_section

if TYPE_CHECKING:
    from torchdoctor.core.memory_owners import MemoryPlan

MEMORY_RECORD: Final = register_record(
    RecordType(
        key="memory",
        file=rundir.MEMORY,
        module="torchdoctor.core.memory_owners",
        cls="MemoryPlan",
        schema="memory_plan",
        feeds="memory to its owners and the largest batch that fits",
        written_by=("memory",),
    )
)

# After the step breakdown, before the host lines: where memory goes beside where time goes.
MEMORY_SECTION: Final = register_section(
    Section(name="memory", reads=("memory",), adapter=memory_view, order=62, markdown_order=72)
)


def memory_summary(plan: MemoryPlan) -> str:
    """One line: the largest measured step's owners, and the largest batch if predicted (what
    `diagnose --memory` prints under its diagnosis)."""
    return memory_line(plan.to_json_dict())
