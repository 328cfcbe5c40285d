"""Block timers: how the seconds of one timed block are obtained on each kind of device.

- `HostBlockTimer` (CPU, MPS, XPU, or any injected clock): synchronize the device, read the
  host clock; the same protocol torch.utils.benchmark uses.
- `CudaEventBlockTimer` (CUDA, and ROCm builds, which expose HIP devices through the same
  `torch.cuda` API): record a `torch.cuda.Event(enable_timing=True)` on the device's current
  stream before and after the block, wait on the end event (`Event.synchronize()`, i.e.
  cudaEventSynchronize), then read `start.elapsed_time(end)`, which CUDA reports in
  milliseconds with about 0.5 us resolution (PyTorch `torch.cuda.Event` docs; CUDA C
  Programming Guide, "Events"). The device's own timestamps measure the work queued between
  the two events and exclude whatever the stream was still doing before the block started.

`make_block_timer(device)` picks one. The CUDA backend (the object holding `Event` and
`current_stream`) and the "is CUDA available" query are injectable, so tests drive the event
path with fakes on a machine without a GPU (DESIGN.md convention 3).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from torchdoctor.measure._sync import device_type, make_sync

#: CUDA event timestamps have "a resolution of around 0.5 microseconds" (CUDA C Programming
#: Guide, section Events / cudaEventElapsedTime).
CUDA_EVENT_RESOLUTION_S: Final = 0.5e-6
_MS_PER_S: Final = 1000.0


class BlockTimer(Protocol):
    """Times one block: `start()` before its first call, `stop()` after its last one."""

    #: The smallest duration this timer can tell from zero (seconds); 0 when unknown.
    def resolution(self) -> float: ...
    def start(self) -> None: ...
    def stop(self) -> float:
        """Seconds since `start()`."""
        ...


class HostBlockTimer:
    """Synchronize the device, then read the host clock, at both ends of a block."""

    def __init__(self, clock: Callable[[], float], sync: Callable[[], None]) -> None:
        self._clock = clock
        self._sync = sync
        self._t0 = 0.0

    def resolution(self, reads: int = 50) -> float:
        """Smallest positive step between consecutive clock reads (0 if the clock is frozen)."""
        steps = []
        for _ in range(reads):
            a = self._clock()
            b = self._clock()
            if b > a:
                steps.append(b - a)
        return min(steps) if steps else 0.0

    def start(self) -> None:
        # Sync point: work queued before the block must not be counted in it.
        self._sync()
        self._t0 = self._clock()

    def stop(self) -> float:
        # Sync point: the block's queued device work must finish before the clock is read.
        self._sync()
        return self._clock() - self._t0


class CudaEventBlockTimer:
    """Time blocks with CUDA events recorded on the device's current stream.

    `backend` is `torch.cuda` by default; a fake needs `Event(enable_timing=...)` (objects
    with `record(stream)`, `synchronize()`, `elapsed_time(end) -> ms`) and
    `current_stream(device)`.
    """

    def __init__(self, device: str = "cuda", backend: Any = None) -> None:
        if backend is None:
            import torch

            backend = torch.cuda
        self._backend = backend
        self._device = device
        self._start_event: Any = None

    def resolution(self) -> float:
        return CUDA_EVENT_RESOLUTION_S

    def _record(self) -> Any:
        event = self._backend.Event(enable_timing=True)
        # The stream of *this* device: an event may only be recorded on a stream of the
        # device it belongs to, and "cuda:1" is not necessarily the current device.
        event.record(self._backend.current_stream(self._device))
        return event

    def start(self) -> None:
        self._start_event = self._record()

    def stop(self) -> float:
        if self._start_event is None:
            raise RuntimeError("CudaEventBlockTimer.stop() called before start()")
        end = self._record()
        # Sync point: elapsed_time is only defined once the end event has completed;
        # waiting on this one event blocks the host no longer than needed.
        end.synchronize()
        elapsed_ms = float(self._start_event.elapsed_time(end))
        self._start_event = None
        return elapsed_ms / _MS_PER_S


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def make_block_timer(
    device: Any = None,
    *,
    clock: Callable[[], float] | None = None,
    sync: Callable[[], None] | None = None,
    cuda_backend: Any = None,
    is_cuda_available: Callable[[], bool] = cuda_available,
) -> BlockTimer:
    """CUDA events for a CUDA (or ROCm) device that is present; host clock + sync otherwise.

    An explicit `clock` or `sync` means the caller wants the host-clock protocol (a fake
    clock, or a device the caller synchronizes itself), so events are not used then.
    """
    if clock is None and sync is None and device_type(device) == "cuda" and is_cuda_available():
        return CudaEventBlockTimer(str(device), cuda_backend)
    return HostBlockTimer(clock or time.perf_counter, sync or make_sync(device))
