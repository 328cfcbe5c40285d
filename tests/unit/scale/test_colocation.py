"""The co-location probe's protocol in a one-rank gloo group (in this process), on a fake
clock: alone and together alternate, and the slowdown is the rounds' median ratio."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist

from torchdoctor.scale import _rank_bench


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
