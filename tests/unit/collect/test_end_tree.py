"""A deadline ends the whole tree a command started, sessions of their own included (torchrun
starts its ranks so)."""

from __future__ import annotations

import subprocess
import time

import psutil
import pytest

from torchdoctor.collect.launcher import end_tree


def test_end_tree_reaches_a_grandchild_in_its_own_session() -> None:
    if psutil.LINUX is False:
        pytest.skip("setsid(1) is Linux's")
    parent = subprocess.Popen(["sh", "-c", "setsid sleep 60 & wait"])
    for _ in range(100):  # until the grandchild has started
        below = psutil.Process(parent.pid).children(recursive=True)
        if any(p.name() == "sleep" for p in below):
            break
        time.sleep(0.05)
    grandchild = next(p for p in below if p.name() == "sleep")
    code = end_tree(parent, grace_s=5.0)
    assert code == parent.returncode is not None  # the shell is ended and reaped
    assert not grandchild.is_running() or grandchild.status() == psutil.STATUS_ZOMBIE
