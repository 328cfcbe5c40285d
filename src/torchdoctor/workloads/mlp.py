"""`mlp`: a tabular classifier, a small MLP on rows of synthetic numeric features.

The labels come from a fixed random "teacher" network, so the task is learnable and the loss
falls; everything is made from the seed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset

from torchdoctor.core.optimizer import make_optimizer
from torchdoctor.workloads.base import SyntheticWorkload


class TabularDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Rows of standard-normal features labelled by a random linear-ReLU teacher."""

    def __init__(self, rows: int, features: int, classes: int, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.x = torch.randn(rows, features, generator=gen)
        teacher_hidden = torch.randn(features, 64, generator=gen)
        teacher_out = torch.randn(64, classes, generator=gen)
        self.y = (torch.relu(self.x @ teacher_hidden) @ teacher_out).argmax(dim=1)

    def __len__(self) -> int:
        return self.x.shape[0]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[index], self.y[index]


class MlpWorkload(SyntheticWorkload):
    kind = "tabular"
    name = "mlp"
    description = "Tabular MLP classifier on synthetic numeric features"

    param_names = ("features", "hidden", "layers", "classes", "rows")

    def __init__(
        self,
        features: int = 64,
        hidden: int = 256,
        layers: int = 3,
        classes: int = 10,
        rows: int = 8192,
        batch_size: int = 256,
    ) -> None:
        self.features, self.hidden, self.layers = features, hidden, layers
        self.classes, self.rows = classes, rows
        self.default_batch_size = batch_size
        self.sample_unit = f"a row of {features} numeric features"
        self.input_shapes = {"x": (features,)}

    def build_model(self) -> nn.Module:
        blocks: list[nn.Module] = []
        width = self.features
        for _ in range(self.layers):
            blocks += [nn.Linear(width, self.hidden), nn.ReLU()]
            width = self.hidden
        blocks.append(nn.Linear(width, self.classes))
        return nn.Sequential(*blocks)

    def build_dataset(self, seed: int) -> TabularDataset:
        return TabularDataset(self.rows, self.features, self.classes, seed)

    def loss(self, output: Any, target: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(output, target)

    def build_optimizer(self, params: Iterable[nn.Parameter], impl: str) -> torch.optim.Optimizer:
        return make_optimizer(torch.optim.AdamW, params, impl, lr=1e-3)

    def eval_metric(self, output: Any, target: torch.Tensor) -> float:
        """Accuracy."""
        return float((output.argmax(dim=1) == target).float().mean())
