"""Throughput and request-latency percentiles versus model instances x intra-op threads (CPU).

A CPU server can give all its cores to one process's intra-op threads, or run several
processes (instances), each with fewer threads, serving requests side by side: TorchServe's
workers, Triton's CPU instance groups. A model too small to keep many threads busy serves more
as several instances; a large one may serve best as one. The sweep doubles the instances,
each with `cores // instances` threads (instances x threads <= cores: every point uses the
machine, none oversubscribes it), and marks the knee on throughput against log2(instances)
as the other curves do (`serve.curves`), stopping early once more instances gain under 5%.

Each point serves closed-loop batches in every instance at once: the instances warm up at the
point's thread count, start together at one instant, each times `calls` calls, and each keeps
serving (untimed) until all have finished, so every timed call saw the point's full
contention. Throughput is the instances' sum of batch size over their mean call time; the
percentiles are of all the timed calls pooled (each request waits for its batch's call).

`InstancePool` holds the processes: each spawned (not forked: OpenMP's threads do not survive
a fork) and building its own model from the target's spec, as a deployment's processes do.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Protocol

import numpy as np

from torchdoctor.core.errors import MeasureError
from torchdoctor.knobs import apply_threads
from torchdoctor.measure import settled
from torchdoctor.serve._percentiles import percentile
from torchdoctor.serve.curves import DEFAULT_CALLS, MAX_POINT_WARMUP, doubling, sweep
from torchdoctor.serve.latency import timed_call
from torchdoctor.serve.records import Curve, CurvePoint
from torchdoctor.serve.target import load_target

#: Seconds an instance may take to start: spawn, import torch, build the model, one call.
START_TIMEOUT_S: Final = 300.0
#: Seconds a point's warm-up or timed calls may take in one instance before the sweep fails.
POINT_TIMEOUT_S: Final = 300.0
#: Lead time of the common start: enough for the "go" message to reach every instance.
START_LEAD_S: Final = 0.05


@dataclass(frozen=True)
class InstanceRun:
    """One instance's timed calls at a point, and when they began and ended (perf_counter,
    one monotonic clock for all processes on a host)."""

    times_s: list[float]
    start_s: float
    stop_s: float


#: Serves one point: (instances, threads each) -> each instance's run.
RunPoint = Callable[[int, int], list[InstanceRun]]


def instance_grid(cores: int) -> list[tuple[int, int]]:
    """(instances, threads) with instances doubling and threads the cores left to each."""
    if cores < 1:
        raise MeasureError(f"cores {cores} must be at least 1")
    return [(n, max(1, cores // n)) for n in doubling(cores)]


def instance_point(
    runs: Sequence[InstanceRun], batch_size: int, instances: int, threads: int
) -> CurvePoint:
    """One point from its instances' runs: summed throughput, pooled percentiles."""
    times = [t for r in runs for t in r.times_s]
    if not times:
        raise MeasureError(f"{instances} instances x {threads} threads timed no calls")
    rate = sum(
        batch_size * len(r.times_s) / (r.stop_s - r.start_s)
        for r in runs
        if r.times_s and r.stop_s > r.start_s
    )
    return CurvePoint(
        batch_size=batch_size,
        threads=threads,
        instances=instances,
        samples_per_s=rate,
        p50_s=percentile(times, 50.0),
        p95_s=percentile(times, 95.0),
        p99_s=percentile(times, 99.0),
    )


def instance_curve(
    run_point: RunPoint,
    batch_size: int,
    cores: int,
    *,
    progress: Callable[[str], None] | None = None,
) -> Curve:
    """Points along `instance_grid(cores)`, stopping once the curve is flat."""

    def point_at(step: tuple[int, int]) -> CurvePoint:
        instances, threads = step
        return instance_point(run_point(instances, threads), batch_size, instances, threads)

    return sweep(
        "instances",
        instance_grid(cores),
        point_at,
        lambda p: float(np.log2(p.instances or 1)),
        label=lambda step: f"{step[0]} instances x {step[1]} threads",
        progress=progress,
    )


class _Connection(Protocol):
    def send(self, obj: Any) -> None: ...

    def recv(self) -> Any: ...

    def poll(self, timeout: float | None = ...) -> bool: ...

    def close(self) -> None: ...


