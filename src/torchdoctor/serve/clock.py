"""The clock a load generator and a batcher read and sleep on: real, or virtual for tests.

An open-loop generator sleeps until each request's scheduled arrival and times the request
from that arrival. Both acts go through one `ServeClock`, so a test runs the same generator on
a `VirtualClock` whose time moves only when something sleeps or a fake service advances it:
a queue of 50,000 requests is then simulated in a fraction of a second, deterministically.
"""

from __future__ import annotations

import time
from typing import Protocol


class ServeClock(Protocol):
    """Seconds since an arbitrary origin, and a sleep until a later time."""

    def now(self) -> float: ...

    def sleep_until(self, when: float) -> None: ...


class RealClock:
    """`time.perf_counter` and `time.sleep`: what a request really waits."""

    def now(self) -> float:
        return time.perf_counter()

    def sleep_until(self, when: float) -> None:
        delay = when - time.perf_counter()
        if delay > 0:
            time.sleep(delay)


class VirtualClock:
    """Time that passes only when told: by a sleep, or by `advance` (a fake service time)."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def sleep_until(self, when: float) -> None:
        self._now = max(self._now, when)

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass, as a request served in that time would."""
        self._now += max(0.0, seconds)


__all__ = ["RealClock", "ServeClock", "VirtualClock"]
