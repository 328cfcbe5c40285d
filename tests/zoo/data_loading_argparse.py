"""Zoo: argparse-style image-classification script; planted bottleneck: data_loading.

Each sample is "decoded" in Python inside `__getitem__` (a per-pixel loop standing in for
JPEG decode + augmentation), the DataLoader runs with num_workers=0, and the model is tiny:
the step waits on data far longer than it computes.
"""

import argparse
import math
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowDecodeDataset(Dataset):
    def __init__(self, n: int, size: int, decode_ms: float) -> None:
        self.n, self.size, self.decode_s = n, size, decode_ms / 1e3

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        deadline = time.perf_counter() + self.decode_s
        acc = 0.0
        while time.perf_counter() < deadline:  # busy "decode", as a real decoder would be
            acc += math.sin(acc + i)
        x = torch.full((3, self.size, self.size), float(i % 7) / 7)
        return x, i % 10


def main() -> None:
    parser = argparse.ArgumentParser(description="train a tiny classifier")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=25, help="stop after this many steps")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--decode-ms", type=float, default=1.5)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    torch.manual_seed(0)
    data = SlowDecodeDataset(args.steps * args.batch_size, 16, args.decode_ms)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 32), nn.ReLU(), nn.Linear(32, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    step = 0
    for epoch in range(args.epochs):
        for images, labels in loader:
            loss = criterion(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
        print(f"epoch {epoch} done after {step} steps")


if __name__ == "__main__":
    main()
