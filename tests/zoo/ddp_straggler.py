"""Zoo: a 2-rank gloo DDP script (torchrun); planted bottleneck: one rank straggles.

Run as `torchrun --nproc_per_node 2 tests/zoo/ddp_straggler.py`. Every rank trains the same
tiny MLP on one intra-op thread; the slow rank (`--slow-rank`, rank 1 by default) is held
back in one place, so every other rank waits for it in DDP's gradient all-reduce:

- `--straggle data` (default): the slow rank's dataset waits `--delay-ms` (40) per batch, as
  a read from slow storage would, inside the DataLoader's `__next__`;
- `--straggle compute`: the slow rank's forward runs `--extra-matmuls` (8) more pairs of 256-wide
  matmuls on its activations, as a slower device would.

The other ranks' wait shows up inside their backward (where DDP waits for the all-reduce),
which is what a per-rank diagnosis would blame on communication.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    """Cheap synthetic samples; `delay_s` per batch stands in for slow storage."""

    def __init__(self, n: int, batch: int, delay_s: float) -> None:
        self.n, self.batch, self.delay_s = n, batch, delay_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if self.delay_s and i % self.batch == 0:
            time.sleep(self.delay_s)  # once per batch: the batch's bytes arrive late
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), i % 10


class Net(nn.Module):
    def __init__(self, extra_matmuls: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
        self.extra_matmuls = extra_matmuls
        self.mix = torch.randn(256, 256) / 16

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body[1](self.body[0](x))
        for _ in range(self.extra_matmuls):  # the slow rank's slower compute
            h = torch.tanh(torch.mm(torch.mm(h, self.mix), self.mix.t()))
        return self.body[2](h)


def main() -> None:
    parser = argparse.ArgumentParser(description="DDP with one straggling rank")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--straggle", choices=("data", "compute", "none"), default="data")
    parser.add_argument("--slow-rank", type=int, default=1)
    parser.add_argument("--delay-ms", type=float, default=40.0)
    parser.add_argument("--extra-matmuls", type=int, default=8)
    args = parser.parse_args()

    torch.set_num_threads(1)  # see tests/zoo/README.md: one thread per process
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    slow = rank == args.slow_rank
    delay = args.delay_ms / 1000 if slow and args.straggle == "data" else 0.0
    extra = args.extra_matmuls if slow and args.straggle == "compute" else 0
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(Net(extra))
    data = Samples(args.steps * args.batch_size, args.batch_size, delay)
    loader = DataLoader(data, batch_size=args.batch_size, num_workers=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for x, y in loader:
        loss = criterion(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    if rank == 0:
        print(f"done on {dist.get_world_size()} ranks (pid {os.getpid()})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
