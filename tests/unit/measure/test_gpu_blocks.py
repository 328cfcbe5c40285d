"""GPU ceilings timed as the device runs, on a CPU machine through a fake device.

`FakeDevice` models what decides the figure: calls queue on the device and run back to back
while the host keeps launching; a host wait (a synchronize, an event's) returns only a
round trip after the device finished, and the device idles from its finish until the host's
next launch reaches it; CUDA events are stamped when the device reaches them; the device
may run at a boost clock for its first BOOST_S of work and slower after (power and heat).
"""

from __future__ import annotations

from typing import Any

import pytest

from torchdoctor.measure import ceilings as ceilings_mod
from torchdoctor.measure._device_timer import CudaEventBlockTimer
from torchdoctor.measure._gpu_blocks import block_seconds_per_call

WORK_S = 1.6e-3  # an 8192^3 bf16 matmul on an H200, at the sustained clock
BOOST = 0.97  # at the boost clock a call takes 3% less
BOOST_S = 0.05  # device seconds at boost before the clock settles
ROUND_TRIP_S = 30e-6  # a wait's return to the host, and the next launch's way back
LAUNCH_S = 5e-6  # host time to queue one call


class FakeDevice:
    def __init__(self, *, boost: bool = False) -> None:
        self.boost = boost
        self.host = 0.0
        self.device_free = 0.0
        self.busy = 0.0  # device seconds of work done (decides the clock)
        self.waits = 0

    # the host's view
    def clock(self) -> float:
        return self.host

    def call(self) -> None:
        self.host += LAUNCH_S
        work = WORK_S * (BOOST if self.boost and self.busy < BOOST_S else 1.0)
        # An idle device starts the call once the launch reaches it.
        start = max(self.device_free, self.host + ROUND_TRIP_S / 2)
        self.device_free = start + work
        self.busy += work

    def sync(self) -> None:
        self.waits += 1
        self.host = max(self.host, self.device_free) + ROUND_TRIP_S / 2

    # torch.cuda's API for the event timer
    def Event(self, enable_timing: bool = False) -> FakeEvent:  # the name torch.cuda uses
        return FakeEvent(self)

    def current_stream(self, device: Any = None) -> None:
        return None


class FakeEvent:
    def __init__(self, dev: FakeDevice) -> None:
        self.dev = dev
        self.at = 0.0

    def record(self, stream: Any = None) -> None:
        self.at = max(self.dev.device_free, self.dev.host + ROUND_TRIP_S / 2)

    def synchronize(self) -> None:
        self.dev.waits += 1
        self.dev.host = max(self.dev.host, self.at) + ROUND_TRIP_S / 2

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.at - self.at) * 1e3


def _blocks(dev: FakeDevice, blocks: int = 8) -> Any:
    return block_seconds_per_call(
        dev.call,
        timer=CudaEventBlockTimer("cuda", backend=dev),
        sync=dev.sync,
        clock=dev.clock,
        warmup_s=0.01,
        run_time=0.4,
        blocks=blocks,
    )


def test_event_blocks_time_the_device_work_without_the_round_trips() -> None:
    times = _blocks(FakeDevice())
    assert times.sustained_s == pytest.approx(WORK_S, rel=1e-3)


def test_a_wait_per_call_reads_the_ceiling_low() -> None:
    # What the ceiling was before: a synchronize after every call counts each round trip.
    dev = FakeDevice()
    per_call = ceilings_mod.sustained_seconds_per_call(
        dev.call, sync=dev.sync, clock=dev.clock, warmup_s=0.01, run_time=0.4
    )
    assert per_call > WORK_S * 1.015
    assert _blocks(FakeDevice()).sustained_s < per_call


def test_one_wait_per_block() -> None:
    dev = FakeDevice()
    _blocks(dev, blocks=1)  # measure how many waits the warm-up took
    warm = dev.waits - 2  # the burst block's and the sustained block's
    dev = FakeDevice()
    _blocks(dev, blocks=8)
    assert dev.waits == warm + 1 + 8


def test_burst_runs_at_the_boost_clock_and_sustained_after_it() -> None:
    times = _blocks(FakeDevice(boost=True))
    assert times.burst_s == pytest.approx(WORK_S * BOOST, rel=1e-3)
    # The best sustained block may hold the boost's last calls: between the two clocks.
    assert WORK_S * BOOST < times.sustained_s <= WORK_S
    assert max(times.blocks_s) == pytest.approx(WORK_S, rel=1e-3)


def test_the_gpu_method_records_burst_and_sustained_figures() -> None:
    n = 8192
    method = ceilings_mod._gpu_method(
        {"bfloat16": 2 * n**3 / WORK_S},
        {"bfloat16": n},
        4e12,
        2**28,
        {"bfloat16": {"burst_s": WORK_S * BOOST, "clocks": {"sm_clock_mhz_max": 1980.0}},
         "copy": {"burst_s": 2 * 2**28 / 4.2e12, "clocks": {}}},
    )  # fmt: skip
    assert method["burst_flops"]["bfloat16"] == pytest.approx(2 * n**3 / (WORK_S * BOOST))
    assert method["sustained_flops"]["bfloat16"] == pytest.approx(2 * n**3 / WORK_S)
    assert method["burst_bandwidth_bytes_per_s"] == pytest.approx(4.2e12)
    assert method["clocks"] == {"bfloat16": {"sm_clock_mhz_max": 1980.0}}
    assert "one wait per block" in method["timing"]
