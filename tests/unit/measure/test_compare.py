from __future__ import annotations

import itertools
import random

import pytest
from measure_fakes import noisy
from rich.console import Console

from fakes import FakeClock
from torchdoctor.core.errors import MeasureError
from torchdoctor.measure import Comparison, compare
from torchdoctor.report.terminal.bench import render_comparison

# Fake seconds per comparison: ~150 interleaved rounds of two 1 ms statements.
BUDGET_S = 0.3
REPEATS = 40


def _compare_pair(i: int, slowdown: float) -> Comparison:
    clock = FakeClock()
    return compare(
        {
            "a": noisy(clock, 1e-3, seed=1000 + 2 * i),
            "b": noisy(clock, 1e-3 * slowdown, seed=1001 + 2 * i),
        },
        baseline="a",
        clock=clock,
        budget_s=BUDGET_S,
        seed=i,
    )


def test_self_comparison_false_positive_rate() -> None:
    verdicts = [_compare_pair(i, 1.0).estimates["b"].verdict for i in range(REPEATS)]
    assert verdicts.count("no_significant_difference") >= 0.95 * REPEATS, verdicts


def test_ten_percent_slower_is_flagged_slower() -> None:
    results = [_compare_pair(i, 1.10).estimates["b"] for i in range(REPEATS)]
    assert sum(r.verdict == "slower" for r in results) >= 0.95 * REPEATS
    assert all(r.ci_low <= 1 / 1.10 * 1.03 and r.ci_high >= 1 / 1.10 * 0.97 for r in results)


def test_rounds_are_interleaved_in_shuffled_order() -> None:
    clock = FakeClock()
    order: list[str] = []

    jitter = random.Random(0)

    def stmt(name: str) -> object:
        # Noisy enough that the intervals stay wider than the target for the whole budget.
        return lambda: (order.append(name), clock.advance(1e-3 * jitter.uniform(0.5, 1.5)))

    c = compare({"a": stmt("a"), "b": stmt("b")}, baseline="a", clock=clock, budget_s=0.3)
    # After sizing and warm-up, calls alternate within rounds: no long runs of one side.
    assert c.rounds >= 30
    tail = order[-60:]
    longest = max(len(list(run)) for _, run in itertools.groupby(tail))
    assert longest <= 2
    assert "".join(tail) != "ab" * 30  # the order within a round is shuffled, not fixed


def test_stops_on_precision_before_budget() -> None:
    clock = FakeClock()
    c = compare(
        {
            "a": noisy(clock, 1e-3, seed=1, jitter=0.01, drift=0.0, spike_prob=0.0),
            "b": noisy(clock, 2e-3, seed=2, jitter=0.01, drift=0.0, spike_prob=0.0),
        },
        baseline="a",
        clock=clock,
        budget_s=100.0,
        target_rel_ci=0.01,
    )
    assert clock.now < 10.0
    est = c.estimates["b"]
    assert est.verdict == "slower" and est.speedup == pytest.approx(0.5, rel=0.02)
    assert (est.ci_high - est.ci_low) / (2 * est.speedup) <= 0.011


def test_three_candidates_render_and_roundtrip() -> None:
    clock = FakeClock()
    c = compare(
        {
            "base": noisy(clock, 1e-3, seed=1),
            "fast": noisy(clock, 0.5e-3, seed=2),
            "same": noisy(clock, 1e-3, seed=3),
        },
        baseline="base",
        clock=clock,
        budget_s=0.3,
    )
    assert set(c.estimates) == {"fast", "same"}
    assert c.estimates["fast"].verdict == "faster"
    assert Comparison.from_json_dict(c.to_json_dict()) == c
    console = Console(record=True, width=120)
    render_comparison(console, c)
    text = console.export_text()
    assert "fast" in text and "faster" in text and "(baseline)" in text


@pytest.mark.parametrize(
    ("candidates", "baseline", "budget", "fragment"),
    [
        ({"a": "pass"}, "a", 1.0, "at least two"),
        ({"a": "pass", "b": "pass"}, "c", 1.0, "baseline 'c'"),
        ({"a": "pass", "b": "pass"}, "a", -1.0, "budget"),
        ({"a": "pass", "b": "1/0"}, "a", 1.0, "raised ZeroDivisionError"),
    ],
)
def test_bad_input(candidates: dict[str, str], baseline: str, budget: float, fragment: str) -> None:
    with pytest.raises(MeasureError) as info:
        compare(candidates, baseline=baseline, budget_s=budget)
    assert fragment in str(info.value)
