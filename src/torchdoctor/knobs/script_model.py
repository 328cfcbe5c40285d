"""The model knobs applied to the module an unmodified script trains, through each knob's parts.

The script injection (`collect/inject/trained_model.py`) finds the trained top-level module at its
first call and hands it here as a `FoundModel` (`knobs/context.py`): the module, its first
call's inputs, a reversible way to replace an attribute, and the ledger's two verbs. Each
model knob acts on it through its own `Script.on_model` part (declared in the knob's module,
beside the engine's `ModelTransform`, sharing its code); a knob with a `ModelTransform` and no
`on_model` acts through that transform when it changes the module in place. So a model knob
reaches scripts with no code in `collect/`.

Apart from the family modules, which declare the parts, because this walks the catalogue that
imports them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from torchdoctor.knobs.base import Knob, KnobValue
from torchdoctor.knobs.catalogue import catalogue
from torchdoctor.knobs.context import CALLED, RAW, FoundModel, ModelContext
from torchdoctor.knobs.parts import ModelTransform, ScriptSite

OnModel = Callable[[KnobValue, FoundModel], None]


def model_parts(values: Mapping[str, KnobValue]) -> list[tuple[Knob, OnModel]]:
    """The parts that act on a script's trained model for the knobs in `values`, in order: the
    transforms that change the module (raw), then those that give the module the steps call,
    then the rest (forward contexts), each in its declared order, then catalogue order."""
    found = []
    for index, knob in enumerate(catalogue()):
        if knob.name not in values or knob.script is None:
            continue
        if knob.script.site is not ScriptSite.MODEL:
            continue
        part = knob.script.on_model or _transform_in_place(knob)
        transform = knob.applies_to
        rank = (2, 0)
        if isinstance(transform, ModelTransform):
            rank = (0 if transform.stage == RAW else 1, transform.order)
        found.append((rank, index, knob, part))
    found.sort(key=lambda item: (item[0], item[1]))
    return [(knob, part) for _, _, knob, part in found]


def scales_loss(values: Mapping[str, KnobValue]) -> bool:
    """Whether a knob in `values` scales the script's loss (fp16's GradScaler)."""
    return any(
        knob.name in values
        and knob.script is not None
        and knob.script.scales_loss is not None
        and knob.script.scales_loss(values[knob.name])
        for knob in catalogue()
    )


def _transform_in_place(knob: Knob) -> OnModel:
    """A `ModelTransform` of no script part of its own: applied when it changes the module in
    place (the script keeps calling its own module); one that builds a new module cannot reach
    a script that holds the old one."""

    def on_model(value: KnobValue, found: FoundModel) -> None:
        part = knob.applies_to
        assert isinstance(part, ModelTransform) and part.apply is not None, knob.name
        ctx = ModelContext(device_type=found.device_type, settings=found.settings)
        if part.stage == CALLED or part.apply(found.model, value, ctx) is not found.model:
            found.skipped(
                knob.name,
                f"it builds a new module from {found.name}, which the script does not call",
            )
            return
        found.applied(knob.name, found.at_call(f"{knob.name}={knob.show(value)} on {found.name}"))

    return on_model


__all__ = ["FoundModel", "OnModel", "model_parts", "scales_loss"]
