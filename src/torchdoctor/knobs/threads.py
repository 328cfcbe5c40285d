"""Intra-op CPU threads (torch.set_num_threads)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torchdoctor.knobs.base import IntRange, Knob, KnobValue, cpu_count
from torchdoctor.knobs.parts import (
    CallEdit,
    EditedCall,
    Ladder,
    ProcessSetting,
    Script,
    ScriptSite,
    ServedAs,
    Serving,
)

if TYPE_CHECKING:
    from torch import nn


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
    write_back=CallEdit(EditedCall.SET_NUM_THREADS),
    ladder=Ladder(gpu=30, cpu=10, joint=True),
    script=Script(site=ScriptSite.THREADS),
    serving=Serving(
        (
            ServedAs(
                "threads",
                None,
                rank=150,
                description="eager under no_grad at N intra-op threads, named 'threads:N' (set "
                "for each call and restored after, so interleaved variants keep their own count)",
                parameter="the thread count",
            ),
        ),
        lambda model, value, device_type, args: _serve_at(model, value),
    ),
)

KNOBS = (THREADS,)


def apply_threads(threads: int | None) -> int:
    """Set the intra-op thread count (when given) and return the count now in force."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def _serve_at(model: nn.Module, threads: KnobValue) -> Callable[[tuple[Any, ...]], Any]:
    """A served model at `threads` intra-op threads: the process-wide count is set for each
    call and restored after, so that variants compared interleaved each run at their own."""
    import torch

    def forward(args: tuple[Any, ...]) -> Any:
        previous = torch.get_num_threads()
        if previous != threads:
            apply_threads(threads)  # type: ignore[arg-type]
        try:
            return model(*args)
        finally:
            if previous != threads:
                torch.set_num_threads(previous)

    return forward
