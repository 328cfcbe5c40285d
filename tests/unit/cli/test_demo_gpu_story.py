"""On a GPU the demo tells a GPU user's story: GPT-2 small, the GPU's knobs first, and it says
which workload and why; on a CPU it tells today's story unchanged."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import torchdoctor.cli.demo as demo_mod
import torchdoctor.tune.demo as demo_plan
from torchdoctor.cli.main import main
from torchdoctor.knobs import Recipe
from torchdoctor.tune import TuneConfig
from torchdoctor.workloads import get_workload, list_workloads

GPU_KNOBS = {"precision", "compile", "attention", "cuda_graphs", "optimizer_impl", "tf32"}


def _capture(monkeypatch: pytest.MonkeyPatch, *, gpu: bool) -> tuple[list[TuneConfig], list[str]]:
    configs: list[TuneConfig] = []
    diagnosed: list[str] = []

    def diagnose(
        workload: str, out: Path | None, *, device: str, params: dict[str, object] | None = None
    ) -> tuple[Path, list[str]]:
        diagnosed.append(workload)
        return Path("run"), []

    def run(*, config: TuneConfig, out: Path) -> SimpleNamespace:
        configs.append(config)
        return SimpleNamespace(run_dir="run")

    # A fake device: this machine answers that a GPU is there.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    monkeypatch.setattr(demo_mod, "diagnose_into_run_dir", diagnose)
    monkeypatch.setattr(demo_mod, "run_with_progress", run)
    monkeypatch.setattr(demo_mod, "finish_with_report", lambda result: None)
    monkeypatch.setattr(demo_mod, "display_path", lambda p: str(p))
    return configs, diagnosed


def test_on_a_gpu_the_demo_tunes_gpt2_small_with_the_gpu_knobs_first(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    configs, diagnosed = _capture(monkeypatch, gpu=True)
    main(["demo"])
    (config,) = configs
    assert config.workload == diagnosed[0] == "gpt2-small" and config.device == "cuda"
    assert config.knobs is not None and set(config.knobs[: len(GPU_KNOBS)]) == GPU_KNOBS
    assert config.knobs[0] == "precision"
    # Which workload and why: on stderr and in the study's notes (the report shows them).
    assert "GPT-2 small" in config.notes[0]
    assert "demo on a GPU: gpt2-small" in capsys.readouterr().err


def test_quick_on_a_gpu_keeps_the_gpu_story(monkeypatch: pytest.MonkeyPatch) -> None:
    configs, _ = _capture(monkeypatch, gpu=True)
    main(["demo", "--quick"])
    (config,) = configs
    assert config.workload == "gpt2-small"
    assert config.knobs == ["precision", "attention", "cuda_graphs"]
    assert len(config.notes) == 2 and "intervals are wider" in config.notes[1]


def test_on_a_cpu_the_story_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    configs, diagnosed = _capture(monkeypatch, gpu=False)
    main(["demo"])
    (config,) = configs
    assert config.workload == diagnosed[0] == "cnn" and config.device == "cpu"
    assert config.knobs == list(demo_plan.DEMO_KNOBS) and config.notes == []


def test_gpt2_small_is_the_gpt_at_gpt2_smalls_shape_with_handwritten_attention() -> None:
    wl = get_workload("gpt2-small")
    assert (wl.name, wl.block, wl.layers, wl.heads, wl.embd) == ("gpt", 1024, 12, 12, 768)  # type: ignore[attr-defined]
    assert wl.attention == "manual"  # type: ignore[attr-defined]
    # The fused-attention knob applies to it (it refuses a model that fuses already).
    Recipe.parse(["attention=sdpa"], workload=wl)
    assert "gpt2-small" not in [w.name for w in list_workloads()]
    assert get_workload("gpt2-small", batch_size=4).default_batch_size == 4
