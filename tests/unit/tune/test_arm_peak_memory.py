"""An arm's peak memory is its steady chunks', not its warm-up's.

`PeakSession` keeps its peak as the CUDA caching allocator's statistics do (the largest
allocation since `reset_peak_memory_stats`); its first step, like an autotuning or cuDNN
benchmark warm-up, takes a scratch workspace the steady steps never need again.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from torchdoctor.procs import Prepare, Prepared, ReplyT, Request, SessionHost, SessionSpec
from torchdoctor.tune.arms import Arm, MeasurePlan

GIB = 2**30
WARM_UP_WORKSPACE = 10 * GIB
STEADY = 2 * GIB


class PeakSession:
    def __init__(self) -> None:
        self.peak = 0
        self.steps = 0

    def run_steps(self, n: int, *, measure_phases: bool) -> list[Any]:
        for _ in range(n):
            self.steps += 1
            self.peak = max(self.peak, WARM_UP_WORKSPACE if self.steps == 1 else STEADY)
        return [SimpleNamespace(total_s=0.01, samples=8, loss=1.0)] * n

    def reset_peak_memory(self) -> None:
        self.peak = 0

    def read_memory(self) -> Any:
        return SimpleNamespace(cuda_max_allocated_bytes=self.peak, cpu_peak_rss_bytes=1)


def make_session(workload: str, recipe: dict[str, Any], *, device: str, seed: int) -> Any:
    return PeakSession()


class HostWorker:
    """The worker protocol answered in this process by the real `SessionHost`."""

    peak_rss_bytes = 0

    def __init__(self) -> None:
        self.host = SessionHost()
        spec = SessionSpec("fake", {}, device="cpu", factory=f"{__name__}:make_session")
        assert isinstance(self.host.handle(Prepare(spec)), Prepared)

    def request(self, message: Request[ReplyT], *, timeout_s: float) -> ReplyT:
        return message.expect(self.host.handle(message))  # type: ignore[arg-type]

    def close(self) -> None:
        pass


def test_peak_memory_is_the_steady_chunks_not_the_warm_ups() -> None:
    arm = Arm(recipe={}, worker=HostWorker(), objective="throughput")
    arm.warm_up(MeasurePlan(warmup_steps=3, min_chunk_s=0.0), timeout=lambda: 60.0)
    for _ in range(2):
        arm.run(4, timeout=lambda: 60.0)
    assert arm.peak_memory_bytes == STEADY
