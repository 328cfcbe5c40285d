"""A nanoGPT-shaped loop for the tuner's tests: `optimizer.zero_grad(set_to_none=True)` comes
after `optimizer.step()`, at the end of each iteration, so the first call is reached only
after the first optimizer step. No bottleneck is planted (so it is not in the zoo).

`--no-zero-grad`: the gradients are dropped by hand instead (`p.grad = None`), so the script
never calls zero_grad and a set_to_none knob has nothing to act on.
"""

import argparse

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--no-zero-grad", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    for _ in range(args.steps):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if args.no_zero_grad:
            for p in model.parameters():
                p.grad = None
        else:
            optimizer.zero_grad(set_to_none=True)
    print("final loss", loss.item())


if __name__ == "__main__":
    main()
