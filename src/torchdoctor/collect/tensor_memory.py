"""What one training step holds in memory, owner by owner, between two of its boundaries.

The measuring half of `collect/memory_owners.py` (its docstring says how each owner and the
peak are read), apart so that it imports torch alone: a workload's step
(`measure_step_memory`, through the engine) and a script's (`probes/step_memory.py`, in a process
whose start-up must not load the engine) are measured by the same `StepMeter`.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from torchdoctor.core.memory_owners import FORWARD_BACKWARD, OPTIMIZER, StepMemory
from torchdoctor.core.sharded import local_tensor

#: Called with +bytes when a storage is created during the step and -bytes when it is freed.
Listener = Callable[[int], None]


class AllocatorStats(Protocol):
    """What is read of the CUDA caching allocator (`torch.cuda`, or a fake in tests)."""

    def reset_peak_memory_stats(self, device: Any = None) -> None: ...

    def memory_stats(self, device: Any = None) -> dict[str, Any]: ...


def _storage(t: torch.Tensor) -> torch.UntypedStorage | None:
    """The storage that holds `t`'s bytes in this process: a sharded tensor's (a DTensor's)
    is its local shard's, since the wrapper's own reports the whole tensor's size."""
    t = local_tensor(t)
    if t.device.type == "meta" or t.is_sparse:
        return None
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # tensors without a storage (nested, functional)
        return None


def _key(storage: torch.UntypedStorage) -> int:
    # The StorageImpl's address: one per storage while it lives, shared by all its views.
    return int(storage._cdata)


def unique_bytes(tensors: Iterable[torch.Tensor], *, exclude: set[int] = frozenset()) -> int:  # type: ignore[assignment]
    """Bytes of the distinct storages behind `tensors`, less those keyed in `exclude`."""
    seen: dict[int, int] = {}
    for t in tensors:
        storage = _storage(t)
        if storage is not None and _key(storage) not in exclude:
            seen[_key(storage)] = storage.nbytes()
    return sum(seen.values())


def storage_keys(tensors: Iterable[torch.Tensor]) -> set[int]:
    return {_key(s) for t in tensors if (s := _storage(t)) is not None}


class LiveTensorBytes(TorchDispatchMode):
    """Bytes of the storages created while the mode is on and still alive, and their peak.

    A storage is new when an op returns it and none of the op's inputs holds it (in-place ops
    and views return their input's). Its finalizer takes it off when it is freed. On exit the
    finalizers are detached, so what outlives the step is not reported afterwards.
    """

    def __init__(self, listeners: Sequence[Listener] = ()) -> None:
        super().__init__()
        self.current = 0
        self.peak = 0
        #: The live bytes at each local maximum (an allocation followed by a free), in order:
        #: the step's memory timeline reduced to the points any peak is among.
        self.maxima: list[int] = []
        self._rising = False
        self._live: dict[int, weakref.finalize[Any, Any]] = {}
        # Each storage's number in the order of creation, and its bytes: an address can be
        # reused once its storage is freed, a number is not.
        self._numbers: dict[int, int] = {}
        self._sizes: dict[int, int] = {}
        self._created = 0
        #: The highest `current` of the whole time on (marks do not reset it), and the
        #: storages alive at that moment (number -> bytes): whose memory the peak is.
        self.top = 0
        self.top_live: dict[int, int] = {}
        self._listeners = tuple(listeners)

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = storage_keys(
            t for t in tree_leaves((args, kwargs or {})) if isinstance(t, torch.Tensor)
        )
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self._track(t, inputs)
        return out

    def _track(self, t: torch.Tensor, inputs: set[int]) -> None:
        storage = _storage(t)
        if storage is None:
            return
        key = _key(storage)
        nbytes = storage.nbytes()
        if key in inputs or key in self._live or nbytes == 0:
            return
        self._add(storage, key, nbytes)

    def adopt(self, tensors: Iterable[torch.Tensor]) -> set[int]:
        """Count storages made before the mode was on (the gradients a script keeps from the
        step before, until its zero_grad) as live from now until they are freed; their
        numbers."""
        numbers = set()
        for t in tensors:
            storage = _storage(t)
            if storage is None or storage.nbytes() == 0:
                continue
            key = _key(storage)
            if key not in self._live:
                self._add(storage, key, storage.nbytes())
            numbers.add(self._numbers[key])
        return numbers

    def _add(self, storage: torch.UntypedStorage, key: int, nbytes: int) -> None:
        self._created += 1
        self._live[key] = weakref.finalize(storage, self._freed, key, nbytes)
        self._numbers[key] = self._created
        self._sizes[self._created] = nbytes
        self._change(nbytes)

    def _freed(self, key: int, nbytes: int) -> None:
        if self._live.pop(key, None) is not None:
            del self._sizes[self._numbers.pop(key)]
            self._change(-nbytes)

    def numbers(self, tensors: Iterable[torch.Tensor]) -> set[int]:
        """The numbers of the live storages behind `tensors` that this step created."""
        keys = storage_keys(tensors)
        return {self._numbers[k] for k in keys if k in self._numbers}

    def mark(self) -> int:
        """The peak since the last mark (or the start); the next peak starts from now."""
        peak, self.peak = self.peak, self.current
        return peak

    def _change(self, delta: int) -> None:
        if delta < 0 and self._rising:
            self.maxima.append(self.current)
        self._rising = delta > 0
        self.current += delta
        self.peak = max(self.peak, self.current)
        if self.current > self.top:
            self.top = self.current
            self.top_live = dict(self._sizes)
        for listener in self._listeners:
            listener(delta)

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        if self._rising:
            self.maxima.append(self.current)
        for finalizer in self._live.values():
            finalizer.detach()
        self._live.clear()
        self._numbers.clear()
        self._sizes.clear()


class SavedActivations:
    """The unique storages the forward saves for backward, less those in `exclude`."""

    def __init__(self, exclude: set[int]) -> None:
        self.exclude = exclude
        self._bytes: dict[int, int] = {}
        #: When set, the numbers it gives the saved storages are kept (`numbers`).
        self.tracker: LiveTensorBytes | None = None
        self.numbers: set[int] = set()

    @property
    def nbytes(self) -> int:
        return sum(self._bytes.values())

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        storage = _storage(t)
        if storage is not None and _key(storage) not in self.exclude:
            self._bytes[_key(storage)] = storage.nbytes()
            if self.tracker is not None:
                self.numbers |= self.tracker.numbers([t])
        return t

    @contextmanager
    def hooks(self) -> Iterator[SavedActivations]:
        with torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t):
            yield self


