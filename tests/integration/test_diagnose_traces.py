"""`torchdoctor diagnose TRACE` on the real GPU/CPU traces in tests/data/traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchdoctor.cli.main import main

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


def _diagnose(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    code = main(["--json", "diagnose", "--out", str(tmp_path / "run"), str(TRACES / name)])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert (tmp_path / "run" / "diagnosis.json").is_file()
    assert (tmp_path / "run" / "analysis.json").is_file()
    return data


@pytest.mark.parametrize(
    "name",
    ["tracelens_h100_bert_small.json.gz", "hta_alexnet_a100.json.gz", "hta_mi250_minitoy.json.gz"],
)
def test_mostly_idle_device_is_not_compute_bound(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _diagnose(name, tmp_path, capsys)
    assert d["regime"] == "overhead"
    assert d["primary_bottleneck"] == "framework_overhead"
    assert d["regime_evidence"]["device_idle_pct"] > 90


def test_busy_device_bound_by_elementwise_memory_traffic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Qwen1.5-0.5B on an H100, eager: the device is busy (91% computation), and over half of
    # that time is unfused elementwise work (mul, copy_, add, silu, neg: ~0.2 FLOP/byte,
    # far below the H100's bf16 ridge of ~300) next to the bf16 matmuls (~500-660 FLOP/byte).
    d = _diagnose("tracelens_h100_qwen15_05b.json.gz", tmp_path, capsys)
    assert d["regime_evidence"]["device_computation_pct"] > 85
    evidence = d["regime_evidence"]
    assert evidence["memory_bound_op_time_share"] > evidence["compute_bound_op_time_share"]
    assert d["primary_bottleneck"] == "memory_bandwidth"
    assert "memory_bound_elementwise" in {f["rule_id"] for f in d["findings"]}
    assert not [f for f in d["findings"] if f["severity"] == "high"]


def test_ddp_rank_reports_exposed_communication(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _diagnose("hta_a100_ws16_rank0.json.gz", tmp_path, capsys)
    comm = next(f for f in d["findings"] if f["rule_id"] == "ddp_communication")
    assert 0.1 <= comm["evidence"]["exposed_comm_share"] <= comm["evidence"]["comm_share"]
    assert d["primary_bottleneck"] == "framework_overhead"  # 69% idle, 15% computation


def test_cpu_only_gloo_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _diagnose("hta_cpu_only.json.gz", tmp_path, capsys)
    assert d["device"] == "cpu"
    assert d["primary_bottleneck"] == "communication"


def test_missing_trace_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "no_such_trace.json.gz"]) == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize("schema", ["old", "new"])
def test_v100_job_from_2021_and_today(
    schema: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # fp32 ResNet on a V100 with a 0-worker DataLoader taking a third of each step and two
    # .item() syncs under 1% of it: data loading first, then fp16 autocast; no sync finding.
    from gpu_traces import write_v100_trace

    trace = write_v100_trace(tmp_path / f"{schema}.json.gz", schema)
    code = main(["--json", "diagnose", "--out", str(tmp_path / "run"), str(trace)])
    assert code == 0
    d = json.loads(capsys.readouterr().out)
    assert d["primary_bottleneck"] == "data_loading"
    assert d["regime"] == "compute"
    ids = [f["rule_id"] for f in d["findings"]]
    assert ids[:2] == ["dataloader_wait", "lower_precision_available"]
    assert "host_sync" not in ids
