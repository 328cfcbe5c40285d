"""The parent side of a worker: a supervised process with a deadline and a memory cap.

Each session runs in its own spawned process (`torchdoctor.procs._worker`). While a request is
outstanding the parent polls the pipe, the process and its resident memory: a process that
dies is a `FailureKind.CRASH`, one that exceeds the memory cap is killed as `OOM`, one that
does not answer in time is killed as `TIMEOUT`. Each failure raises `WorkerFailure`, which the
tuner records as a failed trial before going on.

`InProcessWorker` answers the same requests in this process (no isolation, no timeout); the
statistical tests use it to run hundreds of simulated trials quickly.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import time
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Final, Protocol

import psutil

from torchdoctor.procs._failure import FailureKind, WorkerFailure
from torchdoctor.procs._protocol import Exit, Prepare, ReplyT, Request
from torchdoctor.procs._spec import SessionSpec
from torchdoctor.procs._tree import end_tree
from torchdoctor.procs._worker import SessionHost, worker_main

#: How often the parent checks the worker's liveness and memory while waiting. 50 ms keeps
#: the watchdog's reaction well under a training step of our workloads at negligible cost.
POLL_INTERVAL_S: Final = 0.05

#: Lines of the worker's log quoted in a crash reason.
_LOG_TAIL_LINES: Final = 3


def over_memory_cap(rss: int, cap: int | None) -> str | None:
    """Why resident memory `rss` breaks the cap of a worker's process (None when it does not)."""
    if cap is None or rss <= cap:
        return None
    return f"resident memory {rss / 2**20:.0f} MiB exceeded the cap of {cap / 2**20:.0f} MiB"


def tree_rss(pid: int | None) -> int:
    """Resident memory of process `pid` and all its children (a training job's DataLoader
    workers count against its cap); 0 once the process is gone."""
    try:
        proc = psutil.Process(pid)
        total = proc.memory_info().rss
        for child in proc.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += child.memory_info().rss
        return int(total)
    except psutil.Error:
        return 0


class MemoryCapped:
    """A worker whose process tree's resident memory is watched against a cap while it works:
    the peak is kept (`peak_rss_bytes`) and a breach ends the request as `FailureKind.OOM`."""

    peak_rss_bytes: int
    _memory_cap: int | None

    def _over_cap(self, pid: int | None) -> str | None:
        """Sample the tree's resident memory into the peak; why it breaks the cap, if it does."""
        rss = tree_rss(pid)
        self.peak_rss_bytes = max(self.peak_rss_bytes, rss)
        return over_memory_cap(rss, self._memory_cap)


def receive(
    conn: Connection, *, crashed: Callable[[], BaseException], between_polls: Callable[[], None]
) -> object:
    """The next message on a worker's pipe, polled every POLL_INTERVAL_S; between polls,
    `between_polls` watches the process (raising to give up); a pipe that breaks raises
    `crashed()`."""
    while True:
        if conn.poll(POLL_INTERVAL_S):
            try:
                message: object = conn.recv()
            except (EOFError, OSError):
                raise crashed() from None
            return message
        between_polls()


class Killable(Protocol):
    def close(self, *, kill: bool = False) -> None: ...


class WorkerLike(Protocol):
    """What drives a session: any worker answers the requests of `torchdoctor.procs._protocol`
    (raising `WorkerFailure` when it cannot)."""

    peak_rss_bytes: int

    def request(self, message: Request[ReplyT], *, timeout_s: float) -> ReplyT: ...

    def close(self) -> None: ...


def log_tail(path: Path | None) -> str:
    if path is None or not path.exists():
        return ""
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return " | ".join(lines[-_LOG_TAIL_LINES:])


#: Live workers, killed at interpreter exit. Workers are not daemonic (a daemonic process may
#: not start children, so DataLoader workers, the num_workers knob, would fail in every trial);
#: multiprocessing's own exit hook would then *join* a worker still waiting for requests.
#: This hook, registered after multiprocessing's (atexit runs last-in first-out), kills them
#: first. A SIGKILLed parent runs no hooks: its workers see EOF on the pipe and exit.
#: Script workers (procs/_script.py) register here too.
LIVE_WORKERS: weakref.WeakSet[Killable] = weakref.WeakSet()


@atexit.register
def _kill_live_workers() -> None:
    for worker in list(LIVE_WORKERS):
        worker.close(kill=True)


