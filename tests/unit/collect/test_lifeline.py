"""The bootstrap dies with its launcher and frees its stopped children (collect/_lifeline.py).

Real processes: a launcher (a Python process) starts a child that calls `die_with_parent`,
and the launcher is SIGKILLed, as a tuner killed outright is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from torchdoctor.collect._lifeline import PARENT_PID_ENV, die_with_parent, resume_children

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")

#: Seconds the kernel's parent-death signal may take to end the child (it is sent at once).
GONE_TIMEOUT_S = 20.0

# The child: asks to die with its parent, says so, then waits.
CHILD = """
import sys, time
from torchdoctor.collect._lifeline import die_with_parent
print(die_with_parent(), flush=True)
time.sleep(60)
"""

# The launcher: starts the child as the project's launcher does (its pid in the environment),
# prints the child's pid once the child is set, then waits.
LAUNCHER = f"""
import os, subprocess, sys, time
env = dict(os.environ, {PARENT_PID_ENV}=str(os.getpid()))
child = subprocess.Popen([sys.executable, "-c", {CHILD!r}], env=env, stdout=subprocess.PIPE)
assert child.stdout.readline().strip() == b"True"
print(child.pid, flush=True)
time.sleep(60)
"""


def test_without_the_launchers_pid_nothing_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PARENT_PID_ENV, raising=False)
    assert die_with_parent() is False


def test_the_child_dies_with_its_launcher() -> None:
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE)
    child_pid = None
    try:
        assert launcher.stdout is not None
        child_pid = int(launcher.stdout.readline())
        child = psutil.Process(child_pid)
        launcher.kill()  # no cleanup runs in it
        launcher.wait(timeout=10)
        gone, _ = psutil.wait_procs([child], timeout=GONE_TIMEOUT_S)
        assert gone == [child]  # ended by the kernel (not our child: its code is not ours to read)
    finally:
        launcher.kill()
        if child_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child_pid, signal.SIGKILL)


def test_a_launcher_gone_before_the_call_is_caught() -> None:
    # The pid given is not the child's parent: its launcher died (the child moved to init).
    env = dict(os.environ, **{PARENT_PID_ENV: str(os.getpid() + 999_999)})
    child = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, timeout=60, check=False
    )
    assert child.returncode == -signal.SIGTERM


def test_resume_children_continues_a_stopped_child() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        process = psutil.Process(child.pid)
        process.suspend()
        deadline = time.monotonic() + 10
        while process.status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
            time.sleep(0.05)
        resume_children()
        assert process.status() != psutil.STATUS_STOPPED
    finally:
        child.kill()
        child.wait()
