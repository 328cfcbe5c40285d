"""`torchdoctor demo --quick`: the same story on a smaller budget, which it says it is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import torchdoctor.cli.demo as demo_mod
import torchdoctor.tune.demo as demo_plan
from torchdoctor.cli.main import main
from torchdoctor.cli.options import parse_duration
from torchdoctor.core import rundir
from torchdoctor.knobs import COMPILE
from torchdoctor.tune import TuneConfig, diagnosed_step_s
from torchdoctor.tune.cost import TrialCosts, story_s
from torchdoctor.tune.parity import REFERENCE_RUNS


def _capture(
    monkeypatch: pytest.MonkeyPatch, prescribed: list[str], run_dir: Path = Path("run")
) -> list[TuneConfig]:
    configs: list[TuneConfig] = []

    def diagnose(workload: str, out: Path | None, **_: Any) -> tuple[Path, list[str]]:
        return run_dir, list(prescribed)

    def run(*, config: TuneConfig, out: Path) -> SimpleNamespace:
        configs.append(config)
        return SimpleNamespace(run_dir="run")

    monkeypatch.setattr(demo_mod, "diagnose_into_run_dir", diagnose)
    monkeypatch.setattr(demo_mod, "run_with_progress", run)
    monkeypatch.setattr(demo_mod, "finish_with_report", lambda result: None)
    monkeypatch.setattr(demo_mod, "display_path", lambda p: str(p))
    return configs


H200 = Path(__file__).parents[2] / "data" / "h200"


def test_quick_tries_three_knobs_without_compile_on_shorter_ab(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    configs = _capture(monkeypatch, ["num_workers", COMPILE.name])
    main(["demo", "--quick"])
    (config,) = configs
    assert config.knobs is not None and len(config.knobs) == demo_plan.QUICK_KNOBS
    assert config.knobs[0] == "num_workers" and COMPILE.name not in config.knobs
    assert config.prescribed == ["num_workers"]
    assert config.budget_s == demo_plan.quick_budget_s(config.device) and not config.search_batch
    assert config.plan.rounds < TuneConfig(workload="cnn").plan.rounds
    # A knob is one trial where it wins: bf16 kept, fp16 is not tried against it.
    assert not config.values_after_keep
    # Honest about it: the note names the cost, on stderr and in the study's notes.
    assert len(config.notes) == 1 and "intervals are wider" in config.notes[0]
    assert "demo --quick" in capsys.readouterr().err


def test_the_full_demo_keeps_its_budget_and_every_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    configs = _capture(monkeypatch, [COMPILE.name])
    main(["demo"])
    (config,) = configs
    assert config.budget_s == 8 * 60 and config.notes == [] and config.search_batch
    assert config.values_after_keep
    assert config.knobs is not None and config.knobs[0] == COMPILE.name
    assert set(demo_plan.DEMO_KNOBS) <= set(config.knobs)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_quick_budget_fits_its_knobs_at_the_devices_costs(device: str) -> None:
    """Sized from the trial costs recorded for the device class: the baseline, a ladder trial
    per knob, a win's second pair and the final A/B's pairs all fit; on a GPU also the
    baseline's twin, which measures the spread between processes up front."""
    start_s, step_s, warmup_steps = demo_plan.QUICK_COSTS[device]
    plan = demo_plan.QUICK_PLAN
    costs = TrialCosts.of(
        open_s=start_s + warmup_steps * step_s,
        step_s=step_s,
        plan=plan,
        close_s=demo_plan.QUICK_CLOSE_S,
    )
    story = story_s(
        costs,
        plan,
        knobs=demo_plan.QUICK_KNOBS,
        reference_runs=REFERENCE_RUNS,
        twin=device == "cuda",
    )
    budget_s = demo_plan.quick_budget_s(device)
    assert story <= budget_s < story + demo_plan.QUICK_BUDGET_STEP_S
    # A GPU's 10 s process starts ask for more than the 90 s that tried nothing on an H200.
    if device == "cuda":
        assert budget_s > 90


def test_an_explicit_budget_wins_over_quicks(monkeypatch: pytest.MonkeyPatch) -> None:
    configs = _capture(monkeypatch, [])
    main(["demo", "--quick", "--budget", "45s"])
    (config,) = configs
    assert config.budget_s == 45


def test_quick_budget_follows_the_step_the_diagnosis_measured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The H200's cnn diagnosis measured a 24 ms step: the budget is sized from it."""
    shutil.copyfile(H200 / "diagnosis.json", tmp_path / rundir.DIAGNOSIS)
    configs = _capture(monkeypatch, [], run_dir=tmp_path)
    main(["demo", "--quick"])
    (config,) = configs
    step_s = diagnosed_step_s(tmp_path)
    assert step_s is not None and 0.02 < step_s < 0.03
    assert config.budget_s == demo_plan.quick_budget_s(config.device, step_s=step_s)


def test_a_busy_machines_step_sizes_the_budget_up_to_the_full_demos(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On a 2-core host at load 6 the diagnosis read a cnn step of 1.2 s (~0.1 s quiet): the
    trials that follow run at that pace too, so the budget follows it, up to the full demo's.
    The recorded quiet costs left the baseline unmeasured there ("too small to measure even
    the baseline")."""
    record = json.loads((H200 / "diagnosis.json").read_text())
    record.update(median_step_s=1.23)
    (tmp_path / rundir.DIAGNOSIS).write_text(json.dumps(record))
    configs = _capture(monkeypatch, [], run_dir=tmp_path)
    main(["demo", "--quick"])
    (config,) = configs
    assert config.budget_s == parse_duration(demo_plan.DEFAULT_DEMO_BUDGET)
    assert config.budget_s > demo_plan.quick_budget_s(config.device)


def test_quick_never_asks_for_more_than_the_full_demo() -> None:
    full = parse_duration(demo_plan.DEFAULT_DEMO_BUDGET)
    assert demo_plan.quick_budget_s("cpu", step_s=3.6) == full
    assert demo_plan.quick_budget_s("cpu") < full
