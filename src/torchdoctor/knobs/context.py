"""What a model transform is given besides the model and its value (`ModelContext`), the two
stages a transform runs at, and a script's trained module as its model knobs see it
(`FoundModel`).

Apart from `knobs/model_recipe.py`, which walks the catalogue, so that the family modules that
declare the transforms can name it without importing the catalogue that imports them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torchdoctor.knobs.parts import KnobValue

if TYPE_CHECKING:
    import torch
    from torch import nn

RAW = "raw"
CALLED = "called"


@dataclass
class ModelContext:
    """What a model transform may need besides the model and its value.

    `settings`: the recipe's resolved values (compile reads compile_dynamic); `blocks`: the
    repeated blocks to checkpoint; `sample_inputs`: one batch of inputs as the steps pass them
    (CUDA graph capture); `raw`: the module the optimizer trains (set by `apply_to_model`);
    `notes`: what a transform reports back (checkpointing: how many blocks).
    """

    device_type: str
    settings: Mapping[str, KnobValue]
    blocks: Callable[[nn.Module], Sequence[nn.Module]] | None = None
    sample_inputs: Callable[[], Any] | None = None
    raw: nn.Module | None = None
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class FoundModel:
    """The trained module a script built, found before its first call runs, and what the
    model knobs ask of its forward (put in place by the injection once they all acted).

    `settings`: the injected model knobs' values; `replace(obj, name, value)`: an attribute set
    that uninstall puts back; `applied(knob, what)` / `skipped(knob, reason)`: the ledger;
    `grad_scaler(device_type)`: fp16's loss scaler; `compile_backend`: torch.compile's backend
    (None: inductor); `on_compile(model)`: called just before its forward is compiled.
    """

    model: nn.Module
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    device_type: str
    settings: Mapping[str, KnobValue]
    called_at: str | None
    replace: Callable[[Any, str, Any], None]
    applied: Callable[[str, str], None]
    skipped: Callable[[str, str], None]
    grad_scaler: Callable[[str], Any]
    compile_backend: str | None = None
    on_compile: Callable[[nn.Module], None] | None = None
    #: the forward the steps call instead of the module's own (torch.compile of it), or None
    forward: Callable[..., Any] | None = None
    #: convert its 4-D floating-point inputs to channels_last
    channels_last: bool = False
    #: run its forward under torch.autocast(device_type, dtype)
    autocast: tuple[str, torch.dtype] | None = None
    #: the loss scaler the backward and the optimizer steps go through (fp16)
    scaler: Any = None
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return type(self.model).__name__

    def at_call(self, what: str) -> str:
        """`what at file:line` of the script's first call of the model (where a patch edits)."""
        return f"{what} at {self.called_at}" if self.called_at else what
