"""channels_last memory format for convolutional (vision) workloads."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from torchdoctor.knobs.base import ApplicabilityContext, Choice, Knob, KnobValue
from torchdoctor.knobs.parts import (
    Ladder,
    ModelLine,
    ModelTransform,
    Script,
    ScriptSite,
    ServedAs,
    Serving,
)

if TYPE_CHECKING:
    from torch import nn

    from torchdoctor.knobs.context import FoundModel, ModelContext


def _vision_only(ctx: ApplicabilityContext) -> str | None:
    if ctx.workload_kind is not None and ctx.workload_kind != "vision":
        return f"it acts on 4-D image tensors and workload kind is '{ctx.workload_kind}'"
    return None


CHANNELS_LAST = Knob(
    name="channels_last",
    family="memory_format",
    description="NHWC layout for conv weights and images (faster conv kernels).",
    code_change=(
        "model = model.to(memory_format=torch.channels_last); "
        "x = x.to(memory_format=torch.channels_last)"
    ),
    safety="exact",
    domain=Choice((False, True)),
    default=False,
    not_applicable=_vision_only,
    applies_to=ModelTransform("raw", order=0, apply=lambda m, v, ctx: _channels_last(m, v, ctx)),
    write_back=ModelLine(
        lambda value, recipe: "model = model.to(memory_format=torch.channels_last)",
        order=0,
        also=(
            "before the forward call, for each 4-D image batch",
            "images = images.to(memory_format=torch.channels_last)",
        ),
    ),
    ladder=Ladder(gpu=20, cpu=30, joint=True),
    script=Script(
        site=ScriptSite.MODEL,
        unchanged=(False,),
        on_model=lambda value, found: _channels_last_found(value, found),
    ),
    serving=Serving(
        (
            ServedAs(
                "channels_last",
                True,
                rank=140,
                description="model and 4-D inputs in channels_last (NHWC) memory format; 4-D "
                "inputs only",
            ),
        ),
        lambda model, value, device_type, args: _serve_channels_last(model, args),
    ),
)

KNOBS = (CHANNELS_LAST,)


#: Fewest input channels a stride-2 1x1 convolution may have for oneDNN to train it in
#: channels_last on a CPU. With fewer than its kernel's channel block (8 floats on AVX2, 16 on
#: AVX-512) the NHWC backward of the weights writes past its workspace and hangs, crashes or
#: returns wrong gradients, depending on the thread count (uxlfoundation/oneDNN issue #6035,
#: open; a width-4 cnn hung a test here in `jit_avx2_1x1_convolution_bwd_weights_t`). 16 holds
#: on both instruction sets.
MIN_STRIDED_1X1_IN_CHANNELS: Final = 16


def channels_last_hazard(model: nn.Module, device_type: str) -> str | None:
    """Why training `model` in channels_last on `device_type` is unsafe, or None.

    On a CPU, a stride > 1, 1x1, ungrouped Conv2d with fewer than `MIN_STRIDED_1X1_IN_CHANNELS`
    input channels (a narrow ResNet shortcut) is what oneDNN's NHWC backward mishandles; other
    devices run other kernels.
    """
    if device_type != "cpu":
        return None
    from torch import nn

    for name, module in model.named_modules():
        if (
            isinstance(module, nn.Conv2d)
            and module.kernel_size == (1, 1)
            and max(module.stride) > 1
            and module.groups == 1
            and module.in_channels < MIN_STRIDED_1X1_IN_CHANNELS
        ):
            return (
                f"its stride-{max(module.stride)} 1x1 convolution '{name or type(model).__name__}' "
                f"has {module.in_channels} input channels (fewer than "
                f"{MIN_STRIDED_1X1_IN_CHANNELS}), whose channels_last backward on a CPU hangs "
                "or computes wrong gradients (oneDNN issue #6035)"
            )
    return None


def _channels_last(model: nn.Module, value: KnobValue, ctx: ModelContext) -> nn.Module:
    """The model in channels_last; KnobNotApplicable where oneDNN would mistrain it."""
    if not value:
        return model
    hazard = channels_last_hazard(model, ctx.device_type)
    if hazard is not None:
        raise CHANNELS_LAST.refusal(True, hazard)
    return model_to_channels_last(model)


def model_to_channels_last(model: nn.Module) -> nn.Module:
    import torch

    return model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]


def inputs_to_channels_last(inputs: Any) -> Any:
    """Every 4-D floating-point tensor in a (nested tuple/list/dict of) inputs in channels_last.

    Integer 4-D tensors (indices, masks) are left as they are: only the convolution inputs the
    model's channels_last weights meet gain from the layout.
    """
    import torch

    if isinstance(inputs, torch.Tensor):
        if inputs.dim() == 4 and inputs.is_floating_point():
            return inputs.contiguous(memory_format=torch.channels_last)
        return inputs
    if isinstance(inputs, tuple | list):
        return type(inputs)(inputs_to_channels_last(x) for x in inputs)
    if isinstance(inputs, dict):
        return {k: inputs_to_channels_last(v) for k, v in inputs.items()}
    return inputs


def has_4d_float(value: Any) -> bool:
    """Whether a (nested tuple/list/dict of) inputs holds a 4-D floating-point tensor."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.dim() == 4 and value.is_floating_point()
    if isinstance(value, tuple | list):
        return any(has_4d_float(v) for v in value)
    if isinstance(value, dict):
        return any(has_4d_float(v) for v in value.values())
    return False


def _channels_last_found(value: KnobValue, found: FoundModel) -> None:
    """A script's trained model in channels_last, and its forward's 4-D inputs with it, where
    its first call has such an input and oneDNN would not mistrain it."""
    hazard = channels_last_hazard(found.model, found.device_type)
    if hazard is not None:
        found.skipped(CHANNELS_LAST.name, hazard)
    elif has_4d_float((found.args, dict(found.kwargs))):
        model_to_channels_last(found.model)  # in place: the script keeps its module
        found.channels_last = True
        found.applied(
            CHANNELS_LAST.name, found.at_call(f"{found.name} and its 4-D inputs channels_last")
        )
    else:
        found.skipped(
            CHANNELS_LAST.name,
            f"the first training call of {found.name} has no 4-D floating-point input",
        )


def _serve_channels_last(
    model: nn.Module, args: tuple[Any, ...]
) -> Callable[[tuple[Any, ...]], Any]:
    """A served model in channels_last, each request's 4-D inputs converted as it arrives."""
    import torch

    if not any(isinstance(a, torch.Tensor) and a.dim() == 4 for a in args):
        shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
        raise CHANNELS_LAST.refusal(
            True, f"channels_last acts on 4-D inputs; the model's inputs are {shapes}"
        )
    model = model_to_channels_last(model)

    def forward(args: tuple[Any, ...]) -> Any:
        # The layout change is part of each request's cost: a request arrives in NCHW.
        return model(*inputs_to_channels_last(args))

    return forward
