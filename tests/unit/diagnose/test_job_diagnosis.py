"""A distributed job diagnosed as one: the other ranks' wait for a straggler is the
straggler's, not communication's (recorded 2-rank gloo traces, tests/data/traces)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.analyze import analyze_ranks
from torchdoctor.analyze.ranks import STRAGGLER_MIN_WAIT_SHARE
from torchdoctor.diagnose import diagnose_evidence, examine_trace
from torchdoctor.diagnose.evidence import Evidence, StepEvidence, StragglerEvidence, TraceEvidence
from torchdoctor.diagnose.findings import amdahl_bound
from torchdoctor.diagnose.from_trace import evidence_from_trace
from torchdoctor.diagnose.ranks import JobDiagnosis, attribute_wait, job_diagnosis
from torchdoctor.diagnose.rules import rank_straggler

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"


def test_alone_rank_0_blames_communication_as_one_job_rank_1s_data(tmp_path: Path) -> None:
    folder = TRACES / "ddp_gloo_straggler_data"
    _, per_rank = analyze_ranks(folder)
    alone = diagnose_evidence(evidence_from_trace(per_rank[0]))
    assert alone.primary_bottleneck == "communication"  # what the issue saw
    exam = examine_trace(folder, out=tmp_path / "run")
    job = exam.job
    assert job is not None and exam.diagnosis is job.job
    assert job.world_size == 2 and job.job.rank is None
    assert job.job.primary_bottleneck == "data_loading"
    finding = job.job.findings[0]
    assert finding.rule_id == rank_straggler.RULE_ID
    assert finding.evidence["straggler_rank"] == 1 and finding.evidence["cause"] == "data"
    assert finding.amdahl_bound == pytest.approx(amdahl_bound(finding.share))
    assert job.job.primary_share == pytest.approx(finding.share)
    rank0 = next(d for d in job.ranks if d.rank == 0)
    comm = rank0.finding("ddp_communication")
    assert comm is None or comm.share < alone.finding("ddp_communication").share - 0.4  # type: ignore[union-attr]
    # the run folder: the job's diagnosis, each rank's, the comparison, the whole
    run = tmp_path / "run"
    assert JobDiagnosis.read(run / "job_diagnosis.json") == job
    assert {p.name for p in run.glob("diagnosis*.json")} == {
        "diagnosis.json",
        "diagnosis.rank0.json",
        "diagnosis.rank1.json",
    }
    assert (run / "cross_rank.json").is_file()


def test_a_compute_straggler_makes_the_job_compute_bound(tmp_path: Path) -> None:
    exam = examine_trace(TRACES / "ddp_gloo_straggler_compute", out=tmp_path / "run")
    assert exam.job is not None
    assert exam.job.job.primary_bottleneck == "compute"
    f = exam.job.job.finding(rank_straggler.RULE_ID)
    assert f is not None and f.evidence["straggler_rank"] == 1
    assert "rank 1 computes slower" in f.summary


def _straggler(share: float, cause: str = "data") -> StragglerEvidence:
    return StragglerEvidence(
        rank=1,
        cause=cause,
        phrase=f"rank 1 ({cause})",
        wait_share=share,
        imposed_wait_ms=40.0,
        last_fraction=1.0,
        excess_ms=40.0,
        world_size=2,
    )


def test_rule_fires_from_its_cut_with_the_bound_of_the_wait() -> None:
    assert rank_straggler.MIN_WAIT_SHARE == STRAGGLER_MIN_WAIT_SHARE  # one cut, two stages
    below = rank_straggler.MIN_WAIT_SHARE * 0.9
    assert rank_straggler.check(Evidence(source="script", straggler=_straggler(below))) is None
    f = rank_straggler.check(Evidence(source="script", straggler=_straggler(0.6, "compute")))
    assert f is not None and f.bottleneck == "compute" and f.severity == "high"
    assert f.amdahl_bound == pytest.approx(1 / (1 - 0.6))
    assert rank_straggler.check(Evidence(source="script")) is None


def test_attributing_the_wait_takes_it_out_of_backward_and_communication() -> None:
    ev = Evidence(
        source="script",
        steps=StepEvidence(
            count=8, measured=5, phase_fractions={"data_wait": 0.05, "backward": 0.9}
        ),
        trace=TraceEvidence(
            has_device=False,
            comm_share=0.85,
            comm_exposed_share=0.8,
            step_breakdown={"Communication": 0.8},
        ),
    )
    moved = attribute_wait(ev, _straggler(0.75))
    assert moved.phase("backward") == pytest.approx(0.15)
    assert moved.trace is not None
    assert moved.trace.comm_exposed_share == pytest.approx(0.05)
    assert moved.trace.step_breakdown["Communication"] == pytest.approx(0.05)
    d = diagnose_evidence(moved)
    assert d.primary_bottleneck == "data_loading"
    assert d.finding("ddp_communication") is None  # 5% left: under the rule's cut
    before = diagnose_evidence(ev)
    assert before.primary_bottleneck != "data_loading"


def test_ranks_that_could_not_be_compared_are_still_one_job() -> None:
    ranks = [diagnose_evidence(Evidence(source="script", rank=r, world_size=2)) for r in (1, 0)]
    job = JobDiagnosis.from_json_dict(
        job_diagnosis(ranks, None, target="train.py", notes=["ranks not compared"]).to_json_dict()
    )
    assert job.cross_rank is None and job.world_size == 2
    assert job.job.rank is None and job.job.notes[:2] == [
        "the job seen from rank 0",
        "ranks not compared",
    ]
