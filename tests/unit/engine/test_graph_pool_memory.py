"""A CUDA-graph recipe's peak memory includes its graphs' private pools.

`FakeGraphAllocator` models the CUDA caching allocator as the H200 run showed it: eager
tensors count in both `max_memory_allocated` and `max_memory_reserved`; a graph capture takes
a private memory pool that the allocator reserves from the device but that
`max_memory_allocated` never shows (the mlp under compile=reduce-overhead reported 2.5 MB
allocated against 71 MB eager). Figures are the H200 record's (tests/data/h200/README.md).
"""

from __future__ import annotations

import torch

from torchdoctor.engine.peak_memory import MemoryStats, MemoryTracker
from torchdoctor.procs._spec import peak_memory_of
from torchdoctor.tune.fit_decisions import PeakMemory, fits, lowers_memory

MB = 10**6
EAGER_PEAK = 71 * MB  # the eager mlp's activations and optimizer state
GRAPHED_ALLOCATED = int(2.5 * MB)  # what max_memory_allocated saw under reduce-overhead
GRAPH_POOL = 75 * MB  # the private pool the graph's replays allocate from


class FakeGraphAllocator:
    """One process's caching allocator, with eager allocations and graph pools apart."""

    def __init__(self) -> None:
        self.allocated = self.peak_allocated = 0
        self.reserved = self.peak_reserved = 0

    def allocate(self, nbytes: int) -> None:
        self.allocated += nbytes
        self.reserved = max(self.reserved, self.allocated)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def capture_graph(self, pool_bytes: int) -> None:
        # The pool is the graph's own: reserved from the device, outside the allocated count.
        self.reserved += pool_bytes
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def reset_peak_memory_stats(self, device: object) -> None:
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved

    def max_memory_allocated(self, device: object) -> int:
        return self.peak_allocated

    def max_memory_reserved(self, device: object) -> int:
        return self.peak_reserved


class _Session:
    def __init__(self, tracker: MemoryTracker) -> None:
        self.tracker = tracker

    def read_memory(self) -> MemoryStats:
        return self.tracker.read()


def _eager() -> MemoryTracker:
    fake = FakeGraphAllocator()
    tracker = MemoryTracker(torch.device("cuda", 0), cuda=fake)
    tracker.start()
    fake.allocate(EAGER_PEAK)
    return tracker


def _graphed() -> MemoryTracker:
    fake = FakeGraphAllocator()
    tracker = MemoryTracker(torch.device("cuda", 0), cuda=fake, graph_pools=True)
    fake.allocate(GRAPHED_ALLOCATED)  # static inputs, weights
    fake.capture_graph(GRAPH_POOL)  # during warm-up, before the steady window
    tracker.start()
    return tracker


def test_the_graph_arms_peak_holds_its_pool() -> None:
    stats = _graphed().read()
    assert stats.cuda_max_allocated_bytes == GRAPHED_ALLOCATED  # the misleading figure
    assert stats.cuda_graph_pools
    assert stats.cuda_peak_bytes == GRAPHED_ALLOCATED + GRAPH_POOL


def test_an_eager_arms_peak_is_what_it_allocated() -> None:
    stats = _eager().read()
    assert not stats.cuda_graph_pools
    assert stats.cuda_peak_bytes == EAGER_PEAK


def test_a_worker_reports_the_peak_with_the_pool() -> None:
    assert peak_memory_of(_Session(_graphed())) == GRAPHED_ALLOCATED + GRAPH_POOL
    assert peak_memory_of(_Session(_eager())) == EAGER_PEAK


def test_graphs_are_not_kept_as_a_memory_saving_nor_fit_a_cap_they_exceed() -> None:
    eager = PeakMemory.of([peak_memory_of(_Session(_eager())) or 0])
    graphed = PeakMemory.of([peak_memory_of(_Session(_graphed())) or 0])
    assert eager is not None and graphed is not None
    assert not lowers_memory(eager, graphed)
    assert not fits(graphed, 72 * MB)  # a cap the eager recipe meets
    assert fits(eager, 72 * MB)
