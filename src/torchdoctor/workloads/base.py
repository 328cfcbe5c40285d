"""What a model is (`ModelSpec`), and what training it adds (`Workload`).

A `ModelSpec` builds a model and says what it takes: its kind, its inputs' shapes, a batch
size, how a batch goes to a device. An inference session needs no more. A `Workload` extends it
with training: a dataset, a loss and an optimizer. The recipe's knobs apply to the model the
spec builds with `torchdoctor.knobs.apply_to_model`, the same for both.

A batch is a pair `(inputs, target)`; the engine calls `model(inputs)` and then
`workload.loss(output, target)`. `inputs` may be a tensor or a tuple of tensors.

Optional hooks, looked up with getattr so a user's workload may leave them out:

- `example_inputs(batch_size) -> inputs`: one batch of the model's inputs (the built-in
  workloads take it from their dataset: `SyntheticWorkload.example_inputs`);
- `eval_metric(output, target) -> float`: a quality number (accuracy, perplexity, ...);
- `checkpoint_blocks(model) -> Sequence[nn.Module]`: the blocks activation checkpointing wraps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import torch
from torch import nn
from torch.utils.data import Dataset

WorkloadKind = Literal["vision", "language", "tabular", "recsys"]
WORKLOAD_KINDS: tuple[WorkloadKind, ...] = ("vision", "language", "tabular", "recsys")

Batch = tuple[Any, torch.Tensor]


@runtime_checkable
class ModelSpec(Protocol):
    """A model and what it takes: the part of a workload that training and inference share."""

    name: str
    description: str
    kind: WorkloadKind
    #: What one sample is, for people: "a 32x32 RGB image", "a sequence of 64 characters".
    sample_unit: str
    #: Tokens in one sample (language workloads), else None: tokens/s = samples/s * this.
    tokens_per_sample: int | None
    #: Shape of one sample's inputs (without the batch dimension), by input name.
    input_shapes: Mapping[str, tuple[int, ...]]
    default_batch_size: int

    def build_model(self) -> nn.Module: ...

    def to_device(self, batch: Batch, device: torch.device, *, non_blocking: bool) -> Batch: ...


@runtime_checkable
class Workload(ModelSpec, Protocol):
    """A training job: a `ModelSpec` plus data, loss and optimizer factories."""

    default_num_workers: int

    def build_dataset(self, seed: int) -> Dataset[Any]: ...

    def loss(self, output: Any, target: torch.Tensor) -> torch.Tensor: ...

    def build_optimizer(self, params: Iterable[nn.Parameter], impl: str) -> torch.optim.Optimizer:
        """`impl` is one of "for_loop", "foreach", "fused" (see torchdoctor.core.optimizer)."""
        ...


def example_inputs(spec: ModelSpec, batch_size: int | None = None, *, seed: int = 0) -> Any:
    """One batch of `spec`'s model inputs: its own `example_inputs` hook, else the first
    samples of a workload's dataset, collated (a spec with neither has none to give)."""
    n = batch_size or spec.default_batch_size
    hook = getattr(spec, "example_inputs", None)
    if callable(hook):
        return hook(n)
    if not isinstance(spec, Workload):
        raise TypeError(f"{spec.name} has no example_inputs(batch_size) and no dataset")
    return collate_first(spec.build_dataset(seed), n)[0]


def collate_first(dataset: Dataset[Any], n: int) -> Batch:
    """The first `n` samples of `dataset` as one batch, as a DataLoader collates them."""
    from torch.utils.data import default_collate

    batch: Batch = default_collate([dataset[i] for i in range(n)])
    return batch


def move_to_device(value: Any, device: torch.device, *, non_blocking: bool) -> Any:
    """Copy every tensor in a (nested tuple/list/dict) value to `device`."""
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=non_blocking)
    if isinstance(value, tuple | list):
        return type(value)(move_to_device(v, device, non_blocking=non_blocking) for v in value)
    if isinstance(value, dict):
        return {k: move_to_device(v, device, non_blocking=non_blocking) for k, v in value.items()}
    return value


class SyntheticWorkload:
    """Shared behaviour of the built-in workloads (subclasses set the metadata)."""

    name: str
    description: str
    kind: WorkloadKind
    sample_unit: str
    tokens_per_sample: int | None = None
    input_shapes: Mapping[str, tuple[int, ...]]
    default_batch_size: int
    default_num_workers: int = 0
    #: The constructor's arguments, each kept as an attribute of the same name, that `params`
    #: reads back; `batch_size`, kept as `default_batch_size`, comes last.
    param_names: ClassVar[tuple[str, ...]] = ()

    def build_dataset(self, seed: int) -> Dataset[Any]:
        raise NotImplementedError  # each built-in workload builds its own

    def example_inputs(self, batch_size: int) -> Any:
        """The first `batch_size` samples of the seed-0 dataset's inputs."""
        return collate_first(self.build_dataset(0), batch_size)[0]

    def to_device(self, batch: Batch, device: torch.device, *, non_blocking: bool) -> Batch:
        inputs, target = batch
        return (
            move_to_device(inputs, device, non_blocking=non_blocking),
            target.to(device, non_blocking=non_blocking),
        )

    @property
    def params(self) -> dict[str, Any]:
        """The workload's parameters (what `get_workload(name, **params)` accepted)."""
        if not self.param_names:
            return {}
        return {
            **{name: getattr(self, name) for name in self.param_names},
            "batch_size": self.default_batch_size,
        }

    def with_params(self, **changes: Any) -> SyntheticWorkload:
        """The same workload built with some parameters changed (a recipe's
        `WorkloadParameter` knobs: `knobs.workload.workload_under`)."""
        return type(self)(**{**self.params, **changes})

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"
