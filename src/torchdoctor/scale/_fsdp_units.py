"""The units an FSDP2 job shards, recorded where they are wrapped.

FSDP's communication per step follows from its units (scale/fsdp.py: one all-gather per unit
in the forward, again in the backward for the non-root units when they reshard after the
forward, one reduce-scatter per unit), and a user's script does not say them. Each rank
program here wraps `fully_shard` (as `_ddp_params` wraps DDP) and the optimizer's
constructor: when the first optimizer is built after a model was sharded, rank 0 writes the
model's shape (collect/shard_memory.py's `model_shape`: each unit's parameters, their rows,
the optimizer's state) with the mixed-precision policy's element sizes and
`reshard_after_forward` into the run folder (`UNITS_FILE`). The shapes are the parameters'
global ones (a `DTensor` reports the unsharded shape), so the record is the same at any N.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Final

from torchdoctor.core.errors import UsageError
from torchdoctor.core.records import Record
from torchdoctor.core.shard_memory import ModelShape
from torchdoctor.scale._ddp_params import OUT_ENV
from torchdoctor.scale._fsdp_probe import probe_job
from torchdoctor.scale.collectives import BENCH_ENV

UNITS_FILE: Final = "fsdp_units.json"


class FsdpJob(Record):
    """What an FSDP2 job shards and how: its units' shapes and the policy's element sizes."""

    schema_name: ClassVar[str] = "fsdp_job"

    shape: ModelShape
    #: Bytes of one element as the units are all-gathered (the policy's `param_dtype`, else
    #: the parameters' own) and as gradients are reduce-scattered (`reduce_dtype`, else the
    #: gathered dtype: the gradients are computed in it).
    param_dtype_bytes: int
    reduce_dtype_bytes: int
    #: The root's setting: False keeps every unit unsharded from its forward to its backward
    #: (no all-gather in the backward).
    reshard_after_forward: bool
    #: Whether the job starts a unit's all-gather ahead of its use
    #: (`set_modules_to_forward_prefetch`), so it can run under the previous unit's compute.
    forward_prefetch: bool = False
    #: Whether the units' unshards are issued asynchronously (`_set_unshard_async_op`): on a
    #: device without streams (the CPU) a prefetched all-gather runs beside the compute only
    #: then, in gloo's thread; a synchronous one holds the rank until it is done.
    unshard_async: bool = False


def _itemsize(dtype: Any, default: int) -> int:
    return int(dtype.itemsize) if dtype is not None else default


def _job(wrapped: list[tuple[Any, dict[str, Any]]], optimizer: Any) -> FsdpJob | None:
    from torchdoctor.collect import model_shape

    modules = [m for m, _ in wrapped]
    roots = [
        m
        for m in modules
        if not any(o is not m and any(s is m for s in o.modules()) for o in modules)
    ]
    if not roots:
        return None
    root = roots[0]
    units = [m for m in root.modules() if m is not root and any(m is w for w in modules)]
    options = next(k for m, k in wrapped if m is root)
    first = next(root.parameters(), None)
    if first is None:
        return None
    policy = options.get("mp_policy")
    own = first.element_size()
    gathered = _itemsize(getattr(policy, "param_dtype", None), own)
    return FsdpJob(
        shape=model_shape(root, units, optimizer),
        param_dtype_bytes=gathered,
        reduce_dtype_bytes=_itemsize(getattr(policy, "reduce_dtype", None), gathered),
        reshard_after_forward=bool(options.get("reshard_after_forward", True)),
        forward_prefetch=any(_prefetches(m) for m in modules),
        unshard_async=any(_unshards_async(m) for m in units),
    )


def _units_by_name(wrapped: list[tuple[Any, dict[str, Any]]]) -> dict[str, Any]:
    """The wrapped modules by their names under the root ("" the root), as the shape names
    its units."""
    modules = [m for m, _ in wrapped]
    roots = [
        m
        for m in modules
        if not any(o is not m and any(s is m for s in o.modules()) for o in modules)
    ]
    if not roots:
        return {}
    return {n: m for n, m in roots[0].named_modules() if any(m is w for w in modules)}


def _prefetches(module: Any) -> bool:
    """Whether `module`'s FSDP state gathers another unit ahead of its own forward (torch's
    `FSDPState._states_to_forward_prefetch`; False where this torch keeps it elsewhere)."""
    try:
        return bool(module._get_fsdp_state()._states_to_forward_prefetch)
    except AttributeError:
        return False


def _unshards_async(module: Any) -> bool:
    """Whether `module`'s parameter group unshards with `async_op` (torch's
    `FSDPParamGroup.unshard_async_op`; False where this torch keeps it elsewhere)."""
    try:
        group = module._get_fsdp_state()._fsdp_param_group
    except AttributeError:
        return False
    return bool(getattr(group, "unshard_async_op", False))


def record_fsdp_units() -> None:
    """Patch `fully_shard` and the optimizer in this process (a rank); rank 0 writes the job's
    shape when its first optimizer is built after a `fully_shard`. Where the study asked for
    the microbenchmark (N >= 2, `BENCH_ENV`), every rank then times FSDP2's CPU work at the
    job's sizes before the first step (`_fsdp_probe.probe_job`)."""
    out = os.environ.get(OUT_ENV)
    first = os.environ.get("RANK", "0") == "0"
    probe = bool(os.environ.get(BENCH_ENV))
    if not out or not (first or probe):
        return
    import torch
    import torch.distributed.fsdp as fsdp

    shard = getattr(fsdp, "fully_shard", None)
    if shard is None:  # a torch without FSDP2
        return
    wrapped: list[tuple[Any, dict[str, Any]]] = []
    written: list[bool] = []

    def fully_shard(module: Any, *args: Any, **kwargs: Any) -> Any:
        result = shard(module, *args, **kwargs)
        wrapped.append((module, kwargs))
        return result

    original = torch.optim.Optimizer.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if wrapped and not written:
            written.append(True)
            try:
                job = _job(wrapped, self)
            except UsageError:  # an optimizer whose state the arithmetic does not know
                job = None
            if job is not None and first:
                job.write(Path(out, UNITS_FILE))
            if job is not None and probe:
                probe_job(job, self, _units_by_name(wrapped), Path(out) if first else None)

    fsdp.fully_shard = fully_shard
    torch.optim.Optimizer.__init__ = init  # type: ignore[method-assign]


def read_fsdp_job(run_dir: Path) -> FsdpJob | None:
    """The job's FSDP2 shape, or None when it sharded nothing (or an optimizer the arithmetic
    does not know was built)."""
    path = run_dir / UNITS_FILE
    return FsdpJob.read(path) if path.is_file() else None
