"""Batch size and gradient accumulation: the `semantic` knobs that change training dynamics."""

from __future__ import annotations

from torchdoctor.knobs.base import IntRange, Knob

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
)

GRAD_ACCUM = Knob(
    name="grad_accum",
    family="batching",
    description="Micro-batches whose gradients are summed before each optimizer step.",
    code_change="run k forward/backward passes on loss / k, then one optimizer.step()",
    safety="semantic",
    domain=IntRange(1, MAX_GRAD_ACCUM),
    default=1,
)

KNOBS = (BATCH_SIZE, GRAD_ACCUM)
