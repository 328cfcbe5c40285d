"""Mixed precision: bf16 or fp16 autocast; fp16 also scales the loss (GradScaler)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torchdoctor.core.gpu import sm_name
from torchdoctor.knobs.base import (
    ApplicabilityContext,
    Choice,
    Knob,
    KnobValue,
    before_ampere,
)
from torchdoctor.knobs.parts import (
    Ladder,
    MemoryStep,
    Script,
    ScriptSite,
    ServedAs,
    Serving,
    Snippet,
    StepSetting,
)

if TYPE_CHECKING:
    import torch
    from torch import nn

    from torchdoctor.knobs.context import FoundModel


def _value_applies(value: KnobValue, ctx: ApplicabilityContext) -> str | None:
    # Before Ampere a CUDA GPU has no bf16 tensor cores: torch emulates bf16 (slower than
    # fp16, often than fp32) or a kernel fails. fp16 runs on tensor cores since Volta (sm_70).
    # bf16 on CPU is left to measurement (with AMX it beats fp32).
    old = before_ampere(ctx)
    if value == "bf16" and old is not None:
        return (
            "bf16 needs a GPU with native bfloat16 (compute capability 8.0+, Ampere or newer); "
            f"this GPU is {sm_name(old)}: use fp16 (with its GradScaler)"
        )
    return None


PRECISION = Knob(
    name="precision",
    family="precision",
    description="Autocast forward/backward in bf16 or fp16 (fp16 adds a GradScaler).",
    code_change=(
        "with torch.autocast(device_type, dtype=torch.bfloat16): loss = model(x)  "
        "(fp16: plus torch.amp.GradScaler around backward/step)"
    ),
    safety="close",
    domain=Choice(("fp32", "bf16", "fp16")),
    default="fp32",
    value_not_applicable=_value_applies,
    applies_to=StepSetting("the forward pass and loss run under autocast; fp16 scales the loss"),
    write_back=Snippet(
        "around the forward pass and loss in the training step",
        lambda value, device: autocast_snippet(str(value), device),
    ),
    ladder=Ladder(gpu=10, cpu=60, joint=True, memory=MemoryStep(20, "bf16")),
    script=Script(
        site=ScriptSite.MODEL,
        unchanged=("fp32",),
        on_model=lambda value, found: _autocast_found(value, found),
        scales_loss=lambda value: value == "fp16",
    ),
    serving=Serving(
        (
            ServedAs(
                "bf16_autocast",
                "bf16",
                rank=100,
                description="forward under torch.autocast(dtype=bfloat16), weights kept in fp32",
            ),
            ServedAs(
                "fp16_autocast",
                "fp16",
                rank=110,
                description="forward under torch.autocast(dtype=float16), weights kept in fp32",
            ),
        ),
        lambda model, value, device_type, args: _serve_autocast(model, value, device_type),
        lossy=True,
    ),
)

KNOBS = (PRECISION,)

#: The autocast dtype of each reduced precision, by its name in torch.
_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


def autocast_snippet(precision: str, device_type: str) -> str | None:
    """The training step's autocast (and fp16's GradScaler) as code to paste; None for fp32."""
    if precision not in _DTYPES:
        return None
    dtype = "torch.bfloat16" if precision == "bf16" else "torch.float16"
    code = (
        f"with torch.autocast({device_type!r}, dtype={dtype}):\n"
        "    output = model(inputs)\n"
        "    loss = criterion(output, targets)"
    )
    if precision == "fp16":
        code = (
            f"scaler = torch.amp.GradScaler({device_type!r})  # once, before the loop\n"
            + code
            + "\nscaler.scale(loss).backward()\nscaler.step(optimizer)\nscaler.update()"
        )
    return code


def autocast_context(
    precision: str, device_type: str, *, cache_enabled: bool = True
) -> contextlib.AbstractContextManager[Any]:
    """The context the forward pass and loss run in: autocast for bf16/fp16, nothing for fp32.

    Backward runs outside it (autocast docs: "backward passes under autocast are not
    recommended"). `cache_enabled=False` is required around CUDA-graph capture and replay.
    """
    if precision == "fp32":
        return contextlib.nullcontext()
    import torch

    return torch.autocast(
        device_type=device_type,
        dtype=getattr(torch, _DTYPES[precision]),
        cache_enabled=cache_enabled,
    )


def make_grad_scaler(precision: str, device_type: str) -> torch.amp.GradScaler | None:
    """fp16 gradients underflow without loss scaling; bf16 has fp32's range and needs none."""
    if precision != "fp16":
        return None
    import torch

    return torch.amp.GradScaler(device_type)


#: Device types torch.autocast and torch.amp.GradScaler support that the knob targets.
AUTOCAST_DEVICE_TYPES = ("cpu", "cuda")


def _autocast_found(value: KnobValue, found: FoundModel) -> None:
    """A script's trained model: its forward run under autocast; fp16 adds a GradScaler of its
    device type (torch 2.13 has one for CPU too, as the engine uses), which the injection puts
    around the script's `loss.backward()` and `optimizer.step()` (`Script.scales_loss`)."""
    precision = str(value)
    if precision not in _DTYPES:
        return
    device_type = found.device_type
    if device_type not in AUTOCAST_DEVICE_TYPES:
        found.skipped(
            PRECISION.name, f"{found.name}'s parameters are on '{device_type}', not cpu or cuda"
        )
        return
    import torch

    dtype = getattr(torch, _DTYPES[precision])
    shown = f"{found.name}.forward under torch.autocast({device_type!r}, {dtype})"
    if precision == "fp16":
        found.scaler = found.grad_scaler(device_type)
        shown += f", torch.amp.GradScaler({device_type!r}) on backward and step"
    found.applied(PRECISION.name, shown)
    found.autocast = (device_type, dtype)


def _serve_autocast(
    model: nn.Module, value: KnobValue, device_type: str
) -> Callable[[tuple[Any, ...]], Any]:
    """A served model's forward under autocast, its weights kept in fp32."""

    def forward(args: tuple[Any, ...]) -> Any:
        with autocast_context(str(value), device_type):
            return model(*args)

    return forward
