"""Curves: the knee, the early stop, threads set and reported."""

from __future__ import annotations

import pytest

from torchdoctor.serve.curves import batch_curve, doubling, knee_index, thread_curve


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _saturating(clock: Clock, capacity: float, overhead: float):  # type: ignore[no-untyped-def]
    """A batch of b costs overhead + b / capacity: throughput rises, then flattens."""

    def request_for(b: int):  # type: ignore[no-untyped-def]
        def call() -> None:
            clock.now += overhead + b / capacity

        return call

    return request_for


def test_knee_of_a_saturating_curve_is_where_it_bends() -> None:
    xs = [0, 1, 2, 3, 4, 5, 6]
    ys = [10, 19, 34, 52, 62, 64, 65]
    assert knee_index(xs, ys) == 4
    assert knee_index([0, 1], [1, 2]) is None  # too short
    assert knee_index([0, 1, 2], [5, 5, 5]) is None  # flat: no knee


def test_batch_curve_stops_once_larger_batches_gain_under_five_percent() -> None:
    clock = Clock()
    curve = batch_curve(_saturating(clock, 10_000.0, 0.001), doubling(1024), calls=10, clock=clock)
    sizes = [p.batch_size for p in curve.points]
    assert curve.stopped_early and sizes[-1] < 1024
    rates = [p.samples_per_s for p in curve.points]
    assert rates[-1] < rates[-2] * 1.05 and rates[-2] < rates[-3] * 1.05
    assert curve.knee_index is not None and 0 < curve.knee_index < len(sizes) - 1
    # Every request in a batch waits for the whole batch.
    assert curve.points[-1].p50_s == pytest.approx(0.001 + sizes[-1] / 10_000.0)


def test_thread_curve_sets_each_count_and_records_it() -> None:
    clock = Clock()
    state = {"threads": 1}
    set_to: list[int] = []

    def set_threads(n: int) -> None:
        set_to.append(n)
        state["threads"] = n

    def call() -> None:
        clock.now += 0.001 / state["threads"]

    curve = thread_curve(call, 1, doubling(4), set_threads, calls=5, clock=clock)
    assert set_to == [1, 2, 4] and [p.threads for p in curve.points] == [1, 2, 4]
    assert curve.points[-1].samples_per_s == pytest.approx(4 * curve.points[0].samples_per_s)


def test_doubling_ends_at_the_largest() -> None:
    assert doubling(1) == [1] and doubling(8) == [1, 2, 4, 8] and doubling(6) == [1, 2, 4, 6]
