"""The block timer a Timer uses per device: CUDA events on CUDA, synced host clock elsewhere.

The CUDA event path is driven by a fake `torch.cuda` backend whose device timestamps move only
when a fake statement "runs a kernel", so the test can check the protocol on a CPU machine:
events recorded around each block on the device's current stream, the end event synchronized
before `elapsed_time` is read, milliseconds converted to seconds.
"""

from __future__ import annotations

import pytest
import torch

from fakes import FakeClock
from torchdoctor.measure import Timer
from torchdoctor.measure._device_timer import (
    CUDA_EVENT_RESOLUTION_S,
    CudaEventBlockTimer,
    HostBlockTimer,
    make_block_timer,
)


class FakeEvent:
    def __init__(self, backend: FakeCudaBackend, enable_timing: bool) -> None:
        self.backend = backend
        self.enable_timing = enable_timing
        self.recorded_ms: float | None = None
        self.synchronized = False

    def record(self, stream: object = None) -> None:
        self.backend.log.append(("record", stream))
        self.recorded_ms = self.backend.device_ms

    def synchronize(self) -> None:
        self.backend.log.append(("synchronize", self))
        self.synchronized = True

    def elapsed_time(self, end: FakeEvent) -> float:
        self.backend.log.append(("elapsed_time", end))
        # torch raises when the end event has not completed; so does the fake.
        if not end.synchronized:
            raise RuntimeError("end event not synchronized before elapsed_time")
        assert self.enable_timing and end.enable_timing
        assert self.recorded_ms is not None and end.recorded_ms is not None
        return end.recorded_ms - self.recorded_ms


class FakeCudaBackend:
    """Stands in for `torch.cuda`: events timestamped by a fake device clock (ms)."""

    def __init__(self) -> None:
        self.device_ms = 0.0
        self.log: list[tuple[str, object]] = []

    def Event(self, enable_timing: bool = False) -> FakeEvent:  # the name torch.cuda uses
        self.log.append(("Event", enable_timing))
        return FakeEvent(self, enable_timing)

    def current_stream(self, device: object = None) -> str:
        return f"stream of {device}"

    def kernel(self, ms: float) -> None:
        self.device_ms += ms


def test_event_timer_records_around_the_block_and_syncs_the_end_before_reading() -> None:
    backend = FakeCudaBackend()
    timer = CudaEventBlockTimer("cuda:1", backend)
    timer.start()
    backend.kernel(2.5)
    seconds = timer.stop()

    assert seconds == pytest.approx(2.5e-3)  # elapsed_time is in ms
    names = [name for name, _ in backend.log]
    assert names == ["Event", "record", "Event", "record", "synchronize", "elapsed_time"]
    assert [arg for name, arg in backend.log if name == "Event"] == [True, True]
    # Recorded on the stream of the device being timed, not whatever device is current.
    assert [arg for name, arg in backend.log if name == "record"] == ["stream of cuda:1"] * 2


def test_timer_on_cuda_uses_events_for_every_block_and_converts_ms() -> None:
    backend = FakeCudaBackend()
    host = FakeClock()
    block_timer = make_block_timer("cuda", cuda_backend=backend, is_cuda_available=lambda: True)
    assert isinstance(block_timer, CudaEventBlockTimer)

    def stmt() -> None:
        backend.kernel(0.2)  # 200 us of device work per call, none on the host clock

    timer = Timer(stmt, block_timer=block_timer, clock=host)
    m = timer.blocked_autorange(min_run_time=0.05)
    assert m.median == pytest.approx(0.2e-3)
    records = sum(1 for name, _ in backend.log if name == "record")
    syncs = sum(1 for name, _ in backend.log if name == "synchronize")
    reads = sum(1 for name, _ in backend.log if name == "elapsed_time")
    assert records == 2 * reads and syncs == reads  # two events and one wait per block
    assert reads >= len(m.times)
    assert timer.clock_resolution() == CUDA_EVENT_RESOLUTION_S


def test_event_timer_stop_without_start_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="before start"):
        CudaEventBlockTimer("cuda", FakeCudaBackend()).stop()


