"""The SLA: parsed, searched by a sweep and by bisection, confirmed, VALID or INVALID."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from torchdoctor.core.errors import UsageError
from torchdoctor.serve import BatchPolicy, LoadTrace, ServiceTime, SlaPoint
from torchdoctor.serve.sla import (
    BINARY_MAX_MEASUREMENTS,
    binary_search_sla,
    doubtful_failure,
    parse_sla,
    point_from,
    simulated_measure,
    sweep_sla,
)

TABLE = [
    ServiceTime(batch_size=1, seconds=0.002),
    ServiceTime(batch_size=4, seconds=0.003),
    ServiceTime(batch_size=8, seconds=0.004),
]
POLICY = BatchPolicy(8, 0.0)
CAPACITY = 8 / 0.004


@pytest.mark.parametrize(
    ("text", "p", "bound"),
    [("p99<=20ms", 99.0, 0.02), ("p50 <= 1.5 s", 50.0, 1.5), ("p95<=250us", 95.0, 250e-6)],
)
def test_sla_parses(text: str, p: float, bound: float) -> None:
    sla = parse_sla(text)
    assert sla.percentile == p and sla.bound_s == pytest.approx(bound)


@pytest.mark.parametrize(
    "text", ["p99<20", "p99<20ms", "p98<=20ms", "latency<=20ms", "p99<=0ms", ""]
)
def test_a_bad_sla_is_a_usage_error_naming_the_form(text: str) -> None:
    with pytest.raises(UsageError, match="p99<=20ms"):
        parse_sla(text)


def test_bisection_finds_the_sweeps_best_with_a_quarter_of_its_measurements() -> None:
    sla = parse_sla("p99<=20ms")
    measure = simulated_measure(TABLE, POLICY, sla, requests=600)
    low, high = 0.01 * CAPACITY, 1.2 * CAPACITY
    sweep = sweep_sla(measure, sla, low, high)
    binary = binary_search_sla(measure, sla, low, high)
    assert sweep.status == binary.status == "VALID"
    assert sweep.best is not None and binary.best is not None
    assert binary.best.achieved_rate >= 0.95 * sweep.best.achieved_rate
    assert binary.measurements <= 0.25 * sweep.measurements
    assert binary.confirmation is not None and binary.confirmation.meets


def test_a_bound_nothing_meets_is_invalid_with_the_closest_point() -> None:
    sla = parse_sla("p99<=1ms")  # below even one request's service time
    measure = simulated_measure(TABLE, POLICY, sla)
    result = binary_search_sla(measure, sla, 0.1 * CAPACITY, CAPACITY)
    assert result.status == "INVALID" and result.best is None
    assert "no rate measured met p99<=1ms" in result.reason
    assert result.closest is not None
    assert result.closest.latency_s == min(p.latency_s for p in result.points)
    # It stepped down from a failing low rate before giving up.
    assert min(p.target_rate for p in result.points) < 0.1 * CAPACITY


def test_a_best_point_the_confirmation_does_not_bear_out_is_invalid() -> None:
    sla = parse_sla("p99<=10ms")
    seen: list[int] = []

    def measure(rate: float, seed: int) -> SlaPoint:
        seen.append(seed)
        lucky = seed < 10_000  # the search's own runs meet; the confirmation's does not
        latency = 0.005 if lucky and rate < 500 else 0.05
        return SlaPoint(target_rate=rate, achieved_rate=rate, latency_s=latency, n=459,
                        meets=latency <= sla.bound_s)  # fmt: skip

    result = binary_search_sla(measure, sla, 10.0, 1000.0)
    assert result.status == "INVALID" and "confirmation" in result.reason
    assert result.closest is not None and result.closest.target_rate < 500
    assert result.measurements == len(seen)
    # Each of the three highest meeting rates was given its confirmation run.
    assert sum(s >= 10_000 for s in seen) == 3


#: The noisy service: the true p99 crosses the bound at `BOUNDARY` requests/s and grows with
#: the rate; a run meets a hiccup with probability `HICCUP`, which makes `HICCUP_SLOW`
#: requests (a few, as a preempted thread or a late timer does) take `HICCUP_FACTOR` times
#: the bound. A p99 of 459 requests is their 5th largest, so a hiccup fails a run at any rate,
#: while the interval's lower end (about the 10th largest) stays under the bound: doubtful.
BOUNDARY, HICCUP, HICCUP_SLOW, HICCUP_FACTOR = 1000.0, 0.2, range(5, 9), 3.0
NOISY_SLA = parse_sla("p99<=300us")


def noisy_service(service_seed: int) -> Callable[[float, int], SlaPoint]:
    def measure(rate: float, seed: int) -> SlaPoint:
        rng = np.random.default_rng([service_seed, seed])
        # Lognormal latencies whose true p99 (median * e^(2.326 sigma)) is the bound at
        # BOUNDARY, growing as rate^2.
        sigma = 0.3
        median = NOISY_SLA.bound_s * (rate / BOUNDARY) ** 2 / np.exp(2.326 * sigma)
        latencies = median * rng.lognormal(0.0, sigma, size=459)
        if rng.random() < HICCUP:
            slow = rng.choice(latencies.size, int(rng.choice(HICCUP_SLOW)), replace=False)
            latencies[slow] = HICCUP_FACTOR * NOISY_SLA.bound_s
        trace = LoadTrace(latencies, np.zeros_like(latencies), duration_s=459 / rate)
        return point_from(trace, rate, NOISY_SLA)

    return measure


def without_intervals(measure: Callable[[float, int], SlaPoint]) -> Callable[..., SlaPoint]:
    """The same runs with no interval: every failure is then trusted as measured."""
    return lambda rate, seed: measure(rate, seed).model_copy(
        update={"ci_low_s": None, "ci_high_s": None}
    )


def test_on_a_noisy_tail_the_search_finds_the_boundary_within_its_budget() -> None:
    low, high = 0.125 * BOUNDARY, 1.5 * BOUNDARY  # serve's 10%..120% of a capacity 1.25x it
    plain_short = 0
    for service in range(12):
        measure = noisy_service(service)
        binary = binary_search_sla(measure, NOISY_SLA, low, high)
        assert binary.status == "VALID" and binary.best is not None, service
        # Within the bisection's resolution and the tail's own noise of the true boundary:
        # a spurious failure did not send it to a lower half, a lucky pass was not confirmed.
        assert 0.9 * BOUNDARY <= binary.best.target_rate <= 1.05 * BOUNDARY, service
        assert binary.measurements <= BINARY_MAX_MEASUREMENTS
        # Only doubtful failures were measured again, each pooled into its rate's verdict.
        rates = [p.target_rate for p in binary.points]
        remeasured = {r for r in rates if rates.count(r) > 1}
        first = {p.target_rate: p for p in reversed(binary.points)}
        assert all(doubtful_failure(first[r], NOISY_SLA) for r in remeasured), service
        plain = binary_search_sla(without_intervals(measure), NOISY_SLA, low, high)
        plain_short += plain.best is None or plain.best.target_rate < 0.9 * BOUNDARY
    # Trusting every failure as measured, plain bisection falls short on this service (the
    # session-18 failure at p99<=300us, reproduced).
    assert plain_short >= 3


def test_a_clear_failure_is_not_measured_again() -> None:
    measure = noisy_service(0)
    result = binary_search_sla(measure, NOISY_SLA, 100 * BOUNDARY, 200 * BOUNDARY)
    # Far past the boundary (stepped down to 1.56x it) every run fails with its whole
    # interval over the bound.
    assert result.status == "INVALID"
    assert not any(doubtful_failure(p, NOISY_SLA) for p in result.points)
    assert len({p.target_rate for p in result.points}) == len(result.points)
