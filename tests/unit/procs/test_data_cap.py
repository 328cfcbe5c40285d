"""The CPU's real memory cap (procs/_datacap.py): a capped interpreter refuses an allocation
over the cap and grants one under it, and PyTorch's refusal reads as out of memory."""

from __future__ import annotations

import subprocess
import sys

import pytest

from torchdoctor.procs import FailureKind, classify_exception

#: A bare interpreter (no torch) caps its own data size 16 MiB above where it stands, then
#: asks for 8 MiB (under) and 64 MiB (over). A bytearray that large is mapped by glibc's malloc
#: (over the fixed mmap threshold), the mapping RLIMIT_DATA counts.
_CAPPED = """
from torchdoctor.procs._datacap import cap_data_size, data_size_bytes, fix_mmap_threshold
assert fix_mmap_threshold()
cap_data_size(data_size_bytes() + 16 * 2**20)
under = bytearray(8 * 2**20)
print("under granted")
try:
    over = bytearray(64 * 2**20)
except MemoryError:
    print("over refused")
else:
    print("over granted")
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="RLIMIT_DATA counts mmaps on Linux"
)
def test_a_capped_process_refuses_an_allocation_over_the_cap_and_grants_one_under() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CAPPED], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split("\n")[:2] == ["under granted", "over refused"]


def test_pytorchs_cpu_allocator_refusal_is_out_of_memory() -> None:
    # What torch 2.13 raised for a 64 MiB tensor in a process capped 16 MiB above its size.
    message = (
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
        "memory: you tried to allocate 67108864 bytes. Error code 12 (Cannot allocate memory)"
    )
    assert classify_exception(RuntimeError(message)) is FailureKind.OOM
    assert classify_exception(RuntimeError("shape mismatch")) is FailureKind.ERROR
