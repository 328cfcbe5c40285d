"""Throughput-mode step times: host clock on CPU, CUDA events on a GPU (driven by a fake)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from torchdoctor.engine import prepare
from torchdoctor.engine.step_marks import CudaEventStepMarks, HostStepMarks, make_step_marks
from torchdoctor.knobs import Recipe
from torchdoctor.workloads import get_workload


class FakeEvent:
    def __init__(self, backend: FakeCuda) -> None:
        self.backend = backend
        self.at_ms: float | None = None
        self.synced = False

    def record(self, stream: object) -> None:
        self.backend.log.append(f"record on {stream}")
        # Each step keeps the fake device busy 4 ms longer than the one before.
        self.backend.records += 1
        self.backend.device_ms += 4.0 * self.backend.records
        self.at_ms = self.backend.device_ms

    def synchronize(self) -> None:
        self.backend.log.append("synchronize")
        self.synced = True

    def elapsed_time(self, end: FakeEvent) -> float:
        if not self.backend.events[-1].synced:
            raise RuntimeError("read before the last event completed")
        assert self.at_ms is not None and end.at_ms is not None
        return end.at_ms - self.at_ms


class FakeCuda:
    def __init__(self) -> None:
        self.device_ms = 0.0
        self.records = 0
        self.log: list[str] = []
        self.events: list[FakeEvent] = []

    def Event(self, enable_timing: bool = False) -> FakeEvent:  # the name torch.cuda uses
        assert enable_timing
        event = FakeEvent(self)
        self.events.append(event)
        return event

    def current_stream(self, device: Any) -> str:
        return str(device)


def test_event_marks_give_each_step_its_device_time_with_one_wait_per_chunk() -> None:
    fake = FakeCuda()
    marks = CudaEventStepMarks(torch.device("cuda", 0), backend=fake)
    workload = get_workload("mlp", features=8, hidden=16, layers=1, rows=256, batch_size=16)
    with prepare(workload, Recipe(), device="cpu") as s:
        s.step_marks = marks
        steps = s.run_steps(3, measure_phases=False)
    # Boundaries at 4, 12, 24, 40 ms: the steps took 8, 12 and 16 ms of device time.
    assert [st.total_s for st in steps] == pytest.approx([8e-3, 12e-3, 16e-3])
    assert fake.log == ["record on cuda:0"] * 4 + ["synchronize"]


def test_host_marks_are_clock_differences() -> None:
    readings = iter([1.0, 1.5, 3.0])
    marks = HostStepMarks(lambda: next(readings))
    taken = [marks.mark() for _ in range(3)]
    assert marks.durations(taken) == [0.5, 1.5]
    assert marks.needs_final_sync


def test_device_picks_the_marks() -> None:
    assert isinstance(make_step_marks(torch.device("cpu"), float), HostStepMarks)
    assert isinstance(
        make_step_marks(torch.device("cuda"), float, is_cuda_available=lambda: False),
        HostStepMarks,
    )
    assert isinstance(
        make_step_marks(torch.device("cuda"), float, is_cuda_available=lambda: True),
        CudaEventStepMarks,
    )
