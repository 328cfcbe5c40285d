"""Two ways of serving one model compared request by request, interleaved, at p50 and p99.

As the training A/B does (`measure.compare`), the two callables take turns in rounds whose
order is shuffled (seeded), so a drift of the machine lands on both alike. Each request is
timed on its own (`timed_call`), and each side's percentiles are compared.

The interval of a ratio of percentiles is built from each side's order-statistic interval,
each at 1 - (1 - c)/2 so that both hold together with probability at least c (Bonferroni):
speedup in [low_a / high_b, high_a / low_b]. It is distribution-free and conservative, which
is what a claim about a tail needs. The verdict is the training A/B's: the interval must
exclude 1 and the point estimate differ from 1 by at least `measure.DEFAULT_MIN_EFFECT`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Final

import numpy as np

from torchdoctor.core.errors import MeasureError
from torchdoctor.core.vocabulary import Clock
from torchdoctor.measure import DEFAULT_MIN_EFFECT, make_sync, ratio_verdict
from torchdoctor.serve._percentiles import (
    INTERVAL_CONFIDENCE,
    min_samples,
    order_statistic_interval,
    percentile,
)
from torchdoctor.serve.latency import timed_call
from torchdoctor.serve.records import PercentileComparison, VariantComparison

#: The percentiles two variants are judged on (the issue's p50 and p99).
COMPARED: Final = (50.0, 99.0)
#: Requests of one side per turn: long enough that switching sides is rare next to serving,
#: short enough that a drift of a second spreads over many turns.
DEFAULT_TURN: Final = 20
#: Warm-up requests of each side before the rounds start (their latencies are not kept).
DEFAULT_WARMUP: Final = 20


def compare_percentiles(
    baseline: Sequence[float] | np.ndarray,
    candidate: Sequence[float] | np.ndarray,
    *,
    percentiles: Sequence[float] = COMPARED,
    confidence: float = INTERVAL_CONFIDENCE,
    min_effect: float = DEFAULT_MIN_EFFECT,
) -> list[PercentileComparison]:
    """speedup = baseline / candidate at each percentile, its interval and verdict."""
    side_confidence = 1.0 - (1.0 - confidence) / 2.0
    out = []
    for p in percentiles:
        a_low, a_high = order_statistic_interval(baseline, p, side_confidence)
        b_low, b_high = order_statistic_interval(candidate, p, side_confidence)
        a, b = percentile(baseline, p), percentile(candidate, p)
        low = a_low / b_high if b_high else 0.0
        high = a_high / b_low if a_high is not None and b_low > 0 else float("inf")
        speedup = a / b if b > 0 else float("inf")
        out.append(
            PercentileComparison(
                percentile=p,
                baseline_s=a,
                candidate_s=b,
                speedup=speedup,
                ci_low=low,
                ci_high=min(high, 1e300),
                verdict=ratio_verdict(speedup, low, high, min_effect),
            )
        )
    return out


def compare_variants(
    baseline: Callable[[], object],
    candidate: Callable[[], object],
    *,
    names: tuple[str, str] = ("baseline", "candidate"),
    requests: int | None = None,
    turn: int = DEFAULT_TURN,
    warmup: int = DEFAULT_WARMUP,
    device: str = "cpu",
    confidence: float = INTERVAL_CONFIDENCE,
    min_effect: float = DEFAULT_MIN_EFFECT,
    seed: int = 0,
    clock: Clock | None = None,
    sync: Callable[[], None] | None = None,
) -> VariantComparison:
    """Serve `requests` requests on each side (default: LoadGen's p99 minimum) in shuffled
    turns of `turn` requests, and compare the sides' p50 and p99."""
    if turn < 1:
        raise MeasureError(f"turn {turn} must be at least 1 request")
    per_side = requests if requests is not None else min_samples(99.0)
    now = clock or time.perf_counter
    wait = sync or make_sync(device)
    calls = {names[0]: baseline, names[1]: candidate}
    for call in calls.values():
        for _ in range(warmup):
            call()
        wait()
    times: dict[str, list[float]] = {name: [] for name in calls}
    order = list(calls)
    rng = random.Random(seed)
    rounds = 0
    while len(times[names[0]]) < per_side:
        rng.shuffle(order)
        for name in order:
            times[name] += [timed_call(calls[name], wait, now) for _ in range(turn)]
        rounds += 1
    base = np.asarray(times[names[0]])
    cand = np.asarray(times[names[1]])
    return VariantComparison(
        baseline=names[0],
        candidate=names[1],
        rounds=rounds,
        requests_per_side=int(base.size),
        confidence=confidence,
        min_effect=min_effect,
        by_percentile=compare_percentiles(base, cand, confidence=confidence, min_effect=min_effect),
    )


__all__ = ["COMPARED", "compare_percentiles", "compare_variants"]
