"""Zoo: Trainer-class style (as in many research repos); planted bottleneck: optimizer.

A huge embedding table (4M parameters) with dense gradients updated by a for-loop Adam
(`foreach=False`), while each step looks up only a handful of rows: the update touches every
parameter every step and dwarfs the forward and backward.
"""

import argparse
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class TrainerConfig:
    vocab: int = 64_000
    dim: int = 64
    batch_size: int = 8
    steps: int = 12
    lr: float = 1e-3


class BagModel(nn.Module):
    def __init__(self, cfg: TrainerConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.out = nn.Linear(cfg.dim, 1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(ids).mean(dim=1)).squeeze(-1)


class Trainer:
    def __init__(self, cfg: TrainerConfig) -> None:
        self.cfg = cfg
        self.model = BagModel(cfg)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, foreach=False)
        self.global_step = 0

    def get_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.randint(0, self.cfg.vocab, (self.cfg.batch_size, 4))
        return ids, torch.randn(self.cfg.batch_size)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        ids, target = batch
        return nn.functional.mse_loss(self.model(ids), target)

    def fit(self) -> None:
        self.model.train()
        while self.global_step < self.cfg.steps:
            loss = self.training_step(self.get_batch())
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            self.global_step += 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=TrainerConfig.steps)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # the planted cost is a per-tensor loop: one thread, any load
    Trainer(TrainerConfig(steps=args.steps)).fit()


if __name__ == "__main__":
    main()
