"""The batching simulation calibrated on one real batcher run, to predict other rates.

A service-time table t(b) measured closed-loop (calls back to back) under-states what a real
batcher sees: between batches it sleeps, each sleep overshoots its target (timer slack, the
scheduler's wake-up), the intra-op threads and the caches go cold while it is idle, and its
own loop takes time between one batch's end and the next's start. On a 2-core host the
closed-loop table's simulation put p99 at about half the real batcher's (benchmarks/
bench_serve_batching.py). So one real run at one rate is traced (each batch's wake-up target,
start and end: `LoadTrace`), and `calibrate` fits from it the distributions of

- the loop's overhead (a batch that starts at once: start - previous end),
- the overshoot of a sleep (a batch that slept: start - wake-up target),
- the service time as seen minus t(b), by how long the server was idle before the batch
  (`IDLE_EDGES_S`), per batch size where seen `MIN_SAMPLES_PER_SIZE` times, else pooled over
  sizes.

`simulate_calibrated` runs the same batcher loop on virtual time drawing each batch's delays
from those distributions (seeded). Which batches sleep, and for how long the server is idle
before each, is the simulation's own at each rate (a low rate idles long before most batches,
a high one serves them back to back); only the distributions come from the calibration run,
so a prediction at another rate is a prediction, not a fit.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import numpy as np

from torchdoctor.core.errors import MeasureError
from torchdoctor.serve.arrivals import arrival_times
from torchdoctor.serve.batcher import BatchPolicy, LoadTrace, run_batcher, service_time
from torchdoctor.serve.clock import RealClock, ServeClock, VirtualClock
from torchdoctor.serve.records import (
    ArrivalKind,
    ResidualQuantiles,
    ServiceCalibration,
    ServiceTime,
)

#: The load (a fraction of the table's capacity) a calibration run serves: between the loads
#: `serve` predicts at (25-90%) and the benchmark tests at (30, 60, 85%), and equal to none,
#: so that every prediction is at a rate the calibration did not see.
CALIBRATION_LOAD: Final = 0.45
#: Requests of a calibration run: 1000 give several hundred batches at 45% load, dozens at
#: least in each idle bin that load visits often.
CALIBRATION_REQUESTS: Final = 1000
#: ...but no more than this many seconds of arrivals for a slow model,
CALIBRATION_MAX_S: Final = 5.0
#: ...and never fewer requests than this: about a hundred batches, a bin's minimum several
#: times over.
CALIBRATION_MIN_REQUESTS: Final = 200

#: Quantiles kept of each distribution (0%, 1%, ..., 100%): the tail to 1% resolution, which
#: a p99 prediction needs, and the maximum.
QUANTILE_POINTS: Final = 101
#: Edges of the idle-time bins (seconds the server was idle before a batch) whose service
#: times are told apart. 0.2 ms: about how long idle OpenMP threads spin before they sleep
#: (libgomp's default GOMP_SPINCOUNT, 300,000 spins; below it the threads are warm), then
#: decades (2 ms, 20 ms), since caches and the cores' idle states cool with time.
IDLE_EDGES_S: Final = (0.0, 2e-4, 2e-3, 2e-2)
#: A bin with fewer batches than this is not drawn from (a handful of points is no
#: distribution); the nearest bin that has enough is.
MIN_SAMPLES_PER_BIN: Final = 10
#: Batches of one size (in one idle bin) below which that size's own service
#: times are not trusted and the pooled ones are drawn instead: 30, the usual rule of thumb
#: for an empirical distribution's middle (its 1% tail is then the pooled one's anyway).
MIN_SAMPLES_PER_SIZE: Final = 30


def _quantiles(values: np.ndarray) -> list[float]:
    return [float(v) for v in np.quantile(values, np.linspace(0.0, 1.0, QUANTILE_POINTS))]


def quantile_at(values: Sequence[float], u: float) -> float:
    """The quantile at u in [0, 1) of the distribution whose evenly spaced quantiles (or, for
    an empirical distribution, sorted values) are `values`, linear between them (plain Python:
    the simulations draw a few times per batch)."""
    if len(values) == 1:
        return float(values[0])
    position = u * (len(values) - 1)
    index = min(int(position), len(values) - 2)
    low, high = values[index], values[index + 1]
    return float(low + (high - low) * (position - index))


def _draw(quantiles: Sequence[float], rng: np.random.Generator) -> float:
    """One draw from the distribution whose evenly spaced quantiles are `quantiles`: the
    quantile function at a uniform draw. A single value (what the calibration run never saw)
    takes no draw, so it leaves the generator's sequence to the others."""
    if len(quantiles) == 1:
        return float(quantiles[0])
    return quantile_at(quantiles, rng.random())


