"""The quality check on real training: harmless changes pass, learning-breaking ones fail.

The `cnn` workload is trained for the tuner's parity window from three seeds. For each seed
the reference is the baseline plus its no-op-perturbed replicas (what the tuner measures once
per study); channels_last (an exact change) and bf16 autocast (a close one) must pass, and
three changes that break learning must fail: a 10x learning rate, a frozen backbone, and fp16
autocast where the activations overflow fp16's range.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest
import torch
from torch import nn

from torchdoctor.core.optimizer import make_optimizer
from torchdoctor.core.vocabulary import Safety
from torchdoctor.engine import prepare
from torchdoctor.knobs import Recipe
from torchdoctor.tune.arms import DEFAULT_PARITY_STEPS
from torchdoctor.tune.parity import REFERENCE_RUNS, QualityReference, check_parity
from torchdoctor.workloads.cnn import LEARNING_RATE, CnnWorkload

#: A measurement study of real training (36 runs of the parity window): minutes on 2 cores.
pytestmark = [pytest.mark.study, pytest.mark.untimed]  # losses, never timings

SEEDS = (0, 1, 2)
#: How the check words a run that learns less than the baseline (see tune.parity._verdict).
LEARNS_LESS = ("it learns", "it stopped learning", "training diverges")
STEPS = DEFAULT_PARITY_STEPS


class TenfoldRate(CnnWorkload):
    def build_optimizer(self, params: Iterable[nn.Parameter], impl: str) -> torch.optim.Optimizer:
        return make_optimizer(
            torch.optim.SGD, params, impl, lr=10 * LEARNING_RATE, momentum=0.9, weight_decay=5e-4
        )


class FrozenBackbone(CnnWorkload):
    """Only the classifier head trains (an optimizer that lost its other parameter groups)."""

    def build_optimizer(self, params: Iterable[nn.Parameter], impl: str) -> torch.optim.Optimizer:
        head = list(params)[-2:]  # the head's weight and bias are registered last
        return super().build_optimizer(head, impl)


class Scaled(nn.Module):
    def __init__(self, inner: nn.Module, factor: float) -> None:
        super().__init__()
        self.inner, self.factor = inner, factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x * self.factor)


class LoudInputs(CnnWorkload):
    """Inputs scaled by 3e4: batch norm absorbs it in fp32, while the first convolution's
    outputs (about 3e4 * sqrt(27) * 0.1 ~ 2e4 standard deviation) exceed fp16's 65504."""

    def build_model(self) -> nn.Module:
        return Scaled(super().build_model(), 3e4)


def _losses(
    workload: CnnWorkload, recipe: dict[str, Any], seed: int, *, perturbation: int = 0
) -> list[float | None]:
    session = prepare(
        workload, Recipe.from_dict(recipe), device="cpu", seed=seed, perturbation=perturbation
    )
    losses: list[float | None] = []
    # One step at a time, stopping at the first non-finite loss: the check rejects it there,
    # and fp16 on a CPU without fp16 units is slow.
    while len(losses) < STEPS:
        loss = session.run_steps(1, measure_phases=False)[0].loss
        losses.append(loss)
        if loss is None or loss != loss or abs(loss) == float("inf"):
            break
    return losses


def _workload(cls: type[CnnWorkload] = CnnWorkload) -> CnnWorkload:
    # No simulated decode cost: the quality of training does not depend on it.
    return cls(decode_cost_us=0.0)


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """One thread: CI runs this file beside another test process on 2 cores, where a
    two-thread step waits on OpenMP barriers whenever the other process holds a core (one run
    of the parity window took 119 s on two threads against 16 s on one, at a load average of
    7). The reference and every candidate train on the same thread count; the process's own
    count is restored for the files that run after this one."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module", params=SEEDS)
def reference(request: pytest.FixtureRequest) -> tuple[int, QualityReference]:
    seed = int(request.param)
    base = _losses(_workload(), {}, seed)
    replicas = [
        _losses(_workload(), {}, seed, perturbation=i) for i in range(1, REFERENCE_RUNS + 1)
    ]
    return seed, QualityReference.from_trajectories(base, replicas, steps=STEPS)


@pytest.mark.parametrize(
    ("recipe", "safety"), [({"channels_last": True}, "exact"), ({"precision": "bf16"}, "close")]
)
def test_harmless_changes_pass(
    reference: tuple[int, QualityReference], recipe: dict[str, Any], safety: Safety
) -> None:
    seed, ref = reference
    result = check_parity(ref, _losses(_workload(), recipe, seed), safety)
    assert result.passed, f"seed {seed}: {result.reason}"


@pytest.mark.parametrize(
    ("workload", "recipe", "words"),
    [
        (TenfoldRate, {}, LEARNS_LESS),
        (FrozenBackbone, {}, LEARNS_LESS),
        (LoudInputs, {"precision": "fp16"}, ("the loss became NaN/inf",)),
    ],
    ids=["lr_x10", "frozen_backbone", "fp16_overflow"],
)
def test_learning_breaking_changes_fail_with_their_reason(
    reference: tuple[int, QualityReference],
    workload: type[CnnWorkload],
    recipe: dict[str, Any],
    words: tuple[str, ...],
) -> None:
    seed, ref = reference
    # The loudest class this could be judged by (close: two-sided, the widest floor).
    result = check_parity(ref, _losses(_workload(workload), recipe, seed), "close")
    assert not result.passed, f"seed {seed}: passed with deviation {result.deviation}"
    assert result.reason.startswith(words), result.reason
