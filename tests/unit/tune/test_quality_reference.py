"""The quality check's yardstick is measured once per study, at the baseline, and kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.procs import Reply, SessionHost
from torchdoctor.tune import tune
from torchdoctor.tune.parity import REFERENCE_RUNS
from torchdoctor.tune.records import TrialResult
from tune_sim import FAST_KNOB, NOOP_KNOB, sim_config


@pytest.fixture
def reference_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = SessionHost._reference

    def counting(self: SessionHost, perturbation: int, steps: int) -> Reply:
        calls.append(perturbation)
        return original(self, perturbation, steps)

    monkeypatch.setattr(SessionHost, "_reference", counting)
    return calls


def test_reference_runs_are_paid_once_per_study(tmp_path: Path, reference_calls: list[int]) -> None:
    config = sim_config([FAST_KNOB, NOOP_KNOB], effects={"fast": {"True": 0.5}})
    result = tune(config=config, out=tmp_path / "run")
    assert result.n_trials >= 3  # baseline and two candidates (at least one parity check)
    assert reference_calls == list(range(1, REFERENCE_RUNS + 1))
    baseline = TrialResult.read(next((tmp_path / "run" / "trials").glob("*baseline*")))
    assert len(baseline.reference_losses) == REFERENCE_RUNS
    assert all(len(r) == config.plan.parity_steps for r in baseline.reference_losses)
    # Perturbed runs differ from the baseline and from each other (another draw of noise).
    firsts = {round(float(r[-1] or 0), 9) for r in baseline.reference_losses}
    assert len(firsts) == REFERENCE_RUNS


def test_a_resumed_study_reuses_the_stored_reference(
    tmp_path: Path, reference_calls: list[int]
) -> None:
    config = sim_config([FAST_KNOB], effects={"fast": {"True": 0.5}})
    tune(config=config, out=tmp_path / "run")
    reference_calls.clear()
    resumed = tune(resume=tmp_path / "run", config=config)
    assert reference_calls == []
    assert resumed.best_recipe == {"fast": True}


def test_the_result_states_the_yardstick(tmp_path: Path) -> None:
    config = sim_config([FAST_KNOB], effects={"fast": {"True": 0.5}})
    result = tune(config=config, out=tmp_path / "run")
    line = next(n for n in result.notes if n.startswith("quality yardstick"))
    assert f"trained {REFERENCE_RUNS + 1} times" in line and "99% prediction interval" in line
