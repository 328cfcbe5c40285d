"""The budget lets the ladder climb at a GPU's costs: a process start of ~10 s, steps of a
few milliseconds (the H200 records in tests/data/h200/), on a fake clock.

There, `demo --quick`'s 90 s tried no knob: the ladder held back the final A/B's reserve (three
fresh process pairs, 98 s) from the first trial on, while the best was still the baseline and
there was nothing to confirm.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from device_costs import DeviceCostArms
from fakes import FakeClock
from torchdoctor.measure import TimerKind
from torchdoctor.procs import SessionSpec
from torchdoctor.tune.api import chained_note
from torchdoctor.tune.budget import BUDGET_GRACE_S
from torchdoctor.tune.cost import TrialCosts, confirm_cost_s, opened_s
from torchdoctor.tune.demo import QUICK_PLAN, quick_budget_s
from torchdoctor.tune.ladder import ClimbOutcome, LadderPlan, climb
from torchdoctor.tune.outcome import Outcome
from torchdoctor.tune.records import TrialResult, read_trial
from torchdoctor.tune.space import KnobSpec
from torchdoctor.tune.study import Study
from torchdoctor.tune.tuner import Tuner, TuneSettings
from tune_sim import FAST_KNOB, NOOP_KNOB

H200 = Path(__file__).parents[2] / "data" / "h200"
OTHER_NOOP = KnobSpec("other_noop", (False, True), "exact", False)
KNOBS = [FAST_KNOB, NOOP_KNOB, OTHER_NOOP]
#: The fast knob's true speedup in the simulated sessions.
FAST = 1.5


def _h200_costs() -> TrialCosts:
    """The cnn's process start and step on the H200, read from `demo --quick`'s baseline."""
    baseline = read_trial(H200 / "demo-quick-baseline.json")
    assert isinstance(baseline, TrialResult) and baseline.step_time_s is not None
    return TrialCosts.of(
        open_s=opened_s(baseline, QUICK_PLAN), step_s=baseline.step_time_s, plan=QUICK_PLAN
    )


def _climb(
    tmp_path: Path,
    budget_s: float,
    knobs: list[KnobSpec] = KNOBS,
    timer: TimerKind = "cuda_event",
    close_s: float = 0.0,
) -> tuple[Tuner, ClimbOutcome]:
    costs = _h200_costs()
    clock = FakeClock()
    arms = DeviceCostArms(
        clock,
        QUICK_PLAN,
        start_s=costs.open_s,
        step_s=costs.step_s,
        effects={FAST_KNOB.name: {"True": 1 / FAST}},
        timer=timer,
        close_s=close_s,
    )
    settings = TuneSettings(plan=QUICK_PLAN, budget_s=budget_s, isolate=False)
    spec = SessionSpec("sim", {})
    tuner = Tuner(
        spec, settings, Study(f"sqlite:///{tmp_path / 'study.db'}"), clock=clock, arms=arms
    )
    plan = LadderPlan(space=knobs, search_batch=False, prior=())
    try:
        return tuner, climb(tuner, plan)
    finally:
        tuner.close()


def _tried(tuner: Tuner) -> list[str]:
    return [
        name for t in tuner.trials if isinstance(t, TrialResult) and t.kind == "ladder"
        for name in t.change
    ]  # fmt: skip


def test_the_recorded_h200_costs_are_a_gpus() -> None:
    """The fake's inputs: a start of about 10 s, a step of a few milliseconds."""
    costs = _h200_costs()
    assert 8.0 < costs.open_s < 13.0
    assert 0.001 < costs.step_s < 0.05


