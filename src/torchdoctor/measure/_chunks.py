"""How long a timed chunk is, by the timer that times it and the steady steps it is cut from.

Two questions the chunk length answers, one per part of this module:

- **The floor, per timer.** A chunk must be long enough that its time is not the timer's error.
  A host clock read after a synchronize on a shared CPU carries the scheduler's noise: a
  preemption lasts tens of milliseconds, hence `MIN_CHUNK_S` = 0.3 s (`_steady.py` says how it
  was measured). A CUDA event pair is read by the device itself at about 0.5 us resolution
  (`CUDA_EVENT_RESOLUTION_S`), and nothing the host's scheduler does lands between two events
  of a queued stream; what a chunk there must outlast is the fixed cost of a request (a pipe
  round trip, the allocator's release after the chunk, the step after it, left unscored).
  `min_chunk_s(timer)` gives the floor of each kind; `TimerKind` names them.
- **The length, from steady steps.** A chunk is calibrated from a window of steady steps
  (after warm-up), at their *mean* step time, stalls included, not from the last warm-up
  steps: a data loader that re-forks its workers at each epoch stalls one step in every
  epoch, and a chunk measured from single steps holds that stall in some chunks and not in
  others, so a median over chunks drops it here and keeps it there (an H200 ladder kept
  num_workers=32 at 1.38x [1.10, 3.50] while fresh processes measured 2.63x [1.73, 3.99] of
  the same recipe: the cnn epoch is 64 steps). A stall that recurs every P steps
  (`stall_period`) makes every chunk a whole number of periods (`ChunkCalibration`), and
  `period_chunks` cuts a run's steps the same way, so every estimate counts the stalls at
  the rate the job pays them.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from torchdoctor.measure._device_timer import CUDA_EVENT_RESOLUTION_S

#: How a chunk's seconds are read: `host` (synchronize, then the host clock: CPU, MPS, a
#: script's own steps) or `cuda_event` (event pairs on the device's stream: a workload's steps
#: on CUDA or ROCm, `engine/step_marks.py`).
TimerKind = Literal["host", "cuda_event"]

#: The host floor: scheduler preemptions of tens of milliseconds on a shared host average out
#: over 0.3 s (measured: `measure._steady.MIN_CHUNK_S`).
HOST_MIN_CHUNK_S: Final = 0.3
#: The CUDA-event floor. The events resolve 0.5 us (`CUDA_EVENT_RESOLUTION_S`, CUDA C
#: Programming Guide, "Events"), 1e-5 of 50 ms; the fixed costs of a chunk on a GPU arm are the
#: request's round trip over a pipe (about 0.1 ms) and the release of cached blocks after it
#: (its first step is left unscored, `Arm.scored_rows`), so 50 ms keeps them under 1% of a
#: chunk. The H200 records (2026-11-28) hold cnn steps of 20-35 ms: a chunk of 2-3 steps, where
#: the host floor asked for 10-15 and left a 64-step epoch 4-6 chunks.
CUDA_EVENT_MIN_CHUNK_S: Final = 0.05
_MIN_CHUNK_S: Final[dict[TimerKind, float]] = {
    "host": HOST_MIN_CHUNK_S,
    "cuda_event": CUDA_EVENT_MIN_CHUNK_S,
}
#: Chunks' worth of steady steps an arm runs after warm-up to calibrate its chunks
#: (`calibration_steps`): two, what a trial's settle round and first scored round cost anyway.
CALIBRATION_CHUNKS: Final = 2
#: Least seconds of a calibration window per timer: long enough to see a stall that recurs
#: every epoch `MIN_STALLS` times where steps are cheap. On a GPU, where a process start costs
#: 10 s (H200 records, 2026-11-28), 3 s: three 64-step cnn epochs at its 15 ms step. On a host
#: timer no more than the chunks (a 2-core host's step is tens of milliseconds, and a window
#: of several epochs would cost each arm seconds).
MIN_CALIBRATION_S: Final[dict[TimerKind, float]] = {"host": 0.0, "cuda_event": 3.0}
#: Most seconds a calibration window may grow to where it has seen a stall but not yet its
#: period (`more_calibration_steps`): on a GPU 10 s, a process start's worth (an H200 cnn step
#: of 20-35 ms with a restart every 64 steps shows three restarts in 4-7 s); on a host timer no
#: growth: a stall there is as likely a scheduler's hiccup, and the window is the chunks'.
MAX_CALIBRATION_S: Final[dict[TimerKind, float]] = {"host": 0.0, "cuda_event": 10.0}
#: Fewest steady steps of a calibration window.
MIN_CALIBRATION_STEPS: Final = 4
#: Most steady steps of a calibration window (a sub-millisecond step).
MAX_CALIBRATION_STEPS: Final = 512
#: A step this many times the window's median is a stall (an epoch restart re-forking loader
#: workers and refilling their prefetch queue takes many steps' time; step-to-step noise on a
#: 2-core host moves a single step by well under 2x, `_timer.SETTLE_TOLERANCE` is 10%).
STALL_FACTOR: Final = 3.0
#: Stalls evenly spaced that make a period: two give one gap, which a pair of scheduler
#: hiccups can fake; three give two equal gaps, which a loader's epoch keeps exactly.
MIN_STALLS: Final = 3
#: Longest period whose chunks are made whole periods: a longer one (a stall every few
#: hundred steps) is rare enough that the median over chunks is not moved by it.
MAX_PERIOD_STEPS: Final = 256
#: Cap on the steps of one chunk that is not made of periods (a very fast model still yields
#: many chunks).
MAX_CHUNK_STEPS: Final = 256


def min_chunk_s(timer: TimerKind) -> float:
    """The floor of a chunk timed by `timer` (module docstring)."""
    return _MIN_CHUNK_S[timer]


def timer_resolution_s(timer: TimerKind) -> float:
    """The smallest duration `timer` resolves, where it is known (0 for the host's, which
    `HostBlockTimer.resolution` measures)."""
    return CUDA_EVENT_RESOLUTION_S if timer == "cuda_event" else 0.0


def calibration_steps(step_s: float, timer: TimerKind, *, floor_s: float) -> int:
    """Steady steps of a calibration window for steps of about `step_s` seconds timed by
    `timer` in chunks of at least `floor_s`."""
    seconds = max(CALIBRATION_CHUNKS * floor_s, MIN_CALIBRATION_S[timer])
    wanted = math.ceil(seconds / step_s) if step_s > 0 else MIN_CALIBRATION_STEPS
    return min(max(MIN_CALIBRATION_STEPS, wanted), MAX_CALIBRATION_STEPS)


def more_calibration_steps(times: Sequence[float], timer: TimerKind) -> int:
    """Steps a calibration window of `times` should run on to see a stall's period: none when
    it has one, saw no stall, or is at `MAX_CALIBRATION_S` or `MAX_CALIBRATION_STEPS`; else up
    to one more gap past the last stall seen (the window again, with a single stall)."""
    if not times or stall_period(times) is not None:
        return 0
    bar = STALL_FACTOR * statistics.median(times)
    stalls = [i for i, t in enumerate(times) if t > bar]
    spent = sum(times)
    if not stalls or spent >= MAX_CALIBRATION_S[timer] or len(times) >= MAX_CALIBRATION_STEPS:
        return 0
    if len(stalls) >= 2:
        gap = max(b - a for a, b in itertools.pairwise(stalls))
        wanted = stalls[-1] + gap + 1 - len(times) + 1
    else:
        wanted = len(times)
    affordable = math.floor((MAX_CALIBRATION_S[timer] - spent) / (spent / len(times)))
    return max(0, min(wanted, affordable, MAX_CALIBRATION_STEPS - len(times)))


def stall_period(times: Sequence[float]) -> int | None:
    """Steps between stalls that recur at a fixed interval (an epoch restart), or None.

    A stall is a step over `STALL_FACTOR` times the median; a period needs `MIN_STALLS` of them
    with every gap equal and at least 2 steps (`MAX_PERIOD_STEPS` at most).
    """
    if len(times) < MIN_STALLS:
        return None
    median = statistics.median(times)
    stalls = [i for i, t in enumerate(times) if t > STALL_FACTOR * median]
    if len(stalls) < MIN_STALLS:
        return None
    gaps = {b - a for a, b in itertools.pairwise(stalls)}
    if len(gaps) != 1:
        return None
    period = gaps.pop()
    return period if 2 <= period <= MAX_PERIOD_STEPS else None


@dataclass(frozen=True)
class ChunkCalibration:
    """A chunk length calibrated from steady steps.

    `steps`: steps per chunk request; `step_s`: the window's mean step time (stalls included);
    `period`: the stall period the chunks are whole multiples of (None: no periodic stall);
    `dropped`: steps of each chunk left unscored at its start (a released GPU arm's first).
    """

    steps: int
    step_s: float
    period: int | None = None
    dropped: int = 0

    @property
    def scored_steps(self) -> int:
        return self.steps - self.dropped


def calibrate_chunks(
    times: Sequence[float], *, least: int, floor_s: float, dropped: int = 0
) -> ChunkCalibration:
    """The chunk length for steady steps `times`: at least `floor_s` of scored work at their
    mean step time, at least `least` steps; with a stall period, the scored steps of a chunk
    are a whole number of periods, so every chunk holds its share of stalls."""
    period = stall_period(times)
    if period is not None:
        # The mean over whole periods from the first stall: each stall counted once per period.
        bar = STALL_FACTOR * statistics.median(times)
        first = next(i for i, t in enumerate(times) if t > bar)
        whole = (len(times) - first) // period * period
        times = times[first : first + whole]
    step_s = statistics.fmean(times) if times else 0.0
    wanted = math.ceil(floor_s / step_s) if step_s > 0 else least
    scored = min(max(least, wanted), MAX_CHUNK_STEPS)
    if period is not None:
        scored = period * math.ceil(max(least, wanted) / period)
    return ChunkCalibration(steps=scored + dropped, step_s=step_s, period=period, dropped=dropped)


def period_chunks(times: Sequence[float], period: int | None, floor_s: float) -> list[list[int]]:
    """Indices of `times` cut into consecutive chunks of at least `floor_s` seconds, each a
    whole number of `period` steps when there is one (a tail short of either is left out,
    unless it is the only chunk)."""
    unit = period or 1
    chunks: list[list[int]] = []
    current: list[int] = []
    seconds = 0.0
    for i, t in enumerate(times):
        current.append(i)
        seconds += t
        if seconds >= floor_s and len(current) % unit == 0:
            chunks.append(current)
            current, seconds = [], 0.0
    if not chunks and current:
        chunks.append(current)
    return chunks
