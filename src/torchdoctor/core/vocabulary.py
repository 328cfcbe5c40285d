"""Words every stage shares: the safety class of a change, the tuning objective, a clock.

Defined once here so that a knob's declared safety, the tuner's parity tolerance and a run
folder's config speak the same Literal, and every injectable clock has one type. What an
objective asks of a study is refused here too, in one wording for `torchdoctor.tune` (which
checks before anything starts) and the stage (`tune.fit`, for a `TuneConfig` built by hand).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal, get_args

from torchdoctor.core.errors import UsageError

#: How far a change may move the loss trajectory. `exact`: same math, bit-for-bit or up to
#: reduction order; `close`: numerically close (precision, compilation); `semantic`: changes
#: training dynamics (batch size, accumulation). torchdoctor.tune.parity judges each.
Safety = Literal["exact", "close", "semantic"]

#: What the tuner optimizes: samples per second, the time of one step, or fitting a memory
#: cap (`tune --objective fit --max-memory`: the ladder of changes that lower peak memory,
#: torchdoctor.tune.fit).
Objective = Literal["throughput", "latency", "fit"]

#: The objectives, in the order `--objective` lists them.
OBJECTIVES: Final[tuple[Objective, ...]] = get_args(Objective)

#: A monotonic clock in seconds (time.perf_counter, time.monotonic, or a test's fake).
Clock = Callable[[], float]


def check_fit_capped(objective: str, *, capped: bool) -> None:
    """`fit` names the memory cap it fits under (`capped`)."""
    if objective == "fit" and not capped:
        raise UsageError(
            "--objective fit needs the memory cap to fit under",
            hint="give --max-memory, e.g. --max-memory 4GiB",
        )


def check_fit_target(objective: str, *, is_script: bool) -> None:
    """`fit` tunes a workload: a script's batch is its own."""
    if objective == "fit" and is_script:
        raise UsageError(
            "--objective fit tunes a workload, not a script",
            hint="a script's batch is its own; give a workload (built-in or file.py:factory)",
        )


__all__ = [
    "OBJECTIVES",
    "Clock",
    "Objective",
    "Safety",
    "check_fit_capped",
    "check_fit_target",
]
