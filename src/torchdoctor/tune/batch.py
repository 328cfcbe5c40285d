"""Batch size for throughput, not just fit.

Grow the batch (x2) while each doubling is a proven throughput win over the current best (the
same interleaved A/B rule as every other change) and it fits; when a doubling runs out of
memory (the memory cap we enforce, or the device's), binary-search the largest batch that fits
between the last good batch and the failed one, keeping a midpoint only if it is itself a
proven win.

With ``hold_effective_batch`` the product batch_size x grad_accum stays fixed, so the learning
dynamics are unchanged: the micro-batch doubles while grad_accum halves, and the search stops
when grad_accum reaches 1 (no binary search then: a midpoint would not divide the effective
batch).
"""

from __future__ import annotations

from typing import Any, Final

from torchdoctor.knobs import BATCH_SIZE, GRAD_ACCUM
from torchdoctor.tune.outcome import Outcome
from torchdoctor.tune.tuner import Tuner

#: Stop the binary search when the interval is narrower than this fraction of the lower end:
#: the last few percent of batch size are worth less than a trial each.
EDGE_RESOLUTION: Final = 0.125


def search_batch_size(
    tuner: Tuner, *, default_batch: int, max_batch: int, hold_effective_batch: bool
) -> None:
    """Run the batch-size search from the tuner's current best (raises BudgetExhausted)."""
    batch = int(tuner.best_recipe.get(BATCH_SIZE.name) or default_batch)
    accum = int(tuner.best_recipe.get(GRAD_ACCUM.name) or 1)
    failed_at: int | None = None
    while batch * 2 <= max_batch:
        change: dict[str, Any] = {BATCH_SIZE.name: batch * 2}
        if hold_effective_batch:
            if accum % 2:
                return
            change[GRAD_ACCUM.name] = accum // 2
        result = tuner.try_change(change, kind="batch", safety="semantic")
        if result.outcome is Outcome.KEPT:
            batch *= 2
            accum = accum // 2 if hold_effective_batch else accum
            continue
        if result.outcome is Outcome.OUT_OF_MEMORY:
            failed_at = batch * 2
        break
    if failed_at is None or hold_effective_batch:
        return
    low, high = batch, failed_at
    while high - low > max(1, int(low * EDGE_RESOLUTION)):
        mid = (low + high) // 2
        result = tuner.try_change({BATCH_SIZE.name: mid}, kind="batch", safety="semantic")
        if result.outcome is Outcome.KEPT:
            low = mid
        elif result.outcome is Outcome.OUT_OF_MEMORY:
            high = mid
        else:
            return  # fits but no proven gain: larger ones below the edge will not help either
