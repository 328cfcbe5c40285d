"""The final A/B has its own record; run folders that stored it as a TrialResult still read."""

from __future__ import annotations

from pathlib import Path

from torchdoctor.report.adapters.tune import trial_view
from torchdoctor.tune import Confirmation, TrialResult
from torchdoctor.tune.records import read_trial

BASELINE = {"fast": False}
BEST = {"fast": True}


def _old_style_confirm() -> TrialResult:
    # Before `Confirmation`: the baseline's figures sat in the "best" fields.
    return TrialResult(
        key="confirm:x->y",
        kind="confirm",
        step=3,
        recipe=BEST,
        status="ok",
        decision="measured",
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
    assert view.kind == "confirm" and view.speedup == 2.0
    assert (view.ci_low, view.ci_high) == (1.8, 2.2) and view.samples_per_s == 200.0
