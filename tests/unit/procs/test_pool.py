"""Workers started ahead of need: a trial takes one already started, and the pool refills."""

from __future__ import annotations

import time
from pathlib import Path

import psutil

from torchdoctor.procs import (
    CUDA_POOL_SIZE,
    Run,
    SessionSpec,
    WorkerPool,
    end_now,
    pool_size,
    start_worker,
)
from torchdoctor.procs._tree import descendants

SIM = "sim_session:make_session"
#: A request's deadline: generous, as a busy shared host starts a worker slowly.
DEADLINE_S = 600.0


def torch_loaded(pid: int) -> bool:
    """Whether process `pid` has torch's library mapped (it imported torch)."""
    try:
        return any("libtorch" in m.path for m in psutil.Process(pid).memory_maps())
    except psutil.Error:
        return False


def wait_until(check: object, timeout_s: float = DEADLINE_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(check) and check():
            return True
        time.sleep(0.2)
    return False


def test_a_pool_is_kept_on_a_gpu_only() -> None:
    assert pool_size("cuda:0", isolate=True) == CUDA_POOL_SIZE > 0
    assert pool_size("cpu", isolate=True) == 0
    assert pool_size("cuda", isolate=False) == 0


def test_the_pool_hands_out_a_started_worker_and_starts_the_next(tmp_path: Path) -> None:
    pool = WorkerPool("cpu", 1, log_dir=tmp_path)
    try:
        assert pool.started == 1
        log = tmp_path / "worker-001-candidate.log"
        worker = pool.take(log_path=log)
        assert worker is not None and worker.pid is not None
        # Started before anyone asked for a session: torch is imported ahead of `Prepare`.
        assert wait_until(lambda: torch_loaded(worker.pid or 0))
        assert pool.started == 2 and pool.taken == 1  # another started in its place
        assert worker.log_path == log and log.exists()
        spec = SessionSpec(workload="sim", recipe={}, factory=SIM, options={"base_step_s": 0.01})
        same, prepare_s = start_worker(spec, isolate=True, timeout_s=DEADLINE_S, started=worker)
        assert same is worker and prepare_s >= 0
        ran = same.request(Run(3), timeout_s=DEADLINE_S)
        assert len(ran.steps) == 3
        worker.close()
    finally:
        pool.close()
    # The worker never taken is ended with its log.
    assert list(tmp_path.glob("pool-*.log")) == []


def test_end_now_ends_a_worker_and_its_children_without_waiting(tmp_path: Path) -> None:
    pool = WorkerPool("cpu", 1, log_dir=tmp_path)
    worker = pool.take()
    pool.close()
    assert worker is not None and worker.pid is not None
    pid = worker.pid
    end_now(worker)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert descendants(pid) == []
