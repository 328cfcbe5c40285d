"""Zoo: config-file-driven script (host_sync_config.json next to it); planted: host_sync.

The model logs per-layer activation statistics with `.item()` inside its forward, and the
loop prints the loss tensor and reads `.item()` / `.tolist()` every step: dozens of host
sync points per step, each of which would stall a GPU queue.
"""

import argparse
import json
from pathlib import Path

import torch
from torch import nn


class StatsMLP(nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, 1)
        self.stats: list[float] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
            # "debug logging" that forces a host sync after every op
            self.stats.append(x.mean().item())
            self.stats.append(x.std().item())
            self.stats.append(x.abs().max().item())
        return self.head(x)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=str(Path(__file__).with_suffix(".json")))
    parser.add_argument("--steps", type=int, default=None, help="override train.steps")
    args = parser.parse_args()
    cfg = json.loads(Path(args.config).read_text())
    steps = args.steps or cfg["train"]["steps"]

    torch.manual_seed(0)
    model = StatsMLP(cfg["model"]["width"], cfg["model"]["depth"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg["train"]["lr"])
    x = torch.randn(cfg["train"]["batch_size"], cfg["model"]["width"])
    y = torch.randn(cfg["train"]["batch_size"], 1)
    for step in range(steps):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % cfg["train"]["log_every"] == 0:
            norms = [p.grad.norm().item() for p in model.parameters()]
            print(f"step {step} loss {loss} grad-norms {norms[:2]}")
            model.stats.clear()


if __name__ == "__main__":
    main()
