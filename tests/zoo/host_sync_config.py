"""Zoo: config-file-driven script (host_sync_config.json next to it); planted: host_sync.

"Debug logging" left in a training loop: the model reads per-layer activation statistics
with `.item()` inside its forward, and every step the loop reads the gradient norms with
`.item()` and prints the loss and the batch's predictions (tensors formatted on the host).
On a GPU each of these stalls the device queue; on CPU formatting a (32, 16) tensor alone
costs several times the small model's whole step, so the time spent inside the sync calls
dominates the step (~80%) whatever the machine's load (one thread: everything scales alike).
"""

import argparse
import json
from pathlib import Path

import torch
from torch import nn


class StatsMLP(nn.Module):
    def __init__(self, width: int, depth: int, outputs: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, outputs)
        self.stats: list[float] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
            # "debug logging" that forces a host sync after every layer
            self.stats.append(x.mean().item())
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
    torch.set_num_threads(1)  # a small model: one intra-op thread is all it can use
    model = StatsMLP(cfg["model"]["width"], cfg["model"]["depth"], cfg["model"]["outputs"])
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg["train"]["lr"], foreach=True)
    x = torch.randn(cfg["train"]["batch_size"], cfg["model"]["width"])
    y = torch.randn(cfg["train"]["batch_size"], cfg["model"]["outputs"])
    for step in range(steps):
        preds = model(x)
        loss = nn.functional.mse_loss(preds, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % cfg["train"]["log_every"] == 0:
            norms = [p.grad.norm().item() for p in model.parameters()]
            print(f"step {step} loss {loss} grad-norms {norms[:2]}\npreds {preds}")
            model.stats.clear()


if __name__ == "__main__":
    main()
