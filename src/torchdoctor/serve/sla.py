"""The SLA: "p99<=20ms", and the highest throughput whose percentile stays under the bound.

Two searches over the arrival rate, each ending in a confirmation run at its best rate with
another seed (a point that met the bound once by luck must meet it twice):

- `sweep`: every rate of a geometric grid; the reference, and what a person would do by hand.
- `binary`: bisection on the logarithm of the rate between a rate that meets the bound and
  one that does not, until they are within `BINARY_TOLERANCE`. Latency grows with load, so
  the bound is crossed once; bisection needs log2(ln(hi/lo) / ln(1 + tol)) points where the
  sweep needs one per grid step.

The result is VALID (the confirmed best rate) or INVALID with the reason and the point that
came closest to the bound; INVALID is a finding, not an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Final, Literal

import numpy as np

from torchdoctor.core.errors import MeasureError, UsageError
from torchdoctor.serve._percentiles import min_samples
from torchdoctor.serve._percentiles import percentile as take_percentile
from torchdoctor.serve.arrivals import arrival_times
from torchdoctor.serve.batcher import BatchPolicy, LoadTrace, simulate_batcher
from torchdoctor.serve.records import ArrivalKind, ServiceTime, SlaPoint, SlaSearch, SlaSpec

#: The percentiles an SLA may name (the issue's p50, p95, p99).
SLA_PERCENTILES: Final = (50, 95, 99)
#: Relative width at which bisection stops: the best rate found is within 3% of the highest
#: that meets the bound, inside the 5% the search is held to (benchmarks/bench_serve_sla.py).
BINARY_TOLERANCE: Final = 0.03
#: How far `binary_search_sla` steps below a `low` that fails: by this factor, so many times.
STEP_DOWN: Final = 4.0
MAX_STEPS_DOWN: Final = 3
#: Meeting points a failed confirmation falls back through, highest first.
MAX_CONFIRMATIONS: Final = 3
#: Grid points of the sweep by default: over the 12x range `torchdoctor serve` searches (10% to
#: 120% of the table's capacity), 4% apart, about the bisection's own resolution, so the
#: sweep is the exhaustive reference the search is held against.
DEFAULT_SWEEP_POINTS: Final = 64

_UNITS: Final = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_SLA_RE: Final = re.compile(r"^\s*p(\d+)\s*<=\s*([0-9]*\.?[0-9]+)\s*(us|µs|ms|s)\s*$")

MeasureAt = Callable[[float, int], SlaPoint]
"""(target rate, seed) -> the point measured there."""


def parse_sla(text: str) -> SlaSpec:
    """'p99<=20ms' -> SlaSpec(99, 0.020); a `UsageError` naming the form otherwise."""
    match = _SLA_RE.match(text)
    hint = "write it as p99<=20ms (p50, p95 or p99; us, ms or s)"
    if not match:
        raise UsageError(f"SLA {text!r} does not parse", hint=hint)
    p, value, unit = int(match.group(1)), float(match.group(2)), match.group(3)
    if p not in SLA_PERCENTILES:
        raise UsageError(f"SLA {text!r} names p{p}", hint=hint)
    bound = value * _UNITS[unit]
    if not bound > 0:
        raise UsageError(f"SLA {text!r} has a bound of zero", hint=hint)
    return SlaSpec(percentile=float(p), bound_s=bound, text=f"p{p}<={value:g}{unit}")


def point_from(trace: LoadTrace, rate: float, sla: SlaSpec) -> SlaPoint:
    """An SLA point from a load run's per-request latencies."""
    value = take_percentile(trace.latencies_s, sla.percentile)
    n = int(trace.latencies_s.size)
    duration = max(trace.duration_s, 1e-12)
    return SlaPoint(
        target_rate=rate,
        achieved_rate=n / duration,
        latency_s=value,
        n=n,
        meets=value <= sla.bound_s,
        goodput=float(np.sum(trace.latencies_s <= sla.bound_s)) / duration,
    )


def requests_for(sla: SlaSpec, least: int = 0) -> int:
    """Requests per load point: LoadGen's minimum for the SLA's percentile, or `least`."""
    return max(least, min_samples(sla.percentile))


def simulated_measure(
    table: list[ServiceTime],
    policy: BatchPolicy,
    sla: SlaSpec,
    *,
    arrivals: ArrivalKind = "poisson",
    requests: int | None = None,
) -> MeasureAt:
    """A `MeasureAt` that runs the batching simulation from the service-time table."""
    n = requests or requests_for(sla)

    def measure(rate: float, seed: int) -> SlaPoint:
        trace = simulate_batcher(arrival_times(arrivals, rate, n, seed=seed), table, policy)
        return point_from(trace, rate, sla)

    return measure


