"""A recipe applied to a plain `nn.Module`: every knob whose part is a `ModelTransform`.

One function for whoever holds a model and a recipe's resolved settings: the training session
calls it (the raw stage before it builds the optimizer, the called stage once its data is
ready), and an inference session calls the same. Knobs come in their stage's `order`, then
catalogue order, so a knob added to the catalogue with a `ModelTransform` is applied with no
edit here.
"""

from __future__ import annotations

from torch import nn

from torchdoctor.knobs.catalogue import catalogue
from torchdoctor.knobs.context import CALLED, RAW, ModelContext
from torchdoctor.knobs.parts import ModelTransform


def model_transforms(stage: str) -> list[tuple[str, ModelTransform]]:
    """The catalogue's model transforms of `stage` that act, in their order."""
    found = [
        (k.name, k.applies_to)
        for k in catalogue()
        if isinstance(k.applies_to, ModelTransform)
        and k.applies_to.stage == stage
        and k.applies_to.apply is not None
    ]
    return sorted(found, key=lambda item: item[1].order)


def apply_to_model(model: nn.Module, ctx: ModelContext, stage: str) -> nn.Module:
    """`model` with every knob of `stage` applied at its value in `ctx.settings`.

    The raw stage returns the module the optimizer should train; the called stage the module
    the steps should call. A transform gets its value even when it is the default, and leaves
    the model as it is then.
    """
    if stage == RAW:
        ctx.raw = model
    for name, part in model_transforms(stage):
        assert part.apply is not None  # model_transforms keeps only those that act
        model = part.apply(model, ctx.settings.get(name), ctx)
        if stage == RAW:
            ctx.raw = model
    return model


__all__ = ["CALLED", "RAW", "ModelContext", "apply_to_model", "model_transforms"]
