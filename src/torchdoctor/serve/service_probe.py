"""Service times as a distribution, measured closed-loop beside the real run they predict.

The batching simulation needs each batch's service time. A table of medians t(b) measured
minutes before a real run mispredicts it twice over: the p99 of the requests depends on the
service's tail, not on its median, and on a shared host the service's speed itself moves (by
up to 1.6x for seconds at a time on the 2-core VMs of benchmarks/RESULTS.md, session 19), so a
table from minutes before is off by that much. So a probe measures the service closed-loop
(one call at a time, no queue, no arrival schedule) right before and right after the real run
it is to predict, and the simulation draws from the empirical distribution of those calls:

- every batch size the batcher may form, in a shuffled order each round, so that a drift of
  the host's speed during the probe spreads over every size alike;
- after each idle gap of `PROBE_GAPS_S` (back to back, and one gap inside each longer idle bin
  of `calibration.IDLE_EDGES_S`), slept on the batcher's own clock: a batch served after the
  server idled runs slower (intra-op threads that went to sleep, cold caches), and the
  simulation draws each batch's time from its size's calls after a like idle time;
- on the batcher's own thread, through its own calls, device sync and clock, with the same
  intra-op threads: the thread setup the real batcher serves with;
- the sleeps' overshoot (how late a sleep ends) read from the probe's own sleeps, and the
  batcher loop's own cost per batch from a closed-loop run of the loop on a no-op model
  (`loop_cost`).

Nothing is taken from the real run being predicted: the probe is a closed-loop measurement,
and which batches form, after how much idling, is the simulation's own (`simulate_sampled`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from torchdoctor.core.errors import MeasureError
from torchdoctor.serve.batcher import BatchPolicy, LoadTrace, run_batcher
from torchdoctor.serve.calibration import idle_bin, quantile_at
from torchdoctor.serve.clock import ServeClock, VirtualClock

#: Idle gaps slept before a probed call: none (back to back, as a busy batcher serves), and
#: the geometric middles of the calibration's idle bins 0.2-2 ms and 2-20 ms (0.63 and 6.3 ms),
#: the idle times a batcher under light and moderate load sees. Longer idles draw from the
#: longest bin probed (`_nearest_bin`).
PROBE_GAPS_S: Final = (0.0, 6.3e-4, 6.3e-3)
#: Rounds of a probe by default: each round calls every batch size after every gap once, so
#: two probes around a run give 16 calls per size and idle bin, enough for a distribution's
#: body and its upper tenth; more rounds make the probe longer than the run it brackets.
PROBE_ROUNDS: Final = 8
#: Simulations of one arrival schedule whose latencies a prediction pools: a p99 of a few
#: thousand requests turns on the handful of slow calls one draw happens to hold (about 20%
#: apart between two draws on the unit tests' host); ten draws narrow that by sqrt(10).
SIMULATION_REPLICAS: Final = 10
#: Requests of the closed-loop no-op run that prices the batcher's own loop.
LOOP_COST_REQUESTS: Final = 2000


@dataclass(frozen=True)
class ServiceSamples:
    """Closed-loop call times by (batch size, idle bin), the sleeps' overshoot, and the
    batcher loop's own cost per batch; `spans_s` holds each probe's (start, end) on the clock
    it ran on, to tell how a probe was paired with a real run."""

    times_s: Mapping[tuple[int, int], tuple[float, ...]]
    overshoot_s: tuple[float, ...]
    loop_s: float = 0.0
    spans_s: tuple[tuple[float, float], ...] = ()

    def sizes(self) -> list[int]:
        return sorted({b for b, _ in self.times_s})

    def back_to_back_s(self, batch_size: int) -> float:
        """The median of a size's calls that started right after the last one ended (idle
        bin 0): what a closed-loop table t(b) measures; over every call when none did."""
        values = self.times_s.get((batch_size, 0))
        return float(np.median(values)) if values else self.median_s(batch_size)

    def median_s(self, batch_size: int) -> float:
        """The median of a size's calls over every idle bin (what a t(b) table would say)."""
        values = [t for (b, _), ts in self.times_s.items() if b == batch_size for t in ts]
        if not values:
            raise MeasureError(f"no probed calls at batch size {batch_size}")
        return float(np.median(values))


