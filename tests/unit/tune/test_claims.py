"""Ladder steps of a shared study claimed through Optuna (tune/claims.py), on SQLite.

Two `Study` objects on one storage stand for two tuners; a killed tuner is one whose claim
stopped beating (its heartbeat row set back in time, as the clock would leave it).
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from torchdoctor.core.errors import TuneError
from torchdoctor.procs import SessionSpec
from torchdoctor.tune import TrialResult
from torchdoctor.tune.budget import BudgetExhausted
from torchdoctor.tune.claims import END_ATTR, KEY_ATTR, MAX_RETRY, RECORD_ATTR
from torchdoctor.tune.outcome import Outcome, Verdict
from torchdoctor.tune.records import TrialFigures
from torchdoctor.tune.storage import StorageURL
from torchdoctor.tune.study import Study
from torchdoctor.tune.tuner import Tuner, TuneSettings, recipe_key

KEY = 'ladder:{}->{"x": true}'


def _trial() -> TrialResult:
    return TrialResult.of(
        key=KEY,
        kind="ladder",
        step=1,
        change={"x": True},
        recipe={"x": True},
        verdict=Verdict("ok", Outcome.NOT_FASTER, "not a proven win"),
        figures=TrialFigures(samples_per_s=10.0),
        wall_s=1.0,
    )


@pytest.fixture(scope="module")
def empty_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A storage with Optuna's schema and the study, made once: creating the schema is most
    of what opening a fresh storage costs."""
    path = tmp_path_factory.mktemp("claims") / "empty.db"
    Study(f"sqlite:///{path}")
    return path


@pytest.fixture()
def storage(empty_study: Path, tmp_path: Path) -> Path:
    path = tmp_path / "study.db"
    shutil.copyfile(empty_study, path)
    return path


def _tuners(storage: Path, n: int = 2) -> list[Study]:
    return [Study(f"sqlite:///{storage}", shared=True, heartbeat_s=1) for _ in range(n)]


def _states(study: Study) -> list[tuple[str, bool, str | None]]:
    return [
        (t.state.name, RECORD_ATTR in t.user_attrs, t.user_attrs.get(END_ATTR))
        for t in study.optuna_study.get_trials(deepcopy=False)
    ]


def test_a_step_runs_in_the_tuner_that_claimed_it_and_the_other_waits_for_its_record(
    storage: Path,
) -> None:
    a, b = _tuners(storage)
    assert a.claim(KEY) is None  # a's to run
    seen: list[object] = []
    waiter = threading.Thread(target=lambda: seen.append(b.claim(KEY)))
    waiter.start()
    while b._claims is not None and not b._claims.waited:  # b is waiting on a's trial
        waiter.join(0.05)
    a.add(_trial())
    waiter.join()
    assert seen == [_trial()]
    assert _states(a) == [("COMPLETE", True, None)]


def test_of_two_claims_enqueued_at_once_the_first_runs_and_the_second_is_withdrawn(
    storage: Path,
) -> None:
    a, b = _tuners(storage)
    for _ in range(2):  # two tuners found no trial for the step and enqueued one each
        a.optuna_study.enqueue_trial({}, user_attrs={KEY_ATTR: KEY})
    assert a.claim(KEY) is None
    a.add(_trial())
    assert _states(a) == [("COMPLETE", True, None), ("FAIL", False, "withdrawn")]
    assert b.claim(KEY) == _trial()


def test_a_killed_tuners_step_goes_stale_and_is_retried_by_another(storage: Path) -> None:
    a, b = _tuners(storage)
    assert a.claim(KEY) is None
    a._held[KEY].stop()  # a is SIGKILLed: its heartbeat stops, its trial stays RUNNING
    with sqlite3.connect(storage) as db:
        db.execute("UPDATE trial_heartbeats SET heartbeat = '2000-01-01 00:00:00'")
    assert b.claim(KEY) is None  # b fails the stale trial, and claims its retry
    b.add(_trial())
    trials = b.optuna_study.get_trials(deepcopy=False)
    assert [t.state.name for t in trials] == ["FAIL", "COMPLETE"]
    assert trials[1].system_attrs["retry_history"] == [trials[0].number]
    assert trials[1].user_attrs[RECORD_ATTR] == _trial().to_json_dict()


