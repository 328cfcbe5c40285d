"""An FSDP2 job's step at N projected from N = 1 and the all-gather/reduce-scatter fits: the
collectives without a reshard, the reduce-scatters on their own fit, the exposed part with and
without prefetch, the band, and the units read from the wrapped modules; on numbers worked out
by hand."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fsdp_shapes import blocks_and_root
from torchdoctor.core.errors import ScaleError
from torchdoctor.core.shard_memory import ModelShape
from torchdoctor.measure import summarize
from torchdoctor.scale._fsdp_units import FsdpJob, _job
from torchdoctor.scale.collectives import CollectiveBench, point
from torchdoctor.scale.fit import AlphaBetaFit, Collective, fit_alpha_beta
from torchdoctor.scale.fsdp import fsdp_collectives, fsdp_communication, project_fsdp
from torchdoctor.scale.projection import rank_skew
from torchdoctor.scale.runner import fsdp_at, fsdp_overlap
from torchdoctor.scale.worlds import MeasuredWorld


def _shape() -> ModelShape:
    return blocks_and_root(2, 8, 80, root="emb", root_rows=4, root_numel=16)


def _fit(collective: Collective = "all_gather", alpha: float = 1e-3, beta: float = 1e-6):
    return AlphaBetaFit(
        collective=collective,
        world_size=2,
        points=5,
        alpha_s=alpha,
        beta_s_per_byte=beta,
        alpha_se=1e-5,
        beta_se=1e-8,
        cov_alpha_beta=0.0,
        rel_rms_residual=0.02,
    )


def test_units_kept_whole_to_the_backward_are_not_gathered_again() -> None:
    steps = fsdp_collectives(_shape(), 2, param_dtype_bytes=2, reshard_after_forward=False)
    assert [(c.unit, c.kind) for c in steps] == [
        ("", "all_gather"),
        ("b0", "all_gather"),
        ("b1", "all_gather"),
        ("b1", "reduce_scatter"),
        ("b0", "reduce_scatter"),
        ("", "reduce_scatter"),
    ]


def test_reduce_scatters_are_timed_on_their_own_fit() -> None:
    steps = fsdp_collectives(_shape(), 2, param_dtype_bytes=2, reduce_dtype_bytes=2)
    ag, rs = _fit(), _fit("reduce_scatter", alpha=2e-3, beta=3e-6)
    both = fsdp_communication(steps, ag, 2, reduce_scatter=rs)
    # at the fits' own N every collective takes its fit's alpha + beta x size
    want = sum((ag if c.kind == "all_gather" else rs).predict(c.size_bytes) for c in steps)
    assert both.seconds == pytest.approx(want)
    assert both.seconds > fsdp_communication(steps, ag, 2).seconds
    with pytest.raises(ScaleError, match="reduce-scatter fit"):
        fsdp_communication(steps, ag, 2, reduce_scatter=_fit("all_reduce"))


def _project(**overrides: object):
    kwargs: dict[str, object] = dict(
        step_s=0.060,
        optimizer_s=0.012,
        shape=_shape(),
        world_size=2,
        all_gather=_fit(),
        reduce_scatter=_fit("reduce_scatter", alpha=2e-3),
        param_dtype_bytes=2,
        reduce_dtype_bytes=2,
        reshard_after_forward=False,
        overlap="none",
        colocation=(1.5, 1.4, 1.6),
    )
    kwargs.update(overrides)
    return project_fsdp(**kwargs)  # type: ignore[arg-type]


def test_without_prefetch_every_collective_is_on_the_step() -> None:
    p = _project()
    # the root's 16 elements pad to 16 at N = 2 (4 rows), a block's 80 to 80: 2 x 40 per rank
    shard = (8 + 40 + 40) / 176
    assert p.compute_s == pytest.approx(1.5 * 0.048)
    assert p.optimizer_s == pytest.approx(1.5 * 0.012 * shard)
    assert p.exposed_s == pytest.approx(p.communication.seconds)
    assert p.hidden_s == 0.0
    assert p.step_s == pytest.approx(p.compute_s + p.optimizer_s + p.communication.seconds)
    assert p.low_s < p.step_s < p.high_s


def test_with_prefetch_only_the_root_s_collectives_and_the_cpu_they_take_stay() -> None:
    p = _project(overlap="prefetch", cpu_share=0.25)
    ag, rs = _fit(), _fit("reduce_scatter", alpha=2e-3)
    steps = fsdp_collectives(
        _shape(), 2, param_dtype_bytes=2, reduce_dtype_bytes=2, reshard_after_forward=False
    )
    edges = ag.predict(steps[0].size_bytes) + rs.predict(steps[-1].size_bytes)
    rest = p.communication.seconds - edges
    # the compute (72 ms) is far longer than the blocks' collectives: all of them hidden
    assert p.hidden_s == pytest.approx(rest)
    assert p.exposed_s == pytest.approx(edges + 0.25 * rest)
    assert p.step_s < _project().step_s
    # a compute shorter than the communication hides only as much as it lasts
    short = _project(overlap="prefetch", step_s=0.0121, optimizer_s=0.012, colocation=(1, 1, 1))
    assert short.hidden_s == pytest.approx(0.0001)
    with pytest.raises(ScaleError, match="hold its optimizer"):
        _project(optimizer_s=0.07)


def test_the_step_waits_for_its_slowest_rank_as_ddp_s_does() -> None:
    times = [0.050, 0.055, 0.060, 0.065, 0.070]
    p = _project(step_times=times)
    # the median of the larger of two draws: the 1/sqrt(2) quantile, times the slowdown
    skew = rank_skew([1.5 * t for t in times], 2)
    assert skew > 0 and p.skew_s == pytest.approx(skew)
    assert p.step_s == pytest.approx(_project().step_s + skew)
    assert p.low_s == pytest.approx(_project().low_s + skew)


def test_on_a_device_without_streams_the_reduce_scatters_stay_on_the_step() -> None:
    gathers = _project(overlap="all_gather")
    streams = _project(overlap="prefetch")
    rs = _fit("reduce_scatter", alpha=2e-3)
    steps = fsdp_collectives(
        _shape(), 2, param_dtype_bytes=2, reduce_dtype_bytes=2, reshard_after_forward=False
    )
    middle_rs = sum(rs.predict(c.size_bytes) for c in steps[1:-1] if c.kind == "reduce_scatter")
    middle_ag = sum(_fit().predict(c.size_bytes) for c in steps[1:-1] if c.kind == "all_gather")
    # the blocks' two reduce-scatters are waited for; only their all-gathers run under compute
    assert gathers.hidden_s == pytest.approx(middle_ag)
    assert gathers.exposed_s == pytest.approx(streams.exposed_s + middle_rs)
    assert streams.step_s < gathers.step_s < _project().step_s


def test_the_overlap_follows_the_backend_and_the_job_s_unshards() -> None:
    def job(prefetch: bool, unshard_async: bool) -> FsdpJob:
        return FsdpJob(
            shape=_shape(),
            param_dtype_bytes=2,
            reduce_dtype_bytes=2,
            reshard_after_forward=False,
            forward_prefetch=prefetch,
            unshard_async=unshard_async,
        )

    assert fsdp_overlap(job(False, False), "nccl") == "prefetch"
    assert fsdp_overlap(job(True, True), "gloo") == "all_gather"
    # a prefetch issued synchronously holds the rank as its own unit's all-gather would
    assert fsdp_overlap(job(True, False), "gloo") == "none"
    assert fsdp_overlap(job(False, True), "gloo") == "none"


def _bench(threads_per_core: float) -> CollectiveBench:
    sizes = [1024 * 4**k for k in range(6)]
    points, fits = [], {}
    for c, alpha, beta in (("all_gather", 1e-3, 1e-6), ("reduce_scatter", 2e-3, 1e-6)):
        times = [alpha + beta * s for s in sizes]
        points += [
            point(c, 2, s, summarize([t] * 5, label=c), cpu_s=0.5 * t)  # type: ignore[arg-type]
            for s, t in zip(sizes, times, strict=True)
        ]
        fits[c] = fit_alpha_beta(c, 2, sizes, times)  # type: ignore[arg-type]
    return CollectiveBench(
        world_size=2,
        backend="gloo",
        device="cpu",
        points=points,
        fits=fits,
        threads_per_core=threads_per_core,
    )


def test_a_study_projects_from_the_recorded_bench_and_units() -> None:
    base = MeasuredWorld(
        world_size=1,
        step_s=0.060,
        step_ci=(0.059, 0.061),
        step_times=[0.060] * 5,
        # mean phases twice the median step (slow outliers): the optimizer's share, 12 ms
        phases={"forward": 0.04, "backward": 0.056, "optimizer": 0.024},
        rank_step_s=0.060,
        job_step_mean_s=0.060,
        rank_step_medians=[0.060],
    )
    job = FsdpJob(
        shape=_shape(),
        param_dtype_bytes=2,
        reduce_dtype_bytes=2,
        reshard_after_forward=False,
        forward_prefetch=True,
        unshard_async=True,
    )
    full = fsdp_at(base, job, _bench(threads_per_core=1.0), 2)
    spare = fsdp_at(base, job, _bench(threads_per_core=0.5), 2)
    direct = _project(overlap="all_gather", colocation=(1.0, 1.0, 1.0))
    # the points lie on their lines: the fits are the lines, and spare cores take no CPU
    assert spare.communication.seconds == pytest.approx(direct.communication.seconds, rel=1e-6)
    assert spare.step_s == pytest.approx(direct.step_s, rel=1e-6)
    # full cores: half of each hidden collective's time (its CPU) is back on the step
    assert full.exposed_s - spare.exposed_s == pytest.approx(0.5 * spare.hidden_s, rel=1e-6)


def test_the_units_are_read_from_the_wrapped_modules() -> None:
    blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
    root = nn.Sequential(nn.Linear(4, 4), *blocks)
    policy = type("Policy", (), {"param_dtype": torch.bfloat16, "reduce_dtype": None})()
    optimizer = torch.optim.AdamW(root.parameters())
    wrapped = [(b, {"mp_policy": policy}) for b in blocks]
    wrapped.append((root, {"mp_policy": policy, "reshard_after_forward": False}))
    job = _job(wrapped, optimizer)
    assert job is not None
    assert [u.name for u in job.shape.units] == ["1", "2", ""]
    assert [u.numel for u in job.shape.units] == [20, 20, 20]
    assert (job.param_dtype_bytes, job.reduce_dtype_bytes) == (2, 2)
    assert job.reshard_after_forward is False and job.forward_prefetch is False
    assert job.unshard_async is False


def test_asynchronous_unshards_are_read_from_the_units_fsdp_state() -> None:
    class Unit(nn.Linear):
        def __init__(self, unshard_async: bool) -> None:
            super().__init__(4, 4)
            group = type("Group", (), {"unshard_async_op": unshard_async})()
            self._state = type("State", (), {"_fsdp_param_group": group})()

        def _get_fsdp_state(self) -> object:
            return self._state

    for unshard_async in (True, False):
        blocks = [Unit(unshard_async), Unit(unshard_async)]
        root = nn.Sequential(*blocks)
        wrapped: list[tuple[nn.Module, dict[str, object]]] = [(b, {}) for b in blocks]
        wrapped.append((root, {}))
        job = _job(wrapped, torch.optim.AdamW(root.parameters()))  # type: ignore[arg-type]
        assert job is not None and job.unshard_async is unshard_async


def test_the_report_shows_the_fsdp_projections() -> None:
    from torchdoctor.report.adapters.scale import scaling_blocks
    from torchdoctor.scale.study import ScalingStudy

    study = ScalingStudy(
        target="train.py",
        kind="script",
        mode="weak",
        backend="gloo",
        threads_per_rank=1,
        worlds=[],
        benches=[],
        projections=[],
        fsdp=[_project(), _project(overlap="prefetch")],
        warnings=[],
    )
    view = scaling_blocks(study.model_dump(mode="json"))
    table = next(t for t in view.tables if t.title.startswith("FSDP projections"))
    assert [row[0] for row in table.rows] == ["2", "2"]
    assert [row[-1] for row in table.rows] == ["none", "prefetch"]
    assert "6, " in table.rows[0][5]  # six collectives without a reshard
