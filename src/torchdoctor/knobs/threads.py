"""Intra-op CPU threads (torch.set_num_threads)."""

from __future__ import annotations

from collections.abc import Callable

from torchdoctor.knobs.base import IntRange, Knob, KnobValue, cpu_count
from torchdoctor.knobs.parts import CallEdit, Ladder, Prescribed, ProcessSetting, Script, ScriptSite


def _set_threads(value: KnobValue) -> Callable[[], None]:
    import torch

    previous = torch.get_num_threads()
    apply_threads(value)  # type: ignore[arg-type]
    return lambda: torch.set_num_threads(previous)


THREADS = Knob(
    name="threads",
    family="threads",
    description="Intra-op threads torch uses for CPU kernels (default: torch's choice).",
    code_change="torch.set_num_threads(N)",
    safety="exact",
    domain=IntRange(1, cpu_count),
    default=None,
    applies_to=ProcessSetting(_set_threads),
    write_back=CallEdit("threads"),
    ladder=Ladder(gpu=30, cpu=10, joint=True),
    script=Script(site=ScriptSite.THREADS),
    prescribed=Prescribed(("cpu_threads",)),
)

KNOBS = (THREADS,)


def apply_threads(threads: int | None) -> int:
    """Set the intra-op thread count (when given) and return the count now in force."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    return torch.get_num_threads()
