"""One arm on the GPU at a time: the idle arms are parked off the device.

An A/B runs two live processes of one job on one GPU in turns (tune/arms.py), a new arm is
started while the best one lives, and the quality reference starts a third. Each process's
trained state (weights, gradients, optimizer state) stays on the device while it waits, and
handing cached blocks back (`empty_cache`) frees none of it: with two or three resident, a job
using more than about half the GPU could not be tuned at all, every candidate out of memory,
and the batch search found its edge at half the real one.

`DeviceTurns` is shared by every arm of one source (`ArmSource.turns`). Before an arm runs
steps it `take`s the device: the arm that held it is parked (the `Park` request: its state
goes to pinned host memory and its freed blocks back to the device, `torchdoctor.engine.park`),
and the arm itself is unparked if it was parked. Before a new process starts (a new arm, a
reference run) the device is `clear`ed: the resident arm is parked. Switching is its own
request, between chunks, so its cost is in no step's time; it is measured on each arm
(`Arm.switch_s`, `Arm.switches`). The first step after a switch refills the caching
allocator, which `Arm.scored_rows` already leaves unscored.

An arm that cannot be parked (its steps replay CUDA graphs, whose pools and captured
addresses cannot move) stays resident and says why (`pinned`); the other arm then runs beside
it, as every arm did before parking. That is the one case where two arms share the device,
and a trial that runs out of memory then says so (`beside_pinned`). On a CPU no arm joins the
turns, and nothing here runs.

Parking moves what an optimizer steps. It cannot move a plain tensor the job keeps, a frozen
base model (LoRA) or a teacher no optimizer owns, a KV cache, a CUDA graph's pool, cuBLAS's
workspaces, the context: a job holding 55% of an H200 in a plain tensor still held 77.7 GiB
parked, and the quality reference started beside it ran out of memory though the job runs
alone without trouble (the H200 records of 2026-11-28). So whether two processes of a job
can live on the device at once is decided from what the first park measured
(`decide_sharing`, a `DeviceSharing` record): what parking moved, what stayed (the parked
process's tensors, and the device's own count of what every process holds, contexts
included), and the next process's peak, against the device's capacity. When they cannot,
the study runs its arms *in turns* (`tune/whole_runs.py`): one process on the device at a
time, whole runs in ABBA order, a pair of adjacent runs the unit of the A/B; and no quality
reference is started beside a resident arm (the arm is ended first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Final, Literal, Protocol

from torchdoctor.core.records import Record
from torchdoctor.procs import Parked

#: How a study's arms share one GPU (`DeviceSharing.mode`): "interleaved", two live
#: processes with the idle one parked, chunk by chunk; "turns", one process on the device at
#: a time, whole runs one after the other.
SharingMode = Literal["interleaved", "turns"]

#: Allowance over a process's measured peak (`torch.cuda.max_memory_allocated`, the live
#: tensors) for what its caching allocator reserves beyond them: blocks are rounded up (to
#: 512 bytes, large ones to 2 MiB) and a large request splits a cached segment rather than
#: fitting it exactly (PyTorch's "CUDA semantics: memory management" notes). A tenth of the
#: peak: the H200's mlp run reserved 73.4 MB for 71.3 MB allocated (3%), and a job whose peak
#: is a tenth or less short of the device's free memory is one a knob's extra workspace
#: (cuDNN's benchmark mode tries algorithms with scratch buffers) would push over.
PEAK_SLACK: Final = 0.10


class DeviceSharing(Record):
    """Whether a study's arms interleave on the GPU with parking or run in turns, and the
    bytes the decision rests on (`decide_sharing`; module docstring).

    `moved_bytes`: what parking the first arm moved to the host; `stayed_bytes`: the
    tensors it still held on the device; `held_bytes`: what the device's own count
    (`cudaMemGetInfo`) said every process held then (the parked arm's tensors, contexts,
    other tenants); `context_bytes`: the part of that a new process is assumed to take
    again (held less the parked arm's tensors: its CUDA context, workspaces, at most);
    `peak_bytes`: the next process's peak (the measured arm's); `capacity_bytes`: the device.
    """

    schema_name: ClassVar[str] = "device_sharing"
    schema_version: ClassVar[int] = 1

    mode: SharingMode
    reason: str
    capacity_bytes: int = 0
    moved_bytes: int = 0
    stayed_bytes: int = 0
    held_bytes: int = 0
    context_bytes: int = 0
    peak_bytes: int = 0
    #: the mode was the user's choice, not measured
    forced: bool = False

    @property
    def in_turns(self) -> bool:
        return self.mode == "turns"

    def note(self) -> str:
        """One line for the result's notes: the mode and why."""
        how = "one process on the GPU at a time, in turns" if self.in_turns else "interleaved"
        return f"arms ran {how}: {self.reason}"

    def out_of_memory(self) -> str:
        """What an out-of-memory error beside a parked arm means (the true reason)."""
        return (
            f"the job fits the GPU alone, not twice: parking moved {size(self.moved_bytes)}, "
            f"{size(self.stayed_bytes)} stayed; arms run in turns"
        )


