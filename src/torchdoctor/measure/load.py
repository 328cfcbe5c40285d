"""Notice other work on the machine while something is measured (`core.load.MachineLoad`).

`LoadProbe.start()` opens a window and `LoadWindow.stop()` closes it into a `MachineLoad`:

- CPU: the busy time of the cores this process may run on (/proc/stat through psutil: user,
  nice, system, irq, softirq and steal; `guest` is already inside `user`), minus the CPU
  time of this process tree (itself, its live descendants, and the children they reaped),
  over the window's wall time. What is left is other processes' work (or, for steal, other
  virtual machines' on the same host).
- Load average (1 minute), as supporting evidence.
- GPU: processes outside this tree that hold the GPU, through NVML when `pynvml` is
  installed (optional; absent, the GPU is not looked at).

Every measuring command takes its probe from `default_load_probe()`, which tests replace with
a fake (`monkeypatch.setattr(torchdoctor.measure.load, "default_load_probe", ...)`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from torchdoctor.core.load import MachineLoad, judge


class LoadWindow(Protocol):
    def stop(self) -> MachineLoad: ...


class LoadProbe(Protocol):
    def start(self) -> LoadWindow: ...


def _allowed_cpus() -> list[int] | None:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return None


def _busy_s(times: Any) -> float:
    return float(
        times.user
        + getattr(times, "nice", 0.0)
        + times.system
        + getattr(times, "irq", 0.0)
        + getattr(times, "softirq", 0.0)
        + getattr(times, "steal", 0.0)
    )


def cores_busy_s(cpus: list[int] | None) -> float:
    """CPU seconds the cores in `cpus` (all cores when None) have been busy since boot."""
    import psutil

    if cpus is None:
        return _busy_s(psutil.cpu_times())
    per_cpu = psutil.cpu_times(percpu=True)
    return sum(_busy_s(per_cpu[i]) for i in cpus if i < len(per_cpu))


def tree_cpu_s(pid: int | None = None) -> float:
    """CPU seconds of a process, its live descendants and every child they have reaped."""
    import psutil

    root = psutil.Process(pid)
    total = 0.0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        procs = [root]
    for proc in procs:
        try:
            t = proc.cpu_times()
        except psutil.Error:  # exited between the listing and the read
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def gpu_other_pids(own_pid: int | None = None) -> list[int] | None:
    """Pids outside this process tree running on any GPU (NVML); None without pynvml."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None
    import psutil

    try:
        pynvml.nvmlInit()
        root = psutil.Process(own_pid)
        own = {root.pid, *(c.pid for c in root.children(recursive=True))}
        others: set[int] = set()
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            for info in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if info.pid not in own:
                    others.add(int(info.pid))
        return sorted(others)
    except Exception:  # NVML absent from the driver, no permission: the GPU is not judged
        return None


def _load_avg() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


@dataclass
class PsutilLoadProbe:
    """The real probe (see the module docstring); every source can be swapped for tests."""

    clock: Callable[[], float] = time.monotonic
    busy: Callable[[list[int] | None], float] = cores_busy_s
    own: Callable[[], float] = tree_cpu_s
    gpu: Callable[[], list[int] | None] = gpu_other_pids
    load_avg: Callable[[], float | None] = _load_avg
    cpus: list[int] | None = field(default_factory=_allowed_cpus)

    def start(self) -> _PsutilWindow:
        return _PsutilWindow(self, self.clock(), self.busy(self.cpus), self.own(), self.gpu())


@dataclass
class _PsutilWindow:
    probe: PsutilLoadProbe
    t0: float
    busy0: float
    own0: float
    gpu0: list[int] | None

    def stop(self) -> MachineLoad:
        p = self.probe
        interval = p.clock() - self.t0
        own = p.own() - self.own0
        other = (p.busy(p.cpus) - self.busy0) - own
        gpu1 = p.gpu()
        gpu = (
            None
            if self.gpu0 is None and gpu1 is None
            else sorted({*(self.gpu0 or []), *(gpu1 or [])})
        )
        cores = len(p.cpus) if p.cpus is not None else (os.cpu_count() or 1)
        return judge(
            interval_s=interval,
            cores=cores,
            own_cpu_s=own,
            other_cpu_s=other,
            load_avg_1m=p.load_avg(),
            gpu_other_pids=gpu,
        )


def default_load_probe() -> LoadProbe:
    """The probe every measuring command uses (tests replace this function)."""
    return PsutilLoadProbe()


@dataclass
class LoadWatch:
    """What `watch_load` yields: `reading` is set when the block ends."""

    reading: MachineLoad | None = None


@contextmanager
def watch_load(probe: LoadProbe | None = None) -> Iterator[LoadWatch]:
    """Record the machine's load over the `with` block (also when it raises)."""
    watch = LoadWatch()
    window = (probe or default_load_probe()).start()
    try:
        yield watch
    finally:
        watch.reading = window.stop()
