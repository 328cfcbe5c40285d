"""torch.compile: mode and dynamic shapes."""

from __future__ import annotations

import torch
from torch import nn

from torchdoctor.knobs.base import Choice, Knob, needs_compile

COMPILE = Knob(
    name="compile",
    family="compilation",
    description="Compile the model with torch.compile (inductor) in the given mode.",
    code_change="model = torch.compile(model, mode=MODE)",
    safety="close",
    domain=Choice(("off", "default", "reduce-overhead", "max-autotune")),
    default="off",
)

COMPILE_DYNAMIC = Knob(
    name="compile_dynamic",
    family="compilation",
    description="Compile with dynamic shapes instead of specializing on the first shapes seen.",
    code_change="torch.compile(model, dynamic=True)",
    safety="close",
    domain=Choice((False, True)),
    default=False,
    not_applicable=needs_compile,
)

KNOBS = (COMPILE, COMPILE_DYNAMIC)


def compile_model(model: nn.Module, mode: str, *, dynamic: bool) -> nn.Module:
    """Wrap `model` with torch.compile; compilation itself happens lazily at the first call."""
    if mode == "off":
        return model
    # mode=None is torch.compile's "default" mode.
    compiled = torch.compile(model, mode=None if mode == "default" else mode, dynamic=dynamic)
    assert isinstance(compiled, nn.Module)  # torch.compile of a Module returns a Module
    return compiled
