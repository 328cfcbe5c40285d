"""The bootstrap's side of dying with its parent (inside the user's script's process).

A tuner or a `diagnose` that is killed (SIGKILL, out of memory) runs no cleanup: its script
would go on alone, holding a GPU's memory, and its DataLoader workers, stopped (SIGSTOP) while
their arm was paused (`procs/_tree.py`'s `suspend_children`), could never exit, so neither
could the script, which joins them as it unwinds. Two things prevent it:

- `die_with_parent`: the kernel sends this process SIGTERM when its parent dies
  (`prctl(PR_SET_PDEATHSIG)`, Linux only; elsewhere nothing). Linux fires it when the *thread*
  that started the process ends, so the launcher starts scripts from the thread that drives
  them. A parent that died before the call is caught by comparing the parent's pid, which the
  launcher passes in `PARENT_PID_ENV`.
- `resume_children`: before the script unwinds because its driver is gone (SIGTERM, or its
  control connection closed), every process under it is continued (SIGCONT), so a stopped
  DataLoader worker can take its shutdown and exit; and once more after the script has
  unwound, before the interpreter's exit joins its children.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from typing import Final

#: Environment variable carrying the launching process's pid to the bootstrap.
PARENT_PID_ENV: Final = "TORCHDOCTOR_PARENT_PID"
#: prctl(2)'s option number for the parent-death signal (linux/prctl.h).
PR_SET_PDEATHSIG: Final = 1


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Have the kernel send `sig` to this process when its parent dies; whether it was set.

    Linux only: elsewhere, or without the launcher's `PARENT_PID_ENV`, nothing is done.
    """
    parent = os.environ.pop(PARENT_PID_ENV, None)
    if not sys.platform.startswith("linux") or parent is None or not parent.isdigit():
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):  # no libc to load, or no prctl in it
        return False
    if os.getppid() != int(parent):
        # The parent died before the call: the kernel will never send it now.
        os.kill(os.getpid(), sig)
    return True


def resume_children() -> None:
    """Continue every process under this one (module docstring); nothing when psutil cannot
    read them."""
    try:
        import psutil

        children = psutil.Process().children(recursive=True)
    except Exception:  # psutil missing or the process table unreadable: nothing to do
        return
    for child in children:
        with contextlib.suppress(Exception):
            child.resume()
