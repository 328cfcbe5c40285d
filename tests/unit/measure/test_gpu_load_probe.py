"""Other processes on the GPU: only the job's GPUs, and the job's own processes recognised,
against a fake NVML that reports pids as the driver does (the host's pid namespace) and a
fake /proc holding what the kernel shows of this process tree."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from torchdoctor.measure import load as load_mod

ME = os.getpid()


class FakeNvml:
    """pynvml's calls the probe makes; `gpus` is one (minor number, pids listed) per GPU."""

    def __init__(self, gpus: list[tuple[int, list[int]]]) -> None:
        self.gpus = gpus

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetMinorNumber(self, handle: int) -> int:
        return self.gpus[handle][0]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=p, usedGpuMemory=1 << 30) for p in self.gpus[handle][1]]


def _proc(root: Path, pid: int, nspids: list[int], gpu_minors: list[int]) -> None:
    """What /proc shows of `pid`: its NSpid line and its open GPU device nodes."""
    (root / str(pid) / "fd").mkdir(parents=True)
    (root / str(pid) / "status").write_text(
        f"Name:\tpython\nPid:\t{pid}\nNSpid:\t{' '.join(map(str, nspids))}\n"
    )
    for fd, minor in enumerate([*gpu_minors, None]):
        target = f"/dev/nvidia{minor}" if minor is not None else "/tmp/log.txt"
        os.symlink(target, root / str(pid) / "fd" / str(fd + 3))


Setup = Callable[[list[tuple[int, list[int]]], list[int], list[int]], None]


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Setup:
    def setup(gpus: list[tuple[int, list[int]]], nspids: list[int], minors: list[int]) -> None:
        monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(gpus))
        monkeypatch.setattr(load_mod, "PROC", tmp_path, raising=False)
        _proc(tmp_path, ME, nspids, minors)

    return setup


def test_other_users_jobs_on_other_gpus_do_not_count(machine: Setup) -> None:
    # A shared node, no container: NVML's pids are ours. The job runs on GPU 1; another
    # user's job fills GPU 0, a third process shares GPU 1.
    machine([(0, [7001]), (1, [ME, 7002])], [ME], [0, 1])
    assert load_mod.gpu_other_pids() == [7002]


def test_own_process_under_its_host_pid_in_a_container(machine: Setup) -> None:
    # In a container NVML lists the job by its host pid (53117), which this /proc cannot
    # show; the job holds /dev/nvidia0 open, and NVML lists one process there: its own.
    machine([(0, [53117])], [ME], [0])
    assert load_mod.gpu_other_pids() == []


def test_another_process_beside_the_job_in_a_container(machine: Setup) -> None:
    machine([(0, [53117, 60210])], [ME], [0])
    assert load_mod.gpu_other_pids() == [53117, 60210]


def test_nspid_maps_the_job_to_the_pid_nvml_reports(machine: Setup) -> None:
    # This /proc is the parent namespace's: NSpid names the job's pid in both.
    machine([(0, [53117, 60210]), (1, [61000])], [53117, ME], [0, 1])
    assert load_mod.gpu_other_pids() == [60210]


def test_a_job_without_a_gpu_is_not_disturbed_by_gpu_work(machine: Setup) -> None:
    machine([(0, [7001])], [ME], [])
    assert load_mod.gpu_other_pids() == []
