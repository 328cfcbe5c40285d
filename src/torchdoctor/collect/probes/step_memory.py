"""`MemoryProbe`: memory to its owners in a script we did not write, for one steady step.

The same measurement as a workload's (`collect/tensor_memory.StepMeter`): parameters,
gradients and optimizer state from the tensors, the activations saved for backward, the
temporaries and, on a GPU, the caching allocator's slack. What the engine knows of a workload,
the script's model and optimizer, is found as the tuner's parking finds it
(`collect/control.py`): the optimizers are those whose step the global torch.optim hooks see,
the parameters theirs, and the buffers those of the modules that own one of the parameters,
read once from the garbage collector's objects at the boundary before the measured step.

Which step: the last warm-up step (index `warmup - 1`). By then the optimizer's state exists
(its first step made it) and the step allocates as every later one; the steady-step
statistics skip it (they start after warm-up), the line sampler is told to skip it, and the
profiled window starts after it ends. Counting every op through a dispatch mode makes that
one step slower, which is why it is no steady one. A step of a script that compiled a model
or captured CUDA graphs is not measured (the dispatch mode would see none of the graph's
allocations, or break the capture), nor a script with no torch.optim optimizer (its parameters
are unknown), nor with fewer than two warm-up steps; `skipped` says why.

On a GPU the step's peak is the caching allocator's, read after `reset_peak_memory_stats`: a
script that reads `torch.cuda.max_memory_allocated()` over its whole run sees the peak since
that step (the tuner's driven scripts, whose chunks reset it alike, never run this probe).
"""

from __future__ import annotations

import gc
import sys
import weakref
from typing import Any, Final

import torch
import torch.optim.optimizer as optim_mod
from torch.nn.modules import module as module_mod

from torchdoctor.collect.probes import ProbeSite
from torchdoctor.collect.step_recorder import StepRecorder
from torchdoctor.collect.tensor_memory import StepMeter
from torchdoctor.core.memory_owners import StepMemory
from torchdoctor.core.sharded import gathered_parameters

#: Warm-up steps needed before the measured one: the first makes the optimizer's state.
MIN_WARMUP: Final = 2

NO_OPTIMIZER: Final = "the script stepped no torch.optim optimizer, so its parameters are unknown"
COMPILED: Final = (
    "the script runs torch.compile'd code, whose allocations the tensor count does not see"
)
GRAPHED: Final = "the script captured CUDA graphs, which a counted step would break"


def _compiled_graphs() -> int:
    """The graphs dynamo has compiled in this process so far (0 until it is loaded)."""
    if "torch._dynamo" not in sys.modules:
        return 0
    return int(sys.modules["torch._dynamo"].utils.counters["stats"]["unique_graphs"])


def _graphed() -> bool:
    return (
        torch.cuda.is_available()
        and torch.cuda.is_initialized()
        and any(issubclass(type(o), torch.cuda.CUDAGraph) for o in gc.get_objects())
    )


class MemoryProbe:
    """Measures step `warmup - 1` (module docstring); `step_memory` holds it afterwards."""

    def __init__(self, recorder: StepRecorder, *, warmup: int) -> None:
        self.recorder = recorder
        #: The 0-based index of the step measured (None when no step is).
        self.step_index: int | None = warmup - 1 if warmup >= MIN_WARMUP else None
        self.step_memory: StepMemory | None = None
        self.skipped: str | None = None if warmup >= MIN_WARMUP else "no warm-up step to measure"
        self._optimizers: weakref.WeakSet[Any] = weakref.WeakSet()
        self._meter: StepMeter | None = None
        self._batch: int | None = None
        self._forward_hook: Any = None
        self._device = torch.device("cpu")
        self._graphs_before = 0

    def install(self, site: ProbeSite) -> None:
        # What was compiled before the script ran (a notebook's earlier cells) is not its.
        self._graphs_before = _compiled_graphs()
        site.handles.append(optim_mod.register_optimizer_step_pre_hook(self._pre))

    def _pre(self, opt: Any, _args: Any, _kwargs: Any) -> None:
        self._optimizers.add(opt)
        if self._meter is not None:
            self._meter.end_forward_backward()

    def _first_input(self, _module: Any, args: Any) -> None:
        # The outermost module runs first: its first tensor argument's leading dimension is
        # the batch when no DataLoader says it.
        if self._batch is None:
            first = next((a for a in args if isinstance(a, torch.Tensor)), None)
            if first is not None and first.dim() > 0:
                self._batch = int(first.shape[0])

    def on_step_end(self) -> None:
        closed = self.recorder.closed_count
        if self._meter is not None:
            self._finish()
        elif self.step_index is not None and closed == self.step_index and self.skipped is None:
            self._start()

    def _start(self) -> None:
        optimizers = list(self._optimizers)
        why = NO_OPTIMIZER if not optimizers else None
        compiled = _compiled_graphs() > self._graphs_before
        why = why or (COMPILED if compiled else None) or (GRAPHED if _graphed() else None)
        if why is not None:
            self.skipped = why
            return
        params = [p for opt in optimizers for g in opt.param_groups for p in g["params"]]
        ids = {id(p) for p in params}
        every = [o for o in gc.get_objects() if issubclass(type(o), torch.nn.Module)]
        modules = [o for o in every if any(id(p) in ids for p in o.parameters(recurse=False))]
        buffers = [b for m in modules for b in m.buffers(recurse=False)]
        self._device = params[0].device if params else torch.device("cpu")
        cuda = self._device.type == "cuda"
        self._meter = StepMeter(
            weights=[*params, *buffers],
            trainable=[p for p in params if p.requires_grad],
            optimizers=optimizers,
            device=self._device,
            allocator=torch.cuda if cuda else None,
            gathered=gathered_parameters(every, recurse=False),
        )
        self._forward_hook = module_mod.register_module_forward_pre_hook(self._first_input)
        self._meter.begin()

    def _finish(self) -> None:
        meter, self._meter = self._meter, None
        assert meter is not None
        if self._forward_hook is not None:
            self._forward_hook.remove()
            self._forward_hook = None
        batch = self.recorder.last_samples or self._batch or 0
        self.step_memory = meter.end(batch_size=batch, device=str(self._device))

    def uninstall(self) -> None:
        """A script that ended inside the measured step: nothing is measured."""
        if self._meter is not None:
            self._meter.abort()
            self._meter = None
            self.skipped = "the script ended inside the measured step"
        if self._forward_hook is not None:
            self._forward_hook.remove()
            self._forward_hook = None
