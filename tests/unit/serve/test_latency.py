"""Per-request latency on a fake clock: each request timed alone, the device waited for."""

from __future__ import annotations

import itertools

import pytest

from torchdoctor.serve import measure_latency
from torchdoctor.serve.latency import DEFAULT_WINDOW


class FakeDevice:
    """A call queues work that takes `costs` seconds; the clock moves only at the sync, as a
    GPU's work is only waited for there. Records the order of events."""

    def __init__(self, costs: itertools.cycle[float] | list[float]) -> None:
        self.now = 0.0
        self.pending = 0.0
        self.events: list[str] = []
        self.costs = iter(costs)

    def clock(self) -> float:
        self.events.append("clock")
        return self.now

    def call(self) -> None:
        self.events.append("call")
        self.pending += next(self.costs)

    def sync(self) -> None:
        self.events.append("sync")
        self.now += self.pending
        self.pending = 0.0


def test_each_request_is_timed_after_the_device_finished() -> None:
    costs = [5.0] + [1.0] * 3 + [0.001 * (1 + i % 7) for i in range(10_000)]
    dev = FakeDevice(costs)
    m = measure_latency(dev.call, clock=dev.clock, sync=dev.sync, budget_s=1e9)
    # The first call (compilation, lazy set-up) is its own number; warm-up stops once the
    # last three calls agree, here after the three 1 s calls.
    assert m.first_call_s == 5.0
    assert m.warmup_calls == 3 and m.warmup_s == 3.0
    assert all(lat < 0.01 for lat in m.latencies_s)  # nothing of the warm-up in the windows
    # Every request: clock, call, sync, clock; never a clock read with work still queued.
    calls = [i for i, e in enumerate(dev.events) if e == "call"]
    assert calls and all(
        dev.events[i - 1 : i + 3] == ["clock", "call", "sync", "clock"] for i in calls
    )
    # The latencies are the per-request costs, not their average.
    assert sorted(set(round(x, 6) for x in m.latencies_s)) == [0.001 * k for k in range(1, 8)]
    assert m.settled and m.summary.n >= 459 and m.summary.n % DEFAULT_WINDOW == 0
    assert m.summary.at(99.0).value_s == pytest.approx(0.007)
    assert m.summary.at(50.0).value_s == pytest.approx(0.004)


def test_windows_that_never_agree_stop_at_the_budget_and_say_so() -> None:
    # Each window is twice as slow as the one before: p50 and p99 never settle.
    costs = (1e-3 * 2 ** (i // DEFAULT_WINDOW) for i in range(100_000))
    dev = FakeDevice(list(itertools.islice(costs, 3000)))
    m = measure_latency(dev.call, clock=dev.clock, sync=dev.sync, budget_s=2.0)
    assert not m.settled
    assert len(m.windows) >= 3 and m.windows[-1].p50_s > 1.5 * m.windows[-2].p50_s
    assert m.to_json_dict()["schema"] == "torchdoctor/serve_latency"
