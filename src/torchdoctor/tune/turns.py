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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from torchdoctor.procs import Parked

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

    def clear(self, *, timeout: Timeout) -> None:
        """Park the resident arm (before a new process takes device memory)."""
        resident, self.resident = self.resident, None
        if resident is None:
            return
        reply = resident.switch(park=True, timeout=timeout)
        if reply.pinned is not None:
            self.pinned[id(resident)] = reply.pinned
        else:
            self._parked[id(resident)] = resident

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