def test_a_duplicate_claim_that_runs_after_a_lost_attempt_names_it(storage: Path) -> None:
    a, b = _tuners(storage)
    for _ in range(2):  # two tuners enqueued the step at once; a took the first
        a.optuna_study.enqueue_trial({}, user_attrs={KEY_ATTR: KEY})
    assert a.claim(KEY) is None
    a._held[KEY].stop()  # and was killed
    with sqlite3.connect(storage) as db:
        db.execute("UPDATE trial_heartbeats SET heartbeat = '2000-01-01 00:00:00'")
    assert b.claim(KEY) is None  # the duplicate is lower than Optuna's retry: b runs it
    b.add(_trial())
    trials = b.optuna_study.get_trials(deepcopy=False)
    assert [(t.state.name, t.user_attrs.get(END_ATTR)) for t in trials] == [
        ("FAIL", None),
        ("COMPLETE", None),
        ("FAIL", "withdrawn"),  # Optuna's retry, not needed
    ]
    assert trials[1].system_attrs["retry_history"] == [trials[0].number]


def test_a_released_step_is_free_for_the_next_tuner(storage: Path) -> None:
    a, b = _tuners(storage)
    assert a.claim(KEY) is None
    a.release(KEY)  # a ran out of budget before the step had a record
    assert b.claim(KEY) is None  # at once, not after a grace period
    assert _states(b) == [("FAIL", False, "released"), ("RUNNING", False, None)]


def test_a_step_lost_more_often_than_it_may_be_retried_stops_the_tuner(storage: Path) -> None:
    import optuna

    (a,) = _tuners(storage, 1)
    for _ in range(MAX_RETRY + 1):
        a.optuna_study.add_trial(
            optuna.trial.create_trial(
                state=optuna.trial.TrialState.FAIL, user_attrs={KEY_ATTR: KEY}
            )
        )
    with pytest.raises(TuneError, match="lost 4 times"):
        a.claim(KEY)


def test_a_tuner_replays_a_shared_step_and_gives_its_claim_up_when_its_run_fails(
    storage: Path,
) -> None:
    a, b = (Tuner(SessionSpec("mlp", {}), TuneSettings(), s) for s in _tuners(storage))

    def broken() -> TrialResult:
        raise RuntimeError("the worker died")

    with pytest.raises(RuntimeError):
        a.run_or_replay(KEY, TrialResult, broken)
    assert b.run_or_replay(KEY, TrialResult, _trial) == _trial()  # released: b runs it

    def again() -> TrialResult:
        raise AssertionError("a stored step must not run again")

    assert a.run_or_replay(KEY, TrialResult, again) == _trial() and a.reused == 1
    # b's step counts against a's budget as a resumed study's would: the time it took b,
    # less what a spent waiting for it (no wait here)
    assert 0.0 < a.budget.reused_wall_s <= _trial().wall_s


def test_a_database_failing_mid_study_is_one_error_naming_the_public_url() -> None:
    import sqlalchemy.exc

    study = Study("sqlite://")
    study._url = StorageURL.parse("postgresql+psycopg://td:hunter2@db/studies")
    study.storage_url = study._url.public
    lost = sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("server closed"))
    error = study.storage_failure(lost)
    assert error is not None and "hunter2" not in str(error)
    assert "'postgresql+psycopg://td@db/studies' failed: OperationalError" in str(error)
    assert study.storage_failure(RuntimeError("not the database")) is None


def test_a_tuner_waits_for_another_only_while_its_own_budget_lasts(storage: Path) -> None:
    a, b = (
        Tuner(SessionSpec("mlp", {}), TuneSettings(budget_s=budget), study)
        for budget, study in zip((600.0, 1e-6), _tuners(storage), strict=True)
    )
    assert a.study.claim(KEY) is None  # a runs the step...
    with pytest.raises(BudgetExhausted):  # ...and b, out of time, stops instead of waiting
        b.run_or_replay(KEY, TrialResult, _trial)
    assert a.study.claim("baseline:" + recipe_key({})) is None  # a measures the baseline
    with pytest.raises(TuneError, match="too small to measure even the baseline"):
        b.run_baseline()
