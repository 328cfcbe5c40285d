"""Two workers on one GPU: cached device memory is handed back, and the cap bounds it.

`FakeGpu` models the CUDA caching allocator of each process on a shared device: a chunk of
steps allocates its working set, and freeing it keeps the blocks *reserved* (cached) by that
process until `empty_cache()`; an allocation that does not fit beside everything reserved on
the device, or past the process's `set_per_process_memory_fraction`, raises CUDA's OOM.
"""

from __future__ import annotations

from typing import Any

import pytest

from torchdoctor.procs import (
    Failed,
    FailureKind,
    Prepare,
    Prepared,
    Ran,
    Run,
    SessionHost,
    SessionSpec,
)

GIB = 2**30


class FakeGpu:
    def __init__(self, total: int) -> None:
        self.total = total
        self.reserved: dict[int, int] = {}  # per process (allocator), bytes held from the device


class FakeProcessCuda:
    """The `torch.cuda` one worker process sees."""

    def __init__(self, gpu: FakeGpu, pid: int) -> None:
        self.gpu, self.pid = gpu, pid
        self.initialized = False
        self.fraction = 1.0
        gpu.reserved[pid] = 0

    # what a session's steps do
    def run_chunk(self, working_set: int) -> None:
        self.initialized = True
        held = self.gpu.reserved[self.pid]
        need = max(0, working_set - held)  # cached blocks are reused first
        others = sum(v for k, v in self.gpu.reserved.items() if k != self.pid)
        if held + need > self.fraction * self.gpu.total or others + held + need > self.gpu.total:
            raise RuntimeError(f"CUDA out of memory. Tried to allocate {need} bytes")
        self.gpu.reserved[self.pid] = held + need  # freed after the step, but kept cached

    # the torch.cuda API the worker uses
    def is_initialized(self) -> bool:
        return self.initialized

    def empty_cache(self) -> None:
        self.gpu.reserved[self.pid] = 0  # nothing is allocated between chunks

    def current_device(self) -> int:
        return 0

    def get_device_properties(self, index: int) -> Any:
        return type("Props", (), {"total_memory": self.gpu.total})()

    def set_per_process_memory_fraction(self, fraction: float, device: int) -> None:
        self.fraction = fraction


class Step:
    total_s, samples, loss = 0.01, 8, 1.0


class FakeGpuSession:
    def __init__(self, cuda: FakeProcessCuda, working_set: int) -> None:
        self.cuda, self.working_set = cuda, working_set

    def run_steps(self, n: int, *, measure_phases: bool) -> list[Step]:
        self.cuda.run_chunk(self.working_set)
        return [Step() for _ in range(n)]


PROCESSES: dict[int, FakeProcessCuda] = {}


def make_session(workload: str, recipe: dict[str, Any], *, device: str, seed: int,
                 pid: int, working_set: int) -> FakeGpuSession:  # fmt: skip
    return FakeGpuSession(PROCESSES[pid], working_set)


def _arm(gpu: FakeGpu, pid: int, working_set: int, cap: int | None = None) -> SessionHost:
    PROCESSES[pid] = FakeProcessCuda(gpu, pid)
    host = SessionHost(cuda=PROCESSES[pid])
    spec = SessionSpec("fake", {}, device="cuda:0", factory=f"{__name__}:make_session",
                       options={"pid": pid, "working_set": working_set})  # fmt: skip
    prepared = host.handle(Prepare(spec, memory_cap_bytes=cap))
    assert isinstance(prepared, Prepared), prepared
    return host


@pytest.mark.parametrize("release", [False, True])
def test_two_arms_of_60_percent_fit_in_turns_only_when_the_idle_one_releases(
    release: bool,
) -> None:
    gpu = FakeGpu(total=10 * GIB)
    best, candidate = _arm(gpu, 1, 6 * GIB), _arm(gpu, 2, 6 * GIB)
    replies = []
    for _ in range(2):  # interleaved chunks, as the tuner runs them
        for host in (best, candidate):
            replies.append(host.handle(Run(2, release=release)))
    # Without the release the candidate's first chunk meets the best arm's cached 6 GiB.
    ran = [isinstance(r, Ran) for r in replies]
    assert ran == ([True] * 4 if release else [True, False, True, False])
    if not release:
        failed = replies[1]
        assert isinstance(failed, Failed) and failed.kind is FailureKind.OOM


def test_max_memory_bounds_the_device_memory_of_a_cuda_worker() -> None:
    gpu = FakeGpu(total=10 * GIB)
    host = _arm(gpu, 3, 3 * GIB, cap=2 * GIB)
    assert PROCESSES[3].fraction == pytest.approx(0.2)
    reply = host.handle(Run(1))
    assert isinstance(reply, Failed) and reply.kind is FailureKind.OOM


def test_max_memory_caps_the_device_not_the_host_rss_of_a_cuda_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torchdoctor.procs import _supervisor

    built: list[int | None] = []
    prepared: list[int | None] = []

    class RecordingWorker:
        peak_rss_bytes = 0

        def __init__(self, *, memory_cap_bytes: int | None, log_path: object) -> None:
            built.append(memory_cap_bytes)  # what the RSS watch would hold the process to

        def request(self, message: Any, *, timeout_s: float) -> Any:
            prepared.append(message.memory_cap_bytes)  # what the worker bounds on its device
            return Prepared(0.0)

        def close(self, *, kill: bool = False) -> None:
            pass

    monkeypatch.setattr(_supervisor, "SubprocessWorker", RecordingWorker)
    for device in ("cuda:0", "cpu"):
        spec = SessionSpec("fake", {}, device=device, factory=f"{__name__}:make_session")
        _supervisor.start_worker(spec, isolate=True, timeout_s=1, memory_cap_bytes=2 * GIB)
    assert built == [None, 2 * GIB]  # a CUDA context alone takes about 1 GiB of host RSS
    assert prepared == [2 * GIB, 2 * GIB]
