"""Crashes, hangs, memory blow-ups, exceptions and NaN losses in isolated worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.tune import tune
from torchdoctor.tune.outcome import Outcome
from torchdoctor.tune.records import read_trial
from torchdoctor.tune.space import KnobSpec
from tune_sim import sim_config, with_plan

CAP_BYTES = 400 * 2**20


def _knob(name: str) -> KnobSpec:
    return KnobSpec(name, (False, True), "exact", False)


@pytest.mark.study  # a study whose trials crash, hang and blow up in real worker processes
def test_failed_trials_are_recorded_and_the_study_goes_on(tmp_path: Path) -> None:
    names = ["crashes", "hangs", "hogs", "raises", "nans", "fast"]
    config = sim_config(
        [_knob(n) for n in names],
        isolate=True,
        crash={"crashes": "True"},
        hang={"hangs": "True"},
        allocate={"hogs": "True"},
        allocate_bytes=3 * CAP_BYTES,
        error={"raises": "True"},
        nan={"nans": "True"},
        effects={"fast": {"True": 0.5}},
    ).model_copy(update={"trial_timeout_s": 8.0, "max_memory_bytes": CAP_BYTES})
    config = with_plan(config, rounds=4)
    run = tmp_path / "run"
    result = tune(config=config, out=run)

    by_knob = {next(iter(r.change)): r for r in result.ladder.rejected}
    assert by_knob["crashes"].status == "crash"
    assert "exit code 3" in by_knob["crashes"].reason
    assert by_knob["hangs"].status == "timeout"
    assert by_knob["hogs"].status == "oom"
    assert "exceeded the cap" in by_knob["hogs"].reason
    assert by_knob["raises"].status == "error"
    assert "simulated failure" in by_knob["raises"].reason
    assert by_knob["nans"].status == "nan"
    # ... and after five failures the study still found the real win.
    assert result.best_recipe == {"fast": True}
    assert result.n_failed == 5

    records = [read_trial(p) for p in sorted((run / "trials").iterdir())]
    assert [r.status for r in records if r.kind == "ladder"] == [
        "crash",
        "timeout",
        "oom",
        "error",
        "nan",
        "ok",
    ]
    # Each failure is typed on its record, as the ladder and the batch search read it.
    assert [r.outcome for r in records if r.kind == "ladder"] == [
        Outcome.CRASHED,
        Outcome.TIMEOUT,
        Outcome.OUT_OF_MEMORY,
        Outcome.ERROR,
        Outcome.NAN,
        Outcome.KEPT,
    ]
