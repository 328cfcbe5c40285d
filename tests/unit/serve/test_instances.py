"""The instances x threads curve: its grid, its points from instances' runs, its knee and early
stop on a modelled host, and the pool's protocol run on threads (no process started)."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

import pytest

from torchdoctor.core.errors import MeasureError
from torchdoctor.serve.instances import (
    InstancePool,
    InstanceRun,
    instance_curve,
    instance_grid,
    instance_point,
)


def test_the_grid_doubles_instances_over_the_cores_left_to_each() -> None:
    assert instance_grid(1) == [(1, 1)]
    assert instance_grid(2) == [(1, 2), (2, 1)]
    assert instance_grid(6) == [(1, 6), (2, 3), (4, 1), (6, 1)]
    assert all(i * t <= 16 for i, t in instance_grid(16))
    with pytest.raises(MeasureError):
        instance_grid(0)


def test_a_point_sums_the_instances_throughput_and_pools_their_calls() -> None:
    runs = [
        InstanceRun([0.01] * 99 + [0.05], start_s=0.0, stop_s=1.04),
        InstanceRun([0.02] * 100, start_s=0.5, stop_s=2.5),
    ]
    point = instance_point(runs, batch_size=4, instances=2, threads=1)
    assert point.samples_per_s == pytest.approx(4 * 100 / 1.04 + 4 * 100 / 2.0)
    assert point.p50_s == pytest.approx(0.015, abs=0.006) and point.p99_s >= 0.02
    assert (point.instances, point.threads, point.batch_size) == (2, 1, 4)
    with pytest.raises(MeasureError, match="no calls"):
        instance_point([InstanceRun([], 0.0, 1.0)], 1, 1, 1)


def modelled_host(cores: int, serial: float, contention: float = 0.1):  # type: ignore[no-untyped-def]
    """Instances that share `cores`: a call's time follows Amdahl's law in its threads
    (`serial` of it does not parallelize), so small models gain from instances, and each
    other instance slows it by `contention` (shared caches and memory bandwidth)."""
    asked: list[tuple[int, int]] = []

    def run_point(instances: int, threads: int) -> list[InstanceRun]:
        asked.append((instances, threads))
        assert instances * threads <= cores
        call = 0.001 * (serial + (1 - serial) / threads) * (1 + contention * (instances - 1))
        return [InstanceRun([call] * 50, 0.0, 50 * call) for _ in range(instances)]

    return run_point, asked


def test_a_serial_model_gains_from_instances_and_the_knee_is_marked() -> None:
    run_point, asked = modelled_host(16, serial=0.5)
    curve = instance_curve(run_point, batch_size=1, cores=16)
    assert curve.axis == "instances" and asked == instance_grid(16)
    rates = [p.samples_per_s for p in curve.points]
    assert rates[3] > 3 * rates[0]
    # The knee: where doubling the instances stops paying (4 -> 8 gains 27%, 8 -> 16 2%).
    assert curve.knee_index is not None and curve.points[curve.knee_index].instances in (4, 8)
    assert not curve.stopped_early


def test_a_parallel_model_stops_early_once_instances_gain_under_five_percent() -> None:
    said: list[str] = []
    # Threads scale perfectly and instances do not contend: every point is as fast.
    run_point, asked = modelled_host(16, serial=0.0, contention=0.0)
    curve = instance_curve(run_point, batch_size=1, cores=16, progress=said.append)
    assert curve.stopped_early and len(asked) == 3 < len(instance_grid(16))
    assert said[0] == "1 instances x 16 threads"


class ThreadContext:
    """A multiprocessing context whose processes are threads: the pool's protocol, in-process."""

    Pipe = staticmethod(multiprocessing.Pipe)
    Event = threading.Event

    class Process(threading.Thread):
        def terminate(self) -> None:  # a thread cannot be killed; the pool's stop ends it
            pass


TINY = """
import torch
def make_model():
    return torch.nn.Linear(8, 4), torch.randn(1, 8)
"""
FAILS = """
def make_model():
    raise RuntimeError("weights missing")
"""


def _spec(tmp_path: Path, text: str) -> str:
    path = tmp_path / "model.py"
    path.write_text(text)
    return f"{path}:make_model"


def test_the_pool_serves_points_on_command_and_ends_its_instances(tmp_path: Path) -> None:
    before = threading.active_count()
    with InstancePool(_spec(tmp_path, TINY), 2, calls=5, context=ThreadContext()) as pool:
        curve = instance_curve(pool.run, batch_size=1, cores=2)
        with pytest.raises(MeasureError, match="3 instances asked"):
            pool.run(3, 1)
    assert [(p.instances, p.threads) for p in curve.points] == [(1, 2), (2, 1)]
    assert all(p.samples_per_s > 0 and p.p99_s >= p.p50_s > 0 for p in curve.points)
    assert threading.active_count() == before  # every instance ended


def test_an_instance_that_cannot_build_its_model_fails_the_pool(tmp_path: Path) -> None:
    before = threading.active_count()
    with (
        pytest.raises(MeasureError, match=r"failed: WorkloadError: .*weights missing"),
        InstancePool(_spec(tmp_path, FAILS), 2, context=ThreadContext()) as pool,
    ):
        pool.run(2, 1)
    assert threading.active_count() == before
