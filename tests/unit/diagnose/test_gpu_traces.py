"""Diagnosing GPU traces from the field: the real ones in tests/data/traces and the
synthetic V100 job in both Kineto schemas (tests/gpu_traces.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.analyze import analyze_trace
from torchdoctor.analyze.records import TraceAnalysis
from torchdoctor.diagnose import Diagnosis, diagnose_evidence
from torchdoctor.diagnose.from_trace import evidence_from_trace

REAL = sorted((Path(__file__).resolve().parents[2] / "data" / "traces").glob("*.json.gz"))
#: "syncs take under 2% of the step": at most an info finding below this share.
SMALL_SYNC_SHARE = 0.02
#: "fp32 tensor-core-eligible work dominates device time": a majority of kernel time.
DOMINANT = 0.5


_cache: dict[Path, tuple[TraceAnalysis, Diagnosis]] = {}


def _diagnose(path: Path) -> tuple[TraceAnalysis, Diagnosis]:
    if path not in _cache:  # the real traces are read once for the module's tests
        ta = analyze_trace(path)
        _cache[path] = ta, diagnose_evidence(evidence_from_trace(ta))
    return _cache[path]


@pytest.fixture(params=[*REAL, "v100-old", "v100-new"], ids=lambda p: getattr(p, "name", p))
def any_trace(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if isinstance(request.param, Path):
        return request.param
    from gpu_traces import write_v100_trace

    schema = request.param.split("-")[1]
    return write_v100_trace(tmp_path / f"{schema}.json.gz", schema)


def test_small_sync_share_is_at_most_info(any_trace: Path) -> None:
    ta, d = _diagnose(any_trace)
    s = ta.syncs
    share = s.cost_us / s.step_us if s.cost_us is not None and s.step_us else None
    finding = d.finding("host_sync")
    if share is not None and share < SMALL_SYNC_SHARE:
        assert finding is None or finding.severity == "info", (share, finding)


def test_precision_finding_wherever_fp32_tensor_core_work_dominates(any_trace: Path) -> None:
    ta, d = _diagnose(any_trace)
    k = ta.kernels
    dominant = k is not None and k.fp32_cuda_core_math_us >= DOMINANT * k.kernel_us
    tensor_core_gpu = ta.cuda_capability is not None and ta.cuda_capability >= (7, 0)
    finding = d.finding("lower_precision_available")
    assert (finding is not None) == (dominant and tensor_core_gpu), (k, ta.cuda_capability)
    if k is not None and k.tensor_core_us > k.fp32_cuda_core_math_us:
        assert finding is None  # tensor cores already in use (bf16 H100, TF32 A100)


def test_no_unknown_regime_when_the_trace_carries_shapes(any_trace: Path) -> None:
    ta, d = _diagnose(any_trace)
    if any(r.dtype is not None for r in ta.ops):
        assert d.regime != "unknown", d.regime_evidence


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_every_real_trace_keeps_a_known_regime(path: Path) -> None:
    _, d = _diagnose(path)
    assert d.regime != "unknown", d.regime_evidence


def test_field_v100_resnet50_is_compute_bound_with_its_precision_finding() -> None:
    # A 2021 trace from the field (torch 1.8 schema: "Input Dims", "Input type", the split
    # cuDNN backward ops, no Concrete Inputs): fp32 convolutions on Volta CUDA cores.
    path = next(p for p in REAL if p.name == "kineto_v100_resnet50_nw4.json.gz")
    ta, d = _diagnose(path)
    assert d.regime == "compute", d.regime_evidence
    assert "unknown_bound_op_time_share" not in d.regime_evidence
    rows = {r.name: r for r in ta.ops}
    for name in (
        "aten::cudnn_convolution_backward_weight",
        "aten::cudnn_convolution_backward_input",
        "aten::cudnn_batch_norm",
        "aten::cudnn_batch_norm_backward",
    ):
        assert rows[name].bound is not None, rows[name]
    precision = d.finding("lower_precision_available")
    assert precision is not None
    assert precision.prescription.knobs == {"precision": "fp16"}  # Volta: no bf16


def test_v100_job_data_loading_first_then_precision(v100_trace: Path) -> None:
    _, d = _diagnose(v100_trace)
    assert d.primary_bottleneck == "data_loading", d.bottleneck_shares
    assert d.regime == "compute"
    ids = [f.rule_id for f in d.findings]
    assert ids.index("dataloader_wait") < ids.index("lower_precision_available")
    assert ids[0] == "dataloader_wait"
    assert "host_sync" not in ids
    # The spans name _SingleProcessDataLoaderIter: num_workers=0, so load in workers.
    data = d.finding("dataloader_wait")
    assert data is not None and data.prescription.knobs["num_workers"] >= 1
    precision = d.finding("lower_precision_available")
    assert precision is not None
    # Volta: fp16 with a GradScaler, never bf16 (no bf16 tensor cores before sm_80).
    assert precision.prescription.knobs == {"precision": "fp16"}
    assert "GradScaler" in precision.prescription.code_change
    assert precision.evidence["cuda_capability"] == "7.0"
    old = v100_trace.name.endswith(".gz")
    assert precision.evidence["cuda_capability_inferred"] is old
    assert any("inferred from kernel names" in n for n in d.notes) is old
