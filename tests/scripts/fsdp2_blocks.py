"""A small FSDP2 training job for torchrun on the CPU: gloo, a model of blocks sharded with
`fully_shard` bottom-up, Adam, a fixed number of steps on seeded data.

    torchrun --nproc-per-node 2 tests/scripts/fsdp2_blocks.py --steps 300

`--unpatched-on-rank 1` makes that rank call `fully_shard` through the module that defines it
(not the public name a script imports and the injection patches), so an injected FSDP knob
acts on the other ranks only and the ranks disagree on the recipe.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

WIDTH = 64
BLOCKS = 4


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--unpatched-on-rank", type=int, default=None)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(
        *(nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU()) for _ in range(BLOCKS)),
        nn.Linear(WIDTH, 1),
    )
    shard = fully_shard
    if args.unpatched_on_rank == rank:
        from torch.distributed.fsdp._fully_shard import _fully_shard

        shard = _fully_shard.fully_shard
    for block in model:
        shard(block)
    shard(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = torch.Generator().manual_seed(rank)
    target = torch.randn(WIDTH, 1, generator=torch.Generator().manual_seed(7))
    for _ in range(args.steps):
        x = torch.randn(32, WIDTH, generator=data)
        loss = (model(x).float() - x @ target).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
