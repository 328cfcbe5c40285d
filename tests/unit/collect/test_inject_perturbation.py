"""A tuned script's quality yardstick: the injection finds the trained model and gives its
initial weights the engine's no-op perturbation before its first step (and none at index 0)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from torchdoctor.collect.inject import Injection
from torchdoctor.engine import PERTURBATION_SCALE


def _train_first_step(injection: Injection) -> tuple[nn.Module, nn.Module]:
    """Build a model and its optimizer under `injection`, run one step; (initial, model)."""
    torch.manual_seed(0)
    with injection:
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        initial = copy.deepcopy(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)  # lr 0: only the perturbation moves
        loss = model(torch.randn(4, 8)).sum()
        loss.backward()
        opt.step()
    return initial, model


def test_perturbation_moves_the_weights_by_at_most_the_bf16_roundoff() -> None:
    initial, model = _train_first_step(Injection({}, perturbation=1))
    changed = 0
    for before, after in zip(initial.parameters(), model.parameters(), strict=True):
        relative = ((after - before).abs() / before.abs().clamp_min(1e-30)).max().item()
        assert relative <= PERTURBATION_SCALE * (1 + 1e-6)
        changed += int(not torch.equal(before, after))
    assert changed == len(list(model.parameters()))


def test_different_indices_give_different_perturbations() -> None:
    _, one = _train_first_step(Injection({}, perturbation=1))
    _, two = _train_first_step(Injection({}, perturbation=2))
    assert not torch.equal(one[0].weight, two[0].weight)


@pytest.mark.parametrize("recipe", [{}, {"precision": "bf16"}])
def test_perturbation_zero_leaves_the_weights_alone(recipe: dict[str, str]) -> None:
    initial, model = _train_first_step(Injection(recipe, perturbation=0))
    for before, after in zip(initial.parameters(), model.parameters(), strict=True):
        assert torch.equal(before, after)
