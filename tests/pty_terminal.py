"""A command run in a real pseudo-terminal, its output read as it comes, with read times.

What a person at a terminal sees: the child's stdout and stderr are the slave side of a
pseudo-terminal (`pty.openpty`) of a fixed size, so rich decides by the same `isatty` check as
at a real terminal; the test reads the master side incrementally and keeps each chunk with the
time it arrived and its offset in the whole stream (the order of what was drawn is the
stream's order; the times say when the reader saw it).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from dataclasses import dataclass, field

#: Escape sequences (colours, cursor moves, line erases) of rich's output on a terminal.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: The environment variables that make rich ignore `isatty` (forced terminal or forced plain).
_OVERRIDES = ("TTY_COMPATIBLE", "TTY_INTERACTIVE", "FORCE_COLOR", "NO_COLOR", "COLUMNS", "LINES")


@dataclass
class Chunk:
    at_s: float  # seconds from the start when the reader got it
    offset: int  # where it starts in the whole (escape-stripped) text
    text: str


@dataclass
class TerminalRun:
    exit_code: int | None
    chunks: list[Chunk] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(c.text for c in self.chunks)

    def seen_at(self, offset: int) -> float:
        """When the reader got the character at `offset`."""
        return next(c.at_s for c in reversed(self.chunks) if c.offset <= offset)


def run_in_terminal(
    argv: list[str],
    *,
    timeout_s: float,
    columns: int = 100,
    rows: int = 40,
    env: dict[str, str] | None = None,
) -> TerminalRun:
    """Run `argv` with a `columns` x `rows` pseudo-terminal as its stdin, stdout and stderr.

    The child leads its own process group; past `timeout_s` the group is killed and the run
    returns with `exit_code` None (the caller's assertion says so)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    child_env = {k: v for k, v in (env or dict(os.environ)).items() if k not in _OVERRIDES}
    child_env["TERM"] = "xterm-256color"
    start = time.monotonic()
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=child_env, start_new_session=True
    )
    os.close(slave)
    run = TerminalRun(exit_code=None)
    raw = b""
    offset = 0
    try:
        while time.monotonic() - start < timeout_s:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break  # exited, and whatever it left open writes nothing more
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the slave side has closed it
                break
            if not data:
                break
            raw += data
            # Decode whole characters only: a chunk may end inside a multi-byte one.
            text = raw.decode("utf-8", errors="ignore")
            text = text[: _complete_until(text)]
            raw = raw[len(text.encode("utf-8")) :]
            clean = _ANSI.sub("", text)
            run.chunks.append(Chunk(time.monotonic() - start, offset, clean))
            offset += len(clean)
        with contextlib.suppress(subprocess.TimeoutExpired):
            run.exit_code = proc.wait(timeout=max(0.1, timeout_s - (time.monotonic() - start)))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
    return run


def _complete_until(text: str) -> int:
    """Where `text` stops being whole: before an escape sequence the chunk cut in two."""
    last = text.rfind("\x1b")
    # Longer than any CSI sequence rich writes: another kind of escape, kept as it is.
    if last == -1 or _ANSI.match(text, last) or len(text) - last > 32:
        return len(text)
    return last
