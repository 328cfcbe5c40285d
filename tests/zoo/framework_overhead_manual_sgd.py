"""Zoo: minimal-style script with hand-written SGD (no torch.optim); planted:
framework_overhead.

A deep, narrow MLP (width 8) on a batch of 2: every op is a few dozen FLOPs, so the step is
all per-op dispatch and Python, not arithmetic. Parameters are updated by hand under
no_grad, so steps can only be found from backward calls.
"""

import sys

import torch


def init_params(width: int, depth: int) -> list[torch.Tensor]:
    params = []
    for _ in range(depth):
        params.append((torch.randn(width, width) / width**0.5).requires_grad_())
        params.append(torch.zeros(width).requires_grad_())
    return params


def forward(params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    for w, b in zip(params[::2], params[1::2], strict=True):
        x = torch.tanh(x @ w + b) * 0.5 + x * 0.5
    return x.sum(dim=1)


def main(steps: int = 60) -> None:
    torch.manual_seed(0)
    width, depth, lr = 8, 48, 0.01
    params = init_params(width, depth)
    x, y = torch.randn(2, width), torch.randn(2)
    for _ in range(steps):
        loss = ((forward(params, x) - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
                p.grad = None
    print("final loss", float(loss))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