def _state_tensors(optimizer: torch.optim.Optimizer) -> Iterator[torch.Tensor]:
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                yield value


class _PhasePeaks:
    """Each phase's allocated (and reserved) peak, from the allocator or the live tensors.

    The phases end at the optimizer's step pre-hook (forward and backward, the loader's batch
    included) and after the step (the optimizer, zeroing the gradients included): their peaks
    grow differently with the batch (activations against per-parameter temporaries), so each
    is fitted on its own.
    """

    def __init__(self, allocator: AllocatorStats | None, device: torch.device, resident: int):
        self.allocator, self.device, self.resident = allocator, device, resident
        self.live: LiveTensorBytes | None = None
        self.allocated: dict[str, int] = {}
        self.reserved: dict[str, int] = {}

    def start(self) -> None:
        if self.allocator is not None:
            self.allocator.reset_peak_memory_stats(self.device)

    def end_phase(self, phase: str) -> None:
        if phase in self.allocated:
            return  # a second optimizer step in one training step (accumulation keeps one)
        if self.allocator is not None:
            stats = self.allocator.memory_stats(self.device)
            self.allocated[phase] = int(stats["allocated_bytes.all.peak"])
            self.reserved[phase] = int(stats["reserved_bytes.all.peak"])
            self.allocator.reset_peak_memory_stats(self.device)
        elif self.live is not None:
            self.allocated[phase] = self.resident + self.live.mark()


