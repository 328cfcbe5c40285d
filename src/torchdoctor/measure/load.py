"""Notice other work on the machine while something is measured (`core.load.MachineLoad`).

`LoadProbe.start()` opens a window and `LoadWindow.stop()` closes it into a `MachineLoad`:

- CPU: the busy time of the cores this process may run on (/proc/stat through psutil: user,
  nice, system, irq, softirq and steal; `guest` is already inside `user`), minus the CPU
  time of this process tree (itself, its live descendants, and the children they reaped),
  over the window's wall time. What is left is other processes' work (or, for steal, other
  virtual machines' on the same host).
- Load average (1 minute), as supporting evidence.
- GPU: other processes on the GPUs this job uses, through NVML when `pynvml` is installed
  (optional; absent, the GPU is not looked at). See `gpu_other_pids` for how the job's GPUs
  and its own processes are told apart, in a container too.

Every measuring command takes its probe from `default_load_probe()`, which tests replace with
a fake (`monkeypatch.setattr(torchdoctor.measure.load, "default_load_probe", ...)`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
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


#: Where process status and open files are read (tests point it at a fake tree).
PROC = Path("/proc")
#: A GPU's device node; N is the GPU's minor number, which NVML reports for its handle.
_GPU_NODE = re.compile(r"^/dev/nvidia(\d+)$")


def _ns_pids(pid: int) -> set[int]:
    """The pid in every pid namespace /proc shows for it (NSpid), the pid itself included."""
    ids = {pid}
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("NSpid:"):
                ids.update(int(x) for x in line.split()[1:] if x.isdigit())
    except OSError:
        pass
    return ids


def _gpu_nodes(pid: int) -> set[int]:
    """Minor numbers of the GPU device nodes (/dev/nvidiaN) the process holds open."""
    minors: set[int] = set()
    try:
        fds = list((PROC / str(pid) / "fd").iterdir())
    except OSError:
        return minors
    for fd in fds:
        try:
            match = _GPU_NODE.match(os.readlink(fd))
        except OSError:
            continue
        if match:
            minors.add(int(match.group(1)))
    return minors


def _own_tree(own_pid: int | None) -> list[int]:
    import psutil

    root = psutil.Process(own_pid)
    return [root.pid, *(c.pid for c in root.children(recursive=True))]


def gpu_other_pids(own_pid: int | None = None) -> list[int] | None:
    """Pids of other processes on the GPUs this process tree uses (NVML); None without pynvml.

    Only the job's GPUs count: another user's job on another GPU of a shared node shares
    nothing the measurement depends on (its CPU use shows in the CPU reading). A job that
    holds no GPU has none, so nothing on a GPU disturbs it.

    Which processes are the job's own: NVML reports pids in the pid namespace of the host, and
    in a container those are not the pids this process sees. Where this /proc shows the host's
    ids (no container, `--pid=host`, or the tool outside the job's namespace), a pid matches
    directly or through the NSpid line of /proc/PID/status (the pid in each namespace). Inside
    a container the host pids cannot be looked up at all (they are not in its /proc, so neither
    their start time nor their command line can be read, and NSpid lists only the container's
    ids), so a match by them is impossible and a guess by number could hit an unrelated
    process. There the job's GPUs and its own processes on them are found from the device
    nodes its processes hold open (/proc/PID/fd -> /dev/nvidiaN, N = the GPU's NVML minor
    number), which no namespace renames: a GPU is disturbed when NVML lists more processes on
    it than the job has there, and then its NVML pids are reported (which of them are the
    job's cannot be told from inside). The CUDA driver may open the nodes of every visible
    GPU, so a container's job can be counted on a GPU it does not compute on: another process
    there then goes unseen, the error on the side of "not disturbed" that a container's own
    share of the node makes likely anyway.
    """
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        tree = _own_tree(own_pid)
        own: set[int] = set()
        for pid in tree:
            own |= _ns_pids(pid)
        holders: dict[int, int] = {}  # minor number -> own processes holding its node
        for pid in tree:
            for minor in _gpu_nodes(pid):
                holders[minor] = holders.get(minor, 0) + 1
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            pids = [int(p.pid) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]
            gpus.append((pynvml.nvmlDeviceGetMinorNumber(handle), pids))
    except Exception:  # NVML absent from the driver, no permission: the GPU is not judged
        return None
    listed = [pids for _, pids in gpus if own & set(pids)]
    if listed:  # NVML speaks this namespace's pids: the GPUs it lists the job on
        return sorted({p for pids in listed for p in pids if p not in own})
    others: set[int] = set()
    for minor, pids in gpus:  # another namespace's pids: count against the nodes held
        if minor in holders and len(pids) > holders[minor]:
            others.update(pids)
    return sorted(others)


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
