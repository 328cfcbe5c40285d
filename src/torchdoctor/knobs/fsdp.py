"""FSDP2's own settings: how a torchrun job that shards its model with `fully_shard` gathers,
keeps, casts and places its parameters.

Each is a keyword of `torch.distributed.fsdp.fully_shard(module, ...)` (or a setting of the
sharded modules it returns), so an unmodified script takes it where it calls `fully_shard`
(collect/inject/fsdp.py). They apply only to a job that shards a module: a built-in workload
runs in one process, and the tuner offers them only on a torchrun command
(`tune/torchrun.py`). What each trades is FSDP2's own account (`fully_shard`'s docstring,
torch/distributed/fsdp/_fully_shard/_fully_shard.py) and torchtitan's choices
(torchtitan/models/llama3/infra/parallelize.py):

- `reshard_after_forward`: whether a block frees its gathered parameters after its forward
  (true: the least memory, one more all-gather per block in backward), keeps them (false: no
  all-gather in backward, the whole model's parameters held from forward to backward), or
  reshards to a smaller group of N ranks (an int: the backward all-gather spans N ranks, e.g.
  one node's). FSDP's own choice (the default) is true for the blocks and false for the root,
  which backward needs first; the knob sets the blocks' and leaves the root's. Exact.
- `fsdp_mixed_precision`: a `MixedPrecisionPolicy`: the gathered parameters and the forward
  and backward in bf16, the gradients reduce-scattered in bf16 too, or in fp32
  (`bf16_fp32_reduce`, torchtitan's default: the sum over ranks in full precision). Half the
  bytes on the network for each all-gather; numerically close (the quality check judges it).
- `fsdp_prefetch`: explicit prefetching N blocks ahead: each block's forward starts the
  all-gather of the next N blocks and its backward that of the N blocks before it
  (`FSDPModule.set_modules_to_forward_prefetch` / `set_modules_to_backward_prefetch`).
  FSDP's own (the default) prefetches one block implicitly in backward and none explicitly in
  forward; more overlaps the all-gathers with more compute, at the memory of N gathered blocks.
  Exact.
- `fsdp_cpu_offload`: a `CPUOffloadPolicy`: the sharded parameters, gradients and optimizer
  state live in host memory and the optimizer steps there; the device holds only the gathered
  parameters of the blocks in use. Exact; for a model whose state does not fit the device.
- `fsdp_wrap`: the unit of wrapping, where a script shards its root only. "block": at the
  root's `fully_shard(model)` each of the model's repeated blocks (`repeated_blocks`, the
  largest ModuleList/Sequential of two or more modules of one class, as torchtitan shards
  each of `model.layers`) is sharded first, with the call's own keywords, then the root; one
  block gathered at a time, each block's all-gather overlapping the previous block's compute,
  where one root unit gathers the whole model before the first layer runs. "root": the
  script's own wrapping. Exact (the same parameters, sharded in smaller groups).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchdoctor.knobs.base import (
    ApplicabilityContext,
    Choice,
    IntRange,
    Knob,
    KnobValue,
    cuda_only,
    torchrun_only,
)
from torchdoctor.knobs.checkpointing import repeated_blocks
from torchdoctor.knobs.parts import (
    CallEdit,
    EditedCall,
    FSDPArgument,
    Ladder,
    Script,
    ScriptSite,
    Snippet,
)

#: The sizes of a smaller resharding group the int form of `reshard_after_forward` tries: the
#: GPUs of one node in the common layouts (2, 4 or 8 per node; fully_shard's docstring
#: suggests the intra-node size). A size that does not divide the job's ranks does not apply.
RESHARD_GROUPS: tuple[int, ...] = (2, 4, 8)
#: The deepest explicit prefetch tried: each level holds one more block's gathered
#: parameters, and past a few blocks the all-gathers already run ahead of the compute
#: (torchtitan sets no explicit prefetch by default; FSDP2's tests use 1 and 2).
MAX_PREFETCH = 4
#: The import a policy written into a script needs.
_FSDP_IMPORT = "from torch.distributed.fsdp import {}"

#: mixed-precision value -> (param_dtype, reduce_dtype), torch dtype names
PRECISIONS: dict[str, tuple[str, str]] = {
    "bf16": ("bfloat16", "bfloat16"),
    "bf16_fp32_reduce": ("bfloat16", "float32"),
}


_only_fsdp = torchrun_only("a torchrun job that shards its model with fully_shard")


def _fsdp_on_cuda(ctx: ApplicabilityContext) -> str | None:
    return _only_fsdp(ctx) or cuda_only(ctx)


# ---- reshard_after_forward ---------------------------------------------------------------------


def _reshard_for_world(value: KnobValue, ranks: int) -> str | None:
    """fully_shard takes an int only as a non-trivial divisor of the shard group's size."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if value >= ranks or ranks % value != 0:
        return (
            f"resharding to a group of {value} needs a shard group that {value} divides, "
            f"larger than {value}, and the job shards over {ranks} ranks"
        )
    return None


