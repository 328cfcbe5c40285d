"""`recsys`: a DLRM-style click model, big embedding tables plus MLPs.

Most parameters sit in the embedding tables, and their gradients are dense, so the
optimizer step (Adam touching every row and two state tensors per table) and memory are
what matter here. Category ids follow a skewed (Zipf-like) popularity, as real ids do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset

from torchdoctor.core.optimizer import make_optimizer
from torchdoctor.workloads.base import SyntheticWorkload

#: Exponent of the power law that skews id popularity (ids drawn as rows * u**ZIPF_POWER).
ZIPF_POWER = 3.0

Sample = tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]


class ClickLogs(Dataset[Sample]):
    """Dense features, categorical ids and a click label from a random logistic teacher."""

    def __init__(self, size: int, dense: int, tables: int, rows: int, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.dense = torch.randn(size, dense, generator=gen)
        u = torch.rand(size, tables, generator=gen)
        self.ids = (u.pow(ZIPF_POWER) * rows).long().clamp_(max=rows - 1)
        id_score = torch.randn(tables, rows, generator=gen)
        w = torch.randn(dense, generator=gen) / dense**0.5
        logit = self.dense @ w + id_score.gather(1, self.ids.T).sum(0) / tables**0.5
        self.labels = (torch.rand(size, generator=gen) < torch.sigmoid(logit)).float()

    def __len__(self) -> int:
        return self.labels.shape[0]

    def __getitem__(self, index: int) -> Sample:
        return (self.dense[index], self.ids[index]), self.labels[index]


class Dlrm(nn.Module):
    def __init__(self, dense: int, tables: int, rows: int, dim: int) -> None:
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(dense, 64), nn.ReLU(), nn.Linear(64, dim), nn.ReLU())
        self.tables = nn.ModuleList(nn.Embedding(rows, dim) for _ in range(tables))
        features = (tables + 1) * dim
        self.top = nn.Sequential(
            nn.Linear(features, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 1)
        )

    def forward(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
        dense, ids = inputs
        parts = [self.bottom(dense)]
        parts += [table(ids[:, i]) for i, table in enumerate(self.tables)]
        return self.top(torch.cat(parts, dim=1)).squeeze(1)


class RecsysWorkload(SyntheticWorkload):
    kind = "recsys"
    name = "recsys"
    description = "DLRM-style click model: large embedding tables + MLPs (optimizer/memory heavy)"
    sample_unit = "one impression (dense features + categorical ids)"

    param_names = ("dense", "tables", "rows", "dim", "impressions")

    def __init__(
        self,
        dense: int = 13,
        tables: int = 8,
        rows: int = 20_000,
        dim: int = 32,
        impressions: int = 16384,
        batch_size: int = 512,
    ) -> None:
        self.dense, self.tables, self.rows, self.dim = dense, tables, rows, dim
        self.impressions = impressions
        self.default_batch_size = batch_size
        self.input_shapes = {"dense": (dense,), "ids": (tables,)}

    def build_model(self) -> Dlrm:
        return Dlrm(self.dense, self.tables, self.rows, self.dim)

    def build_dataset(self, seed: int) -> ClickLogs:
        return ClickLogs(self.impressions, self.dense, self.tables, self.rows, seed)

    def loss(self, output: Any, target: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(output, target)

    def build_optimizer(self, params: Iterable[nn.Parameter], impl: str) -> torch.optim.Optimizer:
        return make_optimizer(torch.optim.Adam, params, impl, lr=1e-3)

    def eval_metric(self, output: Any, target: torch.Tensor) -> float:
        """Accuracy of the click prediction at threshold 0.5."""
        return float(((output > 0).float() == target).float().mean())

    def checkpoint_blocks(self, model: nn.Module) -> list[nn.Module]:
        """The bottom and top MLPs: their hidden activations are recomputed in backward (the
        embedding lookups, whose outputs are the top's input, are kept either way)."""
        assert isinstance(model, Dlrm)
        return [model.bottom, model.top]
