"""The steady state: when warm-up is over, and the throughput of the steps after it.

One rule for `torchdoctor run` (`torchdoctor.engine.run`) and the tuner's arms
(`torchdoctor.tune.arms`), so that a user
who re-runs a tuned recipe with `run` sees the number the tuner measured:

- warm-up runs at least `MIN_WARMUP_STEPS` steps (the first holds torch.compile's
  compilation, cuDNN autotuning, first-touch allocation), then goes on one step at a time until
  the last few steps after the first agree within 10% (`settled`), at most
  `MAX_EXTRA_WARMUP_STEPS` more: compiled code keeps paying for a few steps after its first
  (guards, recompiles for the backward, allocator growth), and a fixed count let a short run's
  window hold that cost (compile measured 0.82x of eager in a 20-step run, 1.23x in 40);
- steady-state steps are timed without per-phase synchronization (phases are timed on
  separate steps), in chunks of at least `MIN_CHUNK_S`; the throughput is the median over
  chunks of samples per second, which one scheduler hiccup cannot move.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Final, Protocol

# `run --warmup`'s default (core/defaults.py, with why).
from torchdoctor.core.defaults import MIN_WARMUP_STEPS as MIN_WARMUP_STEPS
from torchdoctor.core.steps import StepTiming
from torchdoctor.measure._chunks import (
    HOST_MIN_CHUNK_S,
    MAX_CHUNK_STEPS,
    period_chunks,
    stall_period,
)
from torchdoctor.measure._timer import settled

#: Steps warm-up may add waiting for step times to settle. A job whose steps never agree within
#: 10% (a data pipeline with periodic work) is measured after these, its spread reported.
MAX_EXTRA_WARMUP_STEPS: Final = 30
#: A chunk lasts at least this long: scheduler preemptions on a shared machine last tens of
#: milliseconds, so a chunk of a few short steps can be slowed 2-10x by one of them; 0.3 s
#: chunks average such hiccups out (4-step chunks of an MLP varied 10x under load 10 on a
#: 2-core host, 0.3 s chunks a few percent). The floor of a host-timed chunk; a chunk timed by
#: CUDA events has its own (`measure._chunks.min_chunk_s`).
MIN_CHUNK_S: Final = HOST_MIN_CHUNK_S
#: Least steady-state steps a run measures by default (`steady_steps`): `torchdoctor run`
#: without --steps and each process of the tuner's final confirmation, so that both time the
#: same window.
DEFAULT_STEADY_STEPS: Final = 30
#: Least seconds of steady steps a run measures by default (`steady_steps`): 30 steps of a
#: small MLP are a few milliseconds, one chunk whose median is one sample; ten 0.3 s chunks
#: (`MIN_CHUNK_S`) give the median a spread of a few percent. Within one process the 2-core
#: AMD EPYC hosts switch between speeds 1.6x apart for seconds at a time (the mlp workload's
#: steps ran 3.7 ms for a few hundred steps, then 6.5 ms, with no other load seen), so a
#: window of a fraction of a second reads whichever speed the host had then.
MIN_STEADY_S: Final = 3.0
#: Cap on the default steady steps (a sub-millisecond step).
MAX_STEADY_STEPS: Final = 5000


class Stepper(Protocol):
    def run_steps(
        self, n: int, *, measure_phases: bool, on_step: Callable[[], None] | None = None
    ) -> list[StepTiming]: ...


def warm_up(
    session: Stepper,
    *,
    min_steps: int = MIN_WARMUP_STEPS,
    max_extra: int = MAX_EXTRA_WARMUP_STEPS,
    on_step: Callable[[], None] | None = None,
) -> list[StepTiming]:
    """Run warm-up steps until step times settle (`settled` over the steps after the first)."""
    steps = session.run_steps(min_steps, measure_phases=False, on_step=on_step) if min_steps else []
    extra = 0
    while min_steps and extra < max_extra and not settled([s.total_s for s in steps[1:]]):
        steps += session.run_steps(1, measure_phases=False, on_step=on_step)
        extra += 1
    return steps


def warmup_length(
    times: Sequence[float],
    *,
    min_steps: int = MIN_WARMUP_STEPS,
    max_extra: int = MAX_EXTRA_WARMUP_STEPS,
) -> int:
    """How many of the recorded step `times` `warm_up` would have run as warm-up.

    The same rule after the fact, for a script whose steps were recorded as it ran freely
    (`torchdoctor run --recipe R -- python train.py`): at least `min_steps`, then one more at
    a time until the steps after the first settle, at most `max_extra` more.
    """
    n = min(max(min_steps, 0), len(times))
    while min_steps and n < len(times) and n - min_steps < max_extra and not settled(times[1:n]):
        n += 1
    return n


def steady_steps(step_s: float, *, least: int = DEFAULT_STEADY_STEPS) -> int:
    """Steady steps a run of steps of `step_s` seconds times by default: at least `least` and
    at least `MIN_STEADY_S` of them, at most `MAX_STEADY_STEPS` (`least` for an unknown or
    zero step time)."""
    wanted = math.ceil(MIN_STEADY_S / step_s) if step_s > 0 else least
    return min(max(least, wanted), max(least, MAX_STEADY_STEPS))


def chunk_steps(step_s: float, *, least: int = 1, min_chunk_s: float = MIN_CHUNK_S) -> int:
    """Steps per chunk for steps of `step_s` seconds: at least `min_chunk_s` of work (and at
    least `least` steps, at most `MAX_CHUNK_STEPS`); the tuner's arms pass their plan's."""
    wanted = math.ceil(min_chunk_s / step_s) if step_s > 0 else least
    return min(max(least, wanted), MAX_CHUNK_STEPS)


def chunk_rates(
    steps: Sequence[StepTiming], *, period: int | None = None, floor_s: float = MIN_CHUNK_S
) -> list[float]:
    """Samples per second of consecutive chunks of at least `floor_s` (the last chunk may be
    shorter only when it is the sole one).

    Each chunk is a whole number of stall periods: `period` when the caller calibrated one,
    else the one the steps show (`measure._chunks.stall_period`), so that a stall recurring
    every epoch is counted at the rate the job pays it rather than in some chunks only.
    """
    times = [s.total_s for s in steps]
    if period is None:
        period = stall_period(times)
    rates: list[float] = []
    for chunk in period_chunks(times, period, floor_s):
        seconds = sum(times[i] for i in chunk)
        if seconds > 0:
            rates.append(sum(steps[i].samples or 0 for i in chunk) / seconds)
    return rates


def steady_rate(
    steps: Sequence[StepTiming], *, period: int | None = None, floor_s: float = MIN_CHUNK_S
) -> float:
    """Steady-state samples per second: the median over chunks (`chunk_rates`; 0 with no
    timed steps)."""
    rates = chunk_rates(steps, period=period, floor_s=floor_s)
    return statistics.median(rates) if rates else 0.0