RESHARD_AFTER_FORWARD = Knob(
    name="reshard_after_forward",
    family="fsdp",
    description="Whether FSDP's blocks free their gathered parameters after forward (true), "
    "keep them for backward (false), or reshard to a group of N ranks.",
    code_change="fully_shard(block, reshard_after_forward=False)",
    safety="exact",
    domain=Choice((True, False, *RESHARD_GROUPS)),
    default=None,
    not_applicable=_only_fsdp,
    applies_to=FSDPArgument(
        keywords=lambda value: {"reshard_after_forward": value},
        source=lambda value: {"reshard_after_forward": repr(value)},
        blocks_only=True,
        block_default=True,  # fully_shard's docstring: None is True for non-root modules
        for_world=_reshard_for_world,
    ),
    write_back=CallEdit(EditedCall.FULLY_SHARD),
    ladder=Ladder(gpu=146, cpu=240),
    script=Script(site=ScriptSite.FSDP),
)

# ---- fsdp_mixed_precision ----------------------------------------------------------------------


def mixed_precision_policy(value: KnobValue) -> Any:
    """The `MixedPrecisionPolicy` of a value (None for "none": FSDP's own, no casts)."""
    dtypes = PRECISIONS.get(str(value))
    if dtypes is None:
        return None
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy

    param, reduce = dtypes
    return MixedPrecisionPolicy(
        param_dtype=getattr(torch, param), reduce_dtype=getattr(torch, reduce)
    )


def _precision_keywords(value: KnobValue) -> Mapping[str, Any]:
    policy = mixed_precision_policy(value)
    return {} if policy is None else {"mp_policy": policy}


def precision_source(value: KnobValue) -> str | None:
    """The policy as the script would write it (None for "none")."""
    dtypes = PRECISIONS.get(str(value))
    if dtypes is None:
        return None
    param, reduce = dtypes
    return f"MixedPrecisionPolicy(param_dtype=torch.{param}, reduce_dtype=torch.{reduce})"


def _precision_source_keywords(value: KnobValue) -> Mapping[str, str]:
    text = precision_source(value)
    return {} if text is None else {"mp_policy": text}


FSDP_MIXED_PRECISION = Knob(
    name="fsdp_mixed_precision",
    family="fsdp",
    description="FSDP's MixedPrecisionPolicy: parameters gathered and computed in bf16, "
    "gradients reduced in bf16 or fp32.",
    code_change="fully_shard(block, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, "
    "reduce_dtype=torch.float32))",
    safety="close",
    domain=Choice(("none", *PRECISIONS)),
    default="none",
    not_applicable=_only_fsdp,
    applies_to=FSDPArgument(
        keywords=_precision_keywords,
        source=_precision_source_keywords,
        imports=_FSDP_IMPORT.format("MixedPrecisionPolicy"),
    ),
    write_back=CallEdit(EditedCall.FULLY_SHARD),
    ladder=Ladder(gpu=147, cpu=250),
    script=Script(site=ScriptSite.FSDP, unchanged=("none",)),
)

# ---- fsdp_prefetch -----------------------------------------------------------------------------


