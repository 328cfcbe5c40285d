from __future__ import annotations

import math

import pytest

from torchdoctor.tune.parity import (
    CLOSE_TOLERANCE,
    EXACT_TOLERANCE,
    SEMANTIC_TOLERANCE,
    check_parity,
    first_non_finite,
    loosest,
)

BASE = [2.0 * math.exp(-0.1 * i) + 0.5 for i in range(16)]


def test_identical_trajectory_passes_every_class() -> None:
    for safety in ("exact", "close", "semantic"):
        result = check_parity(BASE, list(BASE), safety, steps=16)
        assert result.passed and result.deviation == 0.0


def test_tolerances_are_ordered_strict_to_loose() -> None:
    assert EXACT_TOLERANCE < CLOSE_TOLERANCE < SEMANTIC_TOLERANCE


def test_three_percent_shift_fails_exact_passes_close() -> None:
    shifted = [v * 1.03 for v in BASE]
    assert not check_parity(BASE, shifted, "exact", steps=16).passed
    assert check_parity(BASE, shifted, "close", steps=16).passed


def test_deviation_is_signed() -> None:
    lower = check_parity(BASE, [v * 0.9 for v in BASE], "semantic", steps=16)
    higher = check_parity(BASE, [v * 1.1 for v in BASE], "semantic", steps=16)
    assert lower.deviation == pytest.approx(-0.1)
    assert higher.deviation == pytest.approx(0.1)


def test_lower_loss_fails_exact_and_close_but_not_semantic() -> None:
    # A larger batch learns more per step: its loss is far lower, which is no regression. The
    # same drop from an exact or close change means the math is not the same.
    lower = [v * 0.4 for v in BASE]
    for safety in ("exact", "close"):
        result = check_parity(BASE, lower, safety, steps=16)
        assert not result.passed and "either way" in result.reason
    result = check_parity(BASE, lower, "semantic", steps=16)
    assert result.passed and result.deviation == pytest.approx(-0.6)


def test_higher_loss_fails_semantic() -> None:
    result = check_parity(BASE, [v * 1.4 for v in BASE], "semantic", steps=16)
    assert not result.passed
    assert "+40.0%" in result.reason and "limit +" in result.reason


def test_divergence_fails_semantic_with_reason() -> None:
    diverging = [v * (1 + 0.2 * i) for i, v in enumerate(BASE)]
    result = check_parity(BASE, diverging, "semantic", steps=16)
    assert not result.passed
    assert "deviates" in result.reason and "semantic" in result.reason


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), None])
def test_non_finite_rejects_at_once(bad: float | None) -> None:
    cand: list[float | None] = list(BASE)
    cand[3] = bad
    result = check_parity(BASE, cand, "semantic", steps=16)
    assert not result.passed and result.reason == "non-finite loss at step 3"
    assert first_non_finite(cand) == 3


def test_loosest_class() -> None:
    assert loosest(["exact", "semantic", "close"]) == "semantic"
    assert loosest([]) == "exact"


# Loss trajectories recorded on the `cnn` workload (seed 0): fp32 eager vs torch.compile. They
# agree for 3 steps, then diverge chaotically (SGD lr 0.05 with momentum on batches of 32).
CNN_EAGER = [2.484, 2.404, 2.271, 2.503, 2.567, 2.019, 1.944, 2.385,
             2.309, 1.898, 1.68, 1.312, 1.338, 1.417, 1.222, 1.596]  # fmt: skip
CNN_COMPILED = [2.484, 2.404, 2.271, 2.507, 2.556, 1.932, 1.937, 2.217,
                2.054, 1.58, 2.133, 1.833, 1.555, 1.481, 1.794, 1.471]  # fmt: skip


def test_chaotic_but_equivalent_trajectory_passes_close() -> None:
    result = check_parity(CNN_EAGER, CNN_COMPILED, "close", steps=16)
    assert result.passed
    assert result.deviation is not None and abs(result.deviation) > CLOSE_TOLERANCE
    assert result.limit is not None and result.limit > CLOSE_TOLERANCE


def test_stalled_training_fails_despite_noise() -> None:
    stalled = [*CNN_EAGER[:4], *([2.45, 2.38, 2.5, 2.41] * 3)]
    result = check_parity(CNN_EAGER, stalled, "semantic", steps=16)
    assert not result.passed
    assert "batch noise" in result.reason
