"""Fakes shared by the tests."""

from __future__ import annotations

from torchdoctor.collect.step_recorder import HostClock


class FakeClock(HostClock):
    """A clock whose time only moves when the test (or a fake statement) says so.

    Callable like time.perf_counter (counting its reads), and a `HostClock` (`mark`,
    `seconds`) for the step recorder.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now

    def mark(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
