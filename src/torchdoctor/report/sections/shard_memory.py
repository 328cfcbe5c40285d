"""Memory per rank under FSDP2 (shard_plan.json, `memory WORKLOAD --nproc N`): each N's owners
per rank, whether it fits the budget, the largest batch per rank, and DDP, FSDP and FSDP with
CPU offload side by side."""

from __future__ import annotations

from typing import Final

from torchdoctor.core import rundir
from torchdoctor.report.adapters.shard_memory import shard_plan_blocks
from torchdoctor.report.blocks import Blocks
from torchdoctor.report.load import RunRecords
from torchdoctor.report.registry import RecordType, Section, register_record, register_section

SHARD_PLAN_RECORD: Final = register_record(
    RecordType(
        key="shard_plan",
        file=rundir.SHARD_PLAN,
        module="torchdoctor.core.shard_memory",
        cls="ShardPlan",
        schema="shard_plan",
        feeds="memory per rank under FSDP2 and the largest batch per rank",
        written_by=("memory",),
        # `memory --nproc` is a run of kind "memory" that estimates instead of measuring.
        instead_of="memory",
    )
)


def shard_plan_view(found: RunRecords) -> Blocks | None:
    plan = found.records.get("shard_plan")
    return None if plan is None else shard_plan_blocks(plan)


# Beside the measured memory to its owners (order 62, Markdown 72): the same owners, per rank.
SHARD_PLAN_SECTION: Final = register_section(
    Section(
        name="shard_plan",
        reads=("shard_plan",),
        adapter=shard_plan_view,
        order=63,
        markdown_order=73,
    )
)
