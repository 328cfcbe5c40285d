"""The child side of a workload worker: one process holds one prepared session and runs
chunks of steps.

The parent (`torchdoctor.procs._supervisor`) sends the requests of `torchdoctor.procs._protocol`
over a pipe and gets its replies, so a crash, a hang or an out-of-memory inside the session
kills at most this process. `Prepare` carries the `SessionSpec`; on CUDA its memory cap bounds
this process's device memory. `Run` with `release` hands the CUDA caching allocator's free
blocks back to the device after the steps (see `release_device_memory`). `Reference` builds a
fresh session of the prepared spec whose initial weights carry the no-op perturbation `i`
(`torchdoctor.engine.perturb`) and returns its losses; the prepared session is untouched (on
CUDA it is parked meanwhile, and the reference's blocks go back after it). `Park` and `Unpark`
move the session's trained state off the GPU and back (`torchdoctor.engine.park`), so that
another worker can use the whole device between this one's chunks.

An exception raised by the session becomes a `Failed` reply, its kind from
`classify_exception`.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import os
import resource
import signal
import time
from multiprocessing.connection import Connection
from typing import Any

from torchdoctor.procs._failure import FailureKind, classify_exception
from torchdoctor.procs._protocol import (
    Done,
    Exit,
    Failed,
    Losses,
    Park,
    Parked,
    Prepare,
    Prepared,
    Ran,
    Reference,
    Release,
    Reply,
    Request,
    Run,
    StepRow,
    Unpark,
)
from torchdoctor.procs._spec import SessionLike, SessionSpec, build_session, peak_memory_of


def _rss_peak_bytes() -> int:
    # ru_maxrss is in KiB on Linux (bytes on macOS; this tool targets Linux training hosts).
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _torch_cuda() -> Any:
    import torch

    return torch.cuda


def limit_device_memory(cuda: Any, device: str, cap_bytes: int) -> float:
    """Bound this process's CUDA caching allocator to `cap_bytes` of `device`; the fraction.

    The parent's resident-memory watch sees host memory only; device memory is bounded here,
    with torch.cuda.set_per_process_memory_fraction: an allocation past it raises the same
    OutOfMemoryError a full GPU would, which the worker reports as `FailureKind.OOM`.
    """
    _, _, index_text = device.partition(":")
    index = int(index_text) if index_text else int(cuda.current_device())
    total = int(cuda.get_device_properties(index).total_memory)
    fraction = min(1.0, cap_bytes / total)
    cuda.set_per_process_memory_fraction(fraction, index)
    return fraction


def release_device_memory(cuda: Any) -> None:
    """Hand the caching allocator's free blocks back to the device (torch.cuda.empty_cache).

    The tuner runs two workers on one GPU in turns; blocks one keeps cached while the other
    runs count against the other's memory, so candidates ran out of memory early and the
    batch search stopped near half the real capacity. Only when CUDA was initialized here:
    the call would otherwise create a context for nothing.
    """
    if cuda.is_initialized():
        cuda.empty_cache()


class SessionHost:
    """Holds one session and answers requests; used in the child and by the in-process mode.

    `cuda` is `torch.cuda` (imported on first CUDA use; a fake allocator in tests); `mover`
    the `torchdoctor.engine.park.DeviceMover` parking goes through (default: the spec's CUDA
    device; a fake GPU in tests).
    """

    def __init__(self, cuda: Any = None, mover: Any = None) -> None:
        self.session: SessionLike | None = None
        self.spec: SessionSpec | None = None
        self._cuda = cuda
        self._mover = mover
        self._parking: Any = None
        self._on_cuda = False

    @property
    def cuda(self) -> Any:
        if self._cuda is None:
            self._cuda = _torch_cuda()
        return self._cuda

    def handle(self, request: Request[Any]) -> Reply:
        try:
            if isinstance(request, Prepare):
                return self._prepare(request)
            if isinstance(request, Reference):
                return self._reference(request.perturbation, request.steps)
            if isinstance(request, Run):
                if self.session is None:
                    return Failed(FailureKind.ERROR, "run before prepare")
                self._move(park=False)  # a driver that did not unpark first still runs
                # Each reply's peak is its own steps' (the session counts from its start
                # otherwise, warm-up's autotuning workspaces included).
                reset_peak = getattr(self.session, "reset_peak_memory", None)
                if callable(reset_peak):
                    reset_peak()
                steps = self.session.run_steps(request.steps, measure_phases=False)
                rows = tuple(
                    StepRow(float(s.total_s), s.samples, _finite_or_none(s.loss)) for s in steps
                )
                peak = peak_memory_of(self.session)
                if request.release and self._on_cuda:
                    release_device_memory(self.cuda)
                return Ran(rows, peak if peak is not None else _rss_peak_bytes())
            if isinstance(request, Release):
                if self._on_cuda:
                    release_device_memory(self.cuda)
                return Done()
            if isinstance(request, Park | Unpark):
                return self._move(park=isinstance(request, Park))
            return Failed(FailureKind.ERROR, f"unknown request {type(request).__name__}")
        except Exception as exc:
            return Failed(classify_exception(exc), f"{type(exc).__name__}: {exc}".strip()[:500])

    def _prepare(self, request: Prepare) -> Reply:
        if request.spec is None:
            return Failed(FailureKind.ERROR, "prepare without a session spec")
        start = time.perf_counter()
        spec = request.spec
        self._on_cuda = spec.device.split(":", 1)[0] == "cuda"
        cap = request.memory_cap_bytes
        if cap and self._on_cuda:
            limit_device_memory(self.cuda, spec.device, int(cap))
        self.session = build_session(spec)
        self.spec = spec
        return Prepared(time.perf_counter() - start)

    def _move(self, *, park: bool) -> Parked:
        """Park or unpark the session's trained state (a no-op off CUDA)."""
        session = self.session
        if not self._on_cuda or session is None or self.spec is None:
            return Parked()
        from torchdoctor.engine import CudaMover, Parking, trained_state

        if self._parking is None:
            self._parking = Parking(self._mover or CudaMover(self.spec.device))
        modules, optimizers, pinned = trained_state(session)
        if park:
            moved = self._parking.park(modules, optimizers, pinned=pinned)
        else:
            moved = self._parking.unpark()
        return Parked.of(moved)

    def _reference(self, perturbation: int, steps: int) -> Reply:
        if self.spec is None:
            return Failed(FailureKind.ERROR, "reference before prepare")
        # A second session in this process, built and run to the end, then dropped: one worker
        # serves every reference run, so the cost is steps, not process starts. On a GPU the
        # live session is parked meanwhile, so the two are never resident together.
        self._move(park=True)
        session = build_session(dataclasses.replace(self.spec, perturbation=perturbation))
        try:
            rows = session.run_steps(steps, measure_phases=False)
            return Losses(tuple(_finite_or_none(r.loss) for r in rows))
        finally:
            _close_session(session)
            del session
            if self._on_cuda:
                release_device_memory(self.cuda)  # the reference's blocks, cached

    def close(self) -> None:
        """Close the held session (its DataLoader workers and their queues) and drop it."""
        if self.session is not None:
            session, self.session = self.session, None
            _close_session(session)


