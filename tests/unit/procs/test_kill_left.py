"""A script's descendants in sessions of their own (torchrun's ranks) are ended with it.

Killing the script's process group does not reach a rank that torchrun started in a session
of its own; if the rank was stopped while its arm was paused, it stayed behind, stopped, for
good. `descendants` finds the tree before anything exits and `kill_left` ends what is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil

from torchdoctor.procs._tree import descendants, kill_left, signal_group

# A parent in its own process group that starts a child in a session of its own, prints the
# child's pid, and sleeps.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                         start_new_session=True)
print(child.pid, flush=True)
time.sleep(60)
"""


def test_a_stopped_descendant_in_its_own_session_outlives_the_group_kill_but_not_kill_left() -> (
    None
):
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, start_new_session=True
    )
    child_pid = None
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        child = psutil.Process(child_pid)
        tree = descendants(parent.pid)
        assert child_pid in [p.pid for p in tree]
        child.suspend()  # as `suspend_children` leaves a paused arm's processes
        signal_group(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        time.sleep(0.1)
        assert child.is_running() and child.status() == psutil.STATUS_STOPPED  # left behind
        kill_left(tree)
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    finally:
        signal_group(parent.pid, signal.SIGKILL)
        if child_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child_pid, signal.SIGKILL)
