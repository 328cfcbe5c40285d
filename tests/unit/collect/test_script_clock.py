"""The script clock's CUDA events, on a CPU machine through a fake multi-GPU `torch.cuda`.

`FakeCudaDevices` models what matters: a current-device index that set_device changes, one
stream per device, events stamped by the device clock of the stream they were recorded on,
a device that runs behind the host (queued work completes only when it catches up or a
host waits on an event), `Event.query` that waits for nothing, and `elapsed_time` defined
only between completed events of one device (as torch raises).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from torchdoctor.collect.hooks import CollectConfig, Instrumentation
from torchdoctor.collect.step_recorder import CudaEventClock, StepRecorder


class FakeStream:
    def __init__(self, device: int) -> None:
        self.device = device


class FakeEvent:
    def __init__(self, cuda: FakeCudaDevices) -> None:
        self.cuda = cuda
        self.device: int | None = None
        self.ms: float | None = None
        self.done = False

    def record(self, stream: FakeStream | None = None) -> None:
        stream = stream or self.cuda.current_stream()
        self.device, self.ms = stream.device, self.cuda.device_ms[stream.device]

    def query(self) -> bool:
        assert self.device is not None and self.ms is not None
        return self.cuda.done_ms[self.device] >= self.ms

    def synchronize(self) -> None:
        # The host blocks until the device reaches the event: a sync a trace would show.
        assert self.device is not None and self.ms is not None
        self.cuda.waits += 1
        self.cuda.done_ms[self.device] = max(self.cuda.done_ms[self.device], self.ms)

    def elapsed_time(self, end: FakeEvent) -> float:
        if not end.query():
            raise RuntimeError("end event not completed")
        if self.device != end.device:
            raise RuntimeError("events recorded on different devices")
        assert self.ms is not None and end.ms is not None
        return end.ms - self.ms


class FakeCudaDevices:
    def __init__(self, count: int = 2) -> None:
        self.current = 0
        self.device_ms = [0.0] * count  # work queued on each device, in device ms
        self.done_ms = [0.0] * count  # how far each device has run
        self.waits = 0  # host waits on an event

    def set_device(self, index: int) -> None:
        self.current = index

    def current_device(self) -> int:
        return self.current

    def current_stream(self, device: Any = None) -> FakeStream:
        if device is None:
            return FakeStream(self.current)
        return FakeStream(device.index if isinstance(device, torch.device) else int(device))

    def Event(self, enable_timing: bool = False) -> FakeEvent:  # the name torch.cuda uses
        assert enable_timing
        return FakeEvent(self)

    def kernel(self, device: int, ms: float) -> None:
        self.device_ms[device] += ms

    def catch_up(self, device: int) -> None:
        self.done_ms[device] = self.device_ms[device]


def test_events_time_the_scripts_device_not_the_current_one() -> None:
    # A DDP rank on cuda:1 that never called set_device: cuda:0 stays current and idle.
    cuda = FakeCudaDevices()
    clock = CudaEventClock(torch.device("cuda", 1), cuda=cuda)
    start = clock.mark()
    cuda.kernel(1, 40.0)  # the script's step runs on cuda:1
    end = clock.mark()
    assert clock.seconds(start, end) == pytest.approx(0.040)


def test_a_step_spanning_the_device_change_falls_back_to_the_host_clock() -> None:
    cuda = FakeCudaDevices()
    clock = CudaEventClock(None, cuda=cuda)
    start = clock.mark()  # before the script's first copy: recorded on the current cuda:0
    clock.use_device(torch.device("cuda", 1))
    end = clock.mark()
    # The fake raises on a cross-device elapsed_time, as torch does: the host clock answers.
    assert 0.0 <= clock.seconds(start, end) < 1.0


def test_recorder_phases_on_cuda_1() -> None:
    cuda = FakeCudaDevices()
    rec = StepRecorder(CudaEventClock(torch.device("cuda", 1), cuda=cuda))
    rec.begin("forward")
    cuda.kernel(1, 10.0)
    rec.end("forward")
    rec.optimizer_step_end()
    rec.finish()
    assert rec.steps[0].phases["forward"] == pytest.approx(0.010)


def _step(rec: StepRecorder, cuda: FakeCudaDevices, ms: float) -> None:
    rec.begin("forward")
    cuda.kernel(0, ms)
    rec.end("forward")
    rec.optimizer_step_end()


def test_the_clock_never_waits_for_the_device_inside_the_steps() -> None:
    # A GPU-bound script: the device runs behind the host. A wait on an event mid-run lands
    # inside the next step, where the trace charges it to the job as a sync.
    cuda = FakeCudaDevices()
    rec = StepRecorder(CudaEventClock(torch.device("cuda", 0), cuda=cuda))
    for _ in range(4):
        _step(rec, cuda, 10.0)
    assert cuda.waits == 0 and rec.steps == []
    cuda.catch_up(0)  # the device finishes what was queued: those steps read without a wait
    _step(rec, cuda, 10.0)
    assert cuda.waits == 0 and len(rec.steps) == 4
    rec.finish()  # the script ended: the last step is read, waiting once
    assert [s.index for s in rec.steps] == [0, 1, 2, 3, 4]
    assert all(s.phases["forward"] == pytest.approx(0.010) for s in rec.steps)
    assert cuda.waits == 1


def test_first_copy_to_a_gpu_tells_the_clock_its_device() -> None:
    cuda = FakeCudaDevices()
    clock = CudaEventClock(None, cuda=cuda)
    # On this CPU build the copy itself fails, after the hook has seen its destination.
    with (
        Instrumentation(CollectConfig(profile_steps=0), clock=clock),
        pytest.raises((AssertionError, RuntimeError)),
    ):
        torch.ones(2).to("cuda:1")
    assert clock.device == torch.device("cuda", 1)


class SyncingWindow:
    """A profile window whose stop flushes the device the way torch.profiler's does: it looks
    up torch.cuda.synchronize at call time, so it reaches the patched, counting one."""

    def __init__(self) -> None:
        self.stops = 0

    def on_install(self) -> None:
        return None

    def on_step_end(self, closed: int) -> None:
        if closed == 2:
            self.stop()

    def stop(self) -> None:
        self.stops += 1
        torch.cuda.synchronize()


def test_the_profilers_own_stop_is_not_counted_as_a_script_sync(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)  # no GPU here
    inst = Instrumentation(CollectConfig(profile_steps=0))
    window = SyncingWindow()
    inst.window = window  # type: ignore[assignment]
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with inst:
        for _ in range(4):
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
    assert window.stops >= 2  # at step 2 and at uninstall
    assert all(counts.get("cuda_synchronize", 0) == 0 for counts in inst.sync_counts)
