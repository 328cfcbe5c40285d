"""A workload whose memory is mostly activations: narrow residual blocks with a wide inside.

Each block maps 4 features up to 2048 and back (x + W2 gelu(W1 x)), so what backward keeps
per sample (the 2048-wide pre-activation and its GELU) is large next to the weights and the
arithmetic is light: the memory ladder's study (`tests/integration/test_tune_fit.py`) sees
bf16, checkpointing and accumulation move the peak by tens of MiB in steps of milliseconds.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from torchdoctor.workloads.mlp import MlpWorkload

FEATURES = 4
WIDE = 2048
BLOCKS = 4


class WideBlock(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.up = nn.Linear(features, WIDE)
        self.down = nn.Linear(WIDE, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(x)))


class WideBlocks(nn.Module):
    def __init__(self, features: int, classes: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(WideBlock(features) for _ in range(BLOCKS))
        self.head = nn.Linear(features, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class WideBlocksWorkload(MlpWorkload):
    name = "wide_blocks"
    description = "residual blocks 16 -> 2048 -> 16 on synthetic rows: activations dominate"

    def build_model(self) -> nn.Module:
        return WideBlocks(self.features, self.classes)

    def checkpoint_blocks(self, model: nn.Module) -> list[nn.Module]:
        assert isinstance(model, WideBlocks)
        return list(model.blocks)


def make(**params: Any) -> WideBlocksWorkload:
    return WideBlocksWorkload(**{"features": FEATURES, "batch_size": 1024, **params})
