"""Words every stage shares: the safety class of a change, the tuning objective, a clock.

Defined once here so that a knob's declared safety, the tuner's parity tolerance and a run
folder's config speak the same Literal, and every injectable clock has one type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

#: How far a change may move the loss trajectory. `exact`: same math, bit-for-bit or up to
#: reduction order; `close`: numerically close (precision, compilation); `semantic`: changes
#: training dynamics (batch size, accumulation). torchdoctor.tune.parity judges each.
Safety = Literal["exact", "close", "semantic"]

#: What the tuner optimizes: samples per second, the time of one step, or fitting a memory
#: cap (`tune --objective fit --max-memory`: the ladder of changes that lower peak memory,
#: torchdoctor.tune.fit).
Objective = Literal["throughput", "latency", "fit"]

#: A monotonic clock in seconds (time.perf_counter, time.monotonic, or a test's fake).
Clock = Callable[[], float]

__all__ = ["Clock", "Objective", "Safety"]