def _closest(points: list[SlaPoint], sla: SlaSpec) -> SlaPoint | None:
    """The point nearest to meeting the bound: the highest meeting one, else the lowest
    latency relative to the bound."""
    meeting = [p for p in points if p.meets]
    if meeting:
        return max(meeting, key=lambda p: p.achieved_rate)
    return min(points, key=lambda p: p.latency_s / sla.bound_s, default=None)


def _finish(
    sla: SlaSpec,
    method: Literal["sweep", "binary"],
    points: list[SlaPoint],
    measure: MeasureAt,
    confirm_seed: int,
) -> SlaSearch:
    best = max((p for p in points if p.meets), key=lambda p: p.achieved_rate, default=None)
    if best is None:
        closest = _closest(points, sla)
        worst = f"{closest.latency_s * 1e3:.3g} ms" if closest else "nothing measured"
        return SlaSearch(
            sla=sla,
            method=method,
            points=points,
            measurements=len(points),
            status="INVALID",
            reason=f"no rate measured met {sla.text}: the lowest p{sla.percentile:g} was {worst}",
            best=None,
            confirmation=None,
            closest=closest,
        )
    # A point that met the bound by luck is likeliest among the highest that met it (the
    # winner's curse), so a failed confirmation falls back to the next meeting point below.
    ranked = sorted((p for p in points if p.meets), key=lambda p: -p.achieved_rate)
    tried: list[SlaPoint] = []
    for candidate in ranked[:MAX_CONFIRMATIONS]:
        confirmation = measure(candidate.target_rate, confirm_seed + len(tried))
        tried.append(confirmation)
        if confirmation.meets:
            return SlaSearch(
                sla=sla,
                method=method,
                points=points,
                measurements=len(points) + len(tried),
                status="VALID",
                reason=f"{candidate.achieved_rate:.4g} requests/s met {sla.text}, and again in "
                "a confirmation run",
                best=candidate,
                confirmation=confirmation,
                closest=candidate,
            )
    return SlaSearch(
        sla=sla,
        method=method,
        points=points,
        measurements=len(points) + len(tried),
        status="INVALID",
        reason=f"{best.achieved_rate:.4g} requests/s met {sla.text} once, but no confirmation "
        f"run bore out the {len(tried)} highest meeting rates (the last measured "
        f"{tried[-1].latency_s * 1e3:.3g} ms)",
        best=None,
        confirmation=tried[-1],
        closest=best,
    )


def sweep_sla(
    measure: MeasureAt,
    sla: SlaSpec,
    low: float,
    high: float,
    *,
    points: int = DEFAULT_SWEEP_POINTS,
    seed: int = 0,
) -> SlaSearch:
    """Measure every rate of a geometric grid from `low` to `high`, then confirm the best."""
    _check_range(low, high)
    rates = np.geomspace(low, high, max(2, points))
    measured = [measure(float(r), seed + i) for i, r in enumerate(rates)]
    return _finish(sla, "sweep", measured, measure, confirm_seed=seed + 10_000)


def binary_search_sla(
    measure: MeasureAt,
    sla: SlaSpec,
    low: float,
    high: float,
    *,
    tolerance: float = BINARY_TOLERANCE,
    seed: int = 0,
) -> SlaSearch:
    """Bisect log(rate) between a meeting `low` and a failing `high`, then confirm the best.

    If `low` fails, lower rates are tried (`STEP_DOWN`, at most `MAX_STEPS_DOWN` times) and
    the failing one becomes the new `high`; if none meets, INVALID with the closest point. If
    `high` meets, it is the answer (the best point then sits at the top of the range).
    """
    _check_range(low, high)
    points = [measure(low, seed)]
    # A `low` that fails is stepped down a few times before the search gives up: a table's
    # capacity leaves out the batcher's own overhead, which bounds a fast model first.
    stepped = False
    while not points[-1].meets and len(points) <= MAX_STEPS_DOWN:
        high, low, stepped = low, low / STEP_DOWN, True
        points.append(measure(low, seed + len(points)))
    if points[-1].meets:
        top_meets = False
        if not stepped:  # a stepped-down `high` is known to fail already
            points.append(measure(high, seed + len(points)))
            top_meets = points[-1].meets
        lo, hi = low, high
        while not top_meets and hi / lo > 1.0 + tolerance:
            mid = math.sqrt(lo * hi)
            point = measure(mid, seed + len(points))
            points.append(point)
            lo, hi = (mid, hi) if point.meets else (lo, mid)
    return _finish(sla, "binary", points, measure, confirm_seed=seed + 10_000)


def _check_range(low: float, high: float) -> None:
    if not 0 < low < high:
        raise MeasureError(f"rate range {low!r}..{high!r} must be positive and increasing")


__all__ = [
    "BINARY_TOLERANCE",
    "DEFAULT_SWEEP_POINTS",
    "SLA_PERCENTILES",
    "MeasureAt",
    "binary_search_sla",
    "parse_sla",
    "point_from",
    "requests_for",
    "simulated_measure",
    "sweep_sla",
]
