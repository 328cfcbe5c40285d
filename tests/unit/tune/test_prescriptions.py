"""The diagnosis orders the ladder: knobs of the largest bound on gain first."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from torchdoctor.core import rundir
from torchdoctor.diagnose import Diagnosis
from torchdoctor.diagnose.findings import Prescription, make_finding
from torchdoctor.knobs import FSDP_PREFETCH
from torchdoctor.tune.prescriptions import (
    DIAGNOSIS_SUBDIR,
    _prescribed_into,
    diagnosed_bounds,
    diagnosed_values,
    prescribed_knobs,
)
from torchdoctor.tune.space import KnobSpec, catalogue_space, order_knobs

H200 = Path(__file__).parents[2] / "data" / "h200"


def _finding(rule: str, bound: float, knobs: dict[str, object]) -> SimpleNamespace:
    return SimpleNamespace(
        rule_id=rule, amdahl_bound=bound, severity="medium",
        prescription=SimpleNamespace(knobs=knobs),
    )  # fmt: skip


def test_prescribed_knobs_follow_the_bound_on_gain_without_repeats() -> None:
    diagnosis = SimpleNamespace(
        findings=[
            _finding("small", 1.1, {"set_to_none": True}),
            _finding("data", 2.5, {"num_workers": 2, "persistent_workers": True}),
            _finding("compute", 1.8, {"compile": "default", "num_workers": 2}),
        ]
    )
    assert prescribed_knobs(diagnosis) == [
        "num_workers", "persistent_workers", "compile", "set_to_none",
    ]  # fmt: skip


def test_prescribed_knobs_lead_then_the_static_prior() -> None:
    specs = [KnobSpec(n, (False, True), "exact", False) for n in ("set_to_none", "compile", "x")]
    ordered = [s.name for s in order_knobs(specs, prescribed=["set_to_none", "unknown"])]
    assert ordered == ["set_to_none", "compile", "x"]


def _exposed_all_gather(share: float) -> Any:
    return make_finding(
        rule_id="fsdp_exposed_all_gather",
        title="Exposed all-gather (FSDP)",
        summary="the ranks wait for FSDP's parameter all-gathers",
        bottleneck="communication",
        share=share,
        evidence={"prefetched": 0},
        prescription=Prescription(knobs={FSDP_PREFETCH.name: 1}, code_change="prefetch"),
        confidence=0.8,
    )


def test_a_cure_one_rank_prescribes_orders_the_jobs_ladder(tmp_path: Path) -> None:
    # The job's diagnosis is the one seen from the rank that waits most, whose own exposed
    # all-gathers went to the straggler's finding; the rank that is waited for still has the
    # FSDP finding. Its cure leads the ladder (its bound, 6.7x, above the data wait's 3.7x), with
    # its value.
    job = Diagnosis.read(H200 / "diagnosis.json")
    assert FSDP_PREFETCH.name not in prescribed_knobs(job)
    rank1 = job.model_copy(update={"rank": 1, "findings": [_exposed_all_gather(0.85)]})
    job.write(tmp_path / rundir.DIAGNOSIS)
    sub = tmp_path / DIAGNOSIS_SUBDIR
    sub.mkdir()
    job.write(sub / rundir.DIAGNOSIS)
    job.model_copy(update={"rank": 0}).write(sub / rundir.of_rank(rundir.DIAGNOSIS, 0))
    rank1.write(sub / rundir.of_rank(rundir.DIAGNOSIS, 1))

    bounds = diagnosed_bounds(tmp_path)
    assert bounds[FSDP_PREFETCH.name] == rank1.findings[0].amdahl_bound
    assert diagnosed_values(tmp_path)[FSDP_PREFETCH.name] == 1
    prescribed = _prescribed_into(tmp_path, job)
    assert FSDP_PREFETCH.name in prescribed
    ordered = order_knobs(catalogue_space("cuda"), prescribed=prescribed, bounds=bounds)
    assert ordered[0].name == FSDP_PREFETCH.name
    # A workload's run folder (no ranks) reads its one diagnosis as before.
    (tmp_path / "one").mkdir()
    job.write(tmp_path / "one" / rundir.DIAGNOSIS)
    assert FSDP_PREFETCH.name not in diagnosed_bounds(tmp_path / "one")
