"""The measurement plan is declared once (`MeasurePlan`); a study's config holds one."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from torchdoctor.core.errors import RecordError
from torchdoctor.tune import MeasurePlan, TuneConfig


def test_the_config_declares_no_measurement_setting_of_its_own() -> None:
    settings = {f.name for f in dataclasses.fields(MeasurePlan)}
    assert settings >= {"warmup_steps", "rounds", "min_rounds", "parity_steps"}
    assert set(TuneConfig.model_fields) & settings == set()
    assert TuneConfig(workload="mlp").plan == MeasurePlan()


def test_the_plan_round_trips_through_the_run_folder(tmp_path: Path) -> None:
    plan = MeasurePlan(rounds=8, min_rounds=4, min_chunk_s=0.0, confidence=0.9)
    config = TuneConfig(workload="mlp", plan=plan)
    config.write(tmp_path / "tune_config.json")
    data = json.loads((tmp_path / "tune_config.json").read_text())
    assert data["plan"] == dataclasses.asdict(plan)
    assert TuneConfig.read(tmp_path / "tune_config.json").plan == plan


def test_a_version_1_config_reads_its_settings_into_the_plan(tmp_path: Path) -> None:
    old = {
        "schema": TuneConfig.schema_id(),
        "version": 1,
        "workload": "mlp",
        "budget_s": 120.0,
        "rounds": 8,
        "min_rounds": 4,
        "min_chunk_s": 0.0,
        "parity_steps": 16,
    }
    path = tmp_path / "tune_config.json"
    path.write_text(json.dumps(old))
    config = TuneConfig.read(path)
    assert config.budget_s == 120.0
    assert config.plan == MeasurePlan(rounds=8, min_rounds=4, min_chunk_s=0.0, parity_steps=16)


@pytest.mark.parametrize(
    "bad", [{"rounds": 2}, {"warmup_steps": 0}, {"min_chunk_s": -1.0}, {"confidence": 1.0}]
)
def test_the_plans_bounds_are_checked_where_a_config_is_read(
    tmp_path: Path, bad: dict[str, float]
) -> None:
    data = {**TuneConfig(workload="mlp").to_json_dict()}
    data["plan"] = {**data["plan"], **bad}
    path = tmp_path / "tune_config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(RecordError, match=f"plan.{next(iter(bad))}"):
        TuneConfig.read(path)
