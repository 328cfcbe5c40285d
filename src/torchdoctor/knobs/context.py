"""What a model transform is given besides the model and its value (`ModelContext`), and the
two stages a transform runs at.

Apart from `knobs/model.py`, which walks the catalogue, so that the family modules that declare
the transforms can name it without importing the catalogue that imports them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torchdoctor.knobs.parts import KnobValue

if TYPE_CHECKING:
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
