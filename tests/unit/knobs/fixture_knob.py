"""Knobs declared outside the package, as a new knob module would declare them: a `Knob` with
every part, nothing else. `test_new_knob` registers them into the catalogue and follows them
through the engine session, the script injection, the ladder's order and the patch writer.

`FLUSH_DENORMAL` is a process flag (denormal floats flushed to zero on CPU,
`torch.set_flush_denormal`) that the joint search searches; `TAG_MODEL` acts on the model in
place, and serves as an inference variant. Each records what it was
applied to here, so the tests can see each stage apply (and undo) it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from torchdoctor.knobs import (
    Choice,
    Knob,
    KnobValue,
    Ladder,
    ModelContext,
    ModelTransform,
    ProcessSetting,
    Script,
    ScriptSite,
    ServedAs,
    Serving,
    Snippet,
    TopLine,
)

#: ("apply", value), ("undo", value), ("model", class name) and ("serve", class name), in the
#: order of the calls.
CALLS: list[tuple[str, KnobValue]] = []


def _flush_denormal(value: KnobValue) -> Callable[[], None]:
    CALLS.append(("apply", value))
    torch.set_flush_denormal(bool(value))

    def undo() -> None:
        CALLS.append(("undo", value))
        torch.set_flush_denormal(False)

    return undo


FLUSH_DENORMAL = Knob(
    name="flush_denormal",
    family="fixture",
    description="Flush denormal floats to zero in CPU kernels.",
    code_change="torch.set_flush_denormal(True)",
    safety="close",
    domain=Choice((False, True)),
    default=False,
    applies_to=ProcessSetting(_flush_denormal, device_types=("cpu",)),
    write_back=TopLine(lambda value: f"torch.set_flush_denormal({value!r})"),
    # between threads (10) and num_workers (20) on a CPU, between threads and optimizer_impl
    # (30, 40) on a GPU
    ladder=Ladder(gpu=35, cpu=15, joint=True),  # searched with the interacting knobs
    script=Script(site=ScriptSite.PROCESS, unchanged=(False,)),
    no_rule="a test's knob: no rule finds denormals",
)


def _serve_tagged(model: nn.Module, value: KnobValue) -> Callable[[tuple[Any, ...]], Any]:
    CALLS.append(("serve", type(model).__name__))
    model.tagged = bool(value)  # type: ignore[assignment]
    return lambda args: model(*args)


def _tag_model(model: nn.Module, value: KnobValue, ctx: ModelContext) -> nn.Module:
    if value:
        CALLS.append(("model", type(model).__name__))
        model.tagged = True  # type: ignore[assignment]
    return model


TAG_MODEL = Knob(
    name="tag_model",
    family="fixture",
    description="Tag the trained model.",
    code_change="model.tagged = True",
    safety="exact",
    domain=Choice((False, True)),
    default=False,
    applies_to=ModelTransform("raw", order=10, apply=_tag_model),
    write_back=Snippet("after the line that builds the model", lambda v, d: "model.tagged = True"),
    ladder=Ladder(gpu=155),  # after checkpointing (150); not in the CPU prior
    script=Script(site=ScriptSite.MODEL, unchanged=(False,)),
    no_rule="a test's knob",
    serving=Serving(
        (ServedAs("tag_model", True, rank=155, description="the served model tagged"),),
        lambda model, value, device_type, args: _serve_tagged(model, value),
    ),
)
