"""A trial's outcome is a type on its record: derived for records stored before it existed,
checked against the status and decision, and what the ladder decides by (never the reason)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from torchdoctor.collect import ALREADY_RUNS_WITH
from torchdoctor.core.errors import RecordError
from torchdoctor.core.load import MachineLoad
from torchdoctor.tune import Confirmation, TrialResult
from torchdoctor.tune.ladder import (
    ClimbOutcome,
    LadderPlan,
    _one_pass,
    _rejected_for_speed,
    _unproven_wins,
)
from torchdoctor.tune.outcome import (
    DOES_NOT_APPLY,
    NOT_REPRODUCED,
    Outcome,
    Verdict,
    failure_outcome,
)
from torchdoctor.tune.records import TrialFigures, read_trial, trial_from_json_dict
from torchdoctor.tune.space import KnobSpec

#: (status, decision, reason) of trials as the tuner wrote them before outcomes were recorded,
#: and the outcome each reads back with.
OLD_TRIALS = [
    ("ok", "baseline", "", Outcome.BASELINE),
    ("ok", "kept", "", Outcome.KEPT),
    ("ok", "kept", "kept on its first pair of processes: the budget ran out", Outcome.KEPT),
    ("ok", "measured", "", Outcome.MEASURED),
    ("ok", "rejected", "not a proven win: speedup 1.010x", Outcome.NOT_FASTER),
    ("ok", "rejected", "quality: training diverges", Outcome.QUALITY),
    ("ok", "rejected", "futile: its warm-up ran at 3/s, 40x slower", Outcome.FUTILE),
    ("ok", "rejected", "does not apply: num_workers=2: no DataLoader", Outcome.NOT_APPLICABLE),
    ("ok", "rejected", "not reproduced in fresh processes: 1.0x", Outcome.NOT_REPRODUCED),
    ("nan", "failed", "loss is NaN/inf at step 3", Outcome.NAN),
    ("crash", "failed", "worker process died (exit code -9)", Outcome.CRASHED),
    ("oom", "failed", "resident memory 900 MiB exceeded the cap", Outcome.OUT_OF_MEMORY),
    ("timeout", "failed", "no answer within 8 s", Outcome.TIMEOUT),
    ("error", "failed", "RuntimeError: boom", Outcome.ERROR),
]


def _old_trial_json(status: str, decision: str, reason: str, *, version: int = 4) -> dict[str, Any]:
    """A `TrialResult` as version 4 wrote it: no outcome field."""
    return {
        "schema": TrialResult.schema_id(),
        "version": version,
        "key": 'ladder:{}->{"x": true}',
        "kind": "ladder",
        "step": 1,
        "change": {"x": True},
        "recipe": {"x": True},
        "status": status,
        "decision": decision,
        "reason": reason,
        "samples_per_s": 10.0,
        "wall_s": 2.0,
    }


@pytest.mark.parametrize(("status", "decision", "reason", "expected"), OLD_TRIALS)
def test_a_trial_stored_before_outcomes_reads_back_with_the_outcome_its_fields_imply(
    tmp_path: Path, status: str, decision: str, reason: str, expected: Outcome
) -> None:
    path = tmp_path / "001-ladder.json"
    path.write_text(json.dumps(_old_trial_json(status, decision, reason)))
    trial = read_trial(path)
    assert isinstance(trial, TrialResult)
    assert trial.outcome is expected
    assert (trial.status, trial.decision, trial.reason) == (status, decision, reason)
    # Written again, it carries its outcome and reads back the same.
    trial.write(path)
    assert json.loads(path.read_text())["outcome"] == expected.value
    assert read_trial(path) == trial


def test_an_old_trial_in_a_study_reads_back_with_its_outcome() -> None:
    # The study's copy of a record goes through the same reader (Study.records).
    data = _old_trial_json("ok", "rejected", "quality: loss drifts", version=2)
    trial = trial_from_json_dict(data, source="trial 3")
    assert isinstance(trial, TrialResult) and trial.outcome is Outcome.QUALITY


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        ("ok", "", Outcome.MEASURED),
        ("timeout", "the budget left time for 1 fresh process pairs; an interval needs 3",
         Outcome.BUDGET_CUT),
        ("timeout", "no answer within 30 s", Outcome.TIMEOUT),
        ("crash", "worker process died (exit code 1)", Outcome.CRASHED),
    ],
)  # fmt: skip
def test_a_confirmation_stored_before_outcomes_reads_back_with_its_outcome(
    tmp_path: Path, status: str, reason: str, expected: Outcome
) -> None:
    old = {
        "schema": Confirmation.schema_id(),
        "version": 2,
        "key": "confirm-pairs:{}->{}",
        "step": 4,
        "baseline_recipe": {},
        "recipe": {"x": True},
        "status": status,
        "reason": reason,
    }
    path = tmp_path / "004-confirm.json"
    path.write_text(json.dumps(old))
    confirmation = read_trial(path)
    assert isinstance(confirmation, Confirmation) and confirmation.outcome is expected


def test_a_record_whose_outcome_contradicts_its_status_or_decision_is_refused(
    tmp_path: Path,
) -> None:
    good = {**_old_trial_json("ok", "rejected", "x", version=5), "outcome": "quality"}
    assert trial_from_json_dict(good).outcome is Outcome.QUALITY
    for bad in (
        {**good, "outcome": "kept"},  # kept, but decision "rejected"
        {**good, "status": "crash", "decision": "failed", "outcome": "out_of_memory"},
        {**good, "status": "ok", "decision": "failed", "outcome": "crashed"},
    ):
        with pytest.raises(RecordError):
            trial_from_json_dict(bad)
    # A current record must say its outcome: it is not guessed from the reason.
    with pytest.raises(RecordError, match="outcome"):
        trial_from_json_dict(_old_trial_json("ok", "rejected", "quality: x", version=5))


def test_a_failed_workers_status_maps_to_one_outcome() -> None:
    assert failure_outcome("crash") is Outcome.CRASHED
    assert failure_outcome("oom") is Outcome.OUT_OF_MEMORY
    assert failure_outcome("timeout") is Outcome.TIMEOUT
    assert failure_outcome("nan") is Outcome.NAN
    assert failure_outcome("error") is Outcome.ERROR
    assert failure_outcome("something new") is Outcome.ERROR
    verdict = Verdict.failure("oom", "over the cap")
    assert (verdict.status, verdict.decision, verdict.outcome) == (
        "oom",
        "failed",
        Outcome.OUT_OF_MEMORY,
    )


def _ladder_trial(change: dict[str, Any], outcome: Outcome, reason: str) -> TrialResult:
    return TrialResult.of(
        key=f"ladder:{change}",
        kind="ladder",
        step=1,
        change=change,
        recipe=change,
        verdict=Verdict("ok", outcome, reason),
        figures=TrialFigures(speedup_vs_best=1.05),
        wall_s=1.0,
    )


def test_rejected_for_speed_goes_by_the_outcome_not_the_reason() -> None:
    # A speed rejection whose reason happens to begin like a quality rejection is still one
    # a later change can turn into a win, and a quality rejection worded like a speed one is not.
    speed = _ladder_trial({"a": 1}, Outcome.NOT_FASTER, "quality is not what failed here")
    quality = _ladder_trial({"a": 1}, Outcome.QUALITY, "not a proven win, in so many words")
    futile = _ladder_trial({"a": 1}, Outcome.FUTILE, "not a proven win")
    again = _ladder_trial({"a": 1}, Outcome.NOT_REPRODUCED, "futile-looking words")
    assert _rejected_for_speed(speed) and _rejected_for_speed(again)
    assert not _rejected_for_speed(quality) and not _rejected_for_speed(futile)


class StubTuner:
    """What the ladder's passes read of a tuner, with `try_change` answering from a script."""

    def __init__(self, answers: dict[Any, TrialResult]) -> None:
        self.answers = answers
        self.best_recipe: dict[str, Any] = {}
        self.own_settings: dict[str, Any] = {}
        self.trials: list[TrialResult] = []
        self.tried: list[dict[str, Any]] = []

    def try_change(self, change: dict[str, Any], *, kind: str, safety: str) -> TrialResult:
        self.tried.append(change)
        result = self.answers[next(iter(change.values()))]
        self.trials.append(result)
        return result


