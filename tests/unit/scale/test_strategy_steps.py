"""DDP, FSDP and FSDP with CPU offload in step time for one FSDP2 job: DDP's buckets and its
whole optimizer, the verdict on the bands, the size from which sharding pays, and the scale
report's table and answer; on recorded-shape data worked out by hand."""

from __future__ import annotations

import pytest

from fsdp_shapes import blocks_and_root
from torchdoctor.measure import summarize
from torchdoctor.scale._fsdp_units import FsdpJob
from torchdoctor.scale.buckets import FIRST_BUCKET_BYTES
from torchdoctor.scale.collectives import CollectiveBench, point
from torchdoctor.scale.fit import fit_alpha_beta
from torchdoctor.scale.runner import fsdp_at
from torchdoctor.scale.strategy_steps import (
    OFFLOAD_ON_CPU,
    OFFLOAD_UNMEASURED,
    StrategyComparison,
    StrategyStep,
    compare_steps,
    ddp_model,
    fsdp_pays_from,
)
from torchdoctor.scale.worlds import MeasuredWorld

_MIB = 1024 * 1024


def _job(block_rows: int = 512) -> FsdpJob:
    """Four blocks of `block_rows` x 1024 fp32 parameters and a small root, gathered in bf16."""

    shape = blocks_and_root(
        4, block_rows, block_rows * 1024, root="head", root_rows=4, root_numel=4096
    )
    return FsdpJob(
        shape=shape,
        param_dtype_bytes=2,
        reduce_dtype_bytes=2,
        reshard_after_forward=False,
        forward_prefetch=True,
        unshard_async=True,
    )


def _bench(backend: str = "gloo", beta: float = 1e-9) -> CollectiveBench:
    """Every collective on an exact line alpha + beta x size at N = 2, the CPU half of it."""
    sizes = [1024 * 4**k for k in range(9)]
    points, fits = [], {}
    for c in ("all_reduce", "all_gather", "reduce_scatter"):
        times = [1e-4 + beta * s for s in sizes]
        points += [
            point(c, 2, s, summarize([t] * 5, label=c), cpu_s=0.5 * t)  # type: ignore[arg-type]
            for s, t in zip(sizes, times, strict=True)
        ]
        fits[c] = fit_alpha_beta(c, 2, sizes, times)  # type: ignore[arg-type]
    return CollectiveBench(
        world_size=2,
        backend=backend,
        device="cpu",
        points=points,
        fits=fits,
        threads_per_core=0.5,
    )


def _base(optimizer: float = 0.012) -> MeasuredWorld:
    return MeasuredWorld(
        world_size=1,
        step_s=0.060,
        step_ci=(0.059, 0.061),
        step_times=[0.060] * 5,
        phases={"forward": 0.016, "backward": 0.032 - optimizer + 0.012, "optimizer": optimizer},
        rank_step_s=0.060,
        job_step_mean_s=0.060,
        rank_step_medians=[0.060],
    )


def test_ddp_reduces_the_fp32_gradients_in_its_buckets() -> None:
    model = ddp_model(_base(), _job(), _bench())
    # 4 x 512 Ki + 4 Ki elements of 4 bytes, in the order backward produces them
    assert model.gradient_bytes == 4 * (4 * 512 * 1024 + 4096)
    assert sum(model.buckets) == model.gradient_bytes
    assert model.buckets[0] >= FIRST_BUCKET_BYTES and len(model.buckets) == 2
    assert model.ring.collective == "all_reduce" and model.mode == "weak"


def test_ddp_steps_the_whole_optimizer_and_fsdp_its_shard() -> None:
    base, job, bench = _base(optimizer=0.024), _job(), _bench()
    c = compare_steps(fsdp_at(base, job, bench, 2), ddp_model(base, job, bench), "gloo", None)
    ddp, fsdp, offload = c.steps
    assert (ddp.strategy, fsdp.strategy, offload.strategy) == ("ddp", "fsdp", "fsdp_offload")
    assert ddp.optimizer_s == pytest.approx(0.024)
    # each rank holds half the elements (every parameter's rows divide by 2)
    assert fsdp.optimizer_s == pytest.approx(0.012)
    assert c.measured_bandwidth and c.world_size == 2
    assert c.fsdp_over_ddp == pytest.approx(fsdp.step_s / ddp.step_s)  # type: ignore[operator]
    # a CPU job's offload moves nothing: no step of its own, and why
    assert offload.step_s is None and offload.why_not == OFFLOAD_ON_CPU
    # with a fast link the optimizer's half decides, beyond both bands
    assert c.faster == "fsdp"


