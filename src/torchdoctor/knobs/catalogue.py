"""The catalogue of every knob, in the order the CLI and the tuner list them."""

from __future__ import annotations

from torchdoctor.core.errors import KnobError
from torchdoctor.knobs import (
    batching,
    checkpointing,
    compilation,
    cuda,
    dataloading,
    memory_format,
    optimizer,
    precision,
    threads,
)
from torchdoctor.knobs.base import Knob

_ALL: tuple[Knob, ...] = (
    *batching.KNOBS,
    *dataloading.KNOBS,
    *precision.KNOBS,
    *compilation.KNOBS,
    *memory_format.KNOBS,
    *optimizer.KNOBS,
    *threads.KNOBS,
    *checkpointing.KNOBS,
    *cuda.KNOBS,
)
_BY_NAME: dict[str, Knob] = {k.name: k for k in _ALL}


def catalogue() -> tuple[Knob, ...]:
    """Every knob torchdoctor knows."""
    return _ALL


def get_knob(name: str) -> Knob:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KnobError(
            f"unknown knob '{name}'", hint=f"known knobs: {', '.join(_BY_NAME)}"
        ) from None
