"""Zoo: pre-batched tensors, no DataLoader (nanoGPT-style get_batch); planted: other_host.

The step is small, but after every update the script does heavy Python bookkeeping: it
rebuilds a metrics dictionary, formats and JSON-serializes a long history and scans it,
all on the host between steps.
"""

import json
import sys

import torch
from torch import nn

train_data = torch.randn(4096, 64)
train_target = torch.randn(4096, 1)


def get_batch(step: int, batch_size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    i = (step * batch_size) % (train_data.shape[0] - batch_size)
    return train_data[i : i + batch_size], train_target[i : i + batch_size]


def bookkeeping(history: list[dict], step: int) -> str:
    # Python-only work per step: the kind of logging/metric code that grows in real scripts
    history.append({"step": step, "tags": [f"run-{step}-{k}" for k in range(200)]})
    blob = json.dumps(history[-40:])
    return str(sum(len(t) for h in json.loads(blob) for t in h["tags"]))


def main(max_iters: int = 16) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)  # a 64-wide MLP cannot use a second intra-op thread
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    history: list[dict] = []
    for it in range(max_iters):
        x, y = get_batch(it)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        bookkeeping(history, it)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 16)