def probe_service(
    calls: Mapping[int, Callable[[], object]],
    clock: ServeClock,
    *,
    rounds: int = PROBE_ROUNDS,
    gaps_s: Sequence[float] = PROBE_GAPS_S,
    sync: Callable[[], None] = lambda: None,
    seed: int = 0,
    loop_s: float = 0.0,
) -> ServiceSamples:
    """Call every batch size of `calls` after every gap of `gaps_s`, `rounds` times, in a
    shuffled order each round, and keep each call's time by its size and idle bin."""
    if rounds < 1 or not calls:
        raise MeasureError("a service probe needs at least one round and one batch size")
    rng = np.random.default_rng(seed)
    pairs = [(b, g) for b in sorted(calls) for g in gaps_s]
    times: dict[tuple[int, int], list[float]] = {}
    overshoot: list[float] = []
    began = last_done = clock.now()
    for _ in range(rounds):
        for index in rng.permutation(len(pairs)):
            b, gap = pairs[int(index)]
            if gap > 0:
                due = clock.now() + gap
                clock.sleep_until(due)
                overshoot.append(clock.now() - due)
            start = clock.now()
            calls[b]()
            sync()
            done = clock.now()
            times.setdefault((b, idle_bin(start - last_done)), []).append(done - start)
            last_done = done
    return ServiceSamples(
        times_s={k: tuple(v) for k, v in times.items()},
        overshoot_s=tuple(overshoot) or (0.0,),
        loop_s=loop_s,
        spans_s=((began, clock.now()),),
    )


def loop_cost(policy: BatchPolicy, clock: ServeClock, requests: int = LOOP_COST_REQUESTS) -> float:
    """The batcher loop's own time per batch, closed-loop: every request due at once and a
    model that does nothing, so the batches run back to back and the loop is all there is."""
    trace = run_batcher(lambda _: None, np.zeros(requests), policy, clock)
    return trace.duration_s / max(1, len(trace.batch_sizes))


def merged(samples: Iterable[ServiceSamples]) -> ServiceSamples:
    """Several probes as one distribution (the loop's cost: their mean)."""
    parts = list(samples)
    if not parts:
        raise MeasureError("no service probes to merge")
    times: dict[tuple[int, int], list[float]] = {}
    for part in parts:
        for key, values in part.times_s.items():
            times.setdefault(key, []).extend(values)
    return ServiceSamples(
        times_s={k: tuple(v) for k, v in times.items()},
        overshoot_s=tuple(v for p in parts for v in p.overshoot_s),
        loop_s=float(np.mean([p.loop_s for p in parts])),
        spans_s=tuple(s for p in parts for s in p.spans_s),
    )


class _Draws:
    """Service-time draws by batch size and idle time from `ServiceSamples`: the median of the
    size's calls after a like idle time, times a ratio drawn from the calls' ratios to their
    own size's median after that idle time, pooled over the sizes.

    Pooled because a (size, idle) cell holds a few dozen calls at most, and the tail that
    decides a p99 is rarer than that: a 1-in-20 slow call is missing from 16 calls more often
    than not (0.95^16 = 0.44), while the pool of a bin's sizes holds a hundred or more. The
    size sets the median; the spread around it is taken as one shape for all sizes, but not
    across idle bins: a cold start adds a constant, which thins the relative spread of a cold
    call, and a busy batcher's back-to-back calls must not draw from it.
    """

    def __init__(self, samples: ServiceSamples) -> None:
        self._medians: dict[int, dict[int, float]] = {}
        ratios: dict[int, list[float]] = {}
        for (b, k), values in samples.times_s.items():
            if values:
                median = float(np.median(values))
                self._medians.setdefault(b, {})[k] = median
                ratios.setdefault(k, []).extend(
                    [v / median for v in values] if median > 0 else [1.0] * len(values)
                )
        self._sizes = sorted(self._medians)
        if not self._sizes:
            raise MeasureError("the service probe holds no calls")
        self._ratios = {k: sorted(v) for k, v in ratios.items()}
        self._found: dict[tuple[int, int], tuple[float, list[float]]] = {}

    @staticmethod
    def _nearest(have: Iterable[int], k: int) -> int:
        """The bin nearest to `k` among `have`, the longer idle on a tie (the colder)."""
        return min(have, key=lambda h: (abs(h - k), -h))

    def _median(self, b: int, k: int) -> float:
        bins = self._medians[b]
        return bins[self._nearest(bins, k)]

    def median(self, b: int, idle_s: float) -> float:
        """The median service of a batch of `b` after `idle_s` idle; a size not probed: its
        probed neighbours' medians, linear in b, and past the largest extended by the last two
        (as `service_time` extends a table)."""
        k = idle_bin(idle_s)
        if b in self._medians:
            return self._median(b, k)
        sizes = self._sizes
        if len(sizes) == 1:
            return self._median(sizes[0], k) * b / sizes[0]
        at = min(max(1, bisect.bisect_left(sizes, b)), len(sizes) - 1)
        low_b, high_b = sizes[at - 1], sizes[at]
        low_t, high_t = self._median(low_b, k), self._median(high_b, k)
        return max(0.0, low_t + (high_t - low_t) * (b - low_b) / (high_b - low_b))

    def __call__(self, b: int, idle_s: float, u: float) -> float:
        key = (b, idle_bin(idle_s))
        found = self._found.get(key)
        if found is None:  # looked up once per (size, bin): the simulation draws per batch
            ratios = self._ratios[self._nearest(self._ratios, key[1])]
            found = self._found[key] = (self.median(b, idle_s), ratios)
        return found[0] * quantile_at(found[1], u)


