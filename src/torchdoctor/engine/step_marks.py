"""Step boundaries in throughput mode: timestamps taken without stalling the device.

Throughput mode must not synchronize the device after every step (that would serialize host
and device and change the very throughput being measured), yet each step still needs its own
duration. On CPU the host clock is the truth. On CUDA (and ROCm) a host clock read after an
unsynchronized step measures how long the *launches* took, not the step; instead a
`torch.cuda.Event(enable_timing=True)` is recorded on the device's current stream at each
boundary, and after the chunk's last event has been synchronized, `elapsed_time` between
consecutive events (milliseconds) gives each step's device-side wall time, stalls waiting for
the host included (PyTorch `torch.cuda.Event` docs).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from torchdoctor.core.tool_syncs import tool_sync_range


class StepMarks(Protocol):
    #: Whether the device must be synchronized before the chunk's last mark is taken.
    needs_final_sync: bool

    def mark(self) -> Any:
        """A boundary between steps (before the first, after each)."""
        ...

    def durations(self, marks: Sequence[Any]) -> list[float]:
        """Seconds between consecutive marks; may wait for the device to reach the last."""
        ...


class HostStepMarks:
    """Host clock readings; the caller synchronizes the device before the last mark."""

    needs_final_sync = True

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock

    def mark(self) -> float:
        return self.clock()

    def durations(self, marks: Sequence[Any]) -> list[float]:
        return [float(b) - float(a) for a, b in itertools.pairwise(marks)]


class CudaEventStepMarks:
    """CUDA events on the device's current stream; `durations` waits on the last one only."""

    needs_final_sync = False

    def __init__(self, device: torch.device, backend: Any = None) -> None:
        self.device = device
        self.backend = torch.cuda if backend is None else backend

    def mark(self) -> Any:
        event = self.backend.Event(enable_timing=True)
        event.record(self.backend.current_stream(self.device))
        return event

    def durations(self, marks: Sequence[Any]) -> list[float]:
        if not marks:
            return []
        # Sync point: events complete in stream order, so once the last one has, all have,
        # and every elapsed_time below is defined.
        with tool_sync_range():
            marks[-1].synchronize()
        return [float(a.elapsed_time(b)) / 1000.0 for a, b in itertools.pairwise(marks)]


def make_step_marks(
    device: torch.device,
    clock: Callable[[], float],
    *,
    is_cuda_available: Callable[[], bool] = torch.cuda.is_available,
) -> StepMarks:
    if device.type == "cuda" and is_cuda_available():
        return CudaEventStepMarks(device)
    return HostStepMarks(clock)
