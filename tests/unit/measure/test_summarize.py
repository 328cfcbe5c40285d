from __future__ import annotations

import numpy as np
import pytest

from torchdoctor.core.errors import MeasureError
from torchdoctor.measure import Measurement, summarize
from torchdoctor.measure._measurement import IQR_WARN_FRACTION, MIN_SAMPLES_FOR_STATS


def test_statistics_match_numpy() -> None:
    rng = np.random.default_rng(3)
    times = rng.lognormal(mean=np.log(1e-3), sigma=0.02, size=200)
    m = summarize(times, label="x", number_per_sample=10)
    assert m.n == 200 and m.number_per_block == 10 and m.total_calls == 2000
    assert m.median == pytest.approx(np.median(times))
    assert m.mean == pytest.approx(times.mean())
    assert m.stdev == pytest.approx(times.std(ddof=1))
    assert m.p95 == pytest.approx(np.percentile(times, 95))
    assert m.iqr == pytest.approx(np.percentile(times, 75) - np.percentile(times, 25))
    assert m.min == times.min() and m.max == times.max()
    assert m.ci_low < m.median < m.ci_high
    assert m.warnings == []


def test_ci_is_seeded_and_narrows_with_more_samples() -> None:
    rng = np.random.default_rng(0)
    small = rng.normal(1.0, 0.05, size=20).clip(0.5)
    large = rng.normal(1.0, 0.05, size=2000).clip(0.5)
    assert summarize(small) == summarize(small)
    assert summarize(large).rel_ci_halfwidth < summarize(small).rel_ci_halfwidth


def test_ci_covers_true_median_about_as_often_as_claimed() -> None:
    rng = np.random.default_rng(11)
    covered = 0
    for _ in range(200):
        times = rng.exponential(1.0, size=60)  # true median ln 2
        m = summarize(times)
        covered += m.ci_low <= np.log(2) <= m.ci_high
    assert 0.88 <= covered / 200 <= 0.99


def test_noise_warnings() -> None:
    noisy = summarize([1.0, 1.3, 0.8, 1.0, 1.25, 0.9, 1.0, 1.2, 0.85, 1.1, 1.0, 0.95])
    assert any("IQR" in w for w in noisy.warnings)
    assert noisy.iqr / noisy.median > IQR_WARN_FRACTION
    few = summarize([1.0, 1.0])
    assert len(few.times) < MIN_SAMPLES_FOR_STATS
    assert any("sample" in w for w in few.warnings)


def test_single_sample_has_zero_width_ci() -> None:
    m = summarize([2.0])
    assert m.ci_low == m.ci_high == m.median == 2.0 and m.stdev == 0.0


def test_roundtrip_json() -> None:
    m = summarize([1.0, 2.0, 3.0], label="a")
    assert Measurement.from_json_dict(m.to_json_dict()) == m


@pytest.mark.parametrize(
    ("samples", "kwargs"),
    [([], {}), ([1.0, -1.0], {}), ([float("nan")], {}), ([1.0], {"confidence": 1.5})],
)
def test_bad_input_raises_measure_error(samples: list[float], kwargs: dict[str, float]) -> None:
    with pytest.raises(MeasureError):
        summarize(samples, **kwargs)  # type: ignore[arg-type]
