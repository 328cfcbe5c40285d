"""StepRecorder: step boundaries and phase bookkeeping, driven by a fake clock."""

from __future__ import annotations

import pytest

from fakes import FakeClock
from torchdoctor.collect.step_recorder import StepRecorder
from torchdoctor.core.steps import PHASES


class DeferredClock:
    """Not a HostClock, like CUDA events: the recorder resolves steps one step late."""

    def __init__(self) -> None:
        self.now = 0.0
        self.resolved = 0

    def mark(self) -> float:
        return self.now

    def seconds(self, start: float, end: float) -> float:
        self.resolved += 1
        return end - start


def phase(rec: StepRecorder, clock: FakeClock, name: str, seconds: float) -> None:
    rec.begin(name)  # type: ignore[arg-type]
    clock.advance(seconds)
    rec.end(name)  # type: ignore[arg-type]


def optimizer_step(rec: StepRecorder, clock: FakeClock, data: float = 0.1) -> None:
    phase(rec, clock, "data_wait", data)
    phase(rec, clock, "forward", 0.2)
    phase(rec, clock, "backward", 0.3)
    clock.advance(0.05)  # zero_grad, python between calls: "other"
    phase(rec, clock, "optimizer", 0.1)
    rec.optimizer_step_end()


def test_optimizer_hook_steps_and_phases_sum_to_total() -> None:
    clock = FakeClock()
    rec = StepRecorder(clock)
    rec.optimizer_exists = True
    for _ in range(3):
        optimizer_step(rec, clock)
    rec.finish()
    assert rec.detection == "optimizer_hook"
    assert [s.index for s in rec.steps] == [0, 1, 2]
    for step in rec.steps:
        assert step.total_s == pytest.approx(0.75)
        assert sum(step.phases[p] for p in PHASES) == pytest.approx(step.total_s)
        assert step.phases["backward"] == pytest.approx(0.3)
        assert step.phases["other"] == pytest.approx(0.05)


def test_time_after_update_belongs_to_next_step() -> None:
    clock = FakeClock()
    rec = StepRecorder(clock)
    rec.optimizer_exists = True
    optimizer_step(rec, clock)
    clock.advance(0.5)  # lr scheduler + logging after the update
    optimizer_step(rec, clock)
    rec.finish()
    assert rec.steps[1].total_s == pytest.approx(1.25)
    assert rec.steps[1].phases["other"] == pytest.approx(0.55)


def test_gradient_accumulation_counts_one_step_per_update() -> None:
    clock = FakeClock()
    rec = StepRecorder(clock)
    rec.optimizer_exists = True
    for _ in range(2):
        for _ in range(4):  # 4 micro-batches per optimizer step
            phase(rec, clock, "forward", 0.1)
            phase(rec, clock, "backward", 0.1)
        phase(rec, clock, "optimizer", 0.1)
        rec.optimizer_step_end()
    rec.finish()
    assert len(rec.steps) == 2
    assert rec.steps[0].phases["backward"] == pytest.approx(0.4)


def test_backward_fallback_without_optimizer() -> None:
    clock = FakeClock()
    rec = StepRecorder(clock)
    for _ in range(5):
        phase(rec, clock, "forward", 0.2)
        phase(rec, clock, "backward", 0.3)
        clock.advance(0.1)  # the hand-written update
    rec.finish()
    assert rec.detection == "backward"
    assert len(rec.steps) == 5
    assert rec.steps[0].total_s == pytest.approx(0.6)
    # the last step ends where its last observed phase (backward) ended
    assert rec.steps[-1].total_s == pytest.approx(0.5)


def test_nested_phases_are_owned_by_the_outer_one() -> None:
    clock = FakeClock()
    rec = StepRecorder(clock)
    rec.begin("forward")
    clock.advance(0.1)
    phase(rec, clock, "h2d", 0.2)  # a copy inside forward
    rec.begin("forward")  # a submodule
    clock.advance(0.1)
    rec.end("forward")
    rec.end("forward")
    phase(rec, clock, "optimizer", 0.1)
    rec.optimizer_step_end()
    rec.finish()
    step = rec.steps[0]
    assert step.phases["forward"] == pytest.approx(0.4)
    assert step.phases["h2d"] == 0.0


def test_no_training_means_no_steps() -> None:
    clock = FakeClock()
    rec = StepRecorder(clock)
    phase(rec, clock, "forward", 0.2)  # inference only
    phase(rec, clock, "forward", 0.2)
    rec.finish()
    assert rec.steps == []
    assert rec.detection == "none"


def test_optimizer_mode_drops_the_tail_after_last_update() -> None:
    clock = FakeClock()
    rec = StepRecorder(clock)
    rec.optimizer_exists = True
    optimizer_step(rec, clock)
    phase(rec, clock, "forward", 5.0)  # evaluation after training
    rec.finish()
    assert len(rec.steps) == 1


def test_on_step_end_reports_closed_count() -> None:
    clock = FakeClock()
    seen: list[int] = []
    rec = StepRecorder(clock, on_step_end=seen.append)
    rec.optimizer_exists = True
    for _ in range(3):
        optimizer_step(rec, clock)
    assert seen == [1, 2, 3]


def test_deferred_clock_resolves_one_step_late_then_all_at_finish() -> None:
    clock = DeferredClock()
    rec = StepRecorder(clock)  # type: ignore[arg-type]
    rec.optimizer_exists = True
    for _ in range(3):
        rec.begin("forward")
        clock.now += 1.0
        rec.end("forward")
        rec.optimizer_step_end()
    assert len(rec.steps) == 2  # the last closed step waits for its events
    rec.finish()
    assert len(rec.steps) == 3
    assert all(s.phases["forward"] == pytest.approx(1.0) for s in rec.steps)


def test_backward_to_backward_boundary_for_bare_tensor_models() -> None:
    clock = FakeClock()
    rec = StepRecorder(clock)
    for _ in range(4):  # no module forward, no DataLoader: only backward calls are seen
        clock.advance(0.2)  # forward on bare tensors
        phase(rec, clock, "backward", 0.3)
        clock.advance(0.1)  # the hand-written update
    rec.finish()
    assert rec.detection == "backward"
    assert len(rec.steps) == 4
    assert [s.phases["backward"] for s in rec.steps] == pytest.approx([0.3] * 4)
    # steady-state steps span one whole period: update + forward + backward
    assert rec.steps[1].total_s == pytest.approx(0.6)
