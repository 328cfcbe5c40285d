"""A small FSDP2 training job for torchrun on the CPU: gloo, a model of blocks sharded with
`fully_shard` bottom-up, Adam, a fixed number of steps on seeded data.

    torchrun --nproc-per-node 2 tests/scripts/fsdp2_blocks.py --steps 300

`--own-precision-on-rank 1` makes that rank shard with its own bf16 MixedPrecisionPolicy,
so the ranks of the job disagree on the recipe when one is injected.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

WIDTH = 64
BLOCKS = 4


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--own-precision-on-rank", type=int, default=None)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(
        *(nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU()) for _ in range(BLOCKS)),
        nn.Linear(WIDTH, 1),
    )
    own = {}
    if args.own_precision_on_rank == rank:
        own["mp_policy"] = MixedPrecisionPolicy(
            param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16
        )
    for block in model:
        fully_shard(block, **own)
    fully_shard(model, **own)
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
