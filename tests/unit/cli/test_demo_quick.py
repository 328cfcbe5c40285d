"""`torchdoctor demo --quick`: the same story on a smaller budget, which it says it is."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import torchdoctor.cli.demo as demo_mod
from torchdoctor.cli.main import main
from torchdoctor.knobs import COMPILE
from torchdoctor.tune import TuneConfig


def _capture(monkeypatch: pytest.MonkeyPatch, prescribed: list[str]) -> list[TuneConfig]:
    configs: list[TuneConfig] = []

    def diagnose(workload: str, out: Path | None, **_: Any) -> tuple[Path, list[str]]:
        return Path("run"), list(prescribed)

    def run(*, config: TuneConfig, out: Path) -> SimpleNamespace:
        configs.append(config)
        return SimpleNamespace(run_dir="run")

    monkeypatch.setattr(demo_mod, "diagnose_into_run_dir", diagnose)
    monkeypatch.setattr(demo_mod, "run_with_progress", run)
    monkeypatch.setattr(demo_mod, "finish_with_report", lambda result: None)
    monkeypatch.setattr(demo_mod, "display_path", lambda p: str(p))
    return configs


def test_quick_tries_three_knobs_without_compile_on_shorter_ab(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    configs = _capture(monkeypatch, ["num_workers", COMPILE.name])
    main(["demo", "--quick"])
    (config,) = configs
    assert config.knobs is not None and len(config.knobs) == demo_mod.QUICK_KNOBS
    assert config.knobs[0] == "num_workers" and COMPILE.name not in config.knobs
    assert config.prescribed == ["num_workers"]
    assert config.budget_s == 90 and not config.search_batch
    assert config.plan.rounds < TuneConfig(workload="cnn").plan.rounds
    # Honest about it: the note names the cost, on stderr and in the study's notes.
    assert len(config.notes) == 1 and "intervals are wider" in config.notes[0]
    assert "demo --quick" in capsys.readouterr().err


def test_the_full_demo_keeps_its_budget_and_every_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    configs = _capture(monkeypatch, [COMPILE.name])
    main(["demo"])
    (config,) = configs
    assert config.budget_s == 8 * 60 and config.notes == [] and config.search_batch
    assert config.knobs is not None and config.knobs[0] == COMPILE.name
    assert set(demo_mod.DEMO_KNOBS) <= set(config.knobs)
