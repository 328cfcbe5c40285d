"""Input pipeline knobs: DataLoader workers, pinned memory, prefetching, async copies.

Decision (documented in the CLI help too): `pin_memory` and `non_blocking` only act on copies
to a CUDA device, so on a CPU-only run they are *inapplicable* (a KnobError naming the knob),
not silently ignored; a tuner then never spends a trial on a no-op.
"""

from __future__ import annotations

from torchdoctor.knobs.base import (
    Choice,
    IntRange,
    Knob,
    cuda_only,
    needs_workers,
)
from torchdoctor.knobs.parts import (
    NOT_IN_SCRIPTS,
    Ladder,
    LoaderArgument,
    LoaderKeywordEdit,
    Script,
    ScriptSite,
    StepSetting,
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
    # unset: the workload's own worker count (`loader_kwargs`)
    applies_to=LoaderArgument("num_workers", order=0, position=5),
    write_back=LoaderKeywordEdit(),
    ladder=Ladder(gpu=80, cpu=20),
    script=Script(site=ScriptSite.LOADER),
)


PIN_MEMORY = Knob(
    name="pin_memory",
    family="dataloading",
    description="Page-locked host batches so host-to-device copies are fast and can overlap.",
    code_change="DataLoader(..., pin_memory=True)",
    safety="exact",
    domain=Choice((False, True)),
    default=False,
    not_applicable=cuda_only,
    applies_to=LoaderArgument("pin_memory", order=1, position=7, fallback=False),
    write_back=LoaderKeywordEdit(),
    ladder=Ladder(gpu=90),
    script=Script(site=ScriptSite.LOADER),
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
    applies_to=LoaderArgument("persistent_workers", order=2, needs_workers=True, fallback=False),
    write_back=LoaderKeywordEdit(),
    ladder=Ladder(gpu=110),
    script=Script(site=ScriptSite.LOADER, per_loader=True),
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
    applies_to=LoaderArgument(
        "prefetch_factor", order=3, needs_workers=True, fallback=TORCH_DEFAULT_PREFETCH
    ),
    write_back=LoaderKeywordEdit(),
    ladder=Ladder(gpu=120),
    script=Script(site=ScriptSite.LOADER, per_loader=True),
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
    applies_to=StepSetting("the batch's copies to the device"),
    write_back=NOT_IN_SCRIPTS,
    ladder=Ladder(gpu=100),
    script=Script(not_injectable="it changes the script's own .to(device) calls; not injected"),
)

KNOBS = (NUM_WORKERS, PIN_MEMORY, PERSISTENT_WORKERS, PREFETCH_FACTOR, NON_BLOCKING)
