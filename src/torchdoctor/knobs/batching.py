"""Batch size and gradient accumulation: the `semantic` knobs that change training dynamics."""

from __future__ import annotations

from torchdoctor.knobs.base import IntRange, Knob
from torchdoctor.knobs.parts import (
    NOT_IN_SCRIPTS,
    Ladder,
    LoaderArgument,
    LoaderKeywordEdit,
    Script,
    ScriptSite,
    StepSetting,
)

#: Upper bounds of the search space; beyond these a synthetic workload's epoch is a handful of
#: steps and the numbers stop meaning anything.
MAX_BATCH_SIZE = 65536
MAX_GRAD_ACCUM = 64

BATCH_SIZE = Knob(
    name="batch_size",
    family="batching",
    description="Samples per micro-batch (default: the workload's own batch size).",
    code_change="DataLoader(dataset, batch_size=N); rescale the learning rate if you change it",
    safety="semantic",
    domain=IntRange(1, MAX_BATCH_SIZE),
    default=None,
    # the session's own argument: the engine passes it to the loader itself
    applies_to=LoaderArgument("batch_size", order=4, position=1, engine=False),
    write_back=LoaderKeywordEdit(),
    ladder=Ladder(gpu=None, batch_search=True, joint=True),
    script=Script(site=ScriptSite.LOADER),
)

GRAD_ACCUM = Knob(
    name="grad_accum",
    family="batching",
    description="Micro-batches whose gradients are summed before each optimizer step.",
    code_change="run k forward/backward passes on loss / k, then one optimizer.step()",
    safety="semantic",
    domain=IntRange(1, MAX_GRAD_ACCUM),
    default=1,
    applies_to=StepSetting("micro-batches whose gradients each optimizer step sums"),
    write_back=NOT_IN_SCRIPTS,
    ladder=Ladder(gpu=None, batch_search=True),
    script=Script(
        not_injectable="it changes the training loop (several backward passes per optimizer "
        "step), which an unmodified script does not have"
    ),
)

KNOBS = (BATCH_SIZE, GRAD_ACCUM)
