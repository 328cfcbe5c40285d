"""A regression whose signal bf16 cannot hold: bf16 autocast is faster here and breaks learning.

Each input is a large common offset (256) plus the signal, small variations around it (sd
0.25), and the target is a linear function of those variations. bf16's 8-bit significand
spaces numbers near 256 two apart, so under bf16 autocast the first Linear sees every sample
as the same vector: after BatchNorm removes the offset nothing is left, and the loss stays
where it started. In fp32 BatchNorm leaves the signal, and the model learns it within a few
dozen steps. The wide matmuls (batch 256, 512 -> 1024 -> 1024) run faster in bf16 on a CPU
with bf16 units, so only the quality check stands between this change and a keep.

    python tests/scripts/bf16_loses_signal.py [STEPS]
"""

import sys

import torch
from torch import nn

DIM, BATCH, OFFSET, SIGNAL_SD = 512, 256, 256.0, 0.25


def main(steps: int = 16) -> None:
    torch.manual_seed(0)
    w = torch.randn(DIM, 1) / (DIM**0.5 * SIGNAL_SD)  # targets of sd ~1
    model = nn.Sequential(
        nn.Linear(DIM, 1024),
        nn.BatchNorm1d(1024),
        nn.ReLU(),
        nn.Linear(1024, 1024),
        nn.ReLU(),
        nn.Linear(1024, 1),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(steps):
        u = torch.randn(BATCH, DIM) * SIGNAL_SD
        loss = nn.functional.mse_loss(model(OFFSET + u), u @ w)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 8 == 0:
            print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 16)
