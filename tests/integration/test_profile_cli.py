"""`torchdoctor profile` end to end, in-process: run folder contents, --json, bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from torchdoctor.cli.main import main

SMALL = ["--param", "rows=64", "--param", "hidden=16", "--param", "layers=1", "--no-ceilings"]


def test_profile_writes_a_complete_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["--json", "profile", "mlp", *SMALL, "--set", "batch_size=8"]
    code = main([*argv, "--wait", "1", "--warmup", "1", "--active", "2", "--out", str(out)])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert Path(data["run_dir"]) == out
    with gzip.open(out / "trace.json.gz", "rt") as fh:
        events = json.load(fh)["traceEvents"]
    steps = sorted(e["name"] for e in events if str(e.get("name")).startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
    profile = json.loads((out / "profile_summary.json").read_text())
    assert profile["schema"] == "torchdoctor/profile_capture"
    assert profile["active"] == 2 and profile["recipe"] == {"batch_size": 8}
    # Linear(64,16) and Linear(16,10) on a batch of 8, forward + backward (see unit tests).
    modules = {m["module"]: m["flops"] for m in profile["flops_by_module"]}
    assert modules["Sequential.0"] == 2 * (2 * 8 * 64 * 16)
    assert modules["Sequential.2"] == 3 * (2 * 8 * 16 * 10)
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis == data["analysis"]
    assert analysis["steps"]["count"] == 2 and analysis["steps"]["basis"] == "host"
    assert analysis["device_timeline"] is None  # a CPU run
    assert any(op["name"] == "aten::addmm" and op["flops"] for op in analysis["ops"])
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["kind"] == "profile" and manifest["status"] == "complete"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["profile", "no_such_workload"], "unknown workload 'no_such_workload'"),
        (["profile", "mlp", "--set", "no_such_knob=1"], "no_such_knob"),
        (["profile", "mlp", "--set", "batch_size"], "batch_size"),
        (["profile", "mlp", "--active", "0"], "--active"),
    ],
)
def test_bad_input_exits_2_and_leaves_no_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    out = tmp_path / "run"
    assert main([*argv, "--no-ceilings", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert "Traceback" not in captured.err
    assert not out.exists()
