"""Optimizer implementation (for-loop, foreach, fused) and zero_grad(set_to_none)."""

from __future__ import annotations

from torchdoctor.core.optimizer import OPTIMIZER_IMPLS, impl_kwargs, make_optimizer
from torchdoctor.knobs.base import ApplicabilityContext, Choice, Knob
from torchdoctor.knobs.parts import (
    CallEdit,
    EditedCall,
    Ladder,
    OptimizerArgument,
    Script,
    ScriptSite,
    StepSetting,
)

#: torch gained fused Adam/AdamW/SGD kernels on CPU in 2.4 (earlier: CUDA only).
FUSED_CPU_MIN_TORCH = (2, 4)


def _fused_applies(ctx: ApplicabilityContext) -> str | None:
    if ctx.settings.get(OPTIMIZER_IMPL.name) != "fused":
        return None
    if ctx.device_type == "cpu" and ctx.torch_version < FUSED_CPU_MIN_TORCH:
        return "fused optimizers on CPU need torch >= 2.4"
    return None


OPTIMIZER_IMPL = Knob(
    name="optimizer_impl",
    family="optimizer",
    description="How the optimizer updates parameters: per-tensor loop, foreach, or fused.",
    code_change="torch.optim.AdamW(params, foreach=True) or (params, fused=True)",
    safety="close",
    domain=Choice(OPTIMIZER_IMPLS),
    default="for_loop",
    not_applicable=_fused_applies,
    # torch's own default: foreach when every parameter is on CUDA, the for-loop otherwise.
    device_defaults={"cuda": "foreach"},
    applies_to=OptimizerArgument(lambda value: impl_kwargs(str(value))),
    write_back=CallEdit(EditedCall.OPTIMIZER),
    ladder=Ladder(gpu=40, cpu=40),
    script=Script(site=ScriptSite.OPTIMIZER),
)

SET_TO_NONE = Knob(
    name="set_to_none",
    family="optimizer",
    description="zero_grad drops gradient tensors instead of filling them with zeros.",
    code_change="optimizer.zero_grad(set_to_none=True)",
    safety="exact",
    domain=Choice((False, True)),
    default=True,
    applies_to=StepSetting("zero_grad after each optimizer step"),
    write_back=CallEdit(EditedCall.ZERO_GRAD),
    ladder=Ladder(gpu=130, cpu=50),
    script=Script(site=ScriptSite.OPTIMIZER),
)

KNOBS = (OPTIMIZER_IMPL, SET_TO_NONE)

__all__ = ["KNOBS", "OPTIMIZER_IMPLS", "impl_kwargs", "make_optimizer"]
