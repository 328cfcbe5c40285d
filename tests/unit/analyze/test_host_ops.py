"""The share of host operator time in tiny calls, on CPU-only traces (no kernels)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from trace_events import op_event, write_trace

from torchdoctor.analyze import analyze_trace
from torchdoctor.analyze.hostops import TINY_OP_US


def test_tiny_op_share_on_a_cpu_only_trace(tmp_path: Path) -> None:
    """aten::linear 0-100 holds aten::t 10-15 and aten::addmm 20-28; aten::relu 200-204.
    Self times: linear 100-5-8 = 87, t 5, addmm 8, relu 4; total 104. Calls under 10 us: t,
    addmm, relu (3 of 4), holding 5+8+4 = 17 us of self time: 17/104."""
    events = [
        op_event("aten::linear", 0, 100),
        op_event("aten::t", 10, 5),
        op_event("aten::addmm", 20, 8),
        op_event("aten::relu", 200, 4),
    ]
    result = analyze_trace(write_trace(tmp_path / "t.json", events))
    assert result.launches is None  # no kernels: the device-side statistics do not apply
    h = result.host_ops
    assert h is not None and TINY_OP_US == h.tiny_op_us == 10.0
    assert h.calls == 4 and h.op_time_us == pytest.approx(104.0)
    assert h.tiny_calls_pct == pytest.approx(75.0)
    assert h.tiny_op_time_pct == pytest.approx(100.0 * 17 / 104)


def test_no_ops_no_host_stats(tmp_path: Path) -> None:
    events = [op_event("ProfilerStep#1", 0, 100, cat="user_annotation")]
    assert analyze_trace(write_trace(tmp_path / "t.json", events)).host_ops is None


def test_real_cpu_only_trace_reports_host_ops(shared_traces: Path) -> None:
    path = shared_traces / "hta_cpu_only.json.gz"
    ops = [
        e
        for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") == "cpu_op"
    ]
    tiny = [e for e in ops if e["dur"] < TINY_OP_US]
    result = analyze_trace(path)
    assert result.launches is None and result.host_ops is not None
    assert result.host_ops.calls == len(ops) > 0
    assert result.host_ops.tiny_calls_pct == pytest.approx(100.0 * len(tiny) / len(ops))
