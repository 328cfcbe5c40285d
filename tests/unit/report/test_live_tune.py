"""The live terminal of `tune` and `demo`: the diagnosis table first, then the ladder filling in
as trials are decided; plain lines where no terminal watches, nothing with --json. Driven by a
fake tuner's event stream: no tuning runs."""

from __future__ import annotations

import importlib
import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from report_samples import diagnosis_record, trials
from rich.console import Console
from rich.live import Live

import torchdoctor.cli.tune as tune_cli
from torchdoctor.core import rundir
from torchdoctor.report.terminal.live import TuneWatch
from torchdoctor.tune import Trial, TuneConfig

# By its full name: `torchdoctor.tune` on the package is the Python API's function.
tune_stage = importlib.import_module("torchdoctor.tune")

PLANNED = ["num_workers", "compile", "channels_last", "precision"]
CONFIG = TuneConfig(workload="mlp", knobs=PLANNED)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _events() -> list[Trial]:
    # The baseline, two kept changes, a rejected one and a crashed one, in order decided.
    return list(trials())


def test_the_diagnosis_table_comes_before_the_first_trial_and_rows_as_trials_end() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    clock = FakeClock()
    watch = TuneWatch(budget_s=90.0, clock=clock, wall=lambda: 0.0)
    watch.diagnosis = diagnosis_record()
    seen: list[str] = []
    with Live(watch, console=console, auto_refresh=False) as live:
        watch.start(PLANNED)
        live.refresh()
        seen.append(out.getvalue())
        for i, trial in enumerate(_events()):
            assert isinstance(trial.change, dict)
            watch.begin(trial.change)
            clock.now += 12.0
            watch.look(SimpleNamespace(speedup=1.25, ci_low=0.9, ci_high=1.7), 6)
            live.refresh()
            # The current trial and its A/B so far, before it is decided.
            assert "A/B so far 1.25x [0.90, 1.70] after 6 rounds" in out.getvalue()[-2000:]
            watch.decided(trial, elapsed_s=12.0 * (i + 1))
            live.refresh()
            seen.append(out.getvalue())
    first = seen[0]
    assert "Diagnosis" in first and "primary bottleneck" in first
    assert "ladder, in order" in first and "num_workers, compile" in first
    assert "Ladder so far" not in first  # no trial has ended yet
    # Each decided trial's row is on the screen once it ends, not before.
    names = ["baseline", "num_workers=2", "compile=default", "channels_last=true", "precision"]
    for i, name in enumerate(names):
        assert name in seen[i + 1]
    assert "kept" in seen[2] and "rejected" not in seen[3] and "rejected" in seen[4]
    assert "crash" in seen[-1]
    # The diagnosis table stays above the ladder.
    final = seen[-1]
    assert final.rfind("Diagnosis") < final.rfind("Ladder so far")
    assert "budget left" in final and "ends by" in final


def _fake_tune(run_dir: Path) -> Any:
    def tune(*, on_start: Any, on_trial: Any, **kwargs: Any) -> str:
        tuner = SimpleNamespace(
            settings=SimpleNamespace(budget_s=90.0),
            planned_order=PLANNED,
            log_dir=run_dir / "logs",
            budget=SimpleNamespace(elapsed_s=lambda: 30.0),
            on_begin=None,
            on_look=None,
        )
        on_start(tuner, 5)
        # The current trial is reported as it starts, and its A/B at each look.
        assert tuner.on_begin is not None and tuner.on_look is not None
        for trial in _events():
            on_trial(trial, tuner)
        return "result"

    return tune


@pytest.fixture
def run_folder(tmp_path: Path) -> Path:
    diagnosis_record().write(tmp_path / rundir.DIAGNOSIS)
    return tmp_path


def test_without_a_terminal_each_event_is_one_plain_line(
    run_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    err = io.StringIO()
    monkeypatch.setattr(tune_stage, "tune", _fake_tune(run_folder))
    monkeypatch.setattr(tune_cli, "err_console", Console(file=err, width=200))
    monkeypatch.setattr(tune_cli, "progress_enabled", lambda: False)
    monkeypatch.setattr(tune_cli, "settings_json", lambda: False)
    assert tune_cli.run_with_progress(CONFIG, run_folder) == "result"
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("diagnosis: primary bottleneck")
    assert any(line.startswith("ladder order: num_workers, compile") for line in lines)
    trial_lines = [line for line in lines if line.startswith("trial ")]
    assert len(trial_lines) == len(_events())
    assert "num_workers=2: kept" in trial_lines[1] and "budget left 60 s" in trial_lines[1]
    assert "\x1b[" not in err.getvalue()  # no terminal codes in a log


def test_with_json_nothing_is_printed(run_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    calls: list[dict[str, Any]] = []

    def tune(**kwargs: Any) -> str:
        calls.append(kwargs)
        return "result"

    monkeypatch.setattr(tune_stage, "tune", tune)
    monkeypatch.setattr(tune_cli, "err_console", Console(file=err))
    monkeypatch.setattr(tune_cli, "settings_json", lambda: True)
    assert tune_cli.run_with_progress(CONFIG, run_folder) == "result"
    assert err.getvalue() == "" and "on_trial" not in calls[0]
