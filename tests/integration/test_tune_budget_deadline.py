"""The budget is a hard stop that still leaves the final A/B, and hopeless candidates are cheap."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.measure import MIN_REPLICATES
from torchdoctor.tune import Confirmation, TrialResult, TuneConfig, tune
from torchdoctor.tune.arms import REPLICATE_THRESHOLD
from torchdoctor.tune.budget import BUDGET_GRACE_S
from torchdoctor.tune.confirm import CONFIRM_PAIRS
from torchdoctor.tune.early import FUTILE_SLOWDOWN
from torchdoctor.tune.outcome import NOT_REPRODUCED
from torchdoctor.tune.records import read_trial
from torchdoctor.tune.space import KnobSpec
from tune_sim import FAST_KNOB, sim_config, study_story, with_plan

HANG_KNOB = KnobSpec("hangs", (False, True), "exact", False)
GLACIAL_KNOB = KnobSpec("glacial", (False, True), "exact", False)
SLOWER_KNOB = KnobSpec("slower", (False, True), "exact", False)

#: Long enough for the baseline with its quality yardstick, one kept change with its second
#: pair of fresh processes, and the final confirmation's reserve of fresh process pairs
#: (`measure.MIN_REPLICATES` pairs, each two process starts plus a few simulated steps), with
#: room to spare on a slower host. On a quiet 2-core host: 13 s to the first ladder trial,
#: 4 s for the kept change, 7.5 s a pair, so the fast trial starts only while 13 + 4 + 3 x 7.5
#: + the grace of 5 s fit, 45 s: the old budget of 45 s left it no margin, and a fresh clone's
#: CI, slower at the end of its run, twice started no trial at all (nothing kept). 75 s leaves
#: the scenario room to run 1.6x slower; the hung trial fills the rest.
BUDGET_S = 75.0
#: Killing a hung worker and writing the result after the deadline's grace period.
SHUTDOWN_SLACK_S = 5.0


@pytest.mark.study  # it runs for its whole budget, by design
# Its simulated steps sleep and its hung trial waits (about 14 s of CPU in 80 s), and what it
# asserts is the deadline's: the fast change kept (its steps sleep half as long), the budget
# a hard stop with the final A/B in its reserve, sized from pairs measured on the same host.
# Beside a 2-rank FSDP tune study the fast change was kept 10 s into the 75 s budget (its
# trial and the reserve fit while some 30 s are left) and the study ended at 77.9 s of the
# 85 s allowed: it runs with the untimed studies.
@pytest.mark.untimed
def test_budget_is_a_hard_stop_and_the_final_ab_still_runs(tmp_path: Path) -> None:
    config = sim_config(
        [FAST_KNOB, HANG_KNOB],
        isolate=True,
        sleep=True,
        effects={"fast": {"True": 0.5}},
        hang={"hangs": "True"},
    ).model_copy(
        # Only the budget can stop the hung trial: its own timeout is far longer.
        update={"budget_s": BUDGET_S, "trial_timeout_s": 600.0}
    )
    config = with_plan(config, rounds=6)
    run = tmp_path / "run"
    result = tune(config=config, out=run)

    story = study_story(run)
    assert result.elapsed_s <= BUDGET_S + BUDGET_GRACE_S + SHUTDOWN_SLACK_S, story
    assert result.budget_exhausted, story
    assert result.best_recipe == {"fast": True}, story
    # The headline is the final A/B's, run in the reserve the hung trial could not eat.
    (note,) = [n for n in result.notes if n.startswith("speedup from")]
    pairs = int(note.split()[2])
    assert MIN_REPLICATES <= pairs <= CONFIRM_PAIRS
    assert note.startswith(f"speedup from {pairs} fresh process pairs")
    *trials, last = sorted((run / "trials").iterdir())
    kinds = [TrialResult.read(p).kind for p in trials] + [Confirmation.read(last).kind]
    assert kinds == ["baseline", "ladder", "confirm"]
    # The trial cut by the budget is not stored: a resumed study with more budget runs it.
    assert all(next(iter(r.change)) != "hangs" for r in result.ladder.rejected)
    # The result names the trial the deadline cut, undecided, rather than "not every
    # candidate was tried" (it was tried, and ran until the deadline).
    (cut,) = [n for n in result.notes if n.startswith("the budget ran out")]
    assert cut.startswith("the budget ran out during the trial of hangs=True: its A/B had not")


def test_hopelessly_slow_candidate_is_rejected_from_its_warm_up(tmp_path: Path) -> None:
    slowdown = 4 * FUTILE_SLOWDOWN
    config = sim_config(
        [GLACIAL_KNOB, SLOWER_KNOB],
        noise=0.01,
        effects={"glacial": {"True": slowdown}, "slower": {"True": 3.0}},
    )
    run = tmp_path / "run"
    result = tune(config=config, out=run)

    by_knob = {next(iter(r.change)): r for r in result.ladder.rejected}
    glacial = by_knob["glacial"]
    assert glacial.reason.startswith("futile:")
    assert glacial.speedup_vs_best == pytest.approx(1 / slowdown, rel=0.1)
    # A 3x slowdown is within what warm-up can explain: it gets the full interleaved A/B.
    assert by_knob["slower"].reason.startswith("not a proven win")
    records = {
        next(iter(r.change), None): r
        for r in (TrialResult.read(p) for p in sorted((run / "trials").iterdir()))
    }
    assert records["glacial"].chunk_times_s == []  # never scored
    # ... and its warm-up stopped after the first two steps past compilation (the faster of
    # the two is judged: a one-time recompile can land on the first), nothing more.
    glacial_step_s = config.factory_options["base_step_s"] * slowdown
    assert records["glacial"].warmup_s == pytest.approx(3 * glacial_step_s, rel=0.1)
    assert len(records["slower"].chunk_times_s) >= config.plan.min_rounds


def _lucky_lottery(tmp_path: Path) -> TuneConfig:
    """The baseline's first worker runs 1.3x slow (the process lottery); the "lucky" knob
    does nothing."""
    lucky = KnobSpec("lucky", (False, True), "exact", False)
    return sim_config(
        [lucky],
        noise=0.01,
        first_session_effects={"lucky": {"None": 1.3}},
        lottery_id=str(tmp_path),  # a fresh count of prepared sessions for this test
    )


def test_a_win_of_one_lucky_process_pair_is_not_kept(tmp_path: Path) -> None:
    # The lucky knob's first A/B, against the slow baseline worker, proves a gain; the second
    # pair of fresh processes finds none, so the ladder does not keep it and says why.
    run = tmp_path / "run"
    result = tune(config=_lucky_lottery(tmp_path), out=run)

    assert [r.change for r in result.ladder.rungs] == [{}]
    assert result.best_recipe == {} and result.speedup == 1.0
    (trial,) = [
        t for t in map(read_trial, sorted((run / "trials").iterdir())) if t.kind == "ladder"
    ]
    assert isinstance(trial, TrialResult) and trial.decision == "rejected"
    assert trial.reason.startswith(NOT_REPRODUCED)
    assert trial.speedup_vs_best_ci is not None and trial.speedup_vs_best_ci[0] > 1.2
    assert trial.replicate_speedup_vs_best_ci is not None
    assert trial.replicate_speedup_vs_best_ci[0] <= REPLICATE_THRESHOLD


def test_a_win_the_second_pair_points_the_same_way_is_kept(tmp_path: Path) -> None:
    # The first pair proves the size of a win, the second its direction: "modest" is 1.5%
    # faster in every process, and the baseline's first worker runs 1.1x slow, so its first
    # A/B reads ~1.12x and clears the 1.02x bar; the fresh pair reads the true 1.015x, below
    # that bar and above no change, and the win is kept.
    modest = KnobSpec("modest", (False, True), "exact", False)
    config = sim_config(
        [modest],
        noise=0.01,
        effects={"modest": {"True": 1 / 1.015}},
        first_session_effects={"modest": {"None": 1.1}},
        lottery_id=str(tmp_path),
    )
    run = tmp_path / "run"
    result = tune(config=config, out=run)

    story = study_story(run)
    assert [r.change for r in result.ladder.rungs] == [{}, {"modest": True}], story
    (trial,) = [
        t for t in map(read_trial, sorted((run / "trials").iterdir())) if t.kind == "ladder"
    ]
    assert isinstance(trial, TrialResult) and trial.decision == "kept"
    assert trial.speedup_vs_best_ci is not None and trial.speedup_vs_best_ci[0] > 1.02
    assert trial.replicate_speedup_vs_best is not None
    assert trial.replicate_speedup_vs_best == pytest.approx(1.015, abs=0.005)
    low, _ = trial.replicate_speedup_vs_best_ci or (0.0, 0.0)
    assert REPLICATE_THRESHOLD < low < 1.02, story


def test_a_gain_the_final_ab_does_not_confirm_is_not_recommended(tmp_path: Path) -> None:
    # As above, with the ladder's wins resting on their first pair (`replicate_wins` off):
    # the ladder keeps "lucky" against the slow worker; the final A/B, against a fresh
    # baseline worker, finds no gain, so the recommendation falls back to the baseline.
    config = _lucky_lottery(tmp_path).model_copy(update={"replicate_wins": False})
    run = tmp_path / "run"
    result = tune(config=config, out=run)

    assert [r.change for r in result.ladder.rungs] == [{}, {"lucky": True}]  # kept on the ladder
    assert result.best_recipe == {}
    assert result.speedup == 1.0
    (note,) = [n for n in result.notes if n.startswith("the final A/B did not confirm")]
    assert "lucky=True" in note and "baseline recipe is recommended" in note
    assert (run / "best_recipe.json").read_text().strip() == "{}"
    snippet = (run / "best_recipe.py").read_text()
    assert "(none: no change was proven faster than the baseline)" in snippet