def test_ninety_seconds_at_gpu_costs_try_every_knob(tmp_path: Path) -> None:
    """The old rule started a trial only while the time left covered its estimate and the
    final A/B's reserve, held from the baseline on. At these costs the baseline takes ~20 s
    and the reserve alone (3 pairs of 2 fresh processes and 3 s of steps each, plus the grace)
    ~98 s: more than the whole budget, so it tried nothing (1 trial, "the budget ran out").
    Now nothing is held while the best is the baseline, and once a change is kept a final A/B
    that no longer fits is dropped with a note rather than starving the ladder."""
    tuner, outcome = _climb(tmp_path, 90.0)
    baseline = tuner.baseline
    assert baseline is not None
    after_baseline = 90.0 - baseline.wall_s
    old_reserve = confirm_cost_s(baseline, None, _h200_costs()) + BUDGET_GRACE_S
    assert old_reserve > after_baseline, "the old rule would have tried a knob here"
    assert _tried(tuner) == [k.name for k in KNOBS]
    assert FAST_KNOB.name in tuner.best_recipe
    # The keep left no room for the final A/B's pairs: said, not silently skipped.
    assert outcome.confirmation is None
    assert tuner.confirm_dropped is not None and "no longer fit" in tuner.confirm_dropped
    assert tuner.budget.elapsed_s() <= 90.0 + BUDGET_GRACE_S
    # What tune.json's notes and the screen say of it.
    note = chained_note(outcome.confirmation, tuner.confirm_dropped)
    assert "no final A/B" in note and tuner.confirm_dropped in note


def test_demo_quick_on_a_gpu_tries_three_knobs_and_its_final_ab(tmp_path: Path) -> None:
    """`demo --quick`'s budget on a GPU is sized from the device's trial costs: three knobs,
    a win's second pair and the final A/B's pairs all fit."""
    budget_s = quick_budget_s("cuda")
    tuner, outcome = _climb(tmp_path, budget_s)
    assert len(_tried(tuner)) >= 3
    assert outcome.confirmation is not None and outcome.confirmation.ok
    assert outcome.confirmation.speedup is not None and outcome.confirmation.speedup > 1.2
    assert tuner.confirm_dropped is None
    assert tuner.budget.elapsed_s() <= budget_s + BUDGET_GRACE_S


def test_the_estimate_is_a_trials_parts_not_the_longest_trial(tmp_path: Path) -> None:
    """A win costs a second pair of fresh processes (two more starts) where the spread between
    processes is not yet known (host-timed arms measure no twin of the baseline): a trial
    after it is still estimated at one start and one A/B, not at the win's length."""
    tuner, _ = _climb(tmp_path, quick_budget_s("cuda"), timer="host")
    won = next(t for t in tuner.trials if isinstance(t, TrialResult) and t.outcome is Outcome.KEPT)
    costs = tuner.trial_costs()
    assert costs is not None
    assert tuner.estimated_trial_s() == pytest.approx(costs.ladder_trial_s(QUICK_PLAN))
    assert tuner.estimated_trial_s() < won.wall_s / 2
    assert costs.open_s == pytest.approx(_h200_costs().open_s, rel=0.2)


def test_a_reserve_that_fits_is_held_after_a_keep(tmp_path: Path) -> None:
    """With room for the final A/B, the ladder stops in time for it."""
    tuner, outcome = _climb(tmp_path, 400.0, [FAST_KNOB])
    assert outcome.confirmation is not None and outcome.confirmation.ok
    assert tuner.budget.confirm_planned is False  # spent by the confirmation itself
    kept_and_confirmed: list[Any] = [t.kind for t in tuner.trials]
    assert kept_and_confirmed == ["baseline", "ladder", "confirm"]


def test_an_arms_end_is_a_part_of_every_estimate(tmp_path: Path) -> None:
    """Ending a process is no instant (a cnn worker's close took 0.77-1.09 s on a 2-core EPYC,
    the kernel tearing down its memory): its measured median is in a trial's estimate and in
    a final A/B pair's, so the reserve held for that A/B is what its pairs take."""
    close_s = 2.0
    tuner, outcome = _climb(tmp_path, 400.0, [FAST_KNOB], close_s=close_s)
    costs = tuner.trial_costs()
    assert costs is not None and costs.close_s == pytest.approx(close_s)
    without = replace(costs, close_s=0.0)
    assert costs.ladder_trial_s(QUICK_PLAN) == pytest.approx(
        without.ladder_trial_s(QUICK_PLAN) + close_s
    )
    assert costs.pair_s() == pytest.approx(without.pair_s() + 2 * close_s)
    # The final A/B's pairs, as run, cost what the estimate now says of each.
    assert outcome.confirmation is not None and outcome.confirmation.ok
    confirm = outcome.confirmation
    per_pair = confirm.wall_s / len(confirm.rates)
    assert per_pair == pytest.approx(costs.pair_s(), rel=0.1)
