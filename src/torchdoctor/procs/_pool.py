"""Workers started ahead of need, and workers ended at once.

On a GPU a trial's process start is most of its cost: the H200 records (2026-11-28) show
10-11 s per worker for torch's import, the CUDA context and the build, against about 5 s of
GPU work in the whole trial. A `WorkerPool` keeps a few workers started (torch imported and,
on CUDA, the context up: `procs._worker.preload`) while the current ones measure; a trial that
needs a process takes one (`take`) and pays only its build, and the pool starts the next in
its place. On a CPU host the pool is off by default (`pool_size`): a starting process imports
torch on the same cores the timed chunks run on.

`end_now` ends a worker that is no longer needed without waiting for its session to close (a
first pair of arms ended before a second starts): its process tree is killed by the process
layer's one way of ending what is left (`procs._tree.kill_left`).
"""

from __future__ import annotations

import itertools
from collections import deque
from pathlib import Path
from typing import Final

from torchdoctor.procs._supervisor import SubprocessWorker, WorkerLike
from torchdoctor.procs._tree import descendants, kill_left

#: Workers a pool keeps started on a GPU: a trial opens one candidate, and its second pair or
#: the confirmation's pair two at a time, so two are ready for the next need.
CUDA_POOL_SIZE: Final = 2


def pool_size(device: str, *, isolate: bool) -> int:
    """Workers to keep started for a study on `device`: `CUDA_POOL_SIZE` on a GPU, none on a
    CPU (module docstring) or without isolation (no processes)."""
    if not isolate:
        return 0
    return CUDA_POOL_SIZE if device.split(":", 1)[0] == "cuda" else 0


class WorkerPool:
    """`size` workers kept started for `device`, logging under `log_dir` until taken."""

    def __init__(self, device: str, size: int, *, log_dir: Path | None = None) -> None:
        self.device = device
        self.size = size
        self.log_dir = log_dir
        self._ready: deque[SubprocessWorker] = deque()
        self._names = itertools.count(1)
        self.started = 0
        self.taken = 0
        self.fill()

    def _start(self) -> SubprocessWorker:
        log = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log = self.log_dir / f"pool-{next(self._names):03d}.log"
        self.started += 1
        # The RSS cap is not the device's; on CUDA the cap goes with `Prepare`
        # (`start_worker`), so a pooled worker starts without one.
        return SubprocessWorker(memory_cap_bytes=None, log_path=log, preload_device=self.device)

    def fill(self) -> None:
        """Start workers until `size` are ready."""
        while len(self._ready) < self.size:
            self._ready.append(self._start())

    def take(self, *, log_path: Path | None = None) -> SubprocessWorker | None:
        """A started worker (its log renamed to `log_path`), another started in its place;
        None when the pool keeps none."""
        if self.size <= 0:
            return None
        if not self._ready:
            self.fill()
        worker = self._ready.popleft()
        if log_path is not None:
            worker.move_log(log_path)
        self.taken += 1
        self.fill()
        return worker

    def close(self) -> None:
        """End the workers never taken."""
        while self._ready:
            worker = self._ready.popleft()
            end_now(worker)
            if worker.log_path is not None:  # a log of no arm's
                worker.log_path.unlink(missing_ok=True)


def end_now(worker: WorkerLike) -> None:
    """End `worker` and its process tree now, without waiting for its session to close; a
    worker in this process (no pid) is closed."""
    pid = getattr(worker, "pid", None)
    if pid is None or not isinstance(worker, SubprocessWorker):
        worker.close()
        return
    # Its children (DataLoader workers) first: killed, the worker could not stop them.
    kill_left(descendants(pid))
    worker.close(kill=True)
