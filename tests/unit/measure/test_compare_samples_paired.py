"""Paired comparison of interleaved rounds: drift cancels, the false-positive rate holds."""

from __future__ import annotations

import numpy as np
import pytest

from torchdoctor.core.errors import MeasureError
from torchdoctor.measure import compare_samples

ROUNDS = 30
#: Machine drift shared by both samples of a round (another tenant, clock scaling): large.
DRIFT_SIGMA = 0.30
#: Noise of each block on its own: small.
BLOCK_SIGMA = 0.01


def _rounds(seed: int, slowdown: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    drift = rng.lognormal(0.0, DRIFT_SIGMA, ROUNDS)
    base = drift * rng.lognormal(0.0, BLOCK_SIGMA, ROUNDS)
    cand = drift * slowdown * rng.lognormal(0.0, BLOCK_SIGMA, ROUNDS)
    return base, cand


def test_paired_sees_through_shared_drift_where_unpaired_cannot() -> None:
    base, cand = _rounds(seed=1, slowdown=1.10)
    paired = compare_samples(base, cand, paired=True)
    unpaired = compare_samples(base, cand)
    assert paired.verdict == "slower"
    assert paired.speedup == pytest.approx(1 / 1.10, rel=0.02)
    assert unpaired.verdict == "no_significant_difference"
    assert (paired.ci_high - paired.ci_low) < (unpaired.ci_high - unpaired.ci_low) / 5


def test_paired_self_comparison_false_positive_rate() -> None:
    verdicts = [
        compare_samples(*_rounds(seed, 1.0), paired=True, seed=seed).verdict for seed in range(40)
    ]
    assert sum(v != "no_significant_difference" for v in verdicts) <= 2  # <= 5% of 40


def test_paired_detects_ten_percent_in_at_least_95_percent() -> None:
    verdicts = [
        compare_samples(*_rounds(seed, 1.10), paired=True, seed=seed).verdict for seed in range(40)
    ]
    assert sum(v == "slower" for v in verdicts) >= 38


def test_paired_needs_equal_lengths() -> None:
    with pytest.raises(MeasureError, match="one candidate sample per baseline sample"):
        compare_samples([1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], paired=True)
