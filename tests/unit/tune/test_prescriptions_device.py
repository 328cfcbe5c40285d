"""The diagnosis that orders the tuner's trials runs on the trials' device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import torchdoctor.diagnose.examine as examine
import torchdoctor.diagnose.workload_profile as workload_profile
from torchdoctor.tune.prescriptions import diagnose_before_tuning


class StopHere(Exception):
    pass


def test_tune_on_cuda_diagnoses_on_cuda(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def ceilings(device: str = "cpu") -> tuple[None, str]:
        seen["ceilings"] = device
        return None, "not measured here"

    def profile(name: str, settings: dict[str, str], **kwargs: Any) -> Any:
        seen["run"] = kwargs.get("device", "cpu")
        raise StopHere  # the device is all this test is about

    monkeypatch.setattr(examine, "local_ceilings", ceilings)
    monkeypatch.setattr(workload_profile, "profile_workload", profile)
    with pytest.raises(StopHere):
        diagnose_before_tuning("mlp", tmp_path, device="cuda:1")
    assert seen == {"ceilings": "cuda", "run": "cuda:1"}


def test_the_pre_tune_diagnosis_runs_the_baseline_set_on_the_command_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from torchdoctor.cli.main import main

    seen: dict[str, Any] = {}

    def profile(name: str, settings: dict[str, str], **kwargs: Any) -> Any:
        seen["settings"] = settings
        raise StopHere

    monkeypatch.setattr(examine, "local_ceilings", lambda device="cpu": (None, "not measured"))
    monkeypatch.setattr(workload_profile, "profile_workload", profile)
    with pytest.raises(StopHere):
        main(["tune", "mlp", "--device", "cpu", "--set", "threads=1", "--out", str(tmp_path / "r")])
    assert seen["settings"] == {"threads": "1"}
