"""A fake GPU shared by several processes, each with its own caching allocator.

It models what a CUDA device does to a tuner's arms, on a CPU build of torch:

- `FakeGpu` is the device: its capacity is shared by every process of a test; what each
  process's allocator has *reserved* from it (live tensors plus cached free blocks) counts.
- `FakeCuda` is one process's `torch.cuda` and caching allocator. A tensor is "on the
  device" once it was allocated there (`to_device`, `adopt`, `workspace`): its storage's
  bytes are allocated until no tensor holds that storage any more (the allocator learns it
  through a `StorageWeakRef`, as the real one learns it from the storage's refcount); then
  they stay reserved as a cached free block. A new allocation reuses cached blocks first.
  An allocation that does not fit beside everything every process has reserved raises
  `torch.OutOfMemoryError`, as CUDA's allocator does. `empty_cache()` hands back the cached
  blocks only: live tensors (weights, gradients, optimizer state) survive it.

`FakeCuda` is also the `torchdoctor.engine.DeviceMover` the parking code moves through, and
the `torch.cuda` a `SessionHost` calls (`is_initialized`, `empty_cache`, ...).

`make_job` is a session factory ("fake_gpu:make_job"): a real torch model and SGD optimizer
trained on the fake device of the process that builds it (`FakeCuda.active`), whose trained
state and per-step working set are sized as a fraction of the device. A job may also hold
device memory that no optimizer steps, as real jobs do: a plain tensor (`ballast_share`), a
frozen base model its trained adapter runs on (`frozen_share`: a LoRA's base, a teacher),
and a CUDA graph's private pool while its recipe replays graphs (`graph_pool_share`). They
are live tensors of the job like any other; what parking can move of them is whatever the
real park code (`torchdoctor.engine.park`) finds and moves through this allocator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch.multiprocessing.reductions import StorageWeakRef

from torchdoctor.engine import perturb_weights


class FakeGpu:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.processes: list[FakeCuda] = []
        #: out-of-memory errors raised, over all processes
        self.ooms = 0
        #: the most processes that held device memory at one time
        self.most_resident = 0

    def reserved(self) -> int:
        return sum(p.reserved for p in self.processes)

    def resident(self) -> int:
        """Processes holding device memory now."""
        return sum(1 for p in self.processes if p.reserved > 0)


class FakeCuda:
    """One process's view of the device (module docstring)."""

    #: the process whose requests are being answered (a session built now lives on it)
    active: ClassVar[FakeCuda | None] = None

    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu = gpu
        gpu.processes.append(self)
        self.reserved = 0  # bytes held from the device: allocated + cached
        self.cached = 0
        self._live: dict[int, tuple[StorageWeakRef, int]] = {}
        self.initialized = False
        self.closed = False

    # ---- the allocator ------------------------------------------------------------------

    def _sweep(self) -> None:
        """Storages no tensor holds any more: their blocks become cached free blocks."""
        for key, (ref, nbytes) in list(self._live.items()):
            if ref.expired():
                del self._live[key]
                self.cached += nbytes

    def _charge(self, nbytes: int) -> None:
        self._sweep()
        if self.cached >= nbytes:
            self.cached -= nbytes
            return
        grow = nbytes - self.cached
        if self.gpu.reserved() + grow > self.gpu.capacity:
            self.gpu.ooms += 1
            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {nbytes} bytes "
                f"({self.gpu.reserved()} of {self.gpu.capacity} reserved)"
            )
        self.reserved += grow
        self.cached = 0
        self.gpu.most_resident = max(self.gpu.most_resident, self.gpu.resident())

    def adopt(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` was allocated on the device (by autograd, an optimizer): charge it."""
        self.initialized = True
        if not self.on_device(tensor):
            storage = tensor.untyped_storage()
            self._charge(storage.nbytes())
            self._live[storage._cdata] = (StorageWeakRef(storage), storage.nbytes())
        return tensor

    def workspace(self, nbytes: int) -> torch.Tensor:
        """A step's transient working set (activations): freed when dropped."""
        return self.adopt(torch.empty(max(1, nbytes // 4)))

    def allocated(self) -> int:
        self._sweep()
        return sum(n for _, n in self._live.values())

    def exit(self) -> None:
        """The process ended: everything it reserved goes back."""
        self._live.clear()
        self.reserved = self.cached = 0
        self.closed = True

    # ---- DeviceMover ----------------------------------------------------------------------

    def on_device(self, tensor: torch.Tensor) -> bool:
        entry = self._live.get(tensor.untyped_storage()._cdata)
        return entry is not None and not entry[0].expired()

    def to_host(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.detach().clone()

    def to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        return self.adopt(tensor.detach().clone())

    def finish(self) -> None:
        pass

    def allocated_bytes(self) -> int:
        return self.allocated()

    def device_memory(self) -> tuple[int, int]:
        """Free and total bytes of the device, every process's reservations counted (as
        `torch.cuda.mem_get_info` reads the driver's count of every process)."""
        self._sweep()
        return self.gpu.capacity - self.gpu.reserved(), self.gpu.capacity

    # ---- the torch.cuda a worker calls --------------------------------------------------

    def is_initialized(self) -> bool:
        return self.initialized

    def empty_cache(self) -> None:
        """Hand the cached free blocks back; live tensors keep theirs."""
        self._sweep()
        self.reserved -= self.cached
        self.cached = 0

    def current_device(self) -> int:
        return 0

    def get_device_properties(self, index: int) -> Any:
        return type("Props", (), {"total_memory": self.gpu.capacity})()

    def set_per_process_memory_fraction(self, fraction: float, device: int) -> None:
        pass


@dataclass
class JobStep:
    total_s: float
    loss: float | None
    samples: int


#: Float32 bytes of the trained state per parameter: the weight, its gradient and SGD's
#: momentum buffer.
STATE_BYTES_PER_PARAM = 3 * 4


class FakeGpuJob:
    """A training job on the active process's fake device (`make_job`).

    Its trained state (weights, gradients, momentum) takes `state_share` of the device and
    each step's working set `workspace_share` at `base_batch`, growing with the batch: a job
    that peaks at `state_share + workspace_share` of the GPU. Step times are modelled (a
    base time growing as the batch to `batch_exponent`, knob factors, seeded noise); the
    losses are the real model's.
    """

    def __init__(
        self,
        recipe: dict[str, Any],
        *,
        seed: int,
        perturbation: int = 0,
        state_share: float,
        workspace_share: float,
        base_batch: int = 32,
        base_step_s: float = 0.01,
        batch_exponent: float = 1.0,
        effects: dict[str, dict[str, float]] | None = None,
        noise: float = 0.02,
        graphs_knob: str | None = None,
        ballast_share: float = 0.0,
        frozen_share: float = 0.0,
        graph_pool_share: float = 0.0,
    ) -> None:
        cuda = FakeCuda.active
        assert cuda is not None, "a fake GPU job is built in a fake GPU process"
        self.cuda = cuda
        capacity = cuda.gpu.capacity
        params = int(state_share * capacity) // STATE_BYTES_PER_PARAM
        width = max(1, int(math.sqrt(params)))
        torch.manual_seed(seed)
        self.raw_model = torch.nn.Linear(width, width, bias=False)
        if perturbation:
            perturb_weights(self.raw_model, perturbation)
        for p in self.raw_model.parameters():
            p.data = cuda.to_device(p.data)
        #: a plain tensor the job allocated and keeps (a cache, a lookup table, a ballast)
        self.ballast = cuda.workspace(int(ballast_share * capacity)) if ballast_share else None
        #: a frozen model the trained one runs on, owned by no optimizer: its weights are
        #: live on the device like the trained ones
        self.base_model: torch.nn.Module | None = None
        if frozen_share:
            self.base_model = torch.nn.Linear(width, width, bias=False).requires_grad_(False)
            frozen_bytes = int(frozen_share * capacity)
            self.base_model.weight.data = cuda.to_device(self.base_model.weight.data)
            # the rest of the frozen model's weights, as a registered (frozen) buffer
            self.base_model.register_buffer(
                "rest", cuda.workspace(max(0, frozen_bytes - 4 * width * width))
            )
        self.optimizer = torch.optim.SGD(self.raw_model.parameters(), lr=0.01, momentum=0.9)
        self.batch = int(recipe.get("batch_size") or base_batch)
        self.workspace_bytes = int(workspace_share * capacity * self.batch / base_batch)
        step_s = base_step_s * (self.batch / base_batch) ** batch_exponent
        for knob, factors in (effects or {}).items():
            step_s *= float(factors.get(str(recipe.get(knob)), 1.0))
        self.step_s = step_s
        self.noise = noise
        self.rng = np.random.default_rng(seed + 7919 * perturbation)
        self.data = torch.Generator().manual_seed(seed)
        self.width = width
        #: a recipe with `graphs_knob` set replays CUDA graphs: it cannot be parked
        self.replays_graphs = bool(graphs_knob and recipe.get(graphs_knob))
        #: the graphs' private pool, which only deleting the graphs frees
        self.graph_pool = (
            cuda.workspace(int(graph_pool_share * capacity))
            if self.replays_graphs and graph_pool_share
            else None
        )

    def run_steps(self, n: int, *, measure_phases: bool) -> list[JobStep]:
        threads = torch.get_num_threads()
        # One thread: the model is tiny, and waking a second one on a loaded 2-core host
        # costs more than the step (the step times are modelled, not measured).
        torch.set_num_threads(1)
        try:
            return self._run_steps(n)
        finally:
            torch.set_num_threads(threads)

    def _run_steps(self, n: int) -> list[JobStep]:
        steps = []
        for _ in range(n):
            work = self.cuda.workspace(self.workspace_bytes)  # this step's activations
            x = torch.randn(4, self.width, generator=self.data)
            h = self.base_model(x) if self.base_model is not None else x
            loss = (self.raw_model(h) - x).pow(2).mean()
            loss.backward()
            for p in self.raw_model.parameters():
                self.cuda.adopt(p.grad)  # autograd allocated it on the device
            self.optimizer.step()
            for state in self.optimizer.state.values():
                for value in state.values():
                    if isinstance(value, torch.Tensor):
                        self.cuda.adopt(value)  # the momentum buffer, on the device
            self.optimizer.zero_grad(set_to_none=False)  # gradients stay allocated
            del work
            seconds = self.step_s * float(self.rng.lognormal(0.0, self.noise))
            steps.append(JobStep(seconds, float(loss.detach()), self.batch))
        return steps

    def peak_memory_bytes(self) -> int:
        return self.cuda.reserved


def make_job(
    workload: str, recipe: dict[str, Any], *, device: str, seed: int, **options: Any
) -> FakeGpuJob:
    return FakeGpuJob(recipe, seed=seed, **options)