def idle_bin(idle_s: float) -> int:
    """The index of the `IDLE_EDGES_S` bin an idle time falls in."""
    return max(0, bisect.bisect_right(IDLE_EDGES_S, idle_s) - 1)


def _bin_edges(index: int) -> tuple[float, float | None]:
    upper = IDLE_EDGES_S[index + 1] if index + 1 < len(IDLE_EDGES_S) else None
    return IDLE_EDGES_S[index], upper


def slept(trace: LoadTrace) -> np.ndarray:
    """Per batch: whether the batcher slept before it (its wake-up target came after the
    previous batch's end), rather than starting it at once."""
    previous_done = np.concatenate(([0.0], trace.dones_s[:-1]))
    return np.asarray(trace.wakes_s > previous_done)


def calibrate(
    trace: LoadTrace,
    table: Sequence[ServiceTime],
    *,
    arrivals: ArrivalKind,
    rate: float,
) -> ServiceCalibration:
    """Fit the batcher's overheads over `table` from the trace of one real run."""
    sizes = np.asarray(trace.batch_sizes)
    if sizes.size == 0 or trace.starts_s.size != sizes.size:
        raise MeasureError("a calibration needs a real batcher run's per-batch trace")
    previous_done = np.concatenate(([0.0], trace.dones_s[:-1]))
    after_sleep = slept(trace)
    # The first batch has no previous one: its start is not the loop's overhead.
    at_once = ~after_sleep
    at_once[0] = False
    overhead = trace.starts_s[at_once] - previous_done[at_once]
    overshoot = trace.starts_s[after_sleep] - trace.wakes_s[after_sleep]
    seen = trace.dones_s - trace.starts_s
    residual = seen - np.asarray([service_time(table, int(b)) for b in sizes])
    # The first batch's "idle" is from the run's start, as in the simulation.
    bins = np.asarray([idle_bin(g) for g in trace.starts_s - previous_done])
    service: list[ResidualQuantiles] = []
    for index in range(len(IDLE_EDGES_S)):
        in_bin = bins == index
        if in_bin.sum() < MIN_SAMPLES_PER_BIN:
            continue
        low, high = _bin_edges(index)
        service.append(
            ResidualQuantiles(
                idle_from_s=low,
                idle_to_s=high,
                n=int(in_bin.sum()),
                quantiles_s=_quantiles(residual[in_bin]),
            )
        )
        for b in np.unique(sizes[in_bin]):
            mask = in_bin & (sizes == b)
            if mask.sum() >= MIN_SAMPLES_PER_SIZE:
                service.append(
                    ResidualQuantiles(
                        batch_size=int(b),
                        idle_from_s=low,
                        idle_to_s=high,
                        n=int(mask.sum()),
                        quantiles_s=_quantiles(residual[mask]),
                    )
                )
    return ServiceCalibration(
        arrivals=arrivals,
        rate=rate,
        requests=int(trace.latencies_s.size),
        batches=int(sizes.size),
        table=list(table),
        overhead_s=_quantiles(overhead) if overhead.size else [0.0],
        overshoot_s=_quantiles(overshoot) if overshoot.size else [0.0],
        service=service,
    )


