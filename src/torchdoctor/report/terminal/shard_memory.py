"""`torchdoctor memory WORKLOAD --nproc N` on a terminal: memory per rank under FSDP2."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.report.adapters.shard_memory import shard_plan_blocks
from torchdoctor.report.blocks import blocks_terminal

if TYPE_CHECKING:
    from rich.console import Console

    from torchdoctor.core.shard_memory import ShardPlan


def render_shard_plan(console: Console, plan: ShardPlan) -> None:
    """Memory per rank at each N, the largest batch per rank under the budget, and DDP, FSDP
    and FSDP with CPU offload side by side."""
    blocks_terminal(console, shard_plan_blocks(plan.to_json_dict()))
