"""The operating system's side of a real memory cap on the CPU: the data size, its limit, and
glibc's mmap threshold (procs/_capped.py runs a training step under them). Imports no torch,
so a test can cap a bare interpreter.
"""

from __future__ import annotations

import ctypes
import resource
import sys
from pathlib import Path
from typing import Final

from torchdoctor.core.errors import UsageError

#: glibc's mmap threshold, fixed at the value its dynamic threshold starts from (mallopt(3):
#: "the default value is set to 128*1024").
MMAP_THRESHOLD_BYTES: Final = 128 * 1024
#: malloc.h's parameter number for the threshold.
_M_MMAP_THRESHOLD: Final = -3

_STATUS = Path("/proc/self/status")


def data_size_bytes() -> int | None:
    """This process's data size (`VmData`, what RLIMIT_DATA bounds), or None off Linux."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024  # in kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mmap threshold (which disables its dynamic adjustment); False off glibc."""
    try:
        # The process's own symbols: the C library it runs on (glibc's mallopt; musl's is a
        # no-op that returns 0).
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))


def cap_data_size(limit_bytes: int) -> tuple[int, int]:
    """Set this process's soft RLIMIT_DATA to `limit_bytes` (never above the hard limit, never
    below 0); the limits it replaces, to restore with `resource.setrlimit`."""
    old = resource.getrlimit(resource.RLIMIT_DATA)
    hard = old[1]
    soft = max(0, limit_bytes)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    return old


def check_supported() -> None:
    """Raise UsageError where a data-size cap cannot make a real out-of-memory edge."""
    if not sys.platform.startswith("linux") or data_size_bytes() is None:
        raise UsageError(
            "the real out-of-memory edge needs Linux: it caps the data size (RLIMIT_DATA), "
            "which counts every private mapping since Linux 4.7",
            hint="run it on Linux, or on a GPU, whose allocator's cap makes the edge",
        )
