"""Bad input: one clear TuneError, nothing corrupted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchdoctor.core.errors import TuneError
from torchdoctor.tune import TuneConfig, tune
from tune_sim import NOOP_KNOB, sim_config


def test_unknown_workload(tmp_path: Path) -> None:
    with pytest.raises(TuneError, match="'no-such-model'"):
        tune(config=TuneConfig(workload="no-such-model"), out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_storage_that_cannot_be_opened_leaves_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/missing-dir/x/study.db"
    config = sim_config([NOOP_KNOB]).model_copy(update={"storage": url})
    with pytest.raises(TuneError, match="cannot open the study storage"):
        tune(config=config, out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_budget_too_small_for_the_baseline(tmp_path: Path) -> None:
    # Steps of 20 ms: the baseline's quality yardstick alone (its reference runs) sleeps
    # seconds, far past the half-second budget.
    config = sim_config([NOOP_KNOB], base_step_s=0.02, sleep=True).model_copy(
        update={"budget_s": 0.5}
    )
    with pytest.raises(TuneError, match="too small to measure even the baseline"):
        tune(config=config, out=tmp_path / "run")
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    assert manifest["status"] == "failed"


def test_resume_with_another_workload_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    tune(config=sim_config([NOOP_KNOB]), out=run)
    before = {p.name: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    with pytest.raises(TuneError, match="tunes workload 'sim', not 'cnn'"):
        tune("cnn", resume=run)
    after = {p.name: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    assert after == before


def test_resume_from_a_folder_that_is_not_a_tune(tmp_path: Path) -> None:
    with pytest.raises(TuneError, match="cannot resume"):
        tune(resume=tmp_path)
