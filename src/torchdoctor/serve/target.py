"""What is served: a model in eval mode on a device, its example inputs, and requests.

A built-in workload gives its model through `workloads.ModelSpec` (the model side of a
workload, without its training) and the recipe's model transforms through
`knobs.apply_to_model`, as a training session applies them. A user's model is
`path/to/model.py:make_model`, where `make_model()` returns `(module, example_inputs)`;
`example_inputs` is one batch (a tensor or a tuple of tensors, batch dimension first).

A factory that fails, or a model whose eval-mode forward fails on its example inputs, is a
`WorkloadError`: one line and exit code 2 from the CLI, before anything is measured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from torchdoctor.core.errors import WorkloadError
from torchdoctor.knobs import CALLED, RAW, ModelContext, Recipe, apply_to_model
from torchdoctor.measure import make_sync
from torchdoctor.workloads import (
    ModelSpec,
    example_inputs,
    get_workload,
    import_factory,
    move_to_device,
)

Request = Callable[[], object]


@dataclass
class InferenceTarget:
    """A model ready to serve: eval mode, on its device, with one example batch."""

    name: str
    model: nn.Module
    inputs: Any
    device: str
    #: What `load_target` was given (a workload's name or file.py:factory), from which another
    #: process builds the same target (the instances curve); None: built in this process only.
    spec: str | None = None

    @property
    def example_batch_size(self) -> int:
        first = self.inputs[0] if isinstance(self.inputs, tuple | list) else self.inputs
        return int(first.shape[0]) if isinstance(first, torch.Tensor) and first.dim() else 1

    def batch(self, size: int) -> Any:
        """The example inputs resized to `size` rows (cut, or repeated along dim 0)."""
        return _resize(self.inputs, size)

    def request(self, size: int = 1) -> Request:
        """A zero-argument call that serves one batch of `size` requests."""
        model, args = self.model, self.batch(size)

        def call() -> object:
            with torch.inference_mode():
                return model(*args) if isinstance(args, tuple) else model(args)

        return call

    def sync(self) -> Callable[[], None]:
        return make_sync(self.device)


def _resize(value: Any, size: int) -> Any:
    if isinstance(value, torch.Tensor):
        if value.dim() == 0:
            return value
        reps = -(-size // value.shape[0])
        grown = value.repeat(reps, *([1] * (value.dim() - 1))) if reps > 1 else value
        return grown[:size].contiguous()
    if isinstance(value, tuple | list):
        return type(value)(_resize(v, size) for v in value)
    return value


def load_target(spec: str, *, device: str = "cpu", batch_size: int = 1) -> InferenceTarget:
    """A built-in workload's name or `file.py:factory`, built, checked in eval mode."""
    if ":" in spec and spec.rpartition(":")[0].endswith(".py"):
        model, inputs = _from_factory(spec)
        name = spec
    else:
        model, inputs = _from_spec(get_workload(spec), device, batch_size)
        name = spec
    dev = torch.device(device)
    try:
        model = model.to(dev).eval()
    except Exception as exc:
        raise WorkloadError(f"model {name!r} cannot move to {device}: {exc}") from exc
    target = InferenceTarget(
        name, model, move_to_device(inputs, dev, non_blocking=False), device, spec=spec
    )
    try:
        target.request(target.example_batch_size)()
        target.sync()()
    except Exception as exc:
        raise WorkloadError(
            f"model {name!r} fails in eval mode: {type(exc).__name__}: {exc}",
            hint="check that its forward runs under model.eval() on the example inputs",
        ) from exc
    return target


def _from_spec(spec: ModelSpec, device: str, batch_size: int) -> tuple[nn.Module, Any]:
    """The spec's model with the default recipe's model transforms, and its inputs."""
    settings = Recipe().resolved(torch.device(device).type)
    ctx = ModelContext(device_type=torch.device(device).type, settings=settings)
    model = apply_to_model(spec.build_model(), ctx, RAW)
    model = apply_to_model(model, ctx, CALLED)
    return model, example_inputs(spec, batch_size)


def _from_factory(spec: str) -> tuple[nn.Module, Any]:
    path_text, _, factory_name = spec.rpartition(":")
    factory = import_factory(
        Path(path_text),
        factory_name,
        noun="model",
        hint="name a function that returns (module, example_inputs)",
    )
    try:
        made = factory()
    except WorkloadError:
        raise
    except Exception as exc:
        raise WorkloadError(f"model factory '{spec}' failed: {type(exc).__name__}: {exc}") from exc
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], nn.Module)):
        raise WorkloadError(
            f"model factory '{spec}' returned {type(made).__name__}, not (module, example_inputs)",
            hint="return the nn.Module and one batch of its inputs",
        )
    return made[0], made[1]


__all__ = ["InferenceTarget", "Request", "load_target"]
