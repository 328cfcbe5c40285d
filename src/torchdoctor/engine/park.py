"""Parking a training job's state off its GPU while another job uses the device.

The tuner compares two live processes of one job on one GPU, in turns (tune/arms.py). The
idle one still holds its weights, gradients and optimizer state on the device, and
`torch.cuda.empty_cache` returns only the caching allocator's *free* blocks, never live
tensors: with both arms resident, a job that uses more than about half the device cannot be
tuned at all (every candidate runs out of memory, and the batch search sees false edges).

So the idle arm is parked: `park` moves the tensors the job trains (each parameter's data and
gradient, the modules' buffers, every tensor of the optimizers' state) into host memory,
keeping the Python objects (a `Parameter`, the optimizer's state dicts) so the job goes on
with the very same objects, then hands the freed blocks back (`empty_cache`); `unpark` moves
them back before the arm's next chunk. Both report the bytes moved, the bytes the process
still holds on the device (what nothing here can reach: a batch, a loss, a graph's pool) and
the seconds taken, which the driving side keeps out of every timed step.

What cannot be parked: an arm whose steps replay CUDA graphs (the `cuda_graphs` knob,
torch.compile's "reduce-overhead") captured the device addresses of its parameters and holds
a private memory pool that only deleting the graphs frees. Moving its parameters would make
the graphs replay on freed memory, so such an arm is left resident (`park`'s `pinned` says
why) and the other arm runs beside it, as before.

A sharded parameter (FSDP2's DTensor) is parked by its local shard's storage: FSDP holds that
storage under other views too (its flat shard buffer, its all-gather inputs), so the storage
itself is copied out and emptied (`resize_(0)`, as FSDP frees its gathered parameters) and
refilled in place on unpark, which keeps every view valid. Its gradients and optimizer state
go the same way, each storage once.

On a CPU, or before the process touched a GPU, there is nothing to move and everything here
is a no-op. The device is reached through a `DeviceMover` (`CudaMover` for CUDA; a fake GPU
in tests), so the accounting can be tested without one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from torchdoctor.core.sharded import is_sharded, local_tensor


class DeviceMover(Protocol):
    """How tensors leave and come back to the device, and what it holds."""

    def on_device(self, tensor: torch.Tensor) -> bool: ...

    def to_host(self, tensor: torch.Tensor) -> torch.Tensor: ...

    def to_device(self, tensor: torch.Tensor) -> torch.Tensor: ...

    def finish(self) -> None:
        """Wait for the copies started (asynchronous ones) to complete."""

    def empty_cache(self) -> None: ...

    def allocated_bytes(self) -> int: ...

    def device_memory(self) -> tuple[int, int]:
        """The device's free and total bytes, every process's allocations and contexts
        counted (`torch.cuda.mem_get_info`)."""
        ...


class CudaMover:
    """A `DeviceMover` of the CUDA device `device` (e.g. "cuda:0").

    Copies to the host are asynchronous into pinned memory (`Tensor.to("cpu",
    non_blocking=True)` from a GPU allocates pinned memory), then one `synchronize` waits for
    all of them; copies back are asynchronous from that pinned memory, ordered on the stream
    before the arm's next step.
    """

    def __init__(self, device: str | torch.device) -> None:
        self.device = torch.device(device)

    def on_device(self, tensor: torch.Tensor) -> bool:
        return tensor.device.type == "cuda"

    def to_host(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.to("cpu", non_blocking=True)

    def to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.to(self.device, non_blocking=True)

    def finish(self) -> None:
        torch.cuda.synchronize(self.device)

    def empty_cache(self) -> None:
        torch.cuda.empty_cache()

    def allocated_bytes(self) -> int:
        return int(torch.cuda.memory_allocated(self.device))

    def device_memory(self) -> tuple[int, int]:
        free, total = torch.cuda.mem_get_info(self.device)
        return int(free), int(total)


@dataclass(frozen=True)
class Moved:
    """One park or unpark: bytes moved, bytes the process still holds on the device after
    it, seconds taken; `pinned` says why nothing was moved (None when the state could move).
    A park also reads the device as it leaves it: its free and total bytes, every process's
    tensors and contexts counted (0 and 0 when not read), from which the tuner decides
    whether another process fits beside this one (`torchdoctor.tune.turns`)."""

    moved_bytes: int
    left_bytes: int
    seconds: float
    pinned: str | None = None
    free_bytes: int = 0
    total_bytes: int = 0


class Parking:
    """The trained state of a job (its modules and optimizers) and where it lives now.

    `modules` and `optimizers` are given at each park (a script's optimizers are found as it
    steps them); `park`'s `pinned` is a reason the state must stay on the device (CUDA
    graphs), or None. Unparking moves back exactly what the park moved (`_slots`), never a
    tensor that lived on the host of its own (Adam's step counter, a CPU-side buffer).
    """

    def __init__(self, mover: DeviceMover) -> None:
        self.mover = mover
        #: where each parked tensor was taken from, to put it back there on unpark
        self._slots: list[_Slot] = []
        #: the sharded tensors' storages emptied, each with its bytes in host memory
        self._stored: list[_Stored] = []

    @property
    def parked(self) -> bool:
        return bool(self._slots or self._stored)

    def park(
        self, modules: Sequence[Any], optimizers: Sequence[Any], *, pinned: str | None = None
    ) -> Moved:
        """Move the state off the device and hand the freed blocks back."""
        start = time.perf_counter()
        if pinned is not None:  # its free blocks can go back all the same
            self.mover.empty_cache()
            free, total = self.mover.device_memory()
            left = self.mover.allocated_bytes()
            return Moved(0, left, time.perf_counter() - start, pinned, free, total)
        moved = 0
        storages: set[int] = set()  # a sharded storage under several views is moved once
        for slot in _slots(modules, optimizers):
            tensor = slot.get()
            if tensor is not None and is_sharded(tensor):
                moved += self._copy_out(local_tensor(tensor), storages)
            elif tensor is not None and self.mover.on_device(tensor):
                moved += tensor.untyped_storage().nbytes()
                slot.set(self.mover.to_host(tensor))
                self._slots.append(slot)
        # The last tensor read would hold its device block through empty_cache otherwise.
        tensor = None
        self.mover.finish()
        for stored in self._stored:  # their copies are done: the device blocks can go
            stored.storage.resize_(0)
        self.mover.empty_cache()
        free, total = self.mover.device_memory()
        left = self.mover.allocated_bytes()
        return Moved(moved, left, time.perf_counter() - start, None, free, total)

    def unpark(self) -> Moved:
        """Move the parked state back onto the device (a no-op when nothing is parked)."""
        start = time.perf_counter()
        if not self.parked:  # nothing parked: no copy to wait for
            return Moved(0, 0, 0.0)
        moved = 0
        stored, self._stored = self._stored, []
        for entry in stored:
            entry.storage.resize_(entry.host.numel())
            _bytes_of(entry.storage).copy_(entry.host, non_blocking=True)
            moved += entry.host.numel()
        slots, self._slots = self._slots, []
        for slot in slots:
            tensor = slot.get()
            if tensor is not None and not self.mover.on_device(tensor):
                moved += tensor.untyped_storage().nbytes()
                slot.set(self.mover.to_device(tensor))
        self.mover.finish()
        return Moved(moved, self.mover.allocated_bytes(), time.perf_counter() - start)

    def _copy_out(self, local: torch.Tensor, storages: set[int]) -> int:
        """Start copying a sharded tensor's local storage to the host; its bytes (0 when it
        was copied already, is empty, is not on the device or cannot be emptied)."""
        storage = local.untyped_storage()
        key = int(storage._cdata)
        if key in storages or storage.nbytes() == 0 or not self.mover.on_device(local):
            return 0
        if not storage.resizable():
            return 0  # memory torch does not own (shared from elsewhere): it stays
        storages.add(key)
        self._stored.append(_Stored(storage, self.mover.to_host(_bytes_of(storage))))
        return int(storage.nbytes())


@dataclass(frozen=True)
class _Stored:
    """A sharded tensor's local storage, emptied while parked, and its bytes on the host."""

    storage: torch.UntypedStorage
    host: torch.Tensor


