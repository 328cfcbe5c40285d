"""Commands that run a workload default to the GPU when there is one, and say so."""

from __future__ import annotations

import re

import pytest

from torchdoctor.cli.main import main
from torchdoctor.cli.options import default_device


def test_default_device_is_cuda_when_a_gpu_is_available() -> None:
    assert default_device(None, cuda_available=lambda: True) == "cuda"
    assert default_device(None, cuda_available=lambda: False) == "cpu"
    assert default_device("cuda:1", cuda_available=lambda: False) == "cuda:1"
    assert default_device("cpu", cuda_available=lambda: True) == "cpu"


@pytest.mark.parametrize("command", ["run", "profile", "diagnose", "tune", "demo", "env"])
def test_help_says_the_default_device(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    # rich wraps the help inside a box: join its lines back into one text.
    text = " ".join(
        re.sub("[\u2502\u256d\u256e\u2570\u256f\u2500]", " ", capsys.readouterr().out).split()
    )
    assert "default: cuda when a GPU is available, else cpu" in text


def test_env_shows_the_gpus_ceilings_when_there_is_a_gpu(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    import torchdoctor.measure as measure

    asked: list[str] = []

    class Asked(Exception):
        pass

    def ceilings(*, refresh: bool, device: str, progress: object) -> object:
        asked.append(device)
        raise Asked  # the device asked for is all this test is about

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(measure, "get_ceilings", ceilings)
    with pytest.raises(Asked):
        main(["env"])
    assert asked == ["cuda"]


def test_demo_on_a_gpu_tries_the_gpus_knobs(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    import torchdoctor.cli.demo as demo

    configs: list[object] = []

    class Asked(Exception):
        pass

    def run_with_progress(*, config: object, out: object) -> object:
        configs.append(config)
        raise Asked

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(demo, "diagnose_into_run_dir", lambda *a, **k: ("run", ["precision"]))
    monkeypatch.setattr(demo, "run_with_progress", run_with_progress)
    with pytest.raises(Asked):
        main(["demo"])
    (config,) = configs
    knobs = config.knobs  # type: ignore[attr-defined]
    assert config.device == "cuda" and knobs[0] == "precision"  # type: ignore[attr-defined]
    assert {"compile", "attention", "tf32", "cuda_graphs"} <= set(knobs)
    assert "threads" not in knobs
