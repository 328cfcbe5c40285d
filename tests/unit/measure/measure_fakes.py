"""Fakes for deterministic timing tests: statements advance a `FakeClock` by the time they
'take'."""

from __future__ import annotations

import math

import numpy as np

from fakes import FakeClock


class NoisyStatement:
    """A statement whose calls take `cost` seconds times noise, on a shared fake clock.

    The noise model is what a shared machine does: per-call jitter (lognormal), rare spikes
    (an interrupt, another tenant), and a slow drift common to everything running at that
    moment (frequency scaling), which interleaving is meant to cancel.
    """

    def __init__(
        self,
        clock: FakeClock,
        cost: float,
        rng: np.random.Generator,
        *,
        jitter: float = 0.05,
        spike_prob: float = 0.01,
        drift: float = 0.03,
        drift_period_s: float = 0.5,
    ) -> None:
        self.clock, self.cost, self.rng = clock, cost, rng
        self.jitter, self.spike_prob = jitter, spike_prob
        self.drift, self.drift_period_s = drift, drift_period_s
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        drift = 1.0 + self.drift * math.sin(2 * math.pi * self.clock.now / self.drift_period_s)
        spike = 3.0 if self.rng.random() < self.spike_prob else 1.0
        self.clock.advance(self.cost * drift * spike * self.rng.lognormal(0.0, self.jitter))


def noisy(clock: FakeClock, cost: float, seed: int, **kwargs: float) -> NoisyStatement:
    return NoisyStatement(clock, cost, np.random.default_rng(seed), **kwargs)