class SubprocessWorker(MemoryCapped):
    """One spawned worker process holding one session."""

    def __init__(self, *, memory_cap_bytes: int | None, log_path: Path | None) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._log_path = log_path
        # The worker's DataLoaders start their workers as this process's would (see
        # worker_main), not by the spawn that started the worker.
        start_method = (
            multiprocessing.get_start_method(allow_none=True)
            or multiprocessing.get_all_start_methods()[0]  # the platform's default, unset
        )
        self._proc = ctx.Process(
            target=worker_main,
            args=(child, str(log_path) if log_path else None, start_method, True),
            daemon=False,
        )
        self._proc.start()
        LIVE_WORKERS.add(self)
        child.close()
        self._memory_cap = memory_cap_bytes
        self.peak_rss_bytes = 0

    def _fail(self, kind: FailureKind, reason: str) -> WorkerFailure:
        self.close(kill=True)
        return WorkerFailure(kind, reason)

    def request(self, message: Request[ReplyT], *, timeout_s: float) -> ReplyT:
        try:
            self._conn.send(message)
        except (BrokenPipeError, OSError):
            raise self._fail(FailureKind.CRASH, self._crash_reason()) from None
        deadline = time.monotonic() + timeout_s

        def watch() -> None:
            if not self._proc.is_alive():
                raise self._fail(FailureKind.CRASH, self._crash_reason())
            over = self._over_cap(self._proc.pid)
            if over is not None:
                raise self._fail(FailureKind.OOM, over)
            if time.monotonic() > deadline:
                raise self._fail(FailureKind.TIMEOUT, f"no answer within {timeout_s:.0f} s")

        reply = receive(
            self._conn,
            crashed=lambda: self._fail(FailureKind.CRASH, self._crash_reason()),
            between_polls=watch,
        )
        return message.expect(reply)

    def _crash_reason(self) -> str:
        self._proc.join(timeout=2)
        code = self._proc.exitcode
        tail = log_tail(self._log_path)
        reason = f"worker process died (exit code {code})"
        return f"{reason}: {tail}" if tail else reason

    def close(self, *, kill: bool = False) -> None:
        if self._proc.is_alive() and not kill:
            with contextlib.suppress(OSError, BrokenPipeError):
                self._conn.send(Exit())
            self._proc.join(timeout=5)
        if self._proc.is_alive() and self._proc.pid is not None:
            # Its DataLoader workers too: a worker killed alone leaves them to notice its
            # death by their own watchdog, seconds later (procs/_tree.py).
            end_tree(self._proc.pid, term=False)
            self._proc.join(timeout=5)
        with contextlib.suppress(OSError):
            self._conn.close()
        LIVE_WORKERS.discard(self)


class InProcessWorker:
    """Same requests, answered in this process (for fast, deterministic statistical tests)."""

    def __init__(self) -> None:
        self._host = SessionHost()
        self.peak_rss_bytes = 0

    def request(self, message: Request[ReplyT], *, timeout_s: float) -> ReplyT:
        return message.expect(self._host.handle(message))

    def close(self) -> None:
        self._host.close()


def start_worker(
    spec: SessionSpec,
    *,
    isolate: bool,
    timeout_s: float,
    memory_cap_bytes: int | None = None,
    log_path: Path | None = None,
) -> tuple[WorkerLike, float]:
    """Start a worker and prepare its session; returns it with the prepare time in seconds."""
    worker: WorkerLike
    # On CUDA the cap is the device memory's (the worker sets it, below): the host RSS is not
    # what it bounds, and a CUDA context, the loaded kernels and pinned buffers alone take
    # around a GiB of it, so a cap of a few GiB read as RSS failed healthy CUDA workers.
    on_cuda = spec.device.split(":", 1)[0] == "cuda"
    if isolate:
        rss_cap = None if on_cuda else memory_cap_bytes
        worker = SubprocessWorker(memory_cap_bytes=rss_cap, log_path=log_path)
    else:
        worker = InProcessWorker()
    try:
        # The cap goes to the worker too: on CUDA it bounds the device memory there.
        prepare = Prepare(spec, memory_cap_bytes=memory_cap_bytes)
        reply = worker.request(prepare, timeout_s=timeout_s)
    except WorkerFailure:
        worker.close()
        raise
    return worker, float(reply.prepare_s)
