"""Process trees: the one way the project ends (and holds still) the processes it started.

A job's processes are a tree, not a process: a script's DataLoader workers, torchrun's ranks
(each in a session of its own, which a signal to the command or its group misses), a rank's
own workers. `end_tree` ends all of them, found before any is signalled (a child whose parent
dies is moved to init and can no longer be found from it):

1. SIGCONT to every one: a stopped process (a paused arm's DataLoader workers,
   `suspend_children`) holds a SIGTERM until it is continued, and so never exits;
2. SIGTERM: a bootstrap unwinds and writes what it measured, a worker closes its session;
3. after `grace_s`, SIGKILL to those left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from typing import Any, Final

import psutil

#: Seconds a process tree gets after SIGTERM to unwind (a bootstrap writes its record, a
#: DataLoader joins its workers) before SIGKILL. The launcher's timeout grace since it had one.
TERMINATE_GRACE_S: Final = 10.0
#: Seconds to wait for the processes SIGKILLed to be gone (the kernel reaps them at once; a
#: process in uninterruptible sleep, on a hung device, may take longer, and is left).
KILL_WAIT_S: Final = 5.0


def tree_of(pid: int) -> list[psutil.Process]:
    """`pid`'s process and every process under it, found now; empty when it is gone."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def descendants(pid: int) -> list[psutil.Process]:
    """Every process under `pid`, found now (a child whose parent dies is moved to init)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def end_processes(
    processes: Iterable[psutil.Process],
    *,
    grace_s: float = TERMINATE_GRACE_S,
    term: bool = True,
    term_first_only: bool = False,
    popen: subprocess.Popen[Any] | None = None,
) -> None:
    """End `processes` (module docstring): SIGCONT, then SIGTERM (none without `term`; only
    to the first, the tree's root, with `term_first_only`), then SIGKILL to those left after
    `grace_s`. Those already gone are skipped. `popen`, this process's handle on one of them,
    is waited for through it: reaped by psutil instead, its exit code would be lost to it.

    `term_first_only` is for a bootstrap whose script unwinds on SIGTERM: its DataLoader
    workers, terminated with it, would make the DataLoader raise "worker killed" in the middle
    of the script's unwinding; the script's own shutdown stops them, and SIGKILL ends whatever
    is left after the root has gone.
    """
    tree = list(processes)
    for process in tree:
        with contextlib.suppress(psutil.Error):
            process.resume()
    alive = tree
    if term and tree:
        asked = tree[:1] if term_first_only else tree
        for process in asked:
            with contextlib.suppress(psutil.Error):
                process.terminate()
        still = _wait(asked, grace_s, popen)
        alive = [*still, *tree[len(asked) :]]
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    _wait(alive, KILL_WAIT_S, popen)


def _wait(
    processes: list[psutil.Process], timeout: float, popen: subprocess.Popen[Any] | None
) -> list[psutil.Process]:
    """Wait up to `timeout` for `processes` to exit; those still alive."""
    own = [p for p in processes if popen is not None and p.pid == popen.pid]
    others = [p for p in processes if p not in own]
    deadline = time.monotonic() + timeout
    alive: list[psutil.Process] = []
    if own and popen is not None:
        try:
            popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            alive += own
    _, still = psutil.wait_procs(others, timeout=max(0.0, deadline - time.monotonic()))
    return [*alive, *still]


def end_tree(
    pid: int,
    *,
    grace_s: float = TERMINATE_GRACE_S,
    term: bool = True,
    term_first_only: bool = False,
) -> None:
    """End `pid` and every process under it (module docstring, `end_processes`)."""
    end_processes(tree_of(pid), grace_s=grace_s, term=term, term_first_only=term_first_only)


def end_popen(
    proc: subprocess.Popen[Any],
    *,
    grace_s: float = TERMINATE_GRACE_S,
    term: bool = True,
    term_first_only: bool = False,
) -> int:
    """End the tree of a process this one started (`end_tree`); its exit code, reaped."""
    tree = tree_of(proc.pid)
    end_processes(tree, grace_s=grace_s, term=term, term_first_only=term_first_only, popen=proc)
    with contextlib.suppress(subprocess.TimeoutExpired):
        return proc.wait(timeout=KILL_WAIT_S)
    return proc.returncode if proc.returncode is not None else -signal.SIGKILL


def suspend_children(pid: int) -> list[psutil.Process]:
    """Stop the child processes of `pid` (a script's DataLoader workers); those stopped.

    A script paused at a step boundary waits idle, but its DataLoader workers do not: they
    go on decoding batches while the other arm's chunk runs. Measured on the zoo's
    data-loading script on 2 cores: the paused candidate's two workers halved the
    baseline's speed during its chunks (357 samples/s interleaved, 726 alone) and handed
    the candidate ready batches, so the A/B said 2.8x where fresh processes, each alone,
    said 0.92x. Stopped (SIGSTOP) they take no CPU; resumed (SIGCONT) before the next
    chunk they go on where they were, the prefetch queue as full as the script left it.
    """
    stopped = []
    for child in descendants(pid):
        with contextlib.suppress(psutil.Error):
            child.suspend()
            stopped.append(child)
    return stopped


def resume(processes: Iterable[psutil.Process]) -> None:
    """Continue processes stopped by `suspend_children` (those still there)."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.resume()


def kill_left(processes: list[psutil.Process]) -> None:
    """SIGKILL those of `processes` still alive (SIGKILL ends a stopped process too).

    A process group does not reach every descendant: torchrun starts each rank in a session
    of its own, so killing the script's group leaves its ranks, stopped by
    `suspend_children` while their arm was paused, behind for good.
    """
    end_processes(processes, term=False)


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send `sig` to a process group; nothing when it is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
