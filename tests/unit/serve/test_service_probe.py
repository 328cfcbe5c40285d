"""The batching simulation from closed-loop service probes paired with the run it predicts, on
a virtual host whose speed moves, whose service has a tail, and that is slower after idling."""

from __future__ import annotations

from collections.abc import Callable

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
from torchdoctor.serve.service_probe import (
    PROBE_GAPS_S,
    ServiceSamples,
    drift,
    loop_cost,
    merged,
    probe_service,
    simulate_sampled,
    simulated_latencies,
)

TABLE = [ServiceTime(batch_size=b, seconds=0.002 + 0.0005 * (b - 1)) for b in range(1, 9)]
POLICY = BatchPolicy(8, 0.001)
#: The virtual host (orders of magnitude seen on 2-core hosts): threads that spin this long
#: after a call stay warm, then cost `COLD_S` to wake; each sleep ends late; the batcher's
#: loop costs `LOOP_S` a batch; one call in `TAIL_P` takes `TAIL_X` times as long (the tail a
#: table of medians leaves out); from `SLOW_AT_S` on the host serves `SLOWDOWN` times slower
#: (another tenant took the cores: the drift that makes a table from minutes before wrong).
SPIN_S, COLD_S, OVERSHOOT_S, LOOP_S = 0.0005, 0.0015, 0.0002, 0.00002
TAIL_P, TAIL_X, SLOW_AT_S, SLOWDOWN = 0.05, 1.5, 60.0, 1.3


class Host(VirtualClock):
    def __init__(self, seed: int) -> None:
        super().__init__()
        self.rng = np.random.default_rng(seed)
        self.idle_since = 0.0

    def sleep_until(self, when: float) -> None:
        self.advance(LOOP_S)
        if when > self.now():
            super().sleep_until(when + self.rng.exponential(OVERSHOOT_S))

    def serve(self, b: int) -> None:
        speed = SLOWDOWN if self.now() >= SLOW_AT_S else 1.0
        tail = TAIL_X if self.rng.random() < TAIL_P else 1.0
        cold = COLD_S if self.now() - self.idle_since > SPIN_S else 0.0
        self.advance(service_time(TABLE, b) * speed * tail * self.rng.lognormal(0, 0.05) + cold)
        self.idle_since = self.now()

    def calls(self) -> dict[int, Callable[[], None]]:
        return {b: (lambda b=b: self.serve(b)) for b in range(1, 9)}  # type: ignore[misc]


def test_a_probe_keeps_each_call_by_size_and_idle_time_in_a_shuffled_order() -> None:
    clock = VirtualClock()
    order: list[int] = []

    def call(b: int) -> Callable[[], None]:
        def serve() -> None:
            order.append(b)
            clock.advance(0.001 * b)

        return serve

    probe = probe_service({b: call(b) for b in (1, 2, 4)}, clock, rounds=5, seed=3)
    assert sum(len(v) for v in probe.times_s.values()) == 5 * 3 * len(PROBE_GAPS_S)
    # A call's time is its own, whatever idle preceded it; each gap lands in its own bin.
    for (b, _), values in probe.times_s.items():
        assert values == pytest.approx([0.001 * b] * len(values))
    assert {k for _, k in probe.times_s} == {0, 1, 2}
    assert probe.overshoot_s == pytest.approx([0.0] * (5 * 3 * 2))  # two gaps that sleep
    assert order[:9] != sorted(order[:9]) and probe.median_s(4) == pytest.approx(0.004)
    assert probe.spans_s == ((0.0, clock.now()),)
    with pytest.raises(MeasureError, match="batch size 3"):
        probe.median_s(3)


def test_with_a_fixed_service_the_simulation_is_the_table_simulation() -> None:
    times = {(s.batch_size, 0): (s.seconds,) for s in TABLE if s.batch_size in (1, 2, 5, 8)}
    samples = ServiceSamples(times_s=times, overshoot_s=(0.0,))
    arrivals = arrival_times("poisson", 900.0, 2000, seed=1)
    sampled = simulate_sampled(arrivals, samples, POLICY)
    table = simulate_batcher(arrivals, TABLE, POLICY)  # sizes 3, 4, 6, 7 interpolated alike
    assert np.allclose(sampled.latencies_s, table.latencies_s)
    assert sampled.batch_sizes == table.batch_sizes


def test_the_loop_cost_is_read_closed_loop() -> None:
    assert loop_cost(POLICY, Host(0)) == pytest.approx(LOOP_S, rel=0.01)


def test_probes_paired_with_the_run_predict_its_p99_where_a_table_from_before_does_not() -> None:
    host = Host(7)
    calls = host.calls()
    loop = loop_cost(POLICY, host)
    early = probe_service(calls, host, seed=0, loop_s=loop)  # minutes before, at full speed
    host.sleep_until(SLOW_AT_S)
    cap = 8 / service_time(TABLE, 8)
    for i, load in enumerate((0.3, 0.45, 0.6)):  # 0.39, 0.59, 0.78 of the slowed host
        arrivals = arrival_times("poisson", load * cap, 4000, seed=i)
        before = probe_service(calls, host, seed=10 + i, loop_s=loop)
        real = percentile(run_batcher(lambda b: calls[b](), arrivals, POLICY, host).latencies_s, 99)
        after = probe_service(calls, host, seed=20 + i, loop_s=loop)
        paired = merged([before, after])
        predicted = percentile(simulated_latencies(arrivals, paired, POLICY, seed=i), 99)
        unpaired = percentile(simulated_latencies(arrivals, early, POLICY, seed=i), 99)
        # What a closed-loop table says: the medians of back-to-back calls (idle bin 0).
        medians = [ServiceTime(batch_size=b, seconds=paired.back_to_back_s(b)) for b in range(1, 9)]
        table = percentile(simulate_batcher(arrivals, medians, POLICY).latencies_s, 99)
        assert predicted == pytest.approx(real, rel=0.15), load
        # The same distribution from before the host slowed misses by more than the claim's
        # 15%; the back-to-back medians from the very same probes leave out the tail and the
        # cold starts: always further off, and by more than 15% where most batches start
        # after an idle spell.
        assert abs(unpaired / real - 1) > 0.15, load
        assert abs(table / real - 1) > abs(predicted / real - 1), load
        if load == 0.3:
            assert table < 0.85 * real
        # The probes around a run agree; the early one and they do not (the cold starts, a
        # constant, thin the 1.3x slowdown in the medians over every idle time).
        assert drift([before, after], 1) < 1.05 and drift([early, before], 1) > 1.1
