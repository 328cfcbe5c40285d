from __future__ import annotations

import json
from typing import Any

import pytest

from torchdoctor import __version__
from torchdoctor.cli.main import main
from torchdoctor.core.env import Ceilings
from torchdoctor.measure import ceilings as ceilings_mod


@pytest.fixture(autouse=True)
def quick_ceilings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measure tiny sizes so the test takes a second, through the real code path."""
    real = ceilings_mod.measure_ceilings

    def quick(device: str, **kwargs: Any) -> Ceilings:
        return real(device, sizes=(32, 64), copy_bytes=2**20, run_time=0.02, warmup_s=0.01)

    monkeypatch.setattr(ceilings_mod, "measure_ceilings", quick)


def test_env_json_has_fingerprint_and_ceilings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "env", "--refresh"]) == 0
    data = json.loads(capsys.readouterr().out)
    fp, ceil = data["fingerprint"], data["ceilings"]
    assert fp["schema"] == "torchdoctor/env_fingerprint"
    for field in (
        "cpu_model",
        "cores_physical",
        "cores_logical",
        "cpu_flags",
        "torch_version",
        "torch_cuda",
        "torch_mkldnn",
        "intra_op_threads",
        "cuda_devices",
    ):
        assert field in fp
    assert ceil["schema"] == "torchdoctor/ceilings"
    assert ceil["peak_flops"]["float32"] > 0 and ceil["mem_bandwidth_bytes_per_s"] > 0
    assert ceil["source"] == "measured" and ceil["device_name"]
    assert Ceilings.from_json_dict(ceil).fingerprint_key


def test_env_rich_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert "matmul float32" in out and "GFLOP/s" in out and "memory bandwidth" in out
    assert f"torchdoctor {__version__}" in out  # which torchdoctor measured, for a bug report


def test_env_unknown_device_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--device", "tpu"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "unknown device 'tpu'" in err[0]


def test_env_labels_disturbed_ceilings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from load_fakes import ScriptedLoadProbe
    from torchdoctor.measure import load

    monkeypatch.setattr(load, "default_load_probe", lambda: ScriptedLoadProbe.of([], then=True))
    assert main(["--json", "env", "--refresh"]) == 0
    ceil = json.loads(capsys.readouterr().out)["ceilings"]
    assert ceil["version"] == 2 and ceil["machine_load"]["disturbed"] is True
    assert main(["env", "--refresh"]) == 0
    out = capsys.readouterr().out
    assert "DISTURBED" in out and "not cached" in out and "other processes used" in out


def test_env_json_after_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    # `torchdoctor env --json`: where people type it, the global option still applies.
    assert main(["env", "--refresh", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fingerprint"]["schema"] == "torchdoctor/env_fingerprint"
    assert data["ceilings"]["schema"] == "torchdoctor/ceilings"
    assert data["torchdoctor"] == __version__
