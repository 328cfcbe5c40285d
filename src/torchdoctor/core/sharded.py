"""A sharded tensor's own part on this rank.

FSDP2's `fully_shard` and tensor parallelism hold parameters (and their gradients and
optimizer state) as DTensors: a wrapper over the rank's local shard. The wrapper's storage is
not the memory the rank holds (its `untyped_storage()` reports the whole tensor's size), so
what counts or moves a rank's memory reads the local shard. Torch is imported only when a
tensor is given, and torch.distributed only where this build has it.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def _dtensor_class() -> type | None:
    import torch

    if not torch.distributed.is_available():
        return None
    from torch.distributed.tensor import DTensor

    return DTensor


def is_sharded(tensor: Any) -> bool:
    """Whether `tensor` is a DTensor (always False on a torch without torch.distributed)."""
    cls = _dtensor_class()
    return cls is not None and isinstance(tensor, cls)


def local_tensor(tensor: Any) -> Any:
    """The rank's local shard of a DTensor (the same tensor object each time, not a copy: its
    storage is the one the rank holds); any other tensor itself."""
    return tensor._local_tensor if is_sharded(tensor) else tensor


def gathered_parameters(modules: Any, *, recurse: bool = True) -> list[Any]:
    """The gathered (unsharded) parameters FSDP2 keeps for the sharded modules among
    `modules` and (`recurse`) their children, made at the first all-gather (empty before it, and for
    modules no `fully_shard` reached).

    Their storages are emptied after use and refilled at each all-gather (`resize_`, not a new
    storage), so what counts a step's memory tells them apart from what the step saves for
    backward. Read through FSDP's own state (`FSDPModule._get_fsdp_state`, its parameter
    group's `fsdp_params`), which torch keeps private: a torch that names them otherwise
    gives none.
    """
    found: list[Any] = []
    seen: set[int] = set()
    for top in modules:
        for module in top.modules() if recurse else (top,):
            state_of = getattr(module, "_get_fsdp_state", None)
            if id(module) in seen or state_of is None:
                continue
            seen.add(id(module))
            group = getattr(state_of(), "_fsdp_param_group", None)
            for param in getattr(group, "fsdp_params", None) or ():
                gathered = getattr(param, "_unsharded_param", None)
                if gathered is not None:
                    found.append(gathered)
    return found
