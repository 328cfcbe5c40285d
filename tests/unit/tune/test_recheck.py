"""`run --recipe R --vs-baseline`: the tuner's final A/B (fresh process pairs), reused for a
recipe against the script as it is; simulated sessions, no processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import torchdoctor.tune.recheck as recheck_mod
from torchdoctor.measure import MIN_REPLICATES, steady_steps
from torchdoctor.procs import SessionSpec
from torchdoctor.report.terminal.recheck import recheck_verdict, render_recheck
from torchdoctor.tune import Confirmation
from torchdoctor.tune.arms import Arm, MeasurePlan
from torchdoctor.tune.confirm import measure_fresh_pairs
from torchdoctor.tune.outcome import Outcome
from torchdoctor.tune.sources import ScriptCommand, WorkloadArms
from tune_sim import SIMULATED_FACTORY

BASE_STEP_S = 0.01
TRUE_SPEEDUP = 1.5


def _source(log: Path, **model: Any) -> WorkloadArms:
    options = {
        "base_step_s": BASE_STEP_S,
        "noise": 0.002,
        "base_batch": 32,
        "process_spread": 0.03,
        "effects": {"fast": {"True": 1 / TRUE_SPEEDUP}},
        "log_path": str(log),
        **model,
    }
    spec = SessionSpec("sim", {}, factory=SIMULATED_FACTORY, options=options)
    return WorkloadArms(spec, MeasurePlan(min_chunk_s=0.0), "throughput", isolate=False)


def _opener(source: WorkloadArms) -> Any:
    def open_arm(recipe: dict[str, Any], tag: str) -> Arm:
        return source.open(recipe, timeout=lambda: 20.0, log_path=None)

    return open_arm


def _clock() -> Any:
    ticks = iter(range(10_000))
    return lambda: float(next(ticks))


def test_fresh_pairs_alternate_who_starts_and_cover_the_true_ratio(tmp_path: Path) -> None:
    log = tmp_path / "sessions.log"
    check = measure_fresh_pairs(
        _opener(_source(log)),
        {},
        {"fast": True},
        key="k",
        step=0,
        steps=None,
        pairs=4,
        timeout=lambda: 20.0,
        confidence=0.95,
        clock=_clock(),
    )
    assert check.ok and check.outcome is Outcome.MEASURED
    assert len(check.rates) == len(check.baseline_rates) == 4
    assert check.speedup_ci is not None
    assert check.speedup_ci[0] < TRUE_SPEEDUP < check.speedup_ci[1]
    assert check.speedup_ci[0] > 1.0
    # No steps given: run's window at the baseline's warmed-up step time.
    assert check.steps is not None
    assert steady_steps(BASE_STEP_S * 1.2) <= check.steps <= steady_steps(BASE_STEP_S / 1.2)
    assert check.steps > steady_steps(0.0)  # more than the least: 3 s of 10 ms steps
    recipes = [json.loads(line) for line in log.read_text().splitlines()]
    # Who starts first alternates: baseline first in even pairs, the recipe in odd ones.
    assert recipes == [{}, {"fast": True}, {"fast": True}, {}] * 2


def test_a_pair_that_fails_is_recorded_with_its_reason_not_a_ratio(tmp_path: Path) -> None:
    check = measure_fresh_pairs(
        _opener(_source(tmp_path / "s.log", error={"fast": "True"})),
        {},
        {"fast": True},
        key="k",
        step=0,
        steps=20,
        pairs=4,
        timeout=lambda: 20.0,
        confidence=0.95,
        clock=_clock(),
    )
    assert not check.ok and check.speedup is None and check.reason


def test_fewer_pairs_than_an_interval_needs_are_a_budget_cut(tmp_path: Path) -> None:
    check = measure_fresh_pairs(
        _opener(_source(tmp_path / "s.log")),
        {},
        {"fast": True},
        key="k",
        step=0,
        steps=20,
        pairs=4,
        timeout=lambda: 20.0,
        confidence=0.95,
        clock=_clock(),
        next_pair_fits=lambda took_s, done: done < MIN_REPLICATES - 1,
    )
    assert check.outcome is Outcome.BUDGET_CUT and check.speedup is None
    assert len(check.rates) == 0


def test_recheck_measures_the_recipe_against_the_script_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "sessions.log"
    commands: list[ScriptCommand] = []

    def script_arms(command: ScriptCommand, *args: Any, **kwargs: Any) -> WorkloadArms:
        commands.append(command)
        return _source(log)

    monkeypatch.setattr(recheck_mod, "ScriptArms", script_arms)
    script = ScriptCommand(("train.py", "--epochs", "1"))
    check = recheck_mod.recheck_script(script, {"fast": True}, pairs=3, steps=20)
    assert commands == [script]
    assert check.baseline_recipe == {} and check.recipe == {"fast": True}
    assert check.ok and len(check.rates) == 3 and check.steps == 20
    assert check.key.startswith(recheck_mod.RECHECK_KEY)


def _check(ci: tuple[float, float] | None) -> Confirmation:
    return Confirmation(
        key="run-vs-baseline:x",
        step=0,
        baseline_recipe={},
        recipe={"num_workers": 2},
        status="ok" if ci else "timeout",
        outcome=Outcome.MEASURED if ci else Outcome.BUDGET_CUT,
        reason="" if ci else "budget ran out after 2 fresh process pairs",
        samples_per_s=150.0 if ci else None,
        baseline_samples_per_s=100.0 if ci else None,
        speedup=1.5 if ci else None,
        speedup_ci=ci,
        rates=[149.0, 151.0, 150.0] if ci else [],
        baseline_rates=[99.0, 101.0, 100.0] if ci else [],
        steps=60,
    )


@pytest.mark.parametrize(
    ("ci", "verdict"),
    [((1.4, 1.6), "faster"), ((0.8, 0.9), "slower"), ((0.95, 1.2), "no difference shown")],
)
def test_the_verdict_reads_the_interval(ci: tuple[float, float], verdict: str) -> None:
    assert recheck_verdict(_check(ci)).startswith(verdict)


def test_the_terminal_shows_both_arms_each_process_and_the_ratio() -> None:
    console = Console(record=True, width=100)
    render_recheck(console, _check((1.4, 1.6)), "python train.py")
    text = console.export_text()
    assert "num_workers=2 vs as it is" in text
    assert "100.0 samples/s" in text and "150.0 samples/s" in text
    assert "99.0 101.0 100.0" in text
    assert "1.50x [1.40, 1.60]: faster" in text
    console = Console(record=True, width=100)
    render_recheck(console, _check(None), "python train.py")
    assert "no ratio: budget ran out" in console.export_text()
