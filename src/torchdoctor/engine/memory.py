"""Peak memory of a run: host resident high-water mark and device allocator statistics."""

from __future__ import annotations

import contextlib
import resource
import sys
from pathlib import Path
from typing import Any, ClassVar

import torch

from torchdoctor.core.records import Record

# Linux: writing "5" to /proc/self/clear_refs resets the VmHWM (peak RSS) counter, so the
# high-water mark covers the run rather than the whole process life (proc(5), clear_refs).
_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


class MemoryStats(Record):
    """Memory the run used. Host figures cover this process, not DataLoader workers."""

    schema_name: ClassVar[str] = "memory"

    #: Peak resident set size during the run (bytes); process-lifetime peak where the OS
    #: cannot reset the counter (see `cpu_peak_is_run_scoped`).
    cpu_peak_rss_bytes: int
    cpu_peak_is_run_scoped: bool
    #: Resident set size at the end of the run.
    cpu_rss_end_bytes: int | None
    cuda_max_allocated_bytes: int | None = None
    cuda_max_reserved_bytes: int | None = None


class MemoryTracker:
    """Reset the peak counters at the start of a run; read them at the end.

    `cuda` is the device-memory query (`torch.cuda` by default; a fake in tests). The CUDA
    caching allocator updates its statistics on the host when it allocates, so reading them
    needs no device synchronize.
    """

    def __init__(self, device: torch.device, cuda: Any = None) -> None:
        self.device = device
        self.cuda = torch.cuda if cuda is None else cuda
        self.run_scoped = False

    def start(self) -> None:
        with contextlib.suppress(OSError):
            _CLEAR_REFS.write_text("5")
            self.run_scoped = True
        if self.device.type == "cuda":
            self.cuda.reset_peak_memory_stats(self.device)

    def read(self) -> MemoryStats:
        peak = _status_kb_field("VmHWM:")
        if peak is None:
            # ru_maxrss is in KiB on Linux, in bytes on macOS (getrusage(2)).
            scale = 1 if sys.platform == "darwin" else 1024
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
            self.run_scoped = False
        cuda_alloc = cuda_reserved = None
        if self.device.type == "cuda":
            cuda_alloc = int(self.cuda.max_memory_allocated(self.device))
            cuda_reserved = int(self.cuda.max_memory_reserved(self.device))
        return MemoryStats(
            cpu_peak_rss_bytes=peak,
            cpu_peak_is_run_scoped=self.run_scoped,
            cpu_rss_end_bytes=_status_kb_field("VmRSS:"),
            cuda_max_allocated_bytes=cuda_alloc,
            cuda_max_reserved_bytes=cuda_reserved,
        )


def _status_kb_field(name: str) -> int | None:
    """A `kB` field of /proc/self/status in bytes (None off Linux)."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(name):
                return int(line.split()[1]) * 1024  # reported in kB
    except (OSError, ValueError, IndexError):
        return None
    return None
