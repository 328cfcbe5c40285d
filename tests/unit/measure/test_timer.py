from __future__ import annotations

import pytest
from measure_fakes import noisy

from fakes import FakeClock
from torchdoctor.core.errors import MeasureError
from torchdoctor.measure import Timer
from torchdoctor.measure._timer import MAX_OVERHEAD_FRACTION


def test_block_sizing_times_statements_shorter_than_the_clock_tick() -> None:
    # A clock that ticks every 1 us, and a statement taking 10 ns: one call reads as 0 or 1
    # tick, but a block of many calls reads the true time to within a tick.
    state = {"t": 0.0}

    def clock() -> float:
        return (state["t"] // 1e-6) * 1e-6

    def stmt() -> None:
        state["t"] += 10e-9

    m = Timer(stmt, clock=clock).blocked_autorange(min_run_time=0.05)
    assert m.number_per_block >= 1000
    assert m.median == pytest.approx(10e-9, rel=0.01)


def test_clock_read_overhead_is_amortized() -> None:
    fake_clock = FakeClock()

    # Reading the clock costs 1 us; statement 100 ns: the block must make that negligible.
    def clock() -> float:
        fake_clock.advance(1e-6)
        return fake_clock.now

    m = Timer(lambda: fake_clock.advance(100e-9), clock=clock).blocked_autorange(0.1)
    assert MAX_OVERHEAD_FRACTION * m.median * m.number_per_block >= 1e-6
    assert m.median == pytest.approx(100e-9, rel=0.01)


def test_sync_runs_before_every_clock_read() -> None:
    fake_clock = FakeClock()
    events: list[str] = []

    def clock() -> float:
        events.append("clock")
        return fake_clock()

    def stmt() -> None:
        events.append("stmt")
        fake_clock.advance(1e-3)

    Timer(stmt, clock=clock, sync=lambda: events.append("sync")).timeit(3)
    reads = [i for i, e in enumerate(events) if e == "clock"]
    assert reads and all(events[i - 1] == "sync" for i in reads)


def test_warm_up_waits_for_compiled_code_to_settle() -> None:
    fake_clock = FakeClock()
    # First 5 calls are "compiling" (100x slower); the measurement must exclude them.
    calls = {"n": 0}

    def stmt() -> None:
        calls["n"] += 1
        fake_clock.advance(0.1 if calls["n"] <= 5 else 1e-3)

    m = Timer(stmt, clock=fake_clock).blocked_autorange(min_run_time=0.2)
    assert m.max == pytest.approx(1e-3)
    assert not any("warm-up" in w for w in m.warnings)


def test_adaptive_stops_when_ci_is_narrow() -> None:
    fake_clock = FakeClock()
    stmt = noisy(fake_clock, 1e-3, seed=0, drift=0.0)
    m = Timer(stmt, clock=fake_clock).adaptive_autorange(target_rel_ci=0.01, budget_s=100)
    assert m.rel_ci_halfwidth <= 0.01
    assert fake_clock.now < 100  # stopped on precision, not on budget
    assert m.median == pytest.approx(1e-3, rel=0.02)
    assert not any("budget" in w for w in m.warnings)


def test_adaptive_respects_budget_and_says_so() -> None:
    fake_clock = FakeClock()
    stmt = noisy(fake_clock, 1e-3, seed=1, jitter=0.5)
    m = Timer(stmt, clock=fake_clock).adaptive_autorange(target_rel_ci=0.001, budget_s=0.5)
    assert 0.5 <= fake_clock.now < 0.6
    assert any("budget" in w for w in m.warnings)


def test_string_statements_use_setup_and_globals() -> None:
    m = Timer("y = x * k", setup="x = 3", globals={"k": 2}).timeit(100)
    assert m.number_per_block == 100 and m.median > 0


@pytest.mark.parametrize(
    ("stmt", "setup", "fragment"),
    [
        ("1/0", "pass", "statement '1/0' raised ZeroDivisionError"),
        ("x", "import no_such_module_td", "setup 'import no_such_module_td' raised"),
        ("x +", "pass", "not valid Python"),
        ("pass", "def", "setup 'def' is not valid Python"),
    ],
)
def test_bad_statements_raise_measure_error(stmt: str, setup: str, fragment: str) -> None:
    with pytest.raises(MeasureError, match=None) as info:
        Timer(stmt, setup).blocked_autorange(0.01)
    assert fragment in str(info.value)


def test_frozen_clock_is_an_error() -> None:
    with pytest.raises(MeasureError, match="did not advance"):
        Timer(lambda: None, clock=lambda: 0.0).blocked_autorange(0.01)


@pytest.mark.parametrize("budget", [-1.0, 0.0, float("inf")])
def test_bad_budget(budget: float) -> None:
    with pytest.raises(MeasureError, match="budget"):
        Timer("pass").adaptive_autorange(budget_s=budget)
