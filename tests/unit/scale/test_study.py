"""A study built from a run folder as the ranks leave it (per-rank step records, the
collectives, DDP's parameters), with no process started; and its report section."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchdoctor.collect import ScriptProfile
from torchdoctor.core.steps import StepTiming
from torchdoctor.measure import summarize
from torchdoctor.report.adapters.scale import scaling_blocks
from torchdoctor.scale import (
    CollectiveBench,
    StudyPlan,
    build_study,
    fit_alpha_beta,
    world_dir,
)
from torchdoctor.scale.collectives import BENCH_FILE, point

SIZES = [1024 * 4**k for k in range(5)]


def _steps(fwd: float, bwd: float, opt: float, n: int = 20) -> list[StepTiming]:
    out = []
    for i in range(n):
        wobble = 1 + 0.02 * ((i * 3) % 5 - 2)
        phases = {"forward": fwd * wobble, "backward": bwd * wobble, "optimizer": opt}
        total = sum(phases.values())
        out.append(StepTiming(index=i, total_s=total, phases=phases, samples=32))
    return out


def _write_world(run: Path, world: int, bwd: float) -> None:
    out = world_dir(run, world)
    out.mkdir(parents=True)
    for rank in range(world):
        profile = ScriptProfile(
            argv=["x"], rank=rank, world_size=world, steps=_steps(0.01, bwd, 0.002)
        )
        profile.write(out / f"script_profile.rank{rank}.json")
    (out / "ddp_params.json").write_text(
        json.dumps({"models": [{"param_bytes": [400_000, 100_000], "bucket_cap_mb": None}]})
    )
    if world > 1:
        points, fits = [], {}
        for c in ("all_reduce", "all_gather", "reduce_broadcast"):
            times = [50e-6 + s / 1e9 for s in SIZES]
            points += [
                point(c, world, s, summarize([t] * 5)) for s, t in zip(SIZES, times, strict=True)
            ]
            fits[c] = fit_alpha_beta(c, world, SIZES, times)
        bench = CollectiveBench(
            world_size=world, backend="gloo", device="cpu", points=points, fits=fits
        )
        bench.write(out / BENCH_FILE)


def test_study_from_a_run_folder(tmp_path: Path) -> None:
    _write_world(tmp_path, 1, bwd=0.02)
    # N=2: the backward grows by 1.5 ms, the all-reduce of 500 kB at 1 GB/s plus latency
    _write_world(tmp_path, 2, bwd=0.02 + 0.0015)
    plan = StudyPlan(nprocs=[1, 2], workload="mlp", batch=32, project_to=[4])
    study = build_study(plan, tmp_path)
    one, two = study.worlds
    assert one.efficiency == pytest.approx(1.0)
    assert two.efficiency < 1.0 and two.serial_fraction is not None
    # the waterfall's parts add up to the gap between the mean steps and the ideal
    gap = sum(p.seconds for p in two.waterfall)
    assert gap == pytest.approx(0.0015, rel=1e-6)
    exposed = next(p for p in two.waterfall if p.label.startswith("exposed"))
    assert exposed.seconds == pytest.approx(0.0015, rel=1e-6)
    assert study.model is not None and study.model.gradient_bytes == 500_000
    # the model's fit is over the sizes around the one 500 kB bucket (the largest measured
    # is 256 KiB: it and the two below it), the benchmark's record keeps the whole range
    assert study.model.ring.sizes_fitted == (16 * 1024, 256 * 1024)
    assert study.benches[0].fit("all_reduce").sizes_fitted == (1024, 256 * 1024)
    assert two.projected is not None
    assert two.projected.exposed_s == pytest.approx(50e-6 + 500_000 / 1e9, rel=1e-3)
    assert two.projected_over_measured == pytest.approx(1.0, abs=0.03)
    assert {(p.world_size, p.architecture) for p in study.projections} == {
        (2, "ring"),
        (2, "parameter_server"),
        (4, "ring"),
        (4, "parameter_server"),
    }
    blocks = scaling_blocks(study.to_json_dict())
    titles = [t.title for t in blocks.tables]
    assert "Gap to linear scaling, per step (means)" in titles
    waterfall = blocks.tables[titles.index("Gap to linear scaling, per step (means)")]
    assert [row[0] for row in waterfall.rows] == ["2"]
    # no co-location probe in this folder: the model assumes none, and the report says nothing
    assert study.model.colocation_slowdown == 1.0
    assert not any(f.label.startswith("compute with all ranks") for f in blocks.facts)
    slowed = study.model_copy(
        update={
            "model": study.model.model_copy(
                update={"colocation_slowdown": 1.3, "colocation_ci": (1.2, 1.4)}
            )
        }
    )
    facts = {f.label: f.value for f in scaling_blocks(slowed.to_json_dict()).facts}
    assert facts["all-reduce fit the model times buckets with"].startswith("sizes 16")
    assert facts["compute with all ranks at once (over alone)"] == "1.30x (1.20x to 1.40x)"


def test_a_study_without_n1_says_so(tmp_path: Path) -> None:
    _write_world(tmp_path, 2, bwd=0.02)
    study = build_study(StudyPlan(nprocs=[2], workload="mlp", batch=32), tmp_path)
    assert study.model is None and not study.projections
    assert any("no N=1 run" in w for w in study.warnings)


def test_the_waterfall_chart_is_drawn(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from torchdoctor.report.charts import scale as charts
    from torchdoctor.report.sections.scale import scaling_charts

    _write_world(tmp_path, 1, bwd=0.02)
    _write_world(tmp_path, 2, bwd=0.025)
    study = build_study(StudyPlan(nprocs=[1, 2], workload="mlp", batch=32), tmp_path)
    view = scaling_blocks(study.to_json_dict())
    assert [n for n, _, _ in view.waterfall] == [2]
    import matplotlib.pyplot as plt

    drawn = scaling_charts(plt, view)["scale_waterfall"]
    assert drawn is not None and drawn.startswith("<svg")
    assert charts.waterfall_chart(plt, []) is None


def test_the_cpu_fit_needs_every_point_to_carry_its_cpu() -> None:
    def bench(cpu: list[float | None]) -> CollectiveBench:
        points = [
            point("all_reduce", 2, s, summarize([50e-6 + s / 1e9] * 5), cpu_s=c)
            for s, c in zip(SIZES, cpu, strict=True)
        ]
        fit = fit_alpha_beta("all_reduce", 2, SIZES, [50e-6 + s / 1e9 for s in SIZES])
        return CollectiveBench(
            world_size=2, backend="gloo", device="cpu", points=points, fits={"all_reduce": fit}
        )

    measured = bench([20e-6 + s / 2e9 for s in SIZES])
    cpu = measured.cpu_fit_near("all_reduce", [500_000])
    assert cpu is not None and cpu.predict(500_000) == pytest.approx(20e-6 + 500_000 / 2e9)
    assert bench([None] * len(SIZES)).cpu_fit_near("all_reduce", [500_000]) is None
    assert bench([0.0, *([1e-4] * (len(SIZES) - 1))]).cpu_fit_near("all_reduce", [1]) is None
