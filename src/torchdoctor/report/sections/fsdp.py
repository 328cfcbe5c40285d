"""FSDP units (the run folder's analysis.json `fsdp`): a sharded job's all-gathers and
reduce-scatters per unit, hidden or exposed, and its unsharded peak."""

from __future__ import annotations

from typing import Final

from torchdoctor.report.adapters.fsdp import fsdp_blocks
from torchdoctor.report.blocks import Blocks
from torchdoctor.report.load import RunRecords
from torchdoctor.report.registry import Section, register_section


def fsdp_view(found: RunRecords) -> Blocks | None:
    return fsdp_blocks(found.records.get("analysis"))


# After the ranks compared: what each unit's communication costs, before the findings' detail.
FSDP: Final = register_section(
    Section(name="fsdp", reads=("analysis",), adapter=fsdp_view, order=17, markdown_order=27)
)
