"""A knob declared outside the package, as a new knob module would be: one `Knob` with every
part, nothing else. `test_new_knob` registers it into the catalogue and follows it through the
engine session, the script injection, the ladder's order and the patch writer.

Its setting is a process flag (denormal floats flushed to zero on CPU, `torch.set_flush_denormal`),
whose application is recorded here so the tests can see each stage apply and undo it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from torchdoctor.knobs import (
    Choice,
    Knob,
    KnobValue,
    Ladder,
    Prescribed,
    ProcessSetting,
    Script,
    TopLine,
)

#: ("apply", value) and ("undo", value), in the order the stages called them.
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
    ladder=Ladder(gpu=35, cpu=15),
    script=Script(injector="process", unchanged=(False,)),
    prescribed=Prescribed(none_because="a test's knob: no rule finds denormals"),
)
