"""`torchdoctor diagnose -- python tests/zoo/<script>.py` names each planted bottleneck."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from torchdoctor.cli.main import main

ZOO = Path(__file__).resolve().parents[1] / "zoo"

# (script, its arguments, planted primary_bottleneck) as tests/zoo/README.md lists them.
CASES = [
    ("data_loading_argparse.py", [], "data_loading"),
    ("host_sync_config.py", [], "host_sync"),
    ("framework_overhead_manual_sgd.py", [], "framework_overhead"),
    ("optimizer_trainer.py", [], "optimizer"),
    ("other_host_prebatched.py", [], "other_host"),
    ("compute_workers.py", [], "compute"),
    ("control_well_tuned.py", [], "compute"),
]


def _diagnose(tmp_path: Path, capsys: pytest.CaptureFixture[str], *command: str) -> dict:
    out = tmp_path / "run"
    code = main(
        [
            "--json",
            "diagnose",
            "--warmup",
            "3",
            "--profile-steps",
            "3",
            "--out",
            str(out),
            "--",
            sys.executable,
            *command,
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert (out / "diagnosis.json").is_file() and (out / "profile.json").is_file()
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
@pytest.mark.parametrize(("script", "args", "planted"), CASES)
def test_zoo_primary_bottleneck(
    script: str,
    args: list[str],
    planted: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    d = _diagnose(tmp_path, capsys, str(ZOO / script), *args)
    assert d["primary_bottleneck"] == planted, d["bottleneck_shares"]
    if script == "control_well_tuned.py":
        assert not [f["rule_id"] for f in d["findings"] if f["severity"] == "high"]


@pytest.mark.slow
def test_manual_sgd_step_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _diagnose(tmp_path, capsys, str(ZOO / "framework_overhead_manual_sgd.py"), "17")
    assert d["step_count"] == 17
