"""The SLA: parsed, searched by a sweep and by bisection, confirmed, VALID or INVALID."""

from __future__ import annotations

import pytest

from torchdoctor.core.errors import UsageError
from torchdoctor.serve import BatchPolicy, ServiceTime, SlaPoint
from torchdoctor.serve.sla import (
    binary_search_sla,
    parse_sla,
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
