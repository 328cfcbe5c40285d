"""A tuned script's arm that replays CUDA graphs reports a peak that holds their pools.

The fake allocator is the one the H200 run showed: a graph's private pool is reserved from
the device but never counted by `max_memory_allocated`.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from torchdoctor.collect import control
from torchdoctor.knobs import Recipe

ALLOCATED = 2_500_000
POOL = 75_000_000


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: ALLOCATED)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda *a: ALLOCATED + POOL)


def _controller(recipe: dict[str, object] | None) -> control.StepController:
    ctl = object.__new__(control.StepController)
    ctl.injection = None if recipe is None else SimpleNamespace(recipe=Recipe.from_dict(recipe))
    return ctl


@pytest.mark.parametrize(
    ("recipe", "graphs"),
    [
        ({"cuda_graphs": True}, True),
        ({"compile": "reduce-overhead"}, True),
        ({"compile": "default"}, False),
        ({"precision": "bf16"}, False),
        (None, False),
    ],
)
def test_the_peak_holds_the_pool_only_for_a_graph_recipe(
    fake_cuda: None, recipe: dict[str, object] | None, graphs: bool
) -> None:
    ctl = _controller(recipe)
    assert ctl._replays_graphs() is graphs
    peak = control.peak_memory_bytes(graph_pools=ctl._replays_graphs())
    assert peak == (ALLOCATED + POOL if graphs else ALLOCATED)
