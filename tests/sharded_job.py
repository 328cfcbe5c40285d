"""A small FSDP2 job in-process: two gloo ranks on the CPU, each a spawned process
(`torch.multiprocessing.spawn`), sharding a model of blocks with `fully_shard` bottom-up as
its docstring says. The tests of each tuner part on sharded parameters run their rank
function through `spawn_ranks` and read what rank 0 saved."""

from __future__ import annotations

import gc
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import torch
import torch.multiprocessing as mp
from torch import nn

#: Ranks of the job: the fewest that shard.
WORLD = 2


def blocks_model(seed: int = 0) -> nn.Sequential:
    """Three blocks whose every dimension is even, so each rank's shard is exactly half."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Sequential(nn.Linear(8, 16), nn.ReLU()),
        nn.Sequential(nn.Linear(16, 16), nn.ReLU()),
        nn.Linear(16, 4),
    )


def shard(model: nn.Sequential, **kwargs: Any) -> nn.Sequential:
    """`fully_shard` on each block, then on the root (the blocks first, as FSDP wants it)."""
    from torch.distributed.fsdp import fully_shard

    for block in model:
        fully_shard(block, **kwargs)
    fully_shard(model, **kwargs)
    return model


def batch(step: int, rank: int) -> torch.Tensor:
    """A rank's inputs at a step (each rank its own, as a sampler gives them)."""
    return torch.randn(6, 8, generator=torch.Generator().manual_seed(100 * step + rank))


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor) -> float:
    loss = model(x).float().pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return float(loss.detach())


def _run(
    rank: int, fn: Callable[..., None], world: int, rendezvous: str, args: tuple[Any, ...]
) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    # A file rendezvous (torch.distributed's FileStore): no port is chosen here and bound
    # later, which another process on a busy host can take in between.
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    try:
        fn(rank, *args)
        # FSDP's modules and meshes sit in reference cycles: freed now, while the
        # interpreter is whole, not during its shutdown.
        gc.collect()
        dist.barrier()  # no rank tears down while another still works
    finally:
        dist.destroy_process_group()
    # A rank once died in CI with "terminate called without an active exception" (SIGABRT)
    # and no Python traceback, the signature of C++ threads met by the interpreter's teardown.
    # Its work is done and saved here: end the process without that teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def spawn_ranks(fn: Callable[..., None], *args: Any, world: int = WORLD) -> None:
    """Run `fn(rank, *args)` on each of `world` ranks of a gloo job (a module-level function:
    spawn imports it by name in each process)."""
    with tempfile.TemporaryDirectory() as folder:
        rendezvous = os.path.join(folder, "rendezvous")
        mp.spawn(_run, args=(fn, world, rendezvous, args), nprocs=world, join=True)
