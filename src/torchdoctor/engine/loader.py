"""The DataLoader a session reads from: seeded order, seeded workers, static batch shapes."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from torchdoctor.knobs import KnobValue, loader_kwargs


def seed_worker(worker_id: int) -> None:
    """Seed Python and NumPy in a worker from torch's per-worker seed (torch seeds itself).

    The recipe in the PyTorch reproducibility notes ("DataLoader" section).
    """
    seed = torch.initial_seed() % 2**32
    random.seed(seed)
    np.random.seed(seed)


def build_loader(
    dataset: Dataset[Any],
    settings: Mapping[str, KnobValue],
    *,
    batch_size: int,
    default_workers: int,
    seed: int,
) -> DataLoader[Any]:
    """A shuffled loader whose order depends only on `seed`.

    drop_last keeps every batch the same shape, so compiled graphs and CUDA graphs are not
    re-specialized for a short last batch.
    """
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        drop_last=True,
        generator=torch.Generator().manual_seed(seed),
        worker_init_fn=seed_worker,
        **loader_kwargs(settings, default_workers),
    )


class EndlessBatches:
    """Batches across epochs: a new epoch starts when the loader is exhausted."""

    def __init__(self, loader: DataLoader[Any]) -> None:
        self.loader = loader
        self.epoch = 0
        self._iterator: Iterator[Any] | None = None

    @property
    def iterator(self) -> Iterator[Any] | None:
        return self._iterator

    def next(self) -> Any:
        if self._iterator is None:
            self._iterator = iter(self.loader)
        try:
            return next(self._iterator)
        except StopIteration:
            self.epoch += 1
            self._iterator = iter(self.loader)
            return next(self._iterator)

    def close(self) -> None:
        # Dropping the iterator shuts its worker processes down (persistent ones too).
        self._iterator = None
