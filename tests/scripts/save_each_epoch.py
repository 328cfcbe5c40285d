"""A script that checkpoints as pytorch/examples' word_language_model does: after each epoch it
saves the whole model (`torch.save(model, f)`), keeps an EMA copy (`copy.deepcopy`), round-trips
the state_dicts, and trains on. At the end it loads the saved model back and evaluates it.

A small conv stem (channels_last has 4-D inputs) then repeated blocks (checkpointing has blocks
to recompute), a DataLoader (the loader knobs) and AdamW (the optimizer knobs). For the run
tests, each knob injected by `torchdoctor run --recipe` must leave this script training to the
end and its saved model loadable.
"""

import argparse
import copy
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        blocks = (nn.Sequential(nn.Linear(16, 16), nn.GELU()) for _ in range(3))
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x).mean((2, 3))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--save", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(32, 3, 8, 8), torch.randint(0, 4, (32,)))
    loader = DataLoader(data, batch_size=8, shuffle=True)
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ema = copy.deepcopy(model)
    for _ in range(args.epochs):
        model.train()
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x).float(), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters(), strict=True):
                e.mul_(0.5).add_(p, alpha=0.5)
        with open(args.save, "wb") as f:
            torch.save(model, f)
        ema = copy.deepcopy(model)
        model.load_state_dict(copy.deepcopy(model.state_dict()))
        optimizer.load_state_dict(copy.deepcopy(optimizer.state_dict()))
    with open(args.save, "rb") as f:
        loaded = torch.load(f, weights_only=False)
    loaded.eval()
    with torch.no_grad():
        out = loaded(data.tensors[0])
    print("loaded", type(loaded).__name__, tuple(out.shape), out.dtype, file=sys.stderr)


if __name__ == "__main__":
    main()
