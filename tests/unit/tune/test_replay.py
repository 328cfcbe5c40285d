"""`Tuner.run_or_replay`: the one place a trial is read back from the study or run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from torchdoctor.core.errors import TuneError
from torchdoctor.procs import SessionSpec
from torchdoctor.tune import Confirmation, TrialResult
from torchdoctor.tune.outcome import Outcome, Verdict
from torchdoctor.tune.records import TrialFigures
from torchdoctor.tune.study import Study
from torchdoctor.tune.tuner import Tuner, TuneSettings

KEY = 'ladder:{}->{"x": true}'


def _trial(key: str = KEY, wall_s: float = 3.0) -> TrialResult:
    return TrialResult.of(
        key=key,
        kind="ladder",
        step=1,
        change={"x": True},
        recipe={"x": True},
        verdict=Verdict("ok", Outcome.NOT_FASTER, "not a proven win"),
        figures=TrialFigures(samples_per_s=10.0),
        wall_s=wall_s,
    )


def _tuner(tmp_path: Path, stored: Sequence[TrialResult | Confirmation] = ()) -> Tuner:
    study = Study(f"sqlite:///{tmp_path / 'study.db'}")
    for record in stored:
        study.add(record)
    return Tuner(SessionSpec("mlp", {}), TuneSettings(), study)


def test_a_stored_trial_is_replayed_not_run(tmp_path: Path) -> None:
    stored = _trial(wall_s=7.0)
    tuner = _tuner(tmp_path, [stored])
    applied: list[tuple[TrialResult, bool]] = []

    def run() -> TrialResult:
        raise AssertionError("a stored trial must not run again")

    result = tuner.run_or_replay(
        KEY, TrialResult, run, apply=lambda r, reused: applied.append((r, reused))
    )
    assert result == stored
    assert applied == [(stored, True)]
    assert tuner.trials == [stored] and tuner.reused == 1
    assert tuner.budget.reused_wall_s == 7.0  # it counts with the time it took when it ran
    assert len(list(tuner.study.records())) == 1  # not stored a second time


def test_a_trial_the_study_lacks_is_run_applied_and_stored(tmp_path: Path) -> None:
    tuner = _tuner(tmp_path)
    seen: list[str] = []
    tuner.on_trial = lambda r: seen.append(f"recorded {r.key}")
    fresh = _trial()

    def run() -> TrialResult:
        seen.append("ran")
        return fresh

    def apply(result: TrialResult, reused: bool) -> None:
        seen.append(f"applied reused={reused}")

    assert tuner.run_or_replay(KEY, TrialResult, run, apply=apply) == fresh
    # The tuner's state is updated before anyone is told of the trial.
    assert seen == ["ran", "applied reused=False", f"recorded {KEY}"]
    assert tuner.reused == 0 and tuner.trials == [fresh]
    assert Study(tuner.study.storage_url).completed() == {KEY: fresh}


def test_a_stored_record_of_another_type_under_the_key_is_not_replayed(tmp_path: Path) -> None:
    other = Confirmation(
        key=KEY, step=2, baseline_recipe={}, recipe={"x": True}, status="ok",
        outcome=Outcome.MEASURED,
    )  # fmt: skip
    tuner = _tuner(tmp_path, [other])
    fresh = _trial()
    assert tuner.run_or_replay(KEY, TrialResult, lambda: fresh) == fresh
    assert tuner.reused == 0


def test_unstored_trials_and_replay_only_calls(tmp_path: Path) -> None:
    stored = _trial(key="joint:0:{}")
    tuner = _tuner(tmp_path, [stored])
    # Replay only (the joint search's stored trials): the study must hold the key.
    assert tuner.run_or_replay("joint:0:{}", TrialResult, None) == stored
    with pytest.raises(TuneError, match="no stored trial"):
        tuner.run_or_replay("joint:9:{}", TrialResult, None)
    # store=False: recorded, not written to the study (its caller tells the study itself).
    fresh = _trial(key="joint:1:{}")
    assert tuner.run_or_replay("joint:1:{}", TrialResult, lambda: fresh, store=False) == fresh
    assert "joint:1:{}" not in Study(tuner.study.storage_url).completed()
    assert tuner.trials == [stored, fresh]


def test_every_trial_kind_goes_through_the_one_helper() -> None:
    # The baseline, a ladder or batch change, the final A/B and the joint search's trials:
    # each reads the study through `run_or_replay`, and nothing else looks a key up.
    import inspect

    import torchdoctor.tune.confirm as confirm
    import torchdoctor.tune.joint as joint
    import torchdoctor.tune.tuner as tuner

    sources = {m.__name__: inspect.getsource(m) for m in (confirm, joint, tuner)}
    assert all("run_or_replay(" in sources[m] for m in sources)
    assert sum(src.count("stored.get(") for src in sources.values()) == 1
    assert sum(src.count("reused=True") for src in sources.values()) == 0
