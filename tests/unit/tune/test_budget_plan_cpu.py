"""`demo --quick`'s ladder on a 2-core CPU's costs, on a fake clock: a fresh process takes
7.0 s to start, a step ~0.1 s, as a quiet 2-core EPYC recorded them (2026-11-28,
benchmarks/RESULTS.md); the simulated sessions' own warm-up steps come on top.

There the quick budget (140 s) tried one knob of three: bf16 kept 1.22x with its second pair,
fp16 futile against it, and then the next knob's trial did not fit beside the final A/B's
reserve, priced from the baseline's whole measurement (not from the parts a fresh pair runs)
and charging the best recipe's whole warm-up on top, though each process already warms up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from device_costs import DeviceCostArms
from fakes import FakeClock
from torchdoctor.measure import MIN_REPLICATES
from torchdoctor.procs import SessionSpec
from torchdoctor.tune import tune
from torchdoctor.tune.budget import BUDGET_GRACE_S
from torchdoctor.tune.cost import pair_cost_s
from torchdoctor.tune.demo import QUICK_PLAN, quick_budget_s
from torchdoctor.tune.ladder import ClimbOutcome, LadderPlan, climb
from torchdoctor.tune.outcome import Outcome
from torchdoctor.tune.records import Confirmation, TrialResult
from torchdoctor.tune.space import KnobSpec
from torchdoctor.tune.study import Study
from torchdoctor.tune.tuner import Tuner, TuneSettings
from tune_sim import sim_config, study_story

#: The recorded run's costs: the fake's inputs, not the budget's rule. A step of ~0.1 s is
#: the EPYC CI host's; the quiet run's own was ~0.05 s (its baseline spent ~10 s on the
#: yardstick's 6 x 32 steps beside 8.8 s measured), and its diagnosis sized the budget from it.
START_S, STEP_S = 7.0, 0.1
QUIET_STEP_S = 0.05
#: The demo's three quick knobs as the recorded run met them: bf16 1.22x faster, fp16 ~20x
#: slower (futile, 0.05x), loader workers and channels_last doing nothing for this cnn.
PRECISION = KnobSpec("precision", ("fp32", "bf16", "fp16"), "close", "fp32")
NUM_WORKERS = KnobSpec("num_workers", (0, 2), "exact", 0)
CHANNELS_LAST = KnobSpec("channels_last", (False, True), "exact", False)
KNOBS = [PRECISION, NUM_WORKERS, CHANNELS_LAST]
EFFECTS = {PRECISION.name: {"bf16": 1 / 1.22, "fp16": 20.0}}


def _climb(
    tmp_path: Path, budget_s: float, *, step_s: float = STEP_S, **plan: bool
) -> tuple[Tuner, ClimbOutcome]:
    clock = FakeClock()
    arms = DeviceCostArms(
        clock, QUICK_PLAN, start_s=START_S, step_s=step_s, effects=EFFECTS, timer="host"
    )
    settings = TuneSettings(plan=QUICK_PLAN, budget_s=budget_s, isolate=False)
    tuner = Tuner(
        SessionSpec("sim", {}),
        settings,
        Study(f"sqlite:///{tmp_path / 'study.db'}"),
        clock=clock,
        arms=arms,
    )
    ladder = LadderPlan(space=KNOBS, search_batch=False, prior=(), **plan)
    try:
        return tuner, climb(tuner, ladder)
    finally:
        tuner.close()


def _story(tuner: Tuner) -> str:
    return "\n".join(
        f"{t.kind} {getattr(t, 'change', '')} {t.status} {t.reason} ({t.wall_s:.1f} s)"
        for t in tuner.trials
    )


def _knobs_tried(tuner: Tuner) -> list[str]:
    tried: list[str] = []
    for t in tuner.trials:
        if isinstance(t, TrialResult) and t.kind == "ladder":
            tried.extend(k for k in t.change if k not in tried)
    return tried


@pytest.mark.parametrize("step_s", [STEP_S, QUIET_STEP_S])
def test_demo_quick_on_a_2_core_cpu_tries_three_knobs_and_its_final_ab(
    tmp_path: Path, step_s: float
) -> None:
    """At the recorded costs the quick budget holds the baseline, a trial of each of the
    three knobs, bf16's second pair and the final A/B's pairs: the ladder reaches
    channels_last and the study still ends with its fresh pairs, within the budget.

    Today's rule stopped after precision: the reserve priced each pair from the baseline's
    whole measurement, fp16 took a trial after the bf16 keep, and the budget counted a
    process start without its warm-up."""
    # Sized as the demo sizes it, from the step its diagnosis measured.
    budget_s = quick_budget_s("cpu", step_s=step_s)
    # As `demo --quick` configures its ladder (tests/unit/cli/test_demo_quick.py).
    tuner, outcome = _climb(tmp_path, budget_s, step_s=step_s, values_after_keep=False)
    story = _story(tuner)
    assert _knobs_tried(tuner) == [k.name for k in KNOBS], story
    assert tuner.best_recipe.get(PRECISION.name) == "bf16", story
    assert outcome.not_tried == [{PRECISION.name: "fp16"}], story
    confirm = outcome.confirmation
    assert confirm is not None and confirm.ok and tuner.confirm_dropped is None, story
    assert isinstance(tuner.trials[-1], Confirmation), story
    assert tuner.budget.elapsed_s() <= budget_s + BUDGET_GRACE_S, story


def test_the_reserve_prices_a_pair_as_the_final_ab_runs_it(tmp_path: Path) -> None:
    """The final A/B's reserve is its fewest pairs at the parts measured here (two opens, two
    steady windows): within 10% of what a pair then took. Priced from the baseline's whole
    measurement (its chunks, which a pair does not run) and the best's whole warm-up on top
    (each open already warms up), a pair was 30% dearer than it ran."""
    tuner, outcome = _climb(tmp_path, 400.0)
    confirm = outcome.confirmation
    assert confirm is not None and confirm.ok and confirm.rates, _story(tuner)
    took_s = confirm.wall_s / len(confirm.rates)
    priced_s = pair_cost_s(tuner.baseline, tuner.best_trial, tuner.trial_costs())
    assert priced_s == pytest.approx(took_s, rel=0.1)
    assert tuner.confirm_cost_s() == pytest.approx(MIN_REPLICATES * priced_s)


def test_other_values_of_a_kept_knob_are_tried_unless_the_study_says_not(
    tmp_path: Path,
) -> None:
    """A full study still tries fp16 against a kept bf16 (on a GPU either may win)."""
    tuner, outcome = _climb(tmp_path, 400.0)
    tried = [t.change for t in tuner.trials if isinstance(t, TrialResult) and t.kind == "ladder"]
    assert {PRECISION.name: "fp16"} in tried and outcome.not_tried == []
    fp16 = next(t for t in tuner.trials if getattr(t, "change", None) == {"precision": "fp16"})
    assert isinstance(fp16, TrialResult) and fp16.outcome is Outcome.FUTILE


def test_a_kept_knobs_untried_values_are_said_in_the_results_notes(tmp_path: Path) -> None:
    """Without `values_after_keep` the study says which values it left once their knob had a
    keep, so a reader knows fp16 was not measured rather than measured and lost."""
    config = sim_config(
        [PRECISION], noise=0.002, effects={PRECISION.name: {"bf16": 0.5, "fp16": 0.4}}
    ).model_copy(update={"values_after_keep": False})
    result = tune(config=config, out=tmp_path / "run")
    story = study_story(tmp_path / "run")
    assert result.best_recipe == {PRECISION.name: "bf16"}, story
    assert "fp16" not in story.split("\nconfirm")[0], story
    assert any(n.startswith("not tried: precision=fp16, once another value") for n in result.notes)