def size(nbytes: int) -> str:
    """Bytes in the largest binary unit they fill: '77.7 GiB', '512.0 KiB'."""
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if abs(nbytes) >= 1 << shift:
            return f"{nbytes / (1 << shift):.1f} {unit}"
    return f"{nbytes} B"


def decide_sharing(parked: Parked, peak_bytes: int) -> DeviceSharing:
    """Whether a second process of the job fits beside `parked` (the reply of the first
    park of a measured arm, whose steady peak was `peak_bytes`).

    It fits when what the device holds now, plus what the new process takes beyond its
    tensors (as much as the parked one holds beyond its own: the context, at most), plus
    its peak and `PEAK_SLACK`, is within the capacity. A reply that read no device (a
    worker that reports no memory) keeps the arms interleaved, as before this decision.
    """
    capacity = parked.total_bytes
    moved, stayed = parked.moved_bytes, parked.left_bytes
    if capacity <= 0:
        return DeviceSharing(
            mode="interleaved",
            reason="the device's memory was not read: the arms interleave with parking",
            moved_bytes=moved,
            stayed_bytes=stayed,
            peak_bytes=peak_bytes,
        )
    held = max(0, capacity - parked.free_bytes)
    context = max(0, held - stayed)
    need = held + context + int(peak_bytes * (1.0 + PEAK_SLACK))
    figures = (
        f"parking moved {size(moved)}, {size(stayed)} stayed ({size(held)} of the device held "
        f"in all); a second process's peak of {size(peak_bytes)} beside it needs "
        f"{size(need)} of {size(capacity)}"
    )
    if need <= capacity:
        mode: SharingMode = "interleaved"
        reason = f"two processes fit: {figures}"
    else:
        mode, reason = "turns", f"the job fits alone, not twice: {figures}"
    return DeviceSharing(
        mode=mode,
        reason=reason,
        capacity_bytes=capacity,
        moved_bytes=moved,
        stayed_bytes=stayed,
        held_bytes=held,
        context_bytes=context,
        peak_bytes=peak_bytes,
    )


def forced_sharing(mode: SharingMode) -> DeviceSharing:
    """The mode a user asked for (`TuneSettings.device_sharing`), with no measurement."""
    return DeviceSharing(mode=mode, reason=f"{mode} as asked", forced=True)


#: Seconds the next worker request may take (`tune.arms.Timeout`).
Timeout = Callable[[], float]


class Arm(Protocol):
    """What the turns need of an arm (`tune.arms.Arm`)."""

    def switch(self, *, park: bool, timeout: Timeout) -> Parked:
        """Park or unpark the arm's worker; its reply."""
        ...


class DeviceTurns:
    """Which arm of a source holds the GPU (module docstring)."""

    def __init__(self) -> None:
        self.resident: Arm | None = None
        #: arms that are parked now (by identity)
        self._parked: dict[int, Arm] = {}
        #: arms that could not be parked, and why: they stay on the device
        self.pinned: dict[int, str] = {}

    def take(self, arm: Arm, *, timeout: Timeout) -> None:
        """Give the device to `arm`: park the resident arm, unpark `arm` if parked."""
        if self.resident is arm:
            return
        self.clear(timeout=timeout)
        if self._parked.pop(id(arm), None) is not None:
            arm.switch(park=False, timeout=timeout)
        self.resident = arm

    def clear(self, *, timeout: Timeout) -> Parked | None:
        """Park the resident arm (before a new process takes device memory); its reply
        (None: no arm was resident)."""
        resident, self.resident = self.resident, None
        if resident is None:
            return None
        reply = resident.switch(park=True, timeout=timeout)
        if reply.pinned is not None:
            self.pinned[id(resident)] = reply.pinned
        else:
            self._parked[id(resident)] = resident
        return reply

    def forget(self, arm: Arm) -> None:
        """`arm` was closed: its process and its device memory are gone."""
        if self.resident is arm:
            self.resident = None
        self._parked.pop(id(arm), None)
        self.pinned.pop(id(arm), None)

    def beside_pinned(self, arm: object) -> str | None:
        """Why another arm's memory stayed on the device while `arm` ran (None: it did not)."""
        reasons = [why for key, why in self.pinned.items() if key != id(arm)]
        return reasons[0] if reasons else None
