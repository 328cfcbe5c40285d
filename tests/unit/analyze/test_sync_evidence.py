"""A scalar read counts as a sync only when the trace shows it waiting for the device, and
torchdoctor's own syncs are listed apart from the job's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from h200_mlp_trace import COPIES_PER_STEP, COUNTER_READS_PER_STEP, STEPS, write_h200_mlp_trace
from trace_events import op_event, write_trace

from torchdoctor.analyze import analyze_trace
from torchdoctor.core.tool_syncs import TOOL_SYNC_RANGE

H200_RECORD = Path(__file__).parents[2] / "data" / "h200" / "diag_mlp_analysis.json"


def test_the_model_trace_has_what_the_h200_run_recorded() -> None:
    # The fixture stands for the real run: its steps, counter reads and pageable copies.
    real = json.loads(H200_RECORD.read_text())
    assert real["steps"]["count"] == STEPS
    assert real["syncs"]["by_name"]["aten::_local_scalar_dense"] == STEPS * COUNTER_READS_PER_STEP
    pageable = [c for c in real["syncs"]["copies"] if c["direction"] == "HtoD"]
    assert pageable[0]["memory"] == "pageable"
    assert pageable[0]["count"] == STEPS * COPIES_PER_STEP
    # What it reported then: every counter read as a sync.
    assert real["syncs"]["per_step"] == COUNTER_READS_PER_STEP + COPIES_PER_STEP


def test_adamw_cpu_step_counter_reads_are_not_syncs(tmp_path: Path) -> None:
    s = analyze_trace(write_h200_mlp_trace(tmp_path / "t.json")).syncs
    # Only the job's pageable copies wait for the device inside the steps.
    assert s.per_step == pytest.approx(COPIES_PER_STEP)
    assert s.host_scalar_reads == STEPS * COUNTER_READS_PER_STEP
    # The loss read after the window is a device read: it still counts, once, with its item.
    assert s.by_name["aten::_local_scalar_dense"] == 1
    assert s.by_name["aten::item"] == 1
    assert s.by_name["cudaStreamSynchronize"] == STEPS * COPIES_PER_STEP + 1


def test_the_tools_own_syncs_are_listed_apart(tmp_path: Path) -> None:
    with_range = analyze_trace(write_h200_mlp_trace(tmp_path / "a.json")).syncs
    without = analyze_trace(write_h200_mlp_trace(tmp_path / "b.json", tool_ranges=False)).syncs
    assert with_range.tool_by_name == {"cudaDeviceSynchronize": 1}
    assert "cudaDeviceSynchronize" not in with_range.by_name
    assert without.by_name["cudaDeviceSynchronize"] == 1 and not without.tool_by_name
    assert with_range.total == without.total - 1


def test_a_clock_wait_inside_a_tool_range_in_a_step_is_not_the_jobs(tmp_path: Path) -> None:
    events = [
        op_event("ProfilerStep#0", 0.0, 1000.0, cat="user_annotation"),
        op_event("cudaMemcpyAsync", 10.0, 10.0, cat="cuda_runtime"),
        op_event(TOOL_SYNC_RANGE, 200.0, 50.0, cat="user_annotation"),
        op_event("cudaEventSynchronize", 210.0, 30.0, cat="cuda_runtime"),
        op_event("cudaStreamSynchronize", 400.0, 30.0, cat="cuda_runtime"),  # the job's
    ]
    s = analyze_trace(write_trace(tmp_path / "t.json", events, device="NVIDIA H200")).syncs
    assert s.per_step == 1
    assert s.by_name == {"cudaStreamSynchronize": 1}
    assert s.tool_by_name == {"cudaEventSynchronize": 1}


def test_a_cpu_only_trace_still_counts_scalar_reads(tmp_path: Path) -> None:
    # Without runtime events the trace cannot tell a device read from a host one.
    events = [
        op_event("ProfilerStep#0", 0.0, 1000.0, cat="user_annotation"),
        op_event("aten::item", 10.0, 30.0),
        op_event("aten::_local_scalar_dense", 12.0, 25.0),
    ]
    s = analyze_trace(write_trace(tmp_path / "t.json", events)).syncs
    assert s.per_step == 1 and s.host_scalar_reads == 0


def test_real_a100_host_scalar_reads_are_not_syncs(shared_traces: Path) -> None:
    # HTA's A100 DDP trace: 945 reads of 0-dim int/bool/long tensors, none with a copy or a
    # wait beneath; its real syncs are the runtime's synchronize calls.
    s = analyze_trace(shared_traces / "hta_a100_ws16_rank0.json.gz").syncs
    assert s.host_scalar_reads == 945
    assert "aten::_local_scalar_dense" not in s.by_name
    assert s.by_name.get("cudaStreamSynchronize", 0) > 0


def test_real_h100_device_scalar_read_still_counts(shared_traces: Path) -> None:
    s = analyze_trace(shared_traces / "tracelens_h100_bert_small.json.gz").syncs
    assert s.by_name["aten::_local_scalar_dense"] == 1
    assert s.host_scalar_reads == 0