class _Residuals:
    """The service residuals to draw for a batch: its size's in its idle bin, else its bin's
    pooled, else the nearest bin's pooled (idle times the calibration run seldom saw), else
    none. Looked up once per (size, bin)."""

    def __init__(self, calibration: ServiceCalibration) -> None:
        self._service = calibration.service
        self._found: dict[tuple[int, int], list[float]] = {}

    def __call__(self, batch_size: int, idle_s: float) -> list[float]:
        key = (batch_size, idle_bin(idle_s))
        if key not in self._found:
            self._found[key] = self._lookup(*key)
        return self._found[key]

    def _lookup(self, batch_size: int, index: int) -> list[float]:
        low = IDLE_EDGES_S[index]
        for r in self._service:
            if r.batch_size == batch_size and r.idle_from_s == low:
                return r.quantiles_s
        pooled = [r for r in self._service if r.batch_size is None]
        if not pooled:
            return [0.0]
        return min(pooled, key=lambda r: abs(idle_bin(r.idle_from_s) - index)).quantiles_s


class _LateClock(VirtualClock):
    """Virtual time on which the batcher's loop costs its overhead before each sleep, and a
    sleep ends late by a drawn overshoot: the real clock's behaviour, as calibrated."""

    def __init__(self, calibration: ServiceCalibration, rng: np.random.Generator) -> None:
        super().__init__()
        self._calibration = calibration
        self._rng = rng
        self.slept = True
        #: When the last batch ended: the server is idle from then to the next start.
        self.last_done = 0.0

    def sleep_until(self, when: float) -> None:
        # The batcher sleeps once per batch, right after the last batch's bookkeeping.
        self.slept = when > self.now()
        self.advance(_draw(self._calibration.overhead_s, self._rng))
        if self.slept and when > self.now():
            super().sleep_until(when + _draw(self._calibration.overshoot_s, self._rng))


def simulate_calibrated(
    arrivals: Sequence[float] | np.ndarray,
    calibration: ServiceCalibration,
    policy: BatchPolicy,
    *,
    seed: int = 0,
) -> LoadTrace:
    """The batcher on virtual time, each batch taking t(b) plus the calibrated delays."""
    rng = np.random.default_rng(seed)
    clock = _LateClock(calibration, rng)
    residuals = _Residuals(calibration)

    def serve(b: int) -> None:
        idle = clock.now() - clock.last_done
        extra = _draw(residuals(b, idle), rng)
        clock.advance(service_time(calibration.table, b) + extra)
        clock.last_done = clock.now()

    return run_batcher(serve, arrivals, policy, clock)


def calibration_run(
    calls: Mapping[int, Callable[[], object]],
    table: Sequence[ServiceTime],
    policy: BatchPolicy,
    *,
    arrivals: ArrivalKind,
    rate: float,
    requests: int,
    seed: int,
    sync: Callable[[], None] = lambda: None,
    clock: ServeClock | None = None,
) -> tuple[ServiceCalibration, LoadTrace]:
    """Serve `requests` at `rate` for real under `policy` (`calls[b]` serves a batch of b) and
    calibrate on its trace; the trace too, for the run's own percentiles."""
    times = arrival_times(arrivals, rate, requests, seed=seed)
    trace = run_batcher(lambda b: calls[b](), times, policy, clock or RealClock(), sync)
    return calibrate(trace, table, arrivals=arrivals, rate=rate), trace


def calibration_requests(rate: float) -> int:
    """Requests for a calibration run at `rate`: `CALIBRATION_REQUESTS`, fewer for a slow
    model (at most `CALIBRATION_MAX_S` of arrivals), never under the minimum."""
    return max(CALIBRATION_MIN_REQUESTS, min(CALIBRATION_REQUESTS, int(rate * CALIBRATION_MAX_S)))


__all__ = [
    "CALIBRATION_LOAD",
    "CALIBRATION_MAX_S",
    "CALIBRATION_MIN_REQUESTS",
    "CALIBRATION_REQUESTS",
    "IDLE_EDGES_S",
    "MIN_SAMPLES_PER_BIN",
    "MIN_SAMPLES_PER_SIZE",
    "QUANTILE_POINTS",
    "calibrate",
    "calibration_requests",
    "calibration_run",
    "idle_bin",
    "quantile_at",
    "simulate_calibrated",
    "slept",
]
