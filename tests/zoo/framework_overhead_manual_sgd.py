"""Zoo: minimal-style script with hand-written SGD (no torch.optim); planted:
framework_overhead.

A deep, narrow residual MLP (48 layers of width 8) on a batch of 2: every op is a few dozen
FLOPs (nanoseconds of arithmetic against microseconds of dispatch), so over ~1500 operator
calls per step the step is all per-op dispatch, not arithmetic. Parameters are updated by
hand under no_grad, so steps can only be found from backward calls.
"""

import sys

import torch
from torch import nn


class TinyBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(x)) * 0.5 + x * 0.5


def main(steps: int = 16) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)  # 8-wide ops cannot use a second intra-op thread
    width, depth, lr = 8, 48, 0.01
    model = nn.Sequential(*(TinyBlock(width) for _ in range(depth)))
    x, y = torch.randn(2, width), torch.randn(2)
    for _ in range(steps):
        loss = ((model(x).sum(dim=1) - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
                p.grad = None
    print("final loss", loss.item())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 16)
