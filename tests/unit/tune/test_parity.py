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
