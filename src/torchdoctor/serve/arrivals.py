"""When requests arrive: seeded constant, Poisson and gamma processes at a target rate.

Open-loop load (Schroeder, Wierman & Harchol-Balter, "Open versus closed: a cautionary tale",
NSDI 2006): arrivals follow their own schedule whatever the server does, as users' requests
do. A closed loop, where the next request waits for the last answer, slows its own arrivals
when the server is slow and hides the queue it would build ("coordinated omission", Gil
Tene). Poisson arrivals are independent users; gamma with shape k < 1 is burstier (squared
coefficient of variation 1/k), k > 1 smoother; constant is a fixed clock.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from torchdoctor.core.errors import MeasureError
from torchdoctor.serve.records import ArrivalKind

ARRIVAL_KINDS: Final[tuple[ArrivalKind, ...]] = ("constant", "poisson", "gamma")
#: Shape of the gamma arrivals by default: squared coefficient of variation 4, a bursty
#: stream (Poisson is shape 1).
DEFAULT_GAMMA_SHAPE: Final = 0.25


def arrival_times(
    kind: ArrivalKind,
    rate: float,
    n: int,
    *,
    seed: int = 0,
    gamma_shape: float = DEFAULT_GAMMA_SHAPE,
) -> np.ndarray:
    """Scheduled arrival times (seconds from the start, ascending) of `n` requests."""
    if not rate > 0:
        raise MeasureError(f"arrival rate {rate!r} must be positive (requests per second)")
    if n < 1:
        raise MeasureError(f"a load run needs at least one request, got {n}")
    rng = np.random.default_rng(seed)
    mean_gap = 1.0 / rate
    if kind == "constant":
        gaps = np.full(n, mean_gap)
    elif kind == "poisson":
        gaps = rng.exponential(mean_gap, size=n)
    elif kind == "gamma":
        if not gamma_shape > 0:
            raise MeasureError(f"gamma shape {gamma_shape!r} must be positive")
        gaps = rng.gamma(gamma_shape, mean_gap / gamma_shape, size=n)
    else:
        raise MeasureError(
            f"unknown arrival process {kind!r}", hint=f"one of {', '.join(ARRIVAL_KINDS)}"
        )
    return np.cumsum(gaps)


__all__ = ["ARRIVAL_KINDS", "DEFAULT_GAMMA_SHAPE", "arrival_times"]
