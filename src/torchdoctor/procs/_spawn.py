"""A function run in a spawned child process (multiprocessing), started and ended here.

For a stage that runs its own code in another process and talks to it over a pipe (serve's
model instances): `spawn_process` starts it in the given multiprocessing context (spawn by
default: OpenMP's threads do not survive a fork), `end_process` ends what is left of it, its
tree included (`procs/_tree.py`), after it had `join_s` to exit by itself.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any, Final

from torchdoctor.procs._tree import end_tree

#: Seconds a spawned child asked to exit gets before its tree is ended; a model instance
#: leaves its serving loop at the next call once told.
JOIN_GRACE_S: Final = 10.0
#: Seconds the tree then gets between SIGTERM and SIGKILL.
TERM_GRACE_S: Final = 5.0


def spawn_process(
    target: Callable[..., Any], args: tuple[Any, ...], *, context: Any = None, daemon: bool = True
) -> Any:
    """Start `target(*args)` in a child of `context` (spawn by default); the started process.

    `context` may be any object with multiprocessing's `Process` (tests pass one whose
    processes are threads)."""
    ctx = context or multiprocessing.get_context("spawn")
    proc = ctx.Process(target=target, args=args, daemon=daemon)
    proc.start()
    return proc


def end_process(proc: Any, *, join_s: float = JOIN_GRACE_S, grace_s: float = TERM_GRACE_S) -> None:
    """Wait up to `join_s` for `proc` to exit, then end its tree (`end_tree`); a thread standing
    in for a process (no pid) is only waited for."""
    proc.join(timeout=join_s)
    pid = getattr(proc, "pid", None)
    if not proc.is_alive() or pid is None:
        return
    end_tree(pid, grace_s=grace_s)
    proc.join(timeout=grace_s)
