"""`torchdoctor serve` end to end, in process, on the CPU: bad input first (fast), then a
real run of a tiny model (study tier)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from cli_output import one_error_line
from torchdoctor.cli.main import main

TINY = """
import torch
def make_model():
    return torch.nn.Linear(8, 4), torch.randn(1, 8)
"""
RAISES = """
def make_model():
    raise RuntimeError("checkpoint missing")
"""
EVAL_FAILS = """
import torch
class Net(torch.nn.Module):
    def forward(self, x):
        if not self.training:
            raise ValueError("only trains")
        return x
def make_model():
    return Net(), torch.randn(1, 8)
"""


def _model(tmp_path: Path, text: str) -> str:
    path = tmp_path / "model.py"
    path.write_text(text)
    return f"{path}:make_model"


@pytest.mark.parametrize(
    ("source", "sla", "message"),
    [
        (TINY, "p99<20ms", "SLA 'p99<20ms' does not parse"),
        (TINY, "p90<=20ms", "names p90"),
        (RAISES, None, "model factory '.*' failed: RuntimeError: checkpoint missing"),
        (EVAL_FAILS, None, "fails in eval mode: ValueError: only trains"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, sla: str | None, message: str
) -> None:
    out = tmp_path / "run"
    args = ["serve", _model(tmp_path, source), "--out", str(out), "--device", "cpu"]
    code = main([*args, *(["--sla", sla] if sla else [])])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert re.search(message, one_error_line(captured.err))
    assert not out.exists()  # nothing half-written


@pytest.mark.study
@pytest.mark.untimed  # asserts the folder, the document and the verdict, no timing
def test_serve_writes_a_run_folder_and_one_json_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A bound nothing meets (1 us: below any call) is INVALID with the closest point, exit 0.
    # On the p50, whose load points need only LoadGen's 7 requests, so the low rates the
    # search steps down to stay short on any machine.
    out = tmp_path / "run"
    code = main(
        ["--json", "serve", _model(tmp_path, TINY), "--sla", "p50<=1us", "--budget", "1",
         "--max-batch", "4", "--no-sweep-threads", "--instances", "--device", "cpu",
         "--out", str(out)]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0
    data = json.loads(captured.out)
    assert data["schema"] == "torchdoctor/serve_result"
    assert data["latency"]["summary"]["n"] >= 459  # LoadGen's count for p99
    assert data["latency"]["first_call_s"] > 0
    assert [p["batch_size"] for p in data["curves"][0]["points"]][:3] == [1, 2, 4]
    # --instances: the model served by 1, 2, ... spawned processes, cores // n threads each.
    (instances,) = [c for c in data["curves"] if c["axis"] == "instances"]
    assert [p["instances"] for p in instances["points"]][:2] == [1, 2][: len(instances["points"])]
    assert all(p["instances"] * p["threads"] <= os.cpu_count() for p in instances["points"])
    assert all(p["samples_per_s"] > 0 for p in instances["points"])
    assert data["calibration"]["requests"] >= 200
    search = data["sla_search"]
    assert search["status"] == "INVALID" and search["closest"] is not None
    assert "latency at batch size 1" in captured.err  # progress on stderr
    assert (out / "serve.json").is_file() and (out / "report.html").is_file()
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
