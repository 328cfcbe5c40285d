"""A fake worker whose steps cost what a small job's steps cost on a GPU, loader included.

`EpochJob` answers the worker protocol's `Run` and `Release` (`torchdoctor.procs`) with step
times drawn from a model of the device and the job, not from the tuner's rules:

- a steady step takes `step_s` (a few to tens of milliseconds, as the H200's cnn steps did),
  times a seeded lognormal noise of `noise`, times the process's own speed (`process_factor`,
  a fresh process of a recipe runs a little faster or slower than another);
- the data loader's epoch is `epoch_steps` steps; the first step of each epoch waits for its
  workers to be forked again and their prefetch queue refilled: `restart_s` more (0 for a
  loader without worker processes). The loader's place in its epoch carries over from one
  request to the next, as a live session's does;
- after a `Release` (or a `Run` with `release`, or a park), the caching allocator is empty and
  the next step pays `refill_s` more (cudaMalloc synchronizes).

Losses fall as a training run's do, with a little noise per seed (`Reference` runs too).

Time is not spent: the steps report the seconds the device would have taken.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from torchdoctor.procs import (
    Done,
    Losses,
    Park,
    Parked,
    Ran,
    Reference,
    Release,
    Request,
    Run,
    StepRow,
    Unpark,
)


@dataclass
class EpochJob:
    step_s: float
    epoch_steps: int = 64
    restart_s: float = 0.0
    refill_s: float = 0.0
    noise: float = 0.02
    process_factor: float = 1.0
    batch: int = 32
    seed: int = 0
    peak_rss_bytes: int = 0
    steps_done: int = 0
    requests: int = 0
    closed: bool = False
    _released: bool = False
    _rng: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng(self.seed)

    def _step(self) -> float:
        seconds = self.step_s * self.process_factor * float(self._rng.lognormal(0.0, self.noise))
        if self.steps_done % self.epoch_steps == 0:
            seconds += self.restart_s
        if self._released:
            seconds += self.refill_s
            self._released = False
        self.steps_done += 1
        return seconds

    def request(self, message: Request[object], *, timeout_s: float) -> object:
        self.requests += 1
        if isinstance(message, Run):
            rows = tuple(
                StepRow(self._step(), self.batch, self._loss(self.steps_done, self._rng))
                for _ in range(message.steps)
            )
            self._released = self._released or message.release
            return Ran(rows)
        if isinstance(message, Release):
            self._released = True
            return Done()
        if isinstance(message, (Park, Unpark)):
            self._released = True  # parked state comes back to an empty cache
            return Parked()
        if isinstance(message, Reference):
            rng = np.random.default_rng([self.seed, message.perturbation])
            return Losses(tuple(self._loss(i, rng) for i in range(message.steps)))
        raise AssertionError(f"EpochJob does not answer {type(message).__name__}")

    @staticmethod
    def _loss(index: int, rng: np.random.Generator) -> float:
        return 2.0 * math.exp(-0.05 * index) + 0.2 + 0.002 * float(rng.standard_normal())

    def close(self) -> None:
        self.closed = True

    def mean_step_s(self) -> float:
        """The step time a long run of this job averages, restarts included."""
        return self.step_s * self.process_factor + self.restart_s / self.epoch_steps
