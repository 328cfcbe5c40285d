"""The co-location probe's protocol in a one-rank gloo group (in this process), on a fake
clock: alone and together alternate, and the slowdown is the rounds' median ratio."""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist

from torchdoctor.collect import CollectConfig, Instrumentation
from torchdoctor.scale import _rank_bench, _rank_train
from torchdoctor.workloads.mlp import MlpWorkload


@pytest.fixture
def one_rank() -> Iterator[None]:
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_the_slowdown_is_together_over_alone(one_rank: None, monkeypatch) -> None:
    # the first block sizes the others (0.01 s a call: 5 calls a block); then per round the
    # block alone, then the block together, which takes 1.5 times as long (2 in one round)
    times = iter([0.01] + [t for r in range(5) for t in (0.01, 0.03 if r == 2 else 0.015)])
    calls: list[int] = []

    def fake_block(work, n: int) -> float:
        calls.append(n)
        return next(times)

    monkeypatch.setattr(_rank_bench, "_block", fake_block)
    probe = _rank_bench.colocation(lambda: None, "fake", 5, torch.device("cpu"))
    assert calls == [1] + [5] * 10
    assert probe.calls_per_block == 5
    assert probe.slowdown == pytest.approx(1.5)  # the median ignores the one slow round
    assert probe.alone.median == pytest.approx(0.01)
    assert probe.slowdown_ci[0] <= probe.slowdown <= probe.slowdown_ci[1]


def test_the_probe_times_the_whole_step_and_the_instrumentation_marks_none_of_it(
    monkeypatch,
) -> None:
    # a small mlp: 512 rows in batches of 256, so the third call starts a second epoch
    monkeypatch.setattr(_rank_train, "get_workload", lambda name: MlpWorkload(rows=512))
    args = argparse.Namespace(workload="mlp", batch=256)
    with Instrumentation(CollectConfig(profile_steps=0, sample_lines=False)) as inst:
        step = _rank_train.whole_step(args)
        model = inspect.getclosurevars(step).nonlocals["model"]
        before = [p.detach().clone() for p in model.parameters()]
        for _ in range(3):
            step()
    profile = inst.result(argv=["x"])
    assert profile.step_count == 0 and profile.optimizer_steps == 0
    assert profile.backward_calls == 0
    # the workload's own optimizer (AdamW) updated the probe's own copy of the model
    after = list(model.parameters())
    assert all(p.grad is not None for p in after)
    assert all(not torch.equal(a, p) for a, p in zip(before, after, strict=True))


def test_an_optimizer_whose_step_torch_did_not_wrap_is_not_run_unhooked() -> None:
    class Plain:
        def step(self) -> None: ...

    assert _rank_train.unhooked_step(Plain()) is None  # type: ignore[arg-type]
    sgd = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
    assert _rank_train.unhooked_step(sgd) is not None


def test_a_collective_is_timed_with_the_cpu_it_takes(one_rank: None, monkeypatch) -> None:
    def op() -> None:  # a stand-in collective that computes: its CPU is its time
        sum(range(20_000))

    times, cpu = _rank_bench._time(op, 3, torch.device("cpu"))
    assert len(times) == len(cpu) == 3
    assert all(c > 0 for c in cpu)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setattr(_rank_bench.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(_rank_bench.torch, "get_num_threads", lambda: 1)
    assert _rank_bench.threads_per_core() == pytest.approx(1.0)  # 2 ranks x 1 thread, 2 cores
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert _rank_bench.threads_per_core() is None
