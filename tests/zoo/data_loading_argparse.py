"""Zoo: argparse-style image-classification script; planted bottleneck: data_loading.

Each sample is "decoded" in Python inside `__getitem__` (a fixed amount of pure-Python math
standing in for JPEG decode + augmentation, ~1.5 ms per sample on a quiet core), the
DataLoader runs with num_workers=0, and the model is tiny (~0.1 ms per step): the step waits
on data ~100x longer than it computes. Everything runs on one thread, so a busy machine
slows both alike and the planting stays dominant.

`--read-ms` makes each sample first wait on storage (a read from a network filesystem or an
object store, which blocks without using a core), so loader workers overlap the waits: their
gain then depends neither on a free second core nor on the host's speed.
"""

import argparse
import math
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowDecodeDataset(Dataset):
    def __init__(self, n: int, size: int, decode_iters: int, read_s: float = 0.0) -> None:
        self.n, self.size, self.decode_iters, self.read_s = n, size, decode_iters, read_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if self.read_s:
            time.sleep(self.read_s)  # the sample's bytes arrive from remote storage
        acc = 0.0
        for k in range(self.decode_iters):  # CPU-bound "decode", as a real decoder is
            acc += math.sin(acc + i + k)
        x = torch.full((3, self.size, self.size), float(i % 7) / 7)
        return x, i % 10


def main() -> None:
    parser = argparse.ArgumentParser(description="train a tiny classifier")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=16, help="stop after this many steps")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--decode-iters", type=int, default=15_000)
    parser.add_argument("--read-ms", type=float, default=0.0, help="storage wait per sample")
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    torch.manual_seed(0)
    # A tiny model gains nothing from a second intra-op thread (its ops are too small to
    # split), and on a shared machine each two-thread region can wait a scheduler tick.
    torch.set_num_threads(1)
    data = SlowDecodeDataset(
        args.steps * args.batch_size, 16, args.decode_iters, args.read_ms / 1000
    )
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