def prefetch_lines(value: KnobValue) -> str | None:
    """The lines that set explicit prefetching `value` blocks deep, for a list `blocks` of the
    sharded blocks in forward order."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return (
        "# blocks: the modules given to fully_shard, in the order forward runs them\n"
        "for i, block in enumerate(blocks):\n"
        f"    block.set_modules_to_forward_prefetch(blocks[i + 1 : i + 1 + {value}])\n"
        f"    block.set_modules_to_backward_prefetch(blocks[max(0, i - {value}) : i][::-1])"
    )


FSDP_PREFETCH = Knob(
    name="fsdp_prefetch",
    family="fsdp",
    description="FSDP's explicit prefetching: each block starts the all-gather of the next N "
    "blocks in forward and of the N before it in backward.",
    code_change="block.set_modules_to_forward_prefetch(next_blocks)",
    safety="exact",
    domain=IntRange(1, MAX_PREFETCH),
    default=None,
    not_applicable=_only_fsdp,
    applies_to=FSDPArgument(prefetch=lambda value: int(value or 0)),
    write_back=Snippet(
        "after the fully_shard(...) calls", lambda value, _device: prefetch_lines(value)
    ),
    ladder=Ladder(gpu=148, cpu=260),
    script=Script(site=ScriptSite.FSDP),
)

# ---- fsdp_cpu_offload --------------------------------------------------------------------------


def _offload_keywords(value: KnobValue) -> Mapping[str, Any]:
    if value is not True:
        return {}
    from torch.distributed.fsdp import CPUOffloadPolicy

    return {"offload_policy": CPUOffloadPolicy()}


FSDP_CPU_OFFLOAD = Knob(
    name="fsdp_cpu_offload",
    family="fsdp",
    description="FSDP's CPUOffloadPolicy: sharded parameters, gradients and optimizer state in "
    "host memory, the optimizer stepping there.",
    code_change="fully_shard(block, offload_policy=CPUOffloadPolicy())",
    safety="exact",
    domain=Choice((False, True)),
    default=False,
    not_applicable=_fsdp_on_cuda,
    applies_to=FSDPArgument(
        keywords=_offload_keywords,
        source=lambda value: {"offload_policy": "CPUOffloadPolicy()"} if value is True else {},
        imports=_FSDP_IMPORT.format("CPUOffloadPolicy"),
    ),
    write_back=CallEdit(EditedCall.FULLY_SHARD),
    ladder=Ladder(gpu=149, cpu=270),
    script=Script(site=ScriptSite.FSDP, unchanged=(False,)),
    no_rule="it trades speed for device memory, which the memory objective weighs",
)

# ---- fsdp_wrap ---------------------------------------------------------------------------------

#: The values of the unit of wrapping: the script's own ("root": one unit where the script
#: shards its root only) and each repeated block its own unit before the root.
WRAP_ROOT = "root"
WRAP_BLOCK = "block"


def wrap_units(value: KnobValue, module: Any) -> list[Any]:
    """The modules sharded before a root-only call's `module` for the value: its repeated
    blocks for "block" ([] where it has none), none for "root"."""
    return repeated_blocks(module) if value == WRAP_BLOCK else []


def wrap_lines(value: KnobValue) -> str | None:
    """The loop that shards the blocks before the root, as the script would write it."""
    if value != WRAP_BLOCK:
        return None
    return (
        "# model.layers: the model's repeated blocks (a ModuleList of one class), each its\n"
        "# own unit, sharded before the root with the root's keywords\n"
        "for block in model.layers:\n"
        "    fully_shard(block)\n"
        "fully_shard(model)"
    )


FSDP_WRAP = Knob(
    name="fsdp_wrap",
    family="fsdp",
    description="FSDP's unit of wrapping where a script shards its root only: each repeated "
    "block sharded before the root (block), or the script's own (root).",
    code_change="for block in model.layers: fully_shard(block); then fully_shard(model)",
    safety="exact",
    domain=Choice((WRAP_ROOT, WRAP_BLOCK)),
    default=WRAP_ROOT,
    not_applicable=_only_fsdp,
    applies_to=FSDPArgument(units=wrap_units),
    write_back=Snippet(
        "in place of the root's fully_shard(model) call", lambda value, _device: wrap_lines(value)
    ),
    ladder=Ladder(gpu=144, cpu=235),
    script=Script(site=ScriptSite.FSDP, unchanged=(WRAP_ROOT,)),
)

KNOBS = (
    FSDP_WRAP,
    RESHARD_AFTER_FORWARD,
    FSDP_MIXED_PRECISION,
    FSDP_PREFETCH,
    FSDP_CPU_OFFLOAD,
)
