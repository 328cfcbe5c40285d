"""The dynamic batcher's policy, and its simulation against a batcher with noisy service."""

from __future__ import annotations

import numpy as np
import pytest

from torchdoctor.core.errors import MeasureError
from torchdoctor.serve import (
    BatchPolicy,
    ServiceTime,
    VirtualClock,
    arrival_times,
    percentile,
    run_batcher,
    service_time,
    simulate_batcher,
)

TABLE = [ServiceTime(batch_size=1, seconds=0.002), ServiceTime(batch_size=8, seconds=0.004)]


def test_service_time_interpolates_and_extends() -> None:
    assert service_time(TABLE, 1) == 0.002
    assert service_time(TABLE, 8) == 0.004
    assert service_time(TABLE, 15) == pytest.approx(0.006)
    assert 0.002 < service_time(TABLE, 4) < 0.004


def test_a_batch_closes_when_full_or_when_the_oldest_waited_enough() -> None:
    clock = VirtualClock()
    served: list[int] = []

    def serve(b: int) -> None:
        served.append(b)
        clock.advance(0.001)

    # 8 at once, then one alone: a full batch of 4 twice, then the last waits out the delay.
    arrivals = [0.0] * 8 + [1.0]
    trace = run_batcher(serve, arrivals, BatchPolicy(4, 0.05), clock)
    assert served == [4, 4, 1]
    assert trace.waits_s[-1] == pytest.approx(0.05)  # waited the whole max delay
    assert trace.waits_s[0] == 0.0 and trace.waits_s[4] == pytest.approx(0.001)


def test_the_simulation_predicts_a_noisy_batcher_p99() -> None:
    # The "real" batcher's service times scatter around t(b) (lognormal, 10%); the
    # simulation only knows the table. Its p99 must land within 15% at three loads.
    rng = np.random.default_rng(0)
    policy = BatchPolicy(8, 0.001)
    for rate in (300.0, 1000.0, 1600.0):
        arrivals = arrival_times("poisson", rate, 5000, seed=1)
        clock = VirtualClock()

        def serve(b: int, clock: VirtualClock = clock) -> None:
            clock.advance(service_time(TABLE, b) * rng.lognormal(0, 0.1))

        noisy = run_batcher(serve, arrivals, policy, clock)
        sim = simulate_batcher(arrivals, TABLE, policy)
        real_p99 = percentile(noisy.latencies_s, 99.0)
        assert percentile(sim.latencies_s, 99.0) == pytest.approx(real_p99, rel=0.15), rate


def test_bad_policies_and_schedules_are_refused() -> None:
    with pytest.raises(MeasureError):
        BatchPolicy(0)
    with pytest.raises(MeasureError):
        BatchPolicy(1, -1.0)
    with pytest.raises(MeasureError, match="ascending"):
        run_batcher(lambda b: None, [1.0, 0.5], BatchPolicy(), VirtualClock())


def test_the_batcher_sleeps_once_per_batch() -> None:
    # Each real sleep overshoots its target: one sleep per batch, to the delay's end or the
    # filling arrival, not one to the oldest arrival and another to the delay's end.
    class Counting(VirtualClock):
        sleeps = 0

        def sleep_until(self, when: float) -> None:
            self.sleeps += 1
            super().sleep_until(when)

    clock = Counting()
    arrivals = arrival_times("poisson", 300.0, 500)
    trace = run_batcher(lambda b: clock.advance(0.001), arrivals, BatchPolicy(4, 0.002), clock)
    assert clock.sleeps == len(trace.batch_sizes)
    assert np.all(trace.wakes_s >= 0) and np.all(trace.starts_s >= trace.wakes_s)