def test_a_slow_link_makes_ddp_the_faster_and_gpus_say_why_offload_is_not_projected() -> None:
    # synchronous unshards, gathered again in the backward and reduced in fp32: FSDP moves
    # 2 + 2 + 4 bytes an element on the step where DDP all-reduces 4 (on the same line at
    # N = 2); at 1 us a byte that outweighs the optimizer's half
    base, job = _base(), _job(block_rows=8)
    bench = _bench(beta=1e-6)
    update = {"unshard_async": False, "reshard_after_forward": True, "reduce_dtype_bytes": 4}
    job = job.model_copy(update=update)
    c = compare_steps(fsdp_at(base, job, bench, 2), ddp_model(base, job, bench), "gloo", None)
    assert c.faster == "ddp" and c.fsdp_over_ddp > 1
    gpu = compare_steps(
        fsdp_at(base, job, _bench("nccl"), 2, 1e9),
        ddp_model(base, job, _bench("nccl")),
        "nccl",
        1e9,
    )
    assert gpu.steps[2].why_not == OFFLOAD_UNMEASURED and not gpu.measured_bandwidth
    assert gpu.busbw_bytes_per_s == 1e9


def _comparison(n: int, faster: str, measured: bool = True) -> StrategyComparison:
    step = StrategyStep(strategy="fsdp", step_s=1.0, low_s=0.9, high_s=1.1)
    return StrategyComparison(
        world_size=n,
        busbw_bytes_per_s=1e9,
        measured_bandwidth=measured,
        steps=[step],
        faster=faster,  # type: ignore[arg-type]
        fsdp_over_ddp=0.9,
    )


def test_sharding_pays_from_the_size_after_which_fsdp_stays_faster() -> None:
    ddp_first = [_comparison(2, "ddp"), _comparison(4, "fsdp"), _comparison(8, "fsdp")]
    assert fsdp_pays_from(ddp_first) == 4
    # a size in between where the two are not told apart restarts the run
    assert fsdp_pays_from([_comparison(2, "fsdp"), _comparison(4, "neither")]) is None
    assert fsdp_pays_from([_comparison(8, "fsdp"), _comparison(2, "fsdp")]) == 2
    # another network's rows do not count
    assert fsdp_pays_from([_comparison(2, "fsdp", measured=False)]) is None


def test_the_scale_report_sets_the_three_side_by_side_and_answers() -> None:
    from torchdoctor.report.adapters.scale import scaling_blocks
    from torchdoctor.scale.study import ScalingStudy

    base, job, bench = _base(optimizer=0.024), _job(), _bench()
    c = compare_steps(fsdp_at(base, job, bench, 2), ddp_model(base, job, bench), "gloo", None)
    study = ScalingStudy(
        target="train.py",
        kind="script",
        mode="weak",
        backend="gloo",
        threads_per_rank=1,
        worlds=[],
        benches=[],
        projections=[],
        strategies=[c],
        fsdp_pays_from=fsdp_pays_from([c]),
        warnings=[],
    )
    view = scaling_blocks(study.model_dump(mode="json"))
    table = next(t for t in view.tables if t.title.startswith("DDP, FSDP and FSDP with CPU"))
    (row,) = table.rows
    assert row[0] == "2" and row[1].endswith("(measured)")
    assert row[4] == f"not projected: {OFFLOAD_ON_CPU}"
    assert row[-1] == "FSDP"
    assert view.notes[0].startswith("Sharding pays in step time from N=2")
    never = study.model_copy(update={"fsdp_pays_from": None})
    never_view = scaling_blocks(never.model_dump(mode="json"))
    assert never_view.notes[0].startswith("Sharding does not pay")
