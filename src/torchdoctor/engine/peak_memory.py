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
    # 2: cuda_graph_pools, cuda_peak_bytes. Older records still read.
    schema_version: ClassVar[int] = 2

    #: Peak resident set size during the run (bytes); process-lifetime peak where the OS
    #: cannot reset the counter (see `cpu_peak_is_run_scoped`).
    cpu_peak_rss_bytes: int
    cpu_peak_is_run_scoped: bool
    #: Resident set size at the end of the run.
    cpu_rss_end_bytes: int | None
    cuda_max_allocated_bytes: int | None = None
    cuda_max_reserved_bytes: int | None = None
    #: Whether the run replayed CUDA graphs (the cuda_graphs knob, or torch.compile's
    #: cudagraph modes): their private memory pools hold the graphs' activations and never
    #: show in `max_memory_allocated` (an H200 run of the mlp under reduce-overhead reported
    #: 2.5 MB allocated against 71 MB eager), only in what the allocator reserved.
    cuda_graph_pools: bool = False
    #: The device peak every comparison uses (fit objective, Pareto front, --max-memory): the
    #: max allocated, or with graph pools the max reserved, which holds them.
    cuda_peak_bytes: int | None = None


class MemoryTracker:
    """Reset the peak counters at the start of a run; read them at the end.

    `cuda` is the device-memory query (`torch.cuda` by default; a fake in tests). The CUDA
    caching allocator updates its statistics on the host when it allocates, so reading them
    needs no device synchronize.
    """

    def __init__(
        self, device: torch.device, cuda: Any = None, *, graph_pools: bool = False
    ) -> None:
        self.device = device
        self.cuda = torch.cuda if cuda is None else cuda
        self.run_scoped = False
        #: the run replays CUDA graphs, whose private pools only the reserved figure holds
        self.graph_pools = graph_pools

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
        cuda_alloc = cuda_reserved = cuda_peak = None
        graphs = False
        if self.device.type == "cuda":
            cuda_alloc = int(self.cuda.max_memory_allocated(self.device))
            cuda_reserved = int(self.cuda.max_memory_reserved(self.device))
            graphs = self.graph_pools
            cuda_peak = max(cuda_alloc, cuda_reserved) if graphs else cuda_alloc
        return MemoryStats(
            cpu_peak_rss_bytes=peak,
            cpu_peak_is_run_scoped=self.run_scoped,
            cpu_rss_end_bytes=_status_kb_field("VmRSS:"),
            cuda_max_allocated_bytes=cuda_alloc,
            cuda_max_reserved_bytes=cuda_reserved,
            cuda_graph_pools=graphs,
            cuda_peak_bytes=cuda_peak,
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
