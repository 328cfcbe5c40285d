"""`diagnose -- python train.py`: the trace of a GPU job is placed against GPU ceilings
(this machine's measured GPU ceilings, else the traced GPU's datasheet), never the CPU's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import torchdoctor.procs as procs
from torchdoctor.collect import ScriptProfile
from torchdoctor.core.env import Ceilings
from torchdoctor.core.errors import EnvError
from torchdoctor.core.steps import StepTiming
from torchdoctor.diagnose import examine, hostinfo

CPU = Ceilings(
    device="cpu",
    device_name="test cpu",
    peak_flops={"float32": 1e11, "bfloat16": 4e11},
    mem_bandwidth_bytes_per_s=2e10,
    source="measured",
    fingerprint_key="k",
)
LOCAL_V100 = Ceilings(
    device="cuda",
    device_name="Tesla V100-SXM2-16GB",
    peak_flops={"float32": 14e12, "float16": 90e12},
    mem_bandwidth_bytes_per_s=8.1e11,
    source="measured",
    fingerprint_key="k",
)


def _fake_machine(monkeypatch: pytest.MonkeyPatch, trace: Path, gpu: Ceilings | None) -> list[str]:
    """A GPU job whose profiled window is `trace`; this machine measures CPU ceilings and,
    when `gpu` is given, GPU ones (else it has no usable GPU ceilings)."""
    asked: list[str] = []

    def local_ceilings(device: str = "cpu") -> tuple[Ceilings | None, str | None]:
        asked.append(device)
        if device == "cpu":
            return CPU, None
        if gpu is None:
            return None, f"ceilings unavailable: {EnvError('no CUDA device')}"
        return gpu, None

    def run_script(argv: list[str], **_: Any) -> ScriptProfile:
        steps = [StepTiming(index=i, total_s=0.1, phases={"forward": 0.06}) for i in range(8)]
        return ScriptProfile(argv=argv, device="cuda:0", steps=steps, trace_path=str(trace))

    monkeypatch.setattr(hostinfo, "local_ceilings", local_ceilings)
    monkeypatch.setattr(procs, "run_script", run_script)
    monkeypatch.setattr(examine, "local_environment", lambda: None)
    return asked


def _script(folder: Path) -> str:
    """A script file the stubbed run stands in for (the command checks it exists)."""
    path = folder / "train.py"
    path.write_text("pass\n")
    return str(path)


def test_gpu_job_uses_this_machines_gpu_ceilings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gpu_traces import write_v100_trace

    trace = write_v100_trace(tmp_path / "t.json.gz", "new")
    asked = _fake_machine(monkeypatch, trace, LOCAL_V100)
    exam = examine.examine_script([_script(tmp_path)], out=tmp_path / "run")
    d = exam.diagnosis
    assert d is not None and asked == ["cuda"]
    assert d.ceilings is not None and d.ceilings.device == "cuda"
    assert d.ceilings.source.startswith("measured on this machine")
    assert d.ceilings.peak_flops["float16"] == 90e12


def test_gpu_job_without_gpu_ceilings_uses_the_datasheet(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gpu_traces import write_v100_trace

    trace = write_v100_trace(tmp_path / "t.json.gz", "new")
    _fake_machine(monkeypatch, trace, None)
    d = examine.examine_script([_script(tmp_path)], out=tmp_path / "run").diagnosis
    assert d is not None and d.ceilings is not None
    assert (d.ceilings.device, d.ceilings.source) == ("cuda", "datasheet")
    assert d.ceilings.peak_flops["float16"] == 125e12  # V100 SXM2 datasheet


def test_cpu_ceilings_given_for_a_gpu_trace_are_not_used(tmp_path: Path) -> None:
    from gpu_traces import write_v100_trace
    from torchdoctor.analyze import analyze_trace

    ta = analyze_trace(write_v100_trace(tmp_path / "t.json", "new"), ceilings=CPU)
    assert ta.ceilings is not None and ta.ceilings.source == "datasheet"
    assert "not used" in ta.ceilings_note
