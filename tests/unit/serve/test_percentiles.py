"""LoadGen's sample count and the order-statistic intervals of percentiles."""

from __future__ import annotations

import numpy as np
import pytest

from torchdoctor.core.errors import MeasureError
from torchdoctor.serve import min_samples, order_statistic_interval, percentile, summarize_latencies


def test_loadgen_count_for_p99_is_459() -> None:
    n = min_samples(99.0, 0.99)
    assert n == 459
    # The definition: with no exceedance among n, a p99 above the bound would have shown one
    # with probability at least 99%; one request fewer falls short of it.
    assert 0.99**n <= 0.01 < 0.99 ** (n - 1)
    assert min_samples(95.0, 0.99) == 90 and min_samples(50.0, 0.99) == 7


def test_percentile_is_the_order_statistic_the_requests_met() -> None:
    data = list(range(1, 101))  # 1..100
    assert percentile(data, 50.0) == 50 and percentile(data, 99.0) == 99
    assert percentile([3.0], 99.0) == 3.0
    with pytest.raises(MeasureError):
        percentile([], 50.0)


@pytest.mark.parametrize("p", [50.0, 90.0])
def test_interval_covers_the_true_percentile_at_its_confidence(p: float) -> None:
    # Exponential latencies: the true q-quantile is -ln(1 - q). Distribution-free means the
    # coverage holds for this skewed law as for any other.
    rng = np.random.default_rng(1)
    truth = -np.log(1.0 - p / 100.0)
    repeats, hits = 600, 0
    for _ in range(repeats):
        low, high = order_statistic_interval(rng.exponential(size=200), p, 0.95)
        assert high is not None
        hits += low <= truth <= high
    # At least the nominal 95% (the exact binomial ranks over-cover slightly), minus three
    # standard errors of a 600-draw proportion.
    assert hits / repeats >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / repeats)


def test_too_few_requests_leave_the_tail_unbounded() -> None:
    data = np.arange(1.0, 101.0)
    low, high = order_statistic_interval(data, 99.0, 0.95)
    assert high is None and low <= 99.0
    summary = summarize_latencies(data)
    p99 = summary.at(99.0)
    assert p99.ci_high_s is None and not p99.enough_samples and p99.min_samples == 459
    assert summary.at(50.0).enough_samples
