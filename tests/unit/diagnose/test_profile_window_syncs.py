"""The diagnosis's profiled window syncs the device once, at its end, not once per step."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.analyze import analyze_trace
from torchdoctor.diagnose.workload_profile import PROFILE_WARMUP_STEPS, _profile_window
from torchdoctor.engine import prepare
from torchdoctor.knobs import Recipe
from torchdoctor.workloads.mlp import MlpWorkload

WINDOW_STEPS = 3


def test_profiled_window_syncs_once_and_keeps_its_step_markers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = MlpWorkload(features=8, hidden=16, layers=1, classes=2, rows=64, batch_size=8)
    session = prepare(workload, Recipe.parse([], workload=workload), device="cpu")
    # The session's own device sync (a no-op on the CPU, torch.cuda.synchronize on a GPU)
    # and its reads of the losses to the host, counted where the session makes them.
    syncs: list[str] = []
    real_sync = session._sync
    monkeypatch.setattr(session, "_sync", lambda: (syncs.append("sync"), real_sync())[1])
    real_run = session.run_steps

    def run_steps(n: int, **kw: object) -> object:
        out = real_run(n, **kw)  # type: ignore[arg-type]
        syncs.append("losses to host")  # run_steps reads a chunk's losses once, at its end
        return out

    monkeypatch.setattr(session, "run_steps", run_steps)
    trace = _profile_window(session, WINDOW_STEPS, tmp_path / "w.json.gz")
    warm_up = ["sync", "losses to host"] if PROFILE_WARMUP_STEPS else []
    assert syncs == [*warm_up, "sync", "losses to host"]
    ta = analyze_trace(trace)
    assert ta.steps is not None and ta.steps.count == WINDOW_STEPS
