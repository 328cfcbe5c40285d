"""The catalogue of every knob, in the order the CLI and the tuner list them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torchdoctor.core.errors import KnobError
from torchdoctor.core.vocabulary import Safety
from torchdoctor.knobs import (
    attention,
    batching,
    checkpointing,
    compilation,
    cuda,
    dataloading,
    ddp,
    fsdp,
    memory_format,
    optimizer,
    precision,
    threads,
)
from torchdoctor.knobs.base import Knob, KnobValue
from torchdoctor.knobs.parts import ServedAs

_BUILT_IN: tuple[Knob, ...] = (
    *batching.KNOBS,
    *dataloading.KNOBS,
    *precision.KNOBS,
    *compilation.KNOBS,
    *memory_format.KNOBS,
    *optimizer.KNOBS,
    *threads.KNOBS,
    *checkpointing.KNOBS,
    *attention.KNOBS,
    *cuda.KNOBS,
    *ddp.KNOBS,
    *fsdp.KNOBS,
)
_ALL: tuple[Knob, ...] = _BUILT_IN
_BY_NAME: dict[str, Knob] = {k.name: k for k in _ALL}


def catalogue() -> tuple[Knob, ...]:
    """Every knob torchdoctor knows."""
    return _ALL


def not_injectable() -> dict[str, str]:
    """Knobs an unmodified script cannot take, with why (each knob's `Script.not_injectable`),
    in catalogue order."""
    return {
        k.name: k.script.not_injectable
        for k in _ALL
        if k.script is not None and k.script.not_injectable is not None
    }


def joint_knobs() -> tuple[str, ...]:
    """The knobs the joint refinement searches together (`Ladder.joint`), in catalogue order."""
    return tuple(k.name for k in _ALL if k.ladder is not None and k.ladder.joint)


def memory_steps() -> tuple[tuple[str, KnobValue, Safety], ...]:
    """The memory ladder's one-knob steps (`Ladder.memory`) as (knob, value, safety class), in
    their rank's order."""
    steps = sorted(
        (k.ladder.memory.rank, k.name, k.ladder.memory.value, k.safety)
        for k in _ALL
        if k.ladder is not None and k.ladder.memory is not None
    )
    return tuple((name, value, safety) for _, name, value, safety in steps)


def served() -> tuple[tuple[Knob, ServedAs], ...]:
    """The inference variants that are knobs (`Knob.serving`), each with its knob, in catalogue
    order."""
    return tuple(
        (k, variant) for k in _ALL if k.serving is not None for variant in k.serving.variants
    )


def get_knob(name: str) -> Knob:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KnobError(
            f"unknown knob '{name}'", hint=f"known knobs: {', '.join(_BY_NAME)}"
        ) from None


@contextlib.contextmanager
def registered(knob: Knob) -> Iterator[Knob]:
    """`knob` is in the catalogue (last) until the block ends: a knob declared outside the
    package (a test's fixture module) reaches every stage that reads the catalogue."""
    global _ALL, _BY_NAME
    if knob.name in _BY_NAME:
        raise KnobError(f"knob '{knob.name}' is in the catalogue already")
    before = _ALL
    _ALL = (*_ALL, knob)
    _BY_NAME = {k.name: k for k in _ALL}
    try:
        yield knob
    finally:
        _ALL = before
        _BY_NAME = {k.name: k for k in _ALL}
