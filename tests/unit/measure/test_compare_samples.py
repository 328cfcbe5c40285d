from __future__ import annotations

import numpy as np
import pytest

from torchdoctor.core.errors import MeasureError
from torchdoctor.measure import RatioEstimate, compare_samples


def _noisy(rng: np.random.Generator, scale: float, n: int = 50) -> np.ndarray:
    return scale * rng.lognormal(0.0, 0.05, size=n)


def test_clear_speedup_is_faster_with_ci_around_it() -> None:
    rng = np.random.default_rng(0)
    est = compare_samples(_noisy(rng, 2e-3), _noisy(rng, 1e-3))
    assert est.verdict == "faster"
    assert est.ci_low <= est.speedup <= est.ci_high
    assert 1.8 < est.speedup < 2.2
    assert est.percent_change == pytest.approx(-50, abs=6)


def test_same_distribution_false_positive_rate_is_near_nominal() -> None:
    # Calibration: with identical distributions, a 95% interval should exclude 1 about 5% of
    # the time; a liberal method (much more than 5%) would make the tuner keep useless knobs.
    rng = np.random.default_rng(7)
    trials = 300
    false_positives = sum(
        compare_samples(_noisy(rng, 1e-3), _noisy(rng, 1e-3), seed=i).verdict
        != "no_significant_difference"
        for i in range(trials)
    )
    assert false_positives / trials <= 0.08


def test_ten_percent_slower_is_detected() -> None:
    rng = np.random.default_rng(1)
    verdicts = [
        compare_samples(_noisy(rng, 1e-3), _noisy(rng, 1.1e-3), seed=i).verdict for i in range(40)
    ]
    assert verdicts.count("slower") >= 38


def test_min_effect_suppresses_tiny_but_significant_differences() -> None:
    base = np.full(200, 1.0) + np.linspace(0, 1e-3, 200)
    cand = base * 1.005  # 0.5% slower, perfectly consistent
    assert compare_samples(base, cand, min_effect=0.0).verdict == "slower"
    assert compare_samples(base, cand, min_effect=0.01).verdict == "no_significant_difference"


def test_roundtrip_and_seed_determinism() -> None:
    rng = np.random.default_rng(2)
    a, b = _noisy(rng, 1.0), _noisy(rng, 1.0)
    est = compare_samples(a, b, seed=5)
    assert est == compare_samples(a, b, seed=5)
    assert RatioEstimate.from_json_dict(est.to_json_dict()) == est


@pytest.mark.parametrize(
    ("base", "cand", "kwargs"),
    [
        ([1.0, 1.0], [1.0, 1.0, 1.0], {}),
        ([1.0, 1.0, 0.0], [1.0, 1.0, 1.0], {}),
        ([1.0] * 5, [1.0] * 5, {"confidence": 0.0}),
        ([1.0] * 5, [1.0] * 5, {"min_effect": -0.1}),
    ],
)
def test_bad_input(base: list[float], cand: list[float], kwargs: dict[str, float]) -> None:
    with pytest.raises(MeasureError):
        compare_samples(base, cand, **kwargs)  # type: ignore[arg-type]
