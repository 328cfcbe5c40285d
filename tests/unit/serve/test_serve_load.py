"""The open-loop generator and the batcher on a virtual clock: queueing theory holds."""

from __future__ import annotations

import numpy as np
import pytest

from torchdoctor.serve import BatchPolicy, VirtualClock, arrival_times, load_record, run_batcher

#: Service time of the deterministic server (virtual seconds).
SERVICE = 0.01


@pytest.mark.parametrize(("rho", "n"), [(0.5, 50_000), (0.8, 100_000)])
def test_mean_wait_matches_md1_theory(rho: float, n: int) -> None:
    # M/D/1 (Pollaczek-Khinchine with deterministic service): Wq = rho * s / (2 (1 - rho)).
    # The request counts make the mean's standard error a few percent at each load (the
    # queue's correlation time grows as 1 / (1 - rho)^2).
    clock = VirtualClock()
    arrivals = arrival_times("poisson", rho / SERVICE, n, seed=0)
    trace = run_batcher(lambda b: clock.advance(SERVICE * b), arrivals, BatchPolicy(), clock)
    theory = rho * SERVICE / (2 * (1 - rho))
    assert trace.waits_s.mean() == pytest.approx(theory, rel=0.10)
    assert np.allclose(trace.latencies_s, trace.waits_s + SERVICE)


def test_latency_counts_from_the_scheduled_arrival() -> None:
    # One 1 s stall at the first request: the requests scheduled during it wait in the queue,
    # and their latency says so. A closed loop would have sent them after the stall and
    # timed them at 1 ms (coordinated omission).
    clock = VirtualClock()
    costs = iter([1.0] + [0.001] * 99)
    arrivals = np.arange(100) * 0.01
    trace = run_batcher(lambda b: clock.advance(next(costs)), arrivals, BatchPolicy(), clock)
    assert trace.latencies_s[0] == pytest.approx(1.0)
    assert trace.latencies_s[1] == pytest.approx(1.0 - 0.01 + 0.001)
    assert np.sum(trace.latencies_s > 0.1) >= 90


@pytest.mark.parametrize("kind", ["constant", "poisson", "gamma"])
def test_arrivals_come_at_the_target_rate_and_repeat_with_the_seed(kind: str) -> None:
    times = arrival_times(kind, 200.0, 20_000, seed=3)  # type: ignore[arg-type]
    assert np.all(np.diff(times) >= 0)
    assert 20_000 / times[-1] == pytest.approx(200.0, rel=0.05)
    assert np.array_equal(times, arrival_times(kind, 200.0, 20_000, seed=3))  # type: ignore[arg-type]


def test_gamma_arrivals_are_burstier_than_poisson() -> None:
    def cv2(kind: str) -> float:
        gaps = np.diff(arrival_times(kind, 100.0, 20_000, seed=1))  # type: ignore[arg-type]
        return float(gaps.var() / gaps.mean() ** 2)

    assert cv2("constant") < 1e-9
    assert cv2("poisson") == pytest.approx(1.0, rel=0.1)
    assert cv2("gamma") == pytest.approx(4.0, rel=0.2)  # shape 1/4


def test_goodput_counts_only_the_requests_within_the_bound() -> None:
    # Constant arrivals every 10 ms, service 1 ms, one 100 ms stall of the request due at
    # 100 ms: it and the five due by 150 ms (answered 9 ms apart from 201 ms on) miss a 50 ms
    # bound; the rest meet it.
    clock = VirtualClock()
    costs = iter([0.001] * 10 + [0.1] + [0.001] * 89)
    arrivals = np.arange(100) * 0.01
    trace = run_batcher(lambda b: clock.advance(next(costs)), arrivals, BatchPolicy(), clock)
    run = load_record(
        trace, arrivals="constant", rate=100.0, seed=0, policy=BatchPolicy(), simulated=True,
        bound_s=0.05,
    )  # fmt: skip
    late = int(np.sum(trace.latencies_s > 0.05))
    assert late == 6
    assert run.goodput == pytest.approx((100 - late) / trace.duration_s)
    assert run.achieved_rate == pytest.approx(100 / trace.duration_s)
