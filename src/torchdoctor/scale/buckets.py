"""DDP's gradient buckets and how much of their all-reduce the backward pass hides.

DistributedDataParallel packs gradients into buckets in the reverse order of
`model.parameters()` (the order backward produces them), at most `bucket_cap_mb` (25 MB by
default) each, the first one capped at 1 MiB (`torch.distributed._DEFAULT_FIRST_BUCKET_BYTES`)
so that communication starts early; each bucket's all-reduce starts when its last gradient is
ready, and the buckets are reduced one after another. (PyTorch docs, "DistributedDataParallel";
Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel Training", VLDB 2020.)

`exposed_communication` replays that: gradients come out of the backward pass at a uniform
rate in bytes (the backward's time spread over the parameters by size), each bucket's
collective starts when it is full and the previous one is done, and what runs past the end of
the backward pass is exposed. It assumes communication does not slow the computation it
overlaps; on a CPU whose cores run both, it does, which is one source of the model's error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

#: DDP's default bucket size (`bucket_cap_mb=25`, torch/nn/parallel/distributed.py).
DEFAULT_BUCKET_CAP_MB: Final = 25.0
#: DDP's first bucket (`torch.distributed._DEFAULT_FIRST_BUCKET_BYTES`, 1 MiB).
FIRST_BUCKET_BYTES: Final = 1024 * 1024
_MB: Final = 1024 * 1024


def ddp_buckets(
    param_bytes: Sequence[int],
    *,
    bucket_cap_mb: float = DEFAULT_BUCKET_CAP_MB,
    first_bucket_bytes: int = FIRST_BUCKET_BYTES,
) -> list[int]:
    """The buckets' sizes in bytes, in the order they are reduced, for parameters of
    `param_bytes` (in `model.parameters()` order)."""
    cap = int(bucket_cap_mb * _MB)
    buckets: list[int] = []
    current = 0
    for size in reversed(list(param_bytes)):
        if size <= 0:
            continue
        limit = first_bucket_bytes if not buckets else cap
        current += size
        if current >= limit:
            buckets.append(current)
            current = 0
    if current:
        buckets.append(current)
    return buckets


def exposed_communication(
    buckets: Sequence[int], backward_s: float, collective_s: Callable[[float], float]
) -> tuple[float, float]:
    """(total communication, the part of it left after the backward pass) in seconds.

    `collective_s(bytes)` is one bucket's collective time; `backward_s` the backward
    pass's compute time alone (measured at one rank).
    """
    total_bytes = float(sum(buckets))
    if total_bytes <= 0:
        return 0.0, 0.0
    filled = 0.0
    end = 0.0
    total = 0.0
    for size in buckets:
        filled += size
        ready = backward_s * filled / total_bytes
        took = collective_s(size)
        total += took
        end = max(end, ready) + took
    return total, max(0.0, end - backward_s)
