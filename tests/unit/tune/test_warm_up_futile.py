"""Warm-up's futility look: a one-time recompile on the first step after the compiling one
(a script's collector hooks giving way after a few steps) must not make an arm futile."""

from __future__ import annotations

import pytest

from torchdoctor.procs import Ran, ReplyT, Request, Run, StepRow
from torchdoctor.tune.arms import Arm, MeasurePlan


class ScriptedSteps:
    """A worker whose steps take the given seconds in turn (1 sample each), then `steady`."""

    def __init__(self, seconds: list[float], steady: float) -> None:
        self.seconds = list(seconds)
        self.steady = steady
        self.steps = 0

    def request(self, message: Request[ReplyT], *, timeout_s: float) -> ReplyT:
        assert isinstance(message, Run)
        rows = []
        for _ in range(message.steps):
            self.steps += 1
            s = self.seconds.pop(0) if self.seconds else self.steady
            rows.append(StepRow(s, 1, 1.0))
        return message.expect(Ran(tuple(rows)))

    def close(self) -> None:
        pass


PLAN = MeasurePlan(warmup_steps=3, min_chunk_s=0.0)
#: the give-up score: 10x the steady 10 ms step
GIVE_UP = 0.1


def _warm(seconds: list[float]) -> tuple[Arm, ScriptedSteps]:
    worker = ScriptedSteps(seconds, steady=0.01)
    arm = Arm(recipe={}, worker=worker, objective="throughput")
    arm.warm_up(PLAN, timeout=lambda: 60.0, give_up_above=GIVE_UP)
    return arm, worker


def test_a_recompile_on_the_first_post_compile_step_is_not_futile() -> None:
    # compile, then one recompile 50x the step, then steady steps
    arm, worker = _warm([2.0, 0.5])
    assert arm.warm_score == pytest.approx(0.01)
    assert worker.steps > 3  # warm-up went on to settle


def test_an_arm_slow_on_two_steps_in_a_row_is_futile_after_them() -> None:
    arm, worker = _warm([2.0, 0.5, 0.4])
    assert arm.warm_score == pytest.approx(0.4)
    assert worker.steps == 3  # the compiling step and two: warm-up stopped there
