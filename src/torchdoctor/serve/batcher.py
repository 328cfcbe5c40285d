"""A dynamic batcher under open-loop load, run for real or simulated from a service table.

The policy is Triton's dynamic batcher's (max batch size, max queue delay): when the server
is free it takes the oldest waiting request and closes a batch when `max_batch_size` requests
wait or the oldest has waited `max_queue_delay_s`, whichever comes first; a request that
arrives while the server works waits for the next batch. With a batch size of 1 and no delay
it is a single FIFO server: the plain open-loop generator.

Every request is timed from its scheduled arrival, not from when the server got to it, so a
slow server's queue shows in the latencies (no coordinated omission). The same loop runs on a
`RealClock` calling the model, and on a `VirtualClock` advanced by a service-time table t(b):
that is the discrete-event simulation (time jumps from event to event), which predicts the
percentiles at rates that were never run.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from torchdoctor.core.errors import MeasureError
from torchdoctor.serve.clock import ServeClock, VirtualClock
from torchdoctor.serve.latency import summarize_latencies
from torchdoctor.serve.records import ArrivalKind, LoadRun, ServiceTime


@dataclass(frozen=True)
class BatchPolicy:
    """Close a batch at `max_batch_size` requests or when the oldest waited this long."""

    max_batch_size: int = 1
    max_queue_delay_s: float = 0.0

    def __post_init__(self) -> None:
        if self.max_batch_size < 1:
            raise MeasureError(f"max batch size {self.max_batch_size} must be at least 1")
        if not self.max_queue_delay_s >= 0:
            raise MeasureError(f"max queue delay {self.max_queue_delay_s!r} s must be >= 0")


def _empty() -> np.ndarray:
    return np.zeros(0)


@dataclass
class LoadTrace:
    """Per request: latency (from its scheduled arrival) and wait before its batch started.

    Per batch, in seconds from the run's start: when the policy said it could start (`wakes_s`:
    its oldest request's arrival plus the delay, or the arrival that filled it), when it did
    start, and when it was done. A real run's starts lag its wake-ups by the sleep's overshoot
    and the loop's own work, and its service times (done - start) are what the batcher saw:
    `serve.calibration` fits the simulation's overheads from them.
    """

    latencies_s: np.ndarray
    waits_s: np.ndarray
    batch_sizes: list[int] = field(default_factory=list)
    duration_s: float = 0.0
    wakes_s: np.ndarray = field(default_factory=_empty)
    starts_s: np.ndarray = field(default_factory=_empty)
    dones_s: np.ndarray = field(default_factory=_empty)


def run_batcher(
    serve_batch: Callable[[int], object],
    arrivals: Sequence[float] | np.ndarray,
    policy: BatchPolicy,
    clock: ServeClock,
    sync: Callable[[], None] = lambda: None,
) -> LoadTrace:
    """Serve requests arriving at `arrivals` (seconds from now) under `policy`."""
    arr = [float(a) for a in arrivals]  # plain floats: the loop runs once per batch
    n = len(arr)
    if n == 0:
        raise MeasureError("a load run needs at least one request")
    if any(b < a for a, b in itertools.pairwise(arr)):
        raise MeasureError("arrival times must be in ascending order")
    origin = clock.now()
    latencies = [0.0] * n
    waits = [0.0] * n
    sizes: list[int] = []
    wakes: list[float] = []
    starts: list[float] = []
    dones: list[float] = []
    largest, delay = policy.max_batch_size, policy.max_queue_delay_s
    i = 0
    while i < n:
        first = origin + arr[i]
        last = i + largest - 1
        fill = origin + arr[last] if last < n else math.inf
        # One sleep to whichever comes first, the delay's end or the filling arrival (both
        # are at or after the oldest request's arrival): each sleep overshoots its target.
        wake = min(first + delay, fill)
        clock.sleep_until(wake)
        start = clock.now()
        # The batch is what has arrived by now, up to the largest batch (at least the oldest).
        j = max(i + 1, min(i + largest, bisect.bisect_right(arr, start - origin, lo=i)))
        serve_batch(j - i)
        sync()
        done = clock.now()
        for k in range(i, j):
            due = origin + arr[k]
            latencies[k] = done - due
            waits[k] = start - due
        sizes.append(j - i)
        wakes.append(wake - origin)
        starts.append(start - origin)
        dones.append(done - origin)
        i = j
    return LoadTrace(
        np.asarray(latencies),
        np.asarray(waits),
        sizes,
        clock.now() - origin,
        wakes_s=np.asarray(wakes),
        starts_s=np.asarray(starts),
        dones_s=np.asarray(dones),
    )


def service_time(table: Sequence[ServiceTime], batch_size: int) -> float:
    """t(b) from a table: linear between measured sizes, extended by the last two."""
    rows = sorted(table, key=lambda r: r.batch_size)
    if not rows:
        raise MeasureError("the service-time table is empty")
    sizes = [r.batch_size for r in rows]
    times = [r.seconds for r in rows]
    if batch_size <= sizes[-1] or len(rows) == 1:
        return float(np.interp(batch_size, sizes, times))
    slope = (times[-1] - times[-2]) / (sizes[-1] - sizes[-2])
    return times[-1] + slope * (batch_size - sizes[-1])


def simulate_batcher(
    arrivals: Sequence[float] | np.ndarray, table: Sequence[ServiceTime], policy: BatchPolicy
) -> LoadTrace:
    """The batcher on virtual time, each batch taking t(b) from `table`."""
    clock = VirtualClock()
    return run_batcher(
        lambda b: clock.advance(service_time(table, b)), arrivals, policy, clock=clock
    )


def load_record(
    trace: LoadTrace,
    *,
    arrivals: ArrivalKind,
    rate: float,
    seed: int,
    policy: BatchPolicy,
    simulated: bool,
    bound_s: float | None = None,
    calibrated_at_rate: float | None = None,
) -> LoadRun:
    """The typed record of one load run (goodput counted against `bound_s` when given)."""
    n = trace.latencies_s.size
    duration = max(trace.duration_s, 1e-12)
    goodput = None if bound_s is None else float(np.sum(trace.latencies_s <= bound_s)) / duration
    return LoadRun(
        arrivals=arrivals,
        target_rate=rate,
        seed=seed,
        max_batch_size=policy.max_batch_size,
        max_queue_delay_s=policy.max_queue_delay_s,
        simulated=simulated,
        duration_s=trace.duration_s,
        achieved_rate=n / duration,
        mean_wait_s=float(trace.waits_s.mean()),
        batches=len(trace.batch_sizes),
        mean_batch_size=n / max(1, len(trace.batch_sizes)),
        summary=summarize_latencies(trace.latencies_s),
        goodput=goodput,
        goodput_bound_s=bound_s,
        calibrated_at_rate=calibrated_at_rate,
    )


__all__ = [
    "BatchPolicy",
    "LoadTrace",
    "load_record",
    "run_batcher",
    "service_time",
    "simulate_batcher",
]
