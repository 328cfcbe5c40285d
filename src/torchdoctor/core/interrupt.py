"""A command asked to stop: Ctrl-C (SIGINT), SIGTERM (`kill`, a scheduler, `timeout`), SIGHUP
(the terminal closed).

Python turns only SIGINT into an exception (KeyboardInterrupt); SIGTERM and SIGHUP end the
process where it stands, running no `finally` block and no `atexit` hook, so the processes it
started (a tuner's arms, a diagnosed script) would go on alone and its run folder would say
"running" for good. Under `interrupt_on_signals` they raise `Interrupted`, a KeyboardInterrupt,
and the command unwinds as after Ctrl-C: each stage ends what it started, the run folder is
marked "interrupted", and the command exits 128 + the signal's number (130 for Ctrl-C, 143 for
SIGTERM, 129 for SIGHUP), the shell's convention for a process ended by a signal, so a
scheduler reads the same code as if the signal had ended it outright.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Final

#: The signals that end a command cleanly (SIGINT already does, as KeyboardInterrupt).
ENDING_SIGNALS: Final = (signal.SIGTERM, signal.SIGHUP)
#: Exit codes are 128 + the signal's number (POSIX shells, `$?` after a process a signal ended).
SIGNAL_EXIT_BASE: Final = 128


class Interrupted(KeyboardInterrupt):
    """The command was asked to stop by signal `signum`; `run_dir`, once a stage has marked
    its run folder "interrupted", names it (the command reports what was done there)."""

    def __init__(self, signum: int = signal.SIGINT, run_dir: Path | None = None) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = int(signum)
        self.run_dir = run_dir

    @property
    def exit_code(self) -> int:
        return SIGNAL_EXIT_BASE + self.signum

    @classmethod
    def of(cls, exc: BaseException, run_dir: Path | None = None) -> Interrupted:
        """`exc` (a KeyboardInterrupt: Ctrl-C, or an `Interrupted`) with `run_dir` attached."""
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        return cls(signum, run_dir if run_dir is not None else getattr(exc, "run_dir", None))


def interruption(exc: BaseException | None) -> Interrupted | None:
    """The interruption `exc` is or wraps (click turns Ctrl-C into `Abort` raised from the
    KeyboardInterrupt), as an `Interrupted`; None when it is none."""
    seen = 0
    while exc is not None and seen < 8:  # a short chain: the cause, its cause
        if isinstance(exc, KeyboardInterrupt):
            return Interrupted.of(exc)
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _raise_interrupted(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def interrupt_on_signals(signals: tuple[signal.Signals, ...] = ENDING_SIGNALS) -> Iterator[None]:
    """Inside, `signals` raise `Interrupted` in the main thread (module docstring); outside, the
    handlers they had. Nothing changes off the main thread, where none can be set."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in signals:
        with contextlib.suppress(ValueError, OSError):  # a platform without this signal
            previous[sig] = signal.signal(sig, _raise_interrupted)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
