"""The quality check: a candidate is judged against the baseline's own spread.

The reference is the baseline's late-window loss under no-op perturbations; a change that
trains the same is one more draw of it (a Student-t prediction interval). These tests use
synthetic trajectories whose spread is known; tests/integration/test_quality_check.py runs the
check on real training of the `cnn` workload.
"""

from __future__ import annotations

import math
import random

import pytest

from torchdoctor.tune.parity import (
    CLOSE_TOLERANCE,
    EXACT_TOLERANCE,
    QUALITY_CONFIDENCE,
    QualityReference,
    check_parity,
    first_non_finite,
    late_mean,
    loosest,
)

STEPS = 16
CURVE = [2.0 * math.exp(-0.1 * i) + 0.5 for i in range(STEPS)]


def _run(offset: float, *, noise: float = 0.0, seed: int = 0) -> list[float | None]:
    """The curve with its late half shifted by `offset` (chaotic drift) plus per-step noise."""
    rng = random.Random(seed)
    return [
        v + (offset if i >= STEPS // 2 else 0.0) + noise * rng.gauss(0, 1)
        for i, v in enumerate(CURVE)
    ]


def _reference(offsets: list[float]) -> QualityReference:
    return QualityReference.from_trajectories(_run(0.0), [_run(o) for o in offsets], steps=STEPS)


#: Reference runs whose late means spread with standard deviation ~0.1 around the baseline's.
SPREAD = [0.12, -0.08, 0.1, -0.15, 0.05, -0.02]


def test_the_reference_holds_the_baseline_first_and_its_spread() -> None:
    ref = _reference(SPREAD)
    assert ref.runs == 7 and ref.window == (8, 16)
    assert ref.baseline == pytest.approx(late_mean(CURVE, (8, 16)))
    assert ref.spread == pytest.approx(0.0965, abs=1e-3)


def test_a_drift_inside_the_spread_passes_where_a_fixed_tolerance_failed() -> None:
    # The failure this check replaces: a harmless change drifting 20% (chaos), rejected by a
    # fixed 0.1% (exact) or 5% (close) tolerance. Measured spread this large admits it.
    ref = _reference(SPREAD)
    drift = _run(0.18)
    for safety in ("exact", "close"):
        result = check_parity(ref, drift, safety)
        assert result.passed, result.reason
        assert result.deviation is not None and abs(result.deviation) > CLOSE_TOLERANCE


def test_a_drift_beyond_the_prediction_interval_fails_both_ways() -> None:
    ref = _reference(SPREAD)
    half = ref.half_width(one_sided=False)
    for sign in (1, -1):
        result = check_parity(ref, _run(ref.mean - ref.baseline + sign * 1.05 * half), "close")
        assert not result.passed
        assert "99% prediction interval" in result.reason
    inside = check_parity(ref, _run(ref.mean - ref.baseline + 0.95 * half), "close")
    assert inside.passed


def test_the_interval_is_the_student_t_prediction_interval() -> None:
    ref = _reference(SPREAD)
    # t(6, 0.995) = 3.7074 (two-sided 99%), t(6, 0.99) = 3.1427 (one-sided 99%).
    assert ref.half_width(one_sided=False) == pytest.approx(
        3.7074 * ref.spread * math.sqrt(1 + 1 / 7), rel=1e-4
    )
    assert ref.half_width(one_sided=True) == pytest.approx(
        3.1427 * ref.spread * math.sqrt(1 + 1 / 7), rel=1e-4
    )
    assert QUALITY_CONFIDENCE == 0.99


def test_semantic_changes_are_judged_upwards_only() -> None:
    # A larger batch lowers the loss per step: far below is no regression for it, but is for
    # an exact change, which must compute the same thing.
    ref = _reference(SPREAD)
    lower = _run(-1.0)
    assert check_parity(ref, lower, "semantic").passed
    exact = check_parity(ref, lower, "exact")
    assert not exact.passed and "falls further than the baseline's can by chance" in exact.reason
    higher = check_parity(ref, _run(1.0), "semantic")
    assert not higher.passed and "at most" in higher.reason


def test_agreeing_replicas_fall_back_to_the_class_floor() -> None:
    # Runs that agree to many digits leave the class's numerical allowance: 5% for close.
    ref = _reference([0.0] * 6)
    assert ref.spread == 0.0
    mean = ref.mean
    assert check_parity(ref, _run(0.04 * mean), "close").passed
    assert not check_parity(ref, _run(0.06 * mean), "close").passed
    assert not check_parity(ref, _run(2 * EXACT_TOLERANCE * mean), "exact").passed


def test_reasons_say_what_the_harm_is() -> None:
    ref = _reference(SPREAD)
    first = CURVE[0]
    # Learning less: the late loss fell half as far as the baseline's.
    half_way = first - 0.5 * (first - ref.mean)
    slower = check_parity(ref, _run(half_way - ref.baseline), "close")
    assert not slower.passed
    assert slower.reason.startswith("it learns 50% as much as the baseline")
    # Not learning: the late loss stays at the start.
    stalled = check_parity(ref, _run(first - ref.baseline), "close")
    assert not stalled.passed and stalled.reason.startswith("it stopped learning")
    # Diverging: the late loss ends above the start.
    diverging = [v * (1 + 0.3 * i) for i, v in enumerate(CURVE)]
    result = check_parity(ref, diverging, "semantic")
    assert not result.passed and result.reason.startswith("training diverges")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), None])
def test_non_finite_rejects_at_once(bad: float | None) -> None:
    cand: list[float | None] = list(CURVE)
    cand[3] = bad
    result = check_parity(_reference(SPREAD), cand, "semantic")
    assert not result.passed and "NaN/inf at step 3" in result.reason
    assert first_non_finite(cand) == 3


def test_a_short_candidate_cannot_pass() -> None:
    result = check_parity(_reference(SPREAD), CURVE[:10], "close")
    assert not result.passed and "16 needed" in result.reason


def test_non_finite_reference_runs_are_dropped() -> None:
    broken: list[float | None] = [*_run(0.1)[:12], float("nan"), *_run(0.1)[13:]]
    ref = QualityReference.from_trajectories(_run(0.0), [broken, _run(0.1)], steps=STEPS)
    assert ref.runs == 2


def test_loosest_class() -> None:
    assert loosest(["exact", "semantic", "close"]) == "semantic"
    assert loosest([]) == "exact"
