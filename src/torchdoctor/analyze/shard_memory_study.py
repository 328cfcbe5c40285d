"""Estimate a workload's memory per rank under FSDP2 without materialising it.

`estimate_shards` is what `torchdoctor memory WORKLOAD --nproc N` runs: the shapes from the
`meta` device and the activations from two fake steps (collect/shard_memory.py), the
activations fitted against the batch and the arithmetic per rank (analyze/shard_memory.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from torchdoctor.analyze.shard_memory import DEFAULT_PREFETCH, plan_shards, step_moments
from torchdoctor.collect import PARAM_DTYPES, fake_activations, meta_shape, param_dtype_of
from torchdoctor.core.shard_memory import ShardPlan
from torchdoctor.workloads import Workload

__all__ = ["PARAM_DTYPES", "estimate_shards"]


def estimate_shards(
    workload: Workload,
    world_sizes: Sequence[int],
    *,
    param_dtype: str = "bf16",
    batch: int | None = None,
    budget_bytes: int | None = None,
    prefetch: int = DEFAULT_PREFETCH,
    seed: int = 0,
) -> ShardPlan:
    """The per-rank plan at each of `world_sizes`, at `batch` or the largest batch under
    `budget_bytes` (the workload's default batch when neither is given)."""
    start = time.perf_counter()
    dtype = param_dtype_of(param_dtype)
    shape = meta_shape(workload)
    moments = step_moments(fake_activations(workload, param_dtype=dtype, seed=seed))
    if batch is None and budget_bytes is None:
        batch = workload.default_batch_size
    params = getattr(workload, "params", {})
    return plan_shards(
        workload.name,
        shape,
        moments,
        world_sizes,
        param_dtype=param_dtype,
        param_dtype_bytes=dtype.itemsize,
        batch=batch,
        budget_bytes=budget_bytes,
        prefetch=prefetch,
        params={k: v for k, v in params.items() if isinstance(v, int | float | str)},
        wall_s=time.perf_counter() - start,
    )
