"""Throughput and request-latency percentiles versus batch size and intra-op threads.

Each point serves closed-loop batches and times every call (`timed_call`); each request of a
batch waits for the whole batch, so the requests' percentiles are the calls'. Throughput is
batch size over the median call time. Batch sizes double; the sweep stops early once the last
`EARLY_STOP_STEPS` steps each gained under `EARLY_STOP_GAIN` (the issue's 5%), since larger
batches then buy latency and no throughput. The knee is Kneedle's (Satopaeae, Albrecht, Irwin
and Raghavan, "Finding a 'Kneedle' in a Haystack", ICDCS workshops 2011): on the curve of
throughput against log2(batch) scaled to the unit square, the point farthest above the
straight line from its first to its last point.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Final, TypeVar

import numpy as np

from torchdoctor.core.vocabulary import Clock
from torchdoctor.measure import settled
from torchdoctor.serve._percentiles import percentile
from torchdoctor.serve.latency import timed_call
from torchdoctor.serve.records import Curve, CurveAxis, CurvePoint

#: A step that gains less throughput than this is flat (the issue's 5%).
EARLY_STOP_GAIN: Final = 0.05
#: Flat steps in a row that end a sweep: one flat step can be noise on a shared host.
EARLY_STOP_STEPS: Final = 2
#: Timed calls per point after warm-up: 100 gives p99 as the 2nd-largest call.
DEFAULT_CALLS: Final = 100
#: Warm-up calls per point at most (they stop earlier once settled).
MAX_POINT_WARMUP: Final = 20

RequestFor = Callable[[int], Callable[[], object]]
T = TypeVar("T")


def time_point(
    call: Callable[[], object],
    batch_size: int,
    *,
    threads: int | None = None,
    calls: int = DEFAULT_CALLS,
    sync: Callable[[], None] = lambda: None,
    clock: Clock | None = None,
) -> CurvePoint:
    """One point: warm up until settled, then `calls` timed batches."""
    now = clock or time.perf_counter
    warm: list[float] = []
    while len(warm) < MAX_POINT_WARMUP and not settled(warm):
        warm.append(timed_call(call, sync, now))
    times = [timed_call(call, sync, now) for _ in range(calls)]
    median = statistics.median(times)
    return CurvePoint(
        batch_size=batch_size,
        threads=threads,
        samples_per_s=batch_size / median if median > 0 else float("inf"),
        p50_s=percentile(times, 50.0),
        p95_s=percentile(times, 95.0),
        p99_s=percentile(times, 99.0),
    )


def knee_index(xs: Sequence[float], ys: Sequence[float]) -> int | None:
    """Kneedle's knee of an increasing, flattening curve; None for fewer than 3 points or a
    curve that never rises."""
    if len(xs) < 3:
        return None
    x = np.asarray(xs, dtype=np.float64)
    # The best throughput reached so far: Kneedle needs a monotone curve, and a point slower
    # than a smaller batch (noise, a worse kernel) does not make a knee of its own.
    y = np.maximum.accumulate(np.asarray(ys, dtype=np.float64))
    if np.ptp(y) <= 0 or np.ptp(x) <= 0:
        return None
    xn = (x - x[0]) / (x[-1] - x[0])
    yn = (y - y.min()) / np.ptp(y)
    diff = yn - xn
    best = int(np.argmax(diff))
    return best if diff[best] > 0 else None


def flat(points: Sequence[CurvePoint]) -> bool:
    """Whether each of the last `EARLY_STOP_STEPS` steps gained under `EARLY_STOP_GAIN`."""
    if len(points) <= EARLY_STOP_STEPS:
        return False
    rates = [p.samples_per_s for p in points[-EARLY_STOP_STEPS - 1 :]]
    return all(b < a * (1.0 + EARLY_STOP_GAIN) for a, b in itertools.pairwise(rates))


def sweep(
    axis: CurveAxis,
    steps: Sequence[T],
    point_at: Callable[[T], CurvePoint],
    x_of: Callable[[CurvePoint], float],
    *,
    label: Callable[[T], str],
    progress: Callable[[str], None] | None = None,
) -> Curve:
    """The one sweep loop: a point at each step in order, stopping once the curve is `flat`
    (never before the last step is due), then the knee on `x_of` (a log2 axis)."""
    points: list[CurvePoint] = []
    stopped = False
    for i, step in enumerate(steps):
        if progress:
            progress(label(step))
        points.append(point_at(step))
        if flat(points) and i != len(steps) - 1:
            stopped = True
            break
    xs = [x_of(p) for p in points]
    return Curve(
        axis=axis,
        points=points,
        knee_index=knee_index(xs, [p.samples_per_s for p in points]),
        stopped_early=stopped,
    )


def batch_curve(
    request_for: RequestFor,
    sizes: Sequence[int],
    *,
    calls: int = DEFAULT_CALLS,
    sync: Callable[[], None] = lambda: None,
    clock: Clock | None = None,
    progress: Callable[[str], None] | None = None,
) -> Curve:
    """Points at each batch size in `sizes` (ascending), stopping once the curve is flat."""
    return sweep(
        "batch_size",
        sizes,
        lambda size: time_point(request_for(size), size, calls=calls, sync=sync, clock=clock),
        lambda p: float(np.log2(p.batch_size)),
        label=lambda size: f"batch size {size}",
        progress=progress,
    )


def thread_curve(
    call: Callable[[], object],
    batch_size: int,
    threads: Sequence[int],
    set_threads: Callable[[int], None],
    *,
    calls: int = DEFAULT_CALLS,
    sync: Callable[[], None] = lambda: None,
    clock: Clock | None = None,
    progress: Callable[[str], None] | None = None,
) -> Curve:
    """Points at each intra-op thread count; `set_threads` sets it (the caller restores it)."""

    def point_at(n: int) -> CurvePoint:
        set_threads(n)
        return time_point(call, batch_size, threads=n, calls=calls, sync=sync, clock=clock)

    return sweep(
        "threads",
        threads,
        point_at,
        lambda p: float(np.log2(p.threads or 1)),
        label=lambda n: f"{n} threads",
        progress=progress,
    )


def doubling(largest: int) -> list[int]:
    """1, 2, 4, ... up to `largest` (included even when not a power of two)."""
    sizes = [1]
    while sizes[-1] * 2 <= largest:
        sizes.append(sizes[-1] * 2)
    if sizes[-1] != largest and largest > 1:
        sizes.append(largest)
    return sizes


__all__ = [
    "DEFAULT_CALLS",
    "EARLY_STOP_GAIN",
    "EARLY_STOP_STEPS",
    "batch_curve",
    "doubling",
    "flat",
    "knee_index",
    "sweep",
    "thread_curve",
    "time_point",
]
