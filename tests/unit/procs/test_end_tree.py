"""`end_tree`: the one way a process tree is ended (SIGCONT, SIGTERM, SIGKILL after a grace).

A deadline ends the whole tree a command started, sessions of their own included (torchrun
starts its ranks so), and a stopped process (a paused arm's DataLoader worker) is continued
first, so that it takes its SIGTERM and unwinds instead of waiting for the SIGKILL.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from torchdoctor.procs import end_popen, end_tree, tree_of

# A process that writes "terminated" to a file when SIGTERM reaches it, then exits 0.
CLEAN_EXIT_ON_TERM = """
import signal, sys, time
def on_term(*_):
    open(sys.argv[1], "w").write("terminated")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
time.sleep(60)
"""


def _gone(process: psutil.Process) -> bool:
    return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE


def test_end_tree_reaches_a_grandchild_in_its_own_session() -> None:
    if psutil.LINUX is False:
        pytest.skip("setsid(1) is Linux's")
    parent = subprocess.Popen(["sh", "-c", "setsid sleep 60 & wait"])
    below: list[psutil.Process] = []
    for _ in range(100):  # until the grandchild has started
        below = psutil.Process(parent.pid).children(recursive=True)
        if any(p.name() == "sleep" for p in below):
            break
        time.sleep(0.05)
    grandchild = next(p for p in below if p.name() == "sleep")
    code = end_popen(parent, grace_s=5.0)
    assert code == parent.returncode is not None  # the shell is ended and reaped
    assert _gone(grandchild)


def test_a_stopped_process_is_continued_and_takes_its_sigterm(tmp_path: Path) -> None:
    marker = tmp_path / "term"
    proc = subprocess.Popen(
        [sys.executable, "-c", CLEAN_EXIT_ON_TERM, str(marker)], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        psutil.Process(proc.pid).suspend()  # as a paused arm's DataLoader worker is
        code = end_popen(proc, grace_s=10.0)
        # Continued first, it ran its handler within the grace: it was not SIGKILLed.
        assert code == 0
        assert marker.read_text() == "terminated"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_without_term_a_stopped_tree_is_killed_at_once() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    psutil.Process(proc.pid).suspend()
    tree = tree_of(proc.pid)
    assert [p.pid for p in tree] == [proc.pid]
    assert end_popen(proc, term=False) == -signal.SIGKILL  # its code, not psutil's reaping


def test_end_tree_ends_a_tree_by_pid() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    process = psutil.Process(proc.pid)
    end_tree(proc.pid, grace_s=5.0)
    assert _gone(process)
    proc.wait(timeout=5)


def test_a_gone_process_is_nothing_to_end() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert tree_of(proc.pid) == []
    end_tree(proc.pid)  # nothing to signal, no error
