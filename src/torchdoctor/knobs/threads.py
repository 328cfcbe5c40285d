"""Intra-op CPU threads (torch.set_num_threads)."""

from __future__ import annotations

import torch

from torchdoctor.knobs.base import IntRange, Knob, cpu_count

THREADS = Knob(
    name="threads",
    family="threads",
    description="Intra-op threads torch uses for CPU kernels (default: torch's choice).",
    code_change="torch.set_num_threads(N)",
    safety="exact",
    domain=IntRange(1, cpu_count),
    default=None,
)

KNOBS = (THREADS,)


def apply_threads(threads: int | None) -> int:
    """Set the intra-op thread count (when given) and return the count now in force."""
    if threads is not None:
        torch.set_num_threads(threads)
    return torch.get_num_threads()
