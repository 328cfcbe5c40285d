"""channels_last memory format for convolutional (vision) workloads."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from torchdoctor.knobs.base import ApplicabilityContext, Choice, Knob


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
)

KNOBS = (CHANNELS_LAST,)


def model_to_channels_last(model: nn.Module) -> nn.Module:
    return model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]


def inputs_to_channels_last(inputs: Any) -> Any:
    """Every 4-D floating-point tensor in a (nested tuple/list/dict of) inputs in channels_last.

    Integer 4-D tensors (indices, masks) are left as they are: only the convolution inputs the
    model's channels_last weights meet gain from the layout.
    """
    if isinstance(inputs, torch.Tensor):
        if inputs.dim() == 4 and inputs.is_floating_point():
            return inputs.contiguous(memory_format=torch.channels_last)
        return inputs
    if isinstance(inputs, tuple | list):
        return type(inputs)(inputs_to_channels_last(x) for x in inputs)
    if isinstance(inputs, dict):
        return {k: inputs_to_channels_last(v) for k, v in inputs.items()}
    return inputs
