"""What to fix first (ranking, primary bottleneck) and what a sync costs on a GPU."""

from __future__ import annotations

from diagnose_builders import evidence, phases

from torchdoctor.diagnose import diagnose_evidence, rank_findings
from torchdoctor.diagnose.evidence import SyncEvidence, TraceEvidence
from torchdoctor.diagnose.findings import Prescription, make_finding
from torchdoctor.diagnose.primary import select_primary
from torchdoctor.diagnose.rules import host_sync


def _finding(rule_id: str, bottleneck: str, share: float, speedup: float | None = None):
    return make_finding(
        rule_id=rule_id,
        title=rule_id,
        summary=rule_id,
        bottleneck=bottleneck,  # type: ignore[arg-type]
        share=share,
        local_speedup=speedup,
        evidence={},
        prescription=Prescription(code_change="x"),
        confidence=0.6,
    )


def test_a_high_data_wait_ranks_before_high_fp32_math() -> None:
    # Both high: the removed data wait bounds 1.49x, fp16 math on 56% of the step at the
    # datasheet's 8x bounds 1.96x. The wait is fixed first: one line of exact code, and the
    # faster math would only shorten the two thirds of the step the device is not waiting.
    data = _finding("dataloader_wait", "data_loading", 0.33)
    math = _finding("lower_precision_available", "compute", 0.56, speedup=8.0)
    assert math.amdahl_bound > data.amdahl_bound and math.severity == data.severity == "high"
    assert [f.rule_id for f in rank_findings([math, data])] == [
        "dataloader_wait",
        "lower_precision_available",
    ]
    assert select_primary({"compute": 0.7, "data_loading": 0.33}, [math, data]) == "data_loading"
    # A wait that is not high leaves the largest share primary; severity still ranks first.
    low_wait = _finding("dataloader_wait", "data_loading", 0.04)
    assert select_primary({"compute": 0.7, "data_loading": 0.04}, [math, low_wait]) == "compute"
    assert rank_findings([low_wait, math])[0] is math


def test_gpu_sync_cost_is_the_idle_after_not_the_blocked_time() -> None:
    # A GPU-bound job: the host is blocked 30% of the step draining the queue in its syncs,
    # but the device idles only 0.5% of the step after them.
    tr = TraceEvidence(
        has_device=True,
        idle_pct=8.0,
        computation_pct=91.0,
        sync_points_per_step=3,
        sync_blocked_share=0.30,
        sync_cost_share=0.005,
    )
    ev = evidence(
        device="cuda",
        steps=phases(other=0.05),
        syncs=SyncEvidence(per_step={"item": 3.0}, time_share=0.30),
        trace=tr,
    )
    assert host_sync.check(ev) is None
    d = diagnose_evidence(ev)
    assert "host_sync" not in {f.rule_id for f in d.findings}


def test_gpu_sync_that_starves_the_device_is_charged_its_idle() -> None:
    tr = TraceEvidence(
        has_device=True, idle_pct=40.0, sync_points_per_step=4, sync_cost_share=0.2,
        sync_blocked_share=0.25,
    )  # fmt: skip
    f = host_sync.check(evidence(source="trace", device="cuda", trace=tr))
    assert f is not None
    assert f.share == 0.2 and f.evidence["device_idle_after_syncs_share"] == 0.2
    assert f.amdahl_bound == 1.25
