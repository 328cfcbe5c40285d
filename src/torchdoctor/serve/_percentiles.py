"""Percentiles of request latencies, their distribution-free intervals, and how many requests
a tail claim needs.

An interval for a percentile comes from order statistics, not from a bootstrap: among n
independent latencies, the number that fall below the true q-quantile is Binomial(n, q), so
the sorted sample's l-th and u-th values bracket the quantile with probability
P(l <= B < u), whatever the latencies' distribution (Hahn & Meeker, *Statistical Intervals*,
1991, sec. 5.2; Conover, *Practical Nonparametric Statistics*, 3rd ed., sec. 3.2). A bootstrap
of a high percentile is unreliable: it resamples the few largest values and its interval
collapses onto them.

How many requests a tail needs is MLPerf LoadGen's rule (github.com/mlcommons/inference,
`loadgen/`, whose early-stopping criterion generalizes it to a few exceedances): to claim the
q-quantile is under a bound with confidence c when no request exceeded it, n must satisfy
q^n <= 1 - c, so that a true quantile above the bound would show no exceedance among n
requests with probability at most 1 - c. For p99 at 99% that is ceil(ln 0.01 / ln 0.99) = 459.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import numpy as np
from scipy import stats

from torchdoctor.core.errors import MeasureError

#: The percentiles every latency record reports.
PERCENTILES: Final = (50.0, 95.0, 99.0)
#: LoadGen's confidence for latency claims (99%: the confidence of its early-stopping
#: percentile estimates).
TAIL_CONFIDENCE: Final = 0.99
#: The confidence of each percentile's order-statistic interval (the project's usual 95%).
INTERVAL_CONFIDENCE: Final = 0.95


def min_samples(percentile: float, confidence: float = TAIL_CONFIDENCE) -> int:
    """Fewest requests, none over the bound, that claim the `percentile` is under it.

    The binomial with no exceedance: the smallest n with (q)^n <= 1 - confidence. For p99 at
    99% this is 459 (LoadGen's figure), p95 90, p50 7.
    """
    q = _fraction(percentile)
    if not 0.0 < confidence < 1.0:
        raise MeasureError(f"confidence {confidence!r} is not between 0 and 1")
    return math.ceil(math.log(1.0 - confidence) / math.log(q) - 1e-12)


def _fraction(percentile: float) -> float:
    if not 0.0 < percentile < 100.0:
        raise MeasureError(f"percentile {percentile!r} is not between 0 and 100")
    return percentile / 100.0


def percentile(samples: Sequence[float] | np.ndarray, p: float) -> float:
    """The p-th percentile by the order statistic at rank ceil(q n) (the empirical
    quantile's inverse, as LoadGen reports it: the latency that q of the requests met)."""
    data = np.sort(np.asarray(samples, dtype=np.float64))
    if data.size == 0:
        raise MeasureError("no latencies to take a percentile of")
    rank = max(1, math.ceil(_fraction(p) * data.size - 1e-9))
    return float(data[rank - 1])


def order_statistic_interval(
    samples: Sequence[float] | np.ndarray, p: float, confidence: float = INTERVAL_CONFIDENCE
) -> tuple[float, float | None]:
    """A distribution-free interval of the p-th percentile: (low, high), high None when the
    sample is too small for an upper bound at this confidence (the tail is not covered).

    Ranks l and u (1-based) are the binomial quantiles of Binomial(n, q) at alpha/2 and
    1 - alpha/2; the coverage P(l <= B <= u - 1) is checked exactly and the interval widened
    one rank at a time until it holds.
    """
    data = np.sort(np.asarray(samples, dtype=np.float64))
    n = data.size
    if n == 0:
        raise MeasureError("no latencies to take a percentile of")
    q = _fraction(p)
    alpha = 1.0 - confidence
    low = max(0, int(stats.binom.ppf(alpha / 2.0, n, q)))
    high = int(stats.binom.ppf(1.0 - alpha / 2.0, n, q)) + 1

    def coverage(lo: int, hi: int) -> float:
        # P(lo <= B <= hi - 1), B ~ Binomial(n, q): the lo-th and hi-th order statistics
        # bracket the quantile. lo = 0 means "no lower order statistic" (minus infinity).
        return float(stats.binom.cdf(hi - 1, n, q) - stats.binom.cdf(lo - 1, n, q))

    while coverage(low, high) < confidence and (low > 1 or high <= n):
        if high <= n:
            high += 1
        elif low > 1:
            low -= 1
    lower = float(data[max(low, 1) - 1])
    upper = float(data[high - 1]) if high <= n and coverage(low, high) >= confidence else None
    return lower, upper


__all__ = [
    "INTERVAL_CONFIDENCE",
    "PERCENTILES",
    "TAIL_CONFIDENCE",
    "min_samples",
    "order_statistic_interval",
    "percentile",
]
