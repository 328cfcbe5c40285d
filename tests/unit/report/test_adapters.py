from __future__ import annotations

from pathlib import Path

from report_samples import EVIL_OP, diagnosis_record, make_plain_run

from torchdoctor.core import rundir
from torchdoctor.diagnose.evidence import CeilingEvidence
from torchdoctor.report.adapters import build_view
from torchdoctor.report.load import read_run_dir


def test_complete_run_fills_every_section(run_dir: Path) -> None:
    view = build_view(read_run_dir(run_dir))
    assert view.missing == []
    assert view.header.status == "complete"
    verdict = view.section("verdict").diagnosis
    assert verdict is not None and verdict.primary_bottleneck == "data_loading"
    assert "data loading (42.0% of step time)" in (verdict.verdict or "")
    env = view.section("environment")
    assert env is not None and env.peak_flops["float32"] == 1.2e11
    roofline = view.section("roofline")
    assert roofline is not None and roofline.mem_bandwidth_bytes_per_s == 1.0e10
    assert [o.name for o in roofline.ops][:3] == ["aten::addmm", "aten::add_", EVIL_OP]
    ladder = view.section("ladder").ladder
    assert ladder is not None and [r.step for r in ladder.rungs] == [0, 1, 2]
    assert ladder.rungs[2].ci_low == 3.0 and ladder.rungs[2].ci_high == 3.5
    assert view.section("verdict").tuned == ladder  # the verdict's headline: the same ladder
    assert len(view.section("pareto")) == 2
    assert len(view.section("ladder").trials) == 5
    reproduce = view.section("reproduce")
    assert reproduce is not None and reproduce.recipe_code is not None
    assert "'compile': 'default'" in reproduce.recipe_code


def test_findings_ranked_by_bound_on_gain(run_dir: Path) -> None:
    view = build_view(read_run_dir(run_dir))
    findings = view.section("findings")
    assert findings is not None
    assert [f.rule_id for f in findings] == ["dataloader_wait", "zero_grad_set_to_none"]
    top = findings[0]
    assert top.bound is not None and abs(top.bound - 1 / (1 - 0.42)) < 1e-9  # as recorded
    assert top.knobs == ["num_workers=2"]
    assert {e.label for e in top.evidence} == {"data wait share", "num workers"}


def test_parity_curves_are_baseline_and_kept_changes_only(run_dir: Path) -> None:
    view = build_view(read_run_dir(run_dir))
    parity = view.section("parity")
    assert parity is not None
    assert [c.label for c in parity] == [
        "baseline",
        "+ num_workers=2",
        "+ compile=default",
    ]
    assert len(parity[0].losses) == 20


def test_failed_trial_keeps_its_reason(run_dir: Path) -> None:
    view = build_view(read_run_dir(run_dir))
    trials = view.section("ladder").trials
    assert trials is not None
    failed = [t for t in trials if t.status == "crash"]
    assert len(failed) == 1 and EVIL_OP in failed[0].reason and failed[0].samples_per_s is None


def test_killed_run_says_what_is_missing(killed_run_dir: Path) -> None:
    view = build_view(read_run_dir(killed_run_dir))
    assert view.header.status == "running"
    assert {m.file for m in view.missing} == {
        rundir.DIAGNOSIS,
        rundir.TUNE,
        rundir.TRIALS + "/",
    }
    assert all("never finished" in m.why for m in view.missing)
    assert view.section("ladder").ladder is None and view.section("findings") is None
    steps = view.section("steps").steps
    assert steps is not None and steps.bars  # the profile that was written shows


def test_failed_run_gives_its_error(killed_run_dir: Path) -> None:
    rundir.finish_run_dir(killed_run_dir, error="RuntimeError: out of memory")
    view = build_view(read_run_dir(killed_run_dir))
    assert view.header.status == "failed"
    assert all("out of memory" in m.why for m in view.missing)


def test_env_falls_back_to_the_diagnosis_ceilings(run_dir: Path) -> None:
    (run_dir / rundir.ENV).unlink()
    ceilings = CeilingEvidence(
        device="cpu",
        peak_flops={"float32": 9.0e10},
        mem_bandwidth_bytes_per_s=8.0e9,
        source="cached",
    )
    diagnosis_record().model_copy(update={"ceilings": ceilings}).write(run_dir / rundir.DIAGNOSIS)
    view = build_view(read_run_dir(run_dir))
    env = view.section("environment")
    assert env is not None and env.peak_flops == {"float32": 9.0e10}
    roofline = view.section("roofline")
    assert roofline is not None and roofline.peak_flops == {"float32": 9.0e10}
    # Where the ceilings came from is said once, above them, not on every ceiling's row.
    facts = {f.label: f.value for f in env.facts}
    assert facts["ceilings"] == "cached" and facts["peak float32"] == "90 GFLOP/s"
    assert not any("(cached)" in f.label for f in env.facts)


def test_run_result_gives_the_step_breakdown_and_its_facts(tmp_path: Path) -> None:
    view = build_view(read_run_dir(make_plain_run(tmp_path)))
    assert view.missing == [] and view.section("verdict").diagnosis is None
    assert view.section("ladder").ladder is None
    steps = view.section("steps").steps
    assert steps is not None
    assert [b.label for b in steps.bars] == ["run"]
    assert steps.bars[0].fractions["data_wait"] == 0.4  # as recorded, not recomputed
    facts = {f.label: f.value for f in steps.facts}
    assert facts["throughput"] == "152.4 samples/s"
    assert facts["peak memory (host RSS)"] == "300.0 MiB"
    assert len(steps.losses) == 10


def test_reproduce_shows_the_tuners_own_snippet_when_present(run_dir: Path) -> None:
    snippet = "# Best recipe found by `torchdoctor tune cnn`.\nrecipe = Recipe.from_dict({})\n"
    (run_dir / "best_recipe.py").write_text(snippet)
    view = build_view(read_run_dir(run_dir))
    reproduce = view.section("reproduce")
    assert reproduce is not None and reproduce.recipe_code == snippet
    assert "torchdoctor run cnn --set batch_size=32 --set num_workers=2 --set compile=default" in (
        reproduce.commands
    )
