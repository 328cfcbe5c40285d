"""Two variants interleaved, judged at p50 and p99."""

from __future__ import annotations

import numpy as np

from torchdoctor.serve import VariantComparison, compare_variants


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _variant(clock: Clock, draw, log: list[str], name: str):  # type: ignore[no-untyped-def]
    def call() -> None:
        log.append(name)
        clock.now += draw()

    return call


def _compare(draw_a, draw_b, seed: int = 0) -> tuple[VariantComparison, list[str]]:  # type: ignore[no-untyped-def]
    clock, log = Clock(), []
    result = compare_variants(
        _variant(clock, draw_a, log, "a"),
        _variant(clock, draw_b, log, "b"),
        names=("a", "b"),
        clock=clock,
        sync=lambda: None,
        seed=seed,
    )
    return result, log


def _verdicts(result: VariantComparison) -> dict[float, str]:
    return {c.percentile: c.verdict for c in result.by_percentile}


def test_same_model_twice_shows_no_difference() -> None:
    rng = np.random.default_rng(0)
    same = lambda: float(rng.lognormal(-7, 0.3))  # noqa: E731
    result, log = _compare(same, same)
    assert _verdicts(result) == {
        50.0: "no_significant_difference",
        99.0: "no_significant_difference",
    }
    assert result.requests_per_side >= 459
    # Interleaved: both sides run in every round, not one after the other.
    half = len(log) // 2
    assert "a" in log[:half] and "b" in log[:half] and "a" in log[half:] and "b" in log[half:]


def test_a_slower_tail_is_found_at_p99_and_not_at_p50() -> None:
    rng = np.random.default_rng(1)
    base = lambda: float(rng.lognormal(-7, 0.1))  # noqa: E731
    # Same body, but one request in 20 stalls 5x: the p50 is unchanged, the p99 much worse.
    tail = lambda: float(rng.lognormal(-7, 0.1)) * (5.0 if rng.random() < 0.05 else 1.0)  # noqa: E731
    result, _ = _compare(base, tail)
    assert _verdicts(result) == {50.0: "no_significant_difference", 99.0: "slower"}
    p99 = result.by_percentile[1]
    assert p99.speedup < 0.5 and p99.ci_high < 1.0


def test_a_twice_faster_variant_is_faster_at_both() -> None:
    rng = np.random.default_rng(2)
    result, _ = _compare(
        lambda: float(rng.lognormal(-7, 0.2)), lambda: float(rng.lognormal(-7, 0.2)) / 2
    )
    assert _verdicts(result) == {50.0: "faster", 99.0: "faster"}
