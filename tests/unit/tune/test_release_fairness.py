"""Handing cached device memory back between chunks must not favour CUDA-graph arms.

`AllocatorWorker` models a worker on a GPU as the CUDA caching allocator behaves: after
`empty_cache` the next step allocates its blocks from the device again (cudaMalloc, which
also synchronizes) and is slower by `REFILL_S`; a CUDA graph's private memory pool is not
released by `empty_cache`, so a graph arm's next step pays no refill. Both arms below run the
same 10 ms step: only the release policy can tell them apart.
"""

from __future__ import annotations

import pytest

from torchdoctor.procs import Done, Ran, Release, ReplyT, Request, Run, StepRow
from torchdoctor.tune.arms import Arm, MeasurePlan, interleave_steady

STEP_S = 0.010
#: A refill after empty_cache: tens of cudaMalloc calls of ~0.1-1 ms each.
REFILL_S = 0.004


class AllocatorWorker:
    def __init__(self, *, graph_pool: bool) -> None:
        self.graph_pool = graph_pool
        self.cold = False
        self.releases = 0

    def _release(self) -> None:
        self.releases += 1
        self.cold = not self.graph_pool  # the graph's pool survives empty_cache

    def request(self, message: Request[ReplyT], *, timeout_s: float) -> ReplyT:
        if isinstance(message, Release):
            self._release()
            return message.expect(Done())
        assert isinstance(message, Run)
        rows = []
        for _ in range(message.steps):
            rows.append(StepRow(STEP_S + (REFILL_S if self.cold else 0.0), 1, 1.0))
            self.cold = False
        if message.release:
            self._release()
        return message.expect(Ran(tuple(rows)))

    def close(self) -> None:
        pass


def _arm(graph_pool: bool) -> Arm:
    worker = AllocatorWorker(graph_pool=graph_pool)
    return Arm(recipe={}, worker=worker, objective="throughput", release_after_run=True)


def test_eager_and_graph_arms_of_equal_speed_score_equal() -> None:
    eager, graphs = _arm(False), _arm(True)
    plan = MeasurePlan(warmup_steps=3, min_chunk_s=0.0)
    for arm in (eager, graphs):
        arm.warm_up(plan, timeout=lambda: 60.0)
        assert arm.warm_score == pytest.approx(STEP_S)  # warm-up steps run back to back
    scores = {id(a): [a.run(8, timeout=lambda: 60.0) for _ in range(3)] for a in (eager, graphs)}
    assert scores[id(eager)] == pytest.approx(scores[id(graphs)])
    assert scores[id(eager)] == pytest.approx([STEP_S] * 3)
    steady = interleave_steady((eager, graphs), 16, timeout=lambda: 60.0)
    assert steady[0] == pytest.approx(steady[1])
    # The memory is still handed back after every chunk and once after warm-up.
    assert isinstance(eager.worker, AllocatorWorker) and eager.worker.releases >= 4
    # Every step trained and kept its loss, the unscored first ones too.
    assert len(eager.losses) == len(graphs.losses)
