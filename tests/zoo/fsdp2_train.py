"""Zoo: a 2-rank gloo FSDP2 script (torchrun); one planted problem per `--plant`.

Run as `torchrun --nproc_per_node 2 tests/zoo/fsdp2_train.py --plant X`. A stack of
transformer-like MLP blocks (LayerNorm, a 4x-wide MLP, a residual) is sharded with
`fully_shard` per block and at the root, under a bf16 `MixedPrecisionPolicy`. Without a plant
the job is set up as a careful one would be on the CPU: each block's all-gather is started one
block ahead (`set_modules_to_forward_prefetch` / `set_modules_to_backward_prefetch`) and
asynchronously (the unshard's `async_op`), so gloo's thread moves the next block's parameters
while this one computes; gradients are reduced in bf16; parameters stay unsharded between
forward and backward (`reshard_after_forward=False`), since a model this small has memory to
spare. Each plant undoes one of those:

- `exposed-all-gather`: no prefetch, every unshard synchronous (fully_shard's defaults on a
  device without streams): each block waits for its own all-gather, in forward and backward.
- `fp32-reduce`: `MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`: gradients are
  computed in bf16 and reduce-scattered in fp32, twice the bytes a bf16 reduce would move.
  Seen best under a slow link between the ranks (tests/zoo/README.md).
- `reshard`: `reshard_after_forward=True` (fully_shard's default): every block is gathered
  again in backward, though keeping the whole unsharded model would cost a few MB.
- `root-only`: only the root is wrapped: one unit, gathered whole before the first block
  runs, with nothing to overlap it with.

Every rank runs on one intra-op thread (see tests/zoo/README.md).
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

PLANTS = ("none", "exposed-all-gather", "fp32-reduce", "reshard", "root-only")


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


class Stack(nn.Module):
    def __init__(self, depth: int, width: int) -> None:
        super().__init__()
        self.inp = nn.Linear(width, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def shard(model: Stack, plant: str) -> None:
    reduce_dtype = torch.float32 if plant == "fp32-reduce" else torch.bfloat16  # PLANTED
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce_dtype)
    reshard = plant == "reshard"  # PLANTED: fully_shard's default, memory to spare here
    if plant != "root-only":  # PLANTED: root-only leaves the blocks unwrapped
        for block in model.blocks:
            fully_shard(block, mp_policy=policy, reshard_after_forward=reshard)
    fully_shard(model, mp_policy=policy, reshard_after_forward=reshard)
    if plant in ("exposed-all-gather", "root-only"):
        return  # PLANTED: no prefetch, synchronous unshards
    blocks = list(model.blocks)
    for i, block in enumerate(blocks):
        block._set_unshard_async_op(True)
        if i + 1 < len(blocks):
            block.set_modules_to_forward_prefetch([blocks[i + 1]])
        if i > 0:
            block.set_modules_to_backward_prefetch([blocks[i - 1]])


def main() -> None:
    parser = argparse.ArgumentParser(description="FSDP2 with one planted problem")
    parser.add_argument("--plant", choices=PLANTS, default="none")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--width", type=int, default=256)
    args = parser.parse_args()

    torch.set_num_threads(1)  # see tests/zoo/README.md: one thread per process
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same initial weights on every rank before sharding
    model = Stack(args.depth, args.width)
    shard(model, args.plant)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1 + rank)  # each rank its own samples
    for _ in range(args.steps):
        x = torch.randn(args.batch_size, args.width, generator=g)
        y = torch.randn(args.batch_size, 1, generator=g)
        loss = nn.functional.mse_loss(model(x).float(), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    if rank == 0:
        print(f"done on {dist.get_world_size()} ranks, plant {args.plant} (pid {os.getpid()})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
