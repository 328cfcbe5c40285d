"""`torchdoctor run` and `torchdoctor workloads` end to end, in process, on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_output import one_error_line
from torchdoctor.cli.main import main


def test_workloads_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "workloads"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [w["name"] for w in data["workloads"]] == ["cnn", "gpt", "mlp", "recsys"]


def test_workloads_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workloads"]) == 0
    out = capsys.readouterr().out
    assert "recsys" in out and "nanoGPT" in out


def test_run_json_has_throughput_and_phases(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["--json", "run", "gpt", "--param", "layers=1", "--param", "characters=2048",
         "--set", "batch_size=4", "--steps", "3", "--warmup", "1"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == "torchdoctor/run_result"
    assert data["samples_per_s"] > 0
    assert data["tokens_per_s"] == pytest.approx(data["samples_per_s"] * 64)
    assert data["recipe"] == {"batch_size": 4}
    # Warm-up runs at least --warmup steps, more until step times settle; the phases are timed
    # on up to 10 synchronized steps after the 3 throughput steps.
    assert len(data["steps"]) == 3 and len(data["phase_steps"]) == 3
    assert data["warmup_steps"] >= 1
    assert len(data["losses"]) == data["warmup_steps"] + 3 + 3
    assert abs(sum(data["phase_fractions"].values()) - 1) < 0.02


def test_run_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "mlp", "--param", "rows=512", "--steps", "3", "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    assert "samples/s" in out and "data_wait" in out and "compile" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "resnet"], "error: unknown workload 'resnet'"),
        (["run", "mlp", "--set", "speed=11"], "error: unknown knob 'speed'"),
        (["run", "mlp", "--set", "precision=fp8"], "error: invalid value 'fp8' for knob"),
        (["run", "mlp", "--set", "pin_memory=true"], "error: knob 'pin_memory=true' does not"),
        (["run", "mlp", "--set", "cuda_graphs=true"], "error: knob 'cuda_graphs=true' does not"),
        (["run", "/no/such/file.py:make"], "error: workload file '/no/such/file.py' does not"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    assert one_error_line(capsys.readouterr().err).startswith(message)


def test_user_factory_that_raises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.py"
    path.write_text("def make():\n    raise ValueError('bad config')\n")
    assert main(["run", f"{path}:make"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "raised ValueError: bad config" in line


_POISONED_WORKLOAD = """
from torchdoctor.workloads import get_workload


def make():
    workload = get_workload("mlp", rows=256, batch_size=32)
    original = workload.loss
    calls = {"n": 0}

    def loss(output, target):
        calls["n"] += 1
        value = original(output, target)
        return value * float("nan") if calls["n"] > 2 else value

    workload.loss = loss
    return workload
"""


@pytest.mark.parametrize("as_json", [True, False])
def test_nan_loss_shows_the_result_thenone_error_line(
    as_json: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nan_job.py"
    path.write_text(_POISONED_WORKLOAD)
    args = ["run", f"{path}:make", "--steps", "2", "--warmup", "1"]
    assert main(["--json", *args] if as_json else args) == 2
    captured = capsys.readouterr()
    line = one_error_line(captured.err)
    # The third loss is the first NaN: a warm-up or a measured step, as warm-up settles.
    assert line.startswith("error: the loss became nan at ") and "(step index 2)" in line
    assert "Traceback" not in captured.err
    if as_json:
        data = json.loads(captured.out)
        assert data["losses"][:2] != [None, None] and data["losses"][2] is None
        assert data["nonfinite_loss_step"] == 2 and data["nonfinite_loss_value"] == "nan"
    else:
        assert "loss diverged" in captured.out and "non-finite" in captured.out
