"""Datasheet ceilings are `core.env.Ceilings` records, and ops meet the roof of their dtype.

Hand computations use the A100 80GB datasheet: FP32 19.5 TF, TF32 156 TF, BF16 312 TF,
2.039 TB/s, so the ridge points are 9.56 (fp32), 76.5 (tf32) and 153 (bf16) FLOP/byte.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trace_events import op_event, write_trace

from torchdoctor.analyze import TraceAnalysis, analyze_trace
from torchdoctor.analyze.devices import datasheet_ceilings
from torchdoctor.analyze.records import OpRow
from torchdoctor.core.env import Ceilings

A100 = "NVIDIA A100-SXM4-80GB"
CALL_US = 50.0  # above ops.OVERHEAD_CALL_US, so the roofline decides the class


def _mm(n: int, dtype: str, ts: float = 0.0) -> dict[str, Any]:
    return op_event("aten::mm", ts, CALL_US, [[n, n], [n, n]], [dtype, dtype])


def _row(tmp_path: Path, events: list[dict[str, Any]], **kw: Any) -> tuple[OpRow, TraceAnalysis]:
    device = kw.pop("device", A100)
    result = analyze_trace(write_trace(tmp_path / "t.json", events, device), **kw)
    assert len(result.ops) == 1
    return result.ops[0], result


@pytest.mark.parametrize(
    ("name", "model", "bandwidth"),
    [
        ("NVIDIA A100-SXM4-80GB", "A100 80GB", 2.039e12),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB", 1.555e12),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe", 1.935e12),  # not the SXM's 2,039 GB/s
        ("NVIDIA H100 PCIe", "H100 PCIe", 2.0e12),
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 3.35e12),
        ("AMD Instinct MI250X", "MI250X", 3.2e12),
        # the newer parts, each by its own datasheet; NVL parts are not the SXM ones
        ("NVIDIA H100 NVL", "H100 NVL", 3.9e12),
        ("NVIDIA H200", "H200 SXM", 4.8e12),
        ("NVIDIA H200 NVL", "H200 NVL", 4.8e12),
        ("NVIDIA GH200 480GB", "GH200 96GB HBM3", 4.0e12),
        ("NVIDIA GH200 144G HBM3e", "GH200 144GB HBM3e", 4.9e12),
        ("NVIDIA B200", "B200", 7.7e12),
        ("NVIDIA L4", "L4", 0.3e12),
        ("NVIDIA L40S", "L40S", 0.864e12),
    ],
)
def test_datasheet_ceilings_are_ceilings_records(name: str, model: str, bandwidth: float) -> None:
    c = datasheet_ceilings(name)
    assert isinstance(c, Ceilings)
    assert c.source == "datasheet" and c.fingerprint_key is None and c.measured_at is None
    assert c.device == "cuda" and c.device_name == name
    assert c.method["model"] == model
    assert c.method["reference"].startswith(("NVIDIA", "AMD"))  # the source cited
    assert c.mem_bandwidth_bytes_per_s == bandwidth
    assert Ceilings.from_json_dict(c.to_json_dict()) == c


def test_datasheet_peaks_are_dense_and_nvl_is_not_sxm() -> None:
    nvl, sxm = datasheet_ceilings("NVIDIA H100 NVL"), datasheet_ceilings("NVIDIA H100 80GB HBM3")
    assert nvl is not None and sxm is not None
    # H100 NVL: BF16 1,671 TFLOP/s with sparsity, so 835.5 dense; FP32 60 (SXM: 67)
    assert nvl.peak_flops["bfloat16"] == 835.5e12 and nvl.peak_flops["float32"] == 60e12
    assert sxm.peak_flops["bfloat16"] > nvl.peak_flops["bfloat16"]
    l4 = datasheet_ceilings("NVIDIA L4")
    assert l4 is not None and l4.peak_flops["bfloat16"] == 121e12  # 242 with sparsity
    # whole words: an L40 is no L4, a GH200 no H200
    assert datasheet_ceilings("NVIDIA L40") is None
    gh200 = datasheet_ceilings("NVIDIA GH200 480GB")
    assert gh200 is not None and gh200.method["model"].startswith("GH200")


def test_unknown_devices_have_no_datasheet() -> None:
    assert datasheet_ceilings("AMD Radeon Graphics") is None
    assert datasheet_ceilings(None) is None and datasheet_ceilings("") is None


def test_fp32_and_bf16_meet_different_roofs(tmp_path: Path) -> None:
    # 64^3 mm: 2*64^3 = 524288 FLOPs. fp32 bytes 3*4096*4 = 49152 -> 10.67 FLOP/B, above the
    # fp32 ridge 9.56: compute. bf16 bytes 24576 -> 21.3 FLOP/B, below the bf16 ridge 153:
    # memory. (Against the highest peak alone, both would read "memory".)
    fp32, result = _row(tmp_path, [_mm(64, "float")])
    assert fp32.flops == 524288 and fp32.bytes == 49152
    assert (fp32.dtype, fp32.peak_dtype, fp32.bound) == ("float32", "float32", "compute")
    assert result.ceilings is not None and result.ceilings.source == "datasheet"
    assert result.ceilings.device_name == A100 and "A100 80GB" in result.ceilings_note
    assert "placed against" not in result.ceilings_note
    bf16, _ = _row(tmp_path, [_mm(64, "c10::BFloat16")])
    assert bf16.bytes == 24576
    assert (bf16.dtype, bf16.peak_dtype, bf16.bound) == ("bfloat16", "bfloat16", "memory")


def test_mixed_dtypes_sum_the_time_at_each_roof(tmp_path: Path) -> None:
    # fp32 128^3: 4194304 FLOPs / 19.5e12 = 215.1 ns, 196608 B; bf16 64^3: 524288 / 312e12
    # = 1.7 ns, 24576 B. Compute 216.8 ns >= memory 221184 B / 2.039e12 = 108.5 ns: compute.
    # One intensity against the bf16 roof (21.3 < 153) would have said memory.
    row, _ = _row(tmp_path, [_mm(128, "float"), _mm(64, "c10::BFloat16", ts=100.0)])
    assert row.flops == 4194304 + 524288 and row.bytes == 196608 + 24576
    assert (row.dtype, row.peak_dtype, row.bound) == ("mixed", "mixed", "compute")


def test_fp32_convolution_meets_the_tf32_roof(tmp_path: Path) -> None:
    # x [1,8,32,32], w [8,8,3,3], stride 1, padding 1 -> out [1,8,32,32]:
    # 2*1*8*1024*8*9 = 1179648 FLOPs; (8192 + 576 + 8192)*4 = 67840 B -> 17.4 FLOP/B:
    # below the tf32 ridge 76.5 (memory), above the fp32 one 9.56.
    conv = op_event(
        "aten::conv2d",
        0.0,
        CALL_US,
        [[1, 8, 32, 32], [8, 8, 3, 3], []],
        ["float", "float", ""],
        **{"Concrete Inputs": ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]},
    )
    row, _ = _row(tmp_path, [conv])
    assert row.flops == 1179648 and row.bytes == 67840
    assert (row.dtype, row.peak_dtype, row.bound) == ("float32", "tf32", "memory")


def test_integer_op_falls_back_to_fp32_and_says_so(tmp_path: Path) -> None:
    # int64 mm: no floating-point dtype -> the fp32 peak. 524288 FLOPs / 98304 B = 5.3 < 9.56.
    row, result = _row(tmp_path, [_mm(64, "long int")])
    assert row.bytes == 3 * 4096 * 8
    assert (row.dtype, row.peak_dtype, row.bound) == (None, "float32", "memory")
    note = result.ceilings_note
    assert "1 op(s) with FLOPs but no recorded floating-point dtype" in note
    assert "float32 peak (PyTorch's default dtype)" in note


def test_dtype_without_a_peak_falls_back_and_says_which(tmp_path: Path) -> None:
    measured = Ceilings(
        device="cpu",
        device_name="test cpu",
        peak_flops={"float32": 1e12, "bfloat16": 4e12},
        mem_bandwidth_bytes_per_s=1e11,
        source="measured",
        fingerprint_key="k",
    )
    # fp64 64^3: 524288 FLOPs / 98304 B = 5.3 FLOP/B, below the fp32 ridge 10: memory.
    row, result = _row(tmp_path, [_mm(64, "double")], ceilings=measured)
    assert (row.dtype, row.peak_dtype, row.bound) == ("float64", "float32", "memory")
    assert "a dtype the ceilings give no peak for (float64)" in result.ceilings_note


def test_without_an_fp32_peak_the_highest_is_used(tmp_path: Path) -> None:
    only_bf16 = Ceilings(
        device="cuda",
        device_name="x",
        peak_flops={"bfloat16": 1e12, "float16": 5e11},
        mem_bandwidth_bytes_per_s=1e11,
        source="datasheet",
    )
    row, result = _row(tmp_path, [_mm(64, "long int")], ceilings=only_bf16)
    assert row.peak_dtype == "bfloat16"
    assert "no float32 peak" in result.ceilings_note


def test_version_1_records_still_read(tmp_path: Path) -> None:
    _, result = _row(tmp_path, [_mm(64, "float")])
    data = result.to_json_dict()
    assert data["version"] == TraceAnalysis.schema_version
    data["version"] = 1
    for op in data["ops"]:
        del op["dtype"], op["peak_dtype"]
    old = TraceAnalysis.from_json_dict(data)
    assert old.ops[0].dtype is None and old.ops[0].flops == 524288
