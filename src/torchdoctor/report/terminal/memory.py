"""`torchdoctor memory` on a terminal: the report's memory section, from the record itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.report.adapters.memory import memory_blocks, memory_line
from torchdoctor.report.adapters.shard_memory import shard_plan_blocks
from torchdoctor.report.blocks import blocks_terminal

if TYPE_CHECKING:
    from rich.console import Console

    from torchdoctor.core.memory_owners import MemoryPlan
    from torchdoctor.core.shard_memory import ShardPlan


def render_memory(console: Console, plan: MemoryPlan) -> None:
    """The owners per batch size, the fit and the prediction, as the report shows them."""
    blocks_terminal(console, memory_blocks(plan.to_json_dict()))


def memory_summary(plan: MemoryPlan) -> str:
    """One line: the largest measured step's owners, and the largest batch if predicted."""
    return memory_line(plan.to_json_dict())


def render_shard_plan(console: Console, plan: ShardPlan) -> None:
    """Memory per rank at each N, and the largest batch per rank under the budget."""
    blocks_terminal(console, shard_plan_blocks(plan.to_json_dict()))
