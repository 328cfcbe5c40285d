"""A closure passed to `optimizer.step` (LBFGS; Lightning's automatic optimization passes its
whole training step as one) runs outside the optimizer phase: its forward and backward are
timed as their own phases, not as the optimizer's."""

from __future__ import annotations

import time

import torch

from torchdoctor.collect import watch

#: The forward's planted cost: far above an SGD update of a tiny model on any host.
FORWARD_S = 0.02


class SlowForward(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(FORWARD_S)
        return self.linear(x)


def test_the_closure_is_timed_as_forward_and_backward() -> None:
    model = SlowForward()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4), torch.randn(8, 1)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    with watch(warmup=0, profile_steps=0) as w:
        for _ in range(4):
            opt.step(closure)  # positional
        opt.step(closure=closure)  # keyword
    steps = w.result().steps
    assert len(steps) == 5
    for step in steps:
        assert step.phases["forward"] >= FORWARD_S * 0.9
        assert step.phases["backward"] > 0
        assert step.phases["optimizer"] < step.phases["forward"]
