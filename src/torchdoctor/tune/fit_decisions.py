"""The memory ladder's decisions (`tune --objective fit`): does a step lower peak memory, does
a recipe fit the cap, which batch to try next.

A recipe's peak memory is read per steady chunk of steps (`Arm.chunk_peaks`: the worker resets
the peak before each request, so each figure is that chunk's own; on a steady workload every
step of a chunk peaks alike, so it is the peak of a step). A trial has several, and their
spread is the noise a decision must clear:

- a step lowers memory when the candidate's highest chunk peak lies below the best's lowest
  by at least `MIN_MEMORY_SAVING` of it: every draw of one below every draw of the other, a
  rule that needs no model of how the peaks vary (page-granular resident memory on a CPU, the
  caching allocator's blocks on CUDA);
- a recipe fits when its highest chunk peak is at most the cap: the cap holds every step, not
  a typical one.

On a CPU the peak is the worker's resident set (its high-water mark, reset per request), so
the cap is honest about the whole process, interpreter and libraries included; there is no
allocator to fail at the cap, so a recipe over it is measured and reported as over. On CUDA
it is the caching allocator's `max_memory_allocated` (the reserved slack and the CUDA context
come on top), except for a recipe that replays CUDA graphs: their private pools never show in
`max_memory_allocated`, so its peak is the reserved figure, which holds them
(engine.MemoryStats.cuda_peak_bytes).

Which batch the search tries next is one function (`next_batch`), a seam a model of memory
against batch size (a fit of measured peaks) can replace by proposing its predicted edge first.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from torchdoctor.tune.batch import EDGE_RESOLUTION

#: A memory step is kept only when it lowers the peak by at least this fraction of the best's
#: lowest chunk peak: the tuner's smallest worthwhile gain for speed (`settings.DEFAULT_MIN_GAIN`)
#: held to memory too, so that a step saving a page or two (resident-set noise on a CPU, one
#: allocator block on CUDA) is not kept, and with it its cost in speed.
MIN_MEMORY_SAVING: Final = 0.02

_MIB: Final = 2**20


def mib(value: float) -> str:
    """Bytes as whole MiB, the unit the report and the reasons speak."""
    return f"{value / _MIB:,.0f} MiB"


@dataclass(frozen=True)
class PeakMemory:
    """The chunk peaks of one recipe: their median (the figure shown) and their range."""

    peaks: tuple[int, ...]

    @classmethod
    def of(cls, peaks: Sequence[int], fallback: int | None = None) -> PeakMemory | None:
        """From chunk peaks; a record without them (written before they were kept) falls back
        to its one overall peak; None when neither is known."""
        if peaks:
            return cls(tuple(int(p) for p in peaks))
        return cls((int(fallback),)) if fallback is not None else None

    @property
    def median(self) -> int:
        return int(statistics.median(self.peaks))

    @property
    def low(self) -> int:
        return min(self.peaks)

    @property
    def high(self) -> int:
        return max(self.peaks)

    def describe(self) -> str:
        if self.low == self.high:
            return mib(self.median)
        return f"{mib(self.median)} [{mib(self.low)}, {mib(self.high)}]"


def fits(peak: PeakMemory, cap_bytes: int) -> bool:
    """Whether every measured chunk peaks at or below the cap."""
    return peak.high <= cap_bytes


def lowers_memory(best: PeakMemory, candidate: PeakMemory) -> bool:
    """Whether the candidate's highest peak lies `MIN_MEMORY_SAVING` below the best's lowest."""
    return candidate.high <= best.low * (1.0 - MIN_MEMORY_SAVING)


def no_saving_reason(best: PeakMemory, candidate: PeakMemory) -> str:
    return (
        f"peak memory {candidate.describe()} is not {MIN_MEMORY_SAVING:.0%} below the best's "
        f"{best.describe()}"
    )


def over_cap_reason(candidate: PeakMemory, cap_bytes: int) -> str:
    return f"peak memory {candidate.describe()} is over the cap of {mib(cap_bytes)}"


@dataclass(frozen=True)
class BatchProbe:
    """One batch size tried by the search: whether it fit under the cap, and its highest
    measured chunk peak (None when the trial failed before a peak: a CUDA out-of-memory), the
    points a model of peak memory against batch size fits."""

    batch: int
    fits: bool
    peak_bytes: int | None = None


#: The search's seam: the batches tried so far (the start first), the cap and the largest batch
#: allowed -> the next batch to try, or None to stop.
ChooseBatch = Callable[[Sequence[BatchProbe], int, int], int | None]


def next_batch(tried: Sequence[BatchProbe], cap_bytes: int, max_batch: int) -> int | None:
    """Double up from the largest batch that fits until one does not; halve down from the
    smallest that does not until one fits; then bisect between the two until they are within
    `batch.EDGE_RESOLUTION` of the lower (the speed search's rule: the last few percent of
    batch are not worth a trial each). `cap_bytes` is unused here; a predictor of memory
    against batch replacing this function reads it."""
    del cap_bytes
    fitting = [p.batch for p in tried if p.fits]
    over = [p.batch for p in tried if not p.fits]
    low = max(fitting) if fitting else None
    high = min(over) if over else None
    if low is None:
        if high is None or high <= 1:
            return None  # not even one sample fits
        return high // 2
    if high is None:
        return low * 2 if low * 2 <= max_batch else None
    if high - low <= max(1, int(low * EDGE_RESOLUTION)):
        return None
    return (low + high) // 2
