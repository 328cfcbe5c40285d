"""The steady-state rule shared by `run` and the tuner: settle-based warm-up, chunk medians."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from torchdoctor.core.steps import StepTiming
from torchdoctor.measure import (
    DEFAULT_STEADY_STEPS,
    MAX_EXTRA_WARMUP_STEPS,
    MAX_STEADY_STEPS,
    MIN_CHUNK_S,
    MIN_STEADY_S,
    chunk_rates,
    chunk_steps,
    steady_rate,
    steady_steps,
    warm_up,
    warmup_length,
)


class ScriptedSession:
    """Steps whose wall times follow a script (then repeat its last value), 10 samples each."""

    def __init__(self, times: list[float]) -> None:
        self.times = times
        self.done = 0

    def run_steps(
        self, n: int, *, measure_phases: bool, on_step: Callable[[], None] | None = None
    ) -> list[StepTiming]:
        out = []
        for _ in range(n):
            t = self.times[min(self.done, len(self.times) - 1)]
            out.append(StepTiming(index=self.done, total_s=t, samples=10))
            self.done += 1
            if on_step is not None:
                on_step()
        return out


def test_warm_up_runs_until_compilations_after_effects_are_gone() -> None:
    # A compiled model: a 40 s first step, then five steps still paying for recompiles and
    # allocator growth, then the steady 0.1 s. A fixed 3-step warm-up would leave the slow
    # steps in the measured window; the settle rule waits them out.
    session = ScriptedSession([40.0, 0.5, 0.4, 0.3, 0.25, 0.2, 0.1, 0.1, 0.1, 0.1])
    warm = warm_up(session, min_steps=3)
    assert [s.total_s for s in warm[-3:]] == [0.1, 0.1, 0.1]
    assert len(warm) == 9
    assert session.run_steps(1, measure_phases=False)[0].total_s == 0.1


def test_warm_up_stops_at_the_minimum_when_already_steady() -> None:
    session = ScriptedSession([5.0, 0.1, 0.1, 0.1])
    assert len(warm_up(session, min_steps=3)) == 4  # the first after compile needs a window


def test_warm_up_is_bounded_when_steps_never_settle() -> None:
    session = ScriptedSession([1.0, 2.0] * 100)
    assert len(warm_up(session, min_steps=3)) == 3 + MAX_EXTRA_WARMUP_STEPS
    assert len(warm_up(ScriptedSession([1.0, 2.0] * 100), min_steps=3, max_extra=0)) == 3


@pytest.mark.parametrize(
    "times",
    [
        [40.0, 0.5, 0.4, 0.3, 0.25, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1],
        [5.0, 0.1, 0.1, 0.1, 0.1],
        [1.0, 2.0] * 40,
    ],
)
def test_warmup_length_applies_the_warm_up_rule_to_recorded_steps(times: list[float]) -> None:
    # A script runs freely and its steps are recorded: the same rule, after the fact, skips as
    # many steps as `warm_up` would have run live (bounded by the steps there are).
    live = len(warm_up(ScriptedSession(times), min_steps=3))
    assert warmup_length(times, min_steps=3) == min(live, len(times))


def test_steady_rate_is_the_median_chunk_rate_and_ignores_one_hiccup() -> None:
    steps = [StepTiming(index=i, total_s=0.1, samples=10) for i in range(30)]
    steps[7] = StepTiming(index=7, total_s=3.0, samples=10)  # a scheduler hiccup
    # 0.3 s chunks of three 0.1 s steps; the hiccup closes its chunk early (steps 6-7).
    assert len(chunk_rates(steps)) == 10
    assert steady_rate(steps) == pytest.approx(100.0)
    mean_rate = sum(s.samples or 0 for s in steps) / sum(s.total_s for s in steps)
    assert mean_rate < 60  # what the plain mean would have reported


def test_chunk_length_follows_the_step_time() -> None:
    assert chunk_steps(0.1) == 3
    assert chunk_steps(1.0) == 1
    assert chunk_steps(0.0, least=4) == 4
    assert chunk_steps(MIN_CHUNK_S / 1000) == 256  # capped


def test_chunk_length_follows_a_given_least_chunk_time() -> None:
    # The tuner's arms size their chunks by their plan's min_chunk_s through this function.
    assert chunk_steps(0.1, min_chunk_s=1.0) == 10
    assert chunk_steps(0.1, least=4, min_chunk_s=0.0) == 4
    assert chunk_steps(0.001, least=4, min_chunk_s=1.0) == 256  # capped


def test_the_default_window_is_at_least_its_steps_and_its_seconds() -> None:
    # Slow steps: the least count already spans the seconds.
    assert steady_steps(1.0) == DEFAULT_STEADY_STEPS
    # A 5 ms step (the mlp workload): 30 steps are 0.15 s, so the window takes 3 s of steps.
    assert steady_steps(0.005) == round(MIN_STEADY_S / 0.005)
    assert steady_steps(0.005) * 0.005 >= MIN_STEADY_S
    assert steady_steps(1e-6) == MAX_STEADY_STEPS  # capped
    assert steady_steps(0.0) == DEFAULT_STEADY_STEPS  # unknown step time
    assert steady_steps(1.0, least=50) == 50
