"""Activation checkpointing: recompute each block's activations in backward to save memory."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from torchdoctor.knobs.base import ApplicabilityContext, Choice, Knob, KnobValue
from torchdoctor.knobs.parts import (
    Ladder,
    MemoryStep,
    ModelTransform,
    Script,
    ScriptSite,
    Snippet,
)

if TYPE_CHECKING:
    from torch import nn

    from torchdoctor.knobs.context import FoundModel, ModelContext

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
    ladder=Ladder(gpu=150, memory=MemoryStep(30, True)),
    script=Script(
        site=ScriptSite.MODEL,
        unchanged=(False,),
        on_model=lambda value, found: _checkpoint_found(value, found),
    ),
)

KNOBS = (CHECKPOINTING,)


def checkpoint_blocks(
    blocks: Sequence[nn.Module], replace: Callable[[Any, str, Any], None] = setattr
) -> int:
    """Make each block's forward run under torch.utils.checkpoint; returns how many.
    `replace(block, "forward", new)` sets it (a script's injection: one uninstall undoes)."""
    from torchdoctor.knobs.forward import CheckpointedForward

    for block in blocks:
        replace(block, "forward", CheckpointedForward(block.forward))
    return len(blocks)


def repeated_blocks(model: nn.Module) -> list[nn.Module]:
    """The largest (by parameters) ModuleList/Sequential of 2+ modules of one class, or []: the
    blocks of a script's model, which declares none."""
    from torch import nn

    best: list[nn.Module] = []
    best_params = 0
    for container in model.modules():
        if not isinstance(container, nn.ModuleList | nn.Sequential):
            continue
        blocks = list(container.children())
        if len(blocks) < 2 or len({type(b) for b in blocks}) != 1:
            continue
        params = sum(p.numel() for b in blocks for p in b.parameters())
        if params > best_params:
            best, best_params = blocks, params
    return best


def _checkpoint(model: nn.Module, value: KnobValue, ctx: ModelContext) -> nn.Module:
    """Checkpoint the blocks `ctx.blocks` finds in `model` (how many: `ctx.notes`)."""
    if value:
        assert ctx.blocks is not None  # the knob applies only where blocks are declared
        ctx.notes[CHECKPOINTING.name] = checkpoint_blocks(ctx.blocks(model))
    return model


def _checkpoint_found(value: KnobValue, found: FoundModel) -> None:
    """A script's trained model: its repeated blocks checkpointed, put back at uninstall."""
    blocks = repeated_blocks(found.model)
    if not blocks:
        found.skipped(
            CHECKPOINTING.name,
            f"{found.name} has no repeated blocks (a ModuleList or Sequential of two or more "
            "modules of one class)",
        )
        return
    checkpoint_blocks(blocks, found.replace)
    found.applied(
        CHECKPOINTING.name,
        f"{len(blocks)} {type(blocks[0]).__name__} blocks of {found.name} checkpointed",
    )