def test_only_a_not_applicable_outcome_ends_a_knobs_values() -> None:
    knob = KnobSpec("w", (0, 1, 2), "exact", 0)
    plan = LadderPlan(space=[knob])
    worded = StubTuner(
        {
            1: _ladder_trial({"w": 1}, Outcome.NOT_FASTER, f"{DOES_NOT_APPLY}: worded so"),
            2: _ladder_trial({"w": 2}, Outcome.NOT_FASTER, "not a proven win"),
        }
    )
    outcome = ClimbOutcome()
    _one_pass(worded, [knob], plan, outcome)  # type: ignore[arg-type]
    assert worded.tried == [{"w": 1}, {"w": 2}] and outcome.skipped == {}

    typed = StubTuner({1: _ladder_trial({"w": 1}, Outcome.NOT_APPLICABLE, "w=1: no loader")})
    outcome = ClimbOutcome()
    _one_pass(typed, [knob], plan, outcome)  # type: ignore[arg-type]
    assert typed.tried == [{"w": 1}] and outcome.skipped == {"no loader": ["w"]}


def test_a_value_the_script_already_runs_with_is_not_launched_again() -> None:
    # Its injection says so at launch (a DDP or fully_shard setting is read no earlier than
    # that): a second pass from a new best tries the knob's other values only.
    knob = KnobSpec("w", (0, 1, 2), "exact", 0)
    own = f"w=1: the script's DistributedDataParallel {ALREADY_RUNS_WITH} w=1"
    tuner = StubTuner(
        {
            1: _ladder_trial({"w": 1}, Outcome.NOT_APPLICABLE, own),
            2: _ladder_trial({"w": 2}, Outcome.NOT_FASTER, "not a proven win"),
        }
    )
    plan = LadderPlan(space=[knob])
    for _ in range(2):
        _one_pass(tuner, [knob], plan, ClimbOutcome())  # type: ignore[arg-type]
    assert tuner.tried == [{"w": 1}, {"w": 2}, {"w": 2}]


