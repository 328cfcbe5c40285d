"""Latency as requests see it: one clock reading per request, after the device is idle.

A request's latency is the time from its start to its answer being ready. On a GPU the call
returns when its kernels are queued, so the device is synchronized before the clock is read
(`measure.make_sync`); a block of calls divided by its count would give their mean, and no
percentile of requests can be taken from means. The first call (lazy initialization,
compilation, autotuning) is timed on its own, and the calls after it until the latencies
settle (`measure.settled`, the project's one warm-up rule) are kept apart as warm-up. Then
windows of requests are timed until the p50 and the p99 of the last three windows agree
within 10% (the same rule applied to windows) and the count meets LoadGen's minimum for the
tail (`min_samples`), or the budget runs out, which the record says (`settled=False`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Final

import numpy as np

from torchdoctor.core.errors import MeasureError
from torchdoctor.core.vocabulary import Clock
from torchdoctor.measure import SETTLE_WINDOW, make_sync, settled
from torchdoctor.serve._percentiles import (
    INTERVAL_CONFIDENCE,
    PERCENTILES,
    TAIL_CONFIDENCE,
    min_samples,
    order_statistic_interval,
    percentile,
)
from torchdoctor.serve.records import (
    LatencyMeasurement,
    LatencySummary,
    LatencyWindow,
    PercentileEstimate,
)

#: Requests per window: a window's p99 is its 2nd-largest value at 100 (rank ceil(0.99 n)),
#: so a single straggler moves a window's p99 only by one rank.
DEFAULT_WINDOW: Final = 100
#: Requests at most, whatever the budget: at 20,000 the p99's 95% interval spans about
#: +-0.14 percentile ranks (binomial), far finer than anything reported, and the record's
#: per-request latencies stay a few hundred kilobytes.
MAX_REQUESTS: Final = 20_000
#: Warm-up calls at most before the steady windows start regardless (and the record says
#: whether they settled): a model that never settles is still measured.
MAX_WARMUP_CALLS: Final = 200


def summarize_latencies(
    latencies: Sequence[float] | np.ndarray,
    *,
    percentiles: Sequence[float] = PERCENTILES,
    confidence: float = INTERVAL_CONFIDENCE,
    tail_confidence: float = TAIL_CONFIDENCE,
) -> LatencySummary:
    """Count, mean, max and each percentile with its distribution-free interval."""
    data = np.asarray(latencies, dtype=np.float64)
    if data.size == 0:
        raise MeasureError("no latencies to summarize")
    estimates = []
    for p in percentiles:
        low, high = order_statistic_interval(data, p, confidence)
        need = min_samples(p, tail_confidence)
        estimates.append(
            PercentileEstimate(
                percentile=p,
                value_s=percentile(data, p),
                ci_low_s=low,
                ci_high_s=high,
                confidence=confidence,
                enough_samples=data.size >= need,
                min_samples=need,
            )
        )
    return LatencySummary(
        n=int(data.size), mean_s=float(data.mean()), max_s=float(data.max()), percentiles=estimates
    )


def windows_agree(windows: Sequence[LatencyWindow]) -> bool:
    """Whether the last three windows' p50 and p99 each agree within 10% (`settled`)."""
    return settled([w.p50_s for w in windows]) and settled([w.p99_s for w in windows])


def timed_call(call: Callable[[], object], sync: Callable[[], None], clock: Clock) -> float:
    """One request: start, call, wait for the device, read the clock again."""
    start = clock()
    call()
    sync()
    return clock() - start


def measure_latency(
    call: Callable[[], object],
    *,
    label: str = "model",
    batch_size: int = 1,
    device: str = "cpu",
    window: int = DEFAULT_WINDOW,
    budget_s: float = 10.0,
    tail_percentile: float = 99.0,
    clock: Clock | None = None,
    sync: Callable[[], None] | None = None,
) -> LatencyMeasurement:
    """Time `call` request by request until its percentiles are stable (see module doc)."""
    if window < 1:
        raise MeasureError(f"window {window} must be at least 1 request")
    now = clock or time.perf_counter
    wait = sync or make_sync(device)
    start = now()
    first = timed_call(call, wait, now)
    warm: list[float] = []
    while len(warm) < MAX_WARMUP_CALLS and not settled(warm):
        if warm and now() - start >= budget_s / 4:
            break
        warm.append(timed_call(call, wait, now))
    latencies: list[float] = []
    windows: list[LatencyWindow] = []
    need = min_samples(tail_percentile)
    agreed = False
    while True:
        chunk = [timed_call(call, wait, now) for _ in range(window)]
        latencies += chunk
        windows.append(
            LatencyWindow(n=window, p50_s=percentile(chunk, 50.0), p99_s=percentile(chunk, 99.0))
        )
        agreed = len(windows) >= SETTLE_WINDOW and windows_agree(windows)
        if (agreed and len(latencies) >= need) or now() - start >= budget_s:
            break
        if len(latencies) >= MAX_REQUESTS:
            break
    return LatencyMeasurement(
        label=label,
        batch_size=batch_size,
        device=device,
        first_call_s=first,
        warmup_calls=len(warm),
        warmup_s=float(sum(warm)),
        windows=windows,
        settled=agreed,
        summary=summarize_latencies(latencies),
        latencies_s=latencies,
    )


__all__ = [
    "DEFAULT_WINDOW",
    "MAX_REQUESTS",
    "MAX_WARMUP_CALLS",
    "measure_latency",
    "summarize_latencies",
    "timed_call",
    "windows_agree",
]
