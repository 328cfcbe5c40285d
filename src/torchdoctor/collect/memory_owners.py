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
from collections.abc import Sequence
from typing import Any

import torch

from torchdoctor.collect.tensor_memory import (
    AllocatorStats,
    Listener,
    LiveTensorBytes,
    SavedActivations,
    StepMeter,
    storage_keys,
    unique_bytes,
)
from torchdoctor.core.errors import UsageError
from torchdoctor.core.memory_owners import StepMemory
from torchdoctor.engine import prepare
from torchdoctor.knobs import CALLED, Recipe, get_knob, model_transforms
from torchdoctor.workloads import Workload

__all__ = [
    "WARMUP_STEPS",
    "AllocatorStats",
    "Listener",
    "LiveTensorBytes",
    "SavedActivations",
    "StepMeter",
    "measure_step_memory",
    "storage_keys",
    "unique_bytes",
]

#: Steps run before the measured one: the first creates the optimizer's state (Adam's moments),
#: after which every step allocates alike.
WARMUP_STEPS = 1


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
    # The knobs that give the steps another module to call (the called stage's transforms:
    # compile, cuda_graphs): the tensor count runs every op through a dispatch mode, which
    # compiled graphs and captured CUDA graphs bypass or refuse.
    called = [get_knob(name) for name, _ in model_transforms(CALLED)]
    if any(resolved.get(k.name, k.default) != k.default for k in called):
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
        meter = StepMeter(
            weights=[*model.parameters(), *model.buffers()],
            trainable=[p for p in model.parameters() if p.requires_grad],
            optimizers=[optimizer],
            device=session.device,
            allocator=allocator,
            listeners=listeners,
        )

        def before_optimizer(*_: Any) -> None:
            meter.end_forward_backward()

        hook = optimizer.register_step_pre_hook(before_optimizer)
        try:
            meter.begin()
            try:
                session.run_steps(1, measure_phases=False)
            except BaseException:
                meter.abort()
                raise
            return meter.end(batch_size=batch_size, device=str(session.device))
        finally:
            hook.remove()
    finally:
        session.close()