def _close_session(session: SessionLike) -> None:
    close = getattr(session, "close", None)
    if callable(close):
        close()


def _finite_or_none(loss: float | None) -> float | None:
    # NaN does not survive every JSON encoder; the parent treats None as non-finite.
    if loss is None:
        return None
    value = float(loss)
    return value if math.isfinite(value) else None


def preload(device: str) -> None:
    """What a worker's first `Prepare` would otherwise pay first: torch's import and, on a
    CUDA device, its context (about 10 s of a trial's process start on an H200 together with
    the build, records of 2026-11-28)."""
    import torch

    if device.split(":", 1)[0] == "cuda" and torch.cuda.is_available():
        torch.zeros(1, device=device)  # creates the context: CUDA initializes lazily


def worker_main(
    conn: Connection,
    log_path: str | None,
    start_method: str | None = None,
    own_process: bool = False,
    preload_device: str | None = None,
) -> None:
    """Entry point of a worker process (multiprocessing spawn target); `own_process` when it
    is one (the process's signal dispositions are its own to set), not a thread of a test;
    `preload_device`: torch imported (and the CUDA context made) before the first request.

    `start_method` is the parent's default multiprocessing start method, which a user's own
    training process would have (fork on Linux up to Python 3.13). A spawned process's
    default is spawn, so without it the session's DataLoader workers (the num_workers knob)
    would start by spawn, re-importing torch in each, which a user's job does not pay; and
    their queues would be made of named semaphores registered with the parent's resource
    tracker, which a worker killed at its deadline leaves behind and the tracker reports
    as leaked when the command ends. Fork-made semaphores are unlinked at creation.
    """
    if own_process:
        # Ctrl-C reaches the whole foreground process group, this worker included: the tuner
        # decides what an interruption ends (it closes its arms as it unwinds), so a worker
        # does not die of it first, as a crashed trial, while the tuner still reads its pipe.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if start_method is not None:
        multiprocessing.set_start_method(start_method, force=True)
    if log_path:
        # The session's own prints and warnings (torch.compile is chatty) go to the trial log,
        # not into the user's terminal; the parent quotes its tail when the worker crashes.
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    if preload_device is not None:
        preload(preload_device)
    host = SessionHost()
    try:
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                return  # the parent went away (killed or done): nothing left to serve
            if isinstance(request, Exit):
                return
            conn.send(host.handle(request))
    finally:
        # The session is closed here, before the process exits: its DataLoader workers are
        # stopped and their queues released by the session's own close, not left to the
        # order in which the interpreter's teardown happens to free them.
        host.close()