def _resident_set_bytes() -> int | None:
    """This process's resident set now (VmRSS of /proc/self/status; None off Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024  # reported in kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def _owners_at_peak(live: LiveTensorBytes, saved: set[int], grads: set[int]) -> dict[str, int]:
    """The storages alive at the step's highest moment, by owner: activations saved for
    backward, gradients (those the step began with included, while they lived), and the rest,
    temporaries."""
    acts = sum(n for number, n in live.top_live.items() if number in saved)
    made = sum(n for number, n in live.top_live.items() if number in grads and number not in saved)
    return {"activations": acts, "gradients": made, "temporaries": live.top - acts - made}


class StepMeter:
    """One step's memory between `begin` and `end`, the optimizer's step marked in between
    (`end_forward_backward`, from its step pre-hook).

    Built at the boundary before the step: the resident owners are read then (`weights`:
    parameters and buffers; `trainable`: the parameters that get gradients; the optimizers'
    state), and the live tensors and saved activations are counted from `begin` on.
    A sharded parameter counts its local shard (`core.sharded`); `gathered`: FSDP2's gathered
    parameters (`core.sharded.gathered_parameters`), which its forward saves for backward and
    which are weights, not activations.
    """

    def __init__(
        self,
        *,
        weights: Sequence[torch.Tensor],
        trainable: Sequence[torch.Tensor],
        optimizers: Sequence[torch.optim.Optimizer],
        device: torch.device,
        allocator: AllocatorStats | None = None,
        listeners: Sequence[Listener] = (),
        gathered: Sequence[torch.Tensor] = (),
    ) -> None:
        weight_keys = storage_keys(weights)
        self.trainable = list(trainable)
        self.parameters = unique_bytes(weights)
        self.gradients = sum(
            local_tensor(p).numel() * local_tensor(p).element_size() for p in self.trainable
        )
        self.state = unique_bytes(
            (t for opt in optimizers for t in _state_tensors(opt)), exclude=weight_keys
        )
        self.rss = _resident_set_bytes()
        self.allocator = allocator
        # The gradients alive at the start are counted as live tensors (`begin`), since a
        # script's zero_grad may free them inside the step.
        self.peaks = _PhasePeaks(allocator, device, self.parameters + self.state)
        self.saved = SavedActivations(exclude=weight_keys | storage_keys(gathered))
        self.grads: set[int] = set()
        self.listeners = tuple(listeners)
        self.live: LiveTensorBytes | None = None
        self._stack = contextlib.ExitStack()

    def begin(self) -> None:
        """Count from now on: the allocator's peak reset, every new storage and every saved
        activation seen."""
        self.peaks.start()
        self._stack.enter_context(self.saved.hooks())
        self.live = self._stack.enter_context(LiveTensorBytes(self.listeners))
        self.peaks.live = self.saved.tracker = self.live
        self.grads |= self.live.adopt(p.grad for p in self.trainable if p.grad is not None)

    def end_forward_backward(self) -> None:
        """The optimizer's step begins: the forward and backward phase ends, and the gradients
        it made are known."""
        if self.live is None:
            return
        self.peaks.end_phase(FORWARD_BACKWARD)
        self.grads.update(self.live.numbers(p.grad for p in self.trainable if p.grad is not None))

    def abort(self) -> None:
        """Stop counting, measuring nothing (the step failed)."""
        self._stack.close()
        self.live = None

    def end(self, *, batch_size: int, device: str) -> StepMemory:
        """Stop counting: the step's memory."""
        live = self.live
        if live is None:
            raise RuntimeError("StepMeter.end before begin")
        self.peaks.end_phase(OPTIMIZER)
        self._stack.close()
        self.live = None
        return StepMemory(
            batch_size=batch_size,
            device=device,
            source="tensors" if self.allocator is None else "cuda_allocator",
            parameters_bytes=self.parameters,
            gradients_bytes=self.gradients,
            optimizer_state_bytes=self.state,
            activations_bytes=self.saved.nbytes,
            at_peak=_owners_at_peak(live, self.saved.numbers, self.grads),
            phase_peaks=self.peaks.allocated,
            phase_reserved_peaks=self.peaks.reserved if self.allocator is not None else None,
            timeline=[self.peaks.resident + m for m in live.maxima],
            process_rss_bytes=self.rss,
        )
