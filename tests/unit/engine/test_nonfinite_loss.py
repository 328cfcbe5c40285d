"""A loss that turns NaN or infinite is recorded as data: null in JSON, with where it happened."""

from __future__ import annotations

import json

import pytest
import torch

from torchdoctor.engine import RunResult, run_workload
from torchdoctor.knobs import Recipe
from torchdoctor.workloads import get_workload
from torchdoctor.workloads.base import Workload


def poisoned_mlp(after_calls: int, poison: float) -> Workload:
    """The small MLP workload whose loss is multiplied by `poison` after `after_calls` calls."""
    workload = get_workload("mlp", rows=256, batch_size=32)
    original = workload.loss
    calls = {"n": 0}

    def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        value = original(output, target)
        return value * poison if calls["n"] > after_calls else value

    workload.loss = loss  # type: ignore[method-assign]
    return workload


@pytest.mark.parametrize(("poison", "kind"), [(float("nan"), "nan"), (float("inf"), "inf")])
def test_nonfinite_losses_become_null_and_the_first_is_located(poison: float, kind: str) -> None:
    result = run_workload(
        poisoned_mlp(3, poison),
        Recipe(),
        steps=3,
        warmup_steps=2,
        settle_warmup=False,
        measure_phases=False,
    )
    assert all(isinstance(x, float) for x in result.losses[:3])
    assert result.losses[3:] == [None, None]
    assert result.nonfinite_loss_step == 3 and result.nonfinite_loss_value == kind
    assert result.diverged
    assert [s.loss is None for s in result.steps] == [False, True, True]
    message = result.divergence_message()
    assert message is not None and f"became {kind} at measured step 2 of 3" in message

    data = json.loads(result.to_json())  # JSON forbids NaN: this used to raise
    assert data["losses"][3:] == [None, None] and data["nonfinite_loss_step"] == 3
    assert RunResult.from_json_dict(data) == result


def test_divergence_in_warm_up_is_named_as_such() -> None:
    result = run_workload(
        poisoned_mlp(0, float("nan")), Recipe(), steps=1, warmup_steps=2, settle_warmup=False
    )
    assert result.nonfinite_loss_step == 0
    assert "warm-up step 1 of 2" in (result.divergence_message() or "")


def test_finite_run_is_not_diverged() -> None:
    result = run_workload(poisoned_mlp(10**6, float("nan")), Recipe(), steps=2, warmup_steps=1)
    assert not result.diverged and result.divergence_message() is None
    assert result.nonfinite_loss_value is None and None not in result.losses