def serve_instance(conn: _Connection, stop: Any, spec: str, device: str, batch_size: int) -> None:
    """An instance's life (the spawned process's target): build the model, then serve points
    on command until told to end. Replies: ("ready",), ("warm",), ("ran", InstanceRun), or
    ("failed", message)."""
    try:
        target = load_target(spec, device=device)
        call, sync = target.request(batch_size), target.sync()
        call()
        sync()
    except Exception as exc:
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready",))
    clock = time.perf_counter
    while (message := conn.recv()) is not None:
        try:
            if message[0] == "warm":
                apply_threads(message[1])  # the threads knob's own setter
                warm: list[float] = []
                while len(warm) < MAX_POINT_WARMUP and not settled(warm):
                    warm.append(timed_call(call, sync, clock))
                conn.send(("warm",))
            else:  # ("go", start_at, calls)
                _, start_at, calls = message
                time.sleep(max(0.0, start_at - clock()))
                begin = clock()
                times = [timed_call(call, sync, clock) for _ in range(calls)]
                conn.send(("ran", InstanceRun(times, begin, clock())))
                # Keep the load on until every instance has its calls.
                while not stop.is_set():
                    call()
                    sync()
        except Exception as exc:
            conn.send(("failed", f"{type(exc).__name__}: {exc}"))
            return


class InstancePool:
    """Up to `count` instances of the model named by `spec`, each its own process, started as
    the points need them; a context manager that ends them. `run(instances, threads)` serves
    one point (a `RunPoint`).

    `context` is a multiprocessing context (spawn by default); tests pass one whose
    processes are threads, to check the protocol without starting processes.
    """

    def __init__(
        self,
        spec: str,
        count: int,
        *,
        device: str = "cpu",
        batch_size: int = 1,
        calls: int = DEFAULT_CALLS,
        context: Any = None,
    ) -> None:
        self._ctx = context or multiprocessing.get_context("spawn")
        self._spec, self._count, self._device = spec, count, device
        self._batch_size, self._calls = batch_size, calls
        self._stop = self._ctx.Event()
        self._conns: list[_Connection] = []
        self._procs: list[Any] = []

    def __enter__(self) -> InstancePool:
        return self

    def _grow(self, count: int) -> None:
        """Start instances until there are `count` (a sweep that stops early starts fewer)."""
        started: list[_Connection] = []
        while len(self._conns) < count:
            parent, child = self._ctx.Pipe()
            proc = self._ctx.Process(
                target=serve_instance,
                args=(child, self._stop, self._spec, self._device, self._batch_size),
                daemon=True,
            )
            proc.start()
            self._conns.append(parent)
            self._procs.append(proc)
            started.append(parent)
        for conn in started:
            self._expect(conn, "ready", START_TIMEOUT_S)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _expect(self, conn: _Connection, what: str, timeout: float) -> tuple[Any, ...]:
        try:
            if not conn.poll(timeout):
                raise MeasureError(
                    f"a model instance did not answer within {timeout:.0f} s ({what})"
                )
            reply = conn.recv()
        except (EOFError, OSError) as exc:
            raise MeasureError(f"a model instance ended unexpectedly ({what})") from exc
        if reply[0] == "failed":
            raise MeasureError(f"a model instance of {self._spec!r} failed: {reply[1]}")
        if reply[0] != what:
            raise MeasureError(f"a model instance answered {reply[0]!r}, not {what!r}")
        return tuple(reply)

    def run(self, instances: int, threads: int) -> list[InstanceRun]:
        """The first `instances` serve together, each with `threads` intra-op threads."""
        if not 1 <= instances <= self._count:
            raise MeasureError(f"{instances} instances asked of a pool of {self._count}")
        self._grow(instances)
        active = self._conns[:instances]
        for conn in active:
            conn.send(("warm", threads))
        for conn in active:
            self._expect(conn, "warm", POINT_TIMEOUT_S)
        self._stop.clear()
        start_at = time.perf_counter() + START_LEAD_S
        for conn in active:
            conn.send(("go", start_at, self._calls))
        try:
            return [self._expect(conn, "ran", POINT_TIMEOUT_S)[1] for conn in active]
        finally:
            self._stop.set()

    def close(self) -> None:
        self._stop.set()
        for conn in self._conns:
            with contextlib.suppress(OSError, ValueError):  # that instance has ended
                conn.send(None)
        for proc in self._procs:
            proc.join(timeout=10.0)
            if proc.is_alive() and hasattr(proc, "terminate"):
                proc.terminate()
                proc.join(timeout=5.0)
        for conn in self._conns:
            conn.close()
        self._conns, self._procs = [], []


__all__ = [
    "InstancePool",
    "InstanceRun",
    "RunPoint",
    "instance_curve",
    "instance_grid",
    "instance_point",
    "serve_instance",
]
