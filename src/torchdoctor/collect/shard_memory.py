"""What the per-rank memory arithmetic needs of a workload, read without materialising it; and
the measured peak of a real FSDP2 step to hold the arithmetic to.

- `model_shape`: each `fully_shard` unit's parameters (shapes only), the buffers, the
  optimizer's kind, from a model built on the `meta` device: a 7B-shaped model costs no memory.
- `fake_activations`: the activations and the backward's temporaries of one step, measured by
  torch's `MemTracker` on a model built under `FakeTensorMode` in the mixed-precision policy's
  parameter dtype (as FSDP2 computes), at two batch sizes: at the step's peak and as each
  gradient lands, with the share of the gradients landed by then (the sharded gradients a
  rank holds at that moment under FSDP2). A fake tensor has a shape, a dtype and a storage
  size but no data, so a step of a model of billions of parameters runs on a CPU in tens of
  seconds (a 6.5B gpt's two fake steps: benchmarks/bench_shard_memory.py; the tracker's cost
  per op grows with the model's modules). Each gradient is dropped as it lands: under FSDP2
  a unit's unsharded gradients are reduce-scattered and freed in the backward. The fake model
  is built in the policy's dtype whole, its buffers too, where FSDP2 leaves buffers in theirs.
- `measure_sharded_step`: in a rank of an initialised process group, the workload sharded as
  the arithmetic assumes (each of its blocks a unit, the root last, a bf16
  `MixedPrecisionPolicy`), one warm-up step, then one step under torch's `FSDPMemTracker`,
  which counts the local tensors beneath the DTensors; its peak is the measured figure.

The units are the workload's blocks (`checkpoint_blocks`, the transformer blocks torchtitan
shards one by one), the root owning the rest; a workload without blocks is one unit.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_map_only

from torchdoctor.core.errors import UsageError
from torchdoctor.core.shard_memory import ModelShape, ShardedParameter, ShardUnit
from torchdoctor.workloads import Workload, collate_first

#: The fake steps' batch sizes: activations are linear in the batch (every op's saved output
#: scales with it), so two points fix the line, and the smallest cost least.
FAKE_BATCHES = (1, 2)

#: Parameter dtypes a mixed-precision policy may name, by their command-line spelling.
PARAM_DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp32": torch.float32,
}


def param_dtype_of(name: str) -> torch.dtype:
    """'bf16' -> torch.bfloat16; a UsageError naming the choices otherwise."""
    try:
        return PARAM_DTYPES[name]
    except KeyError:
        raise UsageError(
            f"unknown parameter dtype {name!r}", hint=f"one of {', '.join(PARAM_DTYPES)}"
        ) from None


def shard_units(workload: Workload, model: nn.Module) -> list[nn.Module]:
    """The modules given their own `fully_shard`, root excluded: the workload's blocks."""
    blocks = getattr(workload, "checkpoint_blocks", None)
    return list(blocks(model)) if callable(blocks) else []


def _optimizer_states(optimizer: torch.optim.Optimizer) -> tuple[int, int]:
    """(state tensors per parameter element, scalar states per parameter) by the optimizer's
    kind, from torch.optim's own `step` code: Adam and AdamW keep `exp_avg` and `exp_avg_sq`
    (and `max_exp_avg_sq` with amsgrad) and a `step` scalar; SGD a `momentum_buffer` when
    momentum is not 0; Adagrad a `sum` and a `step`; RMSprop `square_avg`, a
    `momentum_buffer` with momentum, a `grad_avg` when centered, and a `step`."""
    defaults = optimizer.defaults
    if isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW):
        return 2 + int(bool(defaults.get("amsgrad"))), 1
    if isinstance(optimizer, torch.optim.SGD):
        return int(defaults.get("momentum", 0) != 0), 0
    if isinstance(optimizer, torch.optim.Adagrad):
        return 1, 1
    if isinstance(optimizer, torch.optim.RMSprop):
        states = 1 + int(defaults.get("momentum", 0) != 0) + int(bool(defaults.get("centered")))
        return states, 1
    raise UsageError(
        f"no per-rank arithmetic for {type(optimizer).__name__}'s state",
        hint="the estimate knows Adam, AdamW, SGD, Adagrad and RMSprop",
    )


def model_shape(
    model: nn.Module, units: Sequence[nn.Module], optimizer: torch.optim.Optimizer
) -> ModelShape:
    """The model's units, buffers and optimizer state, from shapes alone (works on `meta`)."""
    seen: set[int] = set()
    records = []
    for name, module in [
        *((_name_of(model, u), u) for u in units),
        ("", model),
    ]:
        params = []
        for pname, p in module.named_parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            rows = p.shape[0] if p.dim() > 0 else 1
            params.append(ShardedParameter(name=pname, rows=rows, numel=p.numel()))
        records.append(ShardUnit(name=name, parameters=params))
    first = next(model.parameters(), None)
    if first is None:
        raise UsageError("the model has no parameters to shard")
    states, scalars = _optimizer_states(optimizer)
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return ModelShape(
        units=records,
        parameter_bytes=first.element_size(),
        buffers_bytes=buffers,
        optimizer=type(optimizer).__name__,
        states_per_element=states,
        state_bytes=first.element_size(),
        scalar_states_per_parameter=scalars,
    )


def _name_of(root: nn.Module, module: nn.Module) -> str:
    return next((name for name, m in root.named_modules() if m is module), "")


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    # The model is built in the policy's dtype rather than cast after (`.to()` cannot swap a
    # tied parameter of a fake model): its parameters are created as FSDP2 all-gathers them.
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def meta_shape(workload: Workload) -> ModelShape:
    """The workload's shape, its model and optimizer built on the `meta` device."""
    with torch.device("meta"):
        model = workload.build_model()
        optimizer = workload.build_optimizer(model.parameters(), "for_loop")
    return model_shape(model, shard_units(workload, model), optimizer)


