"""DDP's buckets, the overlap replay and the scaling model, on fake timings."""

from __future__ import annotations

import pytest

from torchdoctor.core.steps import StepTiming
from torchdoctor.scale.buckets import FIRST_BUCKET_BYTES, ddp_buckets, exposed_communication
from torchdoctor.scale.fit import fit_alpha_beta
from torchdoctor.scale.projection import ScalingModel, project, projections
from torchdoctor.scale.study import (
    COLOCATION_BAR,
    COMMUNICATION_BAR,
    COMPUTE_BAR,
    SKEW_BAR,
    waterfall,
)
from torchdoctor.scale.worlds import karp_flatt, measured_world

MB = 1024 * 1024
SIZES = [2**k for k in range(10, 27, 2)]


def test_buckets_reverse_order_first_small() -> None:
    # parameters of 10, 20, 0.5 MB: backward produces the last first
    buckets = ddp_buckets([10 * MB, 20 * MB, MB // 2], bucket_cap_mb=25)
    assert buckets[0] == MB // 2 + 20 * MB  # the first bucket closes once past 1 MiB
    assert buckets[1:] == [10 * MB]
    assert sum(ddp_buckets([3 * MB] * 20)) == 60 * MB
    assert ddp_buckets([FIRST_BUCKET_BYTES // 4] * 2) == [FIRST_BUCKET_BYTES // 2]


def test_exposed_is_the_whole_of_one_bucket_and_less_for_many() -> None:
    def cost(b: float) -> float:
        return b * 1e-9  # 1 ns per byte

    total, exposed = exposed_communication([10 * MB], 0.05, cost)
    assert exposed == pytest.approx(total)  # one bucket: ready only when backward ends
    total, exposed = exposed_communication([MB] * 10, 0.05, cost)
    assert total == pytest.approx(10 * MB * 1e-9)
    assert exposed == pytest.approx(MB * 1e-9)  # every bucket but the last hides behind backward
    _, exposed = exposed_communication([MB] * 10, 0.0, cost)
    assert exposed == pytest.approx(total)


def _steps(total: float, n: int = 30, jitter: float = 0.0) -> list[StepTiming]:
    out = []
    for i in range(n):
        t = total * (1 + jitter * ((i * 7) % 5 - 2) / 2)
        phases = {
            "data_wait": 0.1 * t,
            "forward": 0.3 * t,
            "backward": 0.5 * t,
            "optimizer": 0.1 * t,
        }
        out.append(StepTiming(index=i, total_s=t, phases=phases, samples=64))
    return out


def _model(mode: str = "weak", grad_bytes: int = 4 * MB, jitter: float = 0.0) -> ScalingModel:
    base = measured_world([_steps(0.1, jitter=jitter)])
    times = [20e-6 + s / 1e9 for s in SIZES]
    ring = fit_alpha_beta("all_reduce", 2, SIZES, times)
    ps = fit_alpha_beta("reduce_broadcast", 2, SIZES, [2 * t for t in times])
    buckets = ddp_buckets([grad_bytes])
    return ScalingModel(
        mode=mode,
        base=base,
        gradient_bytes=grad_bytes,
        buckets=buckets,
        ring=ring,
        parameter_server=ps,
    )


def test_measured_world_takes_the_slowest_rank_per_step() -> None:
    world = measured_world([_steps(0.1), _steps(0.12)])
    assert world.step_s == pytest.approx(0.12)
    assert world.rank_step_s == pytest.approx(0.11)
    assert world.samples_per_s == pytest.approx(2 * 64 / 0.12)
    assert sum(world.phases.values()) == pytest.approx(0.11)


def test_projection_at_one_is_the_measurement_and_weak_scaling_adds_communication() -> None:
    model = _model()
    one = project(model, 1)
    assert one.step_s == pytest.approx(model.base.step_s)
    assert one.exposed_s == 0 and one.efficiency == pytest.approx(1.0)
    two = project(model, 2)
    # one 4 MB bucket at 1 GB/s bus, factor 1 at N=2: all exposed
    assert two.communication_s == pytest.approx(20e-6 + 4 * MB / 1e9, rel=1e-3)
    assert two.exposed_s == pytest.approx(two.communication_s)
    assert two.step_s == pytest.approx(0.1 + two.exposed_s, rel=1e-6)
    assert two.low_s == two.step_s == two.high_s  # exact inputs: no band
    noisy = _model(jitter=0.1)
    two = project(noisy, 2)
    assert two.skew_s > 0  # the slower of two ranks' steps is above the median
    assert two.step_s == pytest.approx(noisy.base.step_s + two.exposed_s + two.skew_s)
    assert two.low_s < two.step_s < two.high_s
    assert two.efficiency < 1 and two.serial_fraction is not None and two.serial_fraction > 0


def test_larger_worlds_cost_more_and_parameter_server_costs_more_than_ring() -> None:
    model = _model(grad_bytes=64 * MB)
    ring = [project(model, n).exposed_s for n in (2, 4, 8)]
    assert ring == sorted(ring)
    assert ring[2] / ring[0] < 2.5  # the ring's bytes per link approach 2S, not N*S
    ps8 = project(model, 8, architecture="parameter_server").exposed_s
    assert ps8 > 3 * ring[2]  # the server's link carries (N-1) copies


def test_bandwidth_moves_the_exposed_time_inversely() -> None:
    model = _model(grad_bytes=64 * MB)
    slow, fast = projections(model, [2], bandwidths=[0.5e9, 2e9], architectures=["ring"])
    assert slow.exposed_s / fast.exposed_s == pytest.approx(4.0, rel=0.02)


def test_strong_scaling_shrinks_compute_not_the_optimizer() -> None:
    model = _model(mode="strong", grad_bytes=1024)
    four = project(model, 4)
    assert four.optimizer_s == pytest.approx(project(model, 1).optimizer_s)
    assert four.compute_s == pytest.approx(project(model, 1).compute_s / 4, rel=1e-6)
    # the backward's share of compute shrinks with it (the communication overlaps it)
    assert 0 < four.backward_s < four.compute_s
    assert four.backward_s == pytest.approx(project(model, 1).backward_s / 4, rel=1e-6)
    assert 1 < four.speedup < 4


def test_karp_flatt_serial_fraction() -> None:
    assert karp_flatt(2.0, 2) == pytest.approx(0.0)
    assert karp_flatt(1.0, 2) == pytest.approx(1.0)
    assert karp_flatt(1.0, 1) is None


def _rank(
    data: float, backward: float, n: int = 12, forward: float = 0.010, optimizer: float = 0.002
) -> list[StepTiming]:
    phases = {"data_wait": data, "forward": forward, "backward": backward, "optimizer": optimizer}
    return [StepTiming(index=i, total_s=sum(phases.values()), phases=phases) for i in range(n)]


def test_a_wait_for_a_straggler_goes_to_the_skew_bar_not_communication() -> None:
    base = measured_world([_rank(0.0, 0.020)])
    # rank 1 waits 40 ms on its data; rank 0, early at the all-reduce, waits those 40 ms in its
    # backward; both hold 20 ms of backward compute and 1 ms of exposed communication
    two = measured_world([_rank(0.0, 0.020 + 0.001 + 0.040), _rank(0.040, 0.020 + 0.001)])
    assert two.rank_wait_s == pytest.approx(0.020)  # 40 ms on one rank of two
    ideal, parts = waterfall(base, two, "weak")
    bars = {p.label: p.seconds for p in parts}
    assert bars[COMMUNICATION_BAR] == pytest.approx(0.001)
    assert bars[SKEW_BAR] == pytest.approx(0.020)
    assert bars["data"] == pytest.approx(0.020)  # the ranks' mean data wait
    assert ideal + sum(bars.values()) == pytest.approx(two.job_step_mean_s)
    # ranks in step, no wait: the backward's whole excess is communication
    even = measured_world([_rank(0.0, 0.021), _rank(0.0, 0.021)])
    assert even.rank_wait_s == 0.0
    assert dict((p.label, p.seconds) for p in waterfall(base, even, "weak")[1])[
        COMMUNICATION_BAR
    ] == pytest.approx(0.001)


def test_the_colocation_slowdown_scales_what_the_host_computes_at_n_of_two_and_more() -> None:
    alone = _model()
    slowed = alone.model_copy(update={"colocation_slowdown": 1.25, "colocation_ci": (1.2, 1.3)})
    assert project(slowed, 1).step_s == pytest.approx(project(alone, 1).step_s)  # N=1 is N=1
    a, s = project(alone, 2), project(slowed, 2)
    assert s.compute_s == pytest.approx(1.25 * a.compute_s)
    assert s.optimizer_s == pytest.approx(1.25 * a.optimizer_s)
    assert s.data_s == pytest.approx(1.25 * a.data_s)
    # one bucket, ready only when the backward ends: the communication is exposed either way
    assert s.exposed_s == pytest.approx(a.exposed_s)
    assert s.colocation_slowdown == 1.25
    assert s.high_s - s.low_s > a.high_s - a.low_s  # its interval widens the band


def test_the_colocation_slowdown_has_a_bar_of_its_own() -> None:
    base = measured_world([_rank(0.0, 0.020)])  # 32 ms: 10 forward, 20 backward, 2 optimizer
    # both ranks compute 25% slower than N=1 did, and expose 1 ms of communication
    slow = _rank(0.0, 1.25 * 0.020 + 0.001, forward=1.25 * 0.010, optimizer=1.25 * 0.002)
    two = measured_world([slow, slow])
    bars = dict((p.label, p.seconds) for p in waterfall(base, two, "weak", 1.25)[1])
    assert bars[COLOCATION_BAR] == pytest.approx(0.25 * 0.032)
    assert bars[COMMUNICATION_BAR] == pytest.approx(0.001)
    assert bars[COMPUTE_BAR] == pytest.approx(0.0) and bars["optimizer"] == pytest.approx(0.0)
    # without the probe, the backward's slowdown reads as communication
    unprobed = dict((p.label, p.seconds) for p in waterfall(base, two, "weak")[1])
    assert unprobed[COMMUNICATION_BAR] == pytest.approx(0.001 + 0.25 * 0.020)


def test_hidden_communication_takes_its_cpu_from_the_backward_on_a_fully_used_host() -> None:
    # ten 1 MiB buckets over a 50 ms backward: nine hide behind it, the last is exposed; each
    # all-reduce takes its whole time in CPU (loopback: copies and the kernel's sockets)
    times = [20e-6 + s / 1e9 for s in SIZES]
    cpu = fit_alpha_beta("all_reduce", 2, SIZES, times)
    many = _model(grad_bytes=10 * MB).model_copy(
        update={"buckets": [MB] * 10, "ring_cpu": cpu, "threads_per_core": 1.0}
    )
    free = project(many.model_copy(update={"threads_per_core": 0.5}), 2)  # spare cores
    taken = project(many, 2)
    assert free.stolen_s == 0.0
    hidden = taken.communication_s - taken.exposed_s
    assert hidden == pytest.approx(9 * (20e-6 + MB / 1e9), rel=1e-6)
    assert taken.stolen_s == pytest.approx(hidden, rel=1e-6)  # CPU = time here: all of it
    assert taken.step_s == pytest.approx(free.step_s + taken.stolen_s)
    # a gradient in one bucket is reduced after the backward: nothing hidden, nothing taken
    one = _model(grad_bytes=4 * MB).model_copy(update={"ring_cpu": cpu, "threads_per_core": 1.0})
    assert project(one, 2).stolen_s == 0.0
    # no CPU measured (an older record), or a parameter server: none
    assert project(many.model_copy(update={"ring_cpu": None}), 2).stolen_s == 0.0
    assert project(many, 2, architecture="parameter_server").stolen_s == 0.0
