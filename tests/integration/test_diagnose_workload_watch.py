"""`torchdoctor diagnose WORKLOAD` end to end, and `torchdoctor.watch()` through the Python API."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import torchdoctor
from torchdoctor.cli.main import main
from torchdoctor.diagnose import BOTTLENECKS
from torchdoctor.diagnose.api import diagnose_profile

#: Seconds each sample of the watched loop's dataset sleeps: a data wait no busy machine can
#: shrink (sleep does not need a core), against a model of a few microseconds of math.
SAMPLE_SLEEP_S = 0.002


@pytest.mark.slow
def test_diagnose_builtin_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    args = ["--json", "diagnose", "mlp", "--steps", "6", "--warmup", "2", "--profile-steps", "2"]
    code = main([*args, "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    d = json.loads(captured.out)
    assert d["source"] == "workload" and d["target"] == "mlp"
    assert d["primary_bottleneck"] in BOTTLENECKS
    assert d["median_step_s"] is not None and d["median_step_s"] > 0
    assert set(d["phase_fractions"]) >= {"forward", "backward", "optimizer"}
    assert abs(sum(d["phase_fractions"].values()) - 1.0) < 1e-6
    assert d["rules_run"] and len(d["rules_run"]) >= 15
    written = json.loads((out / "diagnosis.json").read_text())
    assert written["primary_bottleneck"] == d["primary_bottleneck"]
    assert (out / "run_result.json").is_file() and (out / "analysis.json").is_file()
    # The run's report is written into its folder and its path printed (stderr under --json).
    html = (out / "report.html").read_text()
    assert "mlp" in html and "<svg" in html
    assert (out / "report.md").is_file()
    assert "report.html" in captured.err


def test_diagnose_unknown_workload_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["diagnose", "no_such_workload", "--out", str(tmp_path / "run")])
    assert code == 2
    err = capsys.readouterr().err
    assert "no_such_workload" in err and "Traceback" not in err


class _SleepyRows(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(SAMPLE_SLEEP_S)  # a slow source: network storage, a remote decoder
        return torch.full((4,), float(i % 5)), torch.tensor([float(i % 3)])


def test_watch_block_is_diagnosed() -> None:
    """A notebook-style loop inside `with torchdoctor.watch()`: every step counted, and the
    planted data wait named as the primary bottleneck."""
    steps = 8
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 4-wide model; see tests/zoo/README.md on shared machines
    try:
        torch.manual_seed(0)
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loader = DataLoader(_SleepyRows(), batch_size=4)
        with torchdoctor.watch(warmup=1) as w:
            for i, (x, y) in enumerate(loader):
                if i == steps:
                    break
                loss = nn.functional.mse_loss(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    finally:
        torch.set_num_threads(threads)
    profile = w.result()
    assert profile.step_count == steps and profile.step_detection == "optimizer_hook"
    assert profile.optimizer_steps == steps and profile.forward.calls == steps
    d = diagnose_profile(profile, warmup=1)
    assert d.step_count == steps
    assert d.primary_bottleneck == "data_loading", d.bottleneck_shares
    finding = d.finding("dataloader_wait")
    assert finding is not None and finding.severity == "high"
    # The hooks are gone once the block ends: a later step is not recorded.
    loss = nn.functional.mse_loss(model(torch.ones(1, 4)), torch.ones(1, 1))
    loss.backward()
    opt.step()
    assert w.result().step_count == steps
