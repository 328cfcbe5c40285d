"""Keep the profiler's own C++ log lines off the user's terminal.

Kineto (torch.profiler's tracer) writes lines such as
``USDT:2026-11-22 00:56:53 1342:1342 SyncActivityProfilerHandler.cpp:52] profiler_start``
straight to file descriptor 2 when a trace starts and stops, whatever KINETO_LOG_LEVEL says
(torch 2.13: the USDT lines are unconditional; the level only silences INFO/STAGE). They say
nothing to a user and interleave with torchdoctor's own output. `kineto_quiet` points fd 2 at
a temporary file for the few milliseconds of a start or stop, then writes back everything that
is not such a line (Kineto's ERROR lines and anything else, in order), so nothing else is lost.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, Final, TypeVar

#: Kineto's informational log lines: LEVEL:date time pid:tid File.cpp:line] message.
#: ERROR lines are kept: they can say why a trace is empty.
KINETO_INFO_LINE: Final = re.compile(
    rb"^(USDT|STAGE|INFO|WARNING):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ [\w.]+\.cpp:\d+\]"
)

#: Kineto writes to the process's file descriptor 2, whatever `sys.stderr` has become.
STDERR_FD: Final = 2

T = TypeVar("T")


@contextlib.contextmanager
def kineto_quiet() -> Iterator[None]:
    """Filter Kineto's informational lines out of fd 2 while the block runs."""
    fd = STDERR_FD
    try:
        saved = os.dup(fd)
    except OSError:  # no fd 2 (a daemon): nothing to keep clean
        yield
        return
    sys.stderr.flush()
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), fd)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, fd)
            os.close(saved)
            captured.seek(0)
            kept = [
                line
                for line in captured.read().splitlines(keepends=True)
                if not KINETO_INFO_LINE.match(line)
            ]
            if kept:
                os.write(fd, b"".join(kept))


@contextlib.contextmanager
def quiet_profiling(prof: Any) -> Iterator[Any]:
    """`with prof:` for a torch.profiler.profile, its start and stop run `quietly`."""
    quietly(prof.__enter__)
    try:
        yield prof
    finally:
        quietly(lambda: prof.__exit__(None, None, None))


def quietly(call: Callable[[], T]) -> T:
    """Run `call` (a profiler's start, stop or step) with Kineto's lines filtered out."""
    with kineto_quiet():
        return call()