def test_only_a_not_reproduced_outcome_counts_as_an_unproven_win() -> None:
    knob = KnobSpec("a", (False, True), "exact", False)
    tuner = StubTuner({})
    tuner.trials = [
        _ladder_trial({"a": True}, Outcome.NOT_FASTER, f"{NOT_REPRODUCED}: in words only"),
    ]
    assert _unproven_wins(tuner, {"a": knob}) == {}  # type: ignore[arg-type]
    tuner.trials = [_ladder_trial({"a": True}, Outcome.NOT_REPRODUCED, "reworded freely")]
    assert _unproven_wins(tuner, {"a": knob}) == {"a": True}  # type: ignore[arg-type]


def test_a_confirmation_is_measured_or_says_why_not() -> None:
    common: dict[str, Any] = {"key": "confirm-pairs:{}->{}", "step": 4, "baseline_recipe": {},
                              "recipe": {"x": True}}  # fmt: skip
    assert Confirmation(**common, status="ok", outcome=Outcome.MEASURED).ok
    cut = Confirmation(**common, status="timeout", outcome=Outcome.BUDGET_CUT)
    assert not cut.ok
    for status, outcome in (("ok", Outcome.KEPT), ("crash", Outcome.BUDGET_CUT)):
        with pytest.raises(ValueError, match=r"confirmation|status"):
            Confirmation(**common, status=status, outcome=outcome)


def test_a_trial_records_every_figure_it_measured_under_its_own_name() -> None:
    # Each figure set to a value of its type that is not its default: none may be dropped or
    # crossed on the way into the record, and the record owns its lists.
    values: dict[str, Any] = {
        "samples_per_s": 101.0, "best_samples_per_s": 99.0, "step_time_s": 0.3,
        "speedup_vs_best": 1.02, "speedup_vs_best_ci": (1.01, 1.03),
        "replicate_speedup_vs_best": 1.04, "replicate_speedup_vs_best_ci": (1.0, 1.05),
        "peak_memory_bytes": 7, "chunk_peak_memory_bytes": [5, 7], "losses": [2.0, None],
        "compile_s": 1.5, "warmup_s": 2.5, "chunk_times_s": [0.1, 0.2],
        "best_chunk_times_s": [0.3],
        "machine_load": MachineLoad(interval_s=1.0, cores=2, own_cpu_s=1.0, other_cpu_s=0.5,
                                    other_cores=0.5),
        "remeasured": 2, "device_switch_s": 0.25, "sharing_mode": "turns",
    }  # fmt: skip
    assert set(values) == {f.name for f in dataclasses.fields(TrialFigures)}
    figures = TrialFigures(**values)
    record = TrialResult.of(
        key="k", kind="ladder", step=1, recipe={"a": 1},
        verdict=Verdict("ok", Outcome.KEPT, "kept"), figures=figures, wall_s=3.0,
    )  # fmt: skip
    assert {name: getattr(record, name) for name in values} == values
    assert record.losses is not figures.losses
