"""Zoo: a 2-rank gloo DDP script (torchrun); planted bottleneck: gradient buckets so small
that DDP all-reduces almost every parameter on its own.

Run as `torchrun --nproc_per_node 2 tests/zoo/ddp_tiny_buckets.py`. A deep, narrow residual
MLP (48 blocks of width 16: about 200 parameter tensors of at most 1 KB each) is wrapped in
DistributedDataParallel with `bucket_cap_mb=0.001` (`--bucket-cap-mb`), as a job copied from a
setting meant to start the first all-reduce as early as possible in backward would be. DDP then
closes a bucket at each layer's weight and bias (1 KB + 64 B), and every bucket is one gloo
all-reduce call, each with a fixed cost (a round trip between the ranks) far above the bytes it
moves: the step spends most of its time in ~100 calls where one would do.

The cure needs no code change: DDP's keyword is taken where the script builds its module, so
`torchdoctor tune -- torchrun ...` tries `bucket_cap_mb` (larger first) and keeps it; it is
exact (the sum of the ranks' gradients does not depend on how they are bucketed). The win
comes from the number of collective calls, not from the CPU's arithmetic, so it holds on any
CPU. Every rank runs on one intra-op thread (see tests/zoo/README.md).
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.a = nn.Linear(width, width)
        self.b = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The branch scaled down: 48 unnormalized residual blocks otherwise blow the loss up
        # within ten steps.
        return x + 0.1 * self.b(torch.relu(self.a(x)))


def build_model(depth: int, width: int) -> nn.Module:
    return nn.Sequential(*(Block(width) for _ in range(depth)), nn.Linear(width, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description="DDP with tiny gradient buckets")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--depth", type=int, default=48)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--bucket-cap-mb", type=float, default=0.001)  # PLANTED: ~1 KB buckets
    args = parser.parse_args()

    torch.set_num_threads(1)  # see tests/zoo/README.md: one thread per process
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts them)
    model = nn.parallel.DistributedDataParallel(
        build_model(args.depth, args.width), bucket_cap_mb=args.bucket_cap_mb
    )
    g = torch.Generator().manual_seed(1 + rank)  # each rank its own shard of samples
    n = args.steps * args.batch_size
    data = TensorDataset(torch.randn(n, args.width, generator=g), torch.randn(n, 1, generator=g))
    loader = DataLoader(data, batch_size=args.batch_size, num_workers=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    if rank == 0:
        print(f"done on {dist.get_world_size()} ranks (pid {os.getpid()})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
