"""`Recording`: the launcher's probes in this process leave a run folder that `report` renders
and `diff` reads, with the diagnosis `diagnose` would give (what the trainer callbacks use)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from torchdoctor.core import rundir
from torchdoctor.diagnose import Diagnosis, diff_inputs
from torchdoctor.integrations import Recording

#: Per batch: far above the tiny model's step, so the wait is the bottleneck on any host.
READ_S = 0.02


class Slow(torch.utils.data.Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(READ_S / 4)
        return torch.randn(8), torch.randn(1)


def _train(steps: int) -> None:
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Slow(), batch_size=4)
    for i, (x, y) in enumerate(loader):
        if i == steps:
            break
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def test_a_recorded_loop_leaves_a_diagnosed_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchdoctor.diagnose import examine

    # The ceilings only place ops on the roofline (no trace here): skip measuring them.
    monkeypatch.setattr(examine, "_device_ceilings", lambda device, cache: None)
    rec = Recording("loop", out=tmp_path / "run", warmup=2, profile_steps=0, report=False)
    rec.start()
    _train(steps=8)
    run_dir = rec.finish()
    assert run_dir == tmp_path / "run"
    assert rundir.read_manifest(run_dir).status == "complete"
    diag = Diagnosis.read(run_dir / rundir.DIAGNOSIS)
    assert diag.step_count == 8 and diag.primary_bottleneck == "data_loading"
    assert rec.diagnosis == diag
    from torchdoctor.report.api import render_text
    from torchdoctor.report.load import read_input

    assert "Primary bottleneck: data loading" in render_text(read_input(run_dir), "md")
    assert diff_inputs(run_dir, run_dir).significant == []


def test_a_loop_that_never_steps_is_a_failed_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recording("loop", out=tmp_path / "run", profile_steps=0, report=False)
    rec.start()
    run_dir = rec.finish()
    assert run_dir is not None
    manifest = rundir.read_manifest(run_dir)
    assert manifest.status == "failed" and "without a training step" in (manifest.error or "")
    assert rec.finish() is None  # finishing twice does nothing