class _ProbedClock(VirtualClock):
    """Virtual time on which the batcher's loop costs its probed cost before each sleep, and
    a sleep ends late by an overshoot drawn from the probe's sleeps."""

    def __init__(self, samples: ServiceSamples, rng: np.random.Generator) -> None:
        super().__init__()
        self._overshoot = sorted(samples.overshoot_s)
        self._loop_s = samples.loop_s
        self._rng = rng
        #: When the last batch ended: the server is idle from then to the next start.
        self.last_done = 0.0

    def sleep_until(self, when: float) -> None:
        self.advance(self._loop_s)
        if when > self.now():
            super().sleep_until(when + quantile_at(self._overshoot, self._rng.random()))


def simulate_sampled(
    arrivals: Sequence[float] | np.ndarray,
    samples: ServiceSamples,
    policy: BatchPolicy,
    *,
    seed: int = 0,
) -> LoadTrace:
    """The batcher on virtual time, each batch's service drawn from the probed calls of its
    size after a like idle time (seeded)."""
    rng = np.random.default_rng(seed)
    clock = _ProbedClock(samples, rng)
    draw = _Draws(samples)

    def serve(b: int) -> None:
        clock.advance(draw(b, clock.now() - clock.last_done, rng.random()))
        clock.last_done = clock.now()

    return run_batcher(serve, arrivals, policy, clock)


def simulated_latencies(
    arrivals: Sequence[float] | np.ndarray,
    samples: ServiceSamples,
    policy: BatchPolicy,
    *,
    replicas: int = SIMULATION_REPLICAS,
    seed: int = 0,
) -> np.ndarray:
    """Every request's latency over `replicas` simulations of the same arrivals, each drawing
    its own service times (seeds `seed`, `seed + 1`, ...): the prediction's percentiles are
    then those of the service's distribution, not of one draw of its rare slow calls."""
    return np.concatenate(
        [
            simulate_sampled(arrivals, samples, policy, seed=seed + r).latencies_s
            for r in range(max(1, replicas))
        ]
    )


def drift(samples: Sequence[ServiceSamples], batch_size: int) -> float:
    """How far the host's speed moved across probes: the largest over the smallest of their
    medians at `batch_size` (1.0: steady)."""
    medians = [s.median_s(batch_size) for s in samples]
    return max(medians) / min(medians) if medians and min(medians) > 0 else math.nan


__all__ = [
    "LOOP_COST_REQUESTS",
    "PROBE_GAPS_S",
    "PROBE_ROUNDS",
    "SIMULATION_REPLICAS",
    "ServiceSamples",
    "drift",
    "loop_cost",
    "merged",
    "probe_service",
    "simulate_sampled",
    "simulated_latencies",
]
