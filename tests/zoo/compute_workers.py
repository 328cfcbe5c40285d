"""Zoo: DataLoader with worker processes feeding big matmuls; planted bottleneck: compute.

Samples are cheap slices of a prepared tensor, two workers prefetch ahead, and each step is
a wide MLP on a batch of 256: the time goes into matrix multiplies.
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class FeatureDataset(Dataset):
    def __init__(self, n: int, dim: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, dim, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mp-context", choices=["fork", "spawn", "forkserver"], default=None)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()

    torch.manual_seed(0)
    dim = 512
    data = FeatureDataset(args.steps * args.batch_size, dim)
    loader = DataLoader(
        data,
        batch_size=args.batch_size,
        num_workers=args.workers,
        multiprocessing_context=args.mp_context if args.workers > 0 else None,
        persistent_workers=args.workers > 0,
        shuffle=True,
    )
    model = nn.Sequential(
        nn.Linear(dim, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
