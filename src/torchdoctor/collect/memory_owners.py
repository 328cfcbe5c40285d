"""Measure what one steady training step holds in memory, owner by owner (`StepMemory`).

Parameters, gradients and optimizer state are read from the tensors themselves: the model's
parameters and buffers, one gradient per trainable parameter, the optimizer's state. The
activations saved for backward are the unique storages the forward hands to autograd
(`torch.autograd.graph.saved_tensors_hooks`), parameters excluded.

The step's peak:

- On a GPU, the CUDA caching allocator's own statistics (`torch.cuda.memory_stats`:
  `allocated_bytes.all.peak` and `reserved_bytes.all.peak`, after
  `reset_peak_memory_stats`), read on the host, so no synchronize is needed.
- On the CPU torch's allocator is the C library's malloc, which keeps no statistics torch can
  read, and the process's resident set mixes tensors with code, libraries and pages malloc
  keeps. So the peak is counted from the tensors: a `TorchDispatchMode` sees every storage an
  op creates during the step and a finalizer sees it freed (`LiveTensorBytes`); the peak is
  the high-water mark of the step's live storages plus what was resident when it began.
  Buffers a kernel allocates inside itself (oneDNN's scratch space) do not pass through the
  dispatcher, so this peak is a lower bound of what C10's CPU allocator handed out: the two
  agreed to the byte on a steady step of `mlp` and `gpt`, and the allocator counted 1.4% more
  on `cnn`'s convolutions (its count from the profiler's memory events, as
  benchmarks/bench_memory_fit.py reads it).

One warm-up step first creates the optimizer's state, so the measured step is a steady one.
A batch that DataLoader workers collate arrives in shared memory the dispatcher never saw, so
with workers the batch itself is not in the CPU peak (the built-in workloads load in-process
by default).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from torchdoctor.core.errors import UsageError
from torchdoctor.core.memory_owners import FORWARD_BACKWARD, OPTIMIZER, StepMemory
from torchdoctor.engine import prepare
from torchdoctor.knobs import Recipe
from torchdoctor.workloads import Workload

#: Steps run before the measured one: the first creates the optimizer's state (Adam's moments),
#: after which every step allocates alike.
WARMUP_STEPS = 1

#: Called with +bytes when a storage is created during the step and -bytes when it is freed.
Listener = Callable[[int], None]


class AllocatorStats(Protocol):
    """What is read of the CUDA caching allocator (`torch.cuda`, or a fake in tests)."""

    def reset_peak_memory_stats(self, device: Any = None) -> None: ...

    def memory_stats(self, device: Any = None) -> dict[str, Any]: ...


def _storage(t: torch.Tensor) -> torch.UntypedStorage | None:
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


def _owners_at_peak(
    live: LiveTensorBytes, saved: set[int], grads: set[int], grads_before: int
) -> dict[str, int]:
    """The step's own storages alive at its highest moment, by owner: activations saved for
    backward, gradients (those the step began with included), and the rest, temporaries."""
    acts = sum(n for number, n in live.top_live.items() if number in saved)
    made = sum(n for number, n in live.top_live.items() if number in grads and number not in saved)
    return {
        "activations": acts,
        "gradients": grads_before + made,
        "temporaries": live.top - acts - made,
    }


def measure_step_memory(
    workload: Workload,
    batch_size: int,
    *,
    device: str = "cpu",
    recipe: Recipe | None = None,
    seed: int = 0,
    allocator: AllocatorStats | None = None,
    listeners: Sequence[Listener] = (),
) -> StepMemory:
    """Run `workload` at `batch_size` for a warm-up step and one measured step; its memory.

    `allocator` is read for the peak when given, or `torch.cuda` on a CUDA device; otherwise
    the live tensors are counted. `listeners` see every storage the measured step creates
    and frees (a timeline of the step, or a model of an allocator fed by it).
    """
    base = recipe if recipe is not None else Recipe()
    resolved = base.resolved("cuda" if device.startswith("cuda") else "cpu")
    if resolved.get("compile", "off") != "off" or resolved.get("cuda_graphs", False):
        # The tensor count runs every op through a dispatch mode, which compiled graphs and
        # captured CUDA graphs bypass or refuse.
        raise UsageError(
            "memory is measured on the eager step: compile and cuda_graphs are not supported",
            hint="drop --set compile=... and --set cuda_graphs=...",
        )
    if allocator is None and device.startswith("cuda"):
        allocator = torch.cuda
    if allocator is torch.cuda:
        # Blocks an earlier session left cached would count as this step's reserved memory.
        gc.collect()
        torch.cuda.empty_cache()
    session = prepare(workload, base.with_changes(batch_size=batch_size), device=device, seed=seed)
    try:
        samples = len(session.dataset) if hasattr(session.dataset, "__len__") else None
        if samples is not None and samples < batch_size:
            # A short last batch would be measured in its place.
            raise UsageError(
                f"batch size {batch_size} is larger than {workload.name}'s dataset "
                f"({samples} samples)",
                hint="pass smaller batch sizes, or a larger dataset (--param rows=... or size=...)",
            )
        session.run_steps(WARMUP_STEPS, measure_phases=False)
        model, optimizer = session.raw_model, session.optimizer
        weights = [*model.parameters(), *model.buffers()]
        weight_keys = storage_keys(weights)
        parameters = unique_bytes(weights)
        trainable = [p for p in model.parameters() if p.requires_grad]
        gradients = sum(p.numel() * p.element_size() for p in trainable)
        state = unique_bytes(_state_tensors(optimizer), exclude=weight_keys)
        grads_now = unique_bytes(p.grad for p in trainable if p.grad is not None)
        resident = parameters + state + grads_now
        rss = _resident_set_bytes()
        peaks = _PhasePeaks(allocator, session.device, resident)
        saved = SavedActivations(exclude=weight_keys)
        grads: set[int] = set()

        def before_optimizer(*_: Any) -> None:
            peaks.end_phase(FORWARD_BACKWARD)
            if peaks.live is not None:
                grads.update(peaks.live.numbers(p.grad for p in trainable if p.grad is not None))

        hook = optimizer.register_step_pre_hook(before_optimizer)
        try:
            peaks.start()
            with saved.hooks(), LiveTensorBytes(listeners) as live:
                peaks.live = saved.tracker = live
                session.run_steps(1, measure_phases=False)
                peaks.end_phase(OPTIMIZER)
        finally:
            hook.remove()
        return StepMemory(
            batch_size=batch_size,
            device=str(session.device),
            source="tensors" if allocator is None else "cuda_allocator",
            parameters_bytes=parameters,
            gradients_bytes=gradients,
            optimizer_state_bytes=state,
            activations_bytes=saved.nbytes,
            at_peak=_owners_at_peak(live, saved.numbers, grads, grads_now),
            phase_peaks=peaks.allocated,
            phase_reserved_peaks=peaks.reserved if allocator is not None else None,
            timeline=[resident + m for m in live.maxima],
            process_rss_bytes=rss,
        )
    finally:
        session.close()
