"""Activation checkpointing: recompute each block's activations in backward to save memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from torchdoctor.knobs.base import ApplicabilityContext, Choice, Knob, KnobValue
from torchdoctor.knobs.parts import Ladder, ModelTransform, Prescribed, Script, Snippet

if TYPE_CHECKING:
    from torch import nn

    from torchdoctor.knobs.context import ModelContext

#: Why activation checkpointing and CUDA graph capture exclude each other; both knobs say it,
#: so whichever of the two a recipe adds second is refused before a trial is spent on it.
GRAPHS_VS_CHECKPOINTING = (
    "activation checkpointing saves the CUDA RNG state in forward, which fails during CUDA "
    "graph capture (pytorch#83148); use checkpointing or cuda_graphs, not both"
)


def _needs_blocks(ctx: ApplicabilityContext) -> str | None:
    if not ctx.supports_checkpointing:
        return (
            f"workload '{ctx.workload_name}' declares no blocks to checkpoint "
            "(it has no checkpoint_blocks(model) method)"
        )
    if ctx.settings.get("cuda_graphs"):
        return GRAPHS_VS_CHECKPOINTING
    return None


CHECKPOINTING = Knob(
    name="checkpointing",
    family="checkpointing",
    description="Recompute block activations during backward instead of storing them.",
    code_change="x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)",
    safety="exact",
    domain=Choice((False, True)),
    default=False,
    not_applicable=_needs_blocks,
    applies_to=ModelTransform("raw", order=1, apply=lambda m, v, ctx: _checkpoint(m, v, ctx)),
    write_back=Snippet(
        "in the model's forward, around each repeated block",
        lambda value, device: (
            "x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)"
        ),
    ),
    ladder=Ladder(gpu=150),
    script=Script(injector="model", unchanged=(False,)),
    prescribed=Prescribed(("memory_headroom",)),
)

KNOBS = (CHECKPOINTING,)


def checkpoint_blocks(blocks: Sequence[nn.Module]) -> int:
    """Make each block's forward run under torch.utils.checkpoint; returns how many."""
    from torchdoctor.knobs.forward import CheckpointedForward

    for block in blocks:
        block.forward = CheckpointedForward(block.forward)
    return len(blocks)


def _checkpoint(model: nn.Module, value: KnobValue, ctx: ModelContext) -> nn.Module:
    """Checkpoint the blocks `ctx.blocks` finds in `model` (how many: `ctx.notes`)."""
    if value:
        assert ctx.blocks is not None  # the knob applies only where blocks are declared
        ctx.notes[CHECKPOINTING.name] = checkpoint_blocks(ctx.blocks(model))
    return model
