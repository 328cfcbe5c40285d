"""Input pipeline knobs: DataLoader workers, pinned memory, prefetching, async copies.

Decision (documented in the CLI help too): `pin_memory` and `non_blocking` only act on copies
to a CUDA device, so on a CPU-only run they are *inapplicable* (a KnobError naming the knob),
not silently ignored; a tuner then never spends a trial on a no-op.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchdoctor.knobs.base import (
    ApplicabilityContext,
    Choice,
    IntRange,
    Knob,
    KnobValue,
    cuda_only,
    needs_workers,
)

#: More DataLoader workers than this only adds start-up time on any machine we target.
MAX_NUM_WORKERS = 32
#: torch's own default prefetch_factor when num_workers > 0.
TORCH_DEFAULT_PREFETCH = 2
MAX_PREFETCH_FACTOR = 16

NUM_WORKERS = Knob(
    name="num_workers",
    family="dataloading",
    description="DataLoader worker processes that load and augment batches in parallel.",
    code_change="DataLoader(..., num_workers=N)",
    safety="exact",
    domain=IntRange(0, MAX_NUM_WORKERS),
    default=None,
)


def _pin_applies(ctx: ApplicabilityContext) -> str | None:
    return cuda_only(ctx)


PIN_MEMORY = Knob(
    name="pin_memory",
    family="dataloading",
    description="Page-locked host batches so host-to-device copies are fast and can overlap.",
    code_change="DataLoader(..., pin_memory=True)",
    safety="exact",
    domain=Choice((False, True)),
    default=False,
    not_applicable=_pin_applies,
)

PERSISTENT_WORKERS = Knob(
    name="persistent_workers",
    family="dataloading",
    description="Keep worker processes alive between epochs instead of re-forking them.",
    code_change="DataLoader(..., persistent_workers=True)",
    safety="exact",
    domain=Choice((False, True)),
    default=False,
    not_applicable=needs_workers,
)

PREFETCH_FACTOR = Knob(
    name="prefetch_factor",
    family="dataloading",
    description="Batches each worker loads ahead of the training loop.",
    code_change="DataLoader(..., prefetch_factor=N)",
    safety="exact",
    domain=IntRange(1, MAX_PREFETCH_FACTOR),
    default=None,
    not_applicable=needs_workers,
)

NON_BLOCKING = Knob(
    name="non_blocking",
    family="dataloading",
    description="Asynchronous host-to-device copies that overlap with compute.",
    code_change="batch.to(device, non_blocking=True) (with pinned memory)",
    safety="exact",
    domain=Choice((False, True)),
    default=False,
    not_applicable=cuda_only,
)

KNOBS = (NUM_WORKERS, PIN_MEMORY, PERSISTENT_WORKERS, PREFETCH_FACTOR, NON_BLOCKING)


def loader_kwargs(settings: Mapping[str, KnobValue], default_workers: int) -> dict[str, Any]:
    """DataLoader keyword arguments for a recipe's resolved data-loading settings."""
    workers = settings.get("num_workers")
    num_workers = default_workers if workers is None else int(workers)
    kwargs: dict[str, Any] = {
        "num_workers": num_workers,
        "pin_memory": bool(settings.get("pin_memory", False)),
    }
    if num_workers > 0:
        prefetch = settings.get("prefetch_factor")
        kwargs["prefetch_factor"] = TORCH_DEFAULT_PREFETCH if prefetch is None else int(prefetch)
        kwargs["persistent_workers"] = bool(settings.get("persistent_workers", False))
    return kwargs
