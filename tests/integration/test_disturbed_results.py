"""`run`, `diagnose` and their reports say when the machine was disturbed (a fake load
signal that reads a busy machine; the commands run in this process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from load_fakes import ScriptedLoadProbe
from torchdoctor.cli.main import main
from torchdoctor.core.env import Ceilings
from torchdoctor.measure import ceilings as ceilings_mod
from torchdoctor.measure import load


@pytest.fixture
def busy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load, "default_load_probe", lambda: ScriptedLoadProbe.of([], then=True))
    real = ceilings_mod.measure_ceilings

    def quick(device: str, **_k: Any) -> Ceilings:
        return real(device, sizes=(32, 64), copy_bytes=2**20, run_time=0.02, warmup_s=0.01)

    monkeypatch.setattr(ceilings_mod, "measure_ceilings", quick)


def test_run_result_carries_the_disturbance(
    busy_machine: None, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "mlp", "--param", "rows=512", "--steps", "3", "--warmup", "1"]
    assert main(["--json", *args]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "torchdoctor/run_result" and data["version"] == 4
    assert data["machine_load"]["disturbed"] is True
    assert main(args) == 0
    assert "machine disturbed during the measurement" in capsys.readouterr().out


@pytest.mark.slow
def test_diagnosis_and_its_reports_warn_of_the_disturbance(
    busy_machine: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = ["diagnose", "mlp", "--steps", "6", "--warmup", "2", "--profile-steps", "2"]
    assert main(["--json", *args, "--out", str(out)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["version"] == 3 and d["machine_load"]["disturbed"] is True
    assert d["notes"][0].startswith("warning: machine disturbed")
    run = json.loads((out / "run_result.json").read_text())
    assert run["machine_load"]["disturbed"] is True
    for report in ("report.md", "report.html"):
        text = (out / report).read_text()
        assert "Warning:" in text and "machine disturbed during the measurement" in text
    assert main([*args, "--out", str(tmp_path / "run2")]) == 0
    assert "warning: machine disturbed" in capsys.readouterr().out
