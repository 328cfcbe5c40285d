"""Zoo: the control. A well-tuned CPU training loop with nothing planted.

Pre-batched data, a moderately sized MLP so arithmetic dominates, foreach SGD,
zero_grad(set_to_none=True), no host syncs inside the loop, evaluation under
torch.inference_mode(), the loss read once at the end.
"""

import argparse

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    torch.manual_seed(0)
    dim = 512
    x, y = torch.randn(128, dim), torch.randn(128, 1)
    model = nn.Sequential(
        nn.Linear(dim, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=True)
    for _ in range(args.steps):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.inference_mode():
        val = nn.functional.mse_loss(model(x), y)
    print(f"train loss {loss.item():.4f} val loss {val.item():.4f}")


if __name__ == "__main__":
    main()
