"""How each inference variant is applied to a copy of a model (`Build` functions), and the
fp32 islands a per-module fallback puts in a lower-precision model.

A build gets a copy it may change (in eval mode unless the variant keeps the caller's mode),
the example arguments and its `Target`, and returns the forward that serves a request. The
variants' catalogue, their tolerances and the accuracy gate are in `serve/variants.py`.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchdoctor.core.errors import KnobNotApplicable, TorchDoctorError
from torchdoctor.knobs import Knob, KnobValue, compile_model

if TYPE_CHECKING:
    import torch
    from torch import nn

Args = tuple[Any, ...]
Forward = Callable[[Args], Any]


class VariantError(TorchDoctorError):
    """An inference variant cannot be prepared, or the model fails as fp32 eager."""


class VariantUnavailable(VariantError):
    """A variant that does not apply here (device, dtype support, the model's inputs)."""

    def __init__(self, variant: str, reason: str, *, hint: str | None = None) -> None:
        super().__init__(f"variant '{variant}' does not apply here: {reason}", hint=hint)
        self.variant = variant
        self.reason = reason


@dataclass(frozen=True)
class Target:
    """Where a variant runs, which modules it keeps in fp32 (their weights taken from
    `original`, the caller's model in fp32, since the copy being built may be cast already),
    and the value given with its name ('threads:4')."""

    device: torch.device
    name: str
    keep_fp32: frozenset[str] = frozenset()
    value: KnobValue = None
    original: nn.Module | None = None

    def keeping(self, names: frozenset[str]) -> Target:
        return dataclasses.replace(self, keep_fp32=names)

    @property
    def device_type(self) -> str:
        return self.device.type


Build = Callable[["nn.Module", Args, Target], Forward]


def as_args(inputs: Any) -> Args:
    """Example inputs as positional arguments: a tuple stays, anything else is one argument."""
    return inputs if isinstance(inputs, tuple) else (inputs,)


def _no_grad(model: nn.Module) -> Forward:
    import torch

    def forward(args: Args) -> Any:
        with torch.no_grad():
            return model(*args)

    return forward


def build_no_grad(model: nn.Module, args: Args, target: Target) -> Forward:
    return _no_grad(model)


def build_inference_mode(model: nn.Module, args: Args, target: Target) -> Forward:
    import torch

    def forward(args: Args) -> Any:
        with torch.inference_mode():
            return model(*args)

    return forward


def compiled(mode: str, options: dict[str, str | int | bool] | None = None) -> Build:
    def build(model: nn.Module, args: Args, target: Target) -> Forward:
        # dynamic=False: specialise on the first shapes, as the compile knob's default does;
        # torch.compile marks a dimension dynamic itself when a second size arrives.
        return _no_grad(compile_model(model, mode, dynamic=False, options=options))

    return build


def build_export(model: nn.Module, args: Args, target: Target) -> Forward:
    import torch

    # The batch dimension is left for export to decide (Dim.AUTO): dynamic where the model
    # allows it, so that a batcher's other batch sizes run the same program.
    dims = tuple(
        {0: torch.export.Dim.AUTO} if isinstance(a, torch.Tensor) and a.dim() > 0 else None
        for a in args
    )
    program = torch.export.export(model, args, dynamic_shapes=dims)
    return _no_grad(program.module())


def build_torchscript(model: nn.Module, args: Args, target: Target) -> Forward:
    import torch

    with warnings.catch_warnings():
        # "torch.jit.trace is deprecated": the variant says so in its description.
        warnings.simplefilter("ignore")
        with torch.no_grad():
            frozen = torch.jit.freeze(torch.jit.trace(model, args))
    return _no_grad(frozen)


def build_int8(model: nn.Module, args: Args, target: Target) -> Forward:
    import torch
    from torch import nn

    if not any(isinstance(m, nn.Linear) for m in model.modules()):
        raise VariantUnavailable(target.name, "the model has no nn.Linear layer to quantize")
    try:
        from torchao.quantization import (  # type: ignore[import-not-found]
            Int8DynamicActivationInt8WeightConfig,
            quantize_,
        )
    except ImportError:
        quantize_ = None
    if quantize_ is not None:
        keep = target.keep_fp32
        quantize_(
            model,
            Int8DynamicActivationInt8WeightConfig(),
            filter_fn=lambda m, fqn: isinstance(m, nn.Linear) and fqn not in keep,
        )
        return _no_grad(model)
    if target.device_type != "cpu":
        raise VariantUnavailable(
            target.name,
            "torch.ao's dynamic int8 kernels (fbgemm, qnnpack) run on a CPU only",
            hint="install torchao for int8 on this device",
        )
    dynamic = getattr(getattr(torch.ao, "quantization", None), "quantize_dynamic", None)
    if dynamic is None:
        raise VariantUnavailable(target.name, "neither torchao nor torch.ao.quantization is here")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notice
        quantized = dynamic(model, {nn.Linear}, dtype=torch.qint8)
    keep_in_fp32(quantized, target, cast_back=False)
    return _no_grad(quantized)


def build_cast(precision: str) -> Build:
    def build(model: nn.Module, args: Args, target: Target) -> Forward:
        import torch

        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        model.to(dtype)
        keep_in_fp32(model, target, cast_back=True)

        def forward(args: Args) -> Any:
            with torch.no_grad():
                return model(*cast_floats(args, dtype))

        return forward

    return build


def build_knob(knob: Knob, value: KnobValue, *, lossy: bool) -> Build:
    """A variant that is a knob: the knob's own serving part (`Knob.serving`) applied to the
    copy under no_grad; a lossy one keeps the fallback's modules in fp32 first. `value`: the
    knob's value there (None: the one given with the name, `Target.value`)."""

    def build(model: nn.Module, args: Args, target: Target) -> Forward:
        import torch

        assert knob.serving is not None  # a variant is built only from a knob that serves
        if lossy:
            keep_in_fp32(model, target, cast_back=False)
        at = target.value if value is None else value
        try:
            inner = knob.serving.forward(model, at, target.device_type, args)
        except KnobNotApplicable as exc:
            raise VariantUnavailable(target.name, exc.reason) from None

        def forward(args: Args) -> Any:
            with torch.no_grad():
                return inner(args)

        return forward

    return build


def cast_floats(value: Any, dtype: torch.dtype) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, tuple | list):
        return type(value)(cast_floats(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: cast_floats(v, dtype) for k, v in value.items()}
    return value


def fp32_island(module: nn.Module, device_type: str, *, cast_back: bool) -> nn.Module:
    """`module` kept in fp32 inside a lower-precision model.

    Its floating inputs are cast to fp32 and autocast is off inside; with `cast_back`, its
    floating outputs go back to its first floating input's dtype, for the next module of a
    model cast to bf16/fp16.
    """
    import torch
    from torch import nn

    class Fp32Island(nn.Module):
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self.inner = inner.float()

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            floats = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
            dtype = floats[0].dtype if floats else torch.float32
            with torch.autocast(device_type, enabled=False):
                out = self.inner(
                    *cast_floats(args, torch.float32), **cast_floats(kwargs, torch.float32)
                )
            return cast_floats(out, dtype) if cast_back else out

    return Fp32Island(module)


def keep_in_fp32(model: nn.Module, target: Target, *, cast_back: bool) -> None:
    """Replace each of `target.keep_fp32`'s modules of `model` with an fp32 island."""
    for name in sorted(target.keep_fp32):
        parent_name, _, leaf = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        source = (target.original or model).get_submodule(name)
        island = fp32_island(copy.deepcopy(source), target.device_type, cast_back=cast_back).to(
            target.device
        )
        setattr(parent, leaf, island)
