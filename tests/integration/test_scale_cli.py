"""`torchdoctor scale`: bad input answered in one line with exit 2 before anything starts, the
commands for several nodes, and one real 2-rank gloo study (studies tier)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from torchdoctor.cli.main import main
from torchdoctor.scale import ScalingStudy, launch


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_unavailable_backend_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("NCCL may be available on a machine with a GPU")
    assert main(["scale", "mlp", "--nproc", "1,2", "--backend", "nccl"]) == 2
    assert "backend 'nccl' is not available" in _error_line(capsys)


def test_bad_options_are_refused_up_front(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scale", "mlp", "--nproc", "1,x"]) == 2
    assert "--nproc" in _error_line(capsys)
    assert main(["scale", "mlp", "--nproc", "1,3", "--mode", "strong", "--batch", "256"]) == 2
    assert "does not divide" in _error_line(capsys)
    assert main(["scale", "mlp", "--nnodes", "2"]) == 2
    assert "--rdzv-endpoint" in _error_line(capsys)
    assert main(["scale", "mlp", "--nnodes", "2", "--rdzv-endpoint", "nocolon"]) == 2
    assert "HOST:PORT" in _error_line(capsys)
    assert main(["scale", "mlp", "--job-timeout", "0"]) == 2
    assert "--job-timeout" in _error_line(capsys)
    assert main(["scale", "mlp", "--bench-sizes", "1k"]) == 2
    assert "--bench-sizes" in _error_line(capsys)


def test_several_nodes_print_each_nodes_command(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["scale", "--json", "mlp", "--nproc", "2", "--nnodes", "2", "--rdzv-endpoint", "h0:29500",
         "--bench-sizes", "1024,4096,16384", "--job-timeout", "300"]
    )  # fmt: skip
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["nnodes"] == 2
    assert [c.endswith(f"--node-rank {k}") for k, c in enumerate(data["commands"])] == [True] * 2
    assert "--rdzv-endpoint h0:29500" in data["commands"][1]
    assert "--bench-sizes 1024,4096,16384 --job-timeout 300" in data["commands"][1]


def test_unreachable_rendezvous_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "RDZV_REACH_TIMEOUT_S", 0.3)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = main(
        ["scale", "mlp", "--nproc", "1", "--nnodes", "2", "--node-rank", "1",
         "--rdzv-endpoint", f"127.0.0.1:{port}", "--threads", "1"]
    )  # fmt: skip
    assert code == 2
    assert "cannot be reached" in _error_line(capsys)


@pytest.mark.study
@pytest.mark.untimed  # asserts what the study records, not its figures
def test_two_rank_gloo_study(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "scale"
    code = main(
        ["scale", "--json", "mlp", "--nproc", "1,2", "--steps", "12", "--quick", "--threads", "1",
         "--project-to", "4", "--out", str(run)]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)  # one document
    study = ScalingStudy.from_json_dict(data)
    assert [w.world_size for w in study.worlds] == [1, 2]
    two = study.worlds[1]
    assert two.projected is not None and two.projected_over_measured is not None
    # the waterfall's parts add up to the gap of the mean step to the ideal
    assert study.model is not None and study.model.gradient_bytes > 0
    fits = study.benches[0].fits
    assert set(fits) == {"all_reduce", "all_gather", "reduce_scatter", "reduce_broadcast"}
    assert all(f.beta_s_per_byte > 0 for f in fits.values())
    probe = study.benches[0].colocation  # the workload's whole step, alone and both at once
    assert probe is not None and probe.slowdown > 0
    assert probe.work == "mlp training step (data, forward, backward, optimizer)"
    assert study.model.colocation_slowdown == probe.slowdown
    # the probe's steps, run in the ranks before the job, are not taken for the job's: each
    # rank recorded exactly the job's 12 steps (the probe's would dilute its communication)
    for rank in (0, 1):
        profile = json.loads((run / "n2" / f"script_profile.rank{rank}.json").read_text())
        assert len(profile["steps"]) == 12
        assert profile["optimizer_steps"] == 12  # the probe's optimizer ran unhooked
    assert {p.world_size for p in study.projections} == {2, 4}
    assert "N=2: collective microbenchmark, then training" in captured.err
    assert ScalingStudy.read(run / "scaling.json") == study
    assert "Gap to linear scaling" in (run / "report.md").read_text()
    assert json.loads((run / "run.json").read_text())["status"] == "complete"