def _cast_floating(value: Any, dtype: torch.dtype) -> Any:
    # FSDP2's root casts its floating forward inputs to the policy's param_dtype
    # (`MixedPrecisionPolicy.cast_forward_inputs`, True by default).
    return tree_map_only(torch.Tensor, lambda t: t.to(dtype) if t.is_floating_point() else t, value)


#: One moment of a fake step: (activations and temporaries alive, bytes; the share of the
#: parameters' elements whose gradients have landed by then, 0..1).
Moment = tuple[int, float]


class _Timeline:
    """The moments of one fake backward, sampled as each gradient lands, and the peak's.

    A gradient's landing is a hook (`register_post_accumulate_grad_hook`): there the tracker's
    current and peak figures are read, and the gradient dropped. The peak's moment is the
    tracker's peak with the gradients that had landed before it (the peak grew between the
    previous landing and this one)."""

    def __init__(self, total: int) -> None:
        self.total = max(1, total)
        self.tracker: Any = None
        self.done = 0
        self.last_peak = 0
        self.peak: Moment = (0, 0.0)
        self.moments: list[Moment] = []

    @staticmethod
    def _held(snapshot: dict[Any, dict[Any, int]]) -> tuple[int, int]:
        figures = {str(getattr(k, "value", k)): v for k, v in next(iter(snapshot.values())).items()}
        total = figures["Total"]
        return total, total - figures.get("Parameter", 0) - figures.get("Buffer", 0)

    def _check_peak(self) -> None:
        total, held = self._held(self.tracker.get_tracker_snapshot("peak"))
        if total > self.last_peak:
            self.peak = (held, self.done / self.total)
            self.last_peak = total

    def landed(self, param: torch.Tensor) -> None:
        self._check_peak()
        _, now = self._held(self.tracker.get_tracker_snapshot("current"))
        self.done += param.numel()
        self.moments.append((now, self.done / self.total))
        # Under FSDP2 a unit's unsharded gradients leave in its reduce-scatter: none
        # accumulate here; the sharded ones are the arithmetic's (`gradients_done`).
        param.grad = None

    def finish(self) -> list[Moment]:
        self._check_peak()
        return [self.peak, *self.moments]


def fake_activations(
    workload: Workload,
    *,
    param_dtype: torch.dtype = torch.bfloat16,
    batch_sizes: Sequence[int] = FAKE_BATCHES,
    seed: int = 0,
) -> dict[int, list[Moment]]:
    """The moments of one fake step at each batch size: first the peak, then one as each
    gradient lands, in the backward's order (the same at every batch size). A moment's
    bytes are the tracker's figure less the parameters and buffers: activations, the
    backward's temporaries and the gradient landing."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    dataset = workload.build_dataset(seed)
    size = len(dataset) if hasattr(dataset, "__len__") else None
    if size is not None and size < max(batch_sizes):
        raise UsageError(
            f"{workload.name}'s dataset has {size} samples, fewer than the fake steps' "
            f"batch of {max(batch_sizes)}",
            hint="give the workload a larger dataset (--param rows=... or characters=...)",
        )
    batches = [collate_first(dataset, b) for b in batch_sizes]
    found: dict[int, list[Moment]] = {}
    with FakeTensorMode(allow_non_fake_inputs=False) as fake:
        with _default_dtype(param_dtype):
            model = workload.build_model()
        params = [p for p in model.parameters() if p.requires_grad]
        for size_of, (inputs, target) in zip(batch_sizes, batches, strict=True):
            fake_in = _cast_floating(
                tree_map_only(torch.Tensor, fake.from_tensor, inputs), param_dtype
            )
            fake_target = fake.from_tensor(target)
            timeline = _Timeline(sum(p.numel() for p in params))
            hooks = [p.register_post_accumulate_grad_hook(timeline.landed) for p in params]
            timeline.tracker = tracker = MemTracker()
            tracker.track_external(model, fake_in, fake_target)
            try:
                with tracker, warnings.catch_warnings():
                    # The tracker is handed the gradients the hooks have just dropped.
                    warnings.filterwarnings("ignore", message="Expected a tensor or a traceable")
                    workload.loss(model(fake_in), fake_target).backward()
            finally:
                for hook in hooks:
                    hook.remove()
            found[size_of] = timeline.finish()
    return found


def measure_sharded_step(
    workload: Workload,
    batch: int,
    *,
    param_dtype: torch.dtype = torch.bfloat16,
    seed: int = 0,
) -> dict[str, int]:
    """In a rank of an initialised process group: the peak of one steady FSDP2 step, by owner.

    Returns `FSDPMemTracker`'s peak snapshot of the CPU ("Total" and each category: sharded
    and unsharded parameters and gradients, activations, temporaries, all-gather and
    reduce-scatter buffers, optimizer state, inputs), in bytes.
    """
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    torch.manual_seed(seed)
    model = workload.build_model()
    policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    for unit in shard_units(workload, model):
        fully_shard(unit, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    optimizer = workload.build_optimizer(model.parameters(), "for_loop")
    inputs, target = collate_first(workload.build_dataset(seed), batch)

    def step() -> None:
        workload.loss(model(inputs), target).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # the warm-up: the optimizer's state is made
    tracker = FSDPMemTracker(model, optimizer)
    tracker.track_inputs((inputs, target))
    with tracker:
        step()
    peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
    return {str(getattr(k, "value", k)): int(v) for k, v in peak.items()}
