from __future__ import annotations

from diagnose_builders import evidence, phases

from torchdoctor.diagnose import Diagnosis, diagnose_evidence
from torchdoctor.diagnose.evidence import DataLoaderEvidence, TraceEvidence
from torchdoctor.diagnose.primary import select_primary
from torchdoctor.diagnose.rules import RULE_MODULES


def test_primary_is_largest_share_and_record_round_trips() -> None:
    ev = evidence(
        steps=phases(data_wait=0.5, optimizer=0.1),
        dataloader=DataLoaderEvidence(uses_dataloader=True, num_workers=0),
    )
    d = diagnose_evidence(ev)
    assert d.primary_bottleneck == "data_loading"
    assert d.findings[0].rule_id == "dataloader_wait"
    assert Diagnosis.from_json_dict(d.to_json_dict()) == d


def test_compute_bound_job_has_no_high_finding() -> None:
    d = diagnose_evidence(evidence(steps=phases(other=0.02, optimizer=0.05)))
    assert d.primary_bottleneck == "compute"
    assert not d.high_findings


def test_ties_go_to_the_cheaper_fix() -> None:
    assert select_primary({"compute": 0.4, "data_loading": 0.395}) == "data_loading"
    assert select_primary({"compute": 0.5, "data_loading": 0.3}) == "compute"


def test_idle_gpu_trace_is_not_compute_bound() -> None:
    tr = TraceEvidence(has_device=True, idle_pct=90.0, computation_pct=10.0)
    d = diagnose_evidence(evidence(source="trace", device="cuda", trace=tr))
    assert d.regime == "overhead" and d.primary_bottleneck != "compute"


def test_every_rule_has_a_doc_page() -> None:
    from pathlib import Path

    docs = Path(__file__).resolve().parents[3] / "docs" / "rules"
    for module in RULE_MODULES:
        assert (docs / f"{module.RULE_ID}.md").is_file(), module.RULE_ID


def test_prescribed_knobs_are_in_the_catalogue_and_domain() -> None:
    from torchdoctor.diagnose.evidence import (
        CopyEvidence,
        MemoryEvidence,
        ThreadEvidence,
        UsageEvidence,
    )
    from torchdoctor.knobs import get_knob

    tr = TraceEvidence(
        has_device=True,
        idle_pct=60.0,
        computation_pct=40.0,
        conv_time_frac=0.5,
        elementwise_time_frac=0.5,
        comm_share=0.3,
        comm_exposed_share=0.2,
    )
    ev = evidence(
        device="cuda",
        steps=phases(data_wait=0.2, h2d=0.1, optimizer=0.2, other=0.1),
        dataloader=DataLoaderEvidence(uses_dataloader=True, num_workers=2),
        threads=ThreadEvidence(torch_threads=2, usable_cores=8),
        copies=CopyEvidence(calls=4),
        usage=UsageEvidence(zero_grad_calls=3, zero_grad_keep_calls=3),
        memory=MemoryEvidence(peak_bytes=99, limit_bytes=100),
        trace=tr,
    )
    d = diagnose_evidence(ev)
    assert len(d.findings) >= 6
    for f in d.findings:
        for name, value in f.prescription.knobs.items():
            knob = get_knob(name)
            assert knob.domain.contains(value), (f.rule_id, name, value)
