"""A real 2-rank gloo scaling study of the zoo's FSDP2 script (studies tier): the units and
the asynchronous unshards recorded from the job itself, FSDP2's own work and the optimizer at
both sizes timed in the N = 2 ranks, the projection's overlap on the CPU,
and DDP, FSDP and FSDP with CPU offload set side by side in step time in the record and the
report."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.report.adapters.scale import scaling_blocks
from torchdoctor.scale import StudyPlan, build_study, run_worlds
from torchdoctor.scale._fsdp_probe import read_fsdp_probe
from torchdoctor.scale._fsdp_units import read_fsdp_job
from torchdoctor.scale.strategy_steps import OFFLOAD_ON_CPU

ZOO = Path(__file__).resolve().parent.parent / "zoo" / "fsdp2_train.py"


@pytest.mark.study
@pytest.mark.untimed  # asserts what the study records, not its figures
def test_an_fsdp2_study_compares_the_strategies_in_step_time(tmp_path: Path) -> None:
    script = [str(ZOO), "--steps", "8", "--depth", "2", "--width", "64", "--batch-size", "32"]
    plan = StudyPlan(nprocs=[1, 2], script=script, steps=8, quick=True, project_to=[4])
    run_worlds(plan, tmp_path, lambda _: None)
    job = read_fsdp_job(tmp_path / "n1")
    assert job is not None and job.forward_prefetch and job.unshard_async
    study = build_study(plan, tmp_path)
    assert {p.world_size for p in study.fsdp} == {2, 4}
    assert {p.overlap for p in study.fsdp} == {"all_gather"}  # gloo: the gathers only
    # the N = 2 ranks timed FSDP2's own work and the optimizer at both sizes before training
    probe = read_fsdp_probe(tmp_path / "n2")
    assert probe is not None and probe.gathers_as_run and probe.optimizer is not None
    assert set(probe.gather_s) == {u.name for u in job.shape.units}
    assert probe.optimizer.tensors == job.shape.parameter_count
    assert {p.optimizer_source for p in study.fsdp} == {"probe"}
    assert [c.world_size for c in study.strategies] == [2, 4]
    for c in study.strategies:
        ddp, fsdp, offload = c.steps
        assert ddp.step_s is not None and ddp.step_s > 0
        assert fsdp.step_s is not None and fsdp.step_s > 0
        assert offload.step_s is None and offload.why_not == OFFLOAD_ON_CPU
    view = scaling_blocks(study.model_dump(mode="json"))
    assert any(t.title.startswith("DDP, FSDP and FSDP with CPU offload") for t in view.tables)
    assert view.notes[0].startswith("Sharding")