def test_device_selection() -> None:
    backend = FakeCudaBackend()
    assert isinstance(
        make_block_timer("cuda:0", cuda_backend=backend, is_cuda_available=lambda: True),
        CudaEventBlockTimer,
    )
    # No CUDA device present, a CPU device, or an injected clock/sync: host protocol.
    for device, kwargs in (
        ("cuda", {"is_cuda_available": lambda: False}),
        ("cpu", {"is_cuda_available": lambda: True}),
        (None, {"is_cuda_available": lambda: True}),
        ("cuda", {"is_cuda_available": lambda: True, "sync": lambda: None}),
        ("cuda", {"is_cuda_available": lambda: True, "clock": FakeClock()}),
    ):
        assert isinstance(make_block_timer(device, cuda_backend=backend, **kwargs), HostBlockTimer)
    assert backend.log == []


def test_cpu_timing_never_synchronizes_a_device(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: calls.append("sync"))
    monkeypatch.setattr(torch.cuda, "Event", lambda *a, **k: calls.append("event"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    Timer("x + 1", globals={"x": 1}, device="cpu").blocked_autorange(min_run_time=0.01)
    assert calls == []


def test_host_timer_syncs_before_each_clock_read() -> None:
    clock = FakeClock()
    events: list[str] = []

    def read() -> float:
        events.append("clock")
        return clock()

    timer = HostBlockTimer(read, lambda: events.append("sync"))
    timer.start()
    clock.advance(0.25)
    assert timer.stop() == pytest.approx(0.25)
    assert events == ["sync", "clock", "sync", "clock"]


@pytest.mark.requires_cuda
def test_real_cuda_events_time_a_matmul() -> None:
    a = torch.randn(1024, 1024, device="cuda")
    timer = Timer("a @ a", globals={"a": a}, device="cuda")
    assert isinstance(timer._block_timer, CudaEventBlockTimer)
    m = timer.blocked_autorange(min_run_time=0.1)
    # 2 n^3 FLOP in more than zero and less than a second per call on any CUDA GPU.
    assert 0 < m.median < 1.0


class FakeCudaQueue:
    """Stands in for `torch.cuda` seen from the host: kernels are queued asynchronously.

    A launch costs the host nothing and initializes CUDA lazily (as the first CUDA call
    does); `synchronize()` waits for the queue to drain, which moves the host clock by the
    queued work. A host clock read without it sees the launches only.
    """

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.pending_s: list[float] = []
        self.initialized = False
        self.syncs = 0

    def launch(self, seconds: float) -> None:
        self.initialized = True
        self.pending_s.append(seconds)

    def is_initialized(self) -> bool:
        return self.initialized

    def synchronize(self, device: object = None) -> None:
        self.syncs += 1
        self.clock.advance(sum(self.pending_s))
        self.pending_s.clear()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(torch.cuda, "is_initialized", self.is_initialized)
        monkeypatch.setattr(torch.cuda, "synchronize", self.synchronize)


def test_timer_without_a_device_waits_for_queued_cuda_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `torchdoctor bench 'a @ b'` with CUDA tensors names no device: the statement's kernels
    # must be inside the block that queued them, not just their launch.
    clock = FakeClock()
    cuda = FakeCudaQueue(clock)
    cuda.install(monkeypatch)
    Timer(lambda: clock.advance(1e-3), clock=clock).blocked_autorange(min_run_time=0.05)
    assert cuda.syncs == 0  # a CPU statement never initialized CUDA: nothing to wait for
    m = Timer(lambda: cuda.launch(1e-3), clock=clock).blocked_autorange(min_run_time=0.05)
    assert m.median == pytest.approx(1e-3)
    assert cuda.pending_s == []


def test_compare_without_a_device_times_queued_cuda_work(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchdoctor.measure import compare

    clock = FakeClock()
    cuda = FakeCudaQueue(clock)
    cuda.install(monkeypatch)
    c = compare(
        {"slow": lambda: cuda.launch(2e-3), "fast": lambda: cuda.launch(1e-3)},
        baseline="slow",
        clock=clock,
        budget_s=0.5,
    )
    assert c.measurements["slow"].median == pytest.approx(2e-3)
    assert c.estimates["fast"].speedup == pytest.approx(2.0)
