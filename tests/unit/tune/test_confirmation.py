"""The final A/B: fresh process pairs and its own record; old run folders still read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import torchdoctor.tune.confirm as confirm_mod
import torchdoctor.tune.tuner as tuner_mod
from torchdoctor.measure import MIN_REPLICATES, replicated_speedup
from torchdoctor.report.adapters.tune import trial_view
from torchdoctor.tune import Confirmation, TrialResult, TuneConfig, tune
from torchdoctor.tune.arms import MeasurePlan
from torchdoctor.tune.budget import BUDGET_GRACE_S, Budget
from torchdoctor.tune.config import CONFIG_FILE
from torchdoctor.tune.confirm import CONFIRM_PAIRS, confirmation_verdict
from torchdoctor.tune.outcome import Outcome
from torchdoctor.tune.records import read_trial
from tune_sim import FAST_KNOB, sim_config

BASELINE = {"fast": False}
BEST = {"fast": True}
#: The recipes as the simulated sessions log them (the baseline leaves the knob unset).
BASELINE_SIM: dict[str, object] = {}
BEST_SIM = {"fast": True}


def _old_style_confirm() -> TrialResult:
    # Before `Confirmation`: the baseline's figures sat in the "best" fields.
    return TrialResult(
        key="confirm:x->y",
        kind="confirm",
        step=3,
        recipe=BEST,
        status="ok",
        decision="measured",
        outcome=Outcome.MEASURED,
        samples_per_s=200.0,
        best_samples_per_s=100.0,
        speedup_vs_best=2.0,
        speedup_vs_best_ci=(1.8, 2.2),
        chunk_times_s=[0.005],
        best_chunk_times_s=[0.01],
        wall_s=4.0,
    )


def test_an_old_confirm_trial_reads_as_a_confirmation() -> None:
    confirmation = Confirmation.from_trial(_old_style_confirm(), BASELINE)
    assert confirmation.baseline_recipe == BASELINE and confirmation.recipe == BEST
    assert confirmation.baseline_samples_per_s == 100.0 and confirmation.samples_per_s == 200.0
    assert confirmation.speedup == 2.0 and confirmation.speedup_ci == (1.8, 2.2)
    assert confirmation.baseline_chunk_times_s == [0.01] and confirmation.wall_s == 4.0


def test_trials_folder_holds_both_records_and_the_report_shows_the_confirmation(
    tmp_path: Path,
) -> None:
    old = _old_style_confirm()
    new = Confirmation.from_trial(old, BASELINE)
    old.write(tmp_path / "003-confirm.json")
    new.write(tmp_path / "004-confirm.json")
    assert isinstance(read_trial(tmp_path / "003-confirm.json"), TrialResult)
    assert read_trial(tmp_path / "004-confirm.json") == new
    view = trial_view(new.to_json_dict())
    assert view.kind == "final A/B" and view.speedup == 2.0
    assert (view.ci_low, view.ci_high) == (1.8, 2.2) and view.samples_per_s == 200.0


def test_the_final_ab_times_fresh_process_pairs_in_alternating_order(tmp_path: Path) -> None:
    # Each simulated session is a new process whose speed differs from another's by 8%, far
    # more than its chunks vary (0.2%): an interval from one pair of processes would be a few
    # tenths of a percent wide around whatever that pair drew.
    true_speedup = 1.3
    log = tmp_path / "sessions.log"
    config = sim_config(
        [FAST_KNOB],
        noise=0.002,
        process_spread=0.08,
        effects={"fast": {"True": 1 / true_speedup}},
        log_path=str(log),
        lottery_id=str(tmp_path),
    )
    run = tmp_path / "run"
    result = tune(config=config, out=run)

    (confirm,) = [
        t
        for t in (read_trial(p) for p in sorted((run / "trials").iterdir()))
        if isinstance(t, Confirmation)
    ]
    assert len(confirm.rates) == len(confirm.baseline_rates) == CONFIRM_PAIRS
    # The last 2 * CONFIRM_PAIRS sessions prepared are the confirmation's own, one process
    # per recipe per pair, who goes first alternating.
    sessions = [json.loads(line) for line in log.read_text().splitlines()]
    expected = [BASELINE_SIM, BEST_SIM, BEST_SIM, BASELINE_SIM] * (CONFIRM_PAIRS // 2)
    assert sessions[-2 * CONFIRM_PAIRS :] == expected
    # The headline is the replicated statistic of those processes' own rates ...
    est = replicated_speedup(
        [1 / r for r in confirm.baseline_rates],
        [1 / r for r in confirm.rates],
        confidence=MeasurePlan().confidence,
    )
    assert confirm.speedup == pytest.approx(est.speedup)
    assert confirm.speedup_ci == pytest.approx((est.ci_low, est.ci_high))
    assert result.speedup == pytest.approx(est.speedup)
    # ... whose interval is as wide as processes differ, so it holds the true speedup.
    ratios = [b / a for a, b in zip(confirm.baseline_rates, confirm.rates, strict=True)]
    assert max(ratios) / min(ratios) > 1.05
    assert confirm.speedup_ci[0] < true_speedup < confirm.speedup_ci[1]


def test_fresh_pairs_time_their_processes_in_turns_so_the_hosts_drift_hits_both(
    tmp_path: Path,
) -> None:
    # The machine slows by 1.6x for stretches of a few requests and recovers, whichever process
    # runs then (a 2-core cloud host drifts by tens of percent over seconds). Timed one after
    # the other, a pair's two processes land in different stretches and the 1.3x gain reads
    # anywhere from 0.8x to 2.1x; timed in alternating chunks, both see the same stretches.
    true_speedup = 1.3
    config = sim_config(
        [FAST_KNOB],
        noise=0.002,
        effects={"fast": {"True": 1 / true_speedup}},
        drift_path=str(tmp_path / "drift"),
        drift_period=5,
        drift_factor=1.6,
        lottery_id=str(tmp_path),
    )
    tune(config=config, out=tmp_path / "run")

    (confirm,) = _confirmations(tmp_path / "run")
    assert confirm.ok and len(confirm.rates) == CONFIRM_PAIRS
    ratios = [b / a for a, b in zip(confirm.baseline_rates, confirm.rates, strict=True)]
    # Each pair's ratio is within a few percent of the truth (half its chunks drawn in slow
    # stretches on each side: the rounding of a median over ~75 chunks), so the interval
    # holds the truth and proves the gain.
    assert all(abs(r / true_speedup - 1) < 0.05 for r in ratios)
    assert 1.0 < confirm.speedup_ci[0] <= true_speedup <= confirm.speedup_ci[1]


@pytest.mark.parametrize(
    ("confirmed", "ladder", "verdict"),
    [
        ((1.05, 1.40), (1.10, 1.30), "confirmed"),
        # the lottery: the ladder kept a change against a slow baseline worker
        ((0.98, 1.02), (1.25, 1.35), "refuted"),
        # processes differ more than the gain: both no gain and the ladder's claim fit
        ((0.92, 1.25), (1.04, 1.12), "inconclusive"),
    ],
)
def test_what_fresh_pairs_say_of_the_ladders_claim(
    confirmed: tuple[float, float], ladder: tuple[float, float], verdict: str
) -> None:
    assert confirmation_verdict(confirmed, ladder) == verdict


def test_a_proven_rung_stands_when_processes_differ_more_than_its_gain(tmp_path: Path) -> None:
    # The ladder's pair of processes runs at the recipes' nominal speeds and proves the 10%
    # gain in its paired A/B; every later process runs up to ~40% faster or slower than
    # another (lognormal sd 0.3), so the fresh pairs can neither tell the gain from no gain
    # nor rule it out.
    config = sim_config(
        [FAST_KNOB],
        noise=0.002,
        process_spread=0.3,
        process_spread_after=1,
        effects={"fast": {"True": 1 / 1.1}},
        lottery_id=str(tmp_path),
    )
    result = tune(config=config, out=tmp_path / "run")

    assert result.best_recipe == BEST_SIM
    assert result.speedup_ci[0] <= 1.0 <= result.speedup_ci[1]
    (note,) = [n for n in result.notes if n.startswith("not confirmed end to end")]
    assert "fast=True" in note and "the recipe stands" in note


def _confirmations(run: Path) -> list[Confirmation]:
    return [
        t for t in (read_trial(p) for p in sorted((run / "trials").iterdir()))
        if isinstance(t, Confirmation)
    ]  # fmt: skip


def test_pairs_run_at_their_own_pace_when_the_estimate_overstates_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The estimate charges each pair the best recipe's warm-up as the ladder saw it (a
    # compilation); a fresh process that finds its code cached is far quicker. Estimated at
    # 40% of the budget a pair, only 2 would fit: the confirmation still starts, and runs the
    # pairs the budget holds at their own pace.
    config = sim_config([FAST_KNOB], noise=0.002, effects={"fast": {"True": 0.5}})
    monkeypatch.setattr(tuner_mod, "confirm_cost_s", lambda *_: 0.0)  # no ladder reserve
    monkeypatch.setattr(confirm_mod, "pair_cost_s", lambda *_: 0.4 * config.budget_s)
    result = tune(config=config, out=tmp_path / "run")

    (confirm,) = _confirmations(tmp_path / "run")
    assert confirm.ok and len(confirm.rates) == CONFIRM_PAIRS
    assert any(n.startswith("speedup from") for n in result.notes)


def _budget_with_left(left_s: float) -> Budget:
    """A 100 s budget with `left_s` of it left."""
    now = [0.0]
    budget = Budget(100.0, trial_timeout_s=60.0, clock=lambda: now[0], confirm_cost_s=lambda: 0.0)
    now[0] = 100.0 - left_s
    return budget


def test_no_pair_is_started_that_cannot_lead_to_an_interval() -> None:
    # Pairs of 20 s each. After one, an interval needs two more (40 s): with 30 s left the
    # next pair would be measured and then thrown away with the record's "no interval".
    needed = MIN_REPLICATES - 1
    assert not confirm_mod._next_pair_fits(_budget_with_left(30.0), took_s=20.0, pairs=1)
    assert confirm_mod._next_pair_fits(
        _budget_with_left(needed * 20.0 - BUDGET_GRACE_S), took_s=20.0, pairs=1
    )
    # Once an interval stands, one more pair only has to fit itself.
    assert confirm_mod._next_pair_fits(
        _budget_with_left(20.0 - BUDGET_GRACE_S), took_s=3 * 20.0, pairs=MIN_REPLICATES
    )
    assert not confirm_mod._next_pair_fits(_budget_with_left(10.0), took_s=60.0, pairs=3)


def test_the_final_ab_runs_the_pairs_the_study_asks_for_and_its_interval_is_theirs(
    tmp_path: Path,
) -> None:
    # `tune --final-pairs 3`: the budget holds four pairs, the study asks for three; the
    # interval is the replicated statistic of those three, and the headline says three.
    config = sim_config(
        [FAST_KNOB], noise=0.002, process_spread=0.05, effects={"fast": {"True": 0.5}}
    ).model_copy(update={"final_pairs": 3})
    result = tune(config=config, out=tmp_path / "run")

    (confirm,) = _confirmations(tmp_path / "run")
    assert confirm.ok and len(confirm.rates) == len(confirm.baseline_rates) == 3
    est = replicated_speedup(
        [1 / r for r in confirm.baseline_rates],
        [1 / r for r in confirm.rates],
        confidence=MeasurePlan().confidence,
    )
    assert confirm.speedup_ci == pytest.approx((est.ci_low, est.ci_high))
    assert any(n.startswith("speedup from 3 fresh process pairs") for n in result.notes)
    # Saved with the study's settings: a resume asks for as many.
    assert TuneConfig.read(tmp_path / "run" / CONFIG_FILE).final_pairs == 3


def test_a_confirmation_the_budget_cuts_short_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # When the pairs' own pace leaves fewer than MIN_REPLICATES whole pairs, there is no
    # interval: the record says why and the headline stays the ladder's chained figure.
    config = sim_config([FAST_KNOB], noise=0.002, effects={"fast": {"True": 0.5}})
    monkeypatch.setattr(tuner_mod, "confirm_cost_s", lambda *_: 0.0)
    monkeypatch.setattr(confirm_mod, "_next_pair_fits", lambda *_a, **_k: False)
    result = tune(config=config, out=tmp_path / "run")

    (confirm,) = _confirmations(tmp_path / "run")
    assert not confirm.ok and "1 fresh process pair;" in confirm.reason
    assert any("no final A/B: the budget left time for 1" in n for n in result.notes)
    # The headline is the kept rung's, from the ladder's step ratios, and says so, in the
    # --json document too for a job that gates on it.
    assert result.speedup_from == "ladder"
    rung = result.ladder.rungs[-1]
    assert result.speedup == rung.speedup_vs_baseline
    assert tuple(result.speedup_ci) == tuple(rung.speedup_vs_baseline_ci)
    assert json.loads((tmp_path / "run" / "tune.json").read_text())["speedup_from"] == "ladder"
