"""Every real trace in tests/data/traces: no crash, and the peers' golden numbers reproduced.

Golden numbers are copied from tests/data/traces/README.md (TraceLens gpu_timeline CSVs and
HolisticTraceAnalysis 0.5.0 get_temporal_breakdown on the same files).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.analyze import STEP_CATEGORIES, TraceAnalysis, analyze_trace

# Tolerances from issue 4: TraceLens within 0.5 points, HTA's idle share within 2.5 points
# (the two peers differ by up to ~1.5 points between themselves).
TRACELENS_TOLERANCE_PP = 0.5
HTA_IDLE_TOLERANCE_PP = 2.5

ALL_TRACES = (
    "hta_a100_ws16_rank0.json.gz",
    "hta_alexnet_a100.json.gz",
    "hta_cpu_only.json.gz",
    "hta_mi250_minitoy.json.gz",
    "kineto_v100_resnet50_nw4.json.gz",
    "tracelens_h100_bert_small.json.gz",
    "tracelens_h100_qwen15_05b.json.gz",
)

# file -> (total ms, computation %, exposed memcpy %, exposed comm %, idle %)
TRACELENS_GOLDEN = {
    "tracelens_h100_bert_small.json.gz": (3.9078, 7.861, 0.057, 0.0, 92.082),
    "tracelens_h100_qwen15_05b.json.gz": (34.8924, 91.433, 0.007, 0.0, 8.560),
}
HTA_IDLE_GOLDEN = {
    "tracelens_h100_bert_small.json.gz": 93.50,
    "hta_a100_ws16_rank0.json.gz": 69.44,
    "hta_alexnet_a100.json.gz": 99.49,
    "hta_mi250_minitoy.json.gz": 98.53,
}

_cache: dict[str, TraceAnalysis] = {}


def _analysis(folder: Path, name: str) -> TraceAnalysis:
    if name not in _cache:
        _cache[name] = analyze_trace(folder / name)
    return _cache[name]


def test_the_fixture_list_covers_the_folder(shared_traces: Path) -> None:
    on_disk = sorted(p.name for p in shared_traces.glob("*.json*"))
    assert on_disk == sorted(ALL_TRACES)


@pytest.mark.parametrize("name", ALL_TRACES)
def test_every_trace_analyzes_and_round_trips(shared_traces: Path, name: str) -> None:
    result = _analysis(shared_traces, name)
    assert result.events > 0
    again = TraceAnalysis.from_json_dict(result.to_json_dict())
    assert again == result
    if result.step_breakdown is not None:
        assert list(result.step_breakdown) == list(STEP_CATEGORIES)
        assert sum(result.step_breakdown.values()) == pytest.approx(100.0, abs=1e-6)
    dt = result.device_timeline
    if dt is not None:
        assert dt.busy_pct + dt.idle_pct == pytest.approx(100.0)
        assert 0.0 <= dt.computation_pct <= dt.busy_pct + 1e-9


@pytest.mark.parametrize("name", sorted(TRACELENS_GOLDEN))
def test_device_timeline_matches_tracelens(shared_traces: Path, name: str) -> None:
    total_ms, comp, memcpy, comm, idle = TRACELENS_GOLDEN[name]
    dt = _analysis(shared_traces, name).device_timeline
    assert dt is not None
    assert dt.total_us / 1000 == pytest.approx(total_ms, rel=1e-3)
    assert dt.computation_pct == pytest.approx(comp, abs=TRACELENS_TOLERANCE_PP)
    assert dt.exposed_memcpy_pct == pytest.approx(memcpy, abs=TRACELENS_TOLERANCE_PP)
    assert dt.exposed_comm_pct == pytest.approx(comm, abs=TRACELENS_TOLERANCE_PP)
    assert dt.idle_pct == pytest.approx(idle, abs=TRACELENS_TOLERANCE_PP)


@pytest.mark.parametrize("name", sorted(HTA_IDLE_GOLDEN))
def test_idle_share_matches_hta(shared_traces: Path, name: str) -> None:
    dt = _analysis(shared_traces, name).device_timeline
    assert dt is not None
    assert dt.idle_pct == pytest.approx(HTA_IDLE_GOLDEN[name], abs=HTA_IDLE_TOLERANCE_PP)


def test_cpu_only_trace_has_no_device_timeline_but_a_host_breakdown(
    shared_traces: Path,
) -> None:
    result = _analysis(shared_traces, "hta_cpu_only.json.gz")
    assert result.device_timeline is None
    assert result.steps is not None and result.steps.basis == "host"
    assert result.step_breakdown is not None
    # The Gloo trace's step is mostly a collective: the host equivalent of Communication.
    assert result.step_breakdown["Communication"] > 50.0
    assert result.rank == 34 and result.world_size == 300


def test_trace_metadata_and_datasheet_ceilings(shared_traces: Path) -> None:
    a100 = _analysis(shared_traces, "hta_a100_ws16_rank0.json.gz")
    assert a100.device_name == "NVIDIA A100-SXM4-80GB"
    assert a100.rank == 0 and a100.world_size == 16
    assert a100.ceilings is not None and a100.ceilings.source == "datasheet"
    # NCCL kernels are present, so some communication is not hidden behind compute.
    assert a100.device_timeline is not None and a100.device_timeline.exposed_comm_pct > 1.0
    mi250 = _analysis(shared_traces, "hta_mi250_minitoy.json.gz")
    assert mi250.ceilings is None and "unknown" in mi250.ceilings_note


def test_copies_split_by_pinned_and_pageable(shared_traces: Path) -> None:
    copies = _analysis(shared_traces, "hta_a100_ws16_rank0.json.gz").syncs.copies
    kinds = {(c.direction, c.memory) for c in copies}
    assert ("HtoD", "pinned") in kinds and ("HtoD", "pageable") in kinds


def test_launch_stats_pair_every_kernel_with_its_launch(shared_traces: Path) -> None:
    launches = _analysis(shared_traces, "tracelens_h100_bert_small.json.gz").launches
    assert launches is not None
    assert launches.launches_matched == launches.kernels
    assert launches.launch_delay_us is not None and launches.launch_delay_us["p50"] > 0


def test_flops_from_shapes_on_a_gpu_trace(shared_traces: Path) -> None:
    ops = {o.name: o for o in _analysis(shared_traces, "tracelens_h100_qwen15_05b.json.gz").ops}
    mm = ops["aten::mm"]
    assert mm.flops is not None and mm.bytes is not None and mm.device_us > 0
    assert mm.bound in ("compute", "memory")


def test_folder_of_rank_traces(shared_traces: Path, tmp_path: Path) -> None:
    import shutil

    for name in ("hta_a100_ws16_rank0.json.gz", "hta_cpu_only.json.gz"):
        shutil.copy(shared_traces / name, tmp_path / name)
    result = analyze_trace(tmp_path)
    assert [r.rank for r in result.ranks] == [0, 34]
    assert result.rank == 0
