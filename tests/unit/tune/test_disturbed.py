"""A comparison disturbed by other work on the machine is measured again, a bounded number
of times, and the trial record says so (simulated sessions, a scripted load signal)."""

from __future__ import annotations

from pathlib import Path

import pytest

from load_fakes import ScriptedLoadProbe
from torchdoctor.measure import load
from torchdoctor.tune import TrialResult, tune
from torchdoctor.tune.records import read_trial
from tune_sim import FAST_KNOB, sim_config


def _ladder_trial(run: Path) -> TrialResult:
    for path in sorted((run / "trials").iterdir()):
        trial = read_trial(path)
        if isinstance(trial, TrialResult) and trial.kind == "ladder":
            return trial
    raise AssertionError("no ladder trial")


def test_a_comparison_disturbed_midway_is_measured_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = sim_config([FAST_KNOB], noise=0.01, effects={"fast": {"True": 0.5}})
    plan = config.plan
    first_look = plan.looks()[0]
    # The first comparison's third scored round (after the unscored settle rounds) ran beside
    # another process; after it, the machine is quiet.
    probe = ScriptedLoadProbe.of([False] * (plan.settle_rounds + 2) + [True])
    monkeypatch.setattr(load, "default_load_probe", lambda: probe)
    result = tune(config=config, out=tmp_path / "run")
    trial = _ladder_trial(tmp_path / "run")
    assert trial.remeasured == 1
    assert trial.machine_load is not None and not trial.machine_load.disturbed
    # Two comparisons ran; the kept one is the second, scored in full. The win then held in
    # a second pair of fresh processes, measured once on the quiet machine.
    assert (
        probe.opened == (2 + 1) * (plan.settle_rounds + first_look)
        and len(trial.chunk_times_s) == first_look
    )
    assert trial.replicate_speedup_vs_best_ci is not None
    assert trial.decision == "kept" and result.best_recipe == {"fast": True}
    assert any("measured again" in n and "fast=True (1x)" in n for n in result.notes)


def test_a_machine_busy_all_along_is_measured_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = sim_config([FAST_KNOB], noise=0.01, effects={"fast": {"True": 0.5}})
    plan = config.plan
    probe = ScriptedLoadProbe.of([], then=True)
    monkeypatch.setattr(load, "default_load_probe", lambda: probe)
    result = tune(config=config, out=tmp_path / "run")
    trial = _ladder_trial(tmp_path / "run")
    assert trial.remeasured == plan.remeasures
    assert trial.disturbed and trial.machine_load is not None
    assert trial.machine_load.disturbed_windows == trial.machine_load.windows
    # The first pair and the second pair of fresh processes (the win is kept: the load does
    # not slow a simulated session) are each measured the bounded number of times.
    assert probe.opened == 2 * (plan.remeasures + 1) * (plan.settle_rounds + plan.looks()[0])
    assert any(n.startswith("warning: machine disturbed") for n in result.notes)
    # The JSON form carries it too.
    assert TrialResult.from_json_dict(trial.to_json_dict()).remeasured == plan.remeasures