def _bytes_of(storage: torch.UntypedStorage) -> torch.Tensor:
    """The whole storage as one tensor of bytes (a view: copying into it fills the storage)."""
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)


@dataclass(frozen=True)
class _Slot:
    """Where a trained tensor lives: a parameter's data or gradient (moved by assigning
    `.data`, in the order `nn.Module._apply` uses, so the script's own `Parameter` objects
    stay the ones its optimizer steps), or an entry of a dict (a module's `_buffers`, an
    optimizer's per-parameter state)."""

    owner: Any
    key: Any

    def get(self) -> torch.Tensor | None:
        if self.key is _DATA:
            return self.owner.data
        if self.key is _GRAD:
            grad = self.owner.grad
            return None if grad is None else grad.data
        value = self.owner.get(self.key)
        return value if isinstance(value, torch.Tensor) else None

    def set(self, tensor: torch.Tensor) -> None:
        if self.key is _DATA:
            self.owner.data = tensor
        elif self.key is _GRAD:
            self.owner.grad.data = tensor
        else:
            self.owner[self.key] = tensor


_DATA, _GRAD = object(), object()


def _slots(modules: Sequence[Any], optimizers: Sequence[Any]) -> Iterator[_Slot]:
    """Every place a trained tensor lives, each parameter once (tied weights are one
    `Parameter`, and a parameter of a module and of its optimizer too)."""
    for param in _parameters(modules, optimizers):
        yield _Slot(param, _DATA)
        yield _Slot(param, _GRAD)
    owners: set[int] = set()  # a module reached from two roots is visited once
    for module in modules:
        for owner in module.modules():
            if id(owner) in owners:
                continue
            owners.add(id(owner))
            for name in list(owner._buffers):
                yield _Slot(owner._buffers, name)
    for optimizer in optimizers:
        for state in optimizer.state.values():
            for key in list(state):
                yield _Slot(state, key)


def _parameters(modules: Sequence[Any], optimizers: Sequence[Any]) -> Iterator[torch.Tensor]:
    """Each parameter of the modules and the optimizers once (the objects stay alive here, so
    their ids are theirs)."""
    seen: set[int] = set()
    for module in modules:
        for param in module.parameters():
            if id(param) not in seen:
                seen.add(id(param))
                yield param
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            for param in group["params"]:
                if id(param) not in seen:
                    seen.add(id(param))
                    yield param


#: Why a session whose steps replay CUDA graphs stays on the device (module docstring).
GRAPHS_PINNED = (
    "its steps replay CUDA graphs, which hold the device addresses of its tensors and a "
    "private memory pool: it stays on the device"
)


def trained_state(session: Any) -> tuple[list[Any], list[Any], str | None]:
    """A workload session's modules, optimizers and why they cannot move (None: they can).

    Read from a `TrainingSession`'s `raw_model`, `optimizer` and `replays_graphs`; a session
    without them (a simulated one) has nothing to park.
    """
    modules = [m for m in (getattr(session, "raw_model", None),) if m is not None]
    optimizers = [o for o in (getattr(session, "optimizer", None),) if o is not None]
    pinned = GRAPHS_PINNED if getattr(session, "replays_graphs", False) else None
    return modules, optimizers, pinned
